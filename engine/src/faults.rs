//! Fault injection: forces the failures the engine must survive, so tests can check each
//! fallback on a machine where nothing actually fails.
//!
//! The faults of a scan are [`crate::ScanSettings::faults`] (none by default); a list such as
//! `odirect,sqpoll` parses into [`Faults`] (the `corescan` binary reads one from its
//! `CORESCAN_FAULTS` environment variable). The names:
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
//! Layering: a leaf of the crate (imports nothing from it); the settings hold it, and the
//! backends, their policy and the coordinator consult it.

use std::str::FromStr;

/// The faults to pretend during a scan ([`Faults::NONE`] by default).
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

/// A fault list named a fault the engine does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown fault {0:?} (known: odirect, io_uring, sqpoll, memlock, pmu)")]
pub struct UnknownFault(pub String);

impl Faults {
    /// No fault: what really happens.
    pub const NONE: Faults = Faults {
        odirect: false,
        io_uring: false,
        sqpoll: false,
        memlock: false,
        pmu: false,
    };

    /// Parses a comma-separated fault list such as `odirect, sqpoll` (empty: none); an unknown
    /// name is an error, so a misspelt fault cannot silently test the healthy path.
    pub fn parse(list: &str) -> Result<Self, UnknownFault> {
        let mut f = Faults::NONE;
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match name {
                "odirect" => f.odirect = true,
                "io_uring" => f.io_uring = true,
                "sqpoll" => f.sqpoll = true,
                "memlock" => f.memlock = true,
                "pmu" => f.pmu = true,
                other => return Err(UnknownFault(other.to_string())),
            }
        }
        Ok(f)
    }
}

impl FromStr for Faults {
    type Err = UnknownFault;

    fn from_str(list: &str) -> Result<Self, UnknownFault> {
        Faults::parse(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fault_lists() {
        assert_eq!(Faults::parse("").unwrap(), Faults::NONE);
        assert_eq!(Faults::NONE, Faults::default());
        let f: Faults = "odirect, sqpoll".parse().unwrap();
        assert!(f.odirect && f.sqpoll && !f.io_uring && !f.memlock && !f.pmu);
        let err = Faults::parse("pmu,disk_on_fire").unwrap_err();
        assert_eq!(err, UnknownFault("disk_on_fire".into()));
        assert!(err.to_string().contains("unknown fault \"disk_on_fire\""));
    }
}
