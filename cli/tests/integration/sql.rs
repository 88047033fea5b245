//! `corescan sql` on the command line: a join's rows against SQLite's, decimals printed
//! exactly, `--explain` with the corescan scans in the plan, and the error contract (corescan's
//! own line for a value that does not fit its column, DataFusion's for a bad query).

use crate::{corescan, open, scratch_dir, tiny_db};

#[test]
fn a_join_gives_sqlites_rows_and_decimals_print_exactly() {
    let db = tiny_db();
    let path = db.to_str().unwrap();
    let run = corescan([
        "sql",
        path,
        "SELECT n_name, count(*) AS suppliers FROM supplier JOIN nation \
         ON s_nationkey = n_nationkey GROUP BY n_name ORDER BY n_name",
        "--format",
        "json",
        "--cores",
        "2",
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let got: serde_json::Value = serde_json::from_str(&run.stdout).expect("valid JSON");
    let conn = open(db);
    let mut stmt = conn
        .prepare(
            "SELECT n_name, count(*) FROM supplier JOIN nation ON s_nationkey = n_nationkey \
             GROUP BY n_name ORDER BY n_name",
        )
        .unwrap();
    let expected: Vec<serde_json::Value> = stmt
        .query_map([], |r| {
            Ok(serde_json::json!({
                "n_name": r.get::<_, String>(0)?,
                "suppliers": r.get::<_, i64>(1)?,
            }))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(got, serde_json::Value::Array(expected));

    // A DECIMAL(15,2) sum is exact: SQLite's own exact sum, in integer cents.
    let cents: i64 = conn
        .query_row(
            "SELECT sum(cast(round(l_extendedprice * 100) AS integer)) FROM lineitem",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let run = corescan([
        "sql",
        path,
        "SELECT sum(l_extendedprice) AS total FROM lineitem",
        "--format",
        "csv",
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        format!("total\n{}.{:02}\n", cents / 100, cents % 100)
    );
}

#[test]
fn explain_shows_the_corescan_scans() {
    let db = tiny_db();
    let run = corescan([
        "sql",
        db.to_str().unwrap(),
        "SELECT o_orderpriority, count(*) FROM orders JOIN lineitem ON o_orderkey = l_orderkey \
         GROUP BY o_orderpriority",
        "--explain",
        "--cores",
        "2",
        "--io",
        "pread",
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    for needle in [
        "CorescanExec: file=",
        "table=ORDERS, columns=[O_ORDERKEY, O_ORDERPRIORITY], executors=2",
        "table=LINEITEM, columns=[L_ORDERKEY], executors=2",
        "io=pread",
    ] {
        assert!(run.stdout.contains(needle), "{needle} in {}", run.stdout);
    }
}

#[test]
fn errors_are_one_line() {
    let dir = scratch_dir("sql-errors");
    let db = dir.join("app.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER);")
        .unwrap();
    for id in 1..=100 {
        conn.execute("INSERT INTO t VALUES (?1, ?1)", [id]).unwrap();
    }
    conn.execute("UPDATE t SET n = 'abc' WHERE id = 42", [])
        .unwrap();
    drop(conn);
    let path = db.to_str().unwrap();
    corescan(["sql", path, "SELECT sum(n) FROM t"]).assert_error(&[
        path,
        "table t, column n, rowid 42: text value \"abc\" does not fit Int64",
    ]);
    corescan(["sql", path, "SELECT nosuch FROM t"]).assert_error(&["nosuch"]);
    corescan(["sql", path, "SELEKT 1"]).assert_error(&["SELEKT"]);
    corescan(["sql", &format!("{path}.missing"), "SELECT 1"]).assert_error(&["missing"]);
}
