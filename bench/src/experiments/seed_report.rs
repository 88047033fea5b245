//! `corescan bench seed-report`: the seed's measurements (design.md, "The seed measurements")
//! taken again on this machine and printed beside the seed's figures.
//!
//! Every run is cold and uses one executor, so the comparisons are between I/O paths, not core
//! counts, and so a CPU stays idle for the SQ poll thread on a 2-CPU machine:
//!
//! | label | backend | window | reads | compares |
//! |---|---|---|---|---|
//! | `readahead-off` | dma | 0 | one per page | readahead table |
//! | `window-32` | dma | 32 pages | one per page | readahead table, dma vs pread |
//! | `uring-plain` | uring | 32 pages | one per page | SQPOLL table |
//! | `uring-sqpoll` | uring + SQPOLL | 32 pages | one per page | SQPOLL table |
//! | `pread-window-32` | pread | 32 pages | one per page | dma vs pread |
//! | `dma-defaults` | dma | default | coalesced | dma vs pread |
//! | `pread-defaults` | pread | default | coalesced | dma vs pread |
//!
//! Outputs: `seed-report.md` and `seed-report.json`
//! (`runs: [{label, readahead, io, device, reads_submitted, wall_s, user_s, sys_s, ...}]`).

use std::fmt::Write as _;
use std::path::PathBuf;

use engine::q6::Q6Params;
use engine::{IoBackend, IoChoice, ScanSettings, SqpollMode};
use serde::Serialize;

use super::machine::Machine;
use super::markdown::{num, thousands, Table};
use super::runner::{RunOutcome, RunRecord, Runner, ScanConfig};
use super::{
    cache_words, create_out_dir, write_file, write_json, CacheMode, CachePrep, ExperimentError,
    Result, Spread,
};

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedReportOptions {
    /// The database file.
    pub db: PathBuf,
    /// The table.
    pub table: String,
    /// Rounds (each runs every configuration once); figures are medians.
    pub repeat: usize,
    /// The output directory.
    pub out: PathBuf,
}

/// One run as `seed-report.json` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct SeedRun {
    /// Which configuration (see the module docs).
    pub label: &'static str,
    /// The round, 0-based.
    pub repeat: usize,
    /// Executors.
    pub cores: usize,
    /// Readahead window, pages.
    pub readahead: u32,
    /// Coalescing limit, KiB.
    pub coalesce_kib: u32,
    /// The I/O path that ran (the engine's `io` report).
    pub io: engine::IoReport,
    /// Block-device counters over the run, or null.
    pub device: Option<engine::DeviceReport>,
    /// Why `device` is null.
    pub device_note: Option<String>,
    /// Reads handed to the kernel.
    pub reads_submitted: u64,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// User CPU time of the process, seconds.
    pub user_s: f64,
    /// System CPU time of the process, seconds.
    pub sys_s: f64,
    /// CPU time of the SQ poll thread(s), seconds, when SQPOLL ran.
    pub sqpoll_cpu_s: Option<f64>,
    /// Hardware counters of the executors' threads (null with the reason where unavailable).
    pub counters: engine::HwCounters,
    /// How the page cache was emptied before the run.
    pub cache: CachePrep,
    /// More executors than CPUs.
    pub oversubscribed: bool,
}

/// A configuration that could not run, with the reason.
#[derive(Debug, Clone, Serialize)]
pub struct SeedSkip {
    /// Which configuration.
    pub label: &'static str,
    /// Why.
    pub reason: String,
}

/// Everything the seed report measured.
#[derive(Debug, Clone, Serialize)]
pub struct SeedReport {
    /// The database file.
    pub db: String,
    /// The machine.
    pub machine: Machine,
    /// The exact revenue every run returned.
    pub revenue: String,
    /// Every run.
    pub runs: Vec<SeedRun>,
    /// Configurations that could not run.
    pub skipped: Vec<SeedSkip>,
}

