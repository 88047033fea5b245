//! `corescan query DB... SQL`: one `SELECT` over one table, planned by [`corescan_sql`] and run
//! with one pinned executor per CPU; rows on stdout in the `sqlite3` shell's output modes,
//! and with `--report` the I/O report on stderr. Several files (paths, quoted globs,
//! `@list.txt`) are one table, the union of the table over them ([`run_files`]).

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use corescan_sql::FileScans;
use engine::query::{
    run_query_files_streaming, run_query_rendered, FileRow, MissingTable, QueryError, RowRender,
};

use crate::query_output::{result_stdout, FormatRender, OutputArgs, RowWriter};
use crate::report;
use crate::scan_setup::{scan_setup, scan_setup_for_leaves, ScanArgs};

/// Arguments of `corescan query`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The database file, then the SQL: one SELECT over one table of DB. Several files
    /// (paths, quoted glob patterns such as 'tenants/*.db', sorted, or @list.txt with one path
    /// per line) are one table: the union of the table of that name over them, file by file
    /// in the listed order.
    #[arg(required = true, num_args = 1.., value_name = "DB")]
    inputs: Vec<String>,
    /// With several files: skip those without the table (counted in the report) instead of
    /// failing on the first.
    #[arg(long)]
    skip_missing: bool,
    #[command(flatten)]
    scan: ScanArgs,
    /// Memory a full sort (ORDER BY without LIMIT) or a grouped query's group tables may
    /// hold, all executors together, e.g. 256M or 2G (K, M, G, T are powers of 1024); beyond
    /// it sorted runs of rows or groups are written to the scratch directory ($TMPDIR, else
    /// /tmp) and merged [default: a quarter of the machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_memory)]
    memory: Option<u64>,
    #[command(flatten)]
    output: OutputArgs,
}

/// A `--memory` size: bytes with an optional binary unit (`256M`, `2G`, `1.5G`).
fn parse_memory(s: &str) -> Result<u64, String> {
    parse_size::Config::new()
        .with_binary()
        .parse_size(s)
        .map_err(|e| format!("{e}: expected a size such as 256M or 2G"))
}

/// Runs `corescan query`.
pub fn run(args: QueryArgs) -> anyhow::Result<()> {
    let (sql, dbs) = match args.inputs.split_last() {
        Some((sql, dbs)) if !dbs.is_empty() => (sql, dbs),
        // A usage error, as clap reports its own (status 2).
        _ => clap::Error::raw(
            clap::error::ErrorKind::MissingRequiredArgument,
            "the SQL is missing: corescan query DB... SQL\n",
        )
        .exit(),
    };
    let files = partitioner::sources::expand(dbs)?;
    if several(dbs, &files) {
        return run_files(&args, sql, files);
    }
    let db = files.into_iter().next().context("no database file")?;
    run_one(&args, &db, sql, true)
}

