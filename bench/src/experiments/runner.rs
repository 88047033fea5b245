//! One checked Q6 run: a [`ScanConfig`] (cores, readahead window, coalescing, backend, SQPOLL),
//! run by a [`Runner`] that owns the plan, the oracle's answer and the cache policy.
//!
//! A configuration that cannot run is not an error of the experiment: [`ScanConfig::skip_reason`]
//! rules out the combinations known to be invalid before anything runs, and
//! [`RunOutcome::CouldNotRun`] carries the engine's refusal (an invalid setting, or a kernel
//! that refuses a SQPOLL ring) so the caller can record it and go on. Every other failure, and
//! every wrong answer, stops the experiment.

use std::path::{Path, PathBuf};

use engine::q6::{run_q6, Q6Params, Q6Report};
use engine::residency;
use engine::{spread, ExecutorSpec, IoBackend, IoChoice, ScanSettings, SqpollMode};
use partitioner::topology::{self, plan_executors};
use partitioner::TablePlan;
use serde::{Serialize, Serializer};

use super::{
    check_answer, io_name, prepare_cache, sqpoll_name, CacheMode, CachePrep, ExperimentError,
    Result,
};
use crate::oracle::{self, OracleAnswer};

/// The settings of one configuration of an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ScanConfig {
    /// Executors, spread over the available CPUs (round-robin beyond them: oversubscribed).
    pub cores: usize,
    /// Pages in flight ahead of each executor's decoder (0 = one read at a time).
    pub readahead: u32,
    /// Coalescing limit in KiB (0 = one read per page).
    pub coalesce_kib: u32,
    /// The backend asked for.
    #[serde(serialize_with = "ser_io")]
    pub io: IoChoice,
    /// The SQPOLL mode asked for.
    #[serde(serialize_with = "ser_sqpoll")]
    pub sqpoll: SqpollMode,
}

fn ser_io<S: Serializer>(io: &IoChoice, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(io_name(*io))
}

fn ser_sqpoll<S: Serializer>(mode: &SqpollMode, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(sqpoll_name(*mode))
}

impl ScanConfig {
    /// The engine settings of this configuration.
    pub fn settings(&self) -> ScanSettings {
        ScanSettings {
            readahead: self.readahead,
            coalesce_kib: self.coalesce_kib,
            io: self.io,
            sqpoll: self.sqpoll,
            faults: engine::faults::Faults::NONE,
            memory: None,
        }
    }

    /// `dma, 2 cores, readahead 32, coalesce 0 KiB, sqpoll off`.
    pub fn label(&self) -> String {
        format!(
            "{}, {} core{}, readahead {}, coalesce {} KiB, sqpoll {}",
            io_name(self.io),
            self.cores,
            if self.cores == 1 { "" } else { "s" },
            self.readahead,
            self.coalesce_kib,
            sqpoll_name(self.sqpoll)
        )
    }

    /// Whether this configuration runs more executors than the `available` CPUs.
    pub fn oversubscribed(&self, available: usize) -> bool {
        self.cores > available.max(1)
    }

    /// Why this configuration cannot run on a machine with `available` CPUs, if it cannot:
    /// SQPOLL with a backend that has no SQ poll thread, or `--sqpoll on` without an idle CPU
    /// for each executor's poll thread.
    pub fn skip_reason(&self, available: usize) -> Option<String> {
        if self.cores == 0 {
            return Some("0 executors".into());
        }
        if self.sqpoll != SqpollMode::Off && self.io != IoChoice::Fixed(IoBackend::Uring) {
            return Some(format!(
                "SQPOLL needs --io uring (the {} backend has no SQ poll thread)",
                io_name(self.io)
            ));
        }
        if self.sqpoll == SqpollMode::On && self.cores * 2 > available {
            return Some(format!(
                "--sqpoll on needs an idle CPU for each executor's poll thread: {} executors \
                 and {} poll threads do not fit on {available} CPU{}",
                self.cores,
                self.cores,
                if available == 1 { "" } else { "s" }
            ));
        }
        None
    }
}

