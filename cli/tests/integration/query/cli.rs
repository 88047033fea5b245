//! `corescan query` on the command line: output modes as the `sqlite3` shell's, the report,
//! and the error contract.

use crate::corescan;

use super::fixture;

#[test]
fn output_modes() {
    let db = fixture();
    let db = db.to_str().unwrap();
    let sql =
        "SELECT id, i AS \"the i\", 'a,\"b' AS s, NULL AS n, 0.5 AS r FROM t ORDER BY id LIMIT 2";
    let run = corescan(["query", db, sql, "--format", "json"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("valid JSON");
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["s"], "a,\"b");
    assert!(rows[0]["n"].is_null());
    assert_eq!(rows[0]["r"], 0.5);
    assert!(rows[0].get("the i").is_some());

    let run = corescan(["query", db, sql, "--format", "csv"]);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], "id,\"the i\",s,n,r");
    assert!(lines[1].ends_with(",\"a,\"\"b\",,0.5"), "{}", lines[1]);

    let run = corescan(["query", db, sql, "--format", "jsonl"]);
    assert_eq!(run.stdout.lines().count(), 2);

    let run = corescan([
        "query",
        db,
        "SELECT 1 AS a, 22 AS bbb FROM t LIMIT 2",
        "--format",
        "line",
    ]);
    // As `sqlite3 -line`: names right-aligned to the longest, and to at least 5.
    assert_eq!(
        run.stdout,
        "    a = 1\n  bbb = 22\n\n    a = 1\n  bbb = 22\n"
    );

    let run = corescan(["query", db, "SELECT 1 AS a FROM t LIMIT 1"]);
    assert_eq!(run.stdout, "┌───┐\n│ a │\n├───┤\n│ 1 │\n└───┘\n");
}

#[test]
fn report_goes_to_stderr() {
    let db = fixture();
    let run = corescan([
        "query",
        db.to_str().unwrap(),
        "SELECT count(*) FROM t",
        "--format",
        "csv",
        "--report",
        "--cores",
        "2",
        "--io",
        "pread",
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("count(*)\n"), "{}", run.stdout);
    assert!(run.stderr.contains("pread"), "{}", run.stderr);
    assert!(run.stderr.contains("executors"), "{}", run.stderr);
}

#[test]
fn errors_are_one_line() {
    let db = fixture();
    let db = db.to_str().unwrap();
    corescan(["query", db, "SELECT * FROM t JOIN t"]).assert_error(&["joins"]);
    corescan(["query", db, "SELEC"]).assert_error(&["SQL syntax"]);
    corescan(["query", "/nonexistent.db", "SELECT 1 FROM t"]).assert_error(&["/nonexistent.db"]);
    corescan(["query", db, "SELECT 1 FROM t", "--format", "xml"]).assert_usage_error();
}
