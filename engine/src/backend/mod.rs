//! I/O backends: the ways an executor can read its pages, for comparing I/O models.
//!
//! All of them use the same read plan, readahead window and decoder; only how a read reaches
//! the kernel differs:
//!
//! | backend | how | when it pays |
//! |---|---|---|
//! | `dma` | glommio `DmaFile`, `O_DIRECT`, glommio's own io_uring | cold scans: no page-cache copy, no eviction of other data |
//! | `uring` | a private io_uring built with the io-uring crate, registered buffers, `O_DIRECT`, optional SQPOLL | like `dma`; SQPOLL only when an idle CPU can host the kernel poll thread |
//! | `pread` | buffered `pread`, the seed's syscall backend; the kernel reads ahead, and the window adds `POSIX_FADV_WILLNEED` hints | warm scans, filesystems without `O_DIRECT` |
//! | `mmap` | memmap2, `MADV_SEQUENTIAL`, window as `MADV_WILLNEED` | warm scans: no copy at all |
//!
//! `auto` picks `dma` when the table's pages are not in the page cache and `mmap` when they are
//! (see [`residency`]). `dma` and `uring` (both `O_DIRECT`, no SQPOLL) measured alike on the
//! reference machine (0.92 and 0.88 of `fio`'s sequential `O_DIRECT` throughput, medians of
//! paired cold runs), once both read into huge-page buffers ([`crate::hugepages`]) and the `dma`
//! loop makes glommio submit each refill at once ([`crate::scan::dma`]).

pub mod mmap;
pub(crate) mod policy;
pub mod pread;
pub mod residency;
pub(crate) mod sigbus;
pub mod uring;

use std::fmt;
use std::io;

use crate::readahead::ReadRequest;
use crate::scan::{ExecutorReport, ExecutorTask};

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

/// A backend driven synchronously from the executor thread. Reads are started in file order
/// and completed in the same order; a read's bytes stay valid until it is released.
pub(crate) trait SyncBackend {
    /// How many reads may be in flight at once (not counting the one being decoded).
    fn capacity(&self) -> usize;
    /// Starts reading `req` (for `pread` and `mmap`: a readahead hint).
    fn start(&mut self, task: &ExecutorTask, req: ReadRequest) -> io::Result<()>;
    /// Hands the reads started since the last flush to the kernel.
    fn flush(&mut self) -> io::Result<()>;
    /// Waits until `req`, the oldest read in flight, is complete.
    fn wait(&mut self, task: &ExecutorTask, req: ReadRequest) -> io::Result<()>;
    /// The bytes of the completed read `req` (shorter than asked at the end of the file).
    fn bytes(&self, req: ReadRequest) -> &[u8];
    /// The decoder is done with `req`'s bytes.
    fn release(&mut self, req: ReadRequest);
    /// Whether reads bypass the page cache.
    fn o_direct(&self) -> bool;
    /// The backend's name, as reported.
    fn name(&self) -> &'static str;
    /// Why the backend runs differently from what was asked (a fallback), if it does.
    fn notice(&self) -> Option<String> {
        None
    }
    /// The CPU of the kernel SQ poll thread, if there is one.
    fn sqpoll_cpu(&self) -> Option<usize> {
        None
    }
    /// Adds backend-specific figures to the report at the end of the scan.
    fn finish(&mut self, _report: &mut ExecutorReport) {}
    /// Whether the bytes handed out so far were sound: `mmap` says no once the file shrank
    /// under its mapping (see [`sigbus`]).
    fn check(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Whether the file descriptor has `O_DIRECT` set.
pub(crate) fn has_o_direct(fd: i32) -> bool {
    // SAFETY: F_GETFL on a file descriptor we own has no side effects.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_DIRECT != 0
}
