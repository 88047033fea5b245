//! Scan settings: how each executor reads ([`ScanSettings`], [`IoChoice`]), where executors run
//! ([`ExecutorSpec`]), and the CPUs this process may use.
//!
//! It also names the backends ([`IoBackend`]) and SQPOLL policies ([`SqpollMode`]) the settings
//! choose from; the backends themselves are in [`crate::backend`].
//!
//! Layering: this module is at the bottom of the crate with [`crate::error`]; it imports nothing
//! from the rest of the engine but the leaf [`crate::faults`] (the failures a test pretends),
//! so the backends and their policy, the scan loops and the coordinator can all take their
//! settings from here.

use std::fmt;

use crate::error::{Error, Result};
use crate::faults::Faults;

pub use partitioner::topology::{MAX_COALESCE_KIB, MAX_READAHEAD};

/// The I/O path an executor uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoBackend {
    /// glommio `DmaFile`: `O_DIRECT` on glommio's io_uring.
    Dma,
    /// A private io_uring (io-uring crate) with registered buffers and `O_DIRECT`.
    Uring,
    /// Buffered `pread` through the page cache.
    Pread,
    /// A memory map of the file.
    Mmap,
}

impl IoBackend {
    /// The backend's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            IoBackend::Dma => "dma",
            IoBackend::Uring => "uring",
            IoBackend::Pread => "pread",
            IoBackend::Mmap => "mmap",
        }
    }
}

impl IoBackend {
    /// The concrete backend of a topology file's `io` setting, or `None` for `auto`.
    pub fn from_mode(mode: partitioner::topology::IoMode) -> Option<Self> {
        use partitioner::topology::IoMode;
        match mode {
            IoMode::Dma => Some(IoBackend::Dma),
            IoMode::Uring => Some(IoBackend::Uring),
            IoMode::Pread => Some(IoBackend::Pread),
            IoMode::Mmap => Some(IoBackend::Mmap),
            IoMode::Auto => None,
        }
    }
}

impl fmt::Display for IoBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether the `uring` backend uses a kernel SQ poll thread: `Off` (the default; SQPOLL burns a
/// CPU spinning, which only pays when that CPU is idle), `Auto` (for each executor that can be
/// given a CPU running no executor) or `On` (for every executor, or refuse to run). The same
/// policy the topology planner applies.
pub type SqpollMode = partitioner::topology::SqpollPolicy;

/// Which backend to use, or `Auto` to decide from the page cache (see [`crate::backend::residency`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoChoice {
    /// Always this backend.
    Fixed(IoBackend),
    /// `dma` when the table's pages are not in the page cache, `mmap` when they are.
    Auto,
}

impl From<partitioner::topology::IoMode> for IoChoice {
    fn from(mode: partitioner::topology::IoMode) -> Self {
        IoBackend::from_mode(mode).map_or(IoChoice::Auto, IoChoice::Fixed)
    }
}

/// How each executor reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanSettings {
    /// Pages kept in flight ahead of the decoder; 0 = one read at a time.
    pub readahead: u32,
    /// Adjacent pages of an extent are merged into reads of up to this many KiB; 0 = one read
    /// per page (the block layer may still merge concurrent reads).
    pub coalesce_kib: u32,
    /// The I/O backend.
    pub io: IoChoice,
    /// Whether the `uring` backend uses a kernel SQ poll thread.
    pub sqpoll: SqpollMode,
    /// Failures to pretend, to test the fallbacks ([`crate::faults`]); [`Faults::NONE`] by
    /// default. Part of the settings rather than read from the environment, so an embedding
    /// program (or a test) decides per scan.
    pub faults: Faults,
    /// The bytes a query's full sort may hold in memory, all executors together, before it
    /// writes sorted runs to the scratch directory (`None`: a quarter of the machine's
    /// memory, [`crate::query::sort::default_budget`]).
    pub memory: Option<u64>,
}

impl ScanSettings {
    /// The defaults for a file with `page_size`-byte pages: a window of
    /// [`DEFAULT_READAHEAD_BYTES`] and reads coalesced up to [`DEFAULT_COALESCE_KIB`] KiB, the
    /// fastest settings measured on the reference machine (see docs/performance.md).
    pub fn defaults(page_size: u32) -> Self {
        ScanSettings {
            readahead: (DEFAULT_READAHEAD_BYTES / u64::from(page_size.max(512))).max(16) as u32,
            coalesce_kib: DEFAULT_COALESCE_KIB,
            io: DEFAULT_IO,
            sqpoll: SqpollMode::Off,
            faults: Faults::NONE,
            memory: None,
        }
    }

