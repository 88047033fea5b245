//! One executor's scan: reads its range in file order, keeps a readahead window in flight, and
//! feeds the pages, in order, to a [`ScanKernel`] (what is computed from the rows).
//!
//! - [`kernel`]: the [`ScanKernel`] trait, the seam between the loop and the computation;
//! - `pages`: the part common to both loops: which pages of a read are the range's leaves,
//!   handing them to the kernel, following overflow chains (with the partitioner's one chain
//!   walk, [`partitioner::cell::OverflowChain`]) and reading pages whose latest copy is in the
//!   write-ahead log;
//! - [`dma`]: the async loop over glommio's `DmaFile` (`O_DIRECT`) on the executor's ring;
//! - [`pipeline`]: the synchronous loop over the other backends (a private io_uring with
//!   optional SQPOLL, buffered `pread`, `mmap`), inside the same pinned executor thread.
//!
//! Both loops drive the same readahead state machine, [`crate::readahead::ReadSchedule`].
//!
//! Layering: scan loops sit above the backends ([`crate::backend`], which know nothing of
//! tasks, pages or kernels) and below the coordinator. The rule for where a loop lives: code
//! that owns an executor's control flow (what to read next, when to wait, what to decode) is a
//! scan loop, here; a backend is a passive reader the loop calls. So the `dma` loop is here,
//! with glommio's `DmaFile` as its backend.

pub mod dma;
pub mod kernel;
mod pages;
pub mod pipeline;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use partitioner::wal::WalIndex;
use partitioner::{DbHeader, Extent};
use serde::Serialize;

pub use kernel::{RecordOutcome, ScanKernel, Spill};

use crate::backend::mmap::MmapBackend;
use crate::backend::pread::PreadBackend;
use crate::backend::uring::UringBackend;
use crate::backend::{BackendOptions, BackendStats, IoBackend};
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::readahead::{ReadRequest, ScheduleStats};

/// What one executor is asked to do.
#[derive(Debug, Clone)]
pub(crate) struct ExecutorTask {
    pub cpu: usize,
    pub path: PathBuf,
    /// The database header as of the snapshot (page size, page count, usable size).
    pub header: DbHeader,
    /// The range's pages whose latest committed copy is in the database file.
    pub extents: Vec<Extent>,
    /// The range's pages whose latest committed copy is in the write-ahead log, with the
    /// offset of that copy in the log.
    pub wal_pages: Vec<(u32, u64)>,
    /// The log's frame map, for overflow pages.
    pub wal: Option<Arc<WalIndex>>,
    pub readahead: u32,
    pub max_read_pages: u32,
    pub backend: IoBackend,
    /// The CPU for this executor's kernel SQ poll thread (uring backend only).
    pub sqpoll_cpu: Option<usize>,
    pub faults: Faults,
    pub cancel: Arc<AtomicBool>,
}

/// One executor's statistics.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ExecutorReport {
    /// The CPU the executor was pinned to.
    pub cpu: usize,
    /// The backend that actually ran on this executor (after any fallback).
    pub backend: String,
    /// Why this executor fell back to another I/O path than the one asked for.
    pub notice: Option<String>,
    /// Leaf pages decoded.
    pub pages: u64,
    /// Overflow pages read to reach columns stored beyond a cell's local payload.
    pub overflow_pages: u64,
    /// Rows examined.
    pub rows: u64,
    /// Rows that matched Q6 (0 for other kernels).
    pub rows_matched: u64,
    /// Pages read from the write-ahead log instead of the database file.
    pub wal_pages: u64,
    /// Read requests handed to the ring (or, for `pread` and `mmap`, reads performed).
    pub reads_submitted: u64,
    /// Groups of reads handed to the kernel together.
    pub submit_batches: u64,
    /// `io_uring_enter` calls made by the executor, when the backend can count them.
    pub io_uring_enters: Option<u64>,
    /// Bytes requested (pages x page size).
    pub bytes_read: u64,
    /// Bytes read that the scan did not need: bridged gaps between extents and `O_DIRECT`
    /// alignment padding.
    pub wasted_bytes: u64,
    /// The most pages that were in flight at once.
    pub max_in_flight_pages: u32,
    /// Whether the file was really opened with `O_DIRECT`.
    pub o_direct: bool,
    /// Whether the buffers the reads land in are on transparent huge pages, so that each read
    /// is one physically contiguous segment for the device (see [`crate::hugepages`]); `None`
    /// for paths that do not read into buffers of their own (`pread`, `mmap`) or when
    /// `/proc/self/smaps` cannot tell.
    pub huge_page_buffers: Option<bool>,
    /// The CPU hosting this executor's SQ poll thread, when SQPOLL ran.
    pub sqpoll_cpu: Option<usize>,
    /// CPU time used by that poll thread, in seconds.
    pub sqpoll_cpu_s: Option<f64>,
    /// Time from the executor's start to its last page.
    pub wall_s: f64,
    /// CPU time in user mode on the executor's thread.
    pub user_s: f64,
    /// CPU time in the kernel on the executor's thread.
    pub sys_s: f64,
}

impl ExecutorReport {
    /// Adds what the readahead schedule issued.
    pub(crate) fn add_schedule(&mut self, s: ScheduleStats) {
        self.reads_submitted += s.reads_submitted;
        self.submit_batches += s.submit_batches;
        self.bytes_read += s.bytes_read;
        self.max_in_flight_pages = self.max_in_flight_pages.max(s.max_in_flight_pages);
    }

