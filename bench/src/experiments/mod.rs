//! # Experiments: the measurements behind `corescan bench`
//!
//! Each experiment is one function that runs Q6 many times, checks every answer, and writes its
//! raw runs, a summary and plots into one output directory:
//!
//! - [`scale`] ([`scale::run_scale`], `corescan bench scale` and `bench sweep`): the cross
//!   product of core counts, readahead windows, coalescing limits, backends and SQPOLL modes,
//!   repeated; `results.csv`, `runs.json`, `summary.md` and SVG plots ([`plots`]);
//! - [`seed_report`] (`corescan bench seed-report`): the seed's tables (readahead off vs a
//!   32-page window, SQPOLL vs a plain ring, DMA vs `pread`) measured again, beside the seed's
//!   figures;
//! - [`compare`] (`corescan bench compare`): the same Q6 in corescan, SQLite (in-process and the
//!   `sqlite3` CLI), DuckDB and Turso ([`peers`]), cold and warm;
//! - [`live`] (`corescan bench live`): consecutive Q6 scans while a writer process commits
//!   and checkpoints, in both journal modes and with every backend;
//! - [`floor`] (`corescan bench floor`): the memory-bandwidth floor of a warm scan, the
//!   table's leaf pages read by pinned threads through `mmap` without decoding them.
//!
//! Each experiment renders its own report: its markdown with the [`markdown`] building blocks
//! and its charts with [`plots`], neither of which knows any experiment. Dependencies run one
//! way: this module (errors, cache preparation, spreads, output files) and [`markdown`],
//! [`plots`], [`machine`] at the bottom; [`runner`] and [`peers`] above them; the experiments
//! ([`scale`], [`seed_report`], [`compare`], [`floor`]) on top, none importing another.
//!
//! The pieces they share live here and in [`runner`] (one checked Q6 run of a [`runner::ScanConfig`])
//! and [`machine`] (what the results were measured on).
//!
//! ## Policy
//!
//! - **Interleaved repeats.** Round `r` runs every configuration once, always in the same
//!   order, so slow drift (other work on the machine, the disk warming up, thermal limits) hits
//!   every configuration alike instead of biasing whichever ran last. Results are medians, with
//!   the minimum and maximum beside them ([`Spread`]): on a shared 2-CPU virtual machine the
//!   spread is the honest error bar.
//! - **Cold means cold.** Before each cold run the page cache is emptied ([`drop_page_cache`]):
//!   as root, `sync` then `echo 3 > /proc/sys/vm/drop_caches` (every file, so a peer engine's
//!   own copy too); otherwise `posix_fadvise(POSIX_FADV_DONTNEED)` on the files the run reads,
//!   which drops their clean pages only. Which one ran is recorded with every run. Warm runs
//!   read the files once first ([`warm_file`]) and drop nothing.
//! - **Every answer is checked.** The oracle's exact answer is computed once; a run whose
//!   revenue or row counts differ stops the experiment with [`ExperimentError::WrongAnswer`].
//! - **Oversubscription is labelled.** A run with more executors than CPUs measures
//!   time-sharing, not parallel scaling; it is flagged in every table, file and plot.
//! - **Invalid combinations are skipped, not fatal.** SQPOLL with a backend that has no poll
//!   thread, or `--sqpoll on` without an idle CPU per executor, is recorded with its reason.

pub mod compare;
pub mod floor;
pub mod live;
pub mod machine;
pub mod markdown;
pub mod peers;
pub mod plots;
pub mod runner;
pub mod scale;
pub mod seed_report;

use std::fs::File;
use std::io::{self, IsTerminal, Read};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use engine::q6::Q6Report;
use engine::{IoChoice, SqpollMode};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::oracle::{OracleAnswer, OracleError};

