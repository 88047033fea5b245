//! WAL-mode databases: committed transactions still in the `-wal` file (the normal state of a
//! live SQLite or Turso database) give the answer SQLite gives; uncommitted and torn tails are
//! ignored; nothing is written.

use std::path::{Path, PathBuf};

use bench::oracle::{self, OracleAnswer};
use engine::q6::Q6Params;
use rusqlite::Connection;

use crate::scan::ScanTester;
use crate::{layouts, scratch_dir};

/// Copies `db` and its `-wal` (if any) into `dir`, returning the copy's path.
fn snapshot(db: &Path, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let copy = dir.join(db.file_name().unwrap());
    std::fs::copy(db, &copy).unwrap();
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    if wal.exists() {
        std::fs::copy(&wal, format!("{}-wal", copy.display())).unwrap();
    }
    copy
}

/// SQLite's answer for a snapshot: opened (read-write) on a second copy, so SQLite replays the
/// log there and the snapshot itself is never touched.
fn sqlite_answer(snap: &Path, table: &str, params: &Q6Params) -> OracleAnswer {
    let dir = snap.parent().unwrap().join("oracle");
    let _ = std::fs::remove_dir_all(&dir);
    let copy = snapshot(snap, &dir);
    let conn = Connection::open(&copy).unwrap();
    oracle::q6_on(&conn, table, params).unwrap()
}

/// A live WAL database: the plain layout switched to WAL mode, with committed updates,
/// deletes and inserts (growing the table onto pages that exist only in the log) left in the
/// log. Returns the open connection (closing it would checkpoint) and the database path.
pub(crate) fn live_wal_db(name: &str) -> (Connection, PathBuf) {
    let dir = scratch_dir(name);
    let db = dir.join("live.db");
    std::fs::copy(&layouts()[1].path, &db).unwrap();
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
         UPDATE LINEITEM SET L_DISCOUNT = 0.06 WHERE rowid % 5 = 0;
         DELETE FROM LINEITEM WHERE rowid % 11 = 0;
         INSERT INTO LINEITEM SELECT * FROM LINEITEM WHERE rowid % 3 = 0;
         UPDATE LINEITEM SET L_QUANTITY = 1 WHERE rowid % 13 = 0;",
    )
    .unwrap();
    (conn, db)
}

fn assert_untouched(snap: &Path, before: &[(PathBuf, Vec<u8>)]) {
    for (p, bytes) in before {
        assert_eq!(&std::fs::read(p).unwrap(), bytes, "{} changed", p.display());
    }
    assert!(
        !PathBuf::from(format!("{}-shm", snap.display())).exists(),
        "no -shm is created"
    );
}

fn contents(snap: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let wal = PathBuf::from(format!("{}-wal", snap.display()));
    [snap.to_path_buf(), wal]
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect()
}

#[test]
fn committed_transactions_in_the_log_are_read() {
    let (conn, db) = live_wal_db("wal-committed");
    let snap = snapshot(&db, &db.parent().unwrap().join("snap"));
    drop(conn);
    let wal_len = std::fs::metadata(format!("{}-wal", snap.display()))
        .unwrap()
        .len();
    assert!(wal_len > 32, "the log holds frames");
    let before = contents(&snap);
    let plan = partitioner::TablePlan::open(&snap, "LINEITEM").unwrap();
    assert!(plan.wal.as_ref().is_some_and(|w| !w.frames.is_empty()));
    let main_pages = std::fs::metadata(&snap).unwrap().len() / 4096;
    assert!(
        plan.leaves.iter().any(|&p| u64::from(p) > main_pages),
        "some leaves exist only in the log"
    );
    let runs = ScanTester::default()
        .check_with(&snap, "LINEITEM", |p| sqlite_answer(&snap, "LINEITEM", p));
    assert!(runs > 0);
    let r = engine::q6::run_q6(
        &plan,
        &engine::spread(2),
        &Q6Params::default(),
        &engine::ScanSettings::defaults(4096),
    )
    .unwrap();
    assert!(r.wal_pages_read > 0);
    // The answer differs from the main file's alone: the log really mattered.
    let stale = oracle::q6(&snap, "LINEITEM", &Q6Params::default()).unwrap();
    assert_ne!(r.revenue, stale.revenue());
    assert_untouched(&snap, &before);
}

#[test]
fn a_torn_last_frame_drops_only_the_last_transaction() {
    let (conn, db) = live_wal_db("wal-torn");
    conn.execute_batch("UPDATE LINEITEM SET L_DISCOUNT = 0.05 WHERE rowid % 2 = 0;")
        .unwrap();
    let snap = snapshot(&db, &db.parent().unwrap().join("snap"));
    drop(conn);
    let wal = PathBuf::from(format!("{}-wal", snap.display()));
    let len = std::fs::metadata(&wal).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&wal).unwrap();
    f.set_len(len - 100).unwrap();
    drop(f);
    let before = contents(&snap);
    let tester = ScanTester::default();
    tester.check_with(&snap, "LINEITEM", |p| sqlite_answer(&snap, "LINEITEM", p));
    assert_untouched(&snap, &before);
}

#[test]
fn an_uncommitted_tail_is_ignored() {
    let (conn, db) = live_wal_db("wal-uncommitted");
    // A transaction in progress whose pages spill into the log before it commits.
    conn.execute_batch(
        "PRAGMA cache_size=2; BEGIN;
         UPDATE LINEITEM SET L_DISCOUNT = 0.07, L_QUANTITY = 2;",
    )
    .unwrap();
    let snap = snapshot(&db, &db.parent().unwrap().join("snap"));
    conn.execute_batch("ROLLBACK;").unwrap();
    drop(conn);
    let plan = partitioner::TablePlan::open(&snap, "LINEITEM").unwrap();
    assert!(
        plan.wal.as_ref().is_some_and(|w| w.uncommitted_frames > 0),
        "the snapshot holds uncommitted frames"
    );
    ScanTester::default().check_with(&snap, "LINEITEM", |p| sqlite_answer(&snap, "LINEITEM", p));
}
