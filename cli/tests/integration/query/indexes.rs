//! Tables with indexes: where SQLite reads a query through an index, its rows come in the
//! index's order, and corescan gives the same rows in the same order (under `LIMIT`/`OFFSET`,
//! among `ORDER BY` ties, and the order of groups), for every core count and backend.
//!
//! The files are written as applications write them: automatic indexes behind `UNIQUE` and
//! `PRIMARY KEY`, `COLLATE NOCASE`, `DESC` key columns, an index on an expression, a partial
//! index, and the same tables again after `ANALYZE` (`sqlite_stat1`, `sqlite_stat4`), whose
//! statistics change SQLite's choices. Leaves are out of rowid order (rows inserted below
//! the others at the end), ties and NULLs are many.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rusqlite::Connection;

use super::{sqlite_answer, Axis, QueryTester};
use crate::{corescan, scratch_dir};

/// The schema, as an application writes it.
const SCHEMA: &str = "
    PRAGMA page_size = 512;
    CREATE TABLE urls(id INTEGER PRIMARY KEY, url TEXT, title TEXT);
    CREATE INDEX urls_url ON urls(url);
    CREATE TABLE o(id INTEGER PRIMARY KEY, status TEXT, total INTEGER, note TEXT);
    CREATE INDEX o_s ON o(status);
    CREATE INDEX o_st ON o(status, total DESC);
    CREATE TABLE t(a, b, PRIMARY KEY(a, b));
    CREATE TABLE users(id INTEGER PRIMARY KEY, email TEXT UNIQUE, name TEXT COLLATE NOCASE,
                       age INTEGER);
    CREATE INDEX users_name ON users(name);
    CREATE TABLE kv(k TEXT PRIMARY KEY, v);
    CREATE TABLE ev(id INTEGER PRIMARY KEY, dev INTEGER, ts INTEGER, payload TEXT);
    CREATE INDEX ev_lower ON ev(lower(payload));
    CREATE INDEX ev_recent ON ev(ts) WHERE dev > 5;
    CREATE INDEX ev_dev ON ev(dev DESC, ts);
";

/// Writes the tables into `path`, and `ANALYZE`s them when `analyze`.
fn build(path: &Path, analyze: bool) {
    let _ = std::fs::remove_file(path);
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(SCHEMA).unwrap();
    let mut rng = testkit::Rng::xorshift64(0x2545_f491_4f6c_dd1d);
    let words = [
        "a", "b", "c", "m", "open", "Open", "paid", "zoe", "Zoë", "Zoey",
    ];
    conn.execute_batch("BEGIN").unwrap();
    for i in 0..900i64 {
        // The last 200 rows take rowids below every other, on the last pages.
        let id = if i < 700 { i + 1 } else { 699 - i };
        let w = |rng: &mut testkit::Rng| {
            if rng.percent(8) {
                None
            } else {
                Some(rng.pick(&words).to_string())
            }
        };
        let pad = "x".repeat(rng.index(60));
        conn.execute(
            "INSERT INTO urls VALUES (?1, ?2, ?3)",
            rusqlite::params![id, w(&mut rng), pad],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO o VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![
                id,
                w(&mut rng),
                (!rng.percent(5)).then(|| rng.below(20) as i64),
                pad
            ],
        )
        .unwrap();
        conn.execute(
            "INSERT OR IGNORE INTO t VALUES (?1, ?2)",
            rusqlite::params![rng.below(30) as i64, rng.below(30) as i64],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO users VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![
                id,
                (!rng.percent(5)).then(|| format!("u{}@x.org", (id * 7919).rem_euclid(100_003))),
                w(&mut rng),
                rng.below(90) as i64
            ],
        )
        .unwrap();
        conn.execute(
            "INSERT OR IGNORE INTO kv VALUES (?1, ?2)",
            rusqlite::params![format!("k{}", rng.below(5000)), pad],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO ev VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![
                id,
                (!rng.percent(5)).then(|| rng.below(10) as i64),
                rng.below(300) as i64,
                w(&mut rng)
            ],
        )
        .unwrap();
    }
    conn.execute_batch("COMMIT").unwrap();
    if analyze {
        conn.execute_batch("ANALYZE").unwrap();
    }
}

/// The file without statistics and the same file `ANALYZE`d, written once for every test.
pub(super) fn files() -> &'static [PathBuf; 2] {
    static FILES: OnceLock<[PathBuf; 2]> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = scratch_dir("query-indexes");
        let plain = dir.join("plain.db");
        let analyzed = dir.join("analyzed.db");
        build(&plain, false);
        build(&analyzed, true);
        [plain, analyzed]
    })
}

