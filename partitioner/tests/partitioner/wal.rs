//! Databases in WAL mode: committed transactions still in the `-wal` log are read, uncommitted
//! tails, torn frames and logs SQLite ignores are ignored, and nothing is written.
//!
//! Each test keeps a writer connection open with `wal_autocheckpoint=0` (so the log is never
//! checkpointed) and copies the database and its log aside, as a reader on another machine
//! would find them. SQLite is the oracle: either the still-open writer (its committed view) or
//! a connection on a second, private copy of the same two files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use partitioner::wal::{checksum, wal_path, ChecksumOrder, WalHeader, FRAME_HEADER_SIZE};
use partitioner::{PageLocation, TablePlan};
use rusqlite::Connection;
use tempfile::{tempdir, TempDir};

use crate::{fill, insert_rows};

/// A WAL-mode database `dir/name` of `page_size`-byte pages whose table `t` has `rows` rows
/// checkpointed into the file, with the writer left open and automatic checkpoints off.
fn wal_db(dir: &Path, name: &str, page_size: u32, rows: u64) -> (PathBuf, Connection) {
    let path = dir.join(name);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA page_size = {page_size}; PRAGMA journal_mode = WAL; \
         PRAGMA wal_autocheckpoint = 0;"
    ))
    .unwrap();
    fill(&conn, "t", rows, 80, Some((211, 3 * page_size as usize)));
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    (path, conn)
}

/// Copies `db` and its log (if any) into a new directory inside `dir`.
fn copy_aside(db: &Path, dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::create_dir_all(&to).unwrap();
    let copy = to.join(db.file_name().unwrap());
    std::fs::copy(db, &copy).unwrap();
    if wal_path(db).exists() {
        std::fs::copy(wal_path(db), wal_path(&copy)).unwrap();
    }
    copy
}

/// What SQLite says about table `t`.
#[derive(Debug, PartialEq, Eq)]
struct Oracle {
    leaves: Vec<u32>,
    interior: Vec<u32>,
    overflow: u64,
    page_count: u32,
    rows: u64,
}

impl Oracle {
    /// SQLite's view through `conn`.
    fn of(conn: &Connection, table: &str) -> Self {
        let mut stmt = conn
            .prepare("SELECT pageno, pagetype FROM dbstat WHERE name = ?1 ORDER BY pageno")
            .unwrap();
        let pages: Vec<(u32, String)> = stmt
            .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let of = |kind: &str| -> Vec<u32> {
            pages.iter().filter(|p| p.1 == kind).map(|p| p.0).collect()
        };
        let one = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        Self {
            leaves: of("leaf"),
            interior: of("internal"),
            overflow: of("overflow").len() as u64,
            page_count: one("PRAGMA page_count") as u32,
            rows: one(&format!("SELECT count(*) FROM \"{table}\"")) as u64,
        }
    }

    /// SQLite's view of a private copy of `db` and its log (SQLite may checkpoint and delete
    /// the log of the copy it opens, so it never sees the files under test).
    fn of_copy(db: &Path, table: &str) -> Self {
        let dir = tempdir().unwrap();
        let copy = copy_aside(db, dir.path(), "oracle");
        Self::of(&Connection::open(&copy).unwrap(), table)
    }
}

/// Plans `table` in `db` and checks pages, page count and rows against `oracle`.
fn assert_plan_matches(db: &Path, table: &str, oracle: &Oracle) -> TablePlan {
    let plan = TablePlan::open(db, table).unwrap();
    assert_eq!(plan.leaves, oracle.leaves, "leaf pages of {table}");
    assert_eq!(plan.interior_pages, oracle.interior, "interior pages");
    assert_eq!(plan.header.page_count, oracle.page_count, "page count");
    let census = plan.census().unwrap();
    assert_eq!(census.rows, oracle.rows, "rows of {table}");
    assert_eq!(census.overflow_pages, oracle.overflow, "overflow pages");
    let pages: u64 = plan.extents.iter().map(|e| u64::from(e.pages)).sum();
    assert_eq!(pages, plan.leaves.len() as u64);
    plan
}

/// Pages of `plan`'s database that exist only in the log (past the end of the file).
fn pages_only_in_the_log(plan: &TablePlan) -> Vec<u32> {
    let in_file = (plan.header.file_size / u64::from(plan.header.page_size)) as u32;
    let wal = plan.wal.as_ref().expect("a log with committed frames");
    wal.frames
        .iter()
        .map(|f| f.page)
        .filter(|&p| p > in_file)
        .collect()
}

