//! The scan settings a topology carries (`[scan]` of `topology.toml`): the I/O path, the
//! readahead window, the coalescing limit and the SQPOLL policy, with their limits. The bottom
//! of `topology`: it imports no other topology module.

use std::fmt;
use std::str::FromStr;

/// Largest readahead window a file may ask for, in pages (the engine's limit).
pub const MAX_READAHEAD: u32 = 16_384;
/// Largest coalesced read a file may ask for, in KiB (the engine's limit; 0 = no coalescing).
pub const MAX_COALESCE_KIB: u32 = 16_384;

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

/// Whether executors get a kernel SQPOLL thread (io_uring `IORING_SETUP_SQPOLL`, pinned with
/// `IORING_SETUP_SQ_AFF`). Only the `uring` I/O path uses it; SQPOLL needs Linux 5.11 for
/// unprivileged use (CAP_SYS_NICE before), and pays only when its CPU is otherwise idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SqpollPolicy {
    /// No SQPOLL threads (the default): submissions are system calls.
    #[default]
    Off,
    /// A poll thread for each executor that can get an idle CPU; the rest go without.
    Auto,
    /// A poll thread for every executor, or no plan at all.
    On,
}

impl SqpollPolicy {
    /// The name used on the command line and in `topology.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            SqpollPolicy::Off => "off",
            SqpollPolicy::Auto => "auto",
            SqpollPolicy::On => "on",
        }
    }
}

impl fmt::Display for SqpollPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SqpollPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(SqpollPolicy::Off),
            "auto" => Ok(SqpollPolicy::Auto),
            "on" => Ok(SqpollPolicy::On),
            _ => Err(format!("{s:?} is not an SQPOLL policy (off, auto or on)")),
        }
    }
}
