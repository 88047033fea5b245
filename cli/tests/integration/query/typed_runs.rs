//! Grouped queries whose aggregate arguments take the typed runs (a double and an integer flag
//! per row) on some pages and the general path on others: pages of plain numbers beside pages
//! holding a REAL column's integral value (stored as an integer), a text number, a NULL,
//! integers whose products reach 2^53 or overflow, infinities whose difference is NaN, rows
//! written before a column was added; keys that pack (short BINARY texts, integers, NULL)
//! beside keys that do not (reals, NOCASE). Checked against SQLite for every core count and
//! the pread and mmap backends, and bit for bit across them.

use std::path::Path;

use rusqlite::Connection;

use super::{sqlite_answer, Axis, Io, QueryTester};
use crate::scratch_dir;

/// A LINEITEM-shaped table at page size 512 (a dozen rows a page): blocks of clean rows and
/// blocks with one kind of odd value each, so that both paths run on many pages.
fn build(path: &Path) {
    let _ = std::fs::remove_file(path);
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 512;
         CREATE TABLE li(q DECIMAL(15,2), p DECIMAL(15,2), d DECIMAL(15,2), t REAL,
                         f CHAR(1), s CHAR(1), ship DATE, x, n INTEGER, c TEXT COLLATE NOCASE);",
    )
    .unwrap();
    let mut rng = testkit::Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut next = move |n: u64| rng.below(n);
    conn.execute_batch("BEGIN").unwrap();
    for block in 0..120 {
        for _ in 0..25 {
            let q = (1 + next(50)).to_string();
            let p = format!("{}.{:02}", 900 + next(100_000), next(100));
            let d = format!("0.{:02}", next(11));
            let t = format!("0.0{}", next(9));
            let f = ["'A'", "'N'", "'R'"][next(3) as usize];
            let s = ["'F'", "'O'"][next(2) as usize];
            let ship = format!(
                "'199{}-{:02}-{:02}'",
                2 + next(7),
                1 + next(12),
                1 + next(28)
            );
            let x = (next(1000) as f64 / 8.0).to_string();
            let n = next(5).to_string();
            let c = ["'a'", "'A'", "'b'"][next(3) as usize];
            let mut row = [q, p, d, t, f.into(), s.into(), ship, x, n, c.into()];
            if next(6) == 0 {
                match block % 8 {
                    // A REAL column's integral value (stored as an integer, read as a real).
                    1 => row[3] = "2.0".into(),
                    // A text number where no affinity converts it.
                    2 => row[7] = "'12.5'".into(),
                    3 => row[1] = "NULL".into(),
                    // Products of integers beyond 2^53 (and beyond 2^63: a real in SQLite).
                    4 => row[0] = (1i64 << 40).to_string(),
                    // Infinity: inf - inf is NaN, which SQLite makes NULL.
                    5 => row[3] = "9e999".into(),
                    // A real key.
                    6 => row[8] = "2.5".into(),
                    // A NULL key part.
                    7 => row[5] = "NULL".into(),
                    _ => {}
                }
            }
            conn.execute_batch(&format!(
                "INSERT INTO li(q, p, d, t, f, s, ship, x, n, c) VALUES ({})",
                row.join(", ")
            ))
            .unwrap();
        }
        if block == 100 {
            // Older rows lack these columns: their DEFAULT is read (a number, and a text).
            conn.execute_batch(
                "ALTER TABLE li ADD COLUMN a DEFAULT 3;
                 ALTER TABLE li ADD COLUMN b DEFAULT 'z';",
            )
            .unwrap();
        }
    }
    conn.execute_batch("COMMIT").unwrap();
}

const Q1: &str = "SELECT f, s, sum(q) AS sum_qty, sum(p) AS sum_base_price,
  sum(p * (1 - d)) AS sum_disc_price, sum(p * (1 - d) * (1 + t)) AS sum_charge,
  avg(q) AS avg_qty, avg(p) AS avg_price, avg(d) AS avg_disc, count(*) AS count_order
  FROM li WHERE ship <= date('1998-12-01', '-90 day') GROUP BY f, s ORDER BY f, s";

const QUERIES: &[&str] = &[
    Q1,
    "SELECT f, sum(t), total(t), avg(t), count(t), min(t), max(t) FROM li GROUP BY f",
    "SELECT s, sum(x), total(x), avg(x), count(x), sum(x * 2) FROM li GROUP BY s",
    "SELECT f, s, sum(q * q), sum(q * q * q), sum(q * p), sum(q - 7), avg(q + 0.5)
       FROM li GROUP BY 1, 2",
    "SELECT n, sum(p), count(p), sum(t - t), sum(t * 0), total(p * t) FROM li GROUP BY n",
    "SELECT c, sum(q), sum(d), count(*) FROM li GROUP BY c",
    "SELECT f, n, sum(a), sum(a * q), sum(b), count(b) FROM li GROUP BY f, n",
    "SELECT sum(q), sum(p * (1 - d)), avg(d), count(*) FROM li WHERE q < 25",
    "SELECT f, sum(rowid), sum(rowid * q), max(q * p) FROM li GROUP BY f",
    "SELECT f, s, min(p), max(p), sum(p) FROM li GROUP BY f, s ORDER BY 5 DESC",
    "SELECT q, count(*), sum(p) FROM li WHERE q < 5 GROUP BY q",
    "SELECT f, sum(DISTINCT q), count(DISTINCT d), sum(p) FROM li GROUP BY f",
];

