//! Declared column types as Arrow types, value by value, and the strict conversion: a stored
//! value that does not fit its column's type is an error naming the file, table, column, rowid
//! and storage class, never a NULL or a guess.

use std::path::Path;

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use engine::value::{StorageClass, Value};
use rusqlite::Connection;

use corescan_datafusion::TableOptions;
use engine::Placement;

use crate::{datafusion, datafusion_tables, runtime, scratch_dir, sqlite};

fn t(s: &str) -> Value {
    Value::text(s)
}

/// A table with a column of every mapped type, in three rows: ordinary values, NULLs, and the
/// values SQLite stores in another class than declared (a whole price as an integer, a whole
/// REAL as an integer on disk, a timestamp with a zone).
fn typed_db(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE Typed(id INTEGER PRIMARY KEY, i BIGINT, r DOUBLE, t VARCHAR(10), b BLOB,
             u, price DECIMAL(15,2), qty NUMERIC(10,0), d DATE, ts DATETIME, flag BOOLEAN,
             n NUMERIC);
         INSERT INTO Typed VALUES (1, 10, 1.5, 'abc', x'0102', 'text', 0.05, 7, '2024-02-29',
             '2024-02-29T10:20:30.500', 1, 2.5);
         INSERT INTO Typed(id) VALUES (2);
         INSERT INTO Typed VALUES (3, -4, 3, 'é', x'', x'00ff', 17, 123456789, '1970-01-01',
             '2024-01-01 00:00:00+01:00', 0, 4);",
    )
    .unwrap();
}

#[test]
fn declared_types_read_as_their_arrow_types() {
    let dir = scratch_dir("typed");
    let db = dir.join("typed.db");
    typed_db(&db);
    let sql = "SELECT * FROM typed ORDER BY id";
    let schema = runtime().block_on(async {
        let ctx = corescan_datafusion::context();
        corescan_datafusion::register(&ctx, &db, Default::default(), Default::default()).unwrap();
        ctx.sql(sql).await.unwrap().schema().as_arrow().clone()
    });
    let types: Vec<DataType> = schema
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    assert_eq!(
        types,
        [
            DataType::Int64,
            DataType::Int64,
            DataType::Float64,
            DataType::Utf8,
            DataType::Binary,
            DataType::Binary,
            DataType::Decimal128(15, 2),
            DataType::Decimal128(10, 0),
            DataType::Date32,
            DataType::Timestamp(TimeUnit::Microsecond, None),
            DataType::Boolean,
            DataType::Float64,
        ]
    );
    let answer = datafusion(&db, sql).unwrap();
    let t = Value::text;
    assert_eq!(
        answer.rows,
        [
            vec![
                Value::Integer(1),
                Value::Integer(10),
                Value::Real(1.5),
                t("abc"),
                Value::Blob(vec![1, 2]),
                Value::Blob(b"text".to_vec()),
                t("0.05"),
                t("7"),
                t("2024-02-29"),
                t("2024-02-29 10:20:30.5"),
                Value::Integer(1),
                Value::Real(2.5),
            ],
            [vec![Value::Integer(2)], vec![Value::Null; 11]].concat(),
            vec![
                Value::Integer(3),
                Value::Integer(-4),
                Value::Real(3.0),
                t("é"),
                Value::Blob(Vec::new()),
                Value::Blob(vec![0, 255]),
                t("17.00"),
                t("123456789"),
                t("1970-01-01"),
                t("2023-12-31 23:00:00"),
                Value::Integer(0),
                Value::Real(4.0),
            ],
        ]
    );
    // The typed columns compute as their types: decimal sums exactly, dates as dates.
    let answer = datafusion(
        &db,
        "SELECT sum(price), min(d), count(*) FROM typed \
         WHERE d < date '2000-01-01' OR d IS NULL",
    )
    .unwrap();
    assert_eq!(
        answer.rows,
        [vec![t("17.00"), t("1970-01-01"), Value::Integer(2)]]
    );
}

/// A table of 300 good rows and one bad value written by an application at rowid 42.
fn db_with_bad_value(name: &str, column: &str, bad: &str) -> std::path::PathBuf {
    let dir = scratch_dir(&format!("strict-{name}"));
    let db = dir.join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER, price DECIMAL(15,2), d DATE,
             flag BOOLEAN);",
    )
    .unwrap();
    for id in 1..=300 {
        conn.execute(
            "INSERT INTO t VALUES (?1, ?1 * 2, ?1 / 100.0, '2024-01-01', ?1 % 2)",
            [id],
        )
        .unwrap();
    }
    conn.execute(&format!("UPDATE t SET {column} = {bad} WHERE id = 42"), [])
        .unwrap();
    db
}

/// The conversion error of `sql` over `db`, with its one-line message.
fn conversion_error(db: &Path, sql: &str) -> (String, String, Option<i64>, StorageClass, String) {
    let e = datafusion(db, sql).expect_err("a value that does not fit is an error");
    let ours = corescan_datafusion::find(&e).unwrap_or_else(|| panic!("not corescan's: {e}"));
    let line = ours.to_string();
    assert!(!line.contains('\n'), "{line}");
    assert!(line.contains(&db.display().to_string()), "{line}");
    match ours {
        corescan_datafusion::Error::Conversion(c) => {
            (c.table.clone(), c.column.clone(), c.rowid, c.class, line)
        }
        other => panic!("not a conversion error: {other}"),
    }
}

