//! Small databases in the shapes real SQLite files take, for the engine's correctness tests.
//!
//! Every layout holds a `LINEITEM`-like table filled with real TPC-H rows (`tpchgen` at
//! [`SCALE_FACTOR`], about 12,000 rows spread over 1992-1998, so the default Q6 parameters
//! match a few hundred of them), written through SQLite itself. The engine must give the
//! oracle's answer on each one:
//!
//! | layout | what it exercises |
//! |---|---|
//! | `page_512`, `page_4096_all_tables`, `page_65536` | page sizes at both extremes; the 4096 one is `corescan gen --tables all` output, `LINEITEM` after seven other tables |
//! | `interleaved` | `LINEITEM` pages alternating with another table's: many short extents |
//! | `freelist` | deleted slices of both tables, no VACUUM: freelist pages still holding stale `LINEITEM` cells |
//! | `overflow_comment` | long `L_COMMENT`s spill onto overflow pages after the Q6 columns |
//! | `overflow_leading_text` | a huge text column *before* the Q6 columns, so they lie on overflow pages |
//! | `auto_vacuum_full` | pointer-map pages among the leaves; deletes made SQLite move pages |
//! | `reserved_bytes` | 40 reserved bytes per page (smaller usable size, other overflow thresholds) |
//! | `lowercase_reordered` | `"lineitem"` with quoted lower-case names in a non-TPC-H column order |
//! | `typed_integer_real` | Q6 columns declared `REAL`, `INTEGER` and untyped: integer and REAL storage of the same values |
//! | `nulls` | NULLs in each Q6 column for some rows (they never match) |
//! | `short_records` | rows written before `ALTER TABLE ADD COLUMN L_SHIPDATE`: records shorter than the schema |
//!
//! [`all`] builds every layout above into a directory (replacing earlier files); each has its
//! own function too.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rusqlite::types::Value;
use rusqlite::Connection;
use tpchgen::generators::{LineItem, LineItemGenerator};

use crate::gen::{self, date_text, decimal, GenOptions, TableSelection};
use crate::text::quote_identifier;

/// The TPC-H scale factor of every layout's rows.
pub const SCALE_FACTOR: f64 = 0.002;

/// One test database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Short name, also the file stem (`page_512`, `freelist`, ...).
    pub name: &'static str,
    /// The database file.
    pub path: PathBuf,
    /// The name of the table Q6 should scan, as created (`LINEITEM` or `lineitem`).
    pub table: String,
    /// What the layout exercises, in a few words.
    pub description: &'static str,
}

/// Building a layout failed.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// SQLite refused something.
    #[error("{}: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: rusqlite::Error,
    },
    /// A file-system operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Generating through [`gen::generate`] failed.
    #[error(transparent)]
    Gen(#[from] gen::GenError),
    /// The file does not have the property the layout exists for.
    #[error("{}: layout check failed: {what}", path.display())]
    Check {
        /// The file.
        path: PathBuf,
        /// What is missing.
        what: String,
    },
}

type Result<T, E = LayoutError> = std::result::Result<T, E>;

/// Builds every layout in `dir`, which must exist.
pub fn all(dir: &Path) -> Result<Vec<Layout>> {
    Ok(vec![
        page_size(dir, 512)?,
        page_size(dir, 4096)?,
        page_size(dir, 65536)?,
        interleaved(dir)?,
        freelist(dir)?,
        overflow_comment(dir)?,
        overflow_leading_text(dir)?,
        auto_vacuum_full(dir)?,
        reserved_bytes(dir)?,
        lowercase_reordered(dir)?,
        typed_integer_real(dir)?,
        nulls(dir)?,
        short_records(dir)?,
        short_records_with_default(dir)?,
    ])
}

/// `corescan gen` output at [`SCALE_FACTOR`] with `page_size`-byte pages: `page_512`,
/// `page_4096_all_tables` (all eight tables) or `page_65536` (any other size: `page_N`).
pub fn page_size(dir: &Path, page_size: u32) -> Result<Layout> {
    let (name, tables): (&'static str, _) = match page_size {
        512 => ("page_512", TableSelection::Lineitem),
        4096 => ("page_4096_all_tables", TableSelection::All),
        65536 => ("page_65536", TableSelection::Lineitem),
        _ => ("page_other", TableSelection::Lineitem),
    };
    let path = dir.join(format!("{name}.db"));
    let opts = GenOptions {
        out: path.clone(),
        scale_factor: SCALE_FACTOR,
        page_size,
        tables,
        force: true,
    };
    gen::generate(&opts, false)?;
    Ok(Layout {
        name,
        path,
        table: "LINEITEM".into(),
        description: "corescan gen output",
    })
}