/// The configurations, labelled, in run order.
pub fn seed_configs(page_size: u32) -> Vec<(&'static str, ScanConfig)> {
    let one_per_page = |io: IoBackend, readahead: u32, sqpoll: SqpollMode| ScanConfig {
        cores: 1,
        readahead,
        coalesce_kib: 0,
        io: IoChoice::Fixed(io),
        sqpoll,
    };
    let d = ScanSettings::defaults(page_size);
    let defaults = |io: IoBackend| ScanConfig {
        cores: 1,
        readahead: d.readahead,
        coalesce_kib: d.coalesce_kib,
        io: IoChoice::Fixed(io),
        sqpoll: SqpollMode::Off,
    };
    vec![
        (
            "readahead-off",
            one_per_page(IoBackend::Dma, 0, SqpollMode::Off),
        ),
        (
            "window-32",
            one_per_page(IoBackend::Dma, 32, SqpollMode::Off),
        ),
        (
            "uring-plain",
            one_per_page(IoBackend::Uring, 32, SqpollMode::Off),
        ),
        (
            "uring-sqpoll",
            one_per_page(IoBackend::Uring, 32, SqpollMode::On),
        ),
        (
            "pread-window-32",
            one_per_page(IoBackend::Pread, 32, SqpollMode::Off),
        ),
        ("dma-defaults", defaults(IoBackend::Dma)),
        ("pread-defaults", defaults(IoBackend::Pread)),
    ]
}

/// Runs the seed's experiments cold and writes `seed-report.md` and `seed-report.json`.
pub fn run_seed_report(opts: &SeedReportOptions) -> Result<SeedReport> {
    if opts.repeat == 0 {
        return Err(ExperimentError::Invalid(
            "--repeat must be at least 1".into(),
        ));
    }
    let machine = Machine::probe(&opts.db);
    let runner = Runner::new(&opts.db, &opts.table, Q6Params::default(), CacheMode::Cold)?;
    let configs = seed_configs(runner.plan.header.page_size);
    let mut skipped: Vec<Option<String>> = configs
        .iter()
        .map(|(_, c)| c.skip_reason(runner.available_cpus))
        .collect();
    let mut runs = Vec::new();
    for round in 0..opts.repeat {
        for (i, (label, config)) in configs.iter().enumerate() {
            if skipped[i].is_some() {
                continue;
            }
            match runner.run(config, i, round)? {
                RunOutcome::Ran(r) => runs.push(seed_run(label, &r)),
                RunOutcome::CouldNotRun(reason) => skipped[i] = Some(reason),
            }
        }
    }
    let report = SeedReport {
        db: opts.db.display().to_string(),
        machine,
        revenue: runner.expected.revenue(),
        runs,
        skipped: configs
            .iter()
            .zip(&skipped)
            .filter_map(|((label, _), s)| s.clone().map(|reason| SeedSkip { label, reason }))
            .collect(),
    };
    create_out_dir(&opts.out)?;
    write_json(&opts.out.join("seed-report.json"), &report)?;
    write_file(
        &opts.out.join("seed-report.md"),
        markdown(&report, opts.repeat),
    )?;
    Ok(report)
}

fn seed_run(label: &'static str, r: &RunRecord) -> SeedRun {
    let rep = &r.report;
    SeedRun {
        label,
        repeat: r.repeat,
        cores: r.config.cores,
        readahead: r.config.readahead,
        coalesce_kib: r.config.coalesce_kib,
        io: rep.io.clone(),
        device: rep.device.clone(),
        device_note: rep.device_note.clone(),
        reads_submitted: rep.reads_submitted,
        wall_s: rep.wall_s,
        user_s: rep.cpu_time.user_s,
        sys_s: rep.cpu_time.sys_s,
        sqpoll_cpu_s: rep.io.sqpoll_cpu_s,
        counters: rep.counters.clone(),
        cache: r.cache,
        oversubscribed: r.oversubscribed,
    }
}

impl SeedReport {
    /// The median of `f` over the runs labelled `label`.
    pub fn median(&self, label: &str, f: impl Fn(&SeedRun) -> Option<f64>) -> Option<f64> {
        let v: Vec<f64> = self
            .runs
            .iter()
            .filter(|r| r.label == label)
            .filter_map(f)
            .collect();
        Spread::of(&v).map(|s| s.median)
    }

    /// Why `label` did not run, if it did not.
    pub fn skip_reason(&self, label: &str) -> Option<&str> {
        self.skipped
            .iter()
            .find(|s| s.label == label)
            .map(|s| s.reason.as_str())
    }
}

