//! The key values a group shows when its rows hold keys SQLite calls equal but that differ
//! (`NOCASE`, `RTRIM`, `1` and `1.0`): those of the group's first row, or, with a one-argument
//! `min()`/`max()`, of the row the last such aggregate chose (the first holding its final
//! value, or the group's last row when its values are all NULL). Checked against SQLite for
//! every core count and backend, on a table whose leaves are out of rowid order.

use std::path::Path;

use rusqlite::Connection;

use super::{Axis, QueryTester};
use crate::scratch_dir;

fn build(path: &Path) {
    let _ = std::fs::remove_file(path);
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 512;
         CREATE TABLE k(c TEXT COLLATE NOCASE, r TEXT COLLATE RTRIM, n, x, y TEXT COLLATE NOCASE,
                        pad TEXT);",
    )
    .unwrap();
    let mut rng = testkit::Rng::xorshift64(0x9e37_79b9_7f4a_7c15);
    let mut next = move |n: u64| rng.below(n);
    let cs = ["a", "A", "b", "B", "c"];
    let rs = ["p", "p ", "p  ", "q", "q "];
    let ns = ["1", "1.0", "2", "2.0", "NULL"];
    let xs = [
        "1", "1.0", "0", "0.0", "NULL", "NULL", "3", "-1", "'t'", "'T'",
    ];
    let ys = ["'m'", "'M'", "'n'", "NULL", "'N'"];
    let insert = |rowid: Option<i64>, next: &mut dyn FnMut(u64) -> u64| {
        let v = |list: &[&str], next: &mut dyn FnMut(u64) -> u64| {
            list[next(list.len() as u64) as usize].to_string()
        };
        let row = [
            v(&cs, next),
            v(&rs, next),
            v(&ns, next),
            v(&xs, next),
            v(&ys, next),
        ];
        let quote = |s: &str| {
            if s.starts_with('\'') || s == "NULL" || s.parse::<f64>().is_ok() {
                s.to_string()
            } else {
                format!("'{s}'")
            }
        };
        let (cols, id) = match rowid {
            Some(r) => ("rowid, ", format!("{r}, ")),
            None => ("", String::new()),
        };
        conn.execute_batch(&format!(
            "INSERT INTO k({cols}c, r, n, x, y, pad) VALUES ({id}{}, {}, {}, {}, {}, \
             printf('%.*c', {}, 'z'))",
            quote(&row[0]),
            quote(&row[1]),
            row[2],
            row[3],
            row[4],
            next(120)
        ))
        .unwrap();
    };
    conn.execute_batch("BEGIN").unwrap();
    for _ in 0..600 {
        insert(None, &mut next);
    }
    // Rowids below all others on pages at the end of the file.
    for r in 0..150 {
        insert(Some(-1 - r), &mut next);
    }
    conn.execute_batch("COMMIT").unwrap();
}

const QUERIES: &[&str] = &[
    "SELECT c, count(*) FROM k GROUP BY c",
    "SELECT c, min(x) FROM k GROUP BY c",
    "SELECT c, max(x) FROM k GROUP BY c",
    "SELECT r, min(n), max(n) FROM k GROUP BY r",
    "SELECT r, max(n), min(n) FROM k GROUP BY r",
    "SELECT n, min(y) FROM k GROUP BY n",
    "SELECT n, c, r, max(y), count(*) FROM k GROUP BY n, c, r",
    "SELECT c, r, min(x), sum(n), count(x) FROM k GROUP BY 1, 2",
    "SELECT c, count(*) FROM k GROUP BY c HAVING min(x) IS NULL OR 1 ORDER BY max(y)",
    "SELECT c, count(*) FROM k GROUP BY c HAVING max(y) IS NULL OR 1 ORDER BY min(x)",
    "SELECT c, max(n) FROM k WHERE n IS NULL GROUP BY c",
    "SELECT upper(c), lower(r), min(x) FROM k GROUP BY c, r ORDER BY 3, 1, 2",
    "SELECT c, min(x) + max(n) FROM k GROUP BY c",
    "SELECT c, max(min(n, x)) FROM k GROUP BY c",
];