/// `LINEITEM` and `FILLER` rows inserted alternately in chunks, so the table's leaves are
/// interleaved with another table's pages.
pub fn interleaved(dir: &Path) -> Result<Layout> {
    let db = Db::create(dir, "interleaved", &[])?;
    db.interleave_with_filler(&tpch_columns(), 60, 25)?;
    db.finish(
        "LINEITEM",
        "LINEITEM pages interleaved with another table's",
    )
}

/// Like [`interleaved`], then a middle slice of each table deleted without VACUUM: the file
/// has freelist pages, some still holding the deleted `LINEITEM` cells.
pub fn freelist(dir: &Path) -> Result<Layout> {
    let db = Db::create(dir, "freelist", &[])?;
    db.interleave_with_filler(&tpch_columns(), 400, 150)?;
    let n = rows().len();
    db.exec(&format!(
        "DELETE FROM LINEITEM WHERE rowid BETWEEN {} AND {}",
        n / 3,
        n / 2
    ))?;
    db.exec("DELETE FROM FILLER WHERE rowid % 4 <> 0")?;
    let free: u32 = db.query_one("PRAGMA freelist_count")?;
    db.check(free > 0, "no freelist pages")?;
    db.finish("LINEITEM", "freelist pages with stale cells after deletes")
}

/// 1024-byte pages and every seventh `L_COMMENT` 900 to 4000 bytes long: overflow chains after
/// the Q6 columns.
pub fn overflow_comment(dir: &Path) -> Result<Layout> {
    let db = Db::create(dir, "overflow_comment", &["PRAGMA page_size = 1024"])?;
    db.exec(&create_sql("LINEITEM", &tpch_columns()))?;
    db.insert(
        "LINEITEM",
        &tpch_columns(),
        0,
        rows(),
        |i, col, v| match col {
            Col::Comment if i % 7 == 0 => Value::Text(long_text(i, 900 + (i * 37) % 3100)),
            _ => v,
        },
    )?;
    db.finish("LINEITEM", "long L_COMMENT values on overflow pages")
}

/// 1024-byte pages and a first column `L_PAYLOAD` of 0 to 4000 bytes: in most rows the Q6
/// columns lie beyond the local payload, on overflow pages.
pub fn overflow_leading_text(dir: &Path) -> Result<Layout> {
    let db = Db::create(dir, "overflow_leading_text", &["PRAGMA page_size = 1024"])?;
    let mut cols = vec![Column::new(Col::Payload, "L_PAYLOAD", "TEXT")];
    cols.extend(tpch_columns());
    db.exec(&create_sql("LINEITEM", &cols))?;
    db.insert("LINEITEM", &cols, 0, rows(), |i, col, v| match col {
        // Lengths sweep every residue, so rows end at every offset around the local limit.
        Col::Payload => Value::Text(long_text(i, (i * 131) % 4001)),
        _ => v,
    })?;
    db.finish(
        "LINEITEM",
        "Q6 columns on overflow pages behind a huge leading column",
    )
}

/// `auto_vacuum = FULL` with 512-byte pages (a pointer-map page every 103 pages), the tables
/// interleaved, then filler rows deleted so SQLite relocated pages to truncate the file.
pub fn auto_vacuum_full(dir: &Path) -> Result<Layout> {
    let pragmas = ["PRAGMA page_size = 512", "PRAGMA auto_vacuum = FULL"];
    let db = Db::create(dir, "auto_vacuum_full", &pragmas)?;
    db.interleave_with_filler(&tpch_columns(), 300, 100)?;
    db.exec("DELETE FROM FILLER WHERE rowid % 3 = 0")?;
    let mode: i64 = db.query_one("PRAGMA auto_vacuum")?;
    db.check(mode == 1, "auto_vacuum is not FULL")?;
    let header = db.header()?;
    db.check(
        be_u32(&header[52..56]) != 0,
        "header byte 52 (largest root page) is 0",
    )?;
    db.finish("LINEITEM", "auto-vacuum FULL: pointer-map pages")
}

