//! The exact TPC-H Q6 answer computed by SQLite: the reference every engine answer must equal.
//!
//! The oracle opens the file read-only and immutable (SQLite takes no locks and never writes,
//! not even a journal), and runs the real Q6 query on the stored values: the text
//! [`crate::text::q6_sql`] renders for every engine (parameters as literals: the ship-date window
//! as `'YYYY-MM-DD'` text, the discount bounds as computed decimals such as `0.05` and `0.07`,
//! the quantity as TPC-H writes it), selecting the row count and the revenue summed in
//! integers, `round(price * 100) * round(discount * 100)`, so the result is an exact count of
//! 1/10000 units rather than a float.
//!
//! NULLs follow SQL: a row with a NULL ship date, discount or quantity fails the predicate; a
//! row that matches with a NULL price counts in `rows_matched` but adds nothing to the revenue
//! (`sum` skips NULL products). Table and column names match case-insensitively, as in SQLite.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

pub use engine::q6::{format_ten_thousandths as format_revenue, Q6Params};

pub use crate::text::quote_identifier;
use crate::text::{q6_sql, Q6Select};

/// The oracle's Q6 result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OracleAnswer {
    /// `sum(l_extendedprice * l_discount)` in 1/10000 units (0 when no row matches).
    pub revenue_ten_thousandths: i128,
    /// Rows satisfying the predicate.
    pub rows_matched: u64,
    /// Rows in the table.
    pub rows_scanned: u64,
}

impl OracleAnswer {
    /// The revenue with four decimals, e.g. `123141078.2283`.
    pub fn revenue(&self) -> String {
        format_revenue(self.revenue_ten_thousandths)
    }
}

/// The oracle failed: SQLite could not open or query the file. Displays as one line naming
/// the file.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct OracleError {
    /// The database file.
    pub path: PathBuf,
    /// SQLite's error.
    #[source]
    pub source: rusqlite::Error,
}

/// Opens `path` for reading only, as an immutable database: SQLite takes no locks, writes
/// nothing (no journal, no `-shm`) and ignores any `-wal` file, like the engine.
pub fn open_read_only(path: &Path) -> Result<Connection, OracleError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    Connection::open_with_flags(immutable_uri(path), flags).map_err(|source| OracleError {
        path: path.to_path_buf(),
        source,
    })
}

/// Runs Q6 over `table` of the database at `path`.
pub fn q6(path: &Path, table: &str, params: &Q6Params) -> Result<OracleAnswer, OracleError> {
    let conn = open_read_only(path)?;
    q6_on(&conn, table, params).map_err(|source| OracleError {
        path: path.to_path_buf(),
        source,
    })
}

/// Runs Q6 over `table` through an open connection.
pub fn q6_on(
    conn: &Connection,
    table: &str,
    params: &Q6Params,
) -> Result<OracleAnswer, rusqlite::Error> {
    let sql = q6_sql(table, params, Q6Select::CountAndExactRevenue);
    let (matched, revenue): (i64, i64) =
        conn.query_row(&sql, [], |row| Ok((row.get(0)?, row.get(1)?)))?;
    let t = quote_identifier(table);
    let scanned: i64 = conn.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))?;
    Ok(OracleAnswer {
        revenue_ten_thousandths: i128::from(revenue),
        rows_matched: matched as u64,
        rows_scanned: scanned as u64,
    })
}

/// A `file:` URI for `path` with `immutable=1`, percent-encoding every byte that is not
/// unreserved (so `?`, `#` and `%` in file names survive).
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_and_quoting() {
        assert_eq!(
            immutable_uri(Path::new("/a b/c?.db")),
            "file:/a%20b/c%3F.db?immutable=1"
        );
        assert_eq!(quote_identifier("line\"item"), "\"line\"\"item\"");
    }

    #[test]
    fn tiny_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t%#.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE lineitem (l_quantity DECIMAL(15,2), l_extendedprice DECIMAL(15,2),
                                    l_discount DECIMAL(15,2), l_shipdate DATE);
             INSERT INTO lineitem VALUES (1, 100.25, 0.07, '1994-01-01'),
                                         (23.99, 5, 0.05, '1994-12-31'),
                                         (24, 7, 0.06, '1994-06-01'),
                                         (1, 7, 0.04, '1994-06-01'),
                                         (1, 7, 0.06, '1995-01-01'),
                                         (NULL, 7, 0.06, '1994-06-01');",
        )
        .unwrap();
        drop(conn);
        let a = q6(&path, "LINEITEM", &Q6Params::default()).unwrap();
        // 10025 * 7 + 500 * 5
        assert_eq!(a.revenue_ten_thousandths, 70_175 + 2_500);
        assert_eq!((a.rows_matched, a.rows_scanned), (2, 6));
        assert_eq!(a.revenue(), "7.2675");
        let none = Q6Params::parse("2001-01-01", "0.06", "24").unwrap();
        assert_eq!(
            q6(&path, "lineitem", &none)
                .unwrap()
                .revenue_ten_thousandths,
            0
        );
        let e = q6(&path, "orders", &none).unwrap_err().to_string();
        assert!(e.contains("t%#.db") && e.contains("no such table"), "{e}");
    }
}
