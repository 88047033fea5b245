//! Grouped queries beyond their memory budget: with a tiny `--memory` every executor's group
//! table is written to the scratch directory in sorted runs many times over (and the runs
//! merged on the executor once there are 16 of one level), and the answer is still SQLite's
//! under every core count, backend and row path: group order, the keys each group shows,
//! `DISTINCT` and `group_concat` states, exact sums and an integer overflow of the running
//! sum that only the rows of two runs together reach. The report says what spilled; the
//! scratch directory is left empty, and one that cannot be written is a clear error. Groups
//! in key order are merged and written slice by slice (never held whole): the same rows, the
//! `OFFSET`, `LIMIT` and failures at the same groups, the rows before a failure written;
//! groups in another order go through a full sort's buffers, spilled with the rest.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::{Axis, QueryTester, RowPath};
use crate::{corescan, corescan_with_env};

/// A mixed table of every storage class, with keys of many distinct values.
fn fixture() -> &'static Path {
    static DB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DB.get_or_init(|| {
        let path = crate::scratch_dir("query-group-spill").join("mixed.db");
        super::mixed_table(&path, 1024, 3000, 41, false);
        path
    })
}

/// Grouped queries of high cardinality: every storage class and collation as keys (NOCASE
/// and RTRIM spellings of one group), NULL keys, several key parts, every kind of aggregate.
const GROUPED: &[&str] = &[
    "SELECT x, count(*), sum(id), min(s), max(r), total(i) FROM t GROUP BY x",
    "SELECT c, count(*), group_concat(id, '|') FROM t GROUP BY c ORDER BY 2 DESC, 1 LIMIT 20",
    "SELECT rt, max(id), count(*) FROM t GROUP BY rt LIMIT 50 OFFSET 100",
    "SELECT b, n, count(DISTINCT s), total(r) FROM t GROUP BY b, n HAVING count(*) > 0",
    "SELECT id % 997 AS k, avg(r), sum(id), min(x) FROM t GROUP BY k ORDER BY 3 DESC, 1",
    "SELECT s, min(id), max(x) FROM t GROUP BY s ORDER BY 2 DESC LIMIT 7",
    // One max() decides which row shows the NOCASE key.
    "SELECT c, max(r) FROM t GROUP BY c",
    "SELECT DISTINCT i % 300, c FROM t",
    "SELECT count(*), sum(i), group_concat(s) FROM t WHERE id < 0",
    "SELECT i, r, count(*) FROM t WHERE id > 100 GROUP BY i, r",
    // count(DISTINCT x) without GROUP BY runs as GROUP BY x (engine::query::distinct_count):
    // NOCASE and RTRIM spellings, NULLs, every storage class, beside plain counts, under
    // HAVING, on no rows; and two different DISTINCT arguments (the one-group path).
    "SELECT count(DISTINCT x), count(*), count(r) FROM t",
    "SELECT count(DISTINCT c) * 2, count(c), count(DISTINCT c) FROM t WHERE id % 3 > 0 \
     HAVING count(*) > 10",
    "SELECT count(DISTINCT rt) FROM t",
    "SELECT count(DISTINCT s), count(*) FROM t WHERE id < 0",
    "SELECT count(DISTINCT x), count(DISTINCT i) FROM t",
    // count(DISTINCT x) inside GROUP BY keeps only keys (aggregate::DistinctKeys): every
    // storage class (1 and 1.0 one key), NOCASE and RTRIM spellings, blobs, NULLs, beside the
    // general DISTINCT state of sum(DISTINCT).
    "SELECT i % 7, count(DISTINCT x), count(DISTINCT c), count(DISTINCT rt), count(DISTINCT b), \
     count(DISTINCT r), sum(DISTINCT i), count(DISTINCT n) FROM t GROUP BY 1",
];

#[test]
fn grouped_queries_give_sqlites_rows_in_memory_and_spilled() {
    let db = fixture();
    for (k, sql) in GROUPED.iter().enumerate() {
        // A one-byte budget gives each executor the smallest table (64 KiB): hundreds of
        // groups per run. The first query under every backend, core count and path.
        // The others under every core count and path (grouped rows in key order are
        // written slice by slice on the streamed and rendered paths, collected on the other).
        let (spilled, paths): (&[Axis], &[RowPath]) = if k == 0 {
            (&[Axis::Io, Axis::Cores, Axis::Path], &RowPath::ALL)
        } else {
            (&[Axis::Cores, Axis::Path], &RowPath::ALL)
        };
        QueryTester::new(db, *sql)
            .memory(1)
            .paths(paths)
            .span(spilled)
            .check();
    }
}

