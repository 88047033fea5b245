//! Streamed projections (a plain `SELECT` without `ORDER BY`): rows in SQLite's rowid order on
//! tables whose leaves are not in page-number order, for every backend, core count and window;
//! the same rows rendered in the executors and through the collect-everything path; `LIMIT`
//! ending the scan early; an error after rows were written; memory that does not grow with the
//! table.

use std::path::Path;
use std::process::{Command, Stdio};

use engine::query::run_query_streaming;
use engine::{spread, IoBackend, IoChoice, ScanSettings, SqpollMode};
use partitioner::TablePlan;
use rusqlite::Connection;

use super::{sqlite_answer, Axis, Config, Cores, Io, QueryTester, RowPath, Window};
use crate::{corescan, scratch_dir};

/// Two tables filled by interleaved inserts, then table `b` mostly deleted (its pages go to
/// the freelist) and table `a` grown again, at both ends of its key range and in the middle
/// (longer values split pages): `a`'s new leaves reuse `b`'s freed pages, before its older
/// ones in the file. With `wal`, the last changes stay in the log (the connection that wrote
/// them is returned, so no checkpoint runs).
fn fragmented(path: &Path, page_size: u32, rows: i64, wal: bool) -> Option<Connection> {
    let _ = std::fs::remove_file(path);
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!("PRAGMA page_size = {page_size};"))
        .unwrap();
    conn.execute_batch(
        "CREATE TABLE a(x INTEGER, y TEXT, z); CREATE TABLE b(x, y);
         PRAGMA wal_autocheckpoint = 0;",
    )
    .unwrap();
    if wal {
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .unwrap();
    }
    let mut rng = testkit::Rng::xorshift64(0x2545_f491_4f6c_dd1d);
    let mut next = move || rng.next_u64();
    conn.execute_batch("BEGIN").unwrap();
    for i in 0..rows {
        let len = (next() % 200) as usize;
        conn.execute("INSERT INTO b VALUES (?1, ?2)", (i, "b".repeat(150)))
            .unwrap();
        conn.execute(
            "INSERT INTO a VALUES (?1, ?2, ?3)",
            (i, "v".repeat(len), (next() % 1000) as f64 / 8.0),
        )
        .unwrap();
    }
    conn.execute_batch("DELETE FROM b WHERE x % 4 != 0; COMMIT; BEGIN;")
        .unwrap();
    for i in 0..rows / 2 {
        conn.execute(
            "INSERT INTO a(rowid, x, y) VALUES (?1, ?2, ?3)",
            (-1 - i, -i, "w".repeat((next() % 120) as usize)),
        )
        .unwrap();
    }
    conn.execute_batch(&format!(
        "UPDATE a SET y = y || y || 'grown' WHERE x BETWEEN {} AND {}; COMMIT;",
        rows / 3,
        rows / 2
    ))
    .unwrap();
    if wal {
        conn.execute_batch(&format!(
            "UPDATE a SET z = 'logged' WHERE x BETWEEN {} AND {};",
            rows / 5,
            rows / 4
        ))
        .unwrap();
        Some(conn)
    } else {
        drop(conn);
        None
    }
}

const QUERIES: &[&str] = &[
    "SELECT rowid, x, y, z FROM a",
    "SELECT rowid, length(y) FROM a WHERE x % 3 = 1",
    "SELECT x, z FROM a LIMIT 40 OFFSET 1500",
    "SELECT rowid FROM a WHERE x < 0 LIMIT 7",
];

/// Every query's rows are SQLite's, in its order, reals bit for bit, on every path (streamed,
/// rendered, collected), under the product of the `spanned` axes (the others rotating).
fn assert_streams_in_rowid_order(db: &Path, spanned: &[Axis]) {
    let plan = TablePlan::open(db, "a").unwrap();
    assert!(
        !plan.leaves_in_file_order(),
        "the fixture must have leaves out of page-number order"
    );
    for sql in QUERIES {
        QueryTester::new(db, *sql)
            .exact_reals()
            .paths(&RowPath::ALL)
            .span(spanned)
            .check();
    }
}

#[test]
fn rows_stream_in_rowid_order_on_a_fragmented_table() {
    let db = scratch_dir("stream-fragmented").join("frag.db");
    fragmented(&db, 1024, 3000, false);
    assert_streams_in_rowid_order(&db, &[Axis::Io, Axis::Cores, Axis::Window]);
}

