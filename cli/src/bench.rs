//! `corescan bench scale|sweep|seed-report|compare|live|tpch`: the experiments of
//! [`bench::experiments`], each one command writing its results into one directory
//! (`--out`, by default a dated directory under `corescan-results/`).

use std::path::PathBuf;

use bench::experiments::compare::{run_compare, CompareOptions};
use bench::experiments::floor::{run_floor, FloorOptions};
use bench::experiments::scale::{run_scale, ScaleOptions, ScaleOutcome};
use bench::experiments::seed_report::{run_seed_report, SeedReportOptions};
use bench::experiments::{default_out_dir, CacheMode};
use clap::{Args, Subcommand};
use engine::q6::Q6Params;
use engine::IoChoice;
use partitioner::topology::IoMode;

use crate::args::{IoArg, SqpollArg};

/// Arguments of `corescan bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    experiment: Experiment,
}

#[derive(Debug, Subcommand)]
enum Experiment {
    /// Q6 under the cross product of core counts, readahead windows, coalescing limits,
    /// backends and SQPOLL modes, repeated in interleaved rounds; writes results.csv,
    /// runs.json, summary.md and SVG plots.
    Scale(ScaleArgs),
    /// A readahead x coalescing sweep at one core count (scale with other defaults).
    Sweep(SweepArgs),
    /// The seed's measurements again (readahead, SQPOLL, DMA vs pread), cold, beside the
    /// seed's figures; writes seed-report.md and seed-report.json.
    SeedReport(SeedReportArgs),
    /// The same Q6 in corescan, SQLite, the sqlite3 CLI, DuckDB and Turso (when installed),
    /// cold and warm; writes compare.md and compare.json.
    Compare(CompareArgs),
    /// The memory-bandwidth floor of a warm scan: the table's leaf pages read (every 8-byte
    /// word summed) by one pinned thread per executor through mmap, nothing decoded.
    Floor(FloorArgs),
    /// Consecutive Q6 scans while a writer process commits and checkpoints, in both journal
    /// modes and with every backend: answered, retried, refused, wrong, and the writer's
    /// commits and waits.
    Live(crate::live::LiveArgs),
    /// The 22 TPC-H queries through `corescan sql`, beside DuckDB on the same SQLite file and
    /// the sqlite3 shell (when installed), warm and cold; writes tpch.md, tpch.json and SVG
    /// plots.
    #[cfg(feature = "sql")]
    Tpch(crate::tpch_bench::TpchArgs),
    /// The 22 TPC-H queries through `sql` locally and through `sql --workers` over worker
    /// processes serving shards of the file (one worker, two workers of one core each): the
    /// cost of distribution per query and a model of N machines; writes distributed.md.
    #[cfg(feature = "distributed")]
    Distributed(crate::distributed_bench::DistributedArgs),
    /// One table over many files (TPC-H LINEITEM split into --files shards) against the same
    /// rows in one file, beside sqlite3 in a loop and attaching shards; writes files.md and
    /// files.json.
    Files(crate::files_bench::FilesArgs),
    /// The writer of `bench live` (commits until standard input closes).
    #[command(hide = true)]
    LiveWriter(crate::live::LiveWriterArgs),
}

/// Cold or warm runs.
#[derive(Debug, Clone, Copy, Args)]
struct CacheArgs {
    /// Empty the page cache before every run (drop_caches as root, else
    /// posix_fadvise(DONTNEED) on the file) [default].
    #[arg(long, conflicts_with = "warm")]
    cold: bool,
    /// Read the file once first and never drop it.
    #[arg(long)]
    warm: bool,
}

impl CacheArgs {
    fn mode(self) -> CacheMode {
        if self.warm {
            CacheMode::Warm
        } else {
            CacheMode::Cold
        }
    }
}

