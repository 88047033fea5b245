//! `corescan q6`: run TPC-H Q6 with one pinned executor per CPU and print the answer and the I/O
//! report (or one JSON object with `--json`), from one committed state of the database (the
//! `snapshot` figures say how it was held: see `engine::retry`).

use std::path::PathBuf;

use anyhow::Context;
use bench::text::{q6_sql, Q6Select};
use clap::Args;
use engine::{run_q6, Q6Params, ScanReport};
use partitioner::TablePlan;

use crate::scan_setup::{scan_setup, ScanArgs};

/// Arguments of `corescan q6`.
#[derive(Debug, Args)]
pub struct Q6Args {
    /// The database file.
    db: PathBuf,
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
    let plan = TablePlan::open_for_scan(&args.db, &args.table)?;
    if args.print_sql {
        println!("{}", q6_sql(&plan.table.name, &params, Q6Select::Revenue));
        return Ok(());
    }
    let (executors, settings) = scan_setup(&args.scan, plan.header.page_size)?;
    // The first plan is the first attempt; a database read without SQLite's locks that
    // changed meanwhile is planned and scanned again (engine::retry).
    let mut first = Some(plan);
    let done = engine::consistent(
        &args.db,
        || {
            first
                .take()
                .map_or_else(|| TablePlan::open_for_scan(&args.db, &args.table), Ok)
        },
        |plan| run_q6(plan, &executors, &params, &settings),
    )?;
    let mut report = done.value.clone();
    let run = &mut report.run;
    done.report_into(&mut run.snapshot, &mut run.io.notice);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).context("serializing the report")?
        );
    } else {
        print!("{}", human(&report));
    }
    Ok(())
}

