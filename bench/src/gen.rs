//! TPC-H data generation into a SQLite database (`corescan gen`).
//!
//! Rows come from the `tpchgen` crate (the dbgen algorithm, so SF 1 yields the official row
//! counts and Q6 answer) and are written through SQLite itself, in the common TPC-H SQLite
//! layout that other tools and the seed measurements use:
//!
//! - upper-case table and column names in TPC-H specification order (`LINEITEM`, `L_ORDERKEY`,
//!   ...), rowid tables without primary keys;
//! - `INTEGER` keys, `CHAR`/`VARCHAR` text, `DATE` columns holding `'YYYY-MM-DD'` text;
//! - `DECIMAL(15,2)` money, quantity, discount and tax columns. A decimal is bound as the f64
//!   nearest to it (`cents as f64 / 100.0` is correctly rounded), and the column's NUMERIC
//!   affinity stores it as an integer when it has no fraction and as a REAL otherwise, exactly
//!   as a CSV import of the TPC-H `.tbl` files does.
//!
//! Policy: one transaction with `journal_mode=OFF` and `synchronous=OFF` (a crash loses the
//! file, which is never renamed into place), prepared statements, and a producer thread per
//! table that generates rows in batches while the calling thread inserts them; on a two-core
//! machine SQLite's insert path is the bottleneck and generation hides behind it. The database
//! is written to `OUT.partial` and renamed to `OUT` only when complete, so an interrupted run
//! never leaves a file that looks finished.

use std::borrow::Cow;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rusqlite::{Connection, Statement};
use tpchgen::dates::{TPCHDate, MIN_GENERATE_DATE, TOTAL_DATE_RANGE};
use tpchgen::decimal::TPCHDecimal;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator,
    PartSuppGenerator, RegionGenerator, SupplierGenerator,
};

/// Which tables `corescan gen` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TableSelection {
    /// Only `LINEITEM`, the table Q6 reads (about 70 % of an SF's bytes).
    Lineitem,
    /// All eight TPC-H tables, `LINEITEM` last (as the classic loaders do), so that it forms
    /// one long run of pages at the end of the file. The default: at SF 1 this is the seed
    /// measurements' file, 1,149,665,280 bytes with the lock-byte page inside `LINEITEM`.
    #[default]
    All,
}

/// What to generate and where.
#[derive(Debug, Clone, PartialEq)]
pub struct GenOptions {
    /// The database file to create.
    pub out: PathBuf,
    /// TPC-H scale factor: 1.0 is about 6 million `LINEITEM` rows. Must be finite and > 0.
    pub scale_factor: f64,
    /// SQLite page size in bytes: a power of two in 512..=65536 (default 4096, SQLite's own).
    pub page_size: u32,
    /// The tables to write.
    pub tables: TableSelection,
    /// Replace `out` if it already exists (otherwise that is an error).
    pub force: bool,
}

impl GenOptions {
    /// Options for `out` with the defaults: SF 1, 4096-byte pages, all tables, no overwrite.
    pub fn new(out: impl Into<PathBuf>) -> Self {
        GenOptions {
            out: out.into(),
            scale_factor: 1.0,
            page_size: 4096,
            tables: TableSelection::All,
            force: false,
        }
    }

    /// Checks the scale factor and page size (not the file system).
    pub fn validate(&self) -> Result<(), GenError> {
        if !(self.scale_factor.is_finite() && self.scale_factor > 0.0) {
            return Err(GenError::ScaleFactor(self.scale_factor));
        }
        if !(512..=65536).contains(&self.page_size) || !self.page_size.is_power_of_two() {
            return Err(GenError::PageSize(self.page_size));
        }
        Ok(())
    }
}

/// How many rows went into one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRows {
    /// The table name as created (upper case, e.g. `LINEITEM`).
    pub table: &'static str,
    /// Rows inserted.
    pub rows: u64,
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct GenSummary {
    /// The finished database file.
    pub path: PathBuf,
    /// Rows per table, in insertion order.
    pub tables: Vec<TableRows>,
    /// The file's size in bytes.
    pub file_size: u64,
    /// Wall time of the whole run.
    pub elapsed: Duration,
}