#[derive(Debug, Args)]
struct ScaleArgs {
    /// The database file.
    db: PathBuf,
    /// The table to scan (case-insensitive).
    #[arg(long, default_value = "lineitem")]
    table: String,
    /// Executor counts, e.g. "1,2,4" or "1-4" (more than the CPUs is allowed and labelled
    /// oversubscribed) [default: 1 to the number of CPUs].
    #[arg(long, value_name = "LIST", value_parser = parse_counts)]
    cores: Option<Counts>,
    /// Readahead windows in pages, e.g. "0,32,1024" [default: the engine's, 4 MiB of pages].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    readahead: Vec<u32>,
    /// Coalescing limits in KiB, e.g. "0,128" [default: 128].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    coalesce_kib: Vec<u32>,
    /// Backends, e.g. "dma,uring,pread" [default: dma].
    #[arg(long, value_name = "LIST", value_enum, value_delimiter = ',')]
    io: Vec<IoArg>,
    /// SQPOLL modes for --io uring, e.g. "off,on" [default: off]; invalid combinations are
    /// skipped with the reason.
    #[arg(long, value_name = "LIST", value_enum, value_delimiter = ',')]
    sqpoll: Vec<SqpollArg>,
    /// Rounds; each runs every configuration once, in the same order.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    #[command(flatten)]
    cache: CacheArgs,
    /// Output directory [default: corescan-results/scale-DATE].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct SweepArgs {
    /// The database file.
    db: PathBuf,
    /// The table to scan (case-insensitive).
    #[arg(long, default_value = "lineitem")]
    table: String,
    /// Executors [default: one per CPU].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    cores: Option<u32>,
    /// Readahead windows in pages.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "0,1,4,16,32,64,256,1024"
    )]
    readahead: Vec<u32>,
    /// Coalescing limits in KiB.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "0,128"
    )]
    coalesce_kib: Vec<u32>,
    /// Backends.
    #[arg(
        long,
        value_name = "LIST",
        value_enum,
        value_delimiter = ',',
        default_value = "dma"
    )]
    io: Vec<IoArg>,
    /// Rounds; each runs every configuration once, in the same order.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    #[command(flatten)]
    cache: CacheArgs,
    /// Output directory [default: corescan-results/sweep-DATE].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct SeedReportArgs {
    /// The database file.
    db: PathBuf,
    /// The table to scan (case-insensitive).
    #[arg(long, default_value = "lineitem")]
    table: String,
    /// Rounds; figures are medians.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Output directory [default: corescan-results/seed-report-DATE].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// The database file.
    db: PathBuf,
    /// The table to scan (case-insensitive).
    #[arg(long, default_value = "lineitem")]
    table: String,
    /// Rounds; each runs every engine cold, then every engine warm.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Output directory; copies of the table for DuckDB and Turso are cached beside it, in
    /// corescan-cache/ [default: corescan-results/compare-DATE].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct FloorArgs {
    /// The database file (read it once first: the floor is a warm one).
    db: PathBuf,
    /// The table to read (case-insensitive).
    #[arg(long, default_value = "lineitem")]
    table: String,
    /// Threads, one per range as executors have them [default: one per CPU].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    cores: Option<u32>,
    /// Rounds.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

fn io_choice(a: IoArg) -> IoChoice {
    IoChoice::from(IoMode::from(a))
}

/// A parsed list of executor counts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Counts(Vec<usize>);

/// Parses "1,2,4" or "1-4" (counts from 1 to 4096, in the order given, duplicates dropped).
fn parse_counts(s: &str) -> Result<Counts, String> {
    let number = |t: &str| match t.trim().parse::<usize>() {
        Ok(n) if (1..=4096).contains(&n) && !t.trim().starts_with('+') => Ok(n),
        _ => Err(format!("'{}' is not a core count from 1 to 4096", t.trim())),
    };
    let mut out = Vec::new();
    for part in s.split(',') {
        let values: Vec<usize> = match part.split_once('-') {
            // "-1", "2-": a sign or half a range, not a count.
            Some((a, b)) if a.trim().is_empty() || b.trim().is_empty() => {
                return Err(format!(
                    "'{}' is not a core count from 1 to 4096",
                    part.trim()
                ));
            }
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(format!("range '{}' runs backwards", part.trim()));
                }
                (a..=b).collect()
            }
            None => vec![number(part)?],
        };
        for v in values {
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
    Ok(Counts(out))
}