#[test]
fn group_keys_come_from_the_row_sqlite_shows() {
    let db = scratch_dir("query-group-keys").join("keys.db");
    build(&db);
    for sql in QUERIES {
        QueryTester::new(&db, *sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
}

/// With a `FILTER` on the last `min()`/`max()`, SQLite's "magnet" register decides which row
/// shows a group: a row the filter leaves out only as the group's first, a passing row as
/// the aggregate's step decides (a NULL value while no value has: the last such row). Keys
/// that differ ('a'/'A', 1/1.0, 'p'/'p '), filters no row of a group passes, filters passed
/// only by NULLs, an earlier `min()`/`max()` with or without one, bare columns, groups
/// spilled under a tiny budget. Refused before (the differential tester's largest class of
/// refusals); a `DISTINCT` one as the last stays refused where keys can differ: SQLite's
/// duplicate rows repeat the decision of the row before them (`SELECT k, min(DISTINCT x)
/// ... GROUP BY k` showed 'b' where SQLite shows 'B' before the refusal).
#[test]
fn the_last_min_or_max_with_filter_chooses_the_row_as_sqlite_does() {
    let db = scratch_dir("query-minmax-filter").join("filter.db");
    build(&db);
    for sql in [
        "SELECT c, max(x) FILTER (WHERE n = 1) FROM k GROUP BY c",
        "SELECT c, min(x) FILTER (WHERE y > 'm') FROM k GROUP BY c",
        "SELECT r, max(n) FILTER (WHERE x IS NULL) FROM k GROUP BY r",
        "SELECT c, max(x) FILTER (WHERE n = 7) FROM k GROUP BY c",
        "SELECT c, r, max(x) FILTER (WHERE n IS NULL), pad FROM k GROUP BY c, r",
        "SELECT n, min(y) FILTER (WHERE x > 0), rowid FROM k GROUP BY n",
        "SELECT c, min(x), max(n) FILTER (WHERE y = 'm'), rowid FROM k GROUP BY c",
        "SELECT c, max(n) FILTER (WHERE y = 'm'), min(x), rowid FROM k GROUP BY c",
        "SELECT r, count(*) FROM k GROUP BY r ORDER BY max(x) FILTER (WHERE c = 'a'), 1",
        "SELECT c, sum(n) FILTER (WHERE x > 0), max(x) FILTER (WHERE r = 'p'), y FROM k GROUP BY c",
        "SELECT y, max(x) FILTER (WHERE c = 'a' AND n = 1), count(*) FROM k GROUP BY y",
    ] {
        QueryTester::new(&db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
        QueryTester::new(&db, sql).memory(1).check();
    }
    QueryTester::new(&db, "SELECT c, min(DISTINCT x) FROM k GROUP BY c")
        .fails_with("min(DISTINCT) or max(DISTINCT)")
        .check();
    // Where the keys cannot differ, the first row shows them whatever the DISTINCT does.
    QueryTester::new(&db, "SELECT pad, min(DISTINCT x) FROM k GROUP BY pad").check();
}

/// A `GROUP BY` that holds the rowid makes every group one row, and SQLite's scan of a table
/// without an index delivers such groups in rowid order, without sorting them; with the rowid
/// behind a unary `+` SQLite sorts the groups by key. Found by the differential tester
/// (`GROUP BY i, id`: SQLite's first group was the lowest rowid, corescan's the lowest `i`).
#[test]
fn groups_that_hold_the_rowid_come_in_the_loop_order() {
    let db = scratch_dir("query-rowid-groups").join("rowid.db");
    // The table `k` above (no index; rowids below the others at the end of the file), with
    // keys whose order is not the rowid order.
    build(&db);
    for sql in [
        "SELECT x, rowid, count(*) FROM k GROUP BY 1, 2",
        "SELECT y, rowid FROM k GROUP BY y, rowid LIMIT 7 OFFSET 3",
        "SELECT c, rowid, count(*) FROM k GROUP BY 1, 2",
        "SELECT x, rowid, count(*) FROM k GROUP BY 1, 2 ORDER BY 3 LIMIT 9",
        "SELECT x, rowid FROM k GROUP BY x, +rowid LIMIT 9",
        "SELECT y, rowid, c FROM k GROUP BY 3, 2, 1 ORDER BY 1 DESC LIMIT 12",
    ] {
        QueryTester::new(&db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    // Not a coincidence of the data: in key order the first group is another.
    let conn = Connection::open(&db).unwrap();
    let first = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_ne!(
        first("SELECT rowid FROM k GROUP BY x, rowid LIMIT 1"),
        first("SELECT rowid FROM k ORDER BY x, rowid LIMIT 1")
    );
}

/// SQLite's bare-column rule: a column read over a group outside its keys and aggregates
/// comes from the row that shows the group's keys (the first row, or the row the deciding
/// `min()`/`max()` chose, the last when its values are all NULL), also in a query without
/// `GROUP BY` ("the latest reading"), with groups spilled and merged back under a tiny
/// budget, and through an index that delivers the `GROUP BY`.
#[test]
fn bare_columns_come_from_the_row_that_shows_the_keys() {
    let dir = scratch_dir("query-bare-columns");
    let db = dir.join("bare.db");
    build(&db);
    let queries = [
        "SELECT c, rowid, pad FROM k GROUP BY c",
        "SELECT c, x, max(n), y FROM k GROUP BY c",
        "SELECT c, min(x), rowid, length(pad) FROM k GROUP BY c",
        "SELECT r, rowid, min(n), max(y) FROM k GROUP BY r",
        "SELECT n, rowid FROM k GROUP BY n HAVING max(x) IS NOT NULL ORDER BY rowid",
        "SELECT c, count(*) FROM k GROUP BY c HAVING y > 'm' ORDER BY x, 1",
        "SELECT rowid, max(x), c FROM k",
        "SELECT min(n), rowid, x FROM k",
        "SELECT rowid, count(*), y FROM k",
        "SELECT rowid, max(x) FROM k WHERE x IS NULL",
        "SELECT rowid, x, max(n) FROM k WHERE rowid > 1000",
        "SELECT x || '/' || c, max(rowid) FROM k GROUP BY n",
        "SELECT pad, rowid, max(x) FILTER (WHERE n = 1) FROM k GROUP BY pad",
        "SELECT rowid, max(DISTINCT x) FROM k",
        "SELECT rowid, max(x) FILTER (WHERE n = 1) FROM k",
    ];
    for sql in queries {
        let refused =
            sql.contains("DISTINCT") || (sql.contains("FILTER") && !sql.contains("GROUP"));
        let t = QueryTester::new(&db, sql).span(&[Axis::Cores, Axis::Io]);
        if refused {
            // Which row shows the group then follows rules corescan does not model.
            t.fails_with("bare column").check();
        } else {
            t.check();
            // Every group spilled and merged back.
            QueryTester::new(&db, sql).memory(1).check();
        }
    }
    // Through an index: SQLite's loop delivers the groups in the index's order, each
    // group's rows in rowid order (walked forwards), or refuses where corescan cannot follow.
    let indexed = dir.join("indexed.db");
    build(&indexed);
    Connection::open(&indexed)
        .unwrap()
        .execute_batch("CREATE INDEX k_n ON k(n); CREATE INDEX k_c ON k(c); ANALYZE;")
        .unwrap();
    for sql in [
        "SELECT n, rowid, pad FROM k GROUP BY n",
        "SELECT c, y, max(x) FROM k GROUP BY c",
        "SELECT rowid, x, max(n) FROM k",
        "SELECT rowid, y, min(c) FROM k",
    ] {
        QueryTester::new(&indexed, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
}

/// Tables of tens of thousands of groups per executor, past the size from which a page's rows
/// hash their keys first and ask for their index entries ahead (`GroupTable::probes_ahead`):
/// keys that are one group under SQLite's rules though spelled apart (`7` and `7.0`, NOCASE
/// `'Key7'` and `'KEY7'`, RTRIM trailing spaces) and NULLs, met in no key order, with one and
/// two key parts, against SQLite for every core count and backend.
#[test]
fn tens_of_thousands_of_groups_spelled_apart_are_sqlites_groups() {
    let dir = scratch_dir("query-many-group-keys");
    let db = dir.join("many.db");
    let _ = std::fs::remove_file(&db);
    let mut conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE w(id INTEGER PRIMARY KEY, k, c TEXT COLLATE NOCASE, \
         r TEXT COLLATE RTRIM, v INTEGER);",
    )
    .unwrap();
    let tx = conn.transaction().unwrap();
    {
        let mut insert = tx
            .prepare("INSERT INTO w(k, c, r, v) VALUES (?1, ?2, ?3, ?4)")
            .unwrap();
        let mut rng = testkit::Rng::xorshift64(0x2545_f491_4f6c_dd1d);
        for id in 0..90_000i64 {
            let n = rng.below(45_000) as i64;
            let k: rusqlite::types::Value = match rng.below(10) {
                0 => rusqlite::types::Value::Null,
                1..=3 => rusqlite::types::Value::Real(n as f64),
                _ => rusqlite::types::Value::Integer(n),
            };
            let m = rng.below(40_000);
            let c = if rng.below(2) == 0 {
                format!("Key{m}")
            } else {
                format!("KEY{m}")
            };
            let r = format!(
                "r{}{}",
                rng.below(30_000),
                " ".repeat(rng.below(3) as usize)
            );
            insert
                .execute(rusqlite::params![k, c, r, id % 1000])
                .unwrap();
        }
    }
    tx.commit().unwrap();
    for sql in [
        "SELECT k, count(*), sum(v) FROM w GROUP BY k ORDER BY 3 DESC, 1 LIMIT 20",
        "SELECT c, count(*), min(v) FROM w GROUP BY c",
        "SELECT r, count(*), max(id) FROM w GROUP BY r LIMIT 40 OFFSET 20000",
        "SELECT k, c, count(*) FROM w GROUP BY k, c HAVING count(*) > 1",
        "SELECT count(DISTINCT c), count(DISTINCT k) FROM w",
    ] {
        QueryTester::new(&db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
}
