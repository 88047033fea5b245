//! `corescan query DB SQL`: one `SELECT` over one table, planned by [`bench::sql`] and run
//! with one pinned executor per CPU; rows on stdout in the `sqlite3` shell's output modes,
//! and with `--report` the I/O report on stderr.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use engine::query::{run_query, QueryError};
use engine::ScanReport;
use partitioner::TablePlan;

use super::query_output::{render, Format};
use super::scan_setup::{scan_setup, ScanArgs};

/// Arguments of `corescan query`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The database file.
    db: PathBuf,
    /// One SELECT over one table of DB.
    sql: String,
    #[command(flatten)]
    scan: ScanArgs,
    /// Output mode, as the sqlite3 shell's -box, -csv -header, -json, -line (jsonl: one JSON
    /// object per line).
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Also print the I/O report (on stderr; as JSON for the JSON formats).
    #[arg(long)]
    report: bool,
}

/// Runs `corescan query`.
pub fn run(args: QueryArgs) -> anyhow::Result<()> {
    let planned = bench::sql::plan_query(&args.db, &args.sql)?;
    let (executors, settings) = scan_setup(&args.scan, planned.table.header.page_size)?;
    // The first plan is the first attempt; a database read without SQLite's locks that changed
    // meanwhile is planned and scanned again (engine::consistent), as for q6. An error
    // finishing the result (`integer overflow`) is the answer, not a change: it ends the loop.
    let table = planned.table.table.name.clone();
    let mut first = Some(planned.table);
    let mut done = engine::consistent(
        &args.db,
        || {
            first
                .take()
                .map_or_else(|| TablePlan::open(&args.db, &table), Ok)
        },
        |plan| match run_query(plan, planned.query.clone(), &settings, &executors) {
            Ok(out) => Ok(Ok(out)),
            Err(QueryError::Scan(e)) => Err(e),
            Err(QueryError::Eval(e)) => Ok(Err(e)),
        },
    )?;
    let mut out = match std::mem::replace(&mut done.value, Err(String::new())) {
        Ok(out) => out,
        Err(e) => anyhow::bail!("{e}"),
    };
    done.report_into(&mut out.report.snapshot, &mut out.report.io.notice);
    print!("{}", render(args.format, &out.names, &out.rows));
    if args.report {
        if matches!(args.format, Format::Json | Format::Jsonl) {
            eprintln!(
                "{}",
                serde_json::to_string(&out.report).context("serializing the report")?
            );
        } else {
            let rows = out.rows.len() as u64;
            let text = super::q6::human(&ScanReport::from_run(out.report, String::new(), rows));
            // The Q6 report without its revenue line; "matched" counts result rows here.
            for line in text.lines().skip(1) {
                let line = if line.starts_with("rows ") {
                    line.replace(&format!("{rows} matched"), &format!("{rows} result rows"))
                } else {
                    line.to_string()
                };
                eprintln!("{line}");
            }
        }
    }
    Ok(())
}