/// 1024-byte pages with 40 reserved bytes each (set through `SQLITE_FCNTL_RESERVE_BYTES`
/// before the first write), and some long comments so overflow thresholds matter.
pub fn reserved_bytes(dir: &Path) -> Result<Layout> {
    let db = Db::create(dir, "reserved_bytes", &["PRAGMA page_size = 1024"])?;
    db.reserve_bytes(40)?;
    db.exec(&create_sql("LINEITEM", &tpch_columns()))?;
    db.insert(
        "LINEITEM",
        &tpch_columns(),
        0,
        rows(),
        |i, col, v| match col {
            Col::Comment if i % 11 == 0 => Value::Text(long_text(i, 900 + (i * 53) % 2000)),
            _ => v,
        },
    )?;
    let header = db.header()?;
    db.check(
        header[20] == 40,
        "header byte 20 (reserved bytes) is not 40",
    )?;
    db.finish("LINEITEM", "40 reserved bytes per page")
}

/// `"lineitem"` with quoted lower-case column names in an order unlike TPC-H's (the Q6 columns
/// scattered, `l_comment` first).
pub fn lowercase_reordered(dir: &Path) -> Result<Layout> {
    // Positions in TPC-H order: l_comment first, the Q6 columns scattered.
    let order = [15, 14, 10, 0, 6, 3, 1, 8, 4, 12, 2, 5, 7, 9, 11, 13];
    let cols: Vec<Column> = order
        .iter()
        .map(|&i| {
            let (c, name, decl) = TPCH_COLUMNS[i];
            Column::new(c, &name.to_ascii_lowercase(), &decl.to_ascii_lowercase())
        })
        .collect();
    let db = Db::create(dir, "lowercase_reordered", &[])?;
    db.exec(&create_sql("lineitem", &cols))?;
    db.insert("lineitem", &cols, 0, rows(), |_, _, v| v)?;
    db.finish(
        "lineitem",
        "lower-case quoted names, non-TPC-H column order",
    )
}

/// Q6 columns declared `REAL` (`L_QUANTITY`), untyped (`L_EXTENDEDPRICE`, so whole prices stay
/// 8-byte REALs) and `INTEGER` (`L_DISCOUNT`, so 0.05 is a REAL and 0 an integer); odd rows
/// bind the quantity as f64 and even rows as an integer.
pub fn typed_integer_real(dir: &Path) -> Result<Layout> {
    let mut cols = tpch_columns();
    for c in &mut cols {
        c.decl = match c.col {
            Col::Quantity | Col::Tax => "REAL".into(),
            Col::ExtendedPrice => String::new(),
            Col::Discount => "INTEGER".into(),
            Col::ShipDate => "TEXT".into(),
            _ => c.decl.clone(),
        };
    }
    let db = Db::create(dir, "typed_integer_real", &[])?;
    db.exec(&create_sql("LINEITEM", &cols))?;
    db.insert("LINEITEM", &cols, 0, rows(), |i, col, v| match (col, v) {
        (Col::Quantity, Value::Integer(q)) if i % 2 == 1 => Value::Real(q as f64),
        (_, v) => v,
    })?;
    let kinds: i64 = db.query_one(
        "SELECT count(DISTINCT typeof(L_QUANTITY)) + count(DISTINCT typeof(L_EXTENDEDPRICE))
              + count(DISTINCT typeof(L_DISCOUNT)) FROM LINEITEM",
    )?;
    db.check(
        kinds >= 4,
        "expected integer and real storage among the Q6 columns",
    )?;
    db.finish("LINEITEM", "Q6 columns declared REAL, INTEGER and untyped")
}