#[test]
fn committed_updates_deletes_and_inserts_are_read_from_the_log() {
    let dir = tempdir().unwrap();
    for page_size in [512, 1024, 65536] {
        let (db, conn) = wal_db(dir.path(), &format!("w{page_size}.db"), page_size, 3000);
        conn.execute_batch(
            "UPDATE t SET b = b || 'grown by an update' WHERE a % 50 = 0; \
             DELETE FROM t WHERE a BETWEEN 500 AND 900;",
        )
        .unwrap();
        // Enough new rows to grow the table past the end of the file.
        insert_rows(&conn, "t", 3000..6000, 120, Some((97, 2000)));
        let oracle = Oracle::of(&conn, "t");
        let copy = copy_aside(&db, dir.path(), &format!("copy{page_size}"));
        let plan = assert_plan_matches(&copy, "t", &oracle);
        let wal = plan.wal.as_ref().unwrap();
        assert_eq!(wal.db_pages, oracle.page_count);
        assert_eq!(wal.page_size, page_size);
        assert!(
            !pages_only_in_the_log(&plan).is_empty(),
            "{page_size}: the table did not grow past the file"
        );
        // (With 64 KiB pages the update touches every one of the few leaves.)
        assert!(
            page_size == 65536 || plan.leaves.iter().any(|&p| wal.frame_offset(p).is_none()),
            "{page_size}: some leaves should still come from the file"
        );
        // Locations: log pages at frame offsets, the others at their place in the file.
        for &leaf in &plan.leaves {
            match plan.location(leaf) {
                PageLocation::Wal(at) => assert_eq!(Some(at), wal.frame_offset(leaf)),
                PageLocation::Main(at) => {
                    assert_eq!(at, u64::from(leaf - 1) * u64::from(page_size))
                }
            }
        }
        // Another SQLite on another copy agrees.
        assert_eq!(Oracle::of_copy(&copy, "t"), oracle);
        drop(conn);
    }
}

#[test]
fn a_schema_change_in_the_log_reads_page_one_from_the_log() {
    let dir = tempdir().unwrap();
    let (db, conn) = wal_db(dir.path(), "schema.db", 1024, 1500);
    fill(&conn, "u", 800, 200, None);
    conn.execute_batch("ALTER TABLE t ADD COLUMN d INTEGER DEFAULT 5; DROP TABLE IF EXISTS gone;")
        .unwrap();
    let (t, u) = (Oracle::of(&conn, "t"), Oracle::of(&conn, "u"));
    let freelist: u32 = conn
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    let copy = copy_aside(&db, dir.path(), "copy");
    // Table u exists only in the log's copy of the schema.
    let plan = assert_plan_matches(&copy, "u", &u);
    assert_plan_matches(&copy, "t", &t);
    let wal = plan.wal.as_ref().unwrap();
    assert!(wal.frame_offset(1).is_some(), "page 1 should be in the log");
    assert!(matches!(plan.location(1), PageLocation::Wal(_)));
    // The header is the log's page 1: its in-header page count covers pages past the end of
    // the file (the file's own page 1 counts only the pages it holds).
    let in_file = (plan.header.file_size / 1024) as u32;
    assert!(plan.header.page_count_from_header);
    assert!(plan.header.page_count > in_file, "{:?}", plan.header);
    assert_eq!(plan.header.freelist_pages, freelist);
    let t_plan = TablePlan::open(&copy, "t").unwrap();
    assert_eq!(t_plan.column("d").unwrap(), 3);
    assert_eq!(
        format!("{:?}", t_plan.column_default("d").unwrap()),
        "Integer(5)"
    );
    drop(conn);
}

#[test]
fn a_commit_that_shrinks_the_database_limits_the_page_count() {
    let dir = tempdir().unwrap();
    let path = dir.path().join("shrink.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 1024; PRAGMA auto_vacuum = FULL; PRAGMA journal_mode = WAL; \
         PRAGMA wal_autocheckpoint = 0;",
    )
    .unwrap();
    fill(&conn, "t", 4000, 100, None);
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); DELETE FROM t WHERE a >= 800;")
        .unwrap();
    let oracle = Oracle::of(&conn, "t");
    let copy = copy_aside(&path, dir.path(), "copy");
    let plan = assert_plan_matches(&copy, "t", &oracle);
    let in_file = (plan.header.file_size / 1024) as u32;
    assert!(
        oracle.page_count < in_file,
        "the database should have shrunk: {} pages, file {in_file}",
        oracle.page_count
    );
    assert!(plan
        .wal
        .as_ref()
        .unwrap()
        .frames
        .iter()
        .all(|f| f.page <= oracle.page_count));
    drop(conn);
}

