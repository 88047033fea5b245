//! `topology.toml`: the machine it was planned for, one `[[executor]]` per executor, and the
//! scan settings.
//!
//! Loading is strict about structure (unknown keys, missing fields, wrong types and negative
//! numbers are [`TopologyError::Parse`] errors with the line) and lenient about values: an
//! unknown `io` or `sqpoll` string is kept as a [`Problem`] that [`Topology::check`] reports
//! next to every other problem, so one run of `corescan topology check` lists them all. Use
//! [`Topology::load_checked`] before running anything from a file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

use super::check::Problem;
use super::error::{Result, TopologyError};
use super::machine::Machine;
use super::placement::{ExecutorPlacement, Placement, SqpollPolicy, FULL_CORE_WEIGHT};

/// Largest readahead window a file may ask for, in pages (the engine's limit).
pub const MAX_READAHEAD: u32 = 16_384;
/// Largest coalesced read a file may ask for, in KiB (the engine's limit; 0 = no coalescing).
pub const MAX_COALESCE_KIB: u32 = 16_384;
/// Largest `topology.toml` read, in bytes.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// How executors read the table (`[scan] io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoMode {
    /// glommio `DmaFile`: `O_DIRECT` reads on the executor's own io_uring (the default).
    #[default]
    Dma,
    /// A private io_uring per executor with registered buffers and `O_DIRECT`; the only path
    /// that can use SQPOLL.
    Uring,
    /// Buffered `pread`: the kernel's page cache and readahead.
    Pread,
    /// `mmap` with sequential access advice.
    Mmap,
    /// DMA when the table is not in the page cache, a cached path when it is.
    Auto,
}

impl IoMode {
    /// The name used on the command line and in `topology.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            IoMode::Dma => "dma",
            IoMode::Uring => "uring",
            IoMode::Pread => "pread",
            IoMode::Mmap => "mmap",
            IoMode::Auto => "auto",
        }
    }
}

impl fmt::Display for IoMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for IoMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "dma" => Ok(IoMode::Dma),
            "uring" => Ok(IoMode::Uring),
            "pread" => Ok(IoMode::Pread),
            "mmap" => Ok(IoMode::Mmap),
            "auto" => Ok(IoMode::Auto),
            _ => Err(format!(
                "{s:?} is not an I/O mode (dma, uring, pread, mmap or auto)"
            )),
        }
    }
}

/// How every executor reads (`[scan]`). Every field is optional in the file; the defaults are
/// [`ScanSettings::default`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanSettings {
    /// The I/O path.
    pub io: IoMode,
    /// Pages kept in flight ahead of each executor's decoder (0 = one read at a time).
    pub readahead: u32,
    /// Adjacent pages are merged into reads of up to this many KiB (0 = one read per page).
    pub coalesce_kib: u32,
    /// Whether executors get SQPOLL threads (`uring` only).
    pub sqpoll: SqpollPolicy,
}

impl Default for ScanSettings {
    /// `auto`, 1024 pages of readahead (4 MiB at 4 KiB pages), 128 KiB reads, SQPOLL off.
    fn default() -> Self {
        ScanSettings {
            io: IoMode::Auto,
            readahead: 1024,
            coalesce_kib: 128,
            sqpoll: SqpollPolicy::Off,
        }
    }
}

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

    /// Loads `path` and refuses it, with every problem, unless [`check`](Self::check) finds
    /// none (against `machine` when given). This is what a run should use.
    pub fn load_checked(path: &Path, machine: Option<&Machine>) -> Result<Topology> {
        let topology = Topology::load(path)?;
        let problems = topology.check(machine);
        if problems.is_empty() {
            Ok(topology)
        } else {
            Err(TopologyError::Invalid {
                path: path.to_path_buf(),
                problems,
            })
        }
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

    /// Writes [`render`](Self::render)'s text to `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.render()).map_err(|source| TopologyError::Write {
            path: path.to_path_buf(),
            source,
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
