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

use std::fmt::Write as _;
use std::io::Write;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use corescan_datafusion::datafusion::arrow::record_batch::RecordBatch;
use corescan_datafusion::datafusion::error::DataFusionError;
use corescan_datafusion::datafusion::physical_plan::{
    collect, displayable, execute_stream, ExecutionPlan, SendableRecordBatchStream,
};
use corescan_datafusion::{CorescanExec, TableOptions, TypeOverride};
use futures_lite::StreamExt;
use partitioner::printable;

use crate::query_output::{result_stdout, OutputArgs, RowWriter};
use crate::report;
use crate::scan_setup::ScanArgs;

/// DataFusion's worker threads: its operators (joins, aggregates, sorts) run here, beside the
/// scans' pinned executors.
const WORKER_THREADS: usize = 2;

/// Arguments of `corescan sql`.
#[derive(Debug, Args)]
pub struct SqlArgs {
    /// The database file, then the SQL (DataFusion's dialect): every table of DB is a table,
    /// by its name in any case. Several files (paths, quoted glob patterns such as
    /// 'tenants/*.db', sorted, or @list.txt) make each table the union of its rows over the
    /// files that hold it.
    #[arg(required = true, num_args = 1.., value_name = "DB")]
    inputs: Vec<String>,
    #[command(flatten)]
    scan: ScanArgs,
    #[command(flatten)]
    output: OutputArgs,
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
    /// Run the query on these `corescan worker`s (HOST:PORT, comma-separated) instead of local
    /// files: the tables are those of the files under the workers' data directories, and each
    /// file's scan runs on a worker holding it. Give only the SQL, no DB.
    #[cfg(feature = "distributed")]
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT")]
    workers: Vec<String>,
}

/// Runs `corescan sql`.
pub fn run(args: SqlArgs) -> anyhow::Result<()> {
    corescan_datafusion::runtime(WORKER_THREADS)
        .context("starting DataFusion's runtime")?
        .block_on(run_query(args))
}