#[test]
fn a_value_that_does_not_fit_is_an_error_naming_file_table_column_rowid_and_class() {
    for (name, column, bad, class, sql) in [
        (
            "text-int",
            "n",
            "'abc'",
            StorageClass::Text,
            "SELECT sum(n) FROM t",
        ),
        (
            "real-decimal",
            "price",
            "0.123",
            StorageClass::Real,
            "SELECT sum(price) FROM t",
        ),
        (
            "bad-date",
            "d",
            "'2024-13-01'",
            StorageClass::Text,
            "SELECT max(d) FROM t",
        ),
        (
            "int-date",
            "d",
            "20240101",
            StorageClass::Integer,
            "SELECT d FROM t WHERE id > 10",
        ),
        (
            "two-bool",
            "flag",
            "2",
            StorageClass::Integer,
            "SELECT count(*) FROM t WHERE flag",
        ),
    ] {
        let db = db_with_bad_value(name, column, bad);
        let (table, col, rowid, got, line) = conversion_error(&db, sql);
        assert_eq!(
            (table.as_str(), col.as_str(), rowid, got),
            ("t", column, Some(42), class),
            "{line}"
        );
        assert!(line.contains("table t, column "), "{line}");
        assert!(line.contains("rowid 42"), "{line}");
        assert!(line.contains(class.name()), "{line}");
        // The other columns are never decoded, so a query that does not read the bad one is
        // answered.
        let answer = datafusion(&db, "SELECT count(*), sum(id) FROM t").unwrap();
        assert_eq!(
            answer.rows,
            [vec![Value::Integer(300), Value::Integer(45_150)]],
            "{name}"
        );
    }
}

#[test]
fn a_virtual_generated_column_is_refused_by_name() {
    let dir = scratch_dir("generated");
    let db = dir.join("gen.db");
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE g(a INTEGER, b INTEGER GENERATED ALWAYS AS (a * 2) VIRTUAL,
                 c INTEGER GENERATED ALWAYS AS (a + 1) STORED);
             INSERT INTO g(a) VALUES (1), (2);",
        )
        .unwrap();
    let answer = datafusion(&db, "SELECT a, c FROM g ORDER BY a").unwrap();
    assert_eq!(
        answer.rows,
        [
            vec![Value::Integer(1), Value::Integer(2)],
            vec![Value::Integer(2), Value::Integer(3)]
        ]
    );
    let e = datafusion(&db, "SELECT b FROM g").unwrap_err();
    let line = corescan_datafusion::find(&e)
        .expect("corescan's error")
        .to_string();
    assert!(
        line.contains("table g, column b: a VIRTUAL generated column"),
        "{line}"
    );
}

#[test]
fn every_column_as_text_reads_what_sqlite_casts_and_an_override_reads_numbers_kept_as_text() {
    let dir = scratch_dir("as-text");
    let db = dir.join("app.db");
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE Ledger(id INTEGER PRIMARY KEY, amount TEXT, rate REAL, note,
                 qty INTEGER);
             INSERT INTO Ledger VALUES (1, '12.50', 0.1, 5, 3), (2, '-3', 1e300, 'x', NULL),
                 (3, NULL, -0.0, x'6869', 7), (4, '.5', 2.5e-7, 1.5, -2);",
        )
        .unwrap();
    let all_text = TableOptions {
        all_text: true,
        ..TableOptions::default()
    };
    let ours = datafusion_tables(
        &db,
        "SELECT * FROM ledger ORDER BY id",
        Placement::default(),
        all_text.clone(),
    )
    .unwrap();
    let theirs = sqlite(
        &db,
        "SELECT CAST(id AS TEXT), CAST(amount AS TEXT), CAST(rate AS TEXT), CAST(note AS TEXT),
             CAST(qty AS TEXT) FROM Ledger ORDER BY id",
    );
    assert_eq!(ours.rows, theirs);
    // Text compares as text in DataFusion, so nothing is pushed into the scan, whose SQLite
    // would compare the INTEGER column as numbers (3 and 7 are below 10; '3' and '7' are
    // above '10').
    let ours = datafusion_tables(
        &db,
        "SELECT id FROM ledger WHERE qty > '10' ORDER BY id",
        Placement::default(),
        all_text,
    )
    .unwrap();
    assert_eq!(
        ours.rows,
        [vec![t("1")], vec![t("3")]],
        "'3' and '7' are above '10' as text, '-2' is not"
    );

    let typed = TableOptions {
        types: vec![
            "ledger.AMOUNT=decimal(10,2)".parse().unwrap(),
            "Ledger.note=TEXT".parse().unwrap(),
        ],
        ..TableOptions::default()
    };
    let ours = datafusion_tables(
        &db,
        "SELECT sum(amount), string_agg(note, '|' ORDER BY id) FROM ledger",
        Placement::default(),
        typed,
    )
    .unwrap();
    assert_eq!(ours.rows, [vec![t("10.00"), t("5|x|hi|1.5")]]);

    for (given, message) in [
        (
            "nope.amount=INTEGER",
            "table nope, column amount: no such table",
        ),
        ("ledger.nope=INTEGER", "column nope: no such column"),
    ] {
        let options = TableOptions {
            types: vec![given.parse().unwrap()],
            ..TableOptions::default()
        };
        let e = datafusion_tables(&db, "SELECT 1 FROM ledger", Placement::default(), options)
            .unwrap_err();
        assert!(e.to_string().contains(message), "{given}: {e}");
    }
    for bad in ["ledger.amount", "amount=INTEGER", "ledger.amount=MONEY"] {
        assert!(
            bad.parse::<corescan_datafusion::TypeOverride>().is_err(),
            "{bad}"
        );
    }
}
