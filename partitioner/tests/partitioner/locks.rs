//! The plan's snapshot is held with SQLite's own locks, so a SQLite writer sees corescan as
//! one more reader. The writer is another process ([`Writer`]: this test binary re-run as
//! [`writer_process`]), because a SQLite connection in this process would lose its POSIX
//! locks whenever any descriptor of the file is closed here (the plan's own, for one).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use partitioner::{Protocol, TablePlan};
use rusqlite::{Connection, ErrorCode};
use tempfile::tempdir;

use crate::fill;

/// A SQLite connection in a child process that runs one SQL line at a time.
struct Writer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Writer {
    fn open(db: &Path) -> Writer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "locks::writer_process",
                "--ignored",
                "--nocapture",
                "-q",
            ])
            .env("LOCKS_WRITER_DB", db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Writer {
            child,
            stdin,
            stdout,
        }
    }

    /// Runs `sql` in the child: `ok`, `busy`, `error: ...`, or the first column of a
    /// `PRAGMA wal_checkpoint`.
    fn run(&mut self, sql: &str) -> String {
        writeln!(self.stdin, "{sql}").unwrap();
        self.stdin.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the writer died"
            );
            if let Some(reply) = line.trim().strip_prefix("writer: ") {
                return reply.to_string();
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child of [`Writer`]; not a test of its own.
#[test]
#[ignore = "the writer process of the other tests in this module, started by them"]
fn writer_process() {
    let db = std::env::var_os("LOCKS_WRITER_DB").expect("started by Writer::open");
    let conn = Connection::open(db).unwrap();
    // Busy means busy here: wait a little, not rusqlite's default 5 s.
    conn.busy_timeout(std::time::Duration::from_millis(100))
        .unwrap();
    for line in std::io::stdin().lock().lines() {
        let sql = line.unwrap();
        let reply = if sql.starts_with("PRAGMA wal_checkpoint") {
            match conn.query_row(&sql, [], |r| r.get::<_, i64>(0)) {
                Ok(v) => v.to_string(),
                Err(e) => format!("error: {e}"),
            }
        } else {
            match conn.execute_batch(&sql) {
                Ok(()) => "ok".to_string(),
                Err(e) if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) => {
                    "busy".to_string()
                }
                Err(e) => format!("error: {e}"),
            }
        };
        println!("writer: {reply}");
    }
}

#[test]
fn a_rollback_writer_waits_at_pending_until_the_plan_is_dropped() {
    let dir = tempdir().unwrap();
    let path = dir.path().join("r.db");
    fill(&Connection::open(&path).unwrap(), "t", 500, 100, None);
    let mut w = Writer::open(&path);
    let plan = TablePlan::open(&path, "t").unwrap();
    assert_eq!(plan.read.protocol, Protocol::RollbackShared);
    let rows = plan.census().unwrap().rows;

    // A write transaction may start (RESERVED) and journal its pages...
    assert_eq!(
        w.run("BEGIN IMMEDIATE; DELETE FROM t WHERE a % 2 = 0;"),
        "ok"
    );
    // ...and its journal, while RESERVED is held, is a live writer's, not a hot one.
    let second = TablePlan::open(&path, "t").unwrap();
    assert_eq!(second.census().unwrap().rows, rows);
    drop(second);
    // COMMIT needs EXCLUSIVE, which the plan's SHARED lock refuses.
    assert_eq!(w.run("COMMIT"), "busy");
    assert_eq!(plan.census().unwrap().rows, rows, "the file did not change");
    drop(plan);
    assert_eq!(w.run("COMMIT"), "ok");
    assert_eq!(
        TablePlan::open(&path, "t").unwrap().census().unwrap().rows,
        rows / 2
    );
}

#[test]
fn a_wal_plan_holds_a_read_mark_and_the_dead_man_switch_only_with_a_live_writer() {
    let dir = tempdir().unwrap();
    let path = dir.path().join("w.db");
    let mut w = Writer::open(&path);
    assert_eq!(
        w.run("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;"),
        "ok"
    );
    assert_eq!(
        w.run(
            "CREATE TABLE t(a INTEGER, b TEXT); WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL \
               SELECT i + 1 FROM n WHERE i < 299) INSERT INTO t SELECT i, printf('%0200d', i) \
               FROM n;"
        ),
        "ok"
    );
    let plan = TablePlan::open(&path, "t").unwrap();
    assert_eq!(plan.read.protocol, Protocol::WalReadMark);
    let mark = plan.read.read_mark.unwrap();
    assert!((1..5).contains(&mark), "the log has frames: READ({mark})");
    let rows = plan.census().unwrap().rows;
    // Commits go on (they only append frames), RESTART cannot reset the log under the mark.
    assert_eq!(w.run("DELETE FROM t WHERE a < 100;"), "ok");
    assert_eq!(
        w.run("PRAGMA wal_checkpoint(RESTART)"),
        "1",
        "busy: the mark holds"
    );
    assert_eq!(plan.census().unwrap().rows, rows);
    drop(plan);
    // With every frame copied into the file the plan holds READ(0) and reads the file alone.
    assert_eq!(w.run("PRAGMA wal_checkpoint(PASSIVE)"), "0");
    let plan = TablePlan::open(&path, "t").unwrap();
    assert_eq!(plan.read.read_mark, Some(0));
    assert!(plan.wal.is_none());
    assert_eq!(plan.census().unwrap().rows, rows - 100);
    // Without a connection, nobody holds the dead-man switch: the -shm index left behind is
    // unreliable, and the plan recovers the log itself under READ(0).
    drop(plan);
    assert_eq!(w.run("DELETE FROM t WHERE a < 150;"), "ok");
    // Keep the log: copy the files as the writer leaves them, with no connection open.
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    for s in ["", "-wal", "-shm"] {
        std::fs::copy(
            format!("{}{s}", path.display()),
            copy.join(format!("w.db{s}")),
        )
        .unwrap();
    }
    let plan = TablePlan::open(&copy.join("w.db"), "t").unwrap();
    assert_eq!(plan.read.protocol, Protocol::WalUnreliableShm);
    assert_eq!(plan.census().unwrap().rows, rows - 150);
}