async fn run_query(args: SqlArgs) -> anyhow::Result<()> {
    #[cfg(feature = "distributed")]
    if !args.workers.is_empty() {
        return run_distributed(args).await;
    }
    let (sql, dbs) = match args.inputs.split_last() {
        Some((sql, dbs)) if !dbs.is_empty() => (sql.clone(), dbs),
        // A usage error, as clap reports its own (status 2).
        _ => clap::Error::raw(
            clap::error::ErrorKind::MissingRequiredArgument,
            "the SQL is missing: corescan sql DB... SQL\n",
        )
        .exit(),
    };
    let files = partitioner::sources::expand(dbs)?;
    let several = crate::query::several(dbs, &files);
    let mut attempt = 1;
    let (ctx, plan, names, mut batches) = loop {
        let ctx = corescan_datafusion::context();
        let tables = TableOptions {
            push_filters: !args.no_pushdown,
            all_text: args.all_text,
            types: args.types.clone(),
            file_column: several && names_file_column(&sql),
        };
        let schema = if several {
            corescan_datafusion::register_files(
                &ctx,
                &files,
                args.scan.placement(),
                args.scan.options(),
                tables,
            )?
        } else {
            corescan_datafusion::register_with(
                &ctx,
                &files[0],
                args.scan.placement(),
                args.scan.options(),
                tables,
            )?
        };
        let frame = ctx.sql(&sql).await.map_err(one_error)?;
        if args.explain {
            let plan = frame.create_physical_plan().await.map_err(one_error)?;
            let text = displayable(plan.as_ref()).indent(true).to_string();
            let mut out = result_stdout();
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .context("writing the plan")?;
            return Ok(());
        }
        let names: Vec<String> = frame
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let task = Arc::new(frame.task_ctx());
        let plan = frame.create_physical_plan().await.map_err(one_error)?;
        if !schema.needs_verification() {
            // Under SQLite's locks every table is read in the schema's snapshot: stream.
            let stream = execute_stream(Arc::clone(&plan), task).map_err(one_error)?;
            break (ctx, plan, names, Batches::Stream(stream));
        }
        // Read without locks, the answer counts only if the file did not change during the
        // query: collect it, check, and run it again from a new snapshot if it did.
        let collected = collect(Arc::clone(&plan), task).await.map_err(one_error)?;
        match schema.check_unchanged() {
            Ok(()) => break (ctx, plan, names, Batches::Collected(collected.into_iter())),
            Err(corescan_datafusion::Error::Open(e))
                if e.is_change() && attempt < engine::MAX_ATTEMPTS =>
            {
                attempt += 1;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let _session = ctx;
    write_rows(&args, names, &mut batches).await?;
    drop(batches);
    if args.output.report {
        print_reports(&plan, args.output.json())?;
    }
    Ok(())
}

/// `corescan sql --workers ...`: the query planned here over the workers' tables, its scans run
/// on the workers holding the files (`corescan_distributed`).
#[cfg(feature = "distributed")]
async fn run_distributed(args: SqlArgs) -> anyhow::Result<()> {
    let sql = match args.inputs.as_slice() {
        [sql] => sql.clone(),
        _ => clap::Error::raw(
            clap::error::ErrorKind::ArgumentConflict,
            "with --workers, give only the SQL (the tables are the workers' files): corescan \
             sql --workers HOST:PORT,... SQL\n",
        )
        .exit(),
    };
    let tables = TableOptions {
        push_filters: !args.no_pushdown,
        all_text: args.all_text,
        types: args.types.clone(),
        file_column: false,
    };
    let cluster = corescan_distributed::Cluster::connect(&args.workers, tables).await?;
    let planned = cluster
        .plan(&sql)
        .await
        .map_err(|e| worker_error(one_error(e)))?;
    let (plan, task, names) = (planned.plan, planned.task, planned.names);
    if args.explain {
        let mut text = corescan_distributed::cluster::display(&plan);
        if planned.isolated {
            text.push_str(
                "(each scan is a stage of its own, the operators above the scans run in one \
                 task: the planner's distribution left a scan in a stage of another task count)\n",
            );
        }
        let mut out = result_stdout();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .context("writing the plan")?;
        return Ok(());
    }
    let stream = execute_stream(Arc::clone(&plan), task).map_err(one_error)?;
    write_rows(&args, names, &mut Batches::Stream(stream))
        .await
        .map_err(worker_error)?;
    if args.output.report {
        // The workers' metrics (rows, times) of every stage and task, collected by the
        // distributed engine as the query ends; each scan's I/O report stays on its worker.
        let text = corescan_distributed::cluster::display_with_metrics(&plan)
            .await
            .map_err(one_error)?;
        eprint!("{text}");
    }
    Ok(())
}

/// A failure reported through a worker's gRPC stream as one plain line: the status message
/// tonic wraps (`code: ..., message: "...", source: ...`), named as the workers' failure.
#[cfg(feature = "distributed")]
fn worker_error(e: anyhow::Error) -> anyhow::Error {
    let text = e.to_string();
    let Some(start) = text.find("message: \"") else {
        // A worker's error as DataFusion carries it back: corescan's own line, wrapped.
        return match text.strip_prefix("External error: ") {
            // A value that does not fit its column's type (corescan_datafusion's
            // ConversionError, as text once it crossed the network): the same way out.
            Some(inner) if inner.contains(" does not fit ") => anyhow::anyhow!(
                "{inner} (read it as another type with --type TABLE.COLUMN=TYPE, or every \
                 column as text with --all-text)"
            ),
            Some(inner) => anyhow::anyhow!("{inner}"),
            None => e,
        };
    };
    let rest = &text[start + "message: \"".len()..];
    let message = rest
        .split("\", source: ")
        .next()
        .unwrap_or(rest)
        .trim_end_matches('"');
    anyhow::anyhow!("the query failed on the workers: {message}")
}

/// Writes the query's rows in the output format; the rows written before an error stay
/// written, ended as their format ends them.
async fn write_rows(
    args: &SqlArgs,
    names: Vec<String>,
    batches: &mut Batches,
) -> anyhow::Result<()> {
    let mut writer = RowWriter::new(args.output.format, names, result_stdout());
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
    let finished = writer.finish();
    if let Some(e) = failed {
        return Err(e);
    }
    finished.context("writing the result")?;
    Ok(())
}

/// A query's record batches: streamed as the plan computes them, or collected first.
enum Batches {
    Stream(SendableRecordBatchStream),
    Collected(std::vec::IntoIter<RecordBatch>),
}

impl Batches {
    async fn next(&mut self) -> Option<Result<RecordBatch, DataFusionError>> {
        match self {
            Batches::Stream(s) => s.next().await,
            Batches::Collected(c) => c.next().map(Ok),
        }
    }
}

/// Every corescan scan of `plan`, in the plan's order (top to bottom, left to right).
pub(crate) fn scans(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<Arc<dyn ExecutionPlan>>) {
    if plan.is::<CorescanExec>() {
        out.push(Arc::clone(plan));
    }
    for child in plan.children() {
        scans(child, out);
    }
}

/// The I/O report of each scan `plan` ran, on stderr: `query`'s report under a line naming the
/// table, its columns and pushed filter; a JSON array of them for the JSON formats.
fn print_reports(plan: &Arc<dyn ExecutionPlan>, json: bool) -> anyhow::Result<()> {
    let mut found = Vec::new();
    scans(plan, &mut found);
    let mut all = Vec::new();
    let mut text = String::new();
    for node in &found {
        let Some(exec) = node.downcast_ref::<CorescanExec>() else {
            continue;
        };
        let target = exec.target();
        for end in exec.scan_ends() {
            let n = all.len() + 1;
            let mut entry = serde_json::json!({
                "table": target.table,
                "columns": exec.columns(),
                "filter": exec.filter(),
            });
            let _ = writeln!(
                text,
                "scan {n}: {} ({}){}",
                printable(&target.table),
                exec.columns()
                    .iter()
                    .map(|c| printable(c))
                    .collect::<Vec<_>>()
                    .join(", "),
                exec.filter()
                    .map(|f| format!(" where {}", printable(f)))
                    .unwrap_or_default()
            );
            match end {
                Ok(end) => {
                    entry["rows_to_datafusion"] = serde_json::json!(end.rows);
                    entry["report"] =
                        serde_json::to_value(&end.report).context("serializing the report")?;
                    text.push_str(&report::human(
                        &end.report,
                        &format!("{} rows to DataFusion", end.rows),
                    ));
                }
                // A scan DataFusion stopped reading (a LIMIT reached, a join side that was
                // empty) ends without a report of its own.
                Err(e) => {
                    entry["stopped"] = serde_json::json!(e.to_string());
                    text.push_str(&report::line("stopped", &e.to_string()));
                }
            }
            all.push(entry);
        }
    }
    if json {
        eprintln!("{}", serde_json::Value::Array(all));
    } else {
        eprint!("{text}");
    }
    Ok(())
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
        None => anyhow::anyhow!("{}", e.strip_backtrace().trim_end()),
    }
}

/// Whether `sql` names the column `_file` ([`corescan_datafusion::FILE_COLUMN`]): the word,
/// in any case, not inside a longer name. (A string or comment holding it only adds the
/// column to `*`.)
fn names_file_column(sql: &str) -> bool {
    let word = corescan_datafusion::FILE_COLUMN.as_bytes();
    let bytes = sql.as_bytes();
    let part = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80;
    bytes.windows(word.len()).enumerate().any(|(at, w)| {
        w.eq_ignore_ascii_case(word)
            && (at == 0 || !part(bytes[at - 1]))
            && bytes.get(at + word.len()).is_none_or(|&b| !part(b))
    })
}

#[cfg(test)]
mod tests {
    use super::names_file_column;

    #[test]
    fn the_file_column_is_named_as_a_word() {
        assert!(names_file_column(
            "SELECT _file, count(*) FROM t GROUP BY 1"
        ));
        assert!(names_file_column(
            "select * from t where \"_FILE\" = 'a.db'"
        ));
        assert!(names_file_column("SELECT t._file FROM t"));
        assert!(!names_file_column("SELECT my_file, _files FROM t"));
        assert!(!names_file_column("SELECT * FROM t"));
    }
}
