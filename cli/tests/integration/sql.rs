//! `corescan sql` on the command line: a join's rows against SQLite's, decimals printed
//! exactly, `--explain` with the corescan scans in the plan, and the error contract (corescan's
//! own line for a value that does not fit its column, DataFusion's for a bad query).

use crate::cli::closed_after_one_line;
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
fn explain_shows_the_filters_pushed_into_the_scan_and_the_answer_is_the_same_without() {
    let db = tiny_db();
    let path = db.to_str().unwrap();
    let q6 = "SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem \
              WHERE l_shipdate >= date '1994-01-01' \
                AND l_shipdate < date '1994-01-01' + interval '1' year \
                AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND l_quantity < 24";
    let run = corescan(["sql", path, q6, "--explain"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "filter=(\"L_SHIPDATE\" >= '1994-01-01') AND (\"L_SHIPDATE\" < '1995-01-01') AND \
             (\"L_DISCOUNT\" >= 0.05) AND (\"L_DISCOUNT\" <= 0.07) AND (\"L_QUANTITY\" < 24.00)"
        ),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("FilterExec"), "{}", run.stdout);
    let run = corescan(["sql", path, "--no-pushdown", q6, "--explain"]);
    assert!(run.stdout.contains("FilterExec"), "{}", run.stdout);
    let pushed = corescan(["sql", path, q6, "--format", "csv"]);
    let not = corescan(["sql", path, q6, "--format", "csv", "--no-pushdown"]);
    assert_eq!(pushed.status, 0, "{}", pushed.stderr);
    assert!(pushed.stdout.starts_with("revenue\n"), "{}", pushed.stdout);
    assert_eq!(pushed.stdout, not.stdout);
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
        "--type t.n=TYPE",
    ]);
    // Read as text, the column answers; a type name the option does not know is a usage error.
    let run = corescan([
        "sql",
        path,
        "SELECT n FROM t WHERE id BETWEEN 41 AND 42",
        "--type",
        "t.n=TEXT",
        "--format",
        "csv",
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "n\n41\nabc\n");
    let run = corescan(["sql", path, "SELECT 1", "--type", "t.n=MONEY"]);
    run.assert_usage_error();
    assert!(
        run.stderr.contains("unknown type \"MONEY\""),
        "{}",
        run.stderr
    );
    corescan(["sql", path, "SELECT 1", "--type", "t.nosuch=TEXT"])
        .assert_error(&[path, "column nosuch: no such column"]);
    corescan(["sql", path, "SELECT nosuch FROM t"]).assert_error(&["nosuch"]);
    corescan(["sql", path, "SELEKT 1"]).assert_error(&["SELEKT"]);
    corescan(["sql", &format!("{path}.missing"), "SELECT 1"]).assert_error(&["missing"]);
}