/// `corescan query` over one file. A statement that fails to plan and names a view of the
/// file is planned again with the view's query in its place ([`corescan_sql::expand_views`])
/// when `views` is set (the statements that name none never read the schema twice).
fn run_one(args: &QueryArgs, db: &std::path::Path, sql: &str, views: bool) -> anyhow::Result<()> {
    let db = db.to_path_buf();
    let planned = plan_statement(&db, sql, &args.scan);
    if views && planned.is_err() {
        let expanded = corescan_sql::expand_views(&partitioner::PageFile::open(&db)?, sql)?;
        if let Some(expanded) = expanded {
            return run_one(args, &db, &expanded, false);
        }
    }
    let planned = match planned {
        // A subquery in FROM that SQLite does not flatten: its rows, then the query over them.
        Err(e)
            if matches!(
                e.downcast_ref(),
                Some(corescan_sql::SqlError::Unsupported(_))
            ) && corescan_sql::is_materializable(sql) =>
        {
            return run_materialized(args, &db, sql);
        }
        planned => planned?,
    };
    let (executors, mut settings) = scan_setup_for_leaves(
        &args.scan,
        planned.table.header.page_size,
        planned.table.listed_leaves(),
        planned.query.seek_rows(),
    )?;
    settings.memory = args.memory;
    // The first plan is the first attempt; a database read without SQLite's locks that changed
    // meanwhile is planned and scanned again (engine::consistent), as for q6: the statement
    // in full when its plan holds its subqueries' results. An error finishing the result
    // (`integer overflow`) is the answer, not a change: it ends the loop.
    let table = planned.table.table.name.clone();
    let replans = planned.replans();
    let mut first = Some(planned.table);
    let query = RefCell::new(planned.query.clone());
    // Rows go to stdout as the coordinator receives them (see engine::query::stream).
    let mut writer = RowWriter::new(
        args.output.format,
        planned.query.names.clone(),
        result_stdout(),
    )
    .drawing_threads(executors.len());
    let render: Arc<dyn RowRender> = Arc::new(FormatRender::new(
        args.output.format,
        planned.query.names.clone(),
    ));
    let result = engine::consistent(
        &db,
        || match first.take() {
            Some(plan) => Ok(plan),
            None if replans => {
                let again = plan_statement(&db, sql, &args.scan).map_err(|e| {
                    partitioner::Error::Changed {
                        path: db.clone(),
                        what: format!("{e:#}"),
                    }
                })?;
                *query.borrow_mut() = again.query;
                Ok(again.table)
            }
            None => corescan_sql::plan_table(&db, &table, &planned.query),
        },
        // The executors format the rows in parallel (a box table's cells, kept until its
        // widths are known); this thread only writes them.
        |plan| match run_query_rendered(
            plan,
            query.borrow().clone(),
            &settings,
            &executors,
            Arc::clone(&render),
            |bytes| writer.rendered(bytes),
        ) {
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
    if let Some(p) = &planned.index_plan {
        p.check_rows(rows)
            .with_context(|| format!("{}", db.display()))?;
    }
    done.report_into(&mut out.report.snapshot, &mut out.report.io.notice);
    if args.output.report {
        // A streamed projection: how long each executor waited for the output of the ranges
        // before its own (null when the rows were collected).
        let waited = out.streamed.then_some(&out.waited_s);
        if args.output.json() {
            let mut json = serde_json::to_value(&out.report).context("serializing the report")?;
            json["stream_wait_s"] = serde_json::json!(waited);
            json["stream_segments"] = serde_json::json!(out.streamed.then_some(out.segments));
            json["sort"] = sort_json(out.sort.as_ref());
            json["groups"] = groups_json(out.groups.as_ref());
            json["sqlite_plan"] = serde_json::json!(planned
                .index_plan
                .as_ref()
                .map(|p| { serde_json::json!({"sqlite": p.sqlite, "corescan": p.corescan}) }));
            eprintln!("{json}");
        } else {
            let mut text = report::human(&out.report, &format!("{rows} result rows"));
            if let Some(p) = &planned.index_plan {
                // SQLite's own plan (EXPLAIN QUERY PLAN), then what corescan ran for it.
                for (i, l) in p.sqlite.iter().enumerate() {
                    text.push_str(&report::line(if i == 0 { "sqlite plan" } else { "" }, l));
                }
                text.push_str(&report::line("corescan", &p.corescan));
            }
            if let Some(w) = waited {
                let each: Vec<String> = w.iter().map(|s| format!("{s:.3} s")).collect();
                // Cut into segments dealt in turn, or one range per executor.
                let cut = match out.segments {
                    0 => String::new(),
                    n => format!(" ({n} segments dealt to the executors in turn)"),
                };
                text.push_str(&report::line(
                    "streamed",
                    &format!(
                        "in rowid order{cut}; waits for the output per executor: {}",
                        each.join(", ")
                    ),
                ));
            }
            if let Some(s) = out.sort {
                text.push_str(&report::line("sorted", &sort_line(&s)));
            }
            if let Some(g) = out.groups {
                text.push_str(&report::line("grouped", &groups_line(&g)));
            }
            eprint!("{text}");
        }
    }
    Ok(())
}

/// The report's line for a full sort: its rows, the executors' buffers and what spilled.
fn sort_line(s: &engine::query::sort::SortStats) -> String {
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let spilled = match s.spilled_runs {
        0 => "nothing spilled".to_string(),
        n => format!(
            "{n} sorted runs ({:.1} MiB) written to the scratch directory and merged",
            mib(s.spilled_bytes)
        ),
    };
    format!(
        "{} rows in executor buffers of up to {:.1} MiB together; {spilled}",
        s.rows,
        mib(s.buffer_bytes)
    )
}

/// `corescan query` over a subquery in `FROM` that SQLite does not flatten
/// ([`corescan_sql::answer_materialized`]): the subquery runs as a parallel scan with the
/// placement `args` gives, in one snapshot of the file (run again after a change of the
/// database, as a statement's subqueries are), and the query around it over its rows.
fn run_materialized(args: &QueryArgs, db: &std::path::Path, sql: &str) -> anyhow::Result<()> {
    let mut attempt = 1;
    let answer = loop {
        let file = partitioner::PageFile::open(db)?;
        let (executors, mut settings) = scan_setup(&args.scan, file.header().page_size)?;
        settings.memory = args.memory;
        let scans = FileScans {
            file: &file,
            settings: &settings,
            executors: &executors,
        };
        match corescan_sql::answer_materialized(sql, &scans) {
            Err(e) if e.is_change() && attempt < engine::MAX_ATTEMPTS => attempt += 1,
            Ok(Some(answer)) => break answer,
            Ok(None) => anyhow::bail!("internal: the statement is no query over a subquery"),
            Err(e) => return Err(e.into()),
        }
    };
    let mut writer = RowWriter::new(args.output.format, answer.names, result_stdout());
    for row in &answer.rows {
        writer.row(row).context("writing the result")?;
    }
    writer.finish().context("writing the result")?;
    if args.output.report {
        eprintln!(
            "{} result rows: the subquery in FROM ran as a parallel scan, the query around it \
             over its rows (SQLite's co-routine)",
            answer.rows.len()
        );
    }
    Ok(())
}

/// Plans `sql` over `db`, running its subqueries (each a parallel scan of its own, with the
/// placement `scan` gives) in one snapshot of the file; a subquery that met a change of the
/// database (read without SQLite's locks) is run again, up to `engine::MAX_ATTEMPTS` times.
fn plan_statement(
    db: &std::path::Path,
    sql: &str,
    scan: &ScanArgs,
) -> anyhow::Result<corescan_sql::PlannedQuery> {
    let mut attempt = 1;
    loop {
        let file = partitioner::PageFile::open(db)?;
        let scans = PlacedScans {
            file: &file,
            scan,
            setup: std::cell::OnceCell::new(),
        };
        match corescan_sql::plan_query_running(sql, &scans) {
            Err(e) if e.is_change() && attempt < engine::MAX_ATTEMPTS => attempt += 1,
            planned => return Ok(planned?),
        }
    }
}

/// A statement's subqueries, run with the placement `scan` gives, resolved at the first
/// subquery: a statement without one never waits for the machine's topology, whose discovery
/// (hwloc, a few milliseconds) is longer than an index seek (its scan is placed by
/// [`scan_setup_for_leaves`], which needs no topology for a small scan).
struct PlacedScans<'a> {
    file: &'a partitioner::PageFile,
    scan: &'a ScanArgs,
    setup: std::cell::OnceCell<(Vec<engine::ExecutorSpec>, engine::ScanSettings)>,
}

impl corescan_sql::SubqueryRunner for PlacedScans<'_> {
    fn open_table(&self, name: &str) -> partitioner::Result<partitioner::TablePlan> {
        partitioner::TablePlan::open_for_scan_from(self.file, name)
    }

    fn run(
        &self,
        table: &partitioner::TablePlan,
        query: engine::query::QueryPlan,
    ) -> Result<Result<Vec<Vec<engine::value::Value>>, String>, corescan_sql::SqlError> {
        let (executors, settings) = match self.setup.get() {
            Some(s) => s,
            None => {
                let s = scan_setup(self.scan, self.file.header().page_size)
                    .map_err(|e| corescan_sql::SqlError::Invalid(format!("{e:#}")))?;
                self.setup.get_or_init(|| s)
            }
        };
        let scans = FileScans {
            file: self.file,
            settings,
            executors,
        };
        corescan_sql::SubqueryRunner::run(&scans, table, query)
    }
}

