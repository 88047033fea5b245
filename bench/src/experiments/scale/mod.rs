//! `corescan bench scale` and `bench sweep`: Q6 under the cross product of core counts,
//! readahead windows, coalescing limits, backends and SQPOLL modes, repeated in interleaved
//! rounds.
//!
//! [`run_scale`] runs the experiment and writes, into [`ScaleOptions::out`]:
//!
//! - `results.csv`: one row per configuration ([`CSV_HEADER`]), skipped ones included with
//!   their reason;
//! - `runs.json`: every run's configuration, round and full [`engine::q6::Q6Report`];
//! - `summary.md`: the machine, the tables, the skipped configurations (`scale/markdown.rs`,
//!   built with [`super::markdown`]);
//! - `throughput-vs-cores.svg`, `throughput-vs-readahead.svg` and
//!   `request-size-vs-readahead.svg` (`scale/charts.rs`, drawn with [`super::plots`]).
//!
//! Speedup and parallel efficiency compare a configuration with the 1-core run of the same
//! other settings (median against median); they are empty when `--cores` has no 1.

mod charts;
mod markdown;
mod outcome;

pub use outcome::{ConfigSummary, ScaleOutcome};

use std::path::{Path, PathBuf};

use engine::q6::Q6Params;
use engine::{IoChoice, SqpollMode};

use super::machine::Machine;
use super::runner::{RunOutcome, RunRecord, Runner, ScanConfig};
use super::{
    create_out_dir, io_name, progress_bar, sqpoll_name, write_json, CacheMode, ExperimentError,
    Result, Spread,
};

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleOptions {
    /// `scale` or `sweep`: names the experiment in its files.
    pub experiment: &'static str,
    /// The database file.
    pub db: PathBuf,
    /// The table (case-insensitive).
    pub table: String,
    /// Q6's parameters.
    pub params: Q6Params,
    /// Executor counts (empty: 1 to the number of CPUs).
    pub cores: Vec<usize>,
    /// Readahead windows, in pages (empty: the engine's default).
    pub readahead: Vec<u32>,
    /// Coalescing limits, in KiB (empty: the engine's default).
    pub coalesce_kib: Vec<u32>,
    /// Backends (empty: `dma`).
    pub io: Vec<IoChoice>,
    /// SQPOLL modes (empty: off).
    pub sqpoll: Vec<SqpollMode>,
    /// Rounds: each runs every configuration once.
    pub repeat: usize,
    /// Cold or warm runs.
    pub cache: CacheMode,
    /// The output directory.
    pub out: PathBuf,
    /// Show a progress bar on stderr (hidden anyway when stderr is not a terminal).
    pub progress: bool,
}