/// Runs `corescan bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.experiment {
        Experiment::Live(a) => crate::live::run(a)?,
        Experiment::Files(a) => crate::files_bench::run(a)?,
        #[cfg(feature = "sql")]
        Experiment::Tpch(a) => crate::tpch_bench::run(a)?,
        #[cfg(feature = "distributed")]
        Experiment::Distributed(a) => crate::distributed_bench::run(a)?,
        Experiment::LiveWriter(a) => crate::live::run_writer_process(a)?,
        Experiment::Scale(a) => {
            let opts = ScaleOptions {
                experiment: "scale",
                db: a.db,
                table: a.table,
                params: Q6Params::default(),
                cores: a.cores.map(|c| c.0).unwrap_or_default(),
                readahead: a.readahead,
                coalesce_kib: a.coalesce_kib,
                io: a.io.into_iter().map(io_choice).collect(),
                sqpoll: a.sqpoll.into_iter().map(Into::into).collect(),
                repeat: a.repeat as usize,
                cache: a.cache.mode(),
                out: a.out.unwrap_or_else(|| default_out_dir("scale")),
                progress: true,
            };
            print_scale(&run_scale(&opts)?, &opts);
        }
        Experiment::Sweep(a) => {
            let cpus = engine::available_cpus().len().max(1);
            let opts = ScaleOptions {
                experiment: "sweep",
                db: a.db,
                table: a.table,
                params: Q6Params::default(),
                cores: vec![a.cores.map_or(cpus, |c| c as usize)],
                readahead: a.readahead,
                coalesce_kib: a.coalesce_kib,
                io: a.io.into_iter().map(io_choice).collect(),
                sqpoll: Vec::new(),
                repeat: a.repeat as usize,
                cache: a.cache.mode(),
                out: a.out.unwrap_or_else(|| default_out_dir("sweep")),
                progress: true,
            };
            print_scale(&run_scale(&opts)?, &opts);
        }
        Experiment::SeedReport(a) => {
            let opts = SeedReportOptions {
                db: a.db,
                table: a.table,
                repeat: a.repeat as usize,
                out: a.out.unwrap_or_else(|| default_out_dir("seed-report")),
            };
            let report = run_seed_report(&opts)?;
            for run in report.runs.iter().filter(|r| r.repeat == 0) {
                println!(
                    "{:<16} {:>8.3} s wall, {:>9} reads, device: {}",
                    run.label,
                    run.wall_s,
                    run.reads_submitted,
                    run.device.as_ref().map_or_else(
                        || "unknown".to_string(),
                        |d| format!(
                            "{} requests, {:.1}% merged, {:.1} KiB mean",
                            d.requests, d.merged_pct, d.mean_request_kib
                        )
                    )
                );
            }
            for s in &report.skipped {
                eprintln!("skipped {}: {}", s.label, s.reason);
            }
            println!(
                "wrote {0}/seed-report.md and {0}/seed-report.json",
                opts.out.display()
            );
        }
        Experiment::Floor(a) => {
            let threads = a
                .cores
                .map_or_else(|| engine::available_cpus().len().max(1), |n| n as usize);
            let r = run_floor(&FloorOptions {
                db: a.db,
                table: a.table,
                threads,
                repeat: a.repeat as usize,
            })?;
            if a.json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!(
                    "{} {}: {} leaf pages ({:.0} MiB, {:.0}% resident) read by {} threads \
                     (CPUs {:?}) via {}: {:.4} s median ({:.4}-{:.4}), {:.2} GB/s",
                    r.db,
                    r.table,
                    r.pages,
                    r.bytes as f64 / (1 << 20) as f64,
                    r.resident_pct,
                    r.cpus.len(),
                    r.cpus,
                    r.method,
                    r.wall_s.median,
                    r.wall_s.min,
                    r.wall_s.max,
                    r.gb_per_s
                );
            }
        }
        Experiment::Compare(a) => {
            let opts = CompareOptions {
                db: a.db,
                table: a.table,
                repeat: a.repeat as usize,
                out: a.out.unwrap_or_else(|| default_out_dir("compare")),
                progress: true,
            };
            let report = run_compare(&opts)?;
            for e in report.engines.iter().filter(|e| e.skipped.is_some()) {
                eprintln!(
                    "skipped {}: {}",
                    e.engine.name(),
                    e.skipped.as_deref().unwrap_or("")
                );
            }
            for r in &report.results {
                println!(
                    "{:<24} {} {:>8.3} s median ({:.3}-{:.3}){}",
                    r.engine.name(),
                    r.mode.name(),
                    r.wall_s.median,
                    r.wall_s.min,
                    r.wall_s.max,
                    r.vs_corescan
                        .map_or(String::new(), |v| format!(", {v:.2} x corescan"))
                );
            }
            println!("answer {} (every engine agreed)", report.revenue);
            println!(
                "wrote {0}/compare.md and {0}/compare.json",
                opts.out.display()
            );
        }
    }
    Ok(())
}

fn print_scale(o: &ScaleOutcome, opts: &ScaleOptions) {
    for c in &o.configs {
        match (&c.skipped, c.wall_s) {
            (Some(reason), _) => eprintln!("skipped #{} {}: {reason}", c.index, c.config.label()),
            (None, Some(w)) => println!(
                "#{:<3} {:<60} {:>8.3} s median ({:.3}-{:.3}), {:.2} GB/s{}{}",
                c.index,
                c.config.label(),
                w.median,
                w.min,
                w.max,
                c.gb_per_s.unwrap_or(0.0),
                c.speedup
                    .map_or(String::new(), |s| format!(", speedup {s:.2}")),
                if c.oversubscribed {
                    ", OVERSUBSCRIBED"
                } else {
                    ""
                }
            ),
            (None, None) => {}
        }
    }
    println!(
        "answer {} in every run; wrote results.csv, runs.json, summary.md and 3 plots to {}",
        o.revenue,
        opts.out.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_counts() {
        assert_eq!(parse_counts("1,2,4"), Ok(Counts(vec![1, 2, 4])));
        assert_eq!(parse_counts("1-3,2,8"), Ok(Counts(vec![1, 2, 3, 8])));
        for bad in ["", "0", "3-1", "a", "1,,2", "5000", "-1", "2-"] {
            assert!(parse_counts(bad).is_err(), "{bad}");
        }
    }
}