impl GenSummary {
    /// Rows inserted into `table` (case-insensitive), if it was generated.
    pub fn rows(&self, table: &str) -> Option<u64> {
        self.tables
            .iter()
            .find(|t| t.table.eq_ignore_ascii_case(table))
            .map(|t| t.rows)
    }
}

/// Why generation failed. Displays as one line; file errors name the file.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// The scale factor is not a finite number > 0.
    #[error("scale factor must be a finite number greater than 0, got {0}")]
    ScaleFactor(f64),
    /// The page size is not a power of two in 512..=65536.
    #[error("page size must be a power of two from 512 to 65536, got {0}")]
    PageSize(u32),
    /// The output file exists and overwriting was not requested.
    #[error("{}: already exists (use --force to overwrite it)", .0.display())]
    Exists(PathBuf),
    /// A file-system operation failed.
    #[error("{}: {op}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// SQLite refused something.
    #[error("{}: {source}", path.display())]
    Sqlite {
        /// The database file being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: rusqlite::Error,
    },
    /// A row generator thread panicked (a bug in `tpchgen` or here).
    #[error("{}: the {table} row generator panicked", path.display())]
    Generator {
        /// The database file being written.
        path: PathBuf,
        /// The table being generated.
        table: &'static str,
    },
}

/// Generates the database described by `opts`; `progress` shows a row-count bar on stderr
/// (hidden anyway when stderr is not a terminal).
///
/// The file is written as `OUT.partial` (any stale one is replaced) and renamed to `OUT` on
/// success; on failure the partial file is removed.
pub fn generate(opts: &GenOptions, progress: bool) -> Result<GenSummary, GenError> {
    let start = Instant::now();
    opts.validate()?;
    let out = &opts.out;
    let exists = out.symlink_metadata().is_ok();
    if exists && !opts.force {
        return Err(GenError::Exists(out.clone()));
    }
    let partial = partial_path(out);
    remove_if_present(&partial)?;

    let bar = progress_bar(opts, progress);
    let written = write_database(&partial, opts, &bar);
    bar.finish_and_clear();
    let tables = match written {
        Ok(tables) => tables,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    std::fs::rename(&partial, out).map_err(|source| GenError::Io {
        path: out.clone(),
        op: "rename the finished .partial file into place",
        source,
    })?;
    let file_size = std::fs::metadata(out)
        .map_err(|source| GenError::Io {
            path: out.clone(),
            op: "stat",
            source,
        })?
        .len();
    Ok(GenSummary {
        path: out.clone(),
        tables,
        file_size,
        elapsed: start.elapsed(),
    })
}

/// The temporary name a database is written under before it is complete: `OUT.partial`.
pub fn partial_path(out: &Path) -> PathBuf {
    let mut name = OsString::from(out.as_os_str());
    name.push(".partial");
    PathBuf::from(name)
}

/// The estimated number of rows of `tables` at `scale_factor` (exact except for `LINEITEM`,
/// whose count is known only after generation; it averages four lines per order).
pub fn estimated_rows(scale_factor: f64, tables: TableSelection) -> u64 {
    let orders = OrderGenerator::calculate_row_count(scale_factor, 1, 1).max(0) as u64;
    let lineitem = orders * 4;
    match tables {
        TableSelection::Lineitem => lineitem,
        TableSelection::All => {
            let count = |n: i64| n.max(0) as u64;
            5 + 25
                + count(PartGenerator::calculate_row_count(scale_factor, 1, 1))
                + count(SupplierGenerator::calculate_row_count(scale_factor, 1, 1))
                // tpchgen counts parts here; each has four suppliers.
                + 4 * count(PartSuppGenerator::calculate_row_count(scale_factor, 1, 1))
                + count(CustomerGenerator::calculate_row_count(scale_factor, 1, 1))
                + orders
                + lineitem
        }
    }
}

fn remove_if_present(path: &Path) -> Result<(), GenError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(GenError::Io {
            path: path.to_path_buf(),
            op: "remove the stale file",
            source: e,
        }),
        _ => Ok(()),
    }
}