    /// Checks the settings against the limits a topology file also enforces.
    pub fn validate(&self) -> Result<()> {
        if self.readahead > MAX_READAHEAD {
            return Err(Error::Config(format!(
                "readahead {} exceeds the maximum of {MAX_READAHEAD} pages",
                self.readahead
            )));
        }
        if self.coalesce_kib > MAX_COALESCE_KIB {
            return Err(Error::Config(format!(
                "coalescing {} KiB exceeds the maximum of {MAX_COALESCE_KIB} KiB",
                self.coalesce_kib
            )));
        }
        Ok(())
    }
}

/// Default readahead window per executor, in bytes (1024 pages of 4 KiB). Smaller windows
/// leave the virtio disk idle between completions (256 pages: 2.07 GB/s cold at SF 1); larger
/// ones measured slower (4096 pages: 1.41 GB/s against 2.14, because their refill batches merge
/// into 2 MiB requests with fewer in flight).
pub const DEFAULT_READAHEAD_BYTES: u64 = 4 << 20;
/// Default backend.
pub const DEFAULT_IO: IoChoice = IoChoice::Auto;
/// Resident fraction of the sampled table pages above which `auto` reads through the page cache.
pub const AUTO_CACHED_FRACTION: f64 = 0.9;
/// A scan whose leaves fit one default readahead window ([`DEFAULT_READAHEAD_BYTES`], 1,024
/// pages of 4 KiB) is read by `auto` with buffered `pread`. Not in the page cache, rather
/// than `dma`: a seek or a small table leaves application readahead nothing to do, O_DIRECT's
/// huge-page buffers cost more to set up than the reads, and buffered reads leave the pages
/// cached for the next query (a `dma` read never warms the cache, so every repeated seek
/// would go to the disk). Cached, rather than `mmap`: a seek's leaves are scattered, and a
/// mapped page costs a fault, a page-table entry and its unmapping where `pread` copies 4 KiB.
pub const AUTO_BUFFERED_BYTES: u64 = DEFAULT_READAHEAD_BYTES;
/// Default coalescing limit, in KiB.
pub const DEFAULT_COALESCE_KIB: u32 = 128;

/// One executor of a plan: the CPU it is pinned to and its share of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutorSpec {
    /// The CPU (as the kernel numbers it).
    pub cpu: usize,
    /// Relative share of the leaf pages (equal weights give equal page counts).
    pub weight: u32,
    /// The CPU for the executor's SQ poll thread, when a topology file names one; otherwise
    /// the coordinator applies [`ScanSettings::sqpoll`].
    pub sqpoll_cpu: Option<usize>,
}

impl From<&partitioner::topology::ExecutorPlacement> for ExecutorSpec {
    /// The executor the topology planner placed: its CPU, weight and SQ poll CPU.
    fn from(e: &partitioner::topology::ExecutorPlacement) -> Self {
        ExecutorSpec {
            cpu: e.cpu,
            weight: e.weight,
            sqpoll_cpu: e.sqpoll_cpu,
        }
    }
}

/// The CPUs this process may run on, in ascending order.
pub fn available_cpus() -> Vec<usize> {
    let mut cpus: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    cpus.sort_unstable();
    cpus
}

/// `n` executors with equal weights over the available CPUs, round-robin when `n` exceeds them.
pub fn spread(n: usize) -> Vec<ExecutorSpec> {
    let cpus = available_cpus();
    let cpus = if cpus.is_empty() { vec![0] } else { cpus };
    (0..n)
        .map(|i| ExecutorSpec {
            cpu: cpus[i % cpus.len()],
            weight: 1,
            sqpoll_cpu: None,
        })
        .collect()
}

/// Formats CPU numbers compactly in the kernel's list format (`0-3,6`; `(none)` when empty):
/// the topology module's formatter, so every message spells CPU lists alike.
pub fn list_cpus(cpus: &[usize]) -> String {
    partitioner::topology::cpu_list(cpus)
}