/// Whether the files named `given` (expanded to `files`) are a table over several files:
/// more than one, or named by a pattern or a list (even when that names one file).
pub fn several<S: AsRef<str>>(given: &[S], files: &[PathBuf]) -> bool {
    files.len() > 1
        || given
            .iter()
            .any(|g| partitioner::sources::is_pattern(g.as_ref()) || g.as_ref().starts_with('@'))
}

/// `corescan query` over several files: the query is planned against the first file that has
/// the table, then each file is bound to it by column name and read by the executor it is
/// dealt to; the rows come file by file in the listed order, each file in rowid order.
fn run_files(args: &QueryArgs, sql: &str, files: Vec<PathBuf>) -> anyhow::Result<()> {
    let missing = if args.skip_missing {
        MissingTable::Skip
    } else {
        MissingTable::Fail
    };
    let planned = corescan_sql::plan_query_files(&files, sql, args.skip_missing)?;
    let (executors, mut settings) = scan_setup(&args.scan, planned.table.header.page_size)?;
    settings.memory = args.memory;
    let names = planned.query.names.clone();
    let mut writer = RowWriter::new(args.output.format, names.clone(), result_stdout())
        .drawing_threads(executors.len());
    // The executors format the rows in parallel (a box table's cells, kept until its widths
    // are known); this thread only writes them.
    let render: Option<Arc<dyn RowRender>> =
        Some(Arc::new(FormatRender::new(args.output.format, names)));
    let result = run_query_files_streaming(
        files,
        &planned.table,
        planned.query,
        &settings,
        &executors,
        missing,
        render,
        &mut |row| match row {
            FileRow::Values(v) => writer.row(v),
            FileRow::Rendered(b) => writer.rendered(b),
        },
    );
    let rows = writer.rows();
    let finished = writer.finish();
    let out = result.map_err(|e| anyhow::anyhow!("{e}"))?;
    finished.context("writing the result")?;
    if args.output.report {
        if args.output.json() {
            let mut json = serde_json::to_value(&out.report).context("serializing the report")?;
            json["sort"] = sort_json(out.sort.as_ref());
            json["groups"] = groups_json(out.groups.as_ref());
            eprintln!("{json}");
        } else {
            let mut text = report::human(&out.report, &format!("{rows} result rows"));
            if let Some(s) = &out.sort {
                text.push_str(&report::line("sorted", &sort_line(s)));
            }
            if let Some(g) = &out.groups {
                text.push_str(&report::line("grouped", &groups_line(g)));
            }
            eprint!("{text}");
        }
    }
    Ok(())
}