#[test]
fn report_gives_each_scans_io_report() {
    let db = tiny_db();
    let path = db.to_str().unwrap();
    let sql = "SELECT count(*) AS n FROM orders JOIN customer ON o_custkey = c_custkey \
               WHERE c_mktsegment = 'BUILDING'";
    let run = corescan([
        "sql", path, sql, "--report", "--cores", "2", "--io", "pread",
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let conn = open(db);
    let customers: i64 = conn
        .query_row(
            "SELECT count(*) FROM customer WHERE c_mktsegment = 'BUILDING'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let orders: i64 = conn
        .query_row("SELECT count(*) FROM orders", [], |r| r.get(0))
        .unwrap();
    for needle in [
        "scan 1: ".to_string(),
        "scan 2: ".to_string(),
        "CUSTOMER (C_CUSTKEY) where (\"C_MKTSEGMENT\" = 'BUILDING')".to_string(),
        format!("{customers} rows to DataFusion"),
        format!("{orders} rows to DataFusion"),
        "io          pread".to_string(),
    ] {
        assert!(run.stderr.contains(&needle), "{needle} in {}", run.stderr);
    }
    let run = corescan(["sql", path, sql, "--report", "--format", "json"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let report: serde_json::Value = serde_json::from_str(run.stderr.trim()).expect("JSON");
    let scans = report.as_array().expect("an array of scans");
    assert_eq!(scans.len(), 2, "{report}");
    let customer = scans
        .iter()
        .find(|s| s["table"] == "CUSTOMER")
        .expect("the customer scan");
    assert_eq!(customer["rows_to_datafusion"], customers);
    assert!(customer["report"]["executors"].is_array(), "{customer}");
}

#[test]
fn bench_tpch_writes_its_table_json_and_plot() {
    let db = tiny_db();
    let out = scratch_dir("bench-tpch");
    let run = corescan([
        "bench",
        "tpch",
        db.to_str().unwrap(),
        "--no-peers",
        "--queries",
        "6,13",
        "--rounds",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let md = std::fs::read_to_string(out.join("tpch.md")).expect("tpch.md");
    for needle in [
        "## warm",
        "| Q6 | ",
        "| Q13 | ",
        "| total | ",
        "Medians of 2",
    ] {
        assert!(md.contains(needle), "{needle} in {md}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tpch.json")).unwrap()).unwrap();
    let runs = json["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 4, "{json}");
    for r in runs {
        assert!(r["seconds"].as_f64().is_some_and(|s| s > 0.0), "{r}");
        assert!(r["io"].as_str().is_some_and(|io| !io.is_empty()), "{r}");
    }
    // Q6 has one row; Q13 one per order count.
    assert_eq!(runs[0]["rows"], 1, "{json}");
    let svg = std::fs::read_to_string(out.join("tpch-warm.svg")).expect("the plot");
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
    corescan(["bench", "tpch", db.to_str().unwrap(), "--queries", "23"])
        .assert_error(&["no TPC-H query 23"]);
}

/// `corescan sql ... | head -1` ends quietly with status 0, as `query` does.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let db = tiny_db().to_str().unwrap().to_string();
    for format in ["csv", "jsonl"] {
        let (status, stderr) =
            closed_after_one_line(&["sql", &db, "SELECT * FROM lineitem", "--format", format]);
        assert_eq!(status, Some(0), "{format}: {stderr}");
        assert_eq!(stderr, "", "{format}");
    }
}

#[test]
fn several_files_are_one_table_and_errors_name_the_file() {
    let dir = scratch_dir("sql-files");
    let mut paths = Vec::new();
    for (i, extra) in [(0, ""), (1, ", note TEXT")].into_iter() {
        let path = dir.join(format!("f{i}.db"));
        let _ = std::fs::remove_file(&path);
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(&format!(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER{extra});
             CREATE TABLE only{i}(x INTEGER); INSERT INTO only{i} VALUES ({i});"
        ))
        .unwrap();
        for id in 1..=50 {
            c.execute("INSERT INTO t(id, n) VALUES (?1, ?1 * 10)", [id + 100 * i])
                .unwrap();
        }
        if i == 1 {
            c.execute_batch("UPDATE t SET note = 'n' || id WHERE id % 10 = 0")
                .unwrap();
        }
        paths.push(path.to_str().unwrap().to_string());
    }
    let pattern = format!("{}/f*.db", dir.display());
    let run = corescan([
        "sql",
        "--format",
        "csv",
        &pattern,
        "SELECT count(*), sum(n), count(note), (SELECT x FROM only1) FROM t",
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout.lines().nth(1),
        Some("100,75500,5,1"),
        "{}",
        run.stdout
    );
    let run = corescan(["sql", "--explain", &paths[0], &paths[1], "SELECT n FROM t"]);
    assert!(run.stdout.contains("and 1 more file"), "{}", run.stdout);
    // A value that does not fit its column's type names its own file.
    rusqlite::Connection::open(&paths[1])
        .unwrap()
        .execute("UPDATE t SET n = 'abc' WHERE id = 142", [])
        .unwrap();
    corescan(["sql", &paths[0], &paths[1], "SELECT sum(n) FROM t"]).assert_error(&[
        "f1.db",
        "rowid 142",
        "abc",
    ]);
    // A column whose affinity differs from the first file's.
    let other = dir.join("g.db");
    let _ = std::fs::remove_file(&other);
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, n TEXT); INSERT INTO t VALUES (1, 'x')",
        )
        .unwrap();
    corescan([
        "sql",
        &paths[0],
        other.to_str().unwrap(),
        "SELECT count(n) FROM t",
    ])
    .assert_error(&["g.db", "\"n\"", "affinity"]);
}

/// Over several files, a statement that names `_file` gets each row's file path as given
/// (the column is then in `*` too: DataFusion has no hidden columns); a `WHERE` term on it
/// is pushed into the scan, which never opens a file it excludes (here a damaged one). A
/// statement that does not name it sees the table's own columns; a real column of that name
/// is read as it is.
#[test]
fn the_file_column_gives_each_rows_file_and_excluded_files_are_never_read() {
    let dir = scratch_dir("sql-file-column");
    let mut paths = Vec::new();
    for i in 0..3i64 {
        let path = dir.join(format!("shard{i}.db"));
        let _ = std::fs::remove_file(&path);
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA page_size = 1024; CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER);
             CREATE TABLE real(id INTEGER PRIMARY KEY, _file TEXT);",
        )
        .unwrap();
        for id in 1..=(100 * (i + 1)) {
            c.execute("INSERT INTO t(id, n) VALUES (?1, ?1 + ?2)", [id, i])
                .unwrap();
        }
        c.execute("INSERT INTO real VALUES (1, 'mine')", [])
            .unwrap();
        paths.push(path.to_str().unwrap().to_string());
    }
    let sql = |q: &str| {
        let mut args = vec!["sql".to_string(), "--format".into(), "csv".into()];
        args.extend(paths.iter().cloned());
        args.push(q.to_string());
        corescan(args)
    };
    // Not named: the table's own columns.
    let run = sql("SELECT * FROM t WHERE n = 2 * id ORDER BY id");
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "id,n\n1,2\n2,4\n");
    // The last shard's table root made an index page: reading it fails.
    let root: u32 = rusqlite::Connection::open(&paths[2])
        .unwrap()
        .query_row(
            "SELECT rootpage FROM sqlite_schema WHERE name = 't'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&paths[2])
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[0x0a], u64::from(root - 1) * 1024).unwrap();
    drop(file);
    let grouped = format!(
        "SELECT _file, count(*), sum(n) FROM t WHERE _file <> '{}' GROUP BY _file ORDER BY 1",
        paths[2]
    );
    let run = sql(&grouped);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let want = format!(
        "_file,count(*),sum(t.n)\n{},100,5050\n{},200,20300\n",
        paths[0], paths[1]
    );
    assert_eq!(run.stdout, want);
    let run = sql(&format!(
        "SELECT * FROM t WHERE _FILE = '{}' AND id < 3 ORDER BY id",
        paths[1]
    ));
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        format!("id,n,_file\n1,2,{0}\n2,3,{0}\n", paths[1])
    );
    // Without a _file term every file is read, the damaged one too.
    sql("SELECT count(*) FROM t").assert_error(&["shard2.db", &format!("page {root}")]);
    // A real column named _file.
    let run = sql("SELECT _file, count(*) FROM real GROUP BY _file");
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "_file,count(*)\nmine,3\n");
    // The report counts the excluded file.
    let mut args = vec!["sql".to_string(), "--report".into()];
    args.extend(paths.iter().cloned());
    args.push(format!(
        "SELECT count(*) FROM t WHERE _file = '{}'",
        paths[0]
    ));
    let run = corescan(args);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(run.stdout.contains(" 100 "), "{}", run.stdout);
    assert!(
        run.stderr.contains("3 listed, 1 read, 2 skipped")
            || run.stdout.contains("3 listed, 1 read, 2 skipped"),
        "{}{}",
        run.stdout,
        run.stderr
    );
}

