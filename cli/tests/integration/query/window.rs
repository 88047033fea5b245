//! The decoder's text window for a filter that bounds a text column (TPC-H Q6's ship-date
//! range): the rows it drops are exactly rows SQLite's filter rejects, under every affinity
//! the column may declare, including ten-byte texts that read as numbers (which a numeric
//! affinity converts, and which a file written under another schema can hold).

use std::path::Path;

use rusqlite::Connection;

use super::{Axis, QueryTester};

/// A table `d(ship, v)` holding ten-byte dates inside and outside 1994, texts of other
/// lengths, ten-byte texts that are numbers, numbers, blobs and NULLs, declared `decl`.
fn dates_table(path: &Path, decl: &str) {
    let _ = std::fs::remove_file(path);
    let db = Connection::open(path).unwrap();
    db.execute_batch("PRAGMA page_size = 1024; CREATE TABLE d(id INTEGER PRIMARY KEY, ship TEXT, v REAL); BEGIN;")
        .unwrap();
    let odd = [
        "'2000000000'",
        "'1994000000'",
        "' 19940101 '",
        "'1.99401e03'",
        "'1994-01-0'",
        "'1994-01-011'",
        "'1994-13-99'",
        "'1993-12-31'",
        "'1995-01-01'",
        "'1994-01-01'",
        "'1994-12-31'",
        "19940601",
        "1994.5",
        "x'313939342d30362d3031'",
        "NULL",
    ];
    for k in 0..3000u32 {
        let ship = if k % 5 == 0 {
            odd[(k / 5) as usize % odd.len()].to_string()
        } else {
            format!("'{}-{:02}-{:02}'", 1992 + k % 7, 1 + k % 12, 1 + k % 28)
        };
        db.execute_batch(&format!(
            "INSERT INTO d(ship, v) VALUES ({ship}, {}.25)",
            k % 100
        ))
        .unwrap();
    }
    db.execute_batch("COMMIT; PRAGMA writable_schema = ON;")
        .unwrap();
    db.execute(
        "UPDATE sqlite_schema SET sql = ?1 WHERE name = 'd'",
        [format!(
            "CREATE TABLE d(id INTEGER PRIMARY KEY, ship {decl}, v REAL)"
        )],
    )
    .unwrap();
    db.execute_batch("PRAGMA writable_schema = OFF;").unwrap();
}

const QUERIES: &[&str] = &[
    "SELECT count(*), sum(v) FROM d WHERE ship >= '1994-01-01' AND ship < '1995-01-01'",
    "SELECT count(*), sum(v) FROM d WHERE ship < '1995-01-01' AND v > 10",
    "SELECT count(*), avg(v) FROM d WHERE ship > '1994-01-01' AND ship <= '1994-12-31'",
    "SELECT count(*) FROM d WHERE '1995-01-01' > ship AND '1993-06-30' <= ship AND v < 50",
    "SELECT count(*) FROM d WHERE ship = '1994-06-01' AND ship <= '1999-01-01'",
    "SELECT count(*) FROM d WHERE ship >= '1995-01-01' AND ship < '1994-01-01'",
    "SELECT count(*) FROM d WHERE ship >= '1994-01-01' AND ship < '1995-01-01' COLLATE NOCASE",
    "SELECT substr(ship, 1, 4) y, count(*), sum(v) FROM d \
     WHERE ship >= '1993-01-01' AND ship < '1997-01-01' GROUP BY y",
    "SELECT count(*) FROM d WHERE ship > '1994-01-01' AND ship < '1994-06-01' OR v = 3.25",
];

#[test]
fn dropped_rows_are_rows_sqlite_rejects() {
    let dir = crate::scratch_dir("query-window");
    for decl in ["TEXT", "NUMERIC", "DATE", "INTEGER", "REAL", "BLOB", ""] {
        let path = dir.join(format!("d-{decl}.db"));
        dates_table(&path, decl);
        for sql in QUERIES {
            QueryTester::new(&path, *sql).span(&[Axis::Cores]).check();
        }
    }
}