/// `EXPLAIN QUERY PLAN`'s lines for `sql` on `db`, joined.
fn sqlite_plan(db: &Path, sql: &str) -> String {
    let conn = Connection::open(db).unwrap();
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let lines: Vec<String> = stmt
        .query_map([], |row| row.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    lines.join("; ")
}

/// Queries SQLite reads through an index (most of them), in the index's order.
const QUERIES: &[&str] = &[
    "SELECT url FROM urls LIMIT 5",
    "SELECT * FROM urls LIMIT 5 OFFSET 3",
    "SELECT id FROM urls WHERE url > 'm' LIMIT 4",
    "SELECT id, url FROM urls WHERE url IN ('c', 'a', 'b') LIMIT 10 OFFSET 20",
    "SELECT id, url FROM urls WHERE url IN ('c', 'a', 'b') ORDER BY url DESC LIMIT 10",
    "SELECT id FROM urls ORDER BY url LIMIT 12",
    "SELECT id FROM urls ORDER BY url DESC LIMIT 12 OFFSET 40",
    "SELECT id FROM o ORDER BY status DESC LIMIT 5",
    "SELECT id, status FROM o WHERE status = 'open' LIMIT 5",
    "SELECT id, total FROM o WHERE status = 'open' ORDER BY total DESC LIMIT 6",
    "SELECT id, total FROM o WHERE status = 'paid' ORDER BY total LIMIT 6",
    "SELECT * FROM o WHERE status BETWEEN 'b' AND 'p' LIMIT 7 OFFSET 2",
    "SELECT status, count(*), sum(total) FROM o GROUP BY status",
    "SELECT status, count(*) FROM o GROUP BY status ORDER BY 2 DESC",
    "SELECT status, max(total) FROM o WHERE status > 'b' GROUP BY status ORDER BY status DESC",
    "SELECT * FROM t ORDER BY 1 DESC LIMIT 3",
    "SELECT * FROM t LIMIT 5 OFFSET 7",
    "SELECT b FROM t WHERE a = 3 LIMIT 4",
    "SELECT a, count(*) FROM t WHERE b = 3 GROUP BY a ORDER BY a DESC",
    "SELECT a, b FROM t WHERE b > 25 ORDER BY a LIMIT 6",
    "SELECT name FROM users WHERE name LIKE 'zo%' LIMIT 5",
    "SELECT id, name FROM users WHERE name LIKE 'zo%' ORDER BY name DESC LIMIT 5",
    "SELECT email FROM users LIMIT 5",
    "SELECT id FROM users WHERE email > 'u5' LIMIT 5",
    "SELECT name, count(*) FROM users GROUP BY name",
    "SELECT id, email FROM users WHERE email IS NULL LIMIT 3",
    "SELECT k FROM kv LIMIT 5",
    "SELECT * FROM kv WHERE k > 'k4' LIMIT 3 OFFSET 2",
    "SELECT rowid, k FROM kv ORDER BY k DESC LIMIT 4",
    "SELECT id FROM ev WHERE lower(payload) = 'zoe' LIMIT 3",
    "SELECT id, payload FROM ev ORDER BY lower(payload) LIMIT 5 OFFSET 30",
    "SELECT id, ts FROM ev WHERE dev > 5 AND ts > 100 LIMIT 5",
    "SELECT id, ts FROM ev WHERE dev > 6 AND ts BETWEEN 10 AND 90 ORDER BY ts DESC LIMIT 5",
    "SELECT id FROM ev WHERE dev = 3 ORDER BY ts LIMIT 5",
    "SELECT dev, max(ts), count(*) FROM ev GROUP BY dev",
    "SELECT dev, count(*) FROM ev GROUP BY dev ORDER BY 2",
    "SELECT * FROM ev ORDER BY dev LIMIT 5",
    "SELECT id FROM ev WHERE dev IN (2, 7) LIMIT 8",
    "SELECT count(*) FROM ev WHERE dev = 4",
    // A rowid among the group keys: each group is one row, and SQLite's scan delivers the
    // groups in rowid order, or an index in its order (found by the differential tester).
    "SELECT title, id, count(*) FROM urls GROUP BY 1, 2 LIMIT 6",
    "SELECT title, id, count(*) FROM urls GROUP BY 1, 2 ORDER BY 3 LIMIT 6 OFFSET 2",
    "SELECT status, id FROM o GROUP BY status, id LIMIT 6",
    "SELECT status, id, note FROM o GROUP BY status, id, note LIMIT 6 OFFSET 1",
    "SELECT total, id, count(*) FROM o GROUP BY total, id ORDER BY 3 DESC LIMIT 5",
    // A rowid IN list is walked forwards; the `Last` of the top-K sorter that `ORDER BY ...
    // LIMIT` adds is not the loop's (tester table seed 8348502656852254988: first_value()
    // took the list's last row).
    "SELECT id, first_value(id) OVER () FROM o WHERE id IN (40, 2, 7, 33) ORDER BY id LIMIT 3",
    // "The latest row per key": a bare column beside the max() of the index's last column
    // shows the row a scan shows (ties of the max come by rowid either way; dev is DESC in
    // ev_dev, total in o_st).
    "SELECT dev, max(ts), id, payload FROM ev GROUP BY dev",
    "SELECT dev, min(ts), payload, count(*) FROM ev WHERE dev > 2 GROUP BY dev ORDER BY 2, 1",
    "SELECT status, max(total), id, note FROM o GROUP BY status",
    "SELECT status, min(total), id FROM o GROUP BY status ORDER BY 3",
    "SELECT id, first_value(note) OVER (), status FROM o WHERE id IN (SELECT total % 90 FROM o) ORDER BY 3 DESC LIMIT 5",
];

#[test]
fn rows_come_in_the_order_of_the_index_sqlite_reads() {
    let mut through_an_index = 0;
    for db in files().iter() {
        for sql in QUERIES {
            if sqlite_plan(db, sql).contains("INDEX") {
                through_an_index += 1;
            }
            QueryTester::new(db, *sql)
                .span(&[Axis::Cores, Axis::Io])
                .check();
        }
    }
    // The test is about indexes: most of its queries must be read through one.
    assert!(
        through_an_index > QUERIES.len(),
        "only {through_an_index} of {} plans use an index",
        2 * QUERIES.len()
    );
}

/// The three examples of the issue, with SQLite's answers written out.
#[test]
fn the_issue_examples() {
    let dir = scratch_dir("query-indexes-examples");
    let cases: [(&str, &str, &str); 3] = [
        (
            "CREATE TABLE urls(id INTEGER PRIMARY KEY, url TEXT, title TEXT);
             CREATE INDEX urls_url ON urls(url);
             INSERT INTO urls(url, title) VALUES ('b', 'B page'), ('a', 'A page');",
            "SELECT url FROM urls LIMIT 1",
            "url\na\n",
        ),
        (
            "CREATE TABLE o(id INTEGER PRIMARY KEY, status TEXT); CREATE INDEX o_s ON o(status);
             INSERT INTO o(status) VALUES ('a'), ('a');",
            "SELECT id FROM o ORDER BY status DESC LIMIT 1",
            "id\n2\n",
        ),
        (
            "CREATE TABLE t(a, b, PRIMARY KEY(a, b)); INSERT INTO t VALUES (0,0), (0,1);",
            "SELECT * FROM t ORDER BY 1 DESC LIMIT 3",
            "a,b\n0,1\n0,0\n",
        ),
    ];
    for (i, (schema, sql, csv)) in cases.iter().enumerate() {
        let db = dir.join(format!("example{i}.db"));
        Connection::open(&db)
            .unwrap()
            .execute_batch(schema)
            .unwrap();
        let run = corescan(["query", db.to_str().unwrap(), sql, "--format", "csv"]);
        assert_eq!(run.status, 0, "{sql}: {}", run.stderr);
        assert_eq!(run.stdout, *csv, "{sql}");
        QueryTester::new(&db, *sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
}

/// The report shows SQLite's plan and what corescan ran for it, as text and as JSON.
#[test]
fn the_report_shows_sqlites_plan() {
    let [plain, _] = files();
    let plain = plain.as_path();
    let db = plain.to_str().unwrap();
    let sql = "SELECT id FROM o ORDER BY status DESC LIMIT 3";
    let run = corescan(["query", db, sql, "--report"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let line = |label: &str| {
        run.stderr
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label:?} line in {}", run.stderr))
            .to_string()
    };
    let want = sqlite_plan(plain, sql);
    assert!(
        line("sqlite plan").ends_with(&want),
        "{} / {want}",
        run.stderr
    );
    assert!(
        line("corescan").contains("the first 3 entries of index \"o_s\""),
        "{}",
        run.stderr
    );

    let plan_of = |sql: &str| {
        let run = corescan(["query", db, sql, "--report", "--format", "json"]);
        assert_eq!(run.status, 0, "{}", run.stderr);
        let report: serde_json::Value =
            serde_json::from_str(run.stderr.lines().last().unwrap()).unwrap();
        let plan = report["sqlite_plan"].clone();
        (
            plan["sqlite"][0].as_str().unwrap().to_string(),
            plan["corescan"].as_str().unwrap().to_string(),
        )
    };
    let (sqlite, ran) = plan_of("SELECT status, count(*), max(note) FROM o GROUP BY status");
    assert!(sqlite.contains("USING INDEX o_s"), "{sqlite}");
    assert!(ran.contains("groups ordered"), "{ran}");
    // An index that covers the query is scanned in place of the table.
    let (sqlite, ran) = plan_of("SELECT status, count(*) FROM o GROUP BY status");
    assert!(
        sqlite.contains("SCAN o USING COVERING INDEX o_s"),
        "{sqlite}"
    );
    let scanned = "the entries of index \"o_s\" in key order in place of the table's rows";
    assert!(ran.contains(scanned), "{ran}");

    // A table without indexes has no plan to follow: its loop is always in rowid order.
    let bare = plain.with_file_name("bare.db");
    let _ = std::fs::remove_file(&bare);
    Connection::open(&bare)
        .unwrap()
        .execute_batch("CREATE TABLE b(x); INSERT INTO b VALUES (2), (1);")
        .unwrap();
    let run = corescan([
        "query",
        bare.to_str().unwrap(),
        "SELECT x FROM b LIMIT 1",
        "--report",
        "--format",
        "json",
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(run.stdout.trim(), r#"[{"x":2}]"#);
    let report: serde_json::Value =
        serde_json::from_str(run.stderr.lines().last().unwrap()).unwrap();
    assert!(report["sqlite_plan"].is_null(), "{report}");
}

/// Where SQLite's loop reads an index and stops at the `LIMIT` (no `WHERE`, no sorter
/// after it), corescan reads the first entries of the index, then only their rows: a few
/// leaves, not the table; the rows and order are SQLite's (checked with the others above).
#[test]
fn a_limit_over_an_index_reads_its_first_entries() {
    for db in files().iter() {
        let all = partitioner::TablePlan::open(db, "ev").unwrap().leaves.len();
        for sql in [
            "SELECT * FROM ev ORDER BY dev LIMIT 5",
            "SELECT * FROM ev ORDER BY dev DESC LIMIT 5 OFFSET 10",
            "SELECT id, payload FROM ev ORDER BY lower(payload) DESC LIMIT 7",
            "SELECT id FROM ev ORDER BY dev, ts DESC LIMIT 3",
            // Past an OFFSET: the entries before it counted (whole leaves from their cell
            // counts), not read, and only the rows after it read.
            "SELECT * FROM ev ORDER BY dev LIMIT 5 OFFSET 600",
            "SELECT id, payload FROM ev ORDER BY lower(payload) DESC LIMIT 7 OFFSET 433",
            "SELECT id FROM ev ORDER BY dev LIMIT 3 OFFSET 897",
            "SELECT id FROM ev ORDER BY dev LIMIT 3 OFFSET 950",
            "SELECT url FROM urls LIMIT 4 OFFSET 777",
        ] {
            let planned = corescan_sql::plan_query(db, sql).unwrap();
            let how = &planned.index_plan.as_ref().expect("an index plan").corescan;
            assert!(how.contains("first"), "{sql}: {how}");
            if sql.contains("OFFSET") {
                let offset = sql.rsplit(' ').next().unwrap();
                assert!(
                    how.contains(&format!("after the first {offset} (counted)")),
                    "{sql}: {how}"
                );
                assert_eq!(planned.query.offset, 0, "{sql}: the OFFSET is spent");
            }
            let read = planned.table.leaves.len();
            assert!(read <= 15 && read < all, "{sql}: {read} of {all} leaves");
            QueryTester::new(db, sql)
                .span(&[Axis::Cores, Axis::Io])
                .check();
        }
        // A WHERE, a sorter after the loop, or no LIMIT: the table is scanned.
        for sql in [
            "SELECT * FROM ev WHERE ts > 5 ORDER BY dev LIMIT 5",
            "SELECT * FROM ev ORDER BY dev, payload LIMIT 5",
            "SELECT * FROM ev ORDER BY dev",
            // ev_dev is (dev DESC, ts): SQLite sorts the right part.
            "SELECT id FROM ev ORDER BY dev DESC, ts DESC LIMIT 3",
        ] {
            let planned = corescan_sql::plan_query(db, sql).unwrap();
            assert!(planned.query.rowid_ranges().is_none(), "{sql}");
        }
    }
}

/// `LIMIT n OFFSET m` where SQLite's loop reads the table in rowid order (no `WHERE`, no
/// sorter, no index): corescan counts the first `m` rows from the leaves' cell counts and
/// reads only the `n` rows after them (forwards and backwards, past the end, on tables with
/// and without indexes), and the `OFFSET` is spent. An output column that would fail on a
/// row the `OFFSET` passes over is never computed, by either engine.
#[test]
fn an_offset_over_the_table_is_counted_not_read() {
    let mixed = super::fixture();
    let cases: Vec<(&Path, &str)> = files()
        .iter()
        .flat_map(|db| {
            [
                "SELECT * FROM ev LIMIT 5 OFFSET 600",
                "SELECT id, payload FROM ev ORDER BY id DESC LIMIT 7 OFFSET 433",
                "SELECT * FROM ev LIMIT 3 OFFSET 898",
                "SELECT * FROM ev LIMIT 3 OFFSET 950",
                "SELECT rowid, * FROM kv LIMIT 4 OFFSET 100",
            ]
            .map(|sql| (db.as_path(), sql))
        })
        .chain([
            (mixed, "SELECT id, s, x FROM t LIMIT 10 OFFSET 150"),
            (
                mixed,
                "SELECT id, CASE WHEN id = 100 THEN abs(-9223372036854775807 - 1) END \
                 FROM t LIMIT 3 OFFSET 200",
            ),
            (
                mixed,
                "SELECT id, gs, g FROM t ORDER BY rowid DESC LIMIT 2 OFFSET 37",
            ),
        ])
        .collect();
    for (db, sql) in cases {
        let planned = corescan_sql::plan_query(db, sql).unwrap();
        assert_eq!(planned.query.offset, 0, "{sql}: the OFFSET is spent");
        let ranges = planned
            .query
            .rowid_ranges()
            .expect("only the rows after it");
        assert!(ranges.len() <= 10, "{sql}: {ranges:?}");
        if let Some(p) = &planned.index_plan {
            assert!(p.corescan.contains("(counted)"), "{sql}: {}", p.corescan);
        }
        QueryTester::new(db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    // A WHERE, a sorter or an aggregate: the rows before the OFFSET are read.
    for sql in [
        "SELECT * FROM ev WHERE ts > 5 LIMIT 5 OFFSET 10",
        "SELECT * FROM ev ORDER BY payload LIMIT 5 OFFSET 10",
        "SELECT DISTINCT dev FROM ev LIMIT 5 OFFSET 10",
    ] {
        let planned = corescan_sql::plan_query(&files()[0], sql).unwrap();
        assert_eq!(planned.query.offset, 10, "{sql}");
    }
}

/// `min(x)` and `max(x)` where SQLite reads one entry of an index on `x` (`SEARCH ... USING
/// COVERING INDEX`): corescan reads that entry, then its row, and shows SQLite's value of
/// equal keys that differ (`'open'` and `'Open'`, `'zoe'` and `'Zoë'` under `NOCASE`: the last
/// entry of the ties for `max()`, the first non-NULL one for `min()`); `DESC` columns, the
/// automatic indexes of `UNIQUE` and `PRIMARY KEY`, NULLs only, no rows.
#[test]
fn min_and_max_read_one_entry_of_the_index() {
    let dir = scratch_dir("query-indexes-minmax");
    let nulls = dir.join("nulls.db");
    let _ = std::fs::remove_file(&nulls);
    Connection::open(&nulls)
        .unwrap()
        .execute_batch(
            "CREATE TABLE n(id INTEGER PRIMARY KEY, x TEXT COLLATE NOCASE, y);
             CREATE INDEX n_x ON n(x); CREATE INDEX n_y ON n(y DESC);
             INSERT INTO n(x, y) VALUES (NULL, NULL), (NULL, NULL);
             CREATE TABLE e(x); CREATE INDEX e_x ON e(x);",
        )
        .unwrap();
    let mut cases: Vec<(&Path, &str)> = Vec::new();
    for db in files().iter() {
        for sql in [
            "SELECT max(name) FROM users",
            "SELECT min(name), typeof(min(name)) FROM users",
            "SELECT max(email) FROM users",
            "SELECT min(url) FROM urls",
            "SELECT max(status) || '!' FROM o",
            "SELECT max(dev) FROM ev",
            "SELECT min(dev) FROM ev",
            "SELECT min(k), max(k) FROM kv",
        ] {
            cases.push((db, sql));
        }
    }
    for sql in [
        "SELECT min(x) FROM n",
        "SELECT max(x) FROM n",
        "SELECT min(y) FROM n",
        "SELECT max(y) FROM n",
        "SELECT min(x) FROM e",
        "SELECT max(x) FROM e",
    ] {
        cases.push((&nulls, sql));
    }
    let mut one_entry = 0;
    for (db, sql) in cases {
        let planned = corescan_sql::plan_query(db, sql).unwrap();
        let reads_one = planned
            .index_plan
            .as_ref()
            .is_some_and(|p| p.corescan.contains("min()/max() reads"));
        if reads_one {
            one_entry += 1;
            assert!(
                planned.table.leaves.len() <= 1,
                "{sql}: {} leaves",
                planned.table.leaves.len()
            );
        }
        QueryTester::new(db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    assert!(one_entry >= 14, "only {one_entry} queries read one entry");
    // `max(+x)` is planned as the same SEARCH, but its loop reads every entry (no early
    // out in the bytecode): not the one-entry read, whose answer would be that entry's row
    // alone (the differential tester's table seed 11824729079214927573, a NULL for a blob).
    for db in files().iter() {
        for sql in ["SELECT max(+name) FROM users", "SELECT min(+dev) FROM ev"] {
            match corescan_sql::plan_query(db, sql) {
                Ok(planned) => {
                    assert!(
                        !planned
                            .index_plan
                            .as_ref()
                            .is_some_and(|p| p.corescan.contains("min()/max() reads")),
                        "{sql}: reads one entry"
                    );
                    QueryTester::new(db, sql).span(&[Axis::Cores]).check();
                }
                Err(e) => assert!(e.to_string().contains("depends on the order"), "{sql}: {e}"),
            }
        }
    }
    // min() and max() of the rowid read the table's first or last leaf (the rows inserted
    // last have the lowest rowids, on the last pages).
    for db in files().iter() {
        for sql in [
            "SELECT max(id) FROM urls",
            "SELECT min(id) FROM urls",
            "SELECT max(rowid) + 1, typeof(max(rowid)) FROM o",
            "SELECT min(_rowid_) FROM ev",
        ] {
            let planned = corescan_sql::plan_query(db, sql).unwrap();
            assert_eq!(planned.table.leaves.len(), 1, "{sql}");
            QueryTester::new(db, sql)
                .span(&[Axis::Cores, Axis::Io])
                .check();
        }
    }
    for sql in ["SELECT min(rowid) FROM e", "SELECT max(rowid) FROM n"] {
        QueryTester::new(&nulls, sql).span(&[Axis::Cores]).check();
    }
}

/// A `WHERE` bounding the first column of the index SQLite reads with literals: corescan
/// reads the index's entries in that range, then only their rows. On columns holding every
/// storage class (integers, reals, `-0.0`, numeric-looking text, blobs, NULL), with and without
/// a type, `NOCASE` and `RTRIM`, in `ASC` and `DESC` indexes, at the ends of the 64-bit range,
/// and comparisons whose affinity converts the column's values (a `CAST` folded to a literal),
/// which must not be sought; each answer SQLite's for every core count and backend.
#[test]
fn literal_bounds_seek_the_index_range() {
    let db = scratch_dir("query-indexes-ranges").join("ranges.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 512;
         CREATE TABLE m(id INTEGER PRIMARY KEY, u, n NUMERIC, r REAL, d INT, t TEXT,
                        c TEXT COLLATE NOCASE, rt TEXT COLLATE RTRIM, pad TEXT);
         CREATE INDEX m_u ON m(u); CREATE INDEX m_n ON m(n); CREATE INDEX m_r ON m(r);
         CREATE INDEX m_d ON m(d DESC, u); CREATE INDEX m_t ON m(t); CREATE INDEX m_c ON m(c);
         CREATE INDEX m_rt ON m(rt DESC);",
    )
    .unwrap();
    let values = [
        "NULL",
        "0",
        "1",
        "2",
        "2.0",
        "2.5",
        "-0.0",
        "-3",
        "'5'",
        "'abc'",
        "'ABC'",
        "'abc '",
        "x'01'",
        "7",
        "9223372036854775807",
        "-9223372036854775808",
        "1e300",
        "'2'",
        "4",
        "5",
        "'b'",
        "'B'",
        "'2024-12-30 10:00'",
        "'2024-12-31'",
    ];
    let mut rng = testkit::Rng::xorshift64(0x5eed_1234);
    conn.execute_batch("BEGIN").unwrap();
    for i in 0..3000 {
        let mut v = || values[rng.index(values.len())];
        let sql = format!(
            "INSERT INTO m VALUES ({i}, {}, {}, {}, {}, {}, {}, {}, printf('%.*c', {}, 'p'))",
            v(),
            v(),
            v(),
            v(),
            v(),
            v(),
            v(),
            i % 40
        );
        conn.execute_batch(&sql).unwrap();
    }
    conn.execute_batch("COMMIT").unwrap();
    drop(conn);
    let (mut sought, mut counted) = (0, 0);
    for column in ["u", "n", "r", "d", "t", "c", "rt"] {
        for cond in [
            "= 2",
            "= 2.0",
            "> 2",
            ">= 2.5",
            "< 1",
            "<= -3",
            "BETWEEN 1 AND 4",
            "IN (2, 5, 7)",
            "IN (2.0, -0.0)",
            ">= 9223372036854775807",
            "< -9223372036854775807",
            "> 1e299",
            "= 5 OR 1",
            "= 'abc'",
            "= 'abc  '",
            "> '2'",
            "BETWEEN 'a' AND 'b'",
            "IN ('2', '5', 'B')",
            // One range per value, in the index's order (a DESC one's, a collation's).
            "IN (4, 1, 9223372036854775807, 0, -3, 'abc', x'01', 2.0, 1e300)",
            "IN ('b', 'ABC', 'B', 2, '2', 'abc ')",
            // SQLite's OR-to-IN (`{c}` is the column).
            "= 2 OR {c} = 7 OR {c} IS 'abc'",
            "= 4 OR {c} IN (0, 'B') OR {c} = x'01'",
            "= 4 OR {c} > 7",
            // The NULL entries: a range of their own.
            "IS NULL",
            "IS NULL OR {c} IN (2, 'abc')",
            "= 0 OR {c} IS NULL OR {c} = x'01'",
            "IS NULL AND {c} > 2",
            "> '2024-12-30'",
            "< x'02'",
            "= CAST(5 AS TEXT)",
            "= CAST('5' AS INTEGER)",
            "> CAST(1 AS TEXT)",
        ] {
            let cond = cond.replace("{c}", column);
            for shape in [
                format!("SELECT id, {column} FROM m WHERE {column} {cond}"),
                format!("SELECT id FROM m WHERE {column} {cond} LIMIT 7"),
                format!("SELECT count(*), sum(id) FROM m WHERE {column} {cond} AND id > 10"),
                format!(
                    "SELECT id FROM m WHERE {column} IS NOT NULL AND {column} {cond} \
                     ORDER BY id DESC LIMIT 3"
                ),
                // Counted from the index where the WHERE is exactly the range.
                format!("SELECT count(*) FROM m WHERE {column} {cond}"),
                format!("SELECT count(*) * 2, count(*) FROM m WHERE {column} {cond} AND 7 > 2"),
            ] {
                let planned = corescan_sql::plan_query(&db, &shape).unwrap();
                if let Some(p) = planned.index_plan.as_ref() {
                    // Read by rowid, or scanned in the index that covers the query.
                    if p.corescan.contains("range the WHERE bounds") {
                        sought += 1;
                    }
                    if p.corescan.contains("counted") {
                        counted += 1;
                    }
                }
                // Every core count; the backend rotates from query to query.
                QueryTester::new(&db, &shape).span(&[Axis::Cores]).check();
            }
        }
    }
    assert!(sought > 150, "only {sought} queries sought an index range");
    assert!(
        counted > 40,
        "only {counted} counts came from an index range"
    );
}

/// A damaged index is one `error:` line naming the file and the page; an index that lists
/// rowids its table lacks (its root pointed at another table's index) is one naming the file,
/// as SQLite reports `database disk image is malformed`.
/// `count(*)` of a whole table, where SQLite counts an index (`SCAN t USING COVERING INDEX
/// i`, its `OP_Count`): corescan counts the same index's entries from its pages' cell counts
/// and reads no table page; with a `WHERE`, a partial index only, or another aggregate
/// beside it, the table is scanned.
#[test]
fn count_star_counts_the_index_sqlite_counts() {
    let dir = scratch_dir("query-indexes-count");
    let partial = dir.join("partial.db");
    let _ = std::fs::remove_file(&partial);
    Connection::open(&partial)
        .unwrap()
        .execute_batch(
            "CREATE TABLE p(id INTEGER PRIMARY KEY, x, pad);
             CREATE INDEX p_x ON p(x) WHERE x > 5;
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
             INSERT INTO p(x, pad) SELECT i % 9, zeroblob(100) FROM n;
             CREATE TABLE e(x); CREATE INDEX e_x ON e(x);",
        )
        .unwrap();
    let mut cases: Vec<(&Path, &str)> = Vec::new();
    for db in files().iter() {
        for sql in [
            "SELECT count(*) FROM urls",
            "SELECT count(*) FROM o",
            "SELECT count(*) FROM users",
            "SELECT count(*) FROM kv",
            "SELECT count(*) FROM ev",
            "SELECT count(*) FROM t",
            "SELECT count(*) * 2, count(*) + 0.5 AS half FROM o HAVING count(*) > 1 ORDER BY half",
            "SELECT count(*) FROM o LIMIT 1 OFFSET 1",
            "SELECT count(*) FROM o WHERE id > 0",
            "SELECT count(*), count(status) FROM o",
        ] {
            cases.push((db, sql));
        }
    }
    cases.extend([
        (partial.as_path(), "SELECT count(*) FROM p"),
        (partial.as_path(), "SELECT count(*) FROM e"),
    ]);
    let mut counted = 0;
    for (db, sql) in cases {
        let planned = corescan_sql::plan_query(db, sql).unwrap();
        if planned
            .index_plan
            .as_ref()
            .is_some_and(|p| p.corescan.contains("counted from its pages"))
        {
            counted += 1;
            assert!(sqlite_plan(db, sql).contains("COVERING INDEX"), "{sql}");
            assert!(!sql.contains("WHERE") && !sql.contains("FROM p"), "{sql}");
        }
        QueryTester::new(db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    // Every table of the two files but one whose only index is its rowid's.
    assert!(counted >= 12, "{counted} counted");
    // The report says what was read: the index's pages, no table page.
    let db = files()[0].to_str().unwrap();
    let run = corescan(["query", db, "SELECT count(*) FROM o", "--report"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("counted from its pages' cell counts, no table page read")
            && run
                .stderr
                .contains("auto: the scan reads no table page, so pread"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_damaged_index_is_a_clean_error() {
    let dir = scratch_dir("query-indexes-damaged");
    let db = dir.join("damaged.db");
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            "PRAGMA page_size = 512;
             CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, w); CREATE INDEX t_v ON t(v);
             CREATE TABLE u(id INTEGER PRIMARY KEY, v TEXT); CREATE INDEX u_v ON u(v);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
             INSERT INTO t SELECT i, printf('%08d', i * 7919 % 3001), i FROM n;
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
             INSERT INTO u SELECT i + 100000, printf('%08d', i) FROM n;",
        )
        .unwrap();
    let sql = "SELECT * FROM t ORDER BY v LIMIT 4";
    assert!(sqlite_plan(&db, sql).contains("t_v"));
    let good = corescan(["query", db.to_str().unwrap(), sql, "--format", "csv"]);
    assert_eq!(good.status, 0, "{}", good.stderr);

    // The index's first leaf made a table leaf.
    let copy = dir.join("leaf.db");
    std::fs::copy(&db, &copy).unwrap();
    let root: u32 = Connection::open(&copy)
        .unwrap()
        .query_row(
            "SELECT rootpage FROM sqlite_schema WHERE name = 't_v'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let bytes = std::fs::read(&copy).unwrap();
    let page = |n: u32| &bytes[(n as usize - 1) * 512..n as usize * 512];
    assert_eq!(page(root)[0], 0x02, "a root with children");
    let first_cell = u16::from_be_bytes(page(root)[12..14].try_into().unwrap()) as usize;
    let child = u32::from_be_bytes(page(root)[first_cell..first_cell + 4].try_into().unwrap());
    let file = std::fs::OpenOptions::new().write(true).open(&copy).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[0x0d], u64::from(child - 1) * 512).unwrap();
    drop(file);
    let run = corescan(["query", copy.to_str().unwrap(), sql]);
    assert_ne!(run.status, 0);
    run.assert_error_line(&[copy.to_str().unwrap(), &format!("page {child}"), "index"]);
    // count(*) counts that index's cells without reading its records: the page still fails.
    let count = "SELECT count(*) FROM t";
    assert!(sqlite_plan(&db, count).contains("COVERING INDEX t_v"));
    let run = corescan(["query", copy.to_str().unwrap(), count]);
    assert_ne!(run.status, 0);
    run.assert_error_line(&[copy.to_str().unwrap(), &format!("page {child}"), "index"]);

    // The index of t pointed at u's, whose rowids t lacks (SQLite fails as it seeks the
    // first row; for a query the index covers it would answer from the index alone, where
    // corescan, which reads the rows from the table, fails).
    let copy = dir.join("swapped.db");
    std::fs::copy(&db, &copy).unwrap();
    let conn = Connection::open(&copy).unwrap();
    conn.execute_batch(
        "PRAGMA writable_schema = ON;
         UPDATE sqlite_schema SET rootpage = (SELECT rootpage FROM sqlite_schema
                                               WHERE name = 'u_v') WHERE name = 't_v';",
    )
    .unwrap();
    drop(conn);
    assert!(sqlite_answer(&copy, sql).is_err(), "SQLite fails too");
    let run = corescan(["query", copy.to_str().unwrap(), sql]);
    assert_ne!(run.status, 0);
    run.assert_error_line(&[copy.to_str().unwrap(), "malformed", "t_v"]);
}

/// Where SQLite's loop is one corescan cannot follow (`MULTI-INDEX OR` over a term SQLite
/// splits into more loops: `BETWEEN`) and the answer depends on its order, the query is
/// refused with SQLite's plan in the message; where the order cannot matter, it is answered.
/// (A `MULTI-INDEX OR` of plain terms is followed: one index's rows, then the next's not yet
/// seen, `multi_index_or_rows_come_as_sqlites_loops_meet_them`.)
#[test]
fn loops_corescan_cannot_follow_are_refused_where_order_matters() {
    let [plain, _] = files();
    let plain = plain.as_path();
    let sql = "SELECT id FROM o WHERE status = 'paid' OR id < 5 LIMIT 4";
    assert!(
        sqlite_plan(plain, sql).contains("MULTI-INDEX OR"),
        "{}",
        sqlite_plan(plain, sql)
    );
    QueryTester::new(plain, sql).span(&[Axis::Cores]).check();
    let sql = "SELECT id FROM o WHERE status BETWEEN 'o' AND 'q' OR id < 5 LIMIT 4";
    assert!(
        sqlite_plan(plain, sql).contains("MULTI-INDEX OR"),
        "{}",
        sqlite_plan(plain, sql)
    );
    let run = corescan(["query", plain.to_str().unwrap(), sql]);
    assert_ne!(run.status, 0);
    run.assert_error_line(&["MULTI-INDEX OR", "cannot follow"]);

    let sql = "SELECT count(*), sum(total) FROM o WHERE status = 'paid' OR id < 5";
    assert!(sqlite_plan(plain, sql).contains("MULTI-INDEX OR"));
    QueryTester::new(plain, sql)
        .span(&[Axis::Cores, Axis::Io])
        .check();
    assert!(sqlite_answer(plain, sql).is_ok());

    // Groups whose keys have no type (1 and 1.0 are one group), read through an index with
    // a key column that is not a group key: which key value a group shows depends on the
    // order of its rows, which corescan takes from the rows' places in the index.
    let sql = "SELECT a, count(*) FROM t GROUP BY a";
    assert!(sqlite_plan(plain, sql).contains("sqlite_autoindex_t_1"));
    QueryTester::new(plain, sql)
        .span(&[Axis::Cores, Axis::Io])
        .check();

    // group_concat over groups read through o_st lists a group's rows in the index's order
    // (by total DESC, then rowid), which corescan gives it as an ORDER BY inside (also after
    // the aggregate's own, whose ties come in that order); with ORDER BY inside that leaves
    // no ties that show (a rowid term last, or the argument itself under BINARY), it answers
    // as SQLite does either way. DISTINCT keeps each value's first row in the loop's order.
    let sql = "SELECT status, group_concat(DISTINCT total) FROM o GROUP BY status";
    assert!(
        sqlite_plan(plain, sql).contains("o_st"),
        "{}",
        sqlite_plan(plain, sql)
    );
    QueryTester::new(plain, sql)
        .span(&[Axis::Cores, Axis::Io])
        .check();
    for sql in [
        "SELECT status, group_concat(total) FROM o GROUP BY status",
        "SELECT status, group_concat(id, ';'), json_group_array(total), json_group_object(id, note) FROM o GROUP BY status",
        "SELECT status, group_concat(id ORDER BY status) FROM o GROUP BY status",
        "SELECT json_group_array(id) FROM o WHERE status = 'paid'",
        "SELECT status, group_concat(id ORDER BY total DESC, id), json_group_array(total ORDER BY total, id) FROM o GROUP BY status",
        "SELECT status, group_concat(total ORDER BY total DESC) FROM o GROUP BY status",
    ] {
        assert!(sqlite_plan(plain, sql).contains("INDEX o_s"), "{}", sqlite_plan(plain, sql));
        QueryTester::new(plain, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }

    // Groups a sorter makes from an index's loop (USE TEMP B-TREE FOR GROUP BY): a group's
    // rows keep the loop's order (the sorter's records end with a sequence number).
    for sql in [
        "SELECT total, group_concat(id) FROM o WHERE status > 'b' GROUP BY total",
        "SELECT length(payload), json_group_array(id), group_concat(ts ORDER BY length(dev)) FROM ev WHERE dev > 2 GROUP BY 1",
    ] {
        let plan = sqlite_plan(plain, sql);
        assert!(
            plan.contains("INDEX") && plan.contains("B-TREE FOR GROUP BY"),
            "{plan}"
        );
        QueryTester::new(plain, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }

    // Groups whose keys are the index's, the index walked backwards (SQLite gives the GROUP
    // BY the ORDER BY's direction): each group's rows come in descending rowid order, so
    // group_concat lists them backwards (answered, in that order) and a NOCASE key shows its
    // first row's spelling in that order (the rows' places in the index); forwards, and where
    // nothing depends on the order of rows, answered (the differential tester's table seed
    // 17804059554064902102).
    {
        let sql = "SELECT name, count(*) FROM users GROUP BY name ORDER BY name DESC";
        let plan = sqlite_plan(plain, sql);
        assert!(
            plan.contains("INDEX") && !plan.contains("B-TREE FOR GROUP BY"),
            "{plan}"
        );
    }
    for sql in [
        "SELECT name, count(*) FROM users GROUP BY name ORDER BY name DESC",
        "SELECT status, group_concat(id) FROM o GROUP BY status ORDER BY status",
        // Backwards, group_concat lists the rows in the index's order reversed.
        "SELECT status, group_concat(id) FROM o GROUP BY status ORDER BY status DESC",
        "SELECT status, count(*), sum(total) FROM o GROUP BY status ORDER BY status DESC",
        "SELECT name, count(*) FROM users GROUP BY name ORDER BY name",
    ] {
        QueryTester::new(plain, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }

    // ORDER BY ... LIMIT sorted after an index's loop: SQLite computes the output columns of
    // the rows its sorter takes as they come in the index's order, so which failing rows it
    // meets is not corescan's rowid-order model: refused where an output can fail, answered
    // otherwise (the differential tester's run seed 1796506713577954049, where corescan
    // answered and SQLite failed on a blob given to json_quote).
    let sql = "SELECT id, json(status) FROM o WHERE status > 'b' ORDER BY total LIMIT 2";
    let plan = sqlite_plan(plain, sql);
    assert!(
        plan.contains("INDEX o_s") && plan.contains("B-TREE FOR ORDER BY"),
        "{plan}"
    );
    let run = corescan(["query", plain.to_str().unwrap(), sql]);
    assert_ne!(run.status, 0, "{sql}: {}", run.stdout);
    run.assert_error_line(&[
        "ORDER BY with LIMIT sorted after a loop over index",
        "can fail",
    ]);
    let sql = "SELECT id, status, total FROM o WHERE status > 'b' ORDER BY total LIMIT 2";
    QueryTester::new(plain, sql)
        .span(&[Axis::Cores, Axis::Io])
        .check();
}

/// Groups whose rows SQLite's loop meets in an index's order, where that order shows (which
/// row a bare column comes from, which of tied maxima `max()` keeps, the first of a DISTINCT
/// aggregate's equal values, the order `group_concat` lists): the index has key columns past
/// the group keys (`ev_dev` on `dev DESC, ts` for `GROUP BY dev`: "the latest row per
/// device"), is walked backwards, or is seeked with an `IN` list. corescan ranks each row by
/// its place in the index and answers as SQLite does, on every core count and backend; the
/// report says so.
#[test]
fn groups_take_their_rows_in_the_order_the_index_gives_them() {
    for db in files().iter() {
        for sql in [
            "SELECT dev, max(payload), id FROM ev GROUP BY dev",
            "SELECT dev, group_concat(id), min(ts), payload FROM ev GROUP BY dev",
            "SELECT dev, id, ts FROM ev GROUP BY dev",
            "SELECT dev, group_concat(DISTINCT payload) FROM ev WHERE dev IN (3, 1, 7) GROUP BY dev",
            "SELECT dev, min(payload), id FROM ev GROUP BY dev ORDER BY dev",
            "SELECT group_concat(id), max(payload), ts FROM ev WHERE dev = 4",
            "SELECT ts % 3, group_concat(id), json_group_array(dev) FROM ev WHERE dev IN (5, 2) GROUP BY 1",
            "SELECT ts / 50, max(payload), id FROM ev WHERE dev > 5 AND ts > 100 GROUP BY 1",
            "SELECT status, max(note), id FROM o GROUP BY status",
            "SELECT status, group_concat(note, '|') FROM o WHERE status IN ('paid', 'open') GROUP BY status",
            "SELECT name, count(*), max(age), id FROM users GROUP BY name",
        ] {
            QueryTester::new(db, sql)
                .span(&[Axis::Cores, Axis::Io])
                .check();
        }
        let sql = "SELECT dev, max(payload), id FROM ev GROUP BY dev";
        assert!(
            sqlite_plan(db, sql).contains("ev_dev"),
            "{}",
            sqlite_plan(db, sql)
        );
        let run = corescan(["query", "--report", db.to_str().unwrap(), sql]);
        assert_eq!(run.status, 0, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("ranked by their places in index \"ev_dev\" (900 entries read)"),
            "{}",
            run.stderr
        );
    }
}

/// A table row the index does not list, where corescan ranks a group's rows by their places
/// in that index (SQLite's loop would never meet the row, and answers without it): one clean
/// `error:` line naming the file, the page, the row and the index.
#[test]
fn a_row_missing_from_the_index_that_ranks_it_is_an_error() {
    let dir = scratch_dir("query-indexes-ranks");
    let db = dir.join("damaged.db");
    let _ = std::fs::remove_file(&db);
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE e(id INTEGER PRIMARY KEY, g INT, ts INT, v);
         CREATE INDEX e_g ON e(g, ts);
         CREATE TABLE f(id INTEGER PRIMARY KEY, g INT, ts INT, v);
         CREATE INDEX f_g ON f(g, ts);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50)
         INSERT INTO e SELECT i, i % 3, 100 - i, 'v' || i FROM n;
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5)
         INSERT INTO f SELECT i, i % 3, i, 'w' FROM n;
         PRAGMA writable_schema = ON;
         UPDATE sqlite_schema SET rootpage = (SELECT rootpage FROM sqlite_schema
                                               WHERE name = 'f_g') WHERE name = 'e_g';",
    )
    .unwrap();
    drop(conn);
    let sql = "SELECT g, v FROM e GROUP BY g";
    assert!(
        sqlite_plan(&db, sql).contains("e_g"),
        "{}",
        sqlite_plan(&db, sql)
    );
    let run = corescan(["query", db.to_str().unwrap(), sql]);
    assert_ne!(run.status, 0, "{}", run.stdout);
    run.assert_error_line(&[
        db.to_str().unwrap(),
        "page",
        "row 6 is missing from index \"e_g\"",
    ]);
}

/// NULLs placed against an index's order under a `LIMIT` the index serves: SQLite visits the
/// NULL entries in a loop of their own (first for `DESC NULLS FIRST`, last for `ASC NULLS
/// LAST`), so the index's first entries are not its first rows (the differential tester's run
/// seed 1796289694601585759).
#[test]
fn nulls_against_the_index_order_under_a_limit() {
    for db in files().iter() {
        for sql in [
            "SELECT id, status FROM o ORDER BY status DESC NULLS FIRST LIMIT 3",
            "SELECT id, status FROM o ORDER BY status ASC NULLS LAST LIMIT 3 OFFSET 1",
            "SELECT id, dev FROM ev ORDER BY dev NULLS LAST LIMIT 4",
            "SELECT id, url FROM urls ORDER BY url DESC NULLS FIRST LIMIT 2",
        ] {
            QueryTester::new(db, sql)
                .span(&[Axis::Cores, Axis::Io])
                .check();
        }
    }
}

/// `SELECT DISTINCT` through an index: where the index delivers the distinct rows (no `USE
/// TEMP B-TREE FOR DISTINCT`), they come in its key order, else in the order of first rows,
/// met in the loop's order where a temporary b-tree makes them distinct over a loop on the
/// index, forwards or backwards (each row's place in the loop standing for its rowid).
#[test]
fn distinct_rows_come_as_sqlites_loop_meets_them() {
    let mut through_an_index = 0;
    let mut temp_distinct = 0;
    for db in files().iter() {
        for sql in [
            "SELECT DISTINCT status FROM o",
            "SELECT DISTINCT status, total FROM o",
            "SELECT DISTINCT name FROM users",
            "SELECT DISTINCT url FROM urls LIMIT 3",
            "SELECT DISTINCT dev FROM ev",
            "SELECT DISTINCT a FROM t",
            "SELECT DISTINCT note FROM o",
            "SELECT DISTINCT status FROM o ORDER BY status DESC",
            // Ordered by the rowid first, SQLite's loop runs the table backwards and no two
            // rows tie (differential tester, default seed after the window grammar came).
            "SELECT DISTINCT rowid AS i, status IS NULL, total > 10 FROM o ORDER BY 1 DESC, 2",
            // A temporary b-tree over a loop on an index: first meetings in the index's
            // order, which differs from rowid order (the differential tester's refusals).
            "SELECT DISTINCT status IS NULL, 1 FROM o",
            "SELECT DISTINCT length(status) FROM o LIMIT 3",
            "SELECT DISTINCT total > 10, status FROM o WHERE status > 'a'",
            "SELECT DISTINCT name, 0.5 FROM users",
            // ... and over a loop on an index that does not cover the query: the rows' places
            // in the index stand for their rowids.
            "SELECT DISTINCT length(note) > 30, total FROM o WHERE status IN ('paid', 'a')",
            "SELECT DISTINCT dev IS NULL, length(payload) FROM ev WHERE dev > 3",
            // ... and over an index walked backwards (the ranks follow the loop's direction).
            "SELECT DISTINCT status, total > 10 FROM o ORDER BY status DESC",
            "SELECT DISTINCT dev, length(payload) > 3 FROM ev ORDER BY dev",
        ] {
            let plan = sqlite_plan(db, sql);
            let run = corescan(["query", db.to_str().unwrap(), sql]);
            temp_distinct += usize::from(
                plan.contains("INDEX") && plan.contains("USE TEMP B-TREE FOR DISTINCT"),
            );
            if run.status != 0 && run.stderr.contains("within its groups") {
                // Keys SQLite calls equal but spells differently, met in an index's order.
                continue;
            }
            through_an_index += usize::from(plan.contains("INDEX"));
            QueryTester::new(db, sql)
                .span(&[Axis::Cores, Axis::Io])
                .check();
        }
    }
    assert!(
        through_an_index >= 4,
        "only {through_an_index} answered queries were read through an index by SQLite"
    );
    assert!(
        temp_distinct >= 3,
        "only {temp_distinct} queries made distinct by a temporary b-tree over an index"
    );
}

/// A seek that reads a few leaves runs on one executor, on the CPU the command runs on,
/// without placing the others (and without waiting for the machine's topology); a full scan
/// gets one per CPU; `--cores` is obeyed as given. The answers are SQLite's either way.
#[test]
fn small_seeks_run_on_one_executor() {
    let [plain, _] = files();
    let db = plain.to_str().unwrap();
    let executors = |sql: &str, extra: &[&str]| -> usize {
        let mut args = vec!["query", db, sql, "--report", "--format", "json"];
        args.extend_from_slice(extra);
        let run = corescan(args);
        assert_eq!(run.status, 0, "{}", run.stderr);
        let report: serde_json::Value =
            serde_json::from_str(run.stderr.lines().last().unwrap()).unwrap();
        report["executors"].as_array().unwrap().len()
    };
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let seek = "SELECT * FROM o WHERE id IN (3, 4)";
    assert_eq!(executors(seek, &[]), 1);
    assert_eq!(executors(seek, &["--cores", "2"]), 2);
    // (`note` is in no index: the table is scanned.)
    let full = "SELECT count(*), sum(total), max(note) FROM o";
    assert_eq!(executors(full, &[]), cpus);
    for sql in [seek, full] {
        super::check(plain, sql);
    }
}

/// Under verify-retry (a WAL file no SQLite connection has open, no `-shm` to lock) the
/// index is read too, and the rows are SQLite's: a change seen after the scan plans the
/// whole statement again (`PlannedQuery::replans`), reading the index again.
#[test]
fn index_reads_run_under_verify_retry() {
    let dir = scratch_dir("query-indexes-verify");
    let src = dir.join("src.db");
    for s in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{s}", src.display()));
    }
    std::fs::copy(&files()[0], &src).unwrap();
    let conn = Connection::open(&src).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
         UPDATE users SET name = upper(name) WHERE id % 3 = 0;
         INSERT INTO urls(url, title) SELECT url || 'z', title FROM urls WHERE id % 4 = 0;",
    )
    .unwrap();
    let copy = dir.join("copy.db");
    for s in ["", "-wal"] {
        std::fs::copy(
            format!("{}{s}", src.display()),
            format!("{}{s}", copy.display()),
        )
        .unwrap();
    }
    let _ = std::fs::remove_file(format!("{}-shm", copy.display()));
    for (sql, how) in [
        ("SELECT max(name) FROM users", "min()/max() reads"),
        (
            "SELECT id FROM urls ORDER BY url DESC LIMIT 5",
            "first 5 entries",
        ),
        (
            "SELECT id, url, title FROM urls WHERE url = 'zoez' LIMIT 4",
            "in the range",
        ),
        // The index covers it: its leaves in the range are scanned in place of the table.
        (
            "SELECT id, url FROM urls WHERE url > 'm'",
            "the leaves that can hold the range",
        ),
    ] {
        let (report, stdout) = json_report(&copy, sql);
        assert_eq!(report["snapshot"]["protocol"], "verify-retry", "{report}");
        let plan = report["sqlite_plan"]["corescan"]
            .as_str()
            .unwrap_or_default();
        assert!(plan.contains(how), "{sql}: {plan}");
        let (names, rows) = super::answer_on(&conn, sql).unwrap();
        let want: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let mut o = serde_json::Map::new();
                for (n, v) in names.iter().zip(r) {
                    let j = match v {
                        engine::value::Value::Integer(i) => serde_json::json!(i),
                        engine::value::Value::Text(t) => {
                            serde_json::json!(String::from_utf8_lossy(t))
                        }
                        engine::value::Value::Null => serde_json::Value::Null,
                        other => panic!("{sql}: {other:?}"),
                    };
                    o.insert(n.clone(), j);
                }
                serde_json::Value::Object(o)
            })
            .collect();
        let got: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(got, serde_json::Value::Array(want), "{sql}");
    }
    drop(conn);
}

/// `GROUP BY` and `SELECT DISTINCT` where SQLite's index delivers the groups and its loop
/// stops at the `LIMIT` (no `WHERE`, no `HAVING`, no sorter after the loop): corescan reads
/// the index's first entries up to the first key past the `LIMIT + OFFSET` groups, then only
/// their rows, and gives SQLite's groups in SQLite's order. Keys equal under the column's
/// collation but not in bytes (`'open'`/`'Open'` under `NOCASE`, trailing spaces under
/// `RTRIM`, `1` and `1.0` untyped), NULL keys, `DESC` columns walked both ways, bare columns
/// and `group_concat` (each group's rows ranked by their places in the index), `OFFSET`; a
/// `SELECT DISTINCT` of the first key column, with or without `LIMIT`, reads each key's
/// first entry only, and shows SQLite's value of equal keys that differ.
#[test]
fn the_first_groups_read_only_their_entries() {
    let dir = scratch_dir("query-indexes-groups");
    let mixed = dir.join("mixed-keys.db");
    let _ = std::fs::remove_file(&mixed);
    let conn = Connection::open(&mixed).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 512;
         CREATE TABLE m(id INTEGER PRIMARY KEY, k COLLATE RTRIM, v);
         CREATE INDEX m_k ON m(k, v);
         CREATE TABLE n(id INTEGER PRIMARY KEY, k, pad);
         CREATE INDEX n_k ON n(k);
         CREATE TABLE c(id INTEGER PRIMARY KEY, s TEXT COLLATE NOCASE, n);
         CREATE INDEX c_s ON c(s, n);
         CREATE TABLE w(id INTEGER PRIMARY KEY, t);
         CREATE INDEX w_t ON w(t DESC);",
    )
    .unwrap();
    let keys = [
        "1",
        "1.0",
        "'1'",
        "2",
        "2.0",
        "'a'",
        "'A'",
        "'a '",
        "'a  '",
        "x'61'",
        "NULL",
        "9007199254740993",
        "9007199254740992.0",
        "-0.0",
        "0",
        "'b'",
    ];
    let mut rng = testkit::Rng::xorshift64(0x9e37_79b9_7f4a_7c15);
    for i in 0..600 {
        let k = rng.pick(&keys);
        let s = rng.pick(&[
            "'paid'", "'Paid'", "'PAID'", "'new'", "'New'", "'z'", "NULL",
        ]);
        conn.execute_batch(&format!(
            "INSERT INTO m(k, v) VALUES ({k}, {});
             INSERT INTO n(k, pad) VALUES ({k}, '{}');
             INSERT INTO c(s, n) VALUES ({s}, {});",
            rng.below(7),
            "p".repeat(i % 40),
            rng.below(50)
        ))
        .unwrap();
    }
    // Keys longer than a 512-byte page's index cell holds (each spills to overflow pages)
    // make an index b-tree of five or six levels: the skip-ahead of DISTINCT seeks past
    // hundreds of entries a value down from the root, and within leaves.
    let long = [
        "printf('%.600c', 'x') || 'A'",
        "printf('%.600c', 'x') || 'a'",
        "printf('%.600c', 'x') || 'B'",
        "printf('%.300c', 'x')",
        "'y'",
        "NULL",
        "5",
        "5.0",
        "x'78'",
    ];
    for _ in 0..1500 {
        let t = rng.pick(&long);
        conn.execute_batch(&format!("INSERT INTO w(t) VALUES ({t});"))
            .unwrap();
    }
    drop(conn);
    let mut read: Vec<(&Path, &str)> = Vec::new();
    for db in files().iter() {
        for sql in [
            "SELECT status, count(*) FROM o GROUP BY status LIMIT 2",
            "SELECT status, max(total), note FROM o GROUP BY status LIMIT 3 OFFSET 1",
            "SELECT name, count(*), min(id) FROM users GROUP BY name LIMIT 3",
            "SELECT DISTINCT name FROM users LIMIT 4",
            "SELECT dev, count(*), max(ts) FROM ev GROUP BY dev LIMIT 3",
            "SELECT dev, count(*), payload FROM ev GROUP BY dev ORDER BY dev LIMIT 2",
            "SELECT a, count(*), group_concat(b) FROM t GROUP BY a LIMIT 3",
            "SELECT a, b FROM t GROUP BY a, b LIMIT 5 OFFSET 7",
            "SELECT url, count(*) FROM urls GROUP BY url LIMIT 3",
        ] {
            read.push((db.as_path(), sql));
        }
    }
    for sql in [
        "SELECT k, count(*), typeof(k), min(v) FROM m GROUP BY k LIMIT 4",
        "SELECT k, count(*), group_concat(v) FROM m GROUP BY k ORDER BY k DESC LIMIT 3",
        "SELECT k, typeof(k), count(*) FROM n GROUP BY k LIMIT 5 OFFSET 2",
        "SELECT DISTINCT k FROM n LIMIT 6",
        "SELECT k, pad FROM n GROUP BY k LIMIT 9",
        // DISTINCT of the first key column alone: each key's first entry (the one whose
        // value SQLite shows), with or without LIMIT.
        "SELECT DISTINCT s FROM c",
        "SELECT DISTINCT s FROM c ORDER BY s DESC",
        "SELECT DISTINCT s FROM c LIMIT 2 OFFSET 1",
        "SELECT DISTINCT k FROM m",
        "SELECT DISTINCT k FROM m ORDER BY k DESC LIMIT 4",
        "SELECT DISTINCT k FROM n",
        "SELECT DISTINCT t FROM w",
        "SELECT DISTINCT t FROM w ORDER BY t LIMIT 3 OFFSET 2",
        "SELECT DISTINCT t FROM w ORDER BY t DESC LIMIT 4",
    ] {
        read.push((&mixed, sql));
    }
    let mut seeks = 0;
    for (db, sql) in read {
        let planned = corescan_sql::plan_query(db, sql).unwrap();
        let plan = planned.index_plan.as_ref().expect("an index plan");
        if plan.corescan.contains("which hold the first groups")
            || plan.corescan.contains("the row DISTINCT shows")
        {
            seeks += 1;
            assert!(
                planned.query.rowid_ranges().is_some(),
                "{sql}: only the first groups' rows are read"
            );
        } else {
            // Only where SQLite sorts after its loop.
            assert!(
                plan.sqlite.iter().any(|l| l.contains("USE TEMP B-TREE")),
                "{sql}: {} / {:?}",
                plan.corescan,
                plan.sqlite
            );
        }
        QueryTester::new(db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    assert!(
        seeks >= 19,
        "{seeks} queries read their first groups' entries"
    );
    // A window reads every group, a sorter after the loop orders them otherwise: the table
    // is scanned. (A WHERE or a HAVING: the next test.)
    for sql in [
        "SELECT status, count(*) OVER () FROM o GROUP BY status LIMIT 2",
        "SELECT status, count(*) FROM o GROUP BY status ORDER BY 2 DESC LIMIT 2",
    ] {
        let db = &files()[0];
        let planned = corescan_sql::plan_query(db, sql).unwrap();
        let plan = planned.index_plan.as_ref().expect("an index plan");
        assert!(
            !plan.corescan.contains("first groups"),
            "{sql}: {}",
            plan.corescan
        );
        QueryTester::new(db, sql).span(&[Axis::Cores]).check();
    }
    // count(DISTINCT x) of the first column of the index SQLite reads, under its collation:
    // the values counted by seeking past each, no table page read (mixed storage classes,
    // RTRIM, NOCASE, DESC with spilled keys). Another collation or a WHERE scans the table.
    let mut counted = 0;
    for sql in [
        "SELECT count(DISTINCT k) FROM m",
        "SELECT count(DISTINCT k) FROM n",
        "SELECT count(DISTINCT s) FROM c",
        "SELECT count(DISTINCT t) FROM w",
        "SELECT count(DISTINCT t) + 1, count(DISTINCT t) AS d FROM w HAVING d > 2 ORDER BY d",
        "SELECT count(DISTINCT s COLLATE BINARY) FROM c",
        "SELECT count(DISTINCT k) FROM m WHERE v > 2",
        "SELECT count(DISTINCT k), count(*) FROM n",
    ] {
        let planned = corescan_sql::plan_query(&mixed, sql).unwrap();
        if planned
            .index_plan
            .as_ref()
            .is_some_and(|p| p.corescan.contains("counted by seeking past each"))
        {
            counted += 1;
            assert!(sqlite_plan(&mixed, sql).contains("COVERING INDEX"), "{sql}");
            assert!(
                !sql.contains("WHERE") && !sql.contains("COLLATE") && !sql.contains("*"),
                "{sql}"
            );
        }
        QueryTester::new(&mixed, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    assert_eq!(counted, 5, "count(DISTINCT) queries answered by seeking");
}

/// `GROUP BY` / `SELECT DISTINCT ... LIMIT` where SQLite's index delivers the groups, under a
/// `WHERE` or `HAVING` that cannot fail: either may drop whole groups, so `corescan query` reads the
/// entries of a first guess of runs of keys, runs the query over their rows, and reads more
/// while it returns fewer rows than the `LIMIT` and the index has more. The first 40 keys
/// have no row the `WHERE` keeps (several rounds of growth for `LIMIT 3`); a `LIMIT` past the
/// index's groups reads all its runs; a `WHERE` whose rows are too rare to be worth the runs,
/// or one that can fail, scans the table.
#[test]
fn the_first_groups_under_a_where_grow_until_the_limit_is_met() {
    let dir = scratch_dir("query-indexes-groups-where");
    let db = dir.join("groups-where.db");
    let _ = std::fs::remove_file(&db);
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            "PRAGMA page_size = 1024;
             CREATE TABLE g(id INTEGER PRIMARY KEY, k TEXT COLLATE NOCASE, flag INT, v);
             CREATE INDEX g_k ON g(k);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000)
             INSERT INTO g(k, flag, v) SELECT
               CASE WHEN i % 3 = 0 THEN upper(printf('k%03d', (i * 7) % 200))
                    ELSE printf('k%03d', (i * 7) % 200) END,
               CASE WHEN (i * 7) % 200 < 40 THEN 0 ELSE i % 4 END,
               i * 10 FROM n;",
        )
        .unwrap();
    let grown = [
        "SELECT k, count(*), sum(v) FROM g WHERE flag = 1 GROUP BY k LIMIT 3",
        "SELECT k, count(*) FROM g WHERE flag > 1 GROUP BY k LIMIT 2 OFFSET 5",
        "SELECT k, v FROM g WHERE flag = 2 GROUP BY k LIMIT 4",
        "SELECT k, group_concat(v) FROM g WHERE flag = 3 GROUP BY k ORDER BY k DESC LIMIT 2",
        "SELECT DISTINCT k FROM g WHERE flag = 1 LIMIT 4",
        "SELECT k, count(*) FROM g GROUP BY k HAVING sum(flag) > 40 LIMIT 3 OFFSET 1",
        "SELECT k, max(v) FROM g WHERE flag > 0 GROUP BY k HAVING count(*) > 5 LIMIT 2",
        // More groups wanted than the index has: its runs are all read at once.
        "SELECT k, count(*) FROM g WHERE flag < 9 GROUP BY k LIMIT 500",
    ];
    for sql in grown {
        assert!(
            sqlite_plan(&db, sql).contains("USING INDEX g_k")
                && !sqlite_plan(&db, sql).contains("TEMP B-TREE"),
            "{sql}: {}",
            sqlite_plan(&db, sql)
        );
        let report = super::binary_answers_as_sqlite(&db, sql);
        assert!(
            report.contains("which hold the first groups"),
            "{sql}: {report}"
        );
    }
    // A WHERE that can fail (on rows past SQLite's stop), or one whose rows are so rare that
    // the runs holding the groups would be more rows by rowid than a scan is worth (4,096
    // here): the table is scanned.
    for sql in [
        "SELECT k, count(*) FROM g WHERE abs(v) > 5 GROUP BY k LIMIT 3",
        "SELECT k, count(*) FROM g WHERE v = 59990 GROUP BY k LIMIT 5",
        "SELECT k, count(*) FROM g WHERE flag = 9 GROUP BY k LIMIT 3",
        "SELECT k, count(*) FROM g GROUP BY k HAVING abs(sum(v)) < 0 LIMIT 3",
    ] {
        let report = super::binary_answers_as_sqlite(&db, sql);
        assert!(!report.contains("first groups"), "{sql}: {report}");
    }
    // The library's planner (its default subquery runner runs the query) plans the same,
    // checked under every core count and backend.
    for sql in grown {
        let planned = corescan_sql::plan_query(&db, sql).unwrap();
        let plan = planned.index_plan.as_ref().expect("an index plan");
        assert!(plan.corescan.contains("first groups"), "{sql}");
        QueryTester::new(&db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
}

/// Where SQLite's loop reads a covering index alone (`SCAN ... USING COVERING INDEX`), corescan
/// scans the index's leaves in place of the table's, cut across the executors, and the rows
/// are SQLite's in SQLite's order: plain rows in the index's order (`NOCASE` ties, NULLs,
/// `DESC` columns, integral reals of a REAL column), after a sorter, groups and `DISTINCT`,
/// under a `WHERE` and over a range too wide to read its rows by rowid; a multi-level index
/// whose interior entries (which no leaf holds) spill to overflow pages; the index's pages in
/// the write-ahead log; and a damaged index leaf is one clean error.
#[test]
fn a_covering_index_is_scanned_in_place_of_the_table() {
    let dir = scratch_dir("query-indexes-covering");
    let db = dir.join("covering.db");
    let _ = std::fs::remove_file(&db);
    let _ = std::fs::remove_file(dir.join("covering.db-wal"));
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 1024;
         CREATE TABLE c(id INTEGER PRIMARY KEY, k TEXT COLLATE NOCASE, n INTEGER, r REAL,
                        pad TEXT);
         CREATE INDEX c_k ON c(k);
         CREATE INDEX c_nr ON c(n DESC, r);
         CREATE INDEX c_big ON c(n) WHERE n > 40;",
    )
    .unwrap();
    let mut rng = testkit::Rng::xorshift64(0x9e37_79b9_7f4a_7c15);
    let words = ["apple", "Apple", "APPLE", "b", "zoë", "Zoë", "m"];
    let insert = |conn: &Connection, rng: &mut testkit::Rng, rows: i64| {
        conn.execute_batch("BEGIN").unwrap();
        for _ in 0..rows {
            // Some keys longer than an index cell keeps on a 1 KiB page (231 bytes).
            let k: Option<String> = match rng.index(10) {
                0 => None,
                1 => Some(format!(
                    "{}{}",
                    rng.pick(&words),
                    "q".repeat(200 + rng.index(400))
                )),
                _ => Some(format!("{}{}", rng.pick(&words), rng.index(300))),
            };
            let n = (!rng.percent(5)).then(|| rng.index(60) as i64);
            // Integral reals are stored as integers in a REAL column, and read as reals.
            let r = match rng.index(3) {
                0 => rng.index(50) as f64,
                1 => rng.index(5000) as f64 / 7.0,
                _ => f64::NAN,
            };
            let r = (!r.is_nan()).then_some(r);
            conn.execute(
                "INSERT INTO c(k, n, r, pad) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![k, n, r, "p".repeat(rng.index(80))],
            )
            .unwrap();
        }
        conn.execute_batch("COMMIT").unwrap();
    };
    insert(&conn, &mut rng, 12_000);
    let queries = [
        "SELECT k FROM c",
        "SELECT k, id FROM c WHERE k LIKE '%7%'",
        "SELECT DISTINCT k FROM c",
        "SELECT k, count(*), min(id) FROM c GROUP BY k",
        "SELECT k, id FROM c ORDER BY length(k), id DESC LIMIT 40",
        "SELECT k FROM c ORDER BY k NULLS LAST",
        "SELECT n, r FROM c",
        "SELECT n, r, id FROM c WHERE r > 3",
        "SELECT n, max(r), count(*) FROM c GROUP BY n",
        "SELECT count(*), sum(r), total(n) FROM c WHERE r IS NOT NULL",
        "SELECT n FROM c WHERE n > 40",
        // Ranges too wide to read their rows by rowid: the WHERE picks them from the whole
        // index's entries, in the same order.
        "SELECT k, id FROM c WHERE k > 'b'",
        "SELECT n, r FROM c WHERE n BETWEEN 3 AND 50 AND r < 400",
        "SELECT n, count(*) FROM c WHERE n < 58 GROUP BY n",
    ];
    let check_all = |db: &Path| {
        let mut scanned = 0;
        for sql in queries {
            let plan = sqlite_plan(db, sql);
            let report = super::binary_answers_as_sqlite(db, sql);
            // (A DISTINCT of few values seeks past each instead: no scan at all.)
            if plan.starts_with("SCAN c USING COVERING INDEX") {
                assert!(
                    !report.contains("the table in rowid order"),
                    "{sql}: {report}"
                );
                scanned += usize::from(report.contains("in place of the table's rows"));
            }
            QueryTester::new(db, sql)
                .span(&[Axis::Cores, Axis::Io])
                .check();
        }
        assert!(scanned >= 7, "only {scanned} covering scans");
    };
    // Interior entries (which no leaf holds) that spill to overflow pages: an interior cell's
    // payload past the 231 bytes a 1 KiB index page keeps, on two levels of interior pages.
    let (interior, spilled): (i64, i64) = conn
        .query_row(
            "SELECT count(*), max(mx_payload) FROM dbstat
             WHERE name = 'c_k' AND pagetype = 'internal'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(
        interior > 2 && spilled > 231,
        "{interior} interior pages, {spilled}"
    );
    check_all(&db);

    // In WAL mode with the index's latest pages in the log (no checkpoint).
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;")
        .unwrap();
    insert(&conn, &mut rng, 3_000);
    conn.execute_batch("DELETE FROM c WHERE id % 11 = 0")
        .unwrap();
    let wal = std::fs::metadata(dir.join("covering.db-wal"))
        .unwrap()
        .len();
    assert!(wal > 100_000, "a log of {wal} bytes");
    check_all(&db);
    drop(conn);

    // An index leaf made a table leaf: one error line naming the file, the page and the
    // index.
    let copy = dir.join("covering-damaged.db");
    std::fs::copy(&db, &copy).unwrap();
    let conn = Connection::open(&copy).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE;")
        .unwrap();
    let leaf: u32 = conn
        .query_row(
            "SELECT pageno FROM dbstat WHERE name = 'c_k' AND pagetype = 'leaf'
             ORDER BY path LIMIT 1 OFFSET 20",
            [],
            |r| r.get(0),
        )
        .unwrap();
    drop(conn);
    let file = std::fs::OpenOptions::new().write(true).open(&copy).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[0x0d], u64::from(leaf - 1) * 1024).unwrap();
    drop(file);
    let sql = "SELECT k FROM c";
    assert!(sqlite_plan(&copy, sql).contains("COVERING INDEX c_k"));
    let run = corescan(["query", copy.to_str().unwrap(), sql, "--format", "csv"]);
    assert_ne!(run.status, 0);
    run.assert_error_line(&[
        copy.to_str().unwrap(),
        &format!("page {leaf}"),
        "index leaf",
    ]);
}

/// An `IN` list over an indexed column (or an `OR` of equalities, which SQLite makes one)
/// walks the index once per value, as SQLite seeks each value (`SEARCH ... (k=?)`), not the
/// whole range from its least value to its greatest: the entries read are the values' own
/// leaves, whether the rows are then read by rowid, the index covers the query, or the
/// entries are counted, in an ascending and a `DESC` index, under a collation, with a value
/// repeated and values outside a range the `WHERE` also sets. The rows are SQLite's, in
/// SQLite's order.
#[test]
fn an_in_list_seeks_each_value() {
    let db = scratch_dir("query-indexes-in-list").join("in.db");
    let _ = std::fs::remove_file(&db);
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 1024;
         CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, d INTEGER, c TEXT COLLATE NOCASE,
                        pad TEXT);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40000)
         INSERT INTO t SELECT i, (i * 7919) % 5000, i % 4000, printf('u%05d', i % 3000),
                              printf('%.*c', i % 50, 'p') FROM n;
         CREATE INDEX t_k ON t(k); CREATE INDEX t_d ON t(d DESC, k);
         CREATE INDEX t_c ON t(c);",
    )
    .unwrap();
    drop(conn);
    for sql in [
        "SELECT * FROM t WHERE k IN (4999, 3, 2500, 3)",
        "SELECT id, k FROM t WHERE k IN (4999, 3, 2500, 3)",
        "SELECT k, count(*) FROM t WHERE k IN (4999, 3, 2500, 3) GROUP BY k",
        "SELECT * FROM t WHERE d IN (3999, 0, 2000)",
        "SELECT d, k FROM t WHERE d IN (3999, 0, 2000) LIMIT 5 OFFSET 3",
        "SELECT * FROM t WHERE c IN ('U02999', 'u00001', 'u01500')",
        "SELECT id, c FROM t WHERE c IN ('U02999', 'u00001', 'u01500') LIMIT 9",
        "SELECT id, k FROM t WHERE k IN (4999, 3, 2500, 7, 4998) AND k > 3 AND k < 4999",
        // SQLite's OR-to-IN.
        "SELECT id, c FROM t WHERE c = 'U02999' OR c = 'u00001'",
        "SELECT * FROM t WHERE (d = 3999 OR d = 0) AND k > 100 LIMIT 4",
    ] {
        super::check(&db, sql);
        let n = rows_scanned(&db, sql);
        assert!(n < 1_000, "{sql}: {n} rows or entries read");
    }
    for sql in [
        "SELECT count(*) FROM t WHERE k IN (4999, 3, 2500, 3)",
        "SELECT count(*) FROM t WHERE d IN (3999, 0, 2000)",
        "SELECT count(*) FROM t WHERE c IN ('U02999', 'u00001', 'u01500')",
        "SELECT count(*) FROM t WHERE k = 4999 OR k = 3",
    ] {
        super::check(&db, sql);
        let planned = corescan_sql::plan_query(&db, sql).unwrap();
        let plan = planned.index_plan.expect("an index plan");
        assert!(
            plan.corescan.contains("counted"),
            "{sql}: {}",
            plan.corescan
        );
    }
}

/// SQLite's `MULTI-INDEX OR` (`WHERE a = 1 OR b = 2` with an index on each): the rows of each
/// `OR` term's loop in turn, a row where the first loop finds it. corescan orders the rows so
/// (the first term that holds, that term's index key, the rowid) and gives SQLite's rows in
/// SQLite's order, under `LIMIT`/`OFFSET` and among `ORDER BY` ties, with terms over the same
/// index, over other indexes (`DESC`, `NOCASE`, covering), over the integer primary key, and
/// `AND`s of terms; rows that satisfy several terms come with the first. The report says so,
/// and only the rows the terms seek are read.
/// Where the terms cannot be matched with SQLite's loops one for one (`BETWEEN`, which SQLite
/// splits into more terms), the query is refused, not guessed.
#[test]
fn multi_index_or_rows_come_as_sqlites_loops_meet_them() {
    let db = scratch_dir("query-indexes-multi-or").join("or.db");
    let _ = std::fs::remove_file(&db);
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 1024;
         CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT COLLATE NOCASE, c REAL,
                        d, pad TEXT);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000)
         INSERT INTO t SELECT (i * 7919) % 9973, i % 50,
                              CASE i % 3 WHEN 0 THEN 'x' || (i % 40) ELSE 'X' || (i % 40) END,
                              (i % 25) / 2.0, CASE WHEN i % 7 = 0 THEN NULL ELSE i % 30 END,
                              printf('%.*c', i % 30, 'p') FROM n;
         CREATE INDEX t_a ON t(a DESC); CREATE INDEX t_b ON t(b);
         CREATE INDEX t_c ON t(c, a); CREATE INDEX t_d ON t(d);",
    )
    .unwrap();
    drop(conn);
    let mut multi = 0;
    for sql in [
        "SELECT * FROM t WHERE a = 7 OR b = 'x3'",
        "SELECT id, a, b FROM t WHERE b = 'x3' OR a = 7 LIMIT 20 OFFSET 30",
        "SELECT id FROM t WHERE a IN (7, 1) OR b = 'X11' OR c = 3.5",
        "SELECT id, c FROM t WHERE c = 3.5 OR a = 2 ORDER BY c LIMIT 25",
        "SELECT * FROM t WHERE a = 9 OR id = 77 OR id IN (5, 1000, 8000)",
        "SELECT id FROM t WHERE (a = 3 AND d > 10) OR b = 'x7' OR d IS NULL LIMIT 40",
        "SELECT id, d FROM t WHERE (d = 4 OR a = 4) AND id > 100 ORDER BY d DESC LIMIT 15",
        "SELECT id, a FROM t WHERE a = 4 OR a = 9 OR c < 1 LIMIT 50",
        "SELECT id FROM t WHERE b > 'x38' OR a < 2 OR d = 29",
    ] {
        let planned = corescan_sql::plan_query(&db, sql).unwrap();
        if planned
            .index_plan
            .as_ref()
            .is_some_and(|p| p.corescan.contains("MULTI-INDEX OR"))
        {
            multi += 1;
        }
        QueryTester::new(&db, sql).span(&[Axis::Cores]).check();
    }
    assert!(
        multi >= 6,
        "only {multi} queries ran as SQLite's MULTI-INDEX OR"
    );
    // Only the rows the terms seek are read (SQLite seeks each term).
    // (Rows are read a leaf at a time: the 6,000-row table has about 300 leaves.)
    for (sql, most) in [
        ("SELECT * FROM t WHERE a = 7 OR b = 'x3'", 4_500),
        (
            "SELECT id FROM t WHERE id IN (77, 5000) OR c = 99.5 OR d = 100",
            100,
        ),
        (
            "SELECT id FROM t WHERE a = 9 OR id = 77 OR id IN (5, 1000, 8000)",
            3_000,
        ),
        (
            "SELECT count(*) FROM t WHERE (d = 4 OR a = 4) AND id > 100",
            4_500,
        ),
    ] {
        let n = rows_scanned(&db, sql);
        assert!(n <= most, "{sql}: {n} rows read");
        super::check(&db, sql);
    }
    // A BETWEEN is two terms of SQLite's OR clause more: refused where the order shows.
    let between = "SELECT id FROM t WHERE a BETWEEN 3 AND 4 OR b = 'x3' LIMIT 5";
    assert!(sqlite_plan(&db, between).contains("MULTI-INDEX OR"));
    super::check_error(&db, between, "MULTI-INDEX OR");
}

/// The rows (or index entries) `corescan query` read for `sql` on `db`, from its JSON report.
fn rows_scanned(db: &Path, sql: &str) -> u64 {
    json_report(db, sql).0["rows_scanned"].as_u64().unwrap()
}

/// `corescan query --report --format json`'s report of `sql` on `db`, and its rows as JSON
/// (the run must succeed).
fn json_report(db: &Path, sql: &str) -> (serde_json::Value, String) {
    let run = corescan([
        "query",
        db.to_str().unwrap(),
        sql,
        "--report",
        "--format",
        "json",
    ]);
    assert_eq!(run.status, 0, "{sql}: {}", run.stderr);
    let report = serde_json::from_str(run.stderr.lines().last().unwrap()).unwrap();
    (report, run.stdout)
}