#[test]
fn a_running_sum_that_overflows_across_two_runs_is_sqlites_error() {
    // Group 0's running sum leaves the 64-bit range at its second row and comes back at its
    // third: SQLite fails at the second row. Thousands of other groups between the rows put
    // them in different runs of a spilled executor.
    let path = crate::scratch_dir("query-group-spill-overflow").join("overflow.db");
    let _ = std::fs::remove_file(&path);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE o(k INTEGER, v INTEGER);
         BEGIN;
         INSERT INTO o VALUES (0, 9223372036854775807);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000)
         INSERT INTO o SELECT i, i FROM n;
         INSERT INTO o VALUES (0, 1), (0, -5);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000)
         INSERT INTO o SELECT i + 4000, i FROM n;
         COMMIT;",
    )
    .unwrap();
    drop(conn);
    QueryTester::new(&path, "SELECT k, sum(v) FROM o GROUP BY k")
        .memory(1)
        .span(&[Axis::Cores])
        .fails_with("integer overflow")
        .check();
    // total() has no such error: the same rows, summed exactly.
    QueryTester::new(&path, "SELECT k, total(v), count(*) FROM o GROUP BY k")
        .memory(1)
        .span(&[Axis::Cores])
        .check();
}

/// A table of 100,000 groups, each key twice, so that the merge of grouped rows in key order
/// is cut into several slices on every core count (`engine::query::group_merge`'s
/// `SLICE_GROUPS`, 32,768): `k` from 0 to 99,999, `t` a text key of 80,000 values, and `w`
/// the row number except in two groups, whose `sum(w)` overflows (`k = 60000`) and whose
/// `abs(min(w))` overflows (`k = 70000`).
fn many_groups() -> &'static Path {
    static DB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DB.get_or_init(|| {
        let path = crate::scratch_dir("query-group-slices").join("many.db");
        let _ = std::fs::remove_file(&path);
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE g(id INTEGER PRIMARY KEY, k INTEGER, t TEXT, v INTEGER, w INTEGER);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
             INSERT INTO g SELECT i, (i * 7919) % 100000, printf('k%06d', (i * 31) % 80000),
                 i % 1000, CASE (i * 7919) % 100000 WHEN 60000 THEN 9223372036854775807
                 WHEN 70000 THEN -9223372036854775808 ELSE i END FROM n;",
        )
        .unwrap();
        path
    })
}

#[test]
fn grouped_rows_in_key_order_are_written_slice_by_slice_as_sqlite_gives_them() {
    let db = many_groups();
    // Every core count and path, in memory and spilled: groups in key order (written slice
    // by slice), ordered otherwise (finished into a full sort's buffers, ties in key order)
    // and DISTINCT's rows where their first rows came (sorted by those rows).
    let everywhere = [
        "SELECT k, count(*), sum(v), min(id) FROM g GROUP BY k",
        "SELECT k, count(*), sum(v) FROM g GROUP BY k ORDER BY 3 DESC",
        "SELECT DISTINCT t, k % 3 FROM g",
    ];
    // (The collected path, `run_query`, merges as before: the other tests check it.)
    for sql in everywhere {
        for memory in [None, Some(1)] {
            let tester = QueryTester::new(db, sql)
                .paths(&[RowPath::Streamed, RowPath::Rendered])
                .span(&[Axis::Cores, Axis::Path]);
            match memory {
                Some(m) => tester.memory(m).check(),
                None => tester.check(),
            };
        }
    }
    // The others rendered, as the command line writes them, on every core count.
    let answered = [
        "SELECT t, max(k), total(v) FROM g GROUP BY t LIMIT 100 OFFSET 50000",
        "SELECT k % 50000, count(*) FROM g GROUP BY 1 HAVING sum(v) % 3 = 0",
        "SELECT t, k, count(*) FROM g WHERE k < 80000 GROUP BY t, k LIMIT 40000 OFFSET 3",
        // The LIMIT is filled before the group whose sum overflows.
        "SELECT k, sum(w) FROM g GROUP BY k LIMIT 10 OFFSET 59990",
        // The OFFSET skips the group whose output column fails: no error (SQLite computes a
        // group's output columns only for the rows it writes).
        "SELECT k, abs(min(w)) FROM g WHERE k <> 60000 GROUP BY k LIMIT 5 OFFSET 70000",
        "SELECT DISTINCT t FROM g ORDER BY substr(t, 4) DESC",
        "SELECT t, count(*), max(v) FROM g GROUP BY t HAVING max(v) > 500 ORDER BY 3, 2 DESC",
    ];
    for sql in answered {
        QueryTester::new(db, sql)
            .paths(&[RowPath::Rendered])
            .span(&[Axis::Cores])
            .check();
    }
    let failing = [
        "SELECT k, sum(w) FROM g GROUP BY k",
        "SELECT k, sum(w) FROM g GROUP BY k LIMIT 10 OFFSET 59995",
        "SELECT k, abs(min(w)) FROM g WHERE k <> 60000 GROUP BY k LIMIT 5 OFFSET 69998",
        // Sorted: every group is finished first, and the first failure is the query's.
        "SELECT k, sum(w) FROM g GROUP BY k ORDER BY 2",
        "SELECT k, abs(min(w)) FROM g GROUP BY k ORDER BY k DESC",
    ];
    for sql in failing {
        QueryTester::new(db, sql)
            .paths(&[RowPath::Streamed])
            .span(&[Axis::Cores])
            .fails_with("integer overflow")
            .check();
    }
}