/// `ORDER BY` puts NULLs where SQLite does (smallest: first ascending, last descending), in a
/// query's order, a window's and an aggregate's; `NULLS LAST` still overrides.
#[test]
fn nulls_sort_where_sqlite_puts_them() {
    let dir = scratch_dir("sql-nulls");
    let db = dir.join("nulls.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, x INTEGER, s TEXT);
         INSERT INTO t(x, s) VALUES (3, 'c'), (NULL, NULL), (1, 'a'), (NULL, 'b'), (2, NULL);",
    )
    .unwrap();
    for sql in [
        "SELECT id, x FROM t ORDER BY x, id",
        "SELECT id, x FROM t ORDER BY x DESC, id",
        "SELECT id, s FROM t ORDER BY s DESC, id DESC",
        "SELECT id, row_number() OVER (ORDER BY x, id) AS n FROM t ORDER BY id",
        "SELECT id, x FROM t ORDER BY x NULLS LAST, id",
    ] {
        let mut stmt = conn.prepare(sql).unwrap();
        let expected: Vec<Vec<serde_json::Value>> = stmt
            .query_map([], |r| {
                Ok(vec![
                    serde_json::json!(r.get::<_, i64>(0)?),
                    match r.get_ref(1)? {
                        rusqlite::types::ValueRef::Null => serde_json::Value::Null,
                        rusqlite::types::ValueRef::Integer(i) => serde_json::json!(i),
                        rusqlite::types::ValueRef::Text(t) => {
                            serde_json::json!(String::from_utf8_lossy(t))
                        }
                        other => panic!("unexpected {other:?}"),
                    },
                ])
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let run = corescan(["sql", db.to_str().unwrap(), sql, "--format", "json"]);
        assert_eq!(run.status, 0, "{sql}: {}", run.stderr);
        let got: Vec<serde_json::Value> = serde_json::from_str(&run.stdout).expect("JSON");
        let got: Vec<Vec<serde_json::Value>> = got
            .iter()
            .map(|row| {
                let row = row.as_object().expect("a JSON object per row");
                let other = row.keys().find(|k| *k != "id").expect("two columns");
                vec![row["id"].clone(), row[other].clone()]
            })
            .collect();
        assert_eq!(got, expected, "{sql}");
    }
    // An aggregate's own ORDER BY: NULL first, as SQLite's group_concat orders.
    let sql = "SELECT string_agg(CAST(id AS TEXT), ';' ORDER BY x, id) AS ids FROM t";
    let run = corescan(["sql", db.to_str().unwrap(), sql, "--format", "csv"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let expected: String = conn
        .query_row(
            "SELECT group_concat(id, ';' ORDER BY x, id) FROM t",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(run.stdout, format!("ids\n{expected}\n"));
}
