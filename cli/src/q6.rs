//! `corescan q6`: run TPC-H Q6 with one pinned executor per CPU and print the answer and the I/O
//! report (or one JSON object with `--json`), from one committed state of the database (the
//! `snapshot` figures say how it was held: see `engine::retry`).

use anyhow::Context;
use bench::text::{q6_sql, Q6Select};
use clap::Args;
use engine::q6::{run_q6, run_q6_files, Q6Params, Q6Report};
use partitioner::TablePlan;

use crate::report;
use crate::scan_setup::{scan_setup, ScanArgs};

/// Arguments of `corescan q6`.
#[derive(Debug, Args)]
pub struct Q6Args {
    /// The database file; or several, whose tables of the same name are read as one table
    /// (paths, quoted glob patterns such as 'shards/*.db', sorted, or @list.txt).
    #[arg(required = true, num_args = 1.., value_name = "DB")]
    db: Vec<String>,
    /// The table to scan (case-insensitive).
    #[arg(long, default_value = "lineitem")]
    table: String,
    #[command(flatten)]
    scan: ScanArgs,
    /// First day of the one-year shipping window.
    #[arg(long, value_name = "YYYY-MM-DD", default_value = "1994-01-01", value_parser = date_arg)]
    date: String,
    /// Discount; rows within +-0.01 of it match.
    #[arg(long, value_name = "D", default_value = "0.06", value_parser = discount_arg)]
    discount: String,
    /// Rows with a quantity below this match.
    #[arg(long, value_name = "Q", default_value = "24", value_parser = quantity_arg)]
    quantity: String,
    /// Print one JSON object instead of the report.
    #[arg(long)]
    json: bool,
    /// Print this Q6's SQL text (the table's name and the parameters substituted, as the
    /// oracle, sqlite3, DuckDB and Turso run it) and exit without scanning.
    #[arg(long, conflicts_with = "json")]
    print_sql: bool,
}

/// Checks one Q6 parameter with [`Q6Params::parse`] (the others at their defaults), so a bad
/// value is a usage error; the message is what was expected (clap names the option and value).
fn q6_param(date: &str, discount: &str, quantity: &str, given: &str) -> Result<String, String> {
    match Q6Params::parse(date, discount, quantity) {
        Ok(_) => Ok(given.to_string()),
        Err(e) => {
            let text = e.to_string();
            Err(text
                .split_once(": ")
                .map_or(text.clone(), |(_, what)| what.to_string()))
        }
    }
}

fn date_arg(s: &str) -> Result<String, String> {
    q6_param(s, "0.06", "24", s)
}

fn discount_arg(s: &str) -> Result<String, String> {
    q6_param("1994-01-01", s, "24", s)
}

fn quantity_arg(s: &str) -> Result<String, String> {
    q6_param("1994-01-01", "0.06", s, s)
}

/// Runs `corescan q6`.
pub fn run(args: Q6Args) -> anyhow::Result<()> {
    let params = Q6Params::parse(&args.date, &args.discount, &args.quantity)?;
    let files = partitioner::sources::expand(&args.db)?;
    let db = files.first().cloned().context("no database file")?;
    let plan = TablePlan::open_for_scan(&db, &args.table)?;
    if args.print_sql {
        println!("{}", q6_sql(&plan.table.name, &params, Q6Select::Revenue));
        return Ok(());
    }
    let (executors, settings) = scan_setup(&args.scan, plan.header.page_size)?;
    if crate::query::several(&args.db, &files) {
        let report = run_q6_files(files, &plan, &executors, &params, &settings)?;
        return print_report(&report, args.json);
    }
    // The first plan is the first attempt; a database read without SQLite's locks that
    // changed meanwhile is planned and scanned again (engine::retry).
    let mut first = Some(plan);
    let done = engine::consistent(
        &db,
        || {
            first
                .take()
                .map_or_else(|| TablePlan::open_for_scan(&db, &args.table), Ok)
        },
        |plan| run_q6(plan, &executors, &params, &settings),
    )?;
    let mut report = done.value.clone();
    let run = &mut report.run;
    done.report_into(&mut run.snapshot, &mut run.io.notice);
    print_report(&report, args.json)
}

fn print_report(report: &Q6Report, json: bool) -> anyhow::Result<()> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(report).context("serializing the report")?
        );
    } else {
        print!("{}", human(report));
    }
    Ok(())
}

/// The human-readable report: the answer, then the run's figures ([`crate::report`]).
pub fn human(r: &Q6Report) -> String {
    let mut s = report::line("revenue", &r.revenue);
    s.push_str(&report::human(
        &r.run,
        &format!("{} matched", r.rows_matched),
    ));
    s
}