/// Why an experiment stopped. Displays as one line naming the file or the run at fault.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// The database could not be planned (unreadable file, no such table, ...).
    #[error(transparent)]
    Plan(#[from] partitioner::Error),
    /// A scan failed for a reason other than an invalid combination of settings.
    #[error("{what}: {source}")]
    Scan {
        /// The configuration that failed.
        what: String,
        /// The engine's error.
        #[source]
        source: engine::Error,
    },
    /// The SQLite oracle failed.
    #[error(transparent)]
    Oracle(#[from] OracleError),
    /// A run's answer differs from the oracle's.
    #[error("wrong answer from {what}: got {got}, expected {want}")]
    WrongAnswer {
        /// The engine and configuration that answered.
        what: String,
        /// What it answered.
        got: String,
        /// The exact answer.
        want: String,
    },
    /// A file-system operation failed.
    #[error("{}: {op}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A results file could not be written or encoded.
    #[error("{}: {message}", path.display())]
    Output {
        /// The file.
        path: PathBuf,
        /// What went wrong (CSV, JSON or plot encoding).
        message: String,
    },
    /// SQLite failed while copying the table for a peer engine.
    #[error("{}: {what}: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What was being done.
        what: String,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// A peer engine (sqlite3 CLI, DuckDB, Turso) was available but failed.
    #[error("{engine}: {message}")]
    Peer {
        /// The engine.
        engine: String,
        /// Its error output or what was wrong with its answer.
        message: String,
    },
    /// The options make no experiment (an empty list, zero repeats, ...).
    #[error("invalid experiment: {0}")]
    Invalid(String),
}

impl ExperimentError {
    /// An [`ExperimentError::Io`] for `path`.
    pub fn io(path: &Path, op: impl Into<String>, source: io::Error) -> Self {
        ExperimentError::Io {
            path: path.to_path_buf(),
            op: op.into(),
            source,
        }
    }

    /// An [`ExperimentError::Output`] for `path`.
    pub fn output(path: &Path, message: impl std::fmt::Display) -> Self {
        ExperimentError::Output {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}

/// Shorthand for results whose error is [`ExperimentError`].
pub type Result<T, E = ExperimentError> = std::result::Result<T, E>;

/// Whether runs start with the file out of the page cache or in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// Empty the page cache before every run (the default: corescan is about the I/O).
    Cold,
    /// Read the file once before the runs and never drop it.
    Warm,
}

impl CacheMode {
    /// `cold` or `warm`.
    pub fn name(self) -> &'static str {
        match self {
            CacheMode::Cold => "cold",
            CacheMode::Warm => "warm",
        }
    }
}

/// How the page cache was prepared for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CachePrep {
    /// `sync; echo 3 > /proc/sys/vm/drop_caches` (root): every clean page of every file.
    DropCaches,
    /// `posix_fadvise(POSIX_FADV_DONTNEED)` on the files the run reads (not root, or
    /// `drop_caches` was refused): their clean, unmapped pages only.
    FadviseDontneed,
    /// The files were read once before the runs; nothing was dropped.
    Warm,
}

impl CachePrep {
    /// The name used in reports: `drop_caches`, `fadvise_dontneed` or `warm`.
    pub fn name(self) -> &'static str {
        match self {
            CachePrep::DropCaches => "drop_caches",
            CachePrep::FadviseDontneed => "fadvise_dontneed",
            CachePrep::Warm => "warm",
        }
    }
}

/// What the cache preparation of a set of runs was, in words.
pub fn cache_words(mode: CacheMode, preps: &[CachePrep]) -> String {
    let mut kinds: Vec<&str> = preps.iter().map(|p| p.name()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    match mode {
        CacheMode::Warm => "warm: the file was read once before the runs and never dropped".into(),
        CacheMode::Cold if kinds == ["drop_caches"] => {
            "cold: `sync; echo 3 > /proc/sys/vm/drop_caches` before every run (root)".into()
        }
        CacheMode::Cold if kinds == ["fadvise_dontneed"] => {
            "cold: `posix_fadvise(POSIX_FADV_DONTNEED)` on the file before every run (not root, \
             or drop_caches refused; only the file's clean pages are dropped)"
                .into()
        }
        CacheMode::Cold => format!("cold, dropped with: {}", kinds.join(", ")),
    }
}

/// Empties the page cache of `files`: all of it with `drop_caches` when running as root, else
/// `POSIX_FADV_DONTNEED` on each file. Returns which method ran.
pub fn drop_page_cache(files: &[&Path]) -> Result<CachePrep> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // SAFETY: sync has no preconditions; it flushes dirty pages so they can be dropped.
        unsafe { libc::sync() };
        if std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok() {
            return Ok(CachePrep::DropCaches);
        }
        // A container may mount /proc/sys read-only even for root: fall through.
    }
    for path in files {
        let file = File::open(path).map_err(|e| ExperimentError::io(path, "open", e))?;
        // SAFETY: advice on a file descriptor we own; offset 0, length 0 = the whole file.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(ExperimentError::io(
                path,
                "posix_fadvise(DONTNEED)",
                io::Error::from_raw_os_error(rc),
            ));
        }
    }
    Ok(CachePrep::FadviseDontneed)
}

/// Reads `path` once from start to end through the page cache, so that a warm run finds it
/// there.
pub fn warm_file(path: &Path) -> Result<()> {
    let mut file = File::open(path).map_err(|e| ExperimentError::io(path, "open", e))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ExperimentError::io(path, "read to warm the page cache", e)),
        }
    }
}