fn progress_bar(opts: &GenOptions, progress: bool) -> ProgressBar {
    if !progress {
        return ProgressBar::hidden();
    }
    let total = estimated_rows(opts.scale_factor, opts.tables);
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{msg:>9} [{elapsed_precise}] {wide_bar} {human_pos}/~{human_len} rows (eta {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

fn write_database(
    path: &Path,
    opts: &GenOptions,
    bar: &ProgressBar,
) -> Result<Vec<TableRows>, GenError> {
    let sqlite = |source| GenError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open(path).map_err(sqlite)?;
    // The page size only takes effect before the first write; everything else is for speed.
    conn.execute_batch(&format!(
        "PRAGMA page_size = {};
         PRAGMA journal_mode = OFF;
         PRAGMA synchronous = OFF;
         PRAGMA locking_mode = EXCLUSIVE;
         PRAGMA temp_store = MEMORY;
         PRAGMA cache_size = -131072;",
        opts.page_size
    ))
    .map_err(sqlite)?;
    conn.execute_batch("BEGIN").map_err(sqlite)?;
    let tables: &[&Table] = match opts.tables {
        TableSelection::Lineitem => &[&LINEITEM],
        TableSelection::All => &ALL_TABLES,
    };
    for table in tables {
        conn.execute_batch(table.create).map_err(sqlite)?;
    }
    let mut counts = Vec::with_capacity(tables.len());
    for table in tables {
        bar.set_message(table.name);
        let rows = load_table(&conn, table, opts.scale_factor, bar).map_err(|e| match e {
            LoadError::Sqlite(source) => sqlite(source),
            LoadError::Generator => GenError::Generator {
                path: path.to_path_buf(),
                table: table.name,
            },
        })?;
        counts.push(TableRows {
            table: table.name,
            rows,
        });
    }
    conn.execute_batch("COMMIT").map_err(sqlite)?;
    conn.close().map_err(|(_, source)| sqlite(source))?;
    Ok(counts)
}

/// One TPC-H table: its name and `CREATE TABLE` statement.
struct Table {
    name: &'static str,
    create: &'static str,
    /// Number of columns (insert parameters).
    columns: usize,
}

const REGION: Table = Table {
    name: "REGION",
    create: "CREATE TABLE REGION (R_REGIONKEY INTEGER NOT NULL, R_NAME CHAR(25) NOT NULL,
             R_COMMENT VARCHAR(152))",
    columns: 3,
};
const NATION: Table = Table {
    name: "NATION",
    create: "CREATE TABLE NATION (N_NATIONKEY INTEGER NOT NULL, N_NAME CHAR(25) NOT NULL,
             N_REGIONKEY INTEGER NOT NULL, N_COMMENT VARCHAR(152))",
    columns: 4,
};
const PART: Table = Table {
    name: "PART",
    create: "CREATE TABLE PART (P_PARTKEY INTEGER NOT NULL, P_NAME VARCHAR(55) NOT NULL,
             P_MFGR CHAR(25) NOT NULL, P_BRAND CHAR(10) NOT NULL, P_TYPE VARCHAR(25) NOT NULL,
             P_SIZE INTEGER NOT NULL, P_CONTAINER CHAR(10) NOT NULL,
             P_RETAILPRICE DECIMAL(15,2) NOT NULL, P_COMMENT VARCHAR(23) NOT NULL)",
    columns: 9,
};
const SUPPLIER: Table = Table {
    name: "SUPPLIER",
    create: "CREATE TABLE SUPPLIER (S_SUPPKEY INTEGER NOT NULL, S_NAME CHAR(25) NOT NULL,
             S_ADDRESS VARCHAR(40) NOT NULL, S_NATIONKEY INTEGER NOT NULL,
             S_PHONE CHAR(15) NOT NULL, S_ACCTBAL DECIMAL(15,2) NOT NULL,
             S_COMMENT VARCHAR(101) NOT NULL)",
    columns: 7,
};
const PARTSUPP: Table = Table {
    name: "PARTSUPP",
    create: "CREATE TABLE PARTSUPP (PS_PARTKEY INTEGER NOT NULL, PS_SUPPKEY INTEGER NOT NULL,
             PS_AVAILQTY INTEGER NOT NULL, PS_SUPPLYCOST DECIMAL(15,2) NOT NULL,
             PS_COMMENT VARCHAR(199) NOT NULL)",
    columns: 5,
};
const CUSTOMER: Table = Table {
    name: "CUSTOMER",
    create: "CREATE TABLE CUSTOMER (C_CUSTKEY INTEGER NOT NULL, C_NAME VARCHAR(25) NOT NULL,
             C_ADDRESS VARCHAR(40) NOT NULL, C_NATIONKEY INTEGER NOT NULL,
             C_PHONE CHAR(15) NOT NULL, C_ACCTBAL DECIMAL(15,2) NOT NULL,
             C_MKTSEGMENT CHAR(10) NOT NULL, C_COMMENT VARCHAR(117) NOT NULL)",
    columns: 8,
};
const ORDERS: Table = Table {
    name: "ORDERS",
    create: "CREATE TABLE ORDERS (O_ORDERKEY INTEGER NOT NULL, O_CUSTKEY INTEGER NOT NULL,
             O_ORDERSTATUS CHAR(1) NOT NULL, O_TOTALPRICE DECIMAL(15,2) NOT NULL,
             O_ORDERDATE DATE NOT NULL, O_ORDERPRIORITY CHAR(15) NOT NULL,
             O_CLERK CHAR(15) NOT NULL, O_SHIPPRIORITY INTEGER NOT NULL,
             O_COMMENT VARCHAR(79) NOT NULL)",
    columns: 9,
};
const LINEITEM: Table = Table {
    name: "LINEITEM",
    create: "CREATE TABLE LINEITEM (L_ORDERKEY INTEGER NOT NULL,
    L_PARTKEY INTEGER NOT NULL, L_SUPPKEY INTEGER NOT NULL, L_LINENUMBER INTEGER NOT NULL,
    L_QUANTITY DECIMAL(15,2) NOT NULL, L_EXTENDEDPRICE DECIMAL(15,2) NOT NULL,
    L_DISCOUNT DECIMAL(15,2) NOT NULL, L_TAX DECIMAL(15,2) NOT NULL,
    L_RETURNFLAG CHAR(1) NOT NULL, L_LINESTATUS CHAR(1) NOT NULL, L_SHIPDATE DATE NOT NULL,
    L_COMMITDATE DATE NOT NULL, L_RECEIPTDATE DATE NOT NULL, L_SHIPINSTRUCT CHAR(25) NOT NULL,
    L_SHIPMODE CHAR(10) NOT NULL, L_COMMENT VARCHAR(44) NOT NULL)",
    columns: 16,
};