#[test]
fn the_groups_before_a_failing_group_are_written_as_sqlite_writes_them() {
    // sqlite3 writes the groups before the one whose sum overflows, then the error: so does
    // corescan, in memory and spilled, on one executor or several.
    let db = many_groups();
    let conn = Connection::open(db).unwrap();
    let before = sqlite_csv(&conn, "SELECT k, sum(w) FROM g WHERE k < 60000 GROUP BY k");
    assert_eq!(before.len(), 60000);
    let sql = "SELECT k, sum(w) FROM g GROUP BY k";
    for cores in ["1", "2", "3"] {
        for memory in ["1", "1G"] {
            let out = corescan([
                "query",
                db.to_str().unwrap(),
                sql,
                "--format",
                "csv",
                "--cores",
                cores,
                "--memory",
                memory,
            ]);
            assert_ne!(out.status, 0, "{cores} cores, --memory {memory}");
            assert!(
                out.stderr.contains("integer overflow"),
                "{cores} cores, --memory {memory}: {}",
                out.stderr
            );
            let ours: Vec<&str> = out.stdout.lines().skip(1).collect();
            assert_eq!(ours.len(), before.len(), "{cores} cores, --memory {memory}");
            assert!(ours == before, "{cores} cores, --memory {memory}");
        }
    }
}

/// The JSON report's `groups` figures of `sql` over `db` with `memory` (or the default),
/// spilling into `tmp`, and the rows.
fn grouped(db: &Path, sql: &str, memory: Option<&str>, tmp: &str) -> (String, serde_json::Value) {
    let mut args = vec!["query", db.to_str().unwrap(), sql, "--format", "json"];
    args.extend(["--report", "--cores", "2"]);
    if let Some(m) = memory {
        args.extend(["--memory", m]);
    }
    let out = corescan_with_env(&args, &[("TMPDIR", tmp)]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let report: serde_json::Value =
        serde_json::from_str(out.stderr.trim().lines().last().unwrap()).unwrap();
    (out.stdout, report["groups"].clone())
}

#[test]
fn the_report_says_what_spilled_and_the_scratch_directory_is_left_empty() {
    let db = fixture();
    let scratch = crate::scratch_dir("query-group-spill-scratch");
    let tmp = scratch.to_str().unwrap();
    let sql = "SELECT id, s, count(*) FROM t GROUP BY id, s";
    let rows: i64 = Connection::open(db)
        .unwrap()
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    let (memory_rows, in_memory) = grouped(db, sql, None, tmp);
    let (spilled_rows, spilled) = grouped(db, sql, Some("1"), tmp);
    assert_eq!(spilled_rows, memory_rows);
    assert_eq!(in_memory["groups"], rows, "{in_memory}");
    assert_eq!(spilled["groups"], rows, "{spilled}");
    assert_eq!(in_memory["spilled_runs"], 0, "{in_memory}");
    // More runs than an executor keeps before merging them (16 of one level).
    assert!(spilled["spilled_runs"].as_u64().unwrap() > 16, "{spilled}");
    assert!(
        spilled["spilled_bytes"].as_u64().unwrap() > 100_000,
        "{spilled}"
    );
    assert!(
        in_memory["table_bytes"].as_i64().unwrap() > rows * 100,
        "{in_memory}"
    );
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
        out.stderr.contains(&format!("{rows} groups")) && out.stderr.contains("runs of groups"),
        "{}",
        out.stderr
    );
}

#[test]
fn count_distinct_without_group_by_spills_as_groups() {
    // SELECT count(DISTINCT x) is one group whose distinct values used to be held in memory
    // whatever the budget: it is scanned as GROUP BY x, whose groups spill.
    let db = fixture();
    let scratch = crate::scratch_dir("query-group-spill-distinct");
    let tmp = scratch.to_str().unwrap();
    let sql = "SELECT count(DISTINCT id % 2000), count(*) FROM t";
    let want: (i64, i64) = Connection::open(db)
        .unwrap()
        .query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    let (rows, spilled) = grouped(db, sql, Some("1"), tmp);
    let rows: serde_json::Value = serde_json::from_str(&rows).unwrap();
    assert_eq!(rows[0]["count(DISTINCT id % 2000)"], want.0, "{rows}");
    assert_eq!(rows[0]["count(*)"], want.1, "{rows}");
    assert_eq!(spilled["groups"], want.0, "{spilled}");
    assert!(spilled["spilled_runs"].as_u64().unwrap() > 0, "{spilled}");
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
}

