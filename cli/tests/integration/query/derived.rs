//! Subqueries in `FROM` and `WITH` over one table (issue 26, item 5), flattened into one
//! query as SQLite's flattener flattens them, compared with SQLite 3.54: values under every
//! core count and backend, the affinity and collation a subquery column keeps (a table
//! column's own; an implicit `BINARY` for any other expression), output column names, rows
//! in SQLite's order through an index, subqueries that aggregate (SQLite's co-routine),
//! subqueries SQLite does not flatten (`LIMIT`/`DISTINCT`/`ORDER BY` inside, an aggregate over
//! one that aggregates: run first, the query around them over their rows), and the refusals
//! (a statement around them that reads another table, plans SQLite changes inside the
//! statement, circular and recursive `WITH`).

use std::path::Path;

use super::indexes::files;
use super::{check_error, fixture, Axis, QueryTester};

#[test]
fn derived_tables_and_ctes_answer_as_sqlite() {
    let db = fixture();
    for sql in [
        "SELECT * FROM (SELECT * FROM t)",
        "SELECT * FROM (SELECT id, i, s FROM t WHERE i > 0) WHERE s IS NOT NULL",
        "SELECT q.i2, q.s FROM (SELECT i * 2 AS i2, s FROM t) AS q WHERE q.i2 > 10 ORDER BY 1, 2",
        "WITH big AS (SELECT * FROM t WHERE i > 0) SELECT count(*), sum(i), max(s) FROM big",
        "WITH v(a, b) AS (SELECT c, i FROM t) SELECT a, count(*), min(b) FROM v GROUP BY a ORDER BY 2 DESC, 1",
        "WITH a AS (SELECT * FROM t), b AS (SELECT id, c, i + 1 AS j FROM a WHERE id % 2 = 0) SELECT * FROM b WHERE j > 3 LIMIT 7 OFFSET 2",
        "SELECT DISTINCT c FROM (SELECT c, s FROM t) ORDER BY 1",
        "SELECT * FROM (SELECT * FROM (SELECT s AS z, i FROM t WHERE i > 0) WHERE z > 'a')",
        "SELECT * FROM (SELECT TRUE AS yes, id FROM t) WHERE yes IS TRUE AND id < 5",
        // Affinity: i is INTEGER, so '5' compares as 5; i + 0 has none.
        "SELECT id FROM (SELECT id, i, i + 0 AS k FROM t) WHERE i = '5' OR k = '5'",
        // Collation: c keeps NOCASE; lower(c) carries an implicit BINARY, which on the left
        // of a comparison wins over the right's NOCASE.
        "SELECT count(*) FROM (SELECT c, lower(c) AS l FROM t) WHERE l = c",
        "SELECT count(*) FROM (SELECT c, lower(c) AS l FROM t) WHERE c = l",
        "SELECT l, count(*) FROM (SELECT upper(c) AS l FROM t) GROUP BY l ORDER BY 1",
        // Subqueries of the statement may read the common table expressions.
        "WITH pos AS (SELECT i FROM t WHERE i > 100) SELECT id FROM t WHERE i IN (SELECT i FROM pos) ORDER BY id",
        "SELECT id, (SELECT max(m) FROM (SELECT i AS m FROM t)) FROM t WHERE id < 4",
        // A subquery that aggregates (SQLite's co-routine): its groups in key order, the
        // query's WHERE over them, ties of its ORDER BY in the groups' ascending key order.
        "SELECT * FROM (SELECT c, count(*) AS n, total(r) AS s FROM t GROUP BY c) WHERE n > 1 ORDER BY n DESC",
        "SELECT k, n FROM (SELECT typeof(x) AS k, count(*) AS n FROM t GROUP BY 1 HAVING n > 2) ORDER BY k DESC",
        "WITH per AS (SELECT c, max(i) AS top, id FROM t GROUP BY c) SELECT c, top, id FROM per WHERE top IS NOT NULL LIMIT 5",
        "SELECT d FROM (SELECT id * 2 AS d FROM t WHERE d < 40)",
        // An output column named after a subquery column is no alias: ORDER BY r is the
        // alias r (the differential tester's table seed 1633214150284319294).
        "SELECT r, gs AS r FROM (SELECT * FROM t) AS t ORDER BY (r) DESC NULLS FIRST, id LIMIT 9 OFFSET 3",
        "SELECT *, gs AS r FROM (SELECT * FROM t) ORDER BY r, id LIMIT 5",
        // Window functions stop SQLite's flattener: the co-routine hands its rows over in
        // its loop's order, which the window stage's ties follow.
        "SELECT id, row_number() OVER (ORDER BY s) FROM (SELECT id, s FROM t)",
        "SELECT c, total(i) OVER (PARTITION BY c ORDER BY r) FROM (SELECT * FROM t WHERE i > 0) LIMIT 20",
        "WITH v AS (SELECT id, c, i * 2 AS d FROM t) SELECT id, lag(d) OVER (ORDER BY c), d FROM v WHERE d > 0",
        // A common table expression nothing reads is never run (as in SQLite).
        "WITH q AS (SELECT nosuch FROM t) SELECT id FROM t WHERE id < 3",
        // A double-quoted name that names no column is a string.
        "SELECT \"nope\", s FROM (SELECT s FROM t) LIMIT 3",
        // SQLite's parser makes `x AND 0` the integer 0 before it looks names up (when no
        // function is in it): the subquery's missing rowid is then no error (tester table
        // seed 9571989600706404804), nor a name no table has.
        "SELECT c, total(((rowid = s) AND 0)), count(*) FROM (SELECT * FROM t) AS t GROUP BY 1 ORDER BY 2 DESC, 1",
        "SELECT id FROM (SELECT id FROM t) WHERE (rowid AND ('a' IS NULL)) OR id < 5 AND (nosuch AND 00)",
        "SELECT id, (rowid IN (SELECT i FROM t) AND (1 AND 0)) AS z FROM (SELECT id FROM t) WHERE id % 9 = 1",
    ] {
        QueryTester::new(db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
}

#[test]
fn output_names_are_sqlite_s() {
    let db = fixture();
    for sql in [
        "SELECT * FROM (SELECT id, s, i + 1, c AS k, ID, t.r, rowid FROM t)",
        "SELECT K, k + 1, q.s FROM (SELECT c AS k, s FROM t) q",
        "WITH a AS (SELECT * FROM t), b AS (SELECT s, i FROM a) SELECT * FROM b",
        "WITH v(x, y) AS (SELECT s, i FROM t) SELECT * FROM v",
        // A column under COLLATE is named by the column, under likely() by the text (the
        // differential tester's table seed 1005201824040875856).
        "SELECT * FROM (SELECT (c COLLATE BINARY), likely(s), +i FROM t)",
        // ... also over a subquery SQLite does not flatten (named before names resolve: a
        // view of it names `rowid` `id` and `likelihood(i, 1.0)` `i`; tester table seed
        // 5947611802621080718).
        "SELECT * FROM (SELECT rowid, ID, likelihood(i, 1.0), s AS x, i  +  1, i FROM t ORDER BY id LIMIT 3)",
        "WITH w AS (SELECT DISTINCT c, C, (c COLLATE BINARY) FROM t) SELECT * FROM w ORDER BY 1",
    ] {
        assert_eq!(corescan_names(db, sql), sqlite_names(db, sql), "{sql}");
    }
}

#[test]
fn rows_come_in_sqlite_s_order_through_an_index() {
    for db in files() {
        for sql in [
            "SELECT url FROM (SELECT * FROM urls) LIMIT 3",
            "WITH u AS (SELECT url, title FROM urls WHERE id > 0) SELECT * FROM u ORDER BY url DESC LIMIT 4",
            "SELECT status, count(*) FROM (SELECT * FROM o) GROUP BY status",
            "SELECT id FROM (SELECT id, status FROM o) ORDER BY status DESC LIMIT 2",
            // A co-routine under window functions whose loop reads an index: ties follow it.
            "SELECT id, status, rank() OVER (ORDER BY total) FROM (SELECT * FROM o WHERE status > 'a')",
            "SELECT * FROM (SELECT status, count(*) AS n FROM o GROUP BY status) ORDER BY n DESC",
        ] {
            QueryTester::new(db, sql).span(&[Axis::Cores]).check();
        }
        // The rows of a DISTINCT SQLite meets through an index with a temporary b-tree come
        // in that loop's order (each row's place in the index); only counted, they need no
        // order at all: their number is answered, 'a'/'A' under NOCASE one row, as SQLite
        // counts them. Where the rows are read, or a LIMIT inside picks them, the order
        // counts.
        for sql in [
            "SELECT count(*) FROM (SELECT DISTINCT status, total FROM o)",
            "SELECT count(*) AS n, count(*) FROM (SELECT DISTINCT name, age FROM users WHERE age > 10)",
            "WITH d AS (SELECT DISTINCT total, status FROM o) SELECT count(*) FROM d",
            "SELECT * FROM (SELECT DISTINCT status, total FROM o) LIMIT 3",
            "SELECT count(*) FROM (SELECT DISTINCT status, total FROM o LIMIT 5)",
        ] {
            QueryTester::new(db, sql).span(&[Axis::Cores]).check();
        }
        // The outer WHERE pushed into the subquery: SQLite's loop inside the statement is not
        // the subquery's own.
        check_error(
            db,
            "SELECT count(*) FROM (SELECT DISTINCT status, total FROM o) WHERE status = 'open'",
            "reads otherwise inside the statement",
        );
    }
}

/// Subqueries in `FROM` SQLite does not flatten (its co-routine or materialized table): the
/// subquery runs as corescan's parallel scan, and the query around it over its rows (as
/// SQLite's own engine over a table of them with the columns' affinity and collation).
#[test]
fn subqueries_sqlite_does_not_flatten() {
    let db = fixture();
    for sql in [
        "SELECT * FROM (SELECT s FROM t LIMIT 3)",
        "SELECT count(*) FROM (SELECT c FROM t GROUP BY c)",
        "SELECT avg(n), max(n), count(*) FROM (SELECT c, count(*) AS n FROM t GROUP BY c)",
        "SELECT n, count(*), group_concat(c) FROM (SELECT c, count(*) AS n FROM t GROUP BY c) GROUP BY n ORDER BY n",
        "SELECT * FROM (SELECT DISTINCT c FROM t)",
        "SELECT * FROM (SELECT DISTINCT c FROM t) WHERE c > 'a' LIMIT 4",
        "SELECT * FROM (SELECT s FROM t ORDER BY s)",
        "SELECT * FROM (SELECT id, i, s FROM t ORDER BY i DESC LIMIT 10) ORDER BY id",
        "SELECT q.s, length(q.s) FROM (SELECT s FROM t ORDER BY r, id LIMIT 20 OFFSET 5) AS q WHERE q.s IS NOT NULL",
        "WITH top AS (SELECT c, count(*) AS n FROM t GROUP BY c ORDER BY n DESC LIMIT 5) SELECT * FROM top ORDER BY c",
        "WITH d AS (SELECT DISTINCT i % 10 AS k FROM t) SELECT sum(k), count(*) FROM d",
        // Affinity and collation of the subquery's columns, as SQLite gives them: c keeps
        // NOCASE, i INTEGER ('5' compares as 5), an expression neither.
        "SELECT count(*) FROM (SELECT DISTINCT c, i, i + 0 AS k FROM t) WHERE c = 'APPLE' OR i = '5' OR k = '5'",
        "SELECT c, count(*) FROM (SELECT c FROM t ORDER BY id LIMIT 200) GROUP BY c ORDER BY c",
        "SELECT x, typeof(x) FROM (SELECT DISTINCT x FROM t) ORDER BY x",
        // Window functions over a grouped subquery (SQLite's co-routine of groups).
        "SELECT c, rank() OVER (ORDER BY n) FROM (SELECT c, count(*) AS n FROM t GROUP BY c)",
        "SELECT \"count(*)\" FROM (SELECT c, count(*) FROM t GROUP BY c) ORDER BY 1",
        // The rows' table may take the name of the table the subquery reads.
        "SELECT t.c, count(*) FROM (SELECT DISTINCT c, i % 4 FROM t) AS t GROUP BY 1 ORDER BY 2, 1",
    ] {
        QueryTester::new(db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    // An error of the subquery's scan is the statement's.
    check_error(
        db,
        "SELECT count(*) FROM (SELECT DISTINCT abs(id * 0 - 9223372036854775807 - 1) FROM t)",
        "integer overflow",
    );
}

#[test]
fn what_is_not_flattened_is_refused_or_an_error() {
    let db = fixture();
    // SQLite resolves the columns the statement does not read too (table seed
    // 15168459189746329112).
    check_error(
        db,
        "WITH v AS (SELECT *, likelihood(s, 1) AS extra FROM t) SELECT id FROM v",
        "second argument to likelihood()",
    );
    check_error(
        db,
        "WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < 5) SELECT * FROM n",
        "WITH RECURSIVE",
    );
    // Where SQLite flattens the statement after all, the subquery's ORDER BY gives way to
    // the statement's, whose ties come in another order (tester table seed
    // 11649506705936902268).
    check_error(
        db,
        "SELECT k FROM (SELECT i % 3 AS k FROM t ORDER BY id DESC) WHERE k > 0",
        "SQLite flattens into the statement",
    );
    // SQLite drops a subquery's ORDER BY without LIMIT under the statement's ORDER BY: its
    // rows come unsorted, which its plan does not show (tester table seed
    // 16960405019891652534).
    check_error(
        db,
        "WITH w AS (SELECT DISTINCT i % 3, s FROM t ORDER BY 2 DESC) SELECT * FROM w ORDER BY 1 DESC LIMIT 3",
        "ORDER BY but no LIMIT",
    );
    // A common table expression that names itself is circular to SQLite (without
    // RECURSIVE); it read the table of that name, or never ended.
    for sql in [
        "WITH t AS (SELECT s FROM t) SELECT * FROM t",
        "WITH t AS (SELECT s FROM t ORDER BY r DESC, id LIMIT 6) SELECT * FROM t",
        "WITH a AS (SELECT id FROM t WHERE id IN (SELECT id FROM a)) SELECT * FROM a",
        "WITH a AS (SELECT * FROM b), b AS (SELECT * FROM a) SELECT * FROM b",
    ] {
        check_error(db, sql, "circular reference");
    }
    check_error(
        db,
        "WITH a AS (SELECT * FROM b), b AS (SELECT * FROM a) SELECT * FROM a",
        "circular reference: a",
    );
    check_error(
        db,
        "WITH a AS (SELECT i FROM t), b AS (SELECT * FROM a), a AS (SELECT 1) SELECT * FROM b",
        "duplicate WITH table name: a",
    );
    // A common table expression sees the ones after it too, and one the statement never
    // names is never expanded (SQLite checks neither its cycles nor its tables).
    for sql in [
        "WITH a AS (SELECT * FROM b), b AS (SELECT i, s FROM t WHERE i > 0) SELECT * FROM a",
        "WITH a AS (SELECT count(*) AS n FROM b), b AS (SELECT i FROM t WHERE i > 1) SELECT * FROM a",
        "WITH a AS (SELECT * FROM a) SELECT id FROM t",
        "WITH a AS (SELECT * FROM no_such_table) SELECT id FROM t",
        "WITH a(x) AS (SELECT i FROM t), b AS (SELECT x FROM a WHERE x > 2) SELECT * FROM b",
    ] {
        QueryTester::new(db, sql).check();
    }
    // The query around a subquery SQLite does not flatten reads nothing else.
    check_error(
        db,
        "SELECT count(*) FROM (SELECT c FROM t GROUP BY c) WHERE c IN (SELECT s FROM t)",
        "over a subquery in FROM that aggregates",
    );
    check_error(
        db,
        "SELECT * FROM (SELECT DISTINCT c FROM t) AS a, (SELECT 1) AS b",
        "joins",
    );
    check_error(
        db,
        "SELECT rowid FROM (SELECT DISTINCT c FROM t)",
        "no such column: rowid",
    );
    check_error(
        db,
        "SELECT q.oid, c FROM (SELECT c, count(*) FROM t GROUP BY c) AS q",
        "no such column: q.oid",
    );
    // As SQLite: a subquery has no rowid, and its columns are the only names.
    check_error(
        db,
        "SELECT rowid FROM (SELECT id FROM t)",
        "no such column: rowid",
    );
    check_error(db, "SELECT r FROM (SELECT id FROM t)", "no such column: r");
    // ... also beside a 0 that a function, a sign or COLLATE keeps from folding the AND.
    for sql in [
        "SELECT id FROM (SELECT id FROM t) WHERE rowid AND abs(0)",
        "SELECT id FROM (SELECT id FROM t) WHERE (rowid LIKE 'a') AND 0",
        "SELECT id FROM (SELECT id FROM t) WHERE rowid AND -0",
        "SELECT id FROM (SELECT id FROM t) WHERE rowid AND 0 COLLATE NOCASE",
        "SELECT id FROM (SELECT id FROM t) WHERE rowid OR 0",
    ] {
        check_error(db, sql, "no such column: rowid");
    }
    check_error(
        db,
        "SELECT t.id FROM (SELECT id FROM t) AS q",
        "no such column: t.id",
    );
}

/// The column names `corescan query` prints (its CSV header).
fn corescan_names(db: &Path, sql: &str) -> Vec<String> {
    // One row: the header and a line.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_corescan"))
        .args(["query", "--format", "csv"])
        .arg(db)
        .arg(format!("{sql} LIMIT 1"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    csv_fields(text.lines().next().unwrap_or_default())
}

/// The fields of one CSV line (quoted fields with `""` for a quote).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    fields.push(cur);
    fields
}

/// The column names SQLite gives `sql`'s result.
fn sqlite_names(db: &Path, sql: &str) -> Vec<String> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let stmt = conn.prepare(sql).unwrap();
    stmt.column_names().map(String::from).collect()
}

/// Views (`CREATE VIEW v AS SELECT ...` in the file) read as the subqueries in `FROM` they
/// stand for, on the command line: the same rows as SQLite's (values, names, order) on every
/// backend and on one and two executors, views over views, an alias, `main.`-qualified, a view
/// that aggregates, one with `ORDER BY ... LIMIT` inside, one in a subquery of `WHERE`; and the
/// refusals: a view with a column list, a view over a join, and a common table expression of the
/// statement that takes a view's name (it is the expression, not the view).
#[test]
fn views_read_as_their_queries() {
    let dir = crate::scratch_dir("query-views");
    let db = dir.join("views.db");
    let _ = std::fs::remove_file(&db);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE s(id INTEGER PRIMARY KEY, a INT, b TEXT COLLATE NOCASE, c REAL);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000)
           INSERT INTO s(a, b, c) SELECT i % 37, char(65 + i % 26) || (i % 5), i * 0.25 FROM n;
         UPDATE s SET b = lower(b) WHERE id % 7 = 0;
         CREATE INDEX s_b ON s(b);
         CREATE VIEW vs AS SELECT a, b FROM s WHERE a > 3;
         CREATE VIEW \"we ird\" AS SELECT b, count(*) AS n, sum(c) AS t FROM s GROUP BY b;
         CREATE VIEW vv AS SELECT * FROM vs WHERE b LIKE 'a%';
         CREATE VIEW vord AS SELECT id, b FROM s ORDER BY b DESC, id LIMIT 20;
         CREATE VIEW vcol(x, y) AS SELECT a, b FROM s;
         CREATE VIEW vjoin AS SELECT s.a, t.b FROM s JOIN s AS t ON s.id = t.id;",
    )
    .unwrap();
    drop(conn);
    let path = db.to_str().unwrap();
    let queries = [
        "SELECT * FROM vs LIMIT 5",
        "SELECT count(*), sum(a) FROM vs",
        "SELECT b, count(*) FROM vs GROUP BY b ORDER BY 2 DESC, 1 LIMIT 3",
        "SELECT * FROM \"we ird\" ORDER BY n DESC, b LIMIT 4",
        "SELECT * FROM vv LIMIT 4",
        "SELECT count(*) FROM VV",
        "SELECT * FROM vord LIMIT 5",
        "SELECT x.b FROM vs AS x WHERE x.a = 5 LIMIT 3",
        "SELECT * FROM main.vs LIMIT 2",
        "SELECT a FROM vs WHERE a IN (SELECT a FROM vs WHERE b = 'b1') LIMIT 3",
    ];
    for sql in queries {
        super::binary_answers_as_sqlite(&db, sql);
    }
    corescan_refuses(path, "SELECT * FROM vcol", &["vcol", "names its columns"]);
    corescan_refuses(path, "SELECT * FROM vjoin", &["joins"]);
    let run = crate::corescan(["query", path, "WITH vs AS (SELECT 1 AS z) SELECT * FROM vs"]);
    assert!(!run.stderr.contains("view"), "{}", run.stderr);
}

/// Asserts that `corescan query` refuses `sql` on `path` with one `error:` line holding every
/// one of `needles`.
fn corescan_refuses(path: &str, sql: &str, needles: &[&str]) {
    crate::corescan(["query", path, sql]).assert_error(needles);
}