/// Dependency order, `LINEITEM` last.
const ALL_TABLES: [&Table; 8] = [
    &REGION, &NATION, &PART, &SUPPLIER, &PARTSUPP, &CUSTOMER, &ORDERS, &LINEITEM,
];

/// The value SQLite should store for a TPC-H decimal: the nearest f64, which the NUMERIC
/// affinity turns into an integer when the value has no fraction.
pub(crate) fn decimal(d: TPCHDecimal) -> f64 {
    // Exact for |cents| < 2^53, and one correctly rounded division.
    d.0 as f64 / 100.0
}

/// `'YYYY-MM-DD'` for a generated date, from a table built once (formatting three dates per
/// `LINEITEM` row would otherwise cost about a second per SF).
pub(crate) fn date_text(d: TPCHDate) -> Cow<'static, str> {
    static DATES: OnceLock<Vec<String>> = OnceLock::new();
    let dates = DATES.get_or_init(|| {
        (0..TOTAL_DATE_RANGE)
            .map(|i| TPCHDate::new(MIN_GENERATE_DATE + i).to_string())
            .collect()
    });
    match usize::try_from(d.into_inner())
        .ok()
        .and_then(|i| dates.get(i))
    {
        Some(s) => Cow::Borrowed(s.as_str()),
        None => Cow::Owned(d.to_string()),
    }
}