/// TPC-H columns without `NOT NULL`, and NULL in `L_QUANTITY` (every 11th row),
/// `L_DISCOUNT` (13th), `L_EXTENDEDPRICE` (17th) and `L_SHIPDATE` (19th).
pub fn nulls(dir: &Path) -> Result<Layout> {
    let cols = tpch_columns();
    let db = Db::create(dir, "nulls", &[])?;
    db.exec(&create_sql("LINEITEM", &cols))?;
    db.insert("LINEITEM", &cols, 0, rows(), |i, col, v| {
        let null = match col {
            Col::Quantity => i % 11 == 0,
            Col::Discount => i % 13 == 0,
            Col::ExtendedPrice => i % 17 == 0,
            Col::ShipDate => i % 19 == 0,
            _ => false,
        };
        if null {
            Value::Null
        } else {
            v
        }
    })?;
    db.finish("LINEITEM", "NULLs in the Q6 columns")
}

/// `LINEITEM` created without `L_SHIPDATE`, half the rows inserted, then
/// `ALTER TABLE ADD COLUMN L_SHIPDATE DATE` (now the last column) and the other half inserted:
/// the first half's records are one column short and read `L_SHIPDATE` as NULL.
pub fn short_records(dir: &Path) -> Result<Layout> {
    short_records_impl(dir, "short_records", "")
}

/// Like [`short_records`] but the column is added with `DEFAULT '1994-06-01'`: the short
/// records must read that default (and mostly match Q6's default window).
pub fn short_records_with_default(dir: &Path) -> Result<Layout> {
    short_records_impl(dir, "short_records_with_default", " DEFAULT '1994-06-01'")
}

fn short_records_impl(dir: &Path, name: &'static str, default: &str) -> Result<Layout> {
    let all_cols = tpch_columns();
    let without: Vec<Column> = all_cols
        .iter()
        .filter(|c| c.col != Col::ShipDate)
        .cloned()
        .collect();
    let mut with = without.clone();
    with.push(Column::new(
        Col::ShipDate,
        "L_SHIPDATE",
        &format!("DATE{default}"),
    ));
    let db = Db::create(dir, name, &[])?;
    db.exec(&create_sql("LINEITEM", &without))?;
    let half = rows().len() / 2;
    db.insert("LINEITEM", &without, 0, &rows()[..half], |_, _, v| v)?;
    db.exec(&format!(
        "ALTER TABLE LINEITEM ADD COLUMN L_SHIPDATE DATE{default}"
    ))?;
    db.insert("LINEITEM", &with, half, &rows()[half..], |_, _, v| v)?;
    db.finish(
        "LINEITEM",
        "records shorter than the schema after ALTER TABLE ADD COLUMN",
    )
}

/// The `LINEITEM` rows every layout holds, generated once per process.
pub fn rows() -> &'static [LineItem<'static>] {
    static ROWS: OnceLock<Vec<LineItem<'static>>> = OnceLock::new();
    ROWS.get_or_init(|| LineItemGenerator::new(SCALE_FACTOR, 1, 1).iter().collect())
}

/// A `LINEITEM` field, or the extra leading payload column.
#[rustfmt::skip]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    OrderKey, PartKey, SuppKey, LineNumber, Quantity, ExtendedPrice, Discount, Tax, ReturnFlag,
    LineStatus, ShipDate, CommitDate, ReceiptDate, ShipInstruct, ShipMode, Comment, Payload,
}

/// The `LINEITEM` columns in TPC-H order: field, name, declared type (as `corescan gen` has
/// them, without `NOT NULL`).
#[rustfmt::skip]
const TPCH_COLUMNS: [(Col, &str, &str); 16] = [
    (Col::OrderKey, "L_ORDERKEY", "INTEGER"),
    (Col::PartKey, "L_PARTKEY", "INTEGER"),
    (Col::SuppKey, "L_SUPPKEY", "INTEGER"),
    (Col::LineNumber, "L_LINENUMBER", "INTEGER"),
    (Col::Quantity, "L_QUANTITY", "DECIMAL(15,2)"),
    (Col::ExtendedPrice, "L_EXTENDEDPRICE", "DECIMAL(15,2)"),
    (Col::Discount, "L_DISCOUNT", "DECIMAL(15,2)"),
    (Col::Tax, "L_TAX", "DECIMAL(15,2)"),
    (Col::ReturnFlag, "L_RETURNFLAG", "CHAR(1)"),
    (Col::LineStatus, "L_LINESTATUS", "CHAR(1)"),
    (Col::ShipDate, "L_SHIPDATE", "DATE"),
    (Col::CommitDate, "L_COMMITDATE", "DATE"),
    (Col::ReceiptDate, "L_RECEIPTDATE", "DATE"),
    (Col::ShipInstruct, "L_SHIPINSTRUCT", "CHAR(25)"),
    (Col::ShipMode, "L_SHIPMODE", "CHAR(10)"),
    (Col::Comment, "L_COMMENT", "VARCHAR(44)"),
];