#[test]
fn an_uncommitted_tail_is_ignored() {
    let dir = tempdir().unwrap();
    let (db, conn) = wal_db(dir.path(), "tail.db", 1024, 2000);
    conn.execute_batch("DELETE FROM t WHERE a < 300;").unwrap();
    let committed = Oracle::of(&conn, "t");
    // A cache too small for the transaction makes SQLite spill its pages into the log as
    // frames without a commit marker.
    conn.execute_batch(
        "PRAGMA cache_size = 2; BEGIN; UPDATE t SET b = b || 'uncommitted text', c = -c; \
         INSERT INTO t SELECT a + 10000, b, c FROM t;",
    )
    .unwrap();
    let copy = copy_aside(&db, dir.path(), "copy");
    conn.execute_batch("ROLLBACK").unwrap();
    let plan = assert_plan_matches(&copy, "t", &committed);
    let wal = plan.wal.as_ref().unwrap();
    assert!(wal.uncommitted_frames > 0, "no frames were spilled");
    assert_eq!(Oracle::of_copy(&copy, "t"), committed);
}

/// A log's frames as found in its bytes (whole frames, valid or not).
struct Frame {
    page: u32,
    db_pages: u32,
    salts: [u32; 2],
    data: Vec<u8>,
}

fn parse_log(bytes: &[u8]) -> (WalHeader, Vec<Frame>) {
    let header = WalHeader::parse(bytes).unwrap();
    let size = FRAME_HEADER_SIZE + header.page_size as usize;
    let be = |b: &[u8], at: usize| u32::from_be_bytes(b[at..at + 4].try_into().unwrap());
    let frames = bytes[32..]
        .chunks_exact(size)
        .map(|f| Frame {
            page: be(f, 0),
            db_pages: be(f, 4),
            salts: [be(f, 8), be(f, 12)],
            data: f[FRAME_HEADER_SIZE..].to_vec(),
        })
        .collect();
    (header, frames)
}

/// Writes a log with `header` and `frames`, computing every checksum (frames whose salts
/// differ from the header's keep them, which makes them invalid).
fn write_log(header: &WalHeader, frames: &[Frame]) -> Vec<u8> {
    let mut out = header.to_bytes().to_vec();
    let mut running = WalHeader::parse(&out).unwrap().checksum;
    for f in frames {
        let mut head = [0u8; FRAME_HEADER_SIZE];
        head[0..4].copy_from_slice(&f.page.to_be_bytes());
        head[4..8].copy_from_slice(&f.db_pages.to_be_bytes());
        head[8..12].copy_from_slice(&f.salts[0].to_be_bytes());
        head[12..16].copy_from_slice(&f.salts[1].to_be_bytes());
        running = checksum(header.order, &head[..8], running);
        running = checksum(header.order, &f.data, running);
        head[16..20].copy_from_slice(&running[0].to_be_bytes());
        head[20..24].copy_from_slice(&running[1].to_be_bytes());
        out.extend_from_slice(&head);
        out.extend_from_slice(&f.data);
    }
    out
}

/// A database whose log holds three committed transactions, copied aside; the writer is
/// closed without checkpointing the copy.
fn three_transactions() -> (TempDir, PathBuf) {
    let dir = tempdir().unwrap();
    let (db, conn) = wal_db(dir.path(), "f.db", 1024, 1000);
    insert_rows(&conn, "t", 1000..1500, 100, None);
    conn.execute_batch("DELETE FROM t WHERE a % 5 = 0").unwrap();
    insert_rows(&conn, "t", 2000..2600, 100, None);
    let copy = copy_aside(&db, dir.path(), "copy");
    drop(conn);
    (dir, copy)
}