/// What happened to one attempted run.
#[derive(Debug, Clone)]
pub enum RunOutcome {
    /// The run finished with the right answer.
    Ran(Box<RunRecord>),
    /// The engine refused the configuration (the reason, one line).
    CouldNotRun(String),
}

/// One finished run: its configuration, where it sits in the experiment, how the cache was
/// prepared, and the engine's full report.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// The configuration.
    pub config: ScanConfig,
    /// Its index in the experiment's list of configurations.
    pub config_index: usize,
    /// The round (0-based): round `r` runs every configuration once, in order.
    pub repeat: usize,
    /// How the page cache was prepared before the run.
    pub cache: CachePrep,
    /// Fraction of the table's pages (sampled) in the page cache just before the run, when
    /// the kernel could tell.
    pub cached_fraction_before: Option<f64>,
    /// Whether there were more executors than CPUs.
    pub oversubscribed: bool,
    /// The engine's report.
    pub report: Q6Report,
}

/// Runs configurations of Q6 over one table, each with the cache prepared and the answer
/// checked against the oracle's (computed once, when the runner is made).
#[derive(Debug)]
pub struct Runner {
    /// The plan of the table.
    pub plan: TablePlan,
    /// The Q6 parameters.
    pub params: Q6Params,
    /// The exact answer.
    pub expected: OracleAnswer,
    /// Cold or warm.
    pub cache: CacheMode,
    /// CPUs this process may run on.
    pub available_cpus: usize,
    /// The machine as hwloc sees it, for placing executors; `None` when hwloc cannot tell
    /// (executors then go round-robin over the available CPUs).
    pub topology: Option<topology::Machine>,
    db: PathBuf,
}

/// Places `n` executors the way `corescan q6` does: with the topology planner (physical cores
/// before SMT siblings, SQ poll threads on idle CPUs as `sqpoll` allows) when hwloc describes
/// the machine, else round-robin over the available CPUs, leaving SQPOLL to the engine. An
/// error is the planner's refusal (e.g. `--sqpoll on` without an idle CPU), one line.
pub fn place(
    machine: Option<&topology::Machine>,
    n: usize,
    sqpoll: SqpollMode,
) -> std::result::Result<Vec<ExecutorSpec>, String> {
    let Some(machine) = machine else {
        return Ok(spread(n));
    };
    let available = engine::available_cpus();
    let allowed = (!available.is_empty()).then_some(available.as_slice());
    let plan = plan_executors(machine, n, allowed, sqpoll).map_err(|e| e.to_string())?;
    Ok(plan.executors.iter().map(ExecutorSpec::from).collect())
}

impl Runner {
    /// Plans `table` of `db`, computes the oracle's answer, and (warm) reads the file once.
    pub fn new(db: &Path, table: &str, params: Q6Params, cache: CacheMode) -> Result<Runner> {
        let plan = TablePlan::open(db, table)?;
        let expected = oracle::q6(db, table, &params)?;
        if cache == CacheMode::Warm {
            super::warm_file(db)?;
        }
        Ok(Runner {
            plan,
            params,
            expected,
            cache,
            available_cpus: engine::available_cpus().len().max(1),
            topology: topology::Machine::detect().ok(),
            db: db.to_path_buf(),
        })
    }

    /// The database file.
    pub fn db(&self) -> &Path {
        &self.db
    }

    /// The fraction of the table's pages (up to 1024 sampled) in the page cache now.
    pub fn cached_fraction(&self) -> Option<f64> {
        residency::sample(
            &self.plan.path,
            self.plan.header.page_size,
            &self.plan.leaves,
            1024,
        )
        .ok()
        .filter(|r| r.sampled > 0)
        .map(|r| r.fraction())
    }

