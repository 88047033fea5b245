//! Q6 on columns of every declared affinity holding values of every storage class, against
//! SQLite (issue: text-affinity columns matched nothing; unknown collations were compared as
//! BINARY; a stored NaN must read as NULL).
//!
//! The tables are written the way no schema would store them on its own: rows go into untyped
//! columns (so each value keeps the class it was written with) and the schema is then rewritten
//! to the declared types under test (`PRAGMA writable_schema`). SQLite then reads those very
//! values under the declared affinity, which is what an application's file looks like after a
//! schema change, a type-less `ALTER TABLE`, or another writer's inserts.

use std::path::{Path, PathBuf};

use engine::q6::{run_q6, Q6Params};
use engine::{spread, IoBackend, IoChoice, ScanSettings, SqpollMode};
use partitioner::TablePlan;
use rusqlite::Connection;
use testkit::Rng;

use crate::scan::ScanTester;
use crate::scratch_dir;

/// Declared types under test, one per affinity, plus the collations.
const TYPES: [&str; 9] = [
    "DECIMAL(15,2)",
    "INTEGER",
    "REAL",
    "CHAR(10)",
    "VARCHAR(8)",
    "BLOB",
    "",
    "TEXT COLLATE NOCASE",
    "CHAR(12) COLLATE RTRIM",
];

/// One value as an SQL literal, in one of several storage classes, for a number with two
/// decimals given in hundredths.
fn money_literal(rng: &mut Rng, hundredths: i64, allow_junk: bool) -> String {
    let text = format!("{}.{:02}", hundredths / 100, hundredths % 100);
    let whole = hundredths % 100 == 0;
    match rng.below(if allow_junk { 11 } else { 8 }) {
        0 if whole => format!("{}", hundredths / 100),
        0 | 1 => text.clone(),
        2 => format!("'{text}'"),
        3 if whole => format!("'{}'", hundredths / 100),
        3 => format!("' {text} '"),
        4 => format!("'{}'", text.trim_end_matches('0').trim_end_matches('.')),
        5 => format!("CAST({text} AS REAL)"),
        6 if whole => format!("'{}.0'", hundredths / 100),
        6 | 7 => text,
        8 => "NULL".to_string(),
        9 => "'abc'".to_string(),
        _ => "x'3234'".to_string(),
    }
}

/// A ship date in one of several storage classes.
fn date_literal(rng: &mut Rng, y: u32, m: u32, d: u32) -> String {
    match rng.below(10) {
        0 => format!("{y}{m:02}{d:02}"),
        1 => format!("{y}.{m:02}"),
        2 => format!("'{y}{m:02}{d:02}'"),
        3 => "NULL".to_string(),
        4 => format!("'{y}-{m:02}-{d:02}  '"),
        5 => format!("'{y}-{M}-{d:02}'", M = m),
        6 => format!("x'{y:04x}'"),
        _ => format!("'{y}-{m:02}-{d:02}'"),
    }
}

/// Writes `lineitem` with the four Q6 columns declared as `types` (quantity, price, discount,
/// ship date) and `rows` rows of mixed storage classes. `junk` lets quantity and discount hold
/// non-numeric text and blobs (the price always holds a number, so the exact sum exists).
fn write_table(path: &Path, types: [&str; 4], rows: usize, seed: u64) {
    let _ = std::fs::remove_file(path);
    let db = Connection::open(path).unwrap();
    db.execute_batch(
        "PRAGMA page_size = 1024;
         CREATE TABLE lineitem(l_orderkey INTEGER, l_quantity, l_extendedprice, l_discount,
                               l_comment TEXT, l_shipdate);",
    )
    .unwrap();
    let mut rng = Rng::xorshift64(seed | 1);
    db.execute_batch("BEGIN").unwrap();
    for k in 0..rows {
        let (q, p, x) = (
            (1 + rng.below(50) as i64) * 100,
            90_000 + rng.below(1_000_000) as i64,
            rng.below(11) as i64,
        );
        let qty = money_literal(&mut rng, q, true);
        let price = money_literal(&mut rng, p, false);
        let disc = money_literal(&mut rng, x, true);
        let (y, m, d) = (
            1992 + rng.below(6) as u32,
            1 + rng.below(12) as u32,
            1 + rng.below(28) as u32,
        );
        let date = date_literal(&mut rng, y, m, d);
        db.execute_batch(&format!(
            "INSERT INTO lineitem VALUES ({k}, {qty}, {price}, {disc}, 'comment {k}', {date});"
        ))
        .unwrap();
    }
    db.execute_batch("COMMIT").unwrap();
    let sql = format!(
        "CREATE TABLE lineitem(l_orderkey INTEGER, l_quantity {}, l_extendedprice {}, \
         l_discount {}, l_comment TEXT, l_shipdate {})",
        types[0], types[1], types[2], types[3]
    );
    rewrite_schema(&db, &sql);
}