    /// Adds what the backend measured.
    pub(crate) fn add_backend(&mut self, s: BackendStats) {
        self.io_uring_enters = s.io_uring_enters.or(self.io_uring_enters);
        self.huge_page_buffers = s.huge_page_buffers.or(self.huge_page_buffers);
        self.sqpoll_cpu_s = s.sqpoll_cpu_s.or(self.sqpoll_cpu_s);
    }
}

impl ExecutorTask {
    /// An I/O error of this executor: `op` on `path` at byte `offset`.
    pub(crate) fn io_error(
        &self,
        op: impl Into<String>,
        path: &Path,
        offset: Option<u64>,
        source: io::Error,
    ) -> Error {
        Error::Io {
            cpu: self.cpu,
            path: path.to_path_buf(),
            op: op.into(),
            offset,
            source,
        }
    }

    /// A failed read of `req` from the database file.
    pub(crate) fn read_error(&self, req: ReadRequest, source: io::Error) -> Error {
        let last = req.first_page + req.pages - 1;
        self.io_error(
            format!("read pages {}..={last}", req.first_page),
            &self.path,
            Some(self.offset(req.first_page)),
            source,
        )
    }

    pub(crate) fn corrupt(&self, page: u32, what: String) -> Error {
        Error::Corrupt {
            cpu: self.cpu,
            path: self.path.clone(),
            page,
            what,
        }
    }

    /// Page size in bytes.
    pub(crate) fn page_size(&self) -> u32 {
        self.header.page_size
    }

    /// Byte offset of a 1-based page.
    pub(crate) fn offset(&self, page: u32) -> u64 {
        u64::from(page - 1) * u64::from(self.page_size())
    }

    /// The byte range of a read of the database file.
    pub(crate) fn byte_range(&self, req: ReadRequest) -> crate::backend::ByteRange {
        crate::backend::ByteRange {
            offset: self.offset(req.first_page),
            len: req.pages as usize * self.page_size() as usize,
        }
    }

    /// What a synchronous backend is opened with for this task, `capacity` reads in flight.
    pub(crate) fn backend_options(&self, capacity: usize) -> BackendOptions<'_> {
        BackendOptions {
            path: &self.path,
            max_read_bytes: self.max_read_pages as usize * self.page_size() as usize,
            capacity,
            hints: self.readahead > 0,
            sqpoll_cpu: self.sqpoll_cpu,
            faults: self.faults,
        }
    }

    /// Fails with [`Error::Cancelled`] once another executor has failed.
    pub(crate) fn check_cancelled(&self) -> Result<()> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(Error::Cancelled { cpu: self.cpu })
        } else {
            Ok(())
        }
    }

    fn open_error(&self, source: io::Error) -> Error {
        self.io_error(
            format!("open for {}", self.backend),
            &self.path,
            None,
            source,
        )
    }
}

/// Runs an executor's scan on a plain thread (no io_uring): only `pread` and `mmap` can.
pub(crate) fn run_without_uring<K: ScanKernel>(
    task: &ExecutorTask,
    kernel: K,
    sync_capacity: usize,
) -> Result<(K::Partial, ExecutorReport)> {
    let options = task.backend_options(sync_capacity);
    match task.backend {
        IoBackend::Mmap => pipeline::scan(
            task,
            kernel,
            MmapBackend::open(&options).map_err(|e| task.open_error(e))?,
        ),
        _ => pipeline::scan(
            task,
            kernel,
            PreadBackend::open(&options, None).map_err(|e| task.open_error(e))?,
        ),
    }
}

/// Runs one executor's scan with its backend on the current (pinned, glommio) thread.
pub(crate) async fn run<K: ScanKernel>(
    task: &ExecutorTask,
    kernel: K,
    sync_capacity: usize,
) -> Result<(K::Partial, ExecutorReport)> {
    let options = task.backend_options(sync_capacity);
    match task.backend {
        IoBackend::Dma => {
            // A filesystem without O_DIRECT makes glommio's open fail with EINVAL; read the file
            // through the page cache instead.
            let (why, kernel) = if task.faults.odirect {
                ("injected".to_string(), kernel)
            } else {
                match dma::scan(task, kernel).await? {
                    dma::DmaScan::Done(done) => return Ok(*done),
                    dma::DmaScan::DirectRefused(why, kernel) => (why.to_string(), kernel),
                }
            };
            let notice = Some(format!(
                "O_DIRECT refused for this file ({why}): pread instead of dma"
            ));
            pipeline::scan(
                task,
                kernel,
                PreadBackend::open(&options, notice).map_err(|e| task.open_error(e))?,
            )
        }
        IoBackend::Uring => {
            let b = UringBackend::open(&options).map_err(|e| {
                let op = if task.sqpoll_cpu.is_some() {
                    "set up io_uring with SQPOLL"
                } else {
                    "set up io_uring"
                };
                task.io_error(op, &task.path, None, e)
            })?;
            pipeline::scan(task, kernel, b)
        }
        IoBackend::Pread => pipeline::scan(
            task,
            kernel,
            PreadBackend::open(&options, None).map_err(|e| task.open_error(e))?,
        ),
        IoBackend::Mmap => pipeline::scan(
            task,
            kernel,
            MmapBackend::open(&options).map_err(|e| task.open_error(e))?,
        ),
    }
}