    /// Prepares the cache and runs `config` once; `config_index` and `repeat` only label the
    /// record.
    pub fn run(
        &self,
        config: &ScanConfig,
        config_index: usize,
        repeat: usize,
    ) -> Result<RunOutcome> {
        let cache = match self.cache {
            CacheMode::Cold => {
                // The write-ahead log holds pages the scan reads too: the one the plan found
                // (beside the resolved path when the database path is a symbolic link).
                let mut files: Vec<&Path> = vec![&self.db];
                if let Some(wal) = &self.plan.wal {
                    files.push(&wal.path);
                }
                prepare_cache(CacheMode::Cold, &files)?
            }
            // The file was read once when the runner was made; reading it again before every
            // run would only add noise.
            CacheMode::Warm => CachePrep::Warm,
        };
        let executors = match place(self.topology.as_ref(), config.cores, config.sqpoll) {
            Ok(e) => e,
            Err(reason) => return Ok(RunOutcome::CouldNotRun(reason)),
        };
        let cached_fraction_before = self.cached_fraction();
        match run_q6(&self.plan, &executors, &self.params, &config.settings()) {
            Ok(report) => {
                check_answer(
                    &format!("corescan ({})", config.label()),
                    &report,
                    &self.expected,
                )?;
                Ok(RunOutcome::Ran(Box::new(RunRecord {
                    config: *config,
                    config_index,
                    repeat,
                    cache,
                    cached_fraction_before,
                    oversubscribed: report.oversubscribed
                        || config.oversubscribed(self.available_cpus),
                    report,
                })))
            }
            Err(e) if could_not_run(&e, config) => Ok(RunOutcome::CouldNotRun(
                e.to_string().replace(['\n', '\r'], " "),
            )),
            Err(source) => Err(ExperimentError::Scan {
                what: format!("corescan ({})", config.label()),
                source,
            }),
        }
    }
}

/// Whether the engine refused the configuration itself rather than failing on the file: an
/// invalid setting, or a SQPOLL ring the kernel would not set up (it needs CAP_SYS_NICE
/// before Linux 5.13, and some sandboxes forbid it).
fn could_not_run(e: &engine::Error, config: &ScanConfig) -> bool {
    match e {
        engine::Error::Config(_) => true,
        engine::Error::Io { op, .. } => config.sqpoll != SqpollMode::Off && op.contains("SQPOLL"),
        engine::Error::Start { .. } => config.sqpoll != SqpollMode::Off,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(cores: usize, io: IoChoice, sqpoll: SqpollMode) -> ScanConfig {
        ScanConfig {
            cores,
            readahead: 32,
            coalesce_kib: 0,
            io,
            sqpoll,
        }
    }

    #[test]
    fn invalid_combinations_have_reasons() {
        let uring = IoChoice::Fixed(IoBackend::Uring);
        let dma = IoChoice::Fixed(IoBackend::Dma);
        assert_eq!(config(1, dma, SqpollMode::Off).skip_reason(2), None);
        assert_eq!(config(1, uring, SqpollMode::On).skip_reason(2), None);
        assert!(config(2, uring, SqpollMode::On)
            .skip_reason(2)
            .unwrap()
            .contains("idle CPU"));
        assert!(config(1, dma, SqpollMode::Auto)
            .skip_reason(2)
            .unwrap()
            .contains("--io uring"));
        assert!(config(1, IoChoice::Auto, SqpollMode::On)
            .skip_reason(8)
            .unwrap()
            .contains("auto backend"));
        // auto SQPOLL without an idle CPU runs, just without a poll thread.
        assert_eq!(config(2, uring, SqpollMode::Auto).skip_reason(2), None);
        assert!(config(3, dma, SqpollMode::Off).oversubscribed(2));
        assert_eq!(
            config(2, dma, SqpollMode::Off).label(),
            "dma, 2 cores, readahead 32, coalesce 0 KiB, sqpoll off"
        );
    }
}