fn markdown(r: &SeedReport, repeat: usize) -> String {
    let mut s = String::new();
    let preps: Vec<CachePrep> = r.runs.iter().map(|x| x.cache).collect();
    let _ = writeln!(
        s,
        "# The seed's measurements, again\n\nTPC-H Q6 over `{}` (revenue {} in every run), one \
         executor, {} round(s), figures are medians. Cache: {}.\n\n## Machine\n\n{}",
        r.db,
        r.revenue,
        repeat,
        cache_words(CacheMode::Cold, &preps),
        r.machine.markdown()
    );
    let m = |label: &str, f: &dyn Fn(&SeedRun) -> Option<f64>| r.median(label, f);
    let ours =
        |label: &str, f: &dyn Fn(&SeedRun) -> Option<f64>, d: usize| match r.skip_reason(label) {
            Some(_) => "did not run".to_string(),
            None => num(m(label, f), d),
        };
    let count = |label: &str, f: &dyn Fn(&SeedRun) -> Option<f64>| {
        m(label, f).map_or("–".into(), |x| thousands(x.round() as u64))
    };
    let device = |f: fn(&engine::DeviceReport) -> f64| move |x: &SeedRun| x.device.as_ref().map(f);

    let _ = writeln!(
        s,
        "## Readahead: one read per page, DMA path (O_DIRECT)\n\nWithout a window one read is in \
         flight at a time and the block layer has nothing to merge; with 32 reads in flight it \
         merges neighbours into larger device requests.\n"
    );
    let mut t = Table::new(&[
        "figure",
        "seed: readahead off",
        "ours: readahead off",
        "seed: 32-page window",
        "ours: 32-page window",
    ]);
    t.row(vec![
        "reads submitted".into(),
        "195,207".into(),
        count("readahead-off", &|x| Some(x.reads_submitted as f64)),
        "218,212".into(),
        count("window-32", &|x| Some(x.reads_submitted as f64)),
    ]);
    t.row(vec![
        "requests reaching the device".into(),
        "~196,000".into(),
        count("readahead-off", &device(|d| d.requests as f64)),
        "~16,300".into(),
        count("window-32", &device(|d| d.requests as f64)),
    ]);
    t.row(vec![
        "mean request size (KiB)".into(),
        "4.37".into(),
        ours("readahead-off", &device(|d| d.mean_request_kib), 2),
        "56.53".into(),
        ours("window-32", &device(|d| d.mean_request_kib), 2),
    ]);
    t.row(vec![
        "requests merged (%)".into(),
        "~0".into(),
        ours("readahead-off", &device(|d| d.merged_pct), 1),
        "91-93".into(),
        ours("window-32", &device(|d| d.merged_pct), 1),
    ]);
    t.row(vec![
        "wall (s)".into(),
        "".into(),
        ours("readahead-off", &|x| Some(x.wall_s), 3),
        "".into(),
        ours("window-32", &|x| Some(x.wall_s), 3),
    ]);
    s.push_str(&t.render());
    if let Some(note) = r.runs.iter().find_map(|x| x.device_note.clone()) {
        let _ = writeln!(s, "\nDevice counters unavailable: {note}");
    }
    let _ = writeln!(s, "\nOne read is submitted per leaf or overflow page here; the seed's counts are for its SF 1 file, ours for this file. Device figures are device-wide: other reads on the disk during a run are counted too.\n");

    let _ = writeln!(
        s,
        "## SQPOLL vs a plain ring: `--io uring`, 32-page window, one read per page\n\nA kernel \
         thread polls the submission queue on an idle CPU, saving `io_uring_enter` calls but \
         spinning while it waits; its CPU time shows up as system time.\n"
    );
    let mut t = Table::new(&[
        "figure",
        "seed: SQPOLL",
        "ours: SQPOLL",
        "seed: plain ring",
        "ours: plain ring",
    ]);
    let sq = "uring-sqpoll";
    t.row(vec![
        "wall (s)".into(),
        "8.22".into(),
        ours(sq, &|x| Some(x.wall_s), 3),
        "8.62".into(),
        ours("uring-plain", &|x| Some(x.wall_s), 3),
    ]);
    t.row(vec![
        "user (s)".into(),
        "".into(),
        ours(sq, &|x| Some(x.user_s), 3),
        "".into(),
        ours("uring-plain", &|x| Some(x.user_s), 3),
    ]);
    t.row(vec![
        "system (s)".into(),
        "8.46".into(),
        ours(sq, &|x| Some(x.sys_s), 3),
        "1.27".into(),
        ours("uring-plain", &|x| Some(x.sys_s), 3),
    ]);
    t.row(vec![
        "poll thread CPU (s)".into(),
        "".into(),
        ours(sq, &|x| x.sqpoll_cpu_s, 3),
        "–".into(),
        "–".into(),
    ]);
    s.push_str(&t.render());
    match r.skip_reason(sq) {
        Some(reason) => {
            let _ = writeln!(s, "\nSQPOLL could not run here: {reason}\n");
        }
        None => {
            let _ = writeln!(
                s,
                "\nSQPOLL ran with its poll thread on CPU {}.\n",
                r.runs
                    .iter()
                    .find(|x| x.label == sq)
                    .and_then(|x| x.io.sqpoll_cpu)
                    .map_or("?".into(), |c| c.to_string())
            );
        }
    }

    let _ = writeln!(
        s,
        "## DMA (O_DIRECT) vs buffered pread\n\nThe seed's O_DIRECT path lost to pread because \
         the kernel's readahead fed pread while O_DIRECT read one small page at a time; with a \
         window and coalesced reads (corescan's defaults) the direct path should win.\n"
    );
    let mut t = Table::new(&[
        "configuration",
        "wall (s)",
        "user (s)",
        "system (s)",
        "reads submitted",
    ]);
    t.row(vec![
        "seed: io_uring + O_DIRECT".into(),
        "8.55".into(),
        "".into(),
        "".into(),
        "".into(),
    ]);
    t.row(vec![
        "seed: pread".into(),
        "3.02".into(),
        "".into(),
        "".into(),
        "".into(),
    ]);
    for (label, what) in [
        ("window-32", "ours: dma, 32-page window, one read per page"),
        (
            "pread-window-32",
            "ours: pread, 32-page window, one read per page",
        ),
        ("dma-defaults", "ours: dma, corescan defaults"),
        ("pread-defaults", "ours: pread, corescan defaults"),
    ] {
        let detail = r
            .runs
            .iter()
            .find(|x| x.label == label)
            .map_or(String::new(), |x| {
                format!(
                    " (window {}, reads up to {} pages)",
                    x.readahead, x.io.max_read_pages
                )
            });
        t.row(vec![
            format!("{what}{detail}"),
            ours(label, &|x| Some(x.wall_s), 3),
            ours(label, &|x| Some(x.user_s), 3),
            ours(label, &|x| Some(x.sys_s), 3),
            count(label, &|x| Some(x.reads_submitted as f64)),
        ]);
    }
    s.push_str(&t.render());
    let _ = writeln!(
        s,
        "\n## Hardware counters\n\nThe seed explained O_DIRECT's cost by these counters (data \
         read by DMA never passes through the CPU caches on its way in, so the decoder misses \
         where pread's copy had warmed them). Ours count the executors' threads only, from \
         their start to their last page.\n"
    );
    let billions = |v: Option<f64>| v.map_or("–".into(), |x| format!("{:.3} B", x / 1e9));
    let millions = |v: Option<f64>| v.map_or("–".into(), |x| format!("{:.3} M", x / 1e6));
    let mut t = Table::new(&["configuration", "cycles", "instructions", "LLC misses"]);
    t.row(vec![
        "seed: io_uring, plain ring".into(),
        "5.374 B".into(),
        "21.497 B".into(),
        "10.666 M".into(),
    ]);
    t.row(vec![
        "seed: syscall (pread)".into(),
        "4.734 B".into(),
        "21.297 B".into(),
        "5.889 M".into(),
    ]);
    let mut why = None;
    for (label, what) in [
        ("uring-plain", "ours: uring, plain ring (O_DIRECT)"),
        ("pread-window-32", "ours: pread, 32-page window (buffered)"),
        ("dma-defaults", "ours: dma, corescan defaults (O_DIRECT)"),
        (
            "pread-defaults",
            "ours: pread, corescan defaults (buffered)",
        ),
    ] {
        let c = |f: fn(&engine::HwCounters) -> Option<u64>| {
            m(label, &|x: &SeedRun| f(&x.counters).map(|v| v as f64))
        };
        if why.is_none() {
            why = r
                .runs
                .iter()
                .find(|x| x.label == label)
                .and_then(|x| x.counters.unavailable.clone());
        }
        t.row(vec![
            what.into(),
            billions(c(|h| h.cycles)),
            billions(c(|h| h.instructions)),
            millions(c(|h| h.llc_misses)),
        ]);
    }
    s.push_str(&t.render());
    if let Some(why) = why {
        let _ = writeln!(s, "\nNo counters on this machine: {why}.");
    }
    let _ = writeln!(
        s,
        "\nSeed figures: design.md, \"The seed measurements\" (TPC-H SF 1 SQLite file). Times \
         here come from this machine and this file; compare the shape (which path wins, by \
         roughly how much), not the digits, unless the file and machine match. Raw runs: \
         `seed-report.json`."
    );
    if r.runs.iter().any(|x| x.oversubscribed) {
        let _ = writeln!(
            s,
            "\nSome runs were OVERSUBSCRIBED (more executors than CPUs)."
        );
    }
    s
}