/// Replaces the table's `CREATE TABLE` text without touching its rows.
fn rewrite_schema(db: &Connection, sql: &str) {
    db.execute_batch("PRAGMA writable_schema = ON;").unwrap();
    db.execute(
        "UPDATE sqlite_schema SET sql = ?1 WHERE name = 'lineitem'",
        [sql],
    )
    .unwrap();
    db.execute_batch("PRAGMA writable_schema = OFF;").unwrap();
}

/// Parameter sets that exercise integer and fractional quantities and every discount edge.
fn params() -> Vec<Q6Params> {
    [
        ("1994-01-01", "0.06", "24"),
        ("1993-01-01", "0.02", "25.5"),
        ("1996-01-01", "0.09", "10"),
    ]
    .into_iter()
    .map(|(d, x, q)| Q6Params::parse(d, x, q).unwrap())
    .collect()
}

/// Every backend, one and two executors, one read at a time and a window.
fn tester() -> ScanTester {
    ScanTester {
        io: vec![
            IoBackend::Dma,
            IoBackend::Uring,
            IoBackend::Pread,
            IoBackend::Mmap,
        ],
        cores: vec![1, 2],
        readahead: vec![0, 32],
        coalesce_kib: vec![128],
        params: params(),
    }
}

#[test]
fn every_affinity_and_stored_class_matches_sqlite() {
    let dir = scratch_dir("affinity-matrix");
    let mut checked = 0;
    for (k, ty) in TYPES.iter().enumerate() {
        // The same declared type on all three numeric columns, and on the date in turn.
        for (j, ship) in [TYPES[0], ty].into_iter().enumerate() {
            let types = [*ty, TYPES[(k + 3) % TYPES.len()], *ty, ship];
            let path: PathBuf = dir.join(format!("t{k}-{j}.db"));
            write_table(&path, types, 600, 0x5EED + k as u64 * 31 + j as u64);
            let want: Vec<_> = params()
                .iter()
                .map(|p| bench::oracle::q6(&path, "lineitem", p).unwrap())
                .collect();
            assert!(
                want.iter().any(|a| a.rows_matched > 0),
                "{types:?}: the data should match some rows"
            );
            checked += tester().check(&path, "lineitem");
        }
    }
    assert_eq!(checked, TYPES.len() * 2 * 4 * 2 * 2 * params().len());
}

#[test]
fn text_quantity_compares_as_text() {
    // The case: l_quantity CHAR(10) holding text; SQLite compares '17' < '24' as text.
    let dir = scratch_dir("affinity-char-quantity");
    let path = dir.join("char.db");
    let db = Connection::open(&path).unwrap();
    db.execute_batch(
        "CREATE TABLE lineitem (l_quantity CHAR(10), l_extendedprice DECIMAL(15,2),
                                l_discount DECIMAL(15,2), l_shipdate DATE);
         INSERT INTO lineitem VALUES (17, 1000.50, 0.06, '1994-03-01'),
                                     ('3', 10.00, 0.05, '1994-04-01'),
                                     (100, 20.00, 0.07, '1994-05-01'),
                                     (24, 30.00, 0.06, '1994-06-01');",
    )
    .unwrap();
    drop(db);
    let want = bench::oracle::q6(&path, "lineitem", &Q6Params::default()).unwrap();
    // '17' < '24' and '100' < '24' as text; '3' and '24' are not.
    assert_eq!(want.rows_matched, 2);
    assert_eq!(want.revenue(), "61.4300");
    tester().check(&path, "lineitem");
}

#[test]
fn added_text_discount_column_reads_its_default_as_text() {
    let dir = scratch_dir("affinity-added-column");
    let path = dir.join("added.db");
    let db = Connection::open(&path).unwrap();
    db.execute_batch(
        "CREATE TABLE lineitem (l_quantity DECIMAL(15,2), l_extendedprice DECIMAL(15,2),
                                l_shipdate DATE);
         INSERT INTO lineitem VALUES (17, 1000.50, '1994-03-01'), (30, 10.00, '1994-04-01'),
                                     (5, 99.99, '1995-04-01');
         ALTER TABLE lineitem ADD COLUMN l_discount VARCHAR(8) DEFAULT 0.06;
         INSERT INTO lineitem VALUES (3, 7.00, '1994-07-01', '0.05');",
    )
    .unwrap();
    drop(db);
    let want = bench::oracle::q6(&path, "lineitem", &Q6Params::default()).unwrap();
    assert_eq!(want.rows_matched, 2, "{want:?}");
    tester().check(&path, "lineitem");
}