impl Col {
    /// The value `corescan gen` stores for this field of `r` (NULL for the payload).
    fn value(self, r: &LineItem<'_>) -> Value {
        use Col::*;
        let text = |s: &str| Value::Text(s.to_owned());
        match self {
            OrderKey => Value::Integer(r.l_orderkey),
            PartKey => Value::Integer(r.l_partkey),
            SuppKey => Value::Integer(r.l_suppkey),
            LineNumber => Value::Integer(r.l_linenumber.into()),
            Quantity => Value::Integer(r.l_quantity),
            ExtendedPrice => Value::Real(decimal(r.l_extendedprice)),
            Discount => Value::Real(decimal(r.l_discount)),
            Tax => Value::Real(decimal(r.l_tax)),
            ReturnFlag => text(r.l_returnflag),
            LineStatus => text(r.l_linestatus),
            ShipDate => text(&date_text(r.l_shipdate)),
            CommitDate => text(&date_text(r.l_commitdate)),
            ReceiptDate => text(&date_text(r.l_receiptdate)),
            ShipInstruct => text(r.l_shipinstruct),
            ShipMode => text(r.l_shipmode),
            Comment => text(r.l_comment),
            Payload => Value::Null,
        }
    }
}

/// One column of a layout's table: which field it holds, its name and declared type.
#[derive(Debug, Clone)]
struct Column {
    col: Col,
    name: String,
    decl: String,
}

impl Column {
    fn new(col: Col, name: &str, decl: &str) -> Column {
        Column {
            col,
            name: name.to_string(),
            decl: decl.to_string(),
        }
    }
}

/// The TPC-H columns in specification order, without `NOT NULL`.
fn tpch_columns() -> Vec<Column> {
    TPCH_COLUMNS
        .iter()
        .map(|&(c, name, decl)| Column::new(c, name, decl))
        .collect()
}

fn create_sql(table: &str, cols: &[Column]) -> String {
    let defs: Vec<String> = cols
        .iter()
        .map(|c| format!("{} {}", quote_identifier(&c.name), c.decl))
        .collect();
    format!(
        "CREATE TABLE {} ({})",
        quote_identifier(table),
        defs.join(", ")
    )
}