/// The human-readable report.
pub fn human(r: &ScanReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let io = &r.io;
    let _ = writeln!(s, "revenue     {}", r.revenue);
    let _ = writeln!(
        s,
        "rows        {} scanned, {} matched",
        r.rows_scanned, r.rows_matched
    );
    let _ = writeln!(
        s,
        "time        {:.3} s wall, {:.2} GB/s, {:.1} M rows/s",
        r.wall_s,
        r.gb_per_s,
        r.rows_per_s / 1e6
    );
    let cpus: Vec<String> = r.executors.iter().map(|e| e.cpu.to_string()).collect();
    let _ = writeln!(
        s,
        "executors   {} on CPUs {}{}",
        r.executors.len(),
        cpus.join(","),
        if r.oversubscribed {
            format!(
                " (OVERSUBSCRIBED: {} CPUs available; times measure time-sharing)",
                r.available_cpus
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "io          {}, {}{}, {}, readahead {} pages, reads up to {} pages (coalesce {} KiB)",
        io.backend,
        if io.o_direct {
            "O_DIRECT"
        } else {
            "buffered (no O_DIRECT)"
        },
        match io.huge_page_buffers {
            Some(true) => " into huge-page buffers",
            Some(false) => " into small-page buffers",
            None => "",
        },
        match (io.sqpoll_cpu, io.sqpoll_cpu_s) {
            (Some(c), Some(t)) if io.sqpoll => format!("SQPOLL on CPU {c} ({t:.3} s CPU)"),
            (Some(c), None) if io.sqpoll => format!("SQPOLL on CPU {c}"),
            _ if io.sqpoll => "SQPOLL".to_string(),
            _ => "no SQPOLL".to_string(),
        },
        io.readahead,
        io.max_read_pages,
        io.coalesce_kib
    );
    if let Some(n) = &io.notice {
        let _ = writeln!(s, "notice      {n}");
    }
    let snap = &r.snapshot;
    let _ = writeln!(
        s,
        "snapshot    {}{}, {} attempt{}, {} lock retr{}",
        snap.protocol,
        snap.read_mark
            .map_or(String::new(), |i| format!(" (READ({i}))")),
        snap.attempts,
        if snap.attempts == 1 { "" } else { "s" },
        snap.lock_retries,
        if snap.lock_retries == 1 { "y" } else { "ies" }
    );
    let _ = writeln!(
        s,
        "reads       {} submitted in {} batches (io_uring_enter: {}); {} pages, {:.1} MiB; {} overflow, {} from the WAL, {} wasted",
        r.reads_submitted,
        r.submit_batches,
        r.io_uring_enters.map_or_else(
            || match io.backend.as_str() {
                "dma" => "not counted by glommio".to_string(),
                _ => "none".to_string(),
            },
            |n| n.to_string()
        ),
        r.pages_read,
        mib(r.bytes_read),
        r.overflow_pages_read,
        r.wal_pages_read,
        r.wasted_pages
    );
    match (&r.device, &r.device_note) {
        (Some(d), _) => {
            let _ = writeln!(
                s,
                "device      {}: {} requests, {:.1}% merged, mean request {:.1} KiB, {:.1} MiB read; \
                 busy {:.0}%, {:.1} reads in flight on average, {:.2} ms each",
                d.disk,
                d.requests,
                d.merged_pct,
                d.mean_request_kib,
                mib(d.bytes),
                d.busy_pct,
                d.mean_reads_in_flight,
                d.mean_read_ms
            );
        }
        (None, note) => {
            let _ = writeln!(
                s,
                "device      unknown: {}",
                note.as_deref().unwrap_or("no counters")
            );
        }
    }
    let _ = writeln!(
        s,
        "cpu         user {:.3} s, system {:.3} s; peak memory {:.1} MiB{}",
        r.cpu_time.user_s,
        r.cpu_time.sys_s,
        r.peak_rss_mib,
        if io.backend == "mmap" {
            " (resident set: includes the mapped file's cached pages)"
        } else {
            ""
        }
    );
    let c = &r.counters;
    let _ = match (&c.unavailable, c.cycles, c.instructions, c.llc_misses) {
        (None, Some(cy), Some(ins), Some(llc)) => writeln!(
            s,
            "counters    {:.3} B cycles, {:.3} B instructions ({:.2} per cycle), {:.3} M LLC misses",
            cy as f64 / 1e9,
            ins as f64 / 1e9,
            ins as f64 / (cy as f64).max(1.0),
            llc as f64 / 1e6
        ),
        (why, ..) => writeln!(
            s,
            "counters    unavailable: {}",
            why.as_deref().unwrap_or("unknown")
        ),
    };
    if let Some(first) = r.first_page_s {
        let _ = writeln!(
            s,
            "start-up    first page decoded {}{:.3} s after the executors started",
            r.first_page_since_process_start_s
                .map_or(String::new(), |p| format!(
                    "{p:.3} s after the process started, "
                )),
            first
        );
    }
    for e in &r.executors {
        let _ = writeln!(
            s,
            "  CPU {:<3} {}{} pages, {} rows, {} matched, {} reads, {:.3} s wall, user {:.3} s, sys {:.3} s{}{}",
            e.cpu,
            if e.parent_pages > 0 {
                format!(
                    "{} leaf-parent pages read in {:.3} s, then ",
                    e.parent_pages, e.parents_s
                )
            } else {
                String::new()
            },
            e.pages,
            e.rows,
            e.rows_matched,
            e.reads_submitted,
            e.wall_s,
            e.user_s,
            e.sys_s,
            match (e.rows_per_s, e.gb_per_s) {
                (Some(r), Some(g)) => format!("; decoded {:.1} M rows/s, {g:.2} GB/s", r / 1e6),
                _ => String::new(),
            },
            match (e.sqpoll_cpu, e.sqpoll_cpu_s) {
                (Some(c), Some(t)) => format!(", SQ poll thread on CPU {c}: {t:.3} s"),
                (Some(c), None) => format!(", SQ poll thread on CPU {c}"),
                _ => String::new(),
            }
        );
    }
    s
}