/// Into how many segments a streamed export of `db`'s table `a` on `cores` executors is cut
/// (0: one range per executor).
fn segments(db: &Path, cores: usize) -> usize {
    let planned = corescan_sql::plan_query(db, "SELECT x FROM a").unwrap();
    let settings = ScanSettings::defaults(planned.table.header.page_size);
    run_query_streaming(
        &planned.table,
        planned.query,
        &settings,
        &spread(cores),
        |_| Ok(()),
    )
    .unwrap()
    .segments
}

/// A table of many leaf-parents is cut into segments dealt to the executors in turn (one
/// range per executor would make the second wait for the first): the rows still come in
/// SQLite's order, on every path, backend, core count and window, `LIMIT` and `OFFSET`
/// included; with the last changes in the log.
#[test]
fn rows_stream_in_rowid_order_in_segments() {
    let db = scratch_dir("stream-segments").join("segments.db");
    let _writer = fragmented(&db, 512, 6000, true);
    assert!(
        segments(&db, 2) >= 8,
        "the fixture must be cut into segments"
    );
    assert_eq!(segments(&db, 1), 0, "one executor reads one range");
    assert_streams_in_rowid_order(&db, &[Axis::Io, Axis::Cores, Axis::Window]);
}

#[test]
fn pages_in_the_log_keep_their_place_in_the_order() {
    let db = scratch_dir("stream-fragmented-wal").join("frag.db");
    let _writer = fragmented(&db, 1024, 2000, true);
    let plan = TablePlan::open(&db, "a").unwrap();
    let logged = plan
        .leaves
        .iter()
        .filter(|&&p| {
            plan.wal
                .as_ref()
                .is_some_and(|w| w.frame_offset(p).is_some())
        })
        .count();
    assert!(
        logged > 0,
        "some leaves must have their latest copy in the log"
    );
    assert_streams_in_rowid_order(&db, &[Axis::Io, Axis::Cores]);
}

#[test]
fn limit_ends_the_scan_early() {
    let db = scratch_dir("stream-limit").join("big.db");
    fragmented(&db, 1024, 12_000, false);
    let sql = "SELECT rowid, x FROM a LIMIT 10";
    // The query's plan may leave its leaf-parent level to the scan: count the leaves apart.
    let leaves = partitioner::TablePlan::open(&db, "a").unwrap().leaves.len() as u64;
    // Windows that do not read far ahead of the rows the LIMIT needs.
    QueryTester::new(&db, sql)
        .exact_reals()
        .paths(&[RowPath::Streamed, RowPath::Rendered])
        .windows(&[Window::Off, Window::Small])
        .span(&[Axis::Cores, Axis::Path])
        .inspect(|config, run| {
            assert_eq!(run.streamed, Some(true), "{config}");
            let report = run.report.as_ref().expect("an answer");
            // Range 0 stops after its first pages; a later range stops once its channel is
            // full (a few chunks of rows) or the coordinator has its rows.
            assert!(
                report.pages_read * 4 < leaves,
                "{config}: {} of {leaves} leaf pages read for LIMIT 10",
                report.pages_read
            );
        })
        .check();
}

/// The number of cells on each page of `pages` (table leaves) of the file at `db`.
fn cell_counts(db: &Path, page_size: u32, pages: &[u32]) -> Vec<usize> {
    let bytes = std::fs::read(db).unwrap();
    pages
        .iter()
        .map(|&p| {
            let at = (p as usize - 1) * page_size as usize;
            usize::from(u16::from_be_bytes([bytes[at + 3], bytes[at + 4]]))
        })
        .collect()
}

#[test]
fn an_error_after_rows_were_written_ends_the_output() {
    let db = scratch_dir("stream-damaged").join("damaged.db");
    fragmented(&db, 1024, 3000, false);
    error_after_rows(&db, 1024);
}

/// The same in a table cut into segments dealt to the executors in turn: the rows of the
/// segments before the damaged page (read by either executor) all come out, then its error.
#[test]
fn an_error_in_a_segment_ends_the_output_after_the_rows_before_it() {
    let db = scratch_dir("stream-damaged-segments").join("damaged.db");
    fragmented(&db, 512, 6000, false);
    assert!(
        segments(&db, 2) >= 8,
        "the fixture must be cut into segments"
    );
    error_after_rows(&db, 512);
}

