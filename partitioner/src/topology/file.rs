//! `topology.toml`: the machine it was planned for, one `[[executor]]` per executor, and the
//! scan settings.
//!
//! Loading is strict about structure (unknown keys, missing fields, wrong types and negative
//! numbers are [`TopologyError::Parse`] errors with the line) and lenient about values: an
//! unknown `io` or `sqpoll` string is kept as a [`Problem`] that [`Topology::check`] reports
//! next to every other problem, so one run of `corescan topology check` lists them all. Use
//! [`Topology::load_checked`] (in `check.rs`) before running anything from a file.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::{Result, TopologyError};
use super::machine::Machine;
use super::placement::{ExecutorPlacement, Placement, FULL_CORE_WEIGHT};
use super::problem::Problem;
use super::settings::ScanSettings;

/// Largest `topology.toml` read, in bytes.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// The `[machine]` table: what the file was planned for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineSummary {
    /// Packages (sockets).
    pub packages: usize,
    /// NUMA nodes.
    pub numa_nodes: usize,
    /// Physical cores.
    pub cores: usize,
    /// Processing units (hardware threads).
    pub pus: usize,
    /// Where the facts came from (`hwloc: this machine`, `hwloc synthetic: DESC`,
    /// `hwloc xml: FILE`, or free text for a hand-written file).
    pub source: String,
    /// The CPU model (optional `cpu_model`; informational).
    pub cpu_model: Option<String>,
    /// Total memory in bytes (optional `memory_bytes`; informational).
    pub memory_bytes: Option<u64>,
}

impl From<&Machine> for MachineSummary {
    fn from(m: &Machine) -> Self {
        MachineSummary {
            packages: m.packages,
            numa_nodes: m.numa_nodes,
            cores: m.cores,
            pus: m.pus.len(),
            source: m.source.clone(),
            cpu_model: m.cpu_brand.clone(),
            memory_bytes: m.memory_bytes,
        }
    }
}

/// A `topology.toml` file: where each executor runs and how it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// The machine the file was planned for.
    pub machine: MachineSummary,
    /// One entry per executor, in file order (an absent `weight` reads as
    /// [`FULL_CORE_WEIGHT`]).
    pub executors: Vec<ExecutorPlacement>,
    /// How the executors read.
    pub scan: ScanSettings,
    /// Values [`Topology::load`] could not interpret (kept at their defaults meanwhile);
    /// [`Topology::check`] reports them first.
    pub(crate) load_problems: Vec<Problem>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    machine: RawMachine,
    #[serde(default)]
    executor: Vec<RawExecutor>,
    #[serde(default)]
    scan: RawScan,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMachine {
    packages: usize,
    numa_nodes: usize,
    cores: usize,
    pus: usize,
    source: String,
    cpu_model: Option<String>,
    memory_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExecutor {
    cpu: usize,
    core: usize,
    package: usize,
    numa_node: usize,
    weight: Option<u32>,
    sqpoll_cpu: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawScan {
    io: Option<String>,
    readahead: Option<u32>,
    coalesce_kib: Option<u32>,
    sqpoll: Option<String>,
}

impl Topology {
    /// The file for `placement` on `machine`, with `scan` settings.
    pub fn new(machine: &Machine, placement: &Placement, scan: ScanSettings) -> Topology {
        Topology {
            machine: MachineSummary::from(machine),
            executors: placement.executors.clone(),
            scan,
            load_problems: Vec::new(),
        }
    }

    /// Reads and parses `path`. Structural errors name the file and line; value problems are
    /// left for [`check`](Self::check).
    pub fn load(path: &Path) -> Result<Topology> {
        let read_error = |source| TopologyError::Read {
            path: path.to_path_buf(),
            source,
        };
        let len = std::fs::metadata(path).map_err(read_error)?.len();
        if len > MAX_FILE_BYTES {
            return Err(parse_error(
                path,
                format!("{len} bytes is too large for a topology file"),
            ));
        }
        let bytes = std::fs::read(path).map_err(read_error)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| parse_error(path, "not UTF-8 text".to_string()))?;
        Topology::parse(&text, path)
    }

    /// Parses the text of a topology file; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Topology> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text.get(..s.start).unwrap_or(text).lines().count().max(1));
            let what = e.message().trim().replace('\n', " ");
            match line {
                Some(line) => parse_error(path, format!("line {line}: {what}")),
                None => parse_error(path, what),
            }
        })?;
        let mut load_problems = Vec::new();
        let defaults = ScanSettings::default();
        let io = match raw.scan.io {
            None => defaults.io,
            Some(s) => s.parse().unwrap_or_else(|_| {
                load_problems.push(Problem::UnknownIo(s));
                defaults.io
            }),
        };
        let sqpoll = match raw.scan.sqpoll {
            None => defaults.sqpoll,
            Some(s) => s.parse().unwrap_or_else(|_| {
                load_problems.push(Problem::UnknownSqpoll(s));
                defaults.sqpoll
            }),
        };
        let m = raw.machine;
        Ok(Topology {
            machine: MachineSummary {
                packages: m.packages,
                numa_nodes: m.numa_nodes,
                cores: m.cores,
                pus: m.pus,
                source: m.source,
                cpu_model: m.cpu_model,
                memory_bytes: m.memory_bytes,
            },
            executors: raw
                .executor
                .into_iter()
                .map(|e| ExecutorPlacement {
                    cpu: e.cpu,
                    core: e.core,
                    package: e.package,
                    numa_node: e.numa_node,
                    weight: e.weight.unwrap_or(FULL_CORE_WEIGHT),
                    sqpoll_cpu: e.sqpoll_cpu,
                })
                .collect(),
            scan: ScanSettings {
                io,
                readahead: raw.scan.readahead.unwrap_or(defaults.readahead),
                coalesce_kib: raw.scan.coalesce_kib.unwrap_or(defaults.coalesce_kib),
                sqpoll,
            },
            load_problems,
        })
    }

    /// The executors' CPUs, in file order.
    pub fn cpus(&self) -> Vec<usize> {
        self.executors.iter().map(|e| e.cpu).collect()
    }

    /// The executors' weights, in file order (what the table's split takes).
    pub fn weights(&self) -> Vec<u32> {
        self.executors.iter().map(|e| e.weight).collect()
    }

    /// Some CPU runs more than one executor.
    pub fn oversubscribed(&self) -> bool {
        let mut cpus = self.cpus();
        cpus.sort_unstable();
        cpus.windows(2).any(|w| w[0] == w[1])
    }
}

fn parse_error(path: &Path, what: String) -> TopologyError {
    TopologyError::Parse {
        path: PathBuf::from(path),
        what,
    }
}
