//! What `bench scale` and `bench sweep` measured ([`ScaleOutcome`], one [`ConfigSummary`] per
//! configuration): what the experiment's files and reports are made from. Below the rest of
//! `scale/`: it imports none of it.

use serde::Serialize;

use crate::experiments::machine::Machine;
use crate::experiments::runner::{RunRecord, ScanConfig};
use crate::experiments::{CacheMode, Spread};

/// One configuration's results: the medians and spreads of its runs, or why it was skipped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigSummary {
    /// Its index in [`super::ScaleOptions::configs`].
    pub index: usize,
    /// The configuration.
    pub config: ScanConfig,
    /// Why it did not run, if it did not.
    pub skipped: Option<String>,
    /// Runs that finished.
    pub runs: usize,
    /// Wall time, seconds.
    pub wall_s: Option<Spread>,
    /// Throughput at the median wall time, GB/s (10^9 bytes).
    pub gb_per_s: Option<f64>,
    /// Rows per second at the median wall time.
    pub rows_per_s: Option<f64>,
    /// Median wall time of the 1-core run of the same other settings over this one's.
    pub speedup: Option<f64>,
    /// `speedup / cores`.
    pub efficiency: Option<f64>,
    /// Median share of read requests the block layer merged, percent.
    pub device_merged_pct: Option<f64>,
    /// Median mean request size at the device, KiB.
    pub device_mean_request_kib: Option<f64>,
    /// Median of the mean number of read requests in flight at the device.
    pub device_reads_in_flight: Option<f64>,
    /// Median user CPU time of the process, seconds.
    pub user_s: Option<f64>,
    /// Median system CPU time of the process, seconds.
    pub sys_s: Option<f64>,
    /// Median CPU time of the SQ poll threads, seconds, when SQPOLL ran.
    pub sqpoll_cpu_s: Option<f64>,
    /// The backend(s) that actually ran (`+`-joined if runs differed, as `auto` may).
    pub backend_ran: String,
    /// Whether every run had `O_DIRECT`.
    pub o_direct: Option<bool>,
    /// Whether every run had a SQ poll thread.
    pub sqpoll_ran: Option<bool>,
    /// More executors than CPUs: times measure time-sharing.
    pub oversubscribed: bool,
    /// Notices from the engine (fallbacks, `auto`'s choice), deduplicated.
    pub notices: Vec<String>,
    /// How the page cache was prepared before its runs (`drop_caches`, `fadvise_dontneed`,
    /// `warm`; `+`-joined if runs differed), empty when it did not run.
    pub cache_prep: String,
}

/// Everything an experiment measured.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleOutcome {
    /// `scale` or `sweep`.
    pub experiment: &'static str,
    /// The database file.
    pub db: String,
    /// The table scanned.
    pub table: String,
    /// The database file's size in bytes.
    pub file_bytes: u64,
    /// The oracle's exact revenue.
    pub revenue: String,
    /// Rows matched, per the oracle.
    pub rows_matched: u64,
    /// Rows in the table, per the oracle.
    pub rows_scanned: u64,
    /// Cold or warm.
    pub cache: CacheMode,
    /// Rounds run.
    pub repeat: usize,
    /// The machine.
    pub machine: Machine,
    /// One entry per configuration.
    pub configs: Vec<ConfigSummary>,
    /// Every run, in the order it ran.
    pub runs: Vec<RunRecord>,
}
