//! A small LINEITEM-shaped table with boundary values, and SQLite's own Q6 answer for it.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};

/// A fresh directory for one test's files.
pub fn test_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("engine-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `rows` rows whose Q6 columns sweep the boundaries (discounts 0.04..0.08 stored as
/// REAL, integer quantities around 24, REAL quantities, dates around the window, NULLs), into a
/// table with TPC-H's column order and a page size of `page_size`.
pub fn make_lineitem(path: &Path, rows: u32, page_size: u32) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA page_size={page_size}; PRAGMA journal_mode=OFF;
         CREATE TABLE LINEITEM (L_ORDERKEY INTEGER, L_PARTKEY INTEGER, L_SUPPKEY INTEGER,
           L_LINENUMBER INTEGER, L_QUANTITY DECIMAL(15,2), L_EXTENDEDPRICE DECIMAL(15,2),
           L_DISCOUNT DECIMAL(15,2), L_TAX DECIMAL(15,2), L_RETURNFLAG CHAR(1),
           L_LINESTATUS CHAR(1), L_SHIPDATE DATE, L_COMMITDATE DATE, L_RECEIPTDATE DATE,
           L_SHIPINSTRUCT CHAR(25), L_SHIPMODE CHAR(10), L_COMMENT VARCHAR(44));"
    ))
    .unwrap();
    let tx = conn.unchecked_transaction().unwrap();
    {
        let mut stmt = tx
            .prepare("INSERT INTO LINEITEM VALUES (?1,1,1,1,?2,?3,?4,0.02,'N','O',?5,?5,?5,'NONE','AIR',?6)")
            .unwrap();
        let mut rng = testkit::Rng::xorshift64(0x9e37_79b9_7f4a_7c15);
        let dates = [
            "1993-12-31",
            "1994-01-01",
            "1994-07-15",
            "1994-12-31",
            "1995-01-01",
        ];
        for i in 0..rows {
            let x = rng.next_u64();
            let qty: rusqlite::types::Value = match x % 7 {
                0 => rusqlite::types::Value::Null,
                1 => rusqlite::types::Value::Real(23.5),
                _ => rusqlite::types::Value::Integer(20 + (x >> 8) as i64 % 8),
            };
            let price_cents = 90_000 + (x >> 16) as i64 % 10_000_000;
            let price = price_cents as f64 / 100.0;
            let discount = ((x >> 24) % 11) as f64 / 100.0; // 0.00 .. 0.10
            let date = dates[(x >> 32) as usize % dates.len()];
            let comment = "x".repeat((x >> 40) as usize % 40);
            stmt.execute(params![i, qty, price, discount, date, comment])
                .unwrap();
        }
    }
    tx.commit().unwrap();
}

/// SQLite's Q6 answer for the TPC-H default parameters: (revenue in 1/10000, rows matched).
pub fn sqlite_q6(path: &Path) -> (i128, u64) {
    let conn =
        Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    conn.query_row(
        "SELECT coalesce(sum(CAST(round(L_EXTENDEDPRICE*100) AS INTEGER) *
                              CAST(round(L_DISCOUNT*100) AS INTEGER)), 0), count(*)
         FROM LINEITEM WHERE L_SHIPDATE >= '1994-01-01' AND L_SHIPDATE < '1995-01-01'
           AND L_DISCOUNT BETWEEN 0.05 AND 0.07 AND L_QUANTITY < 24",
        [],
        |r| Ok((r.get::<_, i64>(0)? as i128, r.get::<_, i64>(1)? as u64)),
    )
    .unwrap()
}
