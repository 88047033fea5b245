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
//!
//! ## Layering
//!
//! Backends sit below the scan loops: a backend is told what to read as a file, byte ranges
//! (`ByteRange`) and buffer sizes (`BackendOptions`), and returns its own figures
//! (`BackendStats`); it knows nothing of pages, tasks, decoders or reports. The rule for
//! where a loop lives: a backend is a *passive* reader, driven one call at a time by whoever
//! owns the control flow; the code that owns the control flow (decides what to read next,
//! waits, decodes) is a scan loop, in [`crate::scan`]. glommio's `DmaFile` is itself such a
//! passive reader (its futures are the reads), so the `dma` loop is a scan loop
//! ([`crate::scan::dma`]) and needs no type here. The backend policy (`policy`) decides from
//! the settings ([`crate::settings`]) which backend runs; it imports no scan type either.

pub mod mmap;
pub(crate) mod policy;
pub mod pread;
pub mod residency;
pub(crate) mod sigbus;
pub mod uring;

use std::io;
use std::path::Path;

use crate::faults::Faults;

pub use crate::settings::{IoBackend, SqpollMode};

/// One read: `len` bytes from byte `offset` of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ByteRange {
    /// Where the read starts in the file.
    pub offset: u64,
    /// How many bytes it asks for.
    pub len: usize,
}

/// What a backend is opened with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BackendOptions<'a> {
    /// The file to read.
    pub path: &'a Path,
    /// The largest single read, in bytes (the size of a buffer slot).
    pub max_read_bytes: usize,
    /// How many reads may be in flight at once (not counting the one being decoded).
    pub capacity: usize,
    /// Whether reads are started ahead of need, so that `pread` and `mmap` hint the kernel
    /// (`POSIX_FADV_WILLNEED`, `MADV_WILLNEED`); off for one read at a time.
    pub hints: bool,
    /// The CPU for the kernel SQ poll thread (`uring` only).
    pub sqpoll_cpu: Option<usize>,
    /// The failures to pretend (see [`crate::faults`]).
    pub faults: Faults,
}

/// Figures a backend measured about itself, handed to the scan loop at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct BackendStats {
    /// `io_uring_enter` calls, when the backend can count them.
    pub io_uring_enters: Option<u64>,
    /// Whether its read buffers are on transparent huge pages, when it has buffers and can tell.
    pub huge_page_buffers: Option<bool>,
    /// CPU time of its SQ poll thread over the scan, in seconds.
    pub sqpoll_cpu_s: Option<f64>,
}

/// A backend driven synchronously from the executor thread. Reads are started in file order
/// and completed in the same order; a read's bytes stay valid until it is released.
pub(crate) trait SyncBackend {
    /// How many reads may be in flight at once (not counting the one being decoded).
    fn capacity(&self) -> usize;
    /// Starts reading `read` (for `pread` and `mmap`: a readahead hint).
    fn start(&mut self, read: ByteRange) -> io::Result<()>;
    /// Hands the reads started since the last flush to the kernel.
    fn flush(&mut self) -> io::Result<()>;
    /// Waits until `read`, the oldest read in flight, is complete.
    fn wait(&mut self, read: ByteRange) -> io::Result<()>;
    /// The bytes of the completed read `read` (shorter than asked at the end of the file).
    fn bytes(&self, read: ByteRange) -> &[u8];
    /// The caller is done with the bytes of the oldest completed read.
    fn release(&mut self);
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
    /// The backend's own figures, at the end of the scan.
    fn stats(&mut self) -> BackendStats {
        BackendStats::default()
    }
    /// Whether the bytes handed out so far were sound: `mmap` says no once the file shrank
    /// under its mapping (see [`sigbus`]).
    fn check(&self) -> io::Result<()> {
        Ok(())
    }
    /// Asked when a page handed out failed to decode: whether the file shrank under the
    /// backend since, which explains the damage better (`mmap`: a truncation inside a mapped
    /// page zeroes its tail without any fault).
    fn check_after_damage(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Whether the file descriptor has `O_DIRECT` set.
pub(crate) fn has_o_direct(fd: i32) -> bool {
    // SAFETY: F_GETFL on a file descriptor we own has no side effects.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_DIRECT != 0
}
