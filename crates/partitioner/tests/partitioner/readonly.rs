//! The file is only ever read: never modified, and a live write-ahead log is refused.

use std::time::Duration;

use partitioner::pager::wal_path;
use partitioner::{Error, TablePlan};
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
fn a_non_empty_wal_is_refused_and_an_empty_one_is_fine() {
    let dir = tempdir().unwrap();
    let path = dir.path().join("wal.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;")
        .unwrap();
    fill(&conn, "t", 100, 50, None);
    // The connection is still open, so the committed rows live only in the log.
    assert!(std::fs::metadata(wal_path(&path)).unwrap().len() > 0);
    let err = TablePlan::open(&path, "t").unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with(&path.display().to_string()), "{text}");
    assert!(
        text.contains("wal.db-wal") && text.contains("not supported"),
        "{text}"
    );

    conn.close().unwrap();
    // A clean close checkpoints and removes the log.
    assert!(!wal_path(&path).exists());
    let plan = TablePlan::open(&path, "t").unwrap();
    assert_eq!(plan.header.write_version, 2, "a WAL-mode file");
    std::fs::write(wal_path(&path), b"").unwrap();
    assert_eq!(TablePlan::open(&path, "t").unwrap().leaves, plan.leaves);
}
