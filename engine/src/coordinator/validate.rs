//! The checks before a scan starts: at least one executor, settings within their limits, every
//! executor's CPU available to this process; and whether the run is oversubscribed.

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::settings::{available_cpus, list_cpus, ExecutorSpec, ScanSettings};

/// What the checks found.
#[derive(Debug)]
pub(super) struct Checked {
    /// The CPUs this process may run on.
    pub available: Vec<usize>,
    /// More executors than CPUs, or two on one CPU: timings measure time-sharing.
    pub oversubscribed: bool,
}

/// Checks `settings` and `executors` (see the module docs).
pub(super) fn check(settings: &ScanSettings, executors: &[ExecutorSpec]) -> Result<Checked> {
    if executors.is_empty() {
        return Err(Error::Config("at least one executor is needed".into()));
    }
    settings.validate()?;
    let available = available_cpus();
    for e in executors {
        if !available.is_empty() && !available.contains(&e.cpu) {
            return Err(Error::Config(format!(
                "CPU {} is not available to this process (available: {})",
                e.cpu,
                list_cpus(&available)
            )));
        }
    }
    let mut seen = HashSet::new();
    let oversubscribed =
        executors.len() > available.len().max(1) || !executors.iter().all(|e| seen.insert(e.cpu));
    Ok(Checked {
        available,
        oversubscribed,
    })
}