/// Runs Q6 once per backend and returns each outcome's error text (or `None` on success).
fn errors_under_every_backend(path: &Path) -> Vec<Option<String>> {
    let plan = TablePlan::open(path, "lineitem");
    [
        IoBackend::Dma,
        IoBackend::Uring,
        IoBackend::Pread,
        IoBackend::Mmap,
    ]
    .into_iter()
    .map(|io| {
        let settings = ScanSettings {
            io: IoChoice::Fixed(io),
            readahead: 32,
            coalesce_kib: 128,
            sqpoll: SqpollMode::Off,
            faults: engine::faults::Faults::NONE,
            memory: None,
        };
        let plan = plan.as_ref().map_err(|e| e.to_string());
        match plan {
            Err(e) => Some(e),
            Ok(plan) => run_q6(plan, &spread(2), &Q6Params::default(), &settings)
                .err()
                .map(|e| e.to_string()),
        }
    })
    .collect()
}

#[test]
fn unknown_collation_is_refused_naming_the_column() {
    let dir = scratch_dir("affinity-collation");
    let path = dir.join("rev.db");
    write_table(&path, ["DECIMAL(15,2)"; 4], 50, 7);
    let db = Connection::open(&path).unwrap();
    rewrite_schema(
        &db,
        "CREATE TABLE lineitem(l_orderkey INTEGER, l_quantity DECIMAL(15,2), \
         l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_comment TEXT, \
         l_shipdate DATE COLLATE rev)",
    );
    drop(db);
    // SQLite itself cannot run the query without the collation.
    let err = bench::oracle::q6(&path, "lineitem", &Q6Params::default()).unwrap_err();
    assert!(
        err.to_string().contains("no such collation sequence: rev"),
        "{err}"
    );
    for e in errors_under_every_backend(&path) {
        let e = e.expect("the scan must be refused");
        assert!(e.contains("l_shipdate") && e.contains("COLLATE rev"), "{e}");
    }
}

#[test]
fn non_numeric_text_price_in_a_matching_row_is_refused() {
    let dir = scratch_dir("affinity-junk-price");
    let path = dir.join("junk.db");
    let db = Connection::open(&path).unwrap();
    db.execute_batch(
        "CREATE TABLE lineitem (l_quantity DECIMAL(15,2), l_extendedprice VARCHAR(10),
                                l_discount DECIMAL(15,2), l_shipdate DATE);
         INSERT INTO lineitem VALUES (17, '12.50', 0.06, '1994-03-01'),
                                     (17, 'n/a', 0.06, '1994-03-01');",
    )
    .unwrap();
    drop(db);
    for e in errors_under_every_backend(&path) {
        let e = e.expect("an inexact sum must be refused");
        assert!(
            e.contains("l_extendedprice") && e.contains("\"n/a\""),
            "{e}"
        );
    }
}

/// Replaces the one occurrence of `from`'s big-endian encoding in the file with `to`'s.
fn patch_double(path: &Path, from: f64, to: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    let needle = from.to_bits().to_be_bytes();
    let at: Vec<usize> = bytes
        .windows(8)
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 1, "the marker value must occur once");
    bytes[at[0]..at[0] + 8].copy_from_slice(&to.to_be_bytes());
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn stored_nan_reads_as_null() {
    let dir = scratch_dir("affinity-nan");
    let path = dir.join("nan.db");
    let db = Connection::open(&path).unwrap();
    db.execute_batch(
        "CREATE TABLE lineitem (l_quantity REAL, l_extendedprice REAL, l_discount REAL,
                                l_shipdate DATE);
         INSERT INTO lineitem VALUES (17, 1000.5, 0.06, '1994-03-01'),
                                     (17, 1234.5678, 0.06, '1994-03-02'),
                                     (17, 100.25, 8765.4321, '1994-03-03'),
                                     (4321.125, 100.25, 0.06, '1994-03-04');",
    )
    .unwrap();
    drop(db);
    // A NaN price (matched: the product is NULL, sum skips it), a NaN discount and a NaN
    // quantity (neither matches).
    let nan = f64::NAN.to_bits();
    patch_double(&path, 1234.5678, nan);
    patch_double(&path, 8765.4321, nan | 1);
    patch_double(&path, 4321.125, nan);
    let want = bench::oracle::q6(&path, "lineitem", &Q6Params::default()).unwrap();
    assert_eq!((want.rows_matched, want.revenue()), (2, "60.0300".into()));
    tester().check(&path, "lineitem");
}