/// Binds the values to parameters 1, 2, ... of a statement, in order.
macro_rules! bind {
    ($stmt:expr; $($value:expr),+ $(,)?) => {{
        let mut index = 0;
        $( index += 1; $stmt.raw_bind_parameter(index, $value)?; )+
        Ok(())
    }};
}

enum LoadError {
    Sqlite(rusqlite::Error),
    Generator,
}

impl From<rusqlite::Error> for LoadError {
    fn from(e: rusqlite::Error) -> Self {
        LoadError::Sqlite(e)
    }
}

/// Generates and inserts every row of `table`.
fn load_table(
    conn: &Connection,
    table: &Table,
    sf: f64,
    bar: &ProgressBar,
) -> Result<u64, LoadError> {
    // SQLite copies bound text, so one scratch string per Display-formatted field is reused.
    let mut s: [String; 3] = Default::default();
    macro_rules! text {
        ($i:expr, $v:expr) => {{
            use std::fmt::Write as _;
            s[$i].clear();
            let _ = write!(s[$i], "{}", $v);
            s[$i].as_str()
        }};
    }
    macro_rules! rows {
        ($generator:ident) => {
            || $generator::new(sf, 1, 1).into_iter()
        };
    }
    let loader = Loader { conn, table, bar };
    match table.name {
        "REGION" => loader.load(
            rows!(RegionGenerator),
            |st, r| bind!(st; r.r_regionkey, r.r_name, r.r_comment),
        ),
        "NATION" => loader.load(
            rows!(NationGenerator),
            |st, r| bind!(st; r.n_nationkey, r.n_name, r.n_regionkey, r.n_comment),
        ),
        "PART" => loader.load(rows!(PartGenerator), |st, r| {
            bind!(st; r.p_partkey, text!(0, r.p_name), text!(1, r.p_mfgr), text!(2, r.p_brand),
                r.p_type, r.p_size, r.p_container, decimal(r.p_retailprice), r.p_comment)
        }),
        "SUPPLIER" => loader.load(rows!(SupplierGenerator), |st, r| {
            bind!(st; r.s_suppkey, text!(0, r.s_name), text!(1, r.s_address), r.s_nationkey,
                text!(2, r.s_phone), decimal(r.s_acctbal), r.s_comment.as_str())
        }),
        "PARTSUPP" => loader.load(rows!(PartSuppGenerator), |st, r| {
            bind!(st; r.ps_partkey, r.ps_suppkey, r.ps_availqty, decimal(r.ps_supplycost),
                r.ps_comment)
        }),
        "CUSTOMER" => loader.load(rows!(CustomerGenerator), |st, r| {
            bind!(st; r.c_custkey, text!(0, r.c_name), text!(1, r.c_address), r.c_nationkey,
                text!(2, r.c_phone), decimal(r.c_acctbal), r.c_mktsegment, r.c_comment)
        }),
        "ORDERS" => loader.load(rows!(OrderGenerator), |st, r| {
            bind!(st; r.o_orderkey, r.o_custkey, r.o_orderstatus.as_str(),
                decimal(r.o_totalprice), &*date_text(r.o_orderdate), r.o_orderpriority,
                text!(0, r.o_clerk), r.o_shippriority, r.o_comment)
        }),
        _ => loader.load(rows!(LineItemGenerator), |st, r| {
            bind!(st; r.l_orderkey, r.l_partkey, r.l_suppkey, r.l_linenumber, r.l_quantity,
                decimal(r.l_extendedprice), decimal(r.l_discount), decimal(r.l_tax),
                r.l_returnflag, r.l_linestatus, &*date_text(r.l_shipdate),
                &*date_text(r.l_commitdate), &*date_text(r.l_receiptdate), r.l_shipinstruct,
                r.l_shipmode, r.l_comment)
        }),
    }
}