/// Prepares the page cache for one run over `files`: drops them (cold) or reads them (warm).
pub fn prepare_cache(mode: CacheMode, files: &[&Path]) -> Result<CachePrep> {
    match mode {
        CacheMode::Cold => drop_page_cache(files),
        CacheMode::Warm => {
            for f in files {
                warm_file(f)?;
            }
            Ok(CachePrep::Warm)
        }
    }
}

/// The median, minimum and maximum of some measurements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// The median (the mean of the two middle values for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`, ignoring NaNs; `None` when there is no value.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            // Halfway between the two middle values, clamped so rounding cannot leave [min, max].
            (v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2.0).clamp(v[0], v[n - 1])
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// Checks a corescan run's answer against the oracle's.
pub fn check_answer(what: &str, report: &Q6Report, want: &OracleAnswer) -> Result<()> {
    if report.revenue == want.revenue()
        && report.rows_matched == want.rows_matched
        && report.rows_scanned == want.rows_scanned
    {
        return Ok(());
    }
    Err(ExperimentError::WrongAnswer {
        what: what.to_string(),
        got: format!(
            "revenue {} ({} of {} rows matched)",
            report.revenue, report.rows_matched, report.rows_scanned
        ),
        want: format!(
            "revenue {} ({} of {} rows matched)",
            want.revenue(),
            want.rows_matched,
            want.rows_scanned
        ),
    })
}

/// The command-line name of an I/O choice: `dma`, `uring`, `pread`, `mmap` or `auto`.
pub fn io_name(io: IoChoice) -> &'static str {
    match io {
        IoChoice::Fixed(b) => b.name(),
        IoChoice::Auto => "auto",
    }
}

/// The command-line name of a SQPOLL mode: `off`, `auto` or `on`.
pub fn sqpoll_name(mode: SqpollMode) -> &'static str {
    match mode {
        SqpollMode::Off => "off",
        SqpollMode::Auto => "auto",
        SqpollMode::On => "on",
    }
}

/// A progress bar on stderr counting runs, or a hidden one when `progress` is false or stderr
/// is not a terminal.
pub fn progress_bar(progress: bool, runs: u64) -> ProgressBar {
    if !progress || !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(runs), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} runs, {elapsed} {msg}") {
        bar.set_style(style);
    }
    bar
}

/// Creates `dir` (and its parents) for an experiment's files.
pub fn create_out_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| ExperimentError::io(dir, "create directory", e))
}

/// Writes `contents` to `path`.
pub fn write_file(path: &Path, contents: impl AsRef<[u8]>) -> Result<()> {
    std::fs::write(path, contents).map_err(|e| ExperimentError::io(path, "write", e))
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| ExperimentError::output(path, format!("encode JSON: {e}")))?;
    write_file(path, text + "\n")
}

/// The default output directory of an experiment: `corescan-results/NAME-YYYYMMDD-HHMMSS`
/// (UTC), so that results are kept dated rather than overwritten.
pub fn default_out_dir(name: &str) -> PathBuf {
    PathBuf::from("corescan-results").join(format!("{name}-{}", UtcTime::now().compact()))
}

/// A UTC wall-clock time, for dating results without a time-zone database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    /// Seconds since the Unix epoch.
    pub unix_s: u64,
}

impl UtcTime {
    /// Now.
    pub fn now() -> Self {
        let unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        UtcTime { unix_s }
    }

    /// (year, month, day, hour, minute, second).
    fn civil(self) -> (i64, u32, u32, u64, u64, u64) {
        let days = (self.unix_s / 86_400) as i64;
        let secs = self.unix_s % 86_400;
        // Howard Hinnant's days-to-civil algorithm.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        (year, month, day, secs / 3600, secs % 3600 / 60, secs % 60)
    }

    /// `YYYYMMDD-HHMMSS`.
    pub fn compact(self) -> String {
        let (y, mo, d, h, mi, s) = self.civil();
        format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
    }

    /// `YYYY-MM-DD HH:MM:SS UTC`.
    pub fn readable(self) -> String {
        let (y, mo, d, h, mi, s) = self.civil();
        format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Spread::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        assert_eq!(Spread::of(&[f64::NAN]), None);
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn utc_dates() {
        assert_eq!(UtcTime { unix_s: 0 }.readable(), "1970-01-01 00:00:00 UTC");
        let t = UtcTime {
            unix_s: 1_709_210_096,
        };
        assert_eq!(t.readable(), "2024-02-29 12:34:56 UTC");
        assert_eq!(t.compact(), "20240229-123456");
    }
}
