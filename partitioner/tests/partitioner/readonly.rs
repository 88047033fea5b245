//! The file is only ever read: never modified; a hot rollback journal is refused.

use std::path::Path;
use std::time::Duration;

use partitioner::pager::{check_no_hot_journal, JOURNAL_MAGIC};
use partitioner::sidecar::{journal_path, wal_path};
use partitioner::{Error, PageFile, TablePlan};
use rusqlite::Connection;
use tempfile::tempdir;

use crate::{create_db, fill, Layout};

#[test]
fn planning_and_census_leave_the_file_untouched() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "ro.db", Layout::pages(4096), |c| {
        fill(c, "t", 3000, 200, Some((100, 9000)));
    });
    let before = std::fs::read(&path).unwrap();
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    // Let a write, if one happened, show up as a different timestamp.
    std::thread::sleep(Duration::from_millis(20));
    let plan = TablePlan::open(&path, "t").unwrap();
    plan.census().unwrap();
    let _ = plan.split(&[1, 1]);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["ro.db"], "a side file appeared");
}

#[test]
fn a_live_wal_is_read_and_an_empty_one_is_fine() {
    let dir = tempdir().unwrap();
    let path = dir.path().join("wal.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;")
        .unwrap();
    fill(&conn, "t", 100, 50, None);
    // The connection is still open, so the committed rows live only in the log (see wal.rs
    // for the WAL reader's own tests).
    assert!(std::fs::metadata(wal_path(&path)).unwrap().len() > 0);
    let live = TablePlan::open(&path, "t").unwrap();
    assert!(live.wal.is_some());
    assert_eq!(live.census().unwrap().rows, 100);
    let live_leaves = live.leaves.clone();
    // The plan holds a reader's SHARED lock, which keeps the closing connection from
    // checkpointing and removing the log (as an open sqlite3 reader would): release it first.
    drop(live);

    conn.close().unwrap();
    // A clean close checkpoints and removes the log.
    assert!(!wal_path(&path).exists());
    let plan = TablePlan::open(&path, "t").unwrap();
    assert_eq!(plan.header.write_version, 2, "a WAL-mode file");
    assert_eq!(plan.leaves, live_leaves);
    std::fs::write(wal_path(&path), b"").unwrap();
    let empty = TablePlan::open(&path, "t").unwrap();
    assert_eq!(empty.leaves, plan.leaves);
    assert!(empty.wal.is_none() && empty.wal_ignored.is_none());
}

/// The bytes and modification time of `path`, to show it was not touched.
fn snapshot(path: &Path) -> (Vec<u8>, std::time::SystemTime) {
    let bytes = std::fs::read(path).unwrap();
    (bytes, std::fs::metadata(path).unwrap().modified().unwrap())
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_hot_journal_is_refused_and_nothing_is_touched() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "hot.db", Layout::pages(4096), |c| {
        fill(c, "t", 500, 50, None);
    });
    let journal = journal_path(&path);
    // A journal header: the magic, then record count, nonce, page count, sector and page size.
    let mut header = JOURNAL_MAGIC.to_vec();
    header.extend_from_slice(&[0xff; 4]);
    header.resize(512, 0);
    std::fs::write(&journal, &header).unwrap();
    let (db_before, journal_before) = (snapshot(&path), snapshot(&journal));
    std::thread::sleep(Duration::from_millis(20));

    let err = TablePlan::open(&path, "t").unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
    let text = err.to_string();
    let db = path.display().to_string();
    assert!(
        text.starts_with(&format!("{db}: hot rollback journal {db}-journal")),
        "{text}"
    );
    assert!(
        text.contains("a writer may be active")
            && text.contains("if none is")
            && text.contains("sqlite3 rolls it back"),
        "{text}"
    );
    assert!(PageFile::open(&path).is_err());
    assert!(check_no_hot_journal(&path).is_err());

    assert_eq!(snapshot(&path), db_before);
    assert_eq!(snapshot(&journal), journal_before);
    assert_eq!(dir_names(dir.path()), ["hot.db", "hot.db-journal"]);

    // Something other than a file in the journal's place is refused too (a FIFO would block).
    std::fs::remove_file(&journal).unwrap();
    std::fs::create_dir(&journal).unwrap();
    let err = TablePlan::open(&path, "t").unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
}

