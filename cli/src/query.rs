//! `corescan query DB SQL`: one `SELECT` over one table, planned by [`corescan_sql`] and run
//! with one pinned executor per CPU; rows on stdout in the `sqlite3` shell's output modes,
//! and with `--report` the I/O report on stderr.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use engine::query::{run_query_rendered, run_query_streaming, QueryError, RowRender};

use crate::query_output::{result_stdout, Format, FormatRender, OutputArgs, RowWriter};
use crate::report;
use crate::scan_setup::{scan_setup, ScanArgs};

/// Arguments of `corescan query`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The database file.
    db: PathBuf,
    /// One SELECT over one table of DB.
    sql: String,
    #[command(flatten)]
    scan: ScanArgs,
    #[command(flatten)]
    output: OutputArgs,
}

/// Runs `corescan query`.
pub fn run(args: QueryArgs) -> anyhow::Result<()> {
    let planned = corescan_sql::plan_query(&args.db, &args.sql)?;
    let (executors, settings) = scan_setup(&args.scan, planned.table.header.page_size)?;
    // The first plan is the first attempt; a database read without SQLite's locks that changed
    // meanwhile is planned and scanned again (engine::consistent), as for q6. An error
    // finishing the result (`integer overflow`) is the answer, not a change: it ends the loop.
    let table = planned.table.table.name.clone();
    let mut first = Some(planned.table);
    // Rows go to stdout as the coordinator receives them (see engine::query::stream).
    let mut writer = RowWriter::new(
        args.output.format,
        planned.query.names.clone(),
        result_stdout(),
    );
    let render: Arc<dyn RowRender> = Arc::new(FormatRender {
        format: args.output.format,
        names: planned.query.names.clone(),
    });
    let result = engine::consistent(
        &args.db,
        || {
            first.take().map_or_else(
                || corescan_sql::plan_table(&args.db, &table, &planned.query),
                Ok,
            )
        },
        |plan| match if args.output.format == Format::Table {
            run_query_streaming(plan, planned.query.clone(), &settings, &executors, |row| {
                writer.row(row)
            })
        } else {
            // The executors format the rows in parallel; this thread only writes them.
            run_query_rendered(
                plan,
                planned.query.clone(),
                &settings,
                &executors,
                Arc::clone(&render),
                |bytes| writer.rendered(bytes),
            )
        } {
            Ok(out) => Ok(Ok(out)),
            Err(QueryError::Scan(e)) => Err(e),
            Err(e) => Ok(Err(e.to_string())),
        },
    );
    // The rows written before an error stay written, ended as their format ends them.
    let rows = writer.rows();
    let finished = writer.finish();
    let mut done = result?;
    let mut out = match std::mem::replace(&mut done.value, Err(String::new())) {
        Ok(out) => out,
        Err(e) => anyhow::bail!("{e}"),
    };
    finished.context("writing the result")?;
    done.report_into(&mut out.report.snapshot, &mut out.report.io.notice);
    if args.output.report {
        // A streamed projection: how long each executor waited for the output of the ranges
        // before its own (null when the rows were collected).
        let waited = out.streamed.then_some(&out.waited_s);
        if args.output.json() {
            let mut json = serde_json::to_value(&out.report).context("serializing the report")?;
            json["stream_wait_s"] = serde_json::json!(waited);
            eprintln!("{json}");
        } else {
            let mut text = report::human(&out.report, &format!("{rows} result rows"));
            if let Some(w) = waited {
                let each: Vec<String> = w.iter().map(|s| format!("{s:.3} s")).collect();
                text.push_str(&report::line(
                    "streamed",
                    &format!(
                        "in rowid order; waits for the output per executor: {}",
                        each.join(", ")
                    ),
                ));
            }
            eprint!("{text}");
        }
    }
    Ok(())
}
