//! Full sorts (`ORDER BY` without `LIMIT`) in bounded memory: rows in SQLite's order (ties
//! in rowid order, NULLs, collations, mixed storage classes), in memory and spilled to sorted
//! runs by a tiny `--memory`, under every backend, core count and row path; the report says
//! what spilled; the scratch directory is left empty, and one that cannot be written is a
//! clear error.

use std::path::{Path, PathBuf};

use super::{Axis, QueryTester, RowPath};
use crate::{corescan, corescan_with_env};

/// A mixed table of every storage class, large enough that a tiny budget spills more runs
/// than an executor hands over unmerged (`engine::query::sort::MAX_RUNS`).
fn sort_fixture() -> &'static Path {
    static DB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DB.get_or_init(|| {
        let path = crate::scratch_dir("query-sort").join("mixed.db");
        super::mixed_table(&path, 1024, 6000, 29, false);
        path
    })
}

const SORTS: &[&str] = &[
    // Mixed storage classes (NULLs first), ties broken by rowid.
    "SELECT id, x FROM t ORDER BY x",
    "SELECT x, s, id FROM t ORDER BY x DESC",
    "SELECT id, c FROM t ORDER BY c",
    "SELECT id, rt, i FROM t ORDER BY rt DESC, i",
    "SELECT s, id FROM t ORDER BY s COLLATE NOCASE NULLS LAST, r DESC NULLS FIRST",
    "SELECT b, n, id FROM t ORDER BY b, n DESC",
    "SELECT id, i % 5, r FROM t WHERE i > -50 ORDER BY i % 5, r",
    "SELECT * FROM t ORDER BY n, id DESC",
    "SELECT id, s FROM t ORDER BY length(s), s LIMIT -1 OFFSET 37",
    "SELECT id, r FROM t ORDER BY r * 0",
];

#[test]
fn full_sorts_give_sqlites_order_in_memory_and_spilled() {
    let db = sort_fixture();
    for (k, sql) in SORTS.iter().enumerate() {
        // In memory, then spilled (a one-byte budget spills every executor's rows, many runs
        // each): the first query under every backend, core count and path, the others under
        // every core count, each with one backend and path.
        let (memory, spilled): (&[Axis], &[Axis]) = if k == 0 {
            (
                &[Axis::Io, Axis::Cores],
                &[Axis::Io, Axis::Cores, Axis::Path],
            )
        } else {
            (&[Axis::Cores], &[Axis::Cores, Axis::Path])
        };
        QueryTester::new(db, *sql)
            .paths(&RowPath::ALL)
            .span(memory)
            .check();
        QueryTester::new(db, *sql)
            .memory(1)
            .paths(&RowPath::ALL)
            .span(spilled)
            .check();
    }
}

/// `ORDER BY ... LIMIT` (top-k): each executor keeps its best `LIMIT + OFFSET` rows and,
/// once it has them, neither computes nor keeps a row that ranks after them. The fixture's
/// 6,000 rows give each executor thousands of rows past its first cut. A row whose output
/// columns fail (`abs()` of the smallest integer) fails the query only where SQLite's sorter
/// takes it: a row that comes when the sorter is full and ranks after all its rows is dropped
/// before its output columns are computed.
const TOP_K: &[(&str, bool)] = &[
    ("SELECT id, x FROM t ORDER BY x LIMIT 5", false),
    (
        "SELECT id, s FROM t ORDER BY s COLLATE NOCASE DESC, id LIMIT 7 OFFSET 3",
        false,
    ),
    (
        "SELECT id, r, n FROM t ORDER BY n DESC, r LIMIT 1500 OFFSET 20",
        false,
    ),
    ("SELECT id, rt FROM t ORDER BY rt LIMIT 600", false),
    // Ties on `i % 7` broken by `r`, then rowid.
    (
        "SELECT id, i % 7 AS m, r FROM t ORDER BY m, r LIMIT 9",
        false,
    ),
    // Every row after the third ranks after the sorter's rows: row 1007's output is never
    // computed, by either engine (`id + 0`: sorted, not read in rowid order).
    (
        "SELECT id, CASE WHEN id % 1000 = 7 THEN abs(-9223372036854775807 - 1) ELSE i END \
         FROM t ORDER BY id + 0 LIMIT 3",
        false,
    ),
    // Every row ranks before the rows before it: SQLite's sorter takes row 7, computes its
    // output and fails.
    (
        "SELECT id, CASE WHEN id % 1000 = 7 THEN abs(-9223372036854775807 - 1) ELSE i END \
         FROM t ORDER BY -id LIMIT 3",
        true,
    ),
    // The failing row is the table's last and ranks after the best rows of its range.
    (
        "SELECT id, CASE WHEN id = 5999 THEN abs(-9223372036854775807 - 1) END \
         FROM t ORDER BY i % 7, r LIMIT 4",
        false,
    ),
];