/// Rows per batch handed from the generator thread to the inserting thread.
const BATCH_ROWS: usize = 4096;

/// Where one table's rows go.
struct Loader<'a> {
    conn: &'a Connection,
    table: &'a Table,
    bar: &'a ProgressBar,
}

impl Loader<'_> {
    /// Inserts the rows `make_rows` yields: a scoped thread generates batches while this thread
    /// binds (`bind`) and inserts them.
    fn load<T, I>(
        &self,
        make_rows: impl FnOnce() -> I + Send,
        mut bind: impl FnMut(&mut Statement<'_>, &T) -> rusqlite::Result<()>,
    ) -> Result<u64, LoadError>
    where
        T: Send,
        I: Iterator<Item = T>,
    {
        let placeholders = vec!["?"; self.table.columns].join(", ");
        let sql = format!("INSERT INTO {} VALUES ({placeholders})", self.table.name);
        let mut stmt = self.conn.prepare_cached(&sql)?;
        thread::scope(|scope| {
            let (tx, rx) = mpsc::sync_channel::<Vec<T>>(4);
            let producer = scope.spawn(move || {
                let mut batch = Vec::with_capacity(BATCH_ROWS);
                for row in make_rows() {
                    batch.push(row);
                    if batch.len() == BATCH_ROWS {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH_ROWS));
                        if tx.send(full).is_err() {
                            return; // the inserter stopped on an error
                        }
                    }
                }
                if !batch.is_empty() {
                    let _ = tx.send(batch);
                }
            });
            let inserted = (|| {
                let mut rows = 0u64;
                for batch in rx {
                    for row in &batch {
                        bind(&mut stmt, row)?;
                        stmt.raw_execute()?;
                    }
                    rows += batch.len() as u64;
                    self.bar.inc(batch.len() as u64);
                }
                Ok::<u64, rusqlite::Error>(rows)
            })();
            // `rx` is gone here, so a producer blocked on a full channel wakes up and stops.
            let generated = producer.join();
            match (inserted, generated) {
                (Err(e), _) => Err(LoadError::Sqlite(e)),
                (Ok(_), Err(_)) => Err(LoadError::Generator),
                (Ok(rows), Ok(())) => Ok(rows),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        let mut o = GenOptions::new("x.db");
        assert!(o.validate().is_ok());
        for sf in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            o.scale_factor = sf;
            assert!(
                matches!(o.validate(), Err(GenError::ScaleFactor(_))),
                "{sf}"
            );
        }
        o.scale_factor = 0.01;
        for ps in [0, 256, 1000, 4095, 131072] {
            o.page_size = ps;
            assert!(matches!(o.validate(), Err(GenError::PageSize(_))), "{ps}");
        }
        for ps in [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536] {
            o.page_size = ps;
            assert!(o.validate().is_ok(), "{ps}");
        }
    }

    #[test]
    fn decimals_and_dates() {
        assert_eq!(decimal(TPCHDecimal(7)), 0.07);
        assert_eq!(decimal(TPCHDecimal(1795455)), 17954.55);
        assert_eq!(decimal(TPCHDecimal(2400)), 24.0);
        assert_eq!(date_text(TPCHDate::new(MIN_GENERATE_DATE)), "1992-01-01");
        assert_eq!(
            date_text(TPCHDate::new(MIN_GENERATE_DATE + 41)),
            "1992-02-11"
        );
    }

    #[test]
    fn partial_name() {
        assert_eq!(
            partial_path(Path::new("/a/b.db")),
            PathBuf::from("/a/b.db.partial")
        );
    }
}
