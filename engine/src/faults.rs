//! Fault injection: forces the failures the engine must survive, so tests can check each
//! fallback on a machine where nothing actually fails.
//!
//! Set `CORESCAN_FAULTS` to a comma-separated list of:
//!
//! | fault | pretends that | the engine then |
//! |---|---|---|
//! | `odirect` | the filesystem refuses `O_DIRECT` | reads through the page cache (`pread`) |
//! | `io_uring` | io_uring is unavailable (`kernel.io_uring_disabled`, seccomp) | runs plain pinned threads with `pread` |
//! | `sqpoll` | the kernel refuses SQPOLL | uses the plain ring |
//! | `memlock` | `RLIMIT_MEMLOCK` is 64 KiB and the process may not exceed it | shrinks glommio's I/O memory, or fails naming the limit |
//! | `pmu` | the CPU has no hardware performance counters | reports the counters as null, with the reason |
//!
//! Each fallback is reported in the run's `io.notice`.
//!
//! Layering: a leaf of the crate (imports nothing from it); the backends, their policy and the
//! coordinator consult it.

use std::sync::OnceLock;

/// The faults in force for this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// `O_DIRECT` is refused.
    pub odirect: bool,
    /// io_uring is unavailable.
    pub io_uring: bool,
    /// SQPOLL is refused.
    pub sqpoll: bool,
    /// The locked-memory limit is tiny.
    pub memlock: bool,
    /// There are no hardware performance counters.
    pub pmu: bool,
}

/// The environment variable that lists the faults to inject.
pub const FAULTS_ENV: &str = "CORESCAN_FAULTS";

impl Faults {
    /// Parses a fault list such as `odirect,sqpoll`; unknown names are an error.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut f = Faults::default();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match name {
                "odirect" => f.odirect = true,
                "io_uring" => f.io_uring = true,
                "sqpoll" => f.sqpoll = true,
                "memlock" => f.memlock = true,
                "pmu" => f.pmu = true,
                other => {
                    return Err(format!(
                        "{FAULTS_ENV}: unknown fault {other:?} (known: odirect, io_uring, sqpoll, memlock, pmu)"
                    ))
                }
            }
        }
        Ok(f)
    }

    /// The faults named in `CORESCAN_FAULTS` (read once per process).
    pub fn from_env() -> Result<Self, String> {
        static FAULTS: OnceLock<Result<Faults, String>> = OnceLock::new();
        FAULTS
            .get_or_init(|| match std::env::var(FAULTS_ENV) {
                Ok(v) => Faults::parse(&v),
                Err(_) => Ok(Faults::default()),
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fault_lists() {
        assert_eq!(Faults::parse("").unwrap(), Faults::default());
        let f = Faults::parse("odirect, sqpoll").unwrap();
        assert!(f.odirect && f.sqpoll && !f.io_uring && !f.memlock);
        assert!(Faults::parse("disk_on_fire")
            .unwrap_err()
            .contains("unknown fault"));
    }
}