#[test]
fn top_k_keeps_sqlites_rows_and_failures() {
    let db = sort_fixture();
    for (k, (sql, fails)) in TOP_K.iter().enumerate() {
        let axes: &[Axis] = if k == 0 {
            &[Axis::Io, Axis::Cores, Axis::Path]
        } else {
            &[Axis::Cores, Axis::Path]
        };
        let mut tester = QueryTester::new(db, *sql).paths(&RowPath::ALL).span(axes);
        if *fails {
            tester = tester.sqlite_may_fail();
            assert!(
                super::sqlite_answer(db, sql).is_err(),
                "SQLite answered {sql}"
            );
        } else {
            assert!(super::sqlite_answer(db, sql).is_ok(), "SQLite failed {sql}");
        }
        tester.check();
    }
}

#[test]
fn the_report_says_what_spilled_and_the_scratch_directory_is_left_empty() {
    let db = sort_fixture();
    let scratch = crate::scratch_dir("query-sort-scratch");
    let tmp = scratch.to_str().unwrap();
    let sql = "SELECT id, s, x FROM t ORDER BY s, x";
    let run = |memory: Option<&str>| {
        let mut args = vec!["query", db.to_str().unwrap(), sql, "--format", "json"];
        args.extend(["--report", "--cores", "2"]);
        if let Some(m) = memory {
            args.extend(["--memory", m]);
        }
        let out = corescan_with_env(&args, &[("TMPDIR", tmp)]);
        assert_eq!(out.status, 0, "{}", out.stderr);
        let report: serde_json::Value =
            serde_json::from_str(out.stderr.trim().lines().last().unwrap()).unwrap();
        (out.stdout, report["sort"].clone())
    };
    let (memory_rows, in_memory) = run(None);
    let (spilled_rows, spilled) = run(Some("1"));
    assert_eq!(spilled_rows, memory_rows);
    assert_eq!(in_memory["spilled_runs"], 0, "{in_memory}");
    assert!(spilled["spilled_runs"].as_u64().unwrap() > 2, "{spilled}");
    assert!(
        spilled["spilled_bytes"].as_u64().unwrap() > 100_000,
        "{spilled}"
    );
    assert_eq!(spilled["rows"], in_memory["rows"]);
    // No run is left (they are unnamed files, gone with the process however it ends).
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
    // The human report's line.
    let out = corescan_with_env(
        [
            "query",
            db.to_str().unwrap(),
            sql,
            "--report",
            "--memory",
            "64K",
        ],
        &[("TMPDIR", tmp)],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("sorted runs") && out.stderr.contains("scratch directory"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_scratch_directory_that_cannot_be_written_is_a_clear_error() {
    let db = sort_fixture();
    let missing = crate::scratch_dir("query-sort-missing").join("not-there");
    let out = corescan_with_env(
        [
            "query",
            db.to_str().unwrap(),
            "SELECT id, s FROM t ORDER BY s",
            "--memory",
            "1",
        ],
        &[("TMPDIR", missing.to_str().unwrap())],
    );
    out.assert_error(&["scratch directory", "not-there", "writing a sorted run"]);
    // Without a spill the directory is never needed.
    let out = corescan_with_env(
        [
            "query",
            db.to_str().unwrap(),
            "SELECT id, s FROM t ORDER BY s",
        ],
        &[("TMPDIR", missing.to_str().unwrap())],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
}

#[test]
fn memory_sizes_are_checked() {
    let db = sort_fixture();
    for bad in ["lots", "5 potatoes", "12Q"] {
        let out = corescan([
            "query",
            db.to_str().unwrap(),
            "SELECT id FROM t ORDER BY s",
            "--memory",
            bad,
        ]);
        out.assert_usage_error();
        assert!(out.stderr.contains("--memory"), "{}", out.stderr);
    }
}

#[test]
fn a_merge_of_more_runs_than_the_soft_limit_of_open_files_still_answers() {
    // 100 files, each unit's rows spilled by a one-byte budget: the final merge holds 100
    // runs open, more than a soft limit of 64 allows; corescan raises its soft limit to the
    // hard one.
    let dir = crate::scratch_dir("query-sort-many-runs");
    for f in 0..100 {
        let c = rusqlite::Connection::open(dir.join(format!("f{f:03}.db"))).unwrap();
        c.execute_batch("CREATE TABLE t(a INTEGER, b TEXT); BEGIN;")
            .unwrap();
        for r in 0..20 {
            c.execute(
                "INSERT INTO t VALUES (?1, ?2)",
                rusqlite::params![r * 7 % 13, format!("k{}", (f * 31 + r) % 17)],
            )
            .unwrap();
        }
        c.execute_batch("COMMIT").unwrap();
    }
    let glob = format!("{}/*.db", dir.display());
    let args = [
        "query",
        &glob,
        "SELECT a, b FROM t ORDER BY b, a",
        "--memory",
        "1",
        "--format",
        "csv",
        "--report",
    ];
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -Sn 64 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_corescan"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("sorted runs"), "{stderr}");
    let limited = String::from_utf8(out.stdout).unwrap();
    assert_eq!(limited.lines().count(), 1 + 100 * 20);
    // The same rows as without the limit (and without spilling).
    let free = corescan([args[0], args[1], args[2], "--format", "csv"]);
    assert_eq!(free.status, 0, "{}", free.stderr);
    assert_eq!(limited, free.stdout);
}