#[test]
fn empty_zeroed_and_short_journals_are_fine() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "cold.db", Layout::pages(4096), |c| {
        fill(c, "t", 500, 50, None);
    });
    let expected = TablePlan::open(&path, "t").unwrap().leaves;
    let journal = journal_path(&path);
    let mut zeroed = vec![0u8; 28];
    zeroed.extend_from_slice(b"stale pages of a committed transaction");
    for (what, bytes) in [
        ("empty (journal_mode=TRUNCATE)", Vec::new()),
        ("zeroed header (journal_mode=PERSIST)", zeroed),
        ("shorter than the magic", JOURNAL_MAGIC[..5].to_vec()),
        ("not the magic", b"\x01not a journal header".to_vec()),
    ] {
        std::fs::write(&journal, &bytes).unwrap();
        let before = snapshot(&journal);
        let plan = TablePlan::open(&path, "t").unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(plan.leaves, expected, "{what}");
        assert_eq!(snapshot(&journal), before, "{what}");
    }
}

#[test]
fn a_write_interrupted_mid_transaction_is_refused_until_sqlite_rolls_it_back() {
    let dir = tempdir().unwrap();
    let live = dir.path().join("live.db");
    let conn = Connection::open(&live).unwrap();
    fill(&conn, "t", 3000, 200, None);
    let before = TablePlan::open(&live, "t").unwrap().leaves;
    let original = std::fs::read(&live).unwrap();
    // A cache too small for the transaction makes SQLite sync the journal (writing its magic)
    // and spill changed pages into the database file before COMMIT.
    conn.execute_batch("PRAGMA cache_size = 2; BEGIN; UPDATE t SET b = b || 'more text', c = -c;")
        .unwrap();
    // Copy the files as a crash would leave them.
    let crashed = dir.path().join("crashed");
    std::fs::create_dir(&crashed).unwrap();
    let copy = crashed.join("live.db");
    std::fs::copy(&live, &copy).unwrap();
    std::fs::copy(journal_path(&live), journal_path(&copy)).unwrap();
    conn.execute_batch("ROLLBACK").unwrap();
    conn.close().unwrap();
    let head = std::fs::read(journal_path(&copy)).unwrap();
    assert_eq!(
        head.get(..8),
        Some(&JOURNAL_MAGIC[..]),
        "the journal is hot"
    );
    assert_ne!(
        std::fs::read(&copy).unwrap(),
        original,
        "pages were spilled"
    );

    let err = TablePlan::open(&copy, "t").unwrap_err().to_string();
    assert!(err.contains("hot rollback journal"), "{err}");

    // SQLite rolls the journal back on first read; then the table is as before the UPDATE.
    let count: i64 = Connection::open(&copy)
        .unwrap()
        .query_row("SELECT count(*) FROM t WHERE c < 0", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 0);
    assert_eq!(std::fs::read(&copy).unwrap(), original);
    let after = TablePlan::open(&copy, "t").unwrap();
    assert_eq!(after.leaves, before);
}

#[test]
fn the_page_cache_probe_reads_nothing_into_the_caller_and_knows_a_page_just_read() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "probe.db", Layout::pages(4096), |c| {
        fill(c, "t", 500, 100, None);
    });
    let before = std::fs::read(&path).unwrap();
    let file = PageFile::open(&path).unwrap();
    let mut buf = file.page_buffer();
    file.read_page(2, &mut buf).unwrap();
    // A page read a moment ago is in the page cache (on every file system that can tell).
    assert_ne!(file.is_cached(2), Some(false));
    // No page 0, none past the end: nothing to ask.
    assert_eq!(file.is_cached(0), None);
    assert_eq!(file.is_cached(file.header().page_count + 1), None);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}
