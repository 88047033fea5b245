//! The topology error type: every error about a file names it.

use std::path::PathBuf;

use super::problem::Problem;

/// An error reading the machine's topology, planning executors, or reading or writing a
/// `topology.toml` file. Displays as one line.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// hwloc could not read this machine's topology.
    #[error("hwloc: this machine: {what}")]
    Detect {
        /// What went wrong.
        what: String,
    },
    /// hwloc rejected a synthetic description.
    #[error("synthetic topology {description:?}: {what} (expected something like \"pack:2 numa:2 core:4 pu:2\")")]
    Synthetic {
        /// The description as given.
        description: String,
        /// What is wrong with it.
        what: String,
    },
    /// An hwloc XML file could not be read or was rejected.
    #[error("{}: {what}", path.display())]
    Xml {
        /// The XML file.
        path: PathBuf,
        /// What went wrong.
        what: String,
    },
    /// A placement was asked for zero executors.
    #[error("no executors requested (at least 1 is needed)")]
    NoExecutors,
    /// A placement was asked for an absurd number of executors.
    #[error("{requested} executors requested; at most {max} are supported")]
    TooManyExecutors {
        /// Executors requested.
        requested: usize,
        /// The limit.
        max: usize,
    },
    /// The allowed CPU set names CPUs the machine does not have.
    #[error(
        "CPUs {} are not on the machine ({machine}: CPUs {})",
        cpu_list(cpus),
        cpu_list(known)
    )]
    UnknownCpus {
        /// The CPUs not found.
        cpus: Vec<usize>,
        /// The machine's source.
        machine: String,
        /// The CPUs the machine has.
        known: Vec<usize>,
    },
    /// The allowed CPU set is empty.
    #[error("the allowed CPU set is empty")]
    NoAllowedCpus,
    /// `--sqpoll on` was asked for, but some executors find no idle CPU for their poll thread.
    #[error(
        "--sqpoll on: no idle CPU for the SQPOLL thread of executor{} {} ({} on {} leave {idle} idle; a poll thread needs a CPU that runs no executor); use --sqpoll auto or fewer executors",
        if executors.len() == 1 { "" } else { "s" },
        executors.iter().map(|(i, cpu)| format!("{i} (cpu {cpu})")).collect::<Vec<_>>().join(", "),
        plural(*planned, "executor"),
        plural(*allowed, "allowed CPU"),
    )]
    SqpollRefused {
        /// `(executor index, its CPU)` for each executor left without an idle CPU.
        executors: Vec<(usize, usize)>,
        /// Executors planned.
        planned: usize,
        /// Allowed CPUs.
        allowed: usize,
        /// Idle allowed CPUs.
        idle: usize,
    },
    /// A file could not be read.
    #[error("{}: read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("{}: write: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A `topology.toml` file is not valid TOML or does not have the expected tables and fields.
    #[error("{}: {what}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line where the parser can tell.
        what: String,
    },
    /// A `topology.toml` file loaded but [`Topology::check`](super::Topology::check) found
    /// problems in it.
    #[error("{}: {}", path.display(), problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Every problem found.
        problems: Vec<Problem>,
    },
}

/// Shorthand for results whose error is [`TopologyError`].
pub type Result<T, E = TopologyError> = std::result::Result<T, E>;

/// `1 executor`, `2 executors`.
fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// `0-3,8,10-11`: a CPU list in the kernel's format (input need not be sorted).
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    if parts.is_empty() {
        "(none)".to_string()
    } else {
        parts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::cpu_list;

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list(&[]), "(none)");
        assert_eq!(cpu_list(&[3, 0, 1, 2, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpu_list(&[5]), "5");
    }
}
