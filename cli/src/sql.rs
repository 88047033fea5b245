//! `corescan sql DB SQL`: any SQL Apache DataFusion accepts (joins, subqueries, CTEs, window
//! functions) over the tables of DB, each scanned by corescan's pinned executors
//! (`corescan_datafusion`), with the rows printed in `corescan query`'s output formats.
//!
//! DataFusion's operators run on a small tokio runtime of their own (two worker threads: the
//! scans' executors are threads of their own, pinned to their CPUs, and do the reading and
//! decoding). Values print as `corescan query` prints SQLite's ([`corescan_datafusion::output`]:
//! decimals exactly, as text; dates as `YYYY-MM-DD`). `--explain` prints the physical plan,
//! with one `CorescanExec` per scan, instead of running the query. An error is corescan's own
//! line where the scan failed (file, table, column, rowid), else DataFusion's message.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use corescan_datafusion::datafusion::error::DataFusionError;
use corescan_datafusion::datafusion::physical_plan::displayable;
use corescan_datafusion::datafusion::prelude::SessionContext;
use corescan_datafusion::{TableOptions, TypeOverride};
use futures_lite::StreamExt;

use crate::query_output::{Format, RowWriter};
use crate::scan_setup::ScanArgs;

/// DataFusion's worker threads: its operators (joins, aggregates, sorts) run here, beside the
/// scans' pinned executors.
const WORKER_THREADS: usize = 2;

/// Arguments of `corescan sql`.
#[derive(Debug, Args)]
pub struct SqlArgs {
    /// The database file.
    db: PathBuf,
    /// The SQL (DataFusion's dialect); every table of DB is a table, by its name in any case.
    sql: String,
    #[command(flatten)]
    scan: ScanArgs,
    /// Output mode, as the sqlite3 shell's -box, -csv -header, -json, -line (jsonl: one JSON
    /// object per line).
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Print the physical plan (with the corescan scans in it) instead of running the query.
    #[arg(long)]
    explain: bool,
    /// Evaluate every `WHERE` term in DataFusion, none in the scan (for comparisons: the
    /// answer is the same, the scan sends every row).
    #[arg(long)]
    no_pushdown: bool,
    /// Read every column as text, whatever its declared type (numbers as SQLite's
    /// `CAST(x AS TEXT)` writes them).
    #[arg(long)]
    all_text: bool,
    /// Read a column as TYPE instead of its declared type's: TABLE.COLUMN=TYPE, with TYPE one
    /// of INTEGER, REAL, TEXT, BLOB, DECIMAL(p,s), DATE, TIMESTAMP, BOOLEAN (repeatable).
    #[arg(long = "type", value_name = "TABLE.COLUMN=TYPE")]
    types: Vec<TypeOverride>,
}

/// Runs `corescan sql`.
pub fn run(args: SqlArgs) -> anyhow::Result<()> {
    corescan_datafusion::runtime(WORKER_THREADS)
        .context("starting DataFusion's runtime")?
        .block_on(run_query(args))
}

async fn run_query(args: SqlArgs) -> anyhow::Result<()> {
    let ctx = SessionContext::new();
    let tables = TableOptions {
        push_filters: !args.no_pushdown,
        all_text: args.all_text,
        types: args.types,
    };
    corescan_datafusion::register_with(
        &ctx,
        &args.db,
        args.scan.placement(),
        args.scan.options(),
        tables,
    )?;
    let frame = ctx.sql(&args.sql).await.map_err(one_error)?;
    if args.explain {
        let plan = frame.create_physical_plan().await.map_err(one_error)?;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .context("writing the plan")?;
        return Ok(());
    }
    let names = frame
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let mut batches = frame.execute_stream().await.map_err(one_error)?;
    let stdout = std::io::stdout().lock();
    let mut writer = RowWriter::new(
        args.format,
        names,
        std::io::BufWriter::with_capacity(64 * 1024, stdout),
    );
    let mut failed = None;
    while let Some(batch) = batches.next().await {
        match batch {
            Ok(batch) => {
                for row in corescan_datafusion::batch_rows(&batch) {
                    writer.row(&row).context("writing the result")?;
                }
            }
            Err(e) => {
                failed = Some(one_error(e));
                break;
            }
        }
    }
    // The rows written before an error stay written, ended as their format ends them.
    let finished = writer.finish();
    if let Some(e) = failed {
        return Err(e);
    }
    finished.context("writing the result")
}

/// DataFusion's error as one message: corescan's own when a scan failed (DataFusion wraps it),
/// else DataFusion's.
fn one_error(e: DataFusionError) -> anyhow::Error {
    match corescan_datafusion::find(&e) {
        Some(corescan_datafusion::Error::Conversion(c)) => anyhow::anyhow!(
            "{c} (read it as another type with --type {}.{}=TYPE, or every column as text \
             with --all-text)",
            c.table,
            c.column
        ),
        Some(ours) => anyhow::anyhow!("{ours}"),
        None => anyhow::anyhow!("{}", e.strip_backtrace()),
    }
}