#[test]
fn a_torn_last_frame_is_ignored() {
    let (_dir, db) = three_transactions();
    let full = TablePlan::open(&db, "t").unwrap();
    let full_rows = full.census().unwrap().rows;
    let log = std::fs::read(wal_path(&db)).unwrap();
    // Cut the last frame (the last transaction's commit frame) in the middle.
    std::fs::write(wal_path(&db), &log[..log.len() - 300]).unwrap();
    let oracle = Oracle::of_copy(&db, "t");
    assert!(oracle.rows < full_rows, "the last commit was lost");
    let plan = assert_plan_matches(&db, "t", &oracle);
    let wal = plan.wal.as_ref().unwrap();
    assert!(
        wal.fingerprint.last_commit_frame
            < full.wal.as_ref().unwrap().fingerprint.last_commit_frame
    );
}

#[test]
fn forged_frames_count_only_with_valid_salts_and_checksums() {
    let (_dir, db) = three_transactions();
    let (header, mut frames) = parse_log(&std::fs::read(wal_path(&db)).unwrap());
    let before = TablePlan::open(&db, "t").unwrap();
    let last = before.wal.as_ref().unwrap().fingerprint.last_commit_frame;
    assert_eq!(last as usize, frames.len());
    // A new commit frame re-writing the latest page 1 (same content) with a correct checksum:
    // SQLite takes it, and so must we.
    let page1 = frames
        .iter()
        .rev()
        .find(|f| f.page == 1)
        .unwrap()
        .data
        .clone();
    let db_pages = frames.last().unwrap().db_pages;
    frames.push(Frame {
        page: 1,
        db_pages,
        salts: header.salts,
        data: page1,
    });
    std::fs::write(wal_path(&db), write_log(&header, &frames)).unwrap();
    let oracle = Oracle::of_copy(&db, "t");
    let plan = assert_plan_matches(&db, "t", &oracle);
    assert_eq!(
        plan.wal.as_ref().unwrap().fingerprint.last_commit_frame,
        last + 1
    );

    // The same frame with a flipped data byte (checksum mismatch) or stale salts: ignored.
    let good = std::fs::read(wal_path(&db)).unwrap();
    let mut bad_sum = good.clone();
    let at = bad_sum.len() - 10;
    bad_sum[at] ^= 0x40;
    let stale = {
        let mut f = frames.pop().unwrap();
        f.salts[1] ^= 1;
        frames.push(f);
        write_log(&header, &frames)
    };
    for (what, bytes) in [("checksum", bad_sum), ("salts", stale)] {
        std::fs::write(wal_path(&db), &bytes).unwrap();
        let oracle = Oracle::of_copy(&db, "t");
        let plan = assert_plan_matches(&db, "t", &oracle);
        let fp = plan.wal.as_ref().unwrap().fingerprint;
        assert_eq!(fp.last_commit_frame, last, "{what}");
    }
}

#[test]
fn big_endian_checksums_are_read() {
    let (_dir, db) = three_transactions();
    let (mut header, frames) = parse_log(&std::fs::read(wal_path(&db)).unwrap());
    assert_eq!(
        header.order,
        ChecksumOrder::LittleEndian,
        "written on this machine"
    );
    let little = TablePlan::open(&db, "t").unwrap();
    header.order = ChecksumOrder::BigEndian;
    std::fs::write(wal_path(&db), write_log(&header, &frames)).unwrap();
    let oracle = Oracle::of_copy(&db, "t");
    let plan = assert_plan_matches(&db, "t", &oracle);
    assert_eq!(plan.leaves, little.leaves);
    assert_eq!(
        plan.wal.as_ref().unwrap().frames,
        little.wal.as_ref().unwrap().frames
    );
}

#[test]
fn a_log_with_a_bad_header_is_ignored_like_sqlite_does() {
    let (_dir, db) = three_transactions();
    let good = std::fs::read(wal_path(&db)).unwrap();
    let main_only = {
        let dir = tempdir().unwrap();
        let copy = dir.path().join("m.db");
        std::fs::copy(&db, &copy).unwrap();
        Oracle::of(&Connection::open(&copy).unwrap(), "t")
    };
    let damage: [(&str, usize, u8); 4] = [
        ("checksum", 28, 0x01),
        ("salt", 17, 0x80),
        ("magic", 3, 0x10),
        ("page size", 9, 0x08),
    ];
    for (what, at, bits) in damage {
        let mut bytes = good.clone();
        bytes[at] ^= bits;
        std::fs::write(wal_path(&db), &bytes).unwrap();
        let oracle = Oracle::of_copy(&db, "t");
        assert_eq!(oracle, main_only, "{what}: SQLite should ignore the log");
        let plan = assert_plan_matches(&db, "t", &oracle);
        assert!(plan.wal.is_none(), "{what}");
        let reason = plan.wal_ignored.as_deref().unwrap_or_default();
        assert!(!reason.is_empty(), "{what}: no reason given");
    }
}