impl ScaleOptions {
    /// The configurations, in run order: backend, SQPOLL, coalescing, readahead, then cores
    /// vary slowest to fastest. Empty lists take defaults: cores 1 to `available` CPUs, the
    /// engine's default window and coalescing for `page_size`, `dma`, SQPOLL off.
    pub fn configs(&self, page_size: u32, available: usize) -> Vec<ScanConfig> {
        let d = engine::ScanSettings::defaults(page_size);
        let or = |v: &Vec<u32>, x: u32| if v.is_empty() { vec![x] } else { v.clone() };
        let cores: Vec<usize> = if self.cores.is_empty() {
            (1..=available.max(1)).collect()
        } else {
            self.cores.clone()
        };
        let io = if self.io.is_empty() {
            vec![IoChoice::Fixed(engine::IoBackend::Dma)]
        } else {
            self.io.clone()
        };
        let sqpoll = if self.sqpoll.is_empty() {
            vec![SqpollMode::Off]
        } else {
            self.sqpoll.clone()
        };
        let mut out = Vec::new();
        for &io in &io {
            for &sqpoll in &sqpoll {
                for coalesce_kib in or(&self.coalesce_kib, d.coalesce_kib) {
                    for readahead in or(&self.readahead, d.readahead) {
                        for &cores in &cores {
                            let c = ScanConfig {
                                cores,
                                readahead,
                                coalesce_kib,
                                io,
                                sqpoll,
                            };
                            if !out.contains(&c) {
                                out.push(c);
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// The columns of `results.csv`.
pub const CSV_HEADER: [&str; 27] = [
    "config",
    "io",
    "sqpoll",
    "cores",
    "readahead",
    "coalesce_kib",
    "runs",
    "wall_median_s",
    "wall_min_s",
    "wall_max_s",
    "gb_per_s",
    "rows_per_s",
    "speedup",
    "efficiency",
    "device_merged_pct",
    "device_mean_request_kib",
    "device_reads_in_flight",
    "user_s",
    "sys_s",
    "sqpoll_cpu_s",
    "backend_ran",
    "o_direct",
    "sqpoll_ran",
    "oversubscribed",
    "cache",
    "cache_prep",
    "skipped",
];

/// Runs the experiment and writes its files into `opts.out`; returns what it measured.
pub fn run_scale(opts: &ScaleOptions) -> Result<ScaleOutcome> {
    if opts.repeat == 0 {
        return Err(ExperimentError::Invalid(
            "--repeat must be at least 1".into(),
        ));
    }
    let machine = Machine::probe(&opts.db);
    let runner = Runner::new(&opts.db, &opts.table, opts.params, opts.cache)?;
    let configs = opts.configs(runner.plan.header.page_size, runner.available_cpus);
    create_out_dir(&opts.out)?;

    let mut skipped: Vec<Option<String>> = configs
        .iter()
        .map(|c| c.skip_reason(runner.available_cpus))
        .collect();
    let bar = progress_bar(opts.progress, (opts.repeat * configs.len()) as u64);
    let mut runs = Vec::new();
    for round in 0..opts.repeat {
        for (i, config) in configs.iter().enumerate() {
            bar.inc(1);
            if skipped[i].is_some() {
                continue;
            }
            bar.set_message(format!(
                "round {}/{}: {}",
                round + 1,
                opts.repeat,
                config.label()
            ));
            match runner.run(config, i, round)? {
                RunOutcome::Ran(record) => runs.push(*record),
                // A configuration that ran before and now cannot is not an invalid
                // combination: something changed under the experiment.
                RunOutcome::CouldNotRun(reason) if round > 0 => {
                    return Err(ExperimentError::Invalid(format!(
                        "{} ran in round 1 but failed in round {}: {reason}",
                        config.label(),
                        round + 1
                    )))
                }
                RunOutcome::CouldNotRun(reason) => skipped[i] = Some(reason),
            }
        }
    }
    bar.finish_and_clear();
    if runs.is_empty() {
        return Err(ExperimentError::Invalid(format!(
            "no configuration could run: {}",
            skipped
                .iter()
                .flatten()
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }

    let summaries = summarize(&configs, &skipped, &runs, runner.available_cpus);
    let outcome = ScaleOutcome {
        experiment: opts.experiment,
        db: opts.db.display().to_string(),
        table: runner.plan.table.name.clone(),
        file_bytes: runner.plan.header.file_size,
        revenue: runner.expected.revenue(),
        rows_matched: runner.expected.rows_matched,
        rows_scanned: runner.expected.rows_scanned,
        cache: opts.cache,
        repeat: opts.repeat,
        machine,
        configs: summaries,
        runs,
    };
    write_outputs(&outcome, &opts.out)?;
    Ok(outcome)
}

/// Aggregates the runs of each configuration and relates each to its 1-core counterpart.
pub fn summarize(
    configs: &[ScanConfig],
    skipped: &[Option<String>],
    runs: &[RunRecord],
    available_cpus: usize,
) -> Vec<ConfigSummary> {
    let mut out: Vec<ConfigSummary> = configs
        .iter()
        .enumerate()
        .map(|(i, c)| summarize_one(i, c, skipped[i].clone(), runs, available_cpus))
        .collect();
    let medians: Vec<Option<f64>> = out.iter().map(|s| s.wall_s.map(|w| w.median)).collect();
    for s in &mut out {
        let base = configs.iter().position(|b| {
            b.cores == 1
                && (b.io, b.sqpoll, b.readahead, b.coalesce_kib)
                    == (
                        s.config.io,
                        s.config.sqpoll,
                        s.config.readahead,
                        s.config.coalesce_kib,
                    )
        });
        let speedup = match (base, medians[s.index]) {
            // The 1-core configuration is its own baseline: exactly 1.
            (Some(b), Some(_)) if b == s.index => Some(1.0),
            (Some(b), Some(m)) => medians[b].map(|base| base / m),
            _ => None,
        };
        s.speedup = speedup;
        s.efficiency = speedup.map(|x| x / s.config.cores as f64);
    }
    out
}

fn summarize_one(
    index: usize,
    config: &ScanConfig,
    skipped: Option<String>,
    runs: &[RunRecord],
    available_cpus: usize,
) -> ConfigSummary {
    let mine: Vec<&RunRecord> = runs.iter().filter(|r| r.config_index == index).collect();
    let collect = |f: &dyn Fn(&RunRecord) -> Option<f64>| -> Vec<f64> {
        mine.iter().filter_map(|r| f(r)).collect()
    };
    let median = |v: Vec<f64>| Spread::of(&v).map(|s| s.median);
    // Median of a per-request device figure, over the runs whose device saw requests.
    let busy_device = |f: &dyn Fn(&engine::DeviceReport) -> f64| {
        median(collect(&|r| {
            r.report.device.as_ref().filter(|d| d.requests > 0).map(f)
        }))
    };
    let wall_s = Spread::of(&collect(&|r| Some(r.report.wall_s)));
    let first = mine.first().map(|r| &r.report);
    let per_second = |amount: Option<u64>| match (amount, wall_s) {
        (Some(a), Some(w)) if w.median > 0.0 => Some(a as f64 / w.median),
        _ => None,
    };
    let mut backends: Vec<String> = Vec::new();
    let mut notices: Vec<String> = Vec::new();
    let mut preps: Vec<&str> = Vec::new();
    for r in &mine {
        if !preps.contains(&r.cache.name()) {
            preps.push(r.cache.name());
        }
        if !backends.contains(&r.report.io.backend) {
            backends.push(r.report.io.backend.clone());
        }
        if let Some(n) = &r.report.io.notice {
            // auto's notice carries a percentage that varies per run; keep the first of each kind.
            let kind = n.split(':').next().unwrap_or(n);
            if !notices.iter().any(|m| m.split(':').next() == Some(kind)) {
                notices.push(n.clone());
            }
        }
    }
    ConfigSummary {
        index,
        config: *config,
        skipped,
        runs: mine.len(),
        wall_s,
        gb_per_s: per_second(first.map(|r| r.bytes_read)).map(|b| b / 1e9),
        rows_per_s: per_second(first.map(|r| r.rows_scanned)),
        speedup: None,
        efficiency: None,
        device_merged_pct: median(collect(&|r| r.report.device.as_ref().map(|d| d.merged_pct))),
        device_mean_request_kib: busy_device(&|d| d.mean_request_kib),
        device_reads_in_flight: busy_device(&|d| d.mean_reads_in_flight),
        user_s: median(collect(&|r| Some(r.report.cpu_time.user_s))),
        sys_s: median(collect(&|r| Some(r.report.cpu_time.sys_s))),
        sqpoll_cpu_s: median(collect(&|r| r.report.io.sqpoll_cpu_s)),
        backend_ran: backends.join("+"),
        o_direct: first.map(|_| mine.iter().all(|r| r.report.io.o_direct)),
        sqpoll_ran: first.map(|_| mine.iter().all(|r| r.report.io.sqpoll)),
        oversubscribed: config.oversubscribed(available_cpus)
            || mine.iter().any(|r| r.oversubscribed),
        notices,
        cache_prep: preps.join("+"),
    }
}

fn write_outputs(outcome: &ScaleOutcome, dir: &Path) -> Result<()> {
    write_csv(&outcome.configs, outcome.cache, &dir.join("results.csv"))?;
    write_json(&dir.join("runs.json"), outcome)?;
    super::write_file(&dir.join("summary.md"), markdown::scale_markdown(outcome))?;
    for (name, chart) in charts::scale_charts(outcome) {
        chart.draw_svg(&dir.join(name))?;
    }
    Ok(())
}

/// Writes `results.csv`: [`CSV_HEADER`], then one row per configuration.
pub fn write_csv(configs: &[ConfigSummary], cache: CacheMode, path: &Path) -> Result<()> {
    let fail = |e: csv::Error| ExperimentError::output(path, format!("write CSV: {e}"));
    let mut w = csv::Writer::from_path(path).map_err(fail)?;
    w.write_record(CSV_HEADER).map_err(fail)?;
    let num =
        |x: Option<f64>, decimals: usize| x.map_or_else(String::new, |v| format!("{v:.decimals$}"));
    let flag = |b: Option<bool>| b.map_or_else(String::new, |b| b.to_string());
    for s in configs {
        let c = &s.config;
        w.write_record([
            s.index.to_string(),
            io_name(c.io).to_string(),
            sqpoll_name(c.sqpoll).to_string(),
            c.cores.to_string(),
            c.readahead.to_string(),
            c.coalesce_kib.to_string(),
            s.runs.to_string(),
            num(s.wall_s.map(|w| w.median), 6),
            num(s.wall_s.map(|w| w.min), 6),
            num(s.wall_s.map(|w| w.max), 6),
            num(s.gb_per_s, 4),
            num(s.rows_per_s, 0),
            num(s.speedup, 4),
            num(s.efficiency, 4),
            num(s.device_merged_pct, 2),
            num(s.device_mean_request_kib, 2),
            num(s.device_reads_in_flight, 2),
            num(s.user_s, 4),
            num(s.sys_s, 4),
            num(s.sqpoll_cpu_s, 4),
            s.backend_ran.clone(),
            flag(s.o_direct),
            flag(s.sqpoll_ran),
            s.oversubscribed.to_string(),
            cache.name().to_string(),
            s.cache_prep.clone(),
            s.skipped.clone().unwrap_or_default(),
        ])
        .map_err(fail)?;
    }
    w.flush().map_err(|e| ExperimentError::io(path, "write", e))
}