/// The answers under every core count with the pread and mmap backends (the windows and row
/// paths rotating): SQLite's (its `integer overflow` included), and identical to each other.
fn check(db: &Path, sql: &str) {
    QueryTester::new(db, sql)
        .io(&[Io::Pread, Io::Mmap])
        .span(&[Axis::Cores, Axis::Io])
        .sqlite_may_fail()
        .same_error_messages()
        .agree()
        .check();
}

#[test]
fn typed_and_general_pages_give_sqlites_answers() {
    let db = scratch_dir("query-typed-runs").join("li.db");
    build(&db);
    for sql in QUERIES {
        assert!(sqlite_answer(&db, sql).is_ok(), "{sql}");
        check(&db, sql);
    }
}

/// An integer sum that leaves the 64-bit range is SQLite's `integer overflow` error, also when
/// its terms come from typed runs (every term below 2^53, the running sum beyond 2^63); a real
/// term after it makes the sum a real instead.
#[test]
fn integer_overflow_in_typed_sums_is_sqlites_error() {
    let db = scratch_dir("query-typed-overflow").join("big.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 512;
         CREATE TABLE big(k TEXT, v INTEGER, r);
         BEGIN;",
    )
    .unwrap();
    // 2^52 - 1 each, 5000 rows in two groups: each running sum passes 2^63 after about 2048.
    for i in 0..5000 {
        let k = ["'x'", "'y'"][i % 2];
        let r = if i == 4999 { "0.5" } else { "1" };
        conn.execute_batch(&format!(
            "INSERT INTO big(k, v, r) VALUES ({k}, {}, {r})",
            (1i64 << 52) - 1
        ))
        .unwrap();
    }
    conn.execute_batch("COMMIT").unwrap();
    drop(conn);
    for sql in [
        "SELECT sum(v) FROM big",
        "SELECT k, sum(v) FROM big GROUP BY k",
        "SELECT sum(v * r) FROM big",
        "SELECT k, sum(v * r), total(v), avg(v) FROM big GROUP BY k",
        "SELECT sum(v - v), sum(v / 4) FROM big",
    ] {
        let want = sqlite_answer(&db, sql);
        if sql.starts_with("SELECT sum(v) FROM") || sql.starts_with("SELECT k, sum(v) FROM") {
            assert!(
                matches!(&want, Err(e) if e.contains("integer overflow")),
                "{sql}: {want:?}"
            );
        }
        check(&db, sql);
    }
}

/// A grouped query's filter compares a column with a number constant straight from the stored
/// bytes (REALs and integers of up to four bytes as doubles, anything else by the general
/// test): every stored number kind (one- to eight-byte integers, the constants 0 and 1,
/// REALs, signed zeros, infinities, integers beyond 2^53 stored as such or as REALs), text
/// numbers, NULL and blobs, under every affinity, against constants at the edges (2^53 and its
/// neighbours as integers and as reals, the one-byte and 32-bit limits, fractions), with the
/// column on either side of each operator.
#[test]
fn number_compares_in_a_batch_filter_are_sqlites() {
    let db = scratch_dir("query-batch-compare").join("nums.db");
    let _ = std::fs::remove_file(&db);
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 512;
         CREATE TABLE n(k TEXT, i INTEGER, r REAL, m NUMERIC, t TEXT, b BLOB, x);
         BEGIN;",
    )
    .unwrap();
    let values = [
        "0",
        "1",
        "-1",
        "2",
        "127",
        "-128",
        "128",
        "-129",
        "32767",
        "-32768",
        "32768",
        "8388607",
        "-8388608",
        "8388608",
        "2147483647",
        "-2147483648",
        "2147483648",
        "9007199254740991",
        "9007199254740992",
        "9007199254740993",
        "-9007199254740993",
        "9223372036854775807",
        "-9223372036854775808",
        "0.0",
        "-0.0",
        "0.5",
        "-0.5",
        "1.0",
        "2.5",
        "127.5",
        "9007199254740992.0",
        "9007199254740994.0",
        "1e300",
        "-1e300",
        "9e999",
        "-9e999",
        "NULL",
        "'12'",
        "'-3.5'",
        "' 7 '",
        "'abc'",
        "''",
        "x'00'",
        "x'31'",
    ];
    for (j, v) in values.iter().enumerate() {
        conn.execute_batch(&format!(
            "INSERT INTO n VALUES ('{}', {v}, {v}, {v}, {v}, {v}, {v})",
            ["a", "b", "c"][j % 3]
        ))
        .unwrap();
    }
    conn.execute_batch("COMMIT").unwrap();
    drop(conn);
    let constants = [
        "0",
        "1",
        "-1",
        "127",
        "128",
        "-129",
        "2147483647",
        "2147483648",
        "9007199254740992",
        "9007199254740993",
        "-9007199254740993",
        "9223372036854775807",
        "0.5",
        "-0.0",
        "9007199254740992.0",
        "9007199254740993.0",
        "1e300",
        "2.5",
    ];
    for column in ["i", "r", "m", "t", "b", "x"] {
        for c in constants {
            let sql =
                format!("SELECT k, count(*), sum(rowid) FROM n WHERE {column} < {c} GROUP BY k");
            check(&db, &sql);
            for op in ["<=", ">", ">=", "=", "!="] {
                let sql = format!(
                    "SELECT count(*), sum(rowid) FROM n WHERE {column} {op} {c} AND {c} {op} {column} OR {column} {op} {c}"
                );
                check(&db, &sql);
                let sql = format!("SELECT count(*), total(rowid) FROM n WHERE {c} {op} {column}");
                check(&db, &sql);
            }
        }
    }
}