#[test]
fn an_unknown_log_version_is_refused_like_sqlite_does() {
    let (_dir, db) = three_transactions();
    let mut bytes = std::fs::read(wal_path(&db)).unwrap();
    bytes[4..8].copy_from_slice(&3_007_001u32.to_be_bytes());
    let order = ChecksumOrder::LittleEndian;
    let sum = checksum(order, &bytes[..24], [0, 0]);
    bytes[24..28].copy_from_slice(&sum[0].to_be_bytes());
    bytes[28..32].copy_from_slice(&sum[1].to_be_bytes());
    std::fs::write(wal_path(&db), &bytes).unwrap();
    let dir = tempdir().unwrap();
    let copy = copy_aside(&db, dir.path(), "oracle");
    let sqlite = Connection::open(&copy)
        .and_then(|c| c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)));
    assert!(sqlite.is_err(), "SQLite opened it: {sqlite:?}");
    let err = TablePlan::open(&db, "t").unwrap_err().to_string();
    assert!(err.starts_with(&db.display().to_string()), "{err}");
    assert!(err.contains("unknown WAL format version 3007001"), "{err}");
}

#[test]
fn a_log_that_does_not_fit_the_database_is_an_error() {
    let (_dir, db) = three_transactions();
    let (header, mut frames) = parse_log(&std::fs::read(wal_path(&db)).unwrap());
    // A commit claiming pages that exist nowhere.
    let last = frames.last_mut().unwrap();
    last.db_pages += 50;
    std::fs::write(wal_path(&db), write_log(&header, &frames)).unwrap();
    let err = TablePlan::open(&db, "t").unwrap_err().to_string();
    assert!(err.starts_with(&db.display().to_string()), "{err}");
    assert!(err.contains("neither in the database file"), "{err}");

    // A log of another page size (without page 1) beside the database: SQLite finds the pair
    // corrupt, and we refuse it.
    let other = tempdir().unwrap();
    let (odb, conn) = wal_db(other.path(), "o.db", 2048, 300);
    conn.execute_batch("UPDATE t SET c = c + 1").unwrap();
    let (_, frames) = parse_log(&std::fs::read(wal_path(&odb)).unwrap());
    assert!(frames.iter().all(|f| f.page != 1));
    std::fs::copy(wal_path(&odb), wal_path(&db)).unwrap();
    let dir = tempdir().unwrap();
    let copy = copy_aside(&db, dir.path(), "oracle");
    let sqlite = Connection::open(&copy)
        .and_then(|c| c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)));
    assert!(sqlite.is_err(), "SQLite read it: {sqlite:?}");
    let err = TablePlan::open(&db, "t").unwrap_err().to_string();
    assert!(err.starts_with(&db.display().to_string()), "{err}");
    assert!(
        err.contains("page size 2048 differs from the database's 1024"),
        "{err}"
    );
    drop(conn);
}

/// The bytes and modification time of `path`.
fn snapshot(path: &Path) -> (Vec<u8>, std::time::SystemTime) {
    let bytes = std::fs::read(path).unwrap();
    (bytes, std::fs::metadata(path).unwrap().modified().unwrap())
}

#[test]
fn reading_a_log_writes_nothing() {
    let (dir, db) = three_transactions();
    let names = |d: &Path| -> Vec<String> {
        let mut n: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    let folder = db.parent().unwrap();
    let listed = names(folder);
    assert_eq!(listed, ["f.db", "f.db-wal"]);
    let (db_before, wal_before) = (snapshot(&db), snapshot(&wal_path(&db)));
    std::thread::sleep(Duration::from_millis(20));
    let plan = TablePlan::open(&db, "t").unwrap();
    plan.census().unwrap();
    plan.check_unchanged().unwrap();
    assert_eq!(snapshot(&db), db_before);
    assert_eq!(snapshot(&wal_path(&db)), wal_before);
    assert_eq!(names(folder), listed, "no -shm or other file was created");
    drop(dir);
}
