//! corescan's scans under DataFusion against SQLite's answers on the same files, one module per
//! topic:
//!
//! - [`tpch`]: the 22 TPC-H queries on a TPC-H SF 0.01 file (all eight tables) generated at
//!   test time, each compared with SQLite's answer to the same query in its own dialect;
//! - [`values`]: the Arrow types of the declared column types, value by value against SQLite,
//!   and the strict conversion's one-line errors;
//! - [`joins`]: random inner and left joins of two and three tables an application wrote (WAL
//!   mode, NULLs, duplicate and dangling keys), `IN`/`EXISTS` subqueries and grouped
//!   aggregates, against SQLite's rows, under one and two executors;
//! - [`pushdown`]: random `WHERE` clauses over columns of every pushed type and edge values
//!   (`-0.0`, `NOCASE`, decimals at their scale's edge, quotes), each answered with the filters
//!   pushed into the scan and without, which must agree row for row;
//! - [`files`]: files an application wrote (WAL mode with an unchecked-pointed log, table and
//!   column names in any case), projections of no column (`count(*)`), limits, and partitions
//!   executed twice.
//!
//! Every query runs on a tokio runtime of two workers, as `corescan sql` runs it.

mod files;
mod joins;
mod pushdown;
mod tpch;
mod values;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use std::sync::Arc;

use corescan_datafusion::{SqliteSchema, TableOptions};
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use engine::value::Value;
use engine::{Placement, ScanOptions};

/// A per-run scratch directory under `CARGO_TARGET_TMPDIR` (`name` is replaced if present).
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("datafusion-integration")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// The runtime every query runs on (DataFusion's operators need one; the scans' executors are
/// threads of their own).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| corescan_datafusion::runtime(2).expect("a tokio runtime"))
}

/// A query's answer: the column names and the rows as SQLite values
/// (`corescan_datafusion::batch_rows`).
#[derive(Debug)]
pub struct Answer {
    /// The result's column names.
    pub names: Vec<String>,
    /// The rows.
    pub rows: Vec<Vec<Value>>,
}

/// `sql` through DataFusion over every table of `db`, scanned with `placement`.
pub fn datafusion_with(
    db: &Path,
    sql: &str,
    placement: Placement,
) -> Result<Answer, DataFusionError> {
    datafusion_tables(db, sql, placement, TableOptions::default())
}

/// A session over every table of `db`, opened with `tables`.
pub fn session(
    db: &Path,
    placement: Placement,
    tables: TableOptions,
) -> Result<SessionContext, DataFusionError> {
    Ok(session_schema(db, placement, tables)?.0)
}

fn session_schema(
    db: &Path,
    placement: Placement,
    tables: TableOptions,
) -> Result<(SessionContext, Arc<SqliteSchema>), DataFusionError> {
    let ctx = corescan_datafusion::context();
    let schema =
        corescan_datafusion::register_with(&ctx, db, placement, ScanOptions::default(), tables)
            .map_err(corescan_datafusion::Error::into_datafusion)?;
    Ok((ctx, schema))
}

/// `sql` through DataFusion over every table of `db`, opened with `tables`: as `corescan sql`
/// runs it, again from a new snapshot when the file was read without SQLite's locks and
/// changed during the query.
pub fn datafusion_tables(
    db: &Path,
    sql: &str,
    placement: Placement,
    tables: TableOptions,
) -> Result<Answer, DataFusionError> {
    runtime().block_on(async {
        let mut attempt = 1;
        loop {
            let (ctx, schema) = session_schema(db, placement.clone(), tables.clone())?;
            let frame = ctx.sql(sql).await?;
            let names = frame
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            let batches = frame.collect().await?;
            match schema.check_unchanged() {
                Err(corescan_datafusion::Error::Open(e))
                    if e.is_change() && attempt < engine::MAX_ATTEMPTS =>
                {
                    attempt += 1;
                    continue;
                }
                other => other.map_err(corescan_datafusion::Error::into_datafusion)?,
            }
            let rows = batches
                .iter()
                .flat_map(corescan_datafusion::batch_rows)
                .collect();
            return Ok(Answer { names, rows });
        }
    })
}

/// `sql` through DataFusion over the tables of several files (each the union of its rows
/// over the files that hold it), one executor per CPU.
pub fn datafusion_files(paths: &[PathBuf], sql: &str) -> Result<Answer, DataFusionError> {
    runtime().block_on(async {
        let ctx = corescan_datafusion::context();
        corescan_datafusion::register_files(
            &ctx,
            paths,
            Placement::default(),
            ScanOptions::default(),
            TableOptions::default(),
        )
        .map_err(corescan_datafusion::Error::into_datafusion)?;
        let frame = ctx.sql(sql).await?;
        let names = frame
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let rows = frame
            .collect()
            .await?
            .iter()
            .flat_map(corescan_datafusion::batch_rows)
            .collect();
        Ok(Answer { names, rows })
    })
}

/// `sql` through DataFusion over every table of `db`, one executor per CPU.
pub fn datafusion(db: &Path, sql: &str) -> Result<Answer, DataFusionError> {
    datafusion_with(db, sql, Placement::default())
}

/// `sql`'s rows from SQLite itself, on a read-only connection that reads a `-wal` log as a
/// reader does (`bench::oracle::open_read_only` opens the file as immutable, which ignores it).
pub fn sqlite(db: &Path, sql: &str) -> Vec<Vec<Value>> {
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = rusqlite::Connection::open_with_flags(db, flags).expect("open read-only");
    let mut stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let n = stmt.column_count();
    let rows = stmt
        .query_map([], |r| {
            Ok((0..n)
                .map(|i| match r.get_ref(i).expect("a column") {
                    rusqlite::types::ValueRef::Null => Value::Null,
                    rusqlite::types::ValueRef::Integer(v) => Value::Integer(v),
                    rusqlite::types::ValueRef::Real(v) => Value::Real(v),
                    rusqlite::types::ValueRef::Text(t) => Value::Text(t.to_vec()),
                    rusqlite::types::ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                })
                .collect())
        })
        .expect("run the query");
    rows.map(|r| r.expect("a row")).collect()
}