/// The report's line for a grouped query: its groups, the executors' tables and what spilled.
fn groups_line(g: &engine::query::group_spill::GroupStats) -> String {
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let spilled = match g.spilled_runs {
        0 => "nothing spilled".to_string(),
        n => format!(
            "{n} runs of groups ({:.1} MiB) written to the scratch directory and merged",
            mib(g.spilled_bytes)
        ),
    };
    format!(
        "{} groups in executor tables of up to {:.1} MiB together (estimated); {spilled}",
        g.groups,
        mib(g.table_bytes)
    )
}

/// The JSON report's `groups`: a grouped query's figures, or null.
fn groups_json(g: Option<&engine::query::group_spill::GroupStats>) -> serde_json::Value {
    serde_json::json!(g.map(|g| serde_json::json!({
        "groups": g.groups,
        "table_bytes": g.table_bytes,
        "spilled_runs": g.spilled_runs,
        "spilled_bytes": g.spilled_bytes,
    })))
}

/// The JSON report's `sort`: a full sort's figures, or null.
fn sort_json(s: Option<&engine::query::sort::SortStats>) -> serde_json::Value {
    serde_json::json!(s.map(|s| serde_json::json!({
        "rows": s.rows,
        "spilled_runs": s.spilled_runs,
        "spilled_bytes": s.spilled_bytes,
        "buffer_bytes": s.buffer_bytes,
    })))
}