#[test]
fn a_scratch_directory_that_cannot_be_written_is_a_clear_error() {
    let db = fixture();
    let missing = crate::scratch_dir("query-group-spill-missing").join("not-there");
    let sql = "SELECT id, count(*) FROM t GROUP BY id";
    let out = corescan_with_env(
        ["query", db.to_str().unwrap(), sql, "--memory", "1"],
        &[("TMPDIR", missing.to_str().unwrap())],
    );
    out.assert_error(&["scratch directory", "not-there", "spilled groups"]);
    // Without a spill the directory is never needed.
    let out = corescan_with_env(
        ["query", db.to_str().unwrap(), sql],
        &[("TMPDIR", missing.to_str().unwrap())],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
}

#[test]
fn groups_of_many_files_spill_and_keep_the_files_order() {
    // Rows of several files in one group: group_concat lists them file by file, in rowid
    // order within each, whether the groups spilled or not, on one core or two.
    let dir = crate::scratch_dir("query-group-spill-files");
    for f in 0..4 {
        let path = dir.join(format!("f{f}.db"));
        let _ = std::fs::remove_file(&path);
        let c = Connection::open(&path).unwrap();
        c.execute_batch(&format!(
            "CREATE TABLE t(k INTEGER, v TEXT);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
             INSERT INTO t SELECT (i * 7919) % 1500, 'f{f}-' || i FROM n;"
        ))
        .unwrap();
    }
    let glob = format!("{}/*.db", dir.display());
    let sql = "SELECT k, count(*), group_concat(v), min(_file) FROM t GROUP BY k";
    let run = |extra: &[&str]| {
        let mut args = vec!["query", &glob, sql, "--format", "csv"];
        args.extend(extra);
        let out = corescan(&args);
        assert_eq!(out.status, 0, "{}", out.stderr);
        out.stdout
    };
    let reference = run(&["--cores", "1"]);
    assert_eq!(reference.lines().count(), 1 + 1500);
    // SQLite's own answer over the files' union, in the listed order.
    let conn = Connection::open_in_memory().unwrap();
    let mut union = Vec::new();
    for f in 0..4 {
        conn.execute(
            &format!("ATTACH ?1 AS f{f}"),
            [dir.join(format!("f{f}.db")).to_str().unwrap()],
        )
        .unwrap();
        union.push(format!("SELECT k, v FROM f{f}.t"));
    }
    let union = union.join(" UNION ALL ");
    let oracle = sqlite_csv(
        &conn,
        &format!("SELECT k, count(*), group_concat(v) FROM ({union}) GROUP BY k"),
    );
    let ours: Vec<String> = reference
        .lines()
        .skip(1)
        .map(|l| l.rsplit_once(',').unwrap().0.replace('"', ""))
        .collect();
    assert_eq!(ours, oracle);
    for cores in ["1", "2"] {
        assert_eq!(
            run(&["--cores", cores, "--memory", "1"]),
            reference,
            "{cores}"
        );
    }
    // json_group_array and json_group_object keep the same order (their rows' rowids shifted
    // by file as group_concat's are).
    let sql = "SELECT k, hex(json_group_array(v)), hex(json_group_object(v, k)) FROM t GROUP BY k";
    let oracle = sqlite_csv(
        &conn,
        &format!(
            "SELECT k, hex(json_group_array(v)), hex(json_group_object(v, k)) FROM ({union}) \
             GROUP BY k"
        ),
    );
    for cores in ["1", "2"] {
        for memory in ["1", "1G"] {
            let out = corescan([
                "query", &glob, sql, "--format", "csv", "--cores", cores, "--memory", memory,
            ]);
            assert_eq!(out.status, 0, "{}", out.stderr);
            let ours: Vec<&str> = out.stdout.lines().skip(1).collect();
            assert_eq!(ours, oracle, "{cores} cores, --memory {memory}");
        }
    }
}

/// SQLite's rows of `sql` (integers and texts) as unquoted CSV lines.
fn sqlite_csv(conn: &Connection, sql: &str) -> Vec<String> {
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| {
        let fields = (0..n)
            .map(|i| {
                Ok(match r.get_ref(i)? {
                    rusqlite::types::ValueRef::Integer(v) => v.to_string(),
                    rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                    other => panic!("{sql}: unexpected {other:?}"),
                })
            })
            .collect::<rusqlite::Result<Vec<String>>>()?;
        Ok(fields.join(","))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}
