//! Finding tables in `sqlite_schema`, checked against SQLite's own view of the schema.

use partitioner::schema::{find_table, read_schema};
use partitioner::{PageFile, TablePlan};
use tempfile::tempdir;

use crate::{create_db, read_only, Layout};

/// Statements SQLite accepts; for each, our column list must equal `PRAGMA table_xinfo`.
const TRICKY: &[&str] = &[
    r#"CREATE TABLE t1("a b" INT, [c,d] TEXT, `e``f`, 'g''h' REAL, "i""j")"#,
    "CREATE TABLE IF NOT EXISTS main.t2 (a DECIMAL(15, 2) DEFAULT (1.5), -- x, y\n b /* , c */ \
     VARCHAR(25) DEFAULT 'a, b', CONSTRAINT pk PRIMARY KEY (a, b), UNIQUE (b), \
     CHECK (a > 0 AND b <> ','), FOREIGN KEY (b) REFERENCES t1(\"a b\"))",
    "CREATE TABLE t3 (id INTEGER PRIMARY KEY DESC, x UNSIGNED BIG INT NOT NULL COLLATE binary)",
    "CREATE TABLE t4 (a, b AS (a || ',') STORED, c GENERATED ALWAYS AS (a + 1))",
    "CREATE TABLE t5 (\"primary\", [check], `unique`, \"constraint\", \"foreign\")",
    "CREATE TABLE t6 (a INT, b TEXT) STRICT",
    "CREATE TABLE \"T7\" (Ä TEXT, \"名前\" INT)",
];

#[test]
fn column_lists_match_sqlite_for_tricky_statements() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "s.db", Layout::pages(4096), |c| {
        for sql in TRICKY {
            c.execute_batch(sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        // SQLite stores a CREATE TABLE ... AS SELECT as a derived column list.
        c.execute_batch("CREATE TABLE t8 AS SELECT 1 AS \"x y\", 'a' AS b, * FROM t6")
            .unwrap();
    });
    let conn = read_only(&path);
    for table in ["t1", "t2", "t3", "t4", "t5", "t6", "T7", "t8"] {
        let mut stmt = conn
            .prepare(&format!("SELECT name FROM pragma_table_xinfo('{table}')"))
            .unwrap();
        let expected: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let plan = TablePlan::open(&path, table).unwrap();
        assert_eq!(plan.table.columns, expected, "{}", plan.table.sql);
    }
}

#[test]
fn names_match_case_insensitively_and_errors_list_tables() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "n.db", Layout::pages(4096), |c| {
        c.execute_batch(
            "CREATE TABLE LINEITEM (L_QUANTITY DECIMAL(15,2));
             CREATE TABLE orders (o_orderkey INTEGER);
             CREATE INDEX orders_idx ON orders(o_orderkey);
             CREATE VIEW big_orders AS SELECT * FROM orders WHERE o_orderkey > 10;
             CREATE TABLE kv (k TEXT PRIMARY KEY, v) WITHOUT ROWID;
             CREATE VIRTUAL TABLE docs USING fts5(body);",
        )
        .unwrap();
    });
    assert_eq!(
        TablePlan::open(&path, "lineitem").unwrap().table.name,
        "LINEITEM"
    );
    assert_eq!(
        TablePlan::open(&path, "OrDeRs").unwrap().table.name,
        "orders"
    );

    let err = |name: &str| TablePlan::open(&path, name).unwrap_err().to_string();
    let e = err("part");
    assert!(e.starts_with(&path.display().to_string()), "{e}");
    assert!(e.contains("no table named \"part\""), "{e}");
    assert!(e.contains("LINEITEM, orders"), "{e}");
    assert!(err("big_orders").contains("is a view, not a table"));
    assert!(err("orders_idx").contains("is an index, not a table"));
    assert!(err("kv").contains("WITHOUT ROWID"));
    assert!(err("docs").contains("virtual table"));
}

#[test]
fn a_large_schema_with_interior_pages_and_overflowing_sql() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "big.db", Layout::pages(512), |c| {
        c.execute_batch("BEGIN").unwrap();
        for i in 0..150 {
            c.execute_batch(&format!("CREATE TABLE filler_{i} (a, b, c)"))
                .unwrap();
        }
        // A 300-column statement is several kilobytes: it spills onto overflow pages.
        let cols: Vec<String> = (0..300)
            .map(|i| format!("column_with_a_long_name_{i} DECIMAL(15,2)"))
            .collect();
        c.execute_batch(&format!("CREATE TABLE wide ({})", cols.join(", ")))
            .unwrap();
        c.execute_batch("COMMIT").unwrap();
    });
    let stat = crate::dbstat(&path, "sqlite_schema");
    assert!(!stat.internal.is_empty(), "schema has no interior pages");
    assert!(!stat.overflow.is_empty(), "schema sql did not overflow");

    let file = PageFile::open(&path).unwrap();
    let entries = read_schema(&file).unwrap();
    assert_eq!(entries.len(), 151);
    let wide = find_table(&file, &entries, "WIDE").unwrap();
    assert_eq!(wide.columns.len(), 300);
    assert_eq!(wide.column_index("COLUMN_WITH_A_LONG_NAME_299"), Some(299));
    let plan = TablePlan::open(&path, "filler_149").unwrap();
    assert_eq!(plan.table.columns, ["a", "b", "c"]);
    // The error listing is capped.
    let e = TablePlan::open(&path, "nope").unwrap_err().to_string();
    assert!(e.contains("more)"), "{e}");
}