/// Damages a leaf two thirds into `db`'s table `a` (pages of `page_size` bytes) and checks
/// that a streamed export writes exactly SQLite's rows before it, then fails naming it, on
/// 1-3 executors, and that a `LIMIT` met before it never reaches it.
fn error_after_rows(db: &Path, page_size: u32) {
    let sql = "SELECT rowid, x FROM a";
    let (_, want) = sqlite_answer(db, sql).unwrap();
    let plan = TablePlan::open(db, "a").unwrap();
    let order = plan.leaves_in_key_order().to_vec();
    // A leaf two thirds into the key order (in the second range of two): its page type byte
    // becomes an index page's.
    let k = order.len() * 2 / 3;
    let before: usize = cell_counts(db, page_size, &order[..k]).iter().sum();
    drop(plan);
    let mut bytes = std::fs::read(db).unwrap();
    bytes[(order[k] as usize - 1) * page_size as usize] = 0x0a;
    std::fs::write(db, &bytes).unwrap();
    let db = db.to_str().unwrap();
    for cores in ["1", "2", "3"] {
        let run = corescan(["query", db, sql, "--format", "csv", "--cores", cores]);
        run.assert_error(&[&format!("page {}", order[k])]);
        let lines: Vec<&str> = run.stdout.lines().collect();
        assert_eq!(lines.first(), Some(&"rowid,x"), "{cores} cores");
        assert_eq!(
            lines.len() - 1,
            before,
            "{cores} cores: rows before the page"
        );
        for (line, row) in lines[1..].iter().zip(&want) {
            let expect = format!("{},{}", text(&row[0]), text(&row[1]));
            assert_eq!(*line, expect, "{cores} cores");
        }
        // A LIMIT met before the damaged page never reaches it, as in SQLite.
        let run = corescan([
            "query",
            db,
            "SELECT rowid, x FROM a LIMIT 20",
            "--format",
            "json",
            "--cores",
            cores,
        ]);
        assert_eq!(run.status, 0, "{}", run.stderr);
        let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("valid JSON");
        assert_eq!(v.as_array().unwrap().len(), 20);
    }
}

fn text(v: &engine::value::Value) -> String {
    match v {
        engine::value::Value::Integer(i) => i.to_string(),
        other => panic!("unexpected value {other:?}"),
    }
}