/// `len` bytes of lower-case text that differ from row to row.
fn long_text(row: usize, len: usize) -> String {
    let word = format!("row{row} payload ");
    word.repeat(len / word.len() + 1)[..len].to_string()
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A layout database being written.
struct Db {
    conn: Connection,
    path: PathBuf,
    name: &'static str,
}

impl Db {
    /// Creates `dir/NAME.db` (replacing any earlier one) and runs `pragmas` before any write.
    fn create(dir: &Path, name: &'static str, pragmas: &[&str]) -> Result<Db> {
        let path = dir.join(format!("{name}.db"));
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(LayoutError::Io { path, source: e })
            }
            _ => {}
        }
        let conn = Connection::open(&path).map_err(|source| LayoutError::Sqlite {
            path: path.clone(),
            source,
        })?;
        let db = Db { conn, path, name };
        // Not a write, so the caller's page size and reserved bytes still apply afterwards.
        db.exec("PRAGMA synchronous = OFF")?;
        for p in pragmas {
            db.exec(p)?;
        }
        Ok(db)
    }

    fn sqlite(&self, source: rusqlite::Error) -> LayoutError {
        LayoutError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn exec(&self, sql: &str) -> Result<()> {
        self.conn.execute_batch(sql).map_err(|e| self.sqlite(e))
    }

    fn query_one<T: rusqlite::types::FromSql>(&self, sql: &str) -> Result<T> {
        self.conn
            .query_row(sql, [], |r| r.get(0))
            .map_err(|e| self.sqlite(e))
    }

    fn check(&self, ok: bool, what: &str) -> Result<()> {
        if ok {
            return Ok(());
        }
        Err(LayoutError::Check {
            path: self.path.clone(),
            what: what.to_string(),
        })
    }

    /// The first 100 bytes of the file as SQLite has written it so far.
    fn header(&self) -> Result<Vec<u8>> {
        let bytes = std::fs::read(&self.path).map_err(|source| LayoutError::Io {
            path: self.path.clone(),
            source,
        })?;
        self.check(bytes.len() >= 100, "file shorter than its header")?;
        Ok(bytes[..100].to_vec())
    }

    /// Sets the reserved bytes per page; only effective before the first write.
    fn reserve_bytes(&self, n: u8) -> Result<()> {
        let mut value = std::ffi::c_int::from(n);
        // SAFETY: the handle is live for `self.conn`'s lifetime, "main" is a NUL-terminated
        // schema name and SQLITE_FCNTL_RESERVE_BYTES takes a pointer to an int.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_file_control(
                self.conn.handle(),
                c"main".as_ptr(),
                rusqlite::ffi::SQLITE_FCNTL_RESERVE_BYTES,
                (&raw mut value).cast(),
            )
        };
        self.check(
            rc == rusqlite::ffi::SQLITE_OK,
            &format!("SQLITE_FCNTL_RESERVE_BYTES: rc {rc}"),
        )
    }

    /// Inserts `rows` (the first being row `first` of [`rows()`]) into `table`'s `cols`, each
    /// value passed through `tweak(row index, field, value)`.
    fn insert(
        &self,
        table: &str,
        cols: &[Column],
        first: usize,
        rows: &[LineItem<'static>],
        mut tweak: impl FnMut(usize, Col, Value) -> Value,
    ) -> Result<()> {
        let names: Vec<String> = cols.iter().map(|c| quote_identifier(&c.name)).collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            quote_identifier(table),
            names.join(", "),
            vec!["?"; cols.len()].join(", ")
        );
        // One transaction per call unless the caller holds one (autocommit would sync per row).
        let own_transaction = self.conn.is_autocommit();
        let mut run = || -> rusqlite::Result<()> {
            if own_transaction {
                self.conn.execute_batch("BEGIN")?;
            }
            let mut stmt = self.conn.prepare_cached(&sql)?;
            for (k, r) in rows.iter().enumerate() {
                for (j, c) in cols.iter().enumerate() {
                    stmt.raw_bind_parameter(j + 1, tweak(first + k, c.col, c.col.value(r)))?;
                }
                stmt.raw_execute()?;
            }
            if own_transaction {
                self.conn.execute_batch("COMMIT")?;
            }
            Ok(())
        };
        run().map_err(|e| self.sqlite(e))
    }

    /// Creates `LINEITEM` (`cols`) and `FILLER`, then inserts all rows in chunks of
    /// `lineitem_chunk`, each followed by `filler_chunk` 120-byte filler rows.
    fn interleave_with_filler(
        &self,
        cols: &[Column],
        lineitem_chunk: usize,
        filler_chunk: usize,
    ) -> Result<()> {
        self.exec(&create_sql("LINEITEM", cols))?;
        self.exec("CREATE TABLE FILLER (F_KEY INTEGER, F_TEXT VARCHAR(120))")?;
        self.exec("BEGIN")?;
        let mut filler = self
            .conn
            .prepare("INSERT INTO FILLER VALUES (?1, ?2)")
            .map_err(|e| self.sqlite(e))?;
        let mut key = 0i64;
        for (c, chunk) in rows().chunks(lineitem_chunk).enumerate() {
            self.insert("LINEITEM", cols, c * lineitem_chunk, chunk, |_, _, v| v)?;
            for _ in 0..filler_chunk {
                key += 1;
                filler
                    .execute(rusqlite::params![key, long_text(key as usize, 120)])
                    .map_err(|e| self.sqlite(e))?;
            }
        }
        drop(filler);
        self.exec("COMMIT")
    }

    fn finish(self, table: &str, description: &'static str) -> Result<Layout> {
        let Db { conn, path, name } = self;
        conn.close().map_err(|(_, source)| LayoutError::Sqlite {
            path: path.clone(),
            source,
        })?;
        Ok(Layout {
            name,
            path,
            table: table.to_string(),
            description,
        })
    }
}
