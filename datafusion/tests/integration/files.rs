//! Files an application wrote (WAL mode with the log not checkpointed, names in any case),
//! projections of no column, limits, and the scan's partitions executed directly: each once,
//! one twice, the plan's display and its metrics.

use std::path::Path;
use std::sync::Arc;

use datafusion::execution::TaskContext;
use datafusion::physical_plan::{common, displayable, ExecutionPlan};
use engine::value::Value;
use engine::{Placement, ScanOptions};
use rusqlite::Connection;

use crate::{datafusion, datafusion_with, runtime, scratch_dir, sqlite};

/// An application's table over many small pages: mixed-case names, text, reals and NULLs.
fn events_db(path: &Path, rows: i64) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA page_size=1024;
         CREATE TABLE Events(Id INTEGER PRIMARY KEY, Kind TEXT, AMOUNT REAL);",
    )
    .unwrap();
    let tx = conn.unchecked_transaction().unwrap();
    for i in 1..=rows {
        let kind = ["click", "view", "buy"][(i % 3) as usize];
        let amount: Option<f64> = (i % 7 != 0).then(|| (i % 1000) as f64 / 8.0);
        tx.execute(
            "INSERT INTO Events VALUES (?1, ?2, ?3)",
            rusqlite::params![i * 2, kind, amount],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    conn
}

#[test]
fn names_match_in_any_case_and_counts_need_no_column() {
    let dir = scratch_dir("names");
    let db = dir.join("events.db");
    drop(events_db(&db, 5000));
    let expected = sqlite(
        &db,
        "SELECT Kind, count(*), sum(AMOUNT) FROM Events GROUP BY Kind ORDER BY Kind",
    );
    for placement in [Placement::Cores(1), Placement::Cores(3)] {
        for sql in [
            "SELECT kind, count(*), sum(amount) FROM events GROUP BY kind ORDER BY kind",
            "SELECT kind, count(*), sum(amount) FROM \"Events\" GROUP BY kind ORDER BY kind",
            "SELECT KIND, COUNT(*), SUM(Amount) FROM EVENTS GROUP BY KIND ORDER BY KIND",
        ] {
            let answer = datafusion_with(&db, sql, placement.clone()).unwrap();
            assert_eq!(answer.rows.len(), expected.len(), "{sql}");
            for (a, b) in answer.rows.iter().zip(&expected) {
                assert_eq!(a[..2], b[..2], "{sql}");
                match (&a[2], &b[2]) {
                    (Value::Real(x), Value::Real(y)) => {
                        assert!((x - y).abs() <= 1e-9 * y.abs(), "{sql}: {x} {y}")
                    }
                    other => panic!("{sql}: {other:?}"),
                }
            }
        }
        // count(*) asks the scan for no column: the rows still count.
        let answer = datafusion_with(&db, "SELECT count(*) FROM events", placement).unwrap();
        assert_eq!(answer.rows, [vec![Value::Integer(5000)]]);
    }
    let e = datafusion(&db, "SELECT * FROM nosuch").unwrap_err();
    assert!(e.to_string().contains("nosuch"), "{e}");
}

#[test]
fn a_wal_mode_file_with_its_log_not_checkpointed_gives_sqlites_rows() {
    let dir = scratch_dir("wal");
    let db = dir.join("wal.db");
    let conn = events_db(&db, 10);
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
         UPDATE Events SET Kind = 'wal' WHERE Id % 4 = 0;",
    )
    .unwrap();
    let tx = conn.unchecked_transaction().unwrap();
    for i in 11..=3000 {
        tx.execute(
            "INSERT INTO Events VALUES (?1, 'wal', ?2)",
            rusqlite::params![i * 2, i as f64],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    assert!(dir.join("wal.db-wal").metadata().unwrap().len() > 0);
    // The writer's connection stays open, so the log is the only copy of the new rows.
    let sql = "SELECT Id, Kind, AMOUNT FROM Events ORDER BY Id";
    let expected = sqlite(&db, sql);
    assert_eq!(expected.len(), 3000);
    let answer = datafusion(&db, "SELECT id, kind, amount FROM events ORDER BY id").unwrap();
    assert_eq!(answer.rows, expected);
    drop(conn);
}

#[test]
fn partitions_run_once_each_or_again_from_a_fresh_scan_and_stop_at_a_limit() {
    let dir = scratch_dir("partitions");
    let db = dir.join("events.db");
    drop(events_db(&db, 4000));
    let all: Vec<Value> = sqlite(&db, "SELECT Id FROM Events ORDER BY rowid")
        .into_iter()
        .map(|mut r| r.remove(0))
        .collect();
    let table = corescan_datafusion::SqliteTable::open(
        &db,
        "events",
        Placement::Cores(2),
        ScanOptions::default(),
    )
    .unwrap();
    assert_eq!(table.partitions(), 2);
    let plan: Arc<dyn ExecutionPlan> = Arc::new(table.plan(Some(&[0]), &[], None).unwrap());
    let text = displayable(plan.as_ref()).one_line().to_string();
    assert!(
        text.contains("table=Events, columns=[Id], executors=2"),
        "{text}"
    );
    let ctx = Arc::new(TaskContext::default());
    let run = |partition: usize| -> Vec<Value> {
        let stream = plan.execute(partition, Arc::clone(&ctx)).unwrap();
        let batches = runtime().block_on(common::collect(stream)).unwrap();
        batches
            .iter()
            .flat_map(corescan_datafusion::batch_rows)
            .map(|mut r| r.remove(0))
            .collect()
    };
    let first = run(0);
    let second = run(1);
    // Partition 0 then 1 is the table in rowid order.
    assert_eq!([first.clone(), second].concat(), all);
    // EXPLAIN ANALYZE's figures: every row sent, counted over the partitions.
    let metrics = plan.metrics().expect("the scan's metrics");
    assert_eq!(metrics.output_rows(), Some(all.len()));
    // Run again: a fresh scan, the same rows.
    assert_eq!(run(0), first);

    let limited: Arc<dyn ExecutionPlan> =
        Arc::new(table.plan(Some(&[0, 1]), &[], Some(7)).unwrap());
    for partition in 0..2 {
        let stream = limited.execute(partition, Arc::clone(&ctx)).unwrap();
        let batches = runtime().block_on(common::collect(stream)).unwrap();
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 7, "partition {partition}");
    }
    let answer = datafusion(&db, "SELECT id FROM events LIMIT 5").unwrap();
    assert_eq!(answer.rows.len(), 5);
}

/// The scan's row count for DataFusion's join order: `sqlite_stat1`'s once `ANALYZE` wrote it
/// (the table's own row, or its largest index's), else a guess from the pages, all `Inexact`.
#[test]
fn statistics_come_from_sqlite_stat1_after_analyze_else_from_the_pages() {
    use datafusion::common::stats::Precision;
    let dir = scratch_dir("stat1");
    let db = dir.join("events.db");
    let conn = events_db(&db, 4000);
    let rows_of = |db: &Path| -> Precision<usize> {
        let table = corescan_datafusion::SqliteTable::open(
            db,
            "EVENTS",
            Placement::Cores(2),
            ScanOptions::default(),
        )
        .unwrap();
        let plan = table.plan(None, &[], None).unwrap();
        let stats = datafusion::physical_plan::statistics::StatisticsContext::default()
            .compute(
                &plan,
                &datafusion::physical_plan::statistics::StatisticsArgs::new(),
            )
            .unwrap();
        stats.num_rows
    };
    // No statistics: a guess from the leaf pages, within a factor of the truth.
    let Precision::Inexact(guess) = rows_of(&db) else {
        panic!("inexact statistics")
    };
    assert!((1000..=16000).contains(&guess), "{guess}");
    // A table without indexes: ANALYZE writes its row count.
    conn.execute_batch("ANALYZE;").unwrap();
    assert_eq!(rows_of(&db), Precision::Inexact(4000));
    // With an index (a partial one beside it counts fewer rows), after more rows.
    conn.execute_batch(
        "INSERT INTO Events(Kind) SELECT Kind FROM Events LIMIT 500;
         CREATE INDEX kinds ON Events(Kind);
         CREATE INDEX buys ON Events(Amount) WHERE Kind = 'buy';
         ANALYZE;",
    )
    .unwrap();
    let stat: Vec<Vec<Value>> = sqlite(&db, "SELECT idx, stat FROM sqlite_stat1 ORDER BY idx");
    assert_eq!(stat.len(), 2, "{stat:?}");
    assert_eq!(rows_of(&db), Precision::Inexact(4500));
    // Through a registered file (one snapshot for every table) too.
    let answer = datafusion(&db, "SELECT count(*) FROM events").unwrap();
    assert_eq!(answer.rows, [vec![Value::Integer(4500)]]);
}

/// A live writer (another process, as an application is) moves units from `acct` to `ledger`
/// in transactions (one balance down, one ledger row in), so every committed state has
/// `sum(bal) + count(ledger)` = the total. A query that reads both tables must see one
/// committed state, as a SQLite reader does: the tables of a registered file are read in one
/// snapshot.
#[test]
fn the_tables_of_one_query_are_read_in_one_committed_state_under_a_live_writer() {
    let dir = scratch_dir("live-join");
    let db = dir.join("bank.db");
    const TOTAL: i64 = 2_000_000;
    {
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA page_size = 1024;
             CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER);
             CREATE TABLE ledger(id INTEGER PRIMARY KEY, note TEXT);",
        )
        .unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        for i in 0..2000 {
            tx.execute("INSERT INTO acct VALUES (?1, ?2)", [i, TOTAL / 2000])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    // Python's sqlite3 module, committing 50 moves every millisecond or so until killed.
    let script = "import sqlite3, sys, time\n\
        c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
        n = 0\n\
        while True:\n\
        \x20   c.execute('BEGIN')\n\
        \x20   for k in range(50):\n\
        \x20       c.execute('UPDATE acct SET bal = bal - 1 WHERE id = ?', ((n * 50 + k) % 2000,))\n\
        \x20       c.execute(\"INSERT INTO ledger(note) VALUES ('moved one unit')\")\n\
        \x20   c.execute('COMMIT')\n\
        \x20   n += 1\n\
        \x20   time.sleep(0.001)\n";
    struct Writer(std::process::Child);
    impl Drop for Writer {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let writer = match std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&db)
        .spawn()
    {
        Ok(child) => Writer(child),
        Err(e) => {
            eprintln!("SKIPPED: no python3 to run a live writer process ({e})");
            return;
        }
    };
    let sql = "SELECT (SELECT sum(bal) FROM acct) + (SELECT count(*) FROM ledger) AS total, \
               (SELECT count(*) FROM ledger) AS moved";
    let mut moved = std::collections::BTreeSet::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while moved.len() < 40 && std::time::Instant::now() < deadline {
        let answer = datafusion(&db, sql).unwrap();
        assert_eq!(
            answer.rows[0][0],
            Value::Integer(TOTAL),
            "{:?}",
            answer.rows
        );
        moved.insert(format!("{:?}", answer.rows[0][1]));
    }
    drop(writer);
    // The queries saw several of the writer's committed states.
    assert!(moved.len() >= 40, "the queries saw only {moved:?}");
}