/// Peak RSS in MiB of `corescan query DB SQL --format jsonl --report`, its output discarded.
fn peak_rss_mib(db: &Path, sql: &str) -> f64 {
    let out = Command::new(env!("CARGO_BIN_EXE_corescan"))
        .args(["query", db.to_str().unwrap(), sql, "--format", "jsonl"])
        .args(["--report", "--cores", "2", "--io", "pread"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run corescan");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(stderr.lines().last().unwrap()).expect("the JSON report");
    report["peak_rss_mib"]
        .as_f64()
        .unwrap_or_else(|| panic!("no peak_rss_mib in {report}"))
}

#[test]
fn a_large_projection_does_not_hold_the_table() {
    let db = scratch_dir("stream-memory").join("large.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
         INSERT INTO t SELECT i, printf('%.*c', 40000, 'x') FROM n;",
    )
    .unwrap();
    drop(conn);
    let table_mib = std::fs::metadata(&db).unwrap().len() as f64 / (1 << 20) as f64;
    assert!(table_mib > 100.0, "{table_mib} MiB");
    let streamed = peak_rss_mib(&db, "SELECT id, body FROM t");
    // The same rows through the collect path (ORDER BY an expression; `ORDER BY id` is the
    // scan's own order, streamed) hold the whole table: the measure can tell the difference.
    let collected = peak_rss_mib(&db, "SELECT id, body FROM t ORDER BY +id");
    assert!(
        collected > table_mib,
        "collected: {collected} MiB for a {table_mib} MiB table"
    );
    assert!(
        streamed < table_mib / 3.0,
        "streamed: {streamed} MiB for a {table_mib} MiB table (collected: {collected})"
    );
}

#[test]
fn the_first_rows_come_before_the_scan_ends() {
    let db = scratch_dir("stream-first-rows").join("rows.db");
    fragmented(&db, 4096, 40_000, false);
    let planned = corescan_sql::plan_query(&db, "SELECT rowid, x, y FROM a").unwrap();
    let started = std::time::Instant::now();
    let mut first: Option<std::time::Duration> = None;
    let settings = ScanSettings {
        readahead: 0,
        coalesce_kib: 16,
        io: IoChoice::Fixed(IoBackend::Pread),
        sqpoll: SqpollMode::Off,
        faults: engine::faults::Faults::NONE,
        memory: None,
    };
    let out = run_query_streaming(&planned.table, planned.query, &settings, &spread(2), |_| {
        first.get_or_insert_with(|| started.elapsed());
        Ok(())
    })
    .unwrap();
    let total = started.elapsed();
    let first = first.expect("rows");
    assert!(out.streamed && out.rows > 50_000, "{} rows", out.rows);
    // The first chunk is written after a few pages of range 0, long before the last page.
    assert!(
        first * 4 < total,
        "first row after {first:?} of a {total:?} scan"
    );
}

#[test]
fn the_command_line_writes_streamed_rows_as_it_writes_collected_ones() {
    // Streamed rows are formatted by the executors; collected ones (ORDER BY) by the
    // coordinator: every mode gives the same bytes.
    let db = super::fixture().to_str().unwrap();
    for (sql, tail) in [
        ("SELECT * FROM t", ""),
        (
            "SELECT id, s, b, r FROM t WHERE i > 0",
            " LIMIT 30 OFFSET 7",
        ),
        ("SELECT id FROM t WHERE id < -1000000", ""),
    ] {
        let streamed = format!("{sql}{tail}");
        let collected = format!("{sql} ORDER BY rowid{tail}");
        for format in ["csv", "json", "jsonl", "line", "table"] {
            for cores in ["1", "3"] {
                let args =
                    |q: &str| corescan(["query", db, q, "--format", format, "--cores", cores]);
                let (s, c) = (args(&streamed), args(&collected));
                assert_eq!(s.status, 0, "{streamed}: {}", s.stderr);
                assert_eq!(c.status, 0, "{collected}: {}", c.stderr);
                assert_eq!(
                    s.stdout, c.stdout,
                    "{streamed} --format {format} --cores {cores}"
                );
            }
        }
    }
}

/// Queries on a fragmented table deep enough for its leaf-parent level to be left to the
/// executors (one parent per executor enough to split by parents), with the last changes in
/// the write-ahead log: streamed and collected, in key order and in file order, every answer is
/// SQLite's, and the executors really read the parents.
#[test]
fn queries_whose_executors_read_the_leaf_parents_answer_as_sqlite() {
    let db = scratch_dir("stream-leaf-parents").join("deep.db");
    let _writer = fragmented(&db, 1024, 12_000, true);
    let queries = [
        // (A WHERE keeps the scan: without one the OFFSET's rows are counted from the
        // leaves' cell counts and only the LIMIT's read, by rowid.)
        "SELECT rowid, x, y FROM a WHERE z IS NOT 0.5 LIMIT 25 OFFSET 3000",
        "SELECT rowid, z FROM a ORDER BY rowid DESC LIMIT 7",
        "SELECT count(*), sum(x), total(z), max(length(y)) FROM a",
        "SELECT length(y) % 5 AS k, count(*), min(x), max(z) FROM a GROUP BY k ORDER BY k",
        "SELECT x FROM a WHERE z > 120 AND x % 97 = 0",
    ];
    for sql in queries {
        QueryTester::new(&db, sql)
            .exact_reals()
            .leaf_parents_per_share(1)
            .span(&[Axis::Io, Axis::Cores, Axis::Path])
            .check();
    }
}

/// `WHERE` terms bounding the rowid read only the leaves that can hold such rows, as SQLite
/// seeks instead of scanning: random bounds, every operator either way round, on a fragmented
/// table with its last changes in the write-ahead log, each answer SQLite's; a narrow range
/// reads a few pages, not the table.
#[test]
fn rowid_bounds_read_only_the_leaves_that_can_hold_them() {
    let db = scratch_dir("stream-rowid-range").join("deep.db");
    let _writer = fragmented(&db, 1024, 12_000, true);
    let all = TablePlan::open(&db, "a").unwrap().leaves.len() as u64;
    let (min, max): (i64, i64) = Connection::open(&db)
        .unwrap()
        .query_row("SELECT min(rowid), max(rowid) FROM a", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    let mut rng = testkit::Rng::xorshift64(0x9e37_79b9_7f4a_7c15);
    let mut next = move |n: i64| rng.below(n as u64) as i64;
    let ops = ["=", "<", "<=", ">", ">=", "IS"];
    for case in 0..60 {
        let (a, b) = (min - 3 + next(max - min + 7), min - 3 + next(max - min + 7));
        let (op1, op2) = (ops[next(6) as usize], ops[next(6) as usize]);
        let sql = match case % 4 {
            0 => format!("SELECT count(*), sum(x), total(z) FROM a WHERE rowid {op1} {a}"),
            1 => format!("SELECT rowid, y FROM a WHERE {a} {op1} rowid AND rowid {op2} {b}"),
            2 => format!(
                "SELECT count(*) FROM a WHERE rowid BETWEEN {} AND {} AND z > 50",
                a.min(b),
                a.max(b)
            ),
            _ => format!("SELECT rowid FROM a WHERE rowid {op1} {a} ORDER BY rowid DESC LIMIT 5"),
        };
        QueryTester::new(&db, sql)
            .exact_reals()
            .span(&[Axis::Cores])
            .check();
    }
    // One rowid: a root-to-leaf path (one leaf, perhaps one overflow page), whatever the
    // table's size.
    let planned = corescan_sql::plan_query(&db, "SELECT * FROM a WHERE rowid = 4321").unwrap();
    assert_eq!(planned.table.leaves.len(), 1);
    let collected = Config {
        io: Io::Pread,
        cores: Cores::Two,
        window: Window::Small,
        path: RowPath::Collected,
        memory: None,
    };
    let out = collected.run(&planned.table, &planned.query);
    let (_, rows) = out.answer.unwrap();
    let pages_read = out.report.unwrap().pages_read;
    assert_eq!(rows.len(), 1);
    assert!(pages_read <= 2 && all > 100, "{pages_read} of {all}");
}

/// `WHERE rowid IN (...)` of integers reads one root-to-leaf path per value, each page once,
/// as SQLite seeks each value: random lists (duplicates, values outside the table, beside a
/// bound, two lists), each answer SQLite's, and a short list reads a few leaves.
#[test]
fn rowid_in_lists_read_only_the_leaves_that_can_hold_them() {
    let db = scratch_dir("stream-rowid-in").join("deep.db");
    let _writer = fragmented(&db, 1024, 12_000, true);
    let all = TablePlan::open(&db, "a").unwrap().leaves.len();
    let mut rng = testkit::Rng::xorshift64(0x2545_f491_4f6c_dd1d);
    for case in 0..30 {
        let n = 1 + rng.below(12);
        let values: Vec<String> = (0..n)
            .map(|_| (rng.below(14_000) as i64 - 1_000).to_string())
            .collect();
        let list = values.join(", ");
        let sql = match case % 3 {
            0 => format!("SELECT rowid, x, y FROM a WHERE rowid IN ({list})"),
            1 => format!("SELECT rowid, z FROM a WHERE rowid IN ({list}) AND rowid > 3000 ORDER BY rowid DESC"),
            _ => format!(
                "SELECT count(*), sum(x) FROM a WHERE rowid IN ({list}) AND rowid IN ({list}, 77)"
            ),
        };
        QueryTester::new(&db, &sql)
            .exact_reals()
            .span(&[Axis::Cores])
            .check();
        let planned = corescan_sql::plan_query(&db, &sql).unwrap();
        let read = planned.table.leaves.len();
        assert!(
            read <= values.len() && read < all,
            "{sql}: {read} of {all} leaves"
        );
    }
    // A list with a value that is not an integer literal leaves the full scan (and the
    // answer SQLite's).
    let sql = "SELECT rowid FROM a WHERE rowid IN (5, 6.0, '7')";
    QueryTester::new(&db, sql).span(&[Axis::Cores]).check();
    assert_eq!(
        corescan_sql::plan_query(&db, sql)
            .unwrap()
            .query
            .rowid_ranges(),
        None
    );
}

/// Damage outside a rowid range is not read, by SQLite or by corescan: both answer a query
/// bounded to rowids far from it, and both fail a full scan.
#[test]
fn damage_outside_a_rowid_range_is_not_read() {
    let db = scratch_dir("stream-rowid-damage").join("deep.db");
    let _ = fragmented(&db, 1024, 12_000, false);
    let plan = TablePlan::open(&db, "a").unwrap();
    // The leaf with the largest rowids, made an index page.
    let victim = *plan.leaves_in_key_order().last().unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[0x0a], u64::from(victim - 1) * 1024).unwrap();
    drop(file);
    let bounded = "SELECT rowid, x, y FROM a WHERE rowid BETWEEN 5 AND 40";
    QueryTester::new(&db, bounded)
        .exact_reals()
        .span(&[Axis::Cores])
        .check();
    let full = "SELECT count(*), sum(x) FROM a";
    assert!(sqlite_answer(&db, full).is_err());
    // A full scan reads the damaged leaf.
    QueryTester::new(&db, full)
        .fails_with(format!("page {victim}"))
        .span(&[Axis::Cores])
        .check();
}
