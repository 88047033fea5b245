//! One executor's scan: reads from its range in file order, keeps a readahead window in flight,
//! and decodes pages in order into a [`PartialAggregate`].
//!
//! Two loops share the same [`ReadPlan`](crate::readahead::ReadPlan),
//! [`ReadaheadWindow`](crate::readahead::ReadaheadWindow) and `PageDecoder`:
//!
//! - [`dma`]: glommio's `DmaFile` (`O_DIRECT`) on the executor's own glommio ring, async;
//! - [`pipeline`]: a synchronous loop over a `SyncBackend` (a private
//!   io_uring with optional SQPOLL, buffered `pread`, or `mmap`), run inside the same pinned
//!   executor thread.

pub mod dma;
pub mod pipeline;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use partitioner::format::be_u32;
use partitioner::wal::{PageLocation, WalIndex};
use partitioner::Extent;
use serde::Serialize;

use crate::backend::mmap::MmapBackend;
use crate::backend::pread::PreadBackend;
use crate::backend::uring::UringBackend;
use crate::backend::IoBackend;
use crate::decoder::{LeafDecoder, RecordOutcome, Spill};
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::q6::PartialAggregate;

/// What one executor is asked to do.
#[derive(Debug, Clone)]
pub(crate) struct ExecutorTask {
    pub cpu: usize,
    pub path: PathBuf,
    pub page_size: u32,
    pub page_count: u32,
    pub usable: u32,
    /// The range's pages whose latest committed copy is in the database file.
    pub extents: Vec<Extent>,
    /// The range's pages whose latest committed copy is in the write-ahead log, with the
    /// offset of that copy in the log.
    pub wal_pages: Vec<(u32, u64)>,
    /// The log's frame map, for overflow pages.
    pub wal: Option<Arc<WalIndex>>,
    pub decoder: LeafDecoder,
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
    /// Rows that matched Q6.
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

impl ExecutorTask {
    pub(crate) fn io_error(&self, op: String, e: impl std::fmt::Display) -> Error {
        Error::Io {
            cpu: self.cpu,
            path: self.path.clone(),
            op,
            cause: e.to_string(),
        }
    }

    pub(crate) fn corrupt(&self, page: u32, what: String) -> Error {
        Error::Corrupt {
            cpu: self.cpu,
            path: self.path.clone(),
            page,
            what,
        }
    }

    /// Byte offset of a 1-based page.
    pub(crate) fn offset(&self, page: u32) -> u64 {
        u64::from(page - 1) * u64::from(self.page_size)
    }

    /// Fails with [`Error::Cancelled`] once another executor has failed.
    pub(crate) fn check_cancelled(&self) -> Result<()> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(Error::Cancelled { cpu: self.cpu })
        } else {
            Ok(())
        }
    }
}

/// Decodes the pages of completed reads, in file order, and completes records that continue
/// on overflow pages. Overflow pages are rare and scattered, so they are read with a plain
/// `pread` on a second descriptor rather than through the readahead window.
pub(crate) struct PageDecoder<'t> {
    task: &'t ExecutorTask,
    /// The extent the next leaf page falls in: reads arrive in file order, so membership of a
    /// page in the range is a forward-moving cursor.
    extent_cursor: usize,
    spills: Vec<Spill>,
    overflow_file: Option<File>,
    wal_file: Option<File>,
    overflow_page: Vec<u8>,
    pub agg: PartialAggregate,
}

impl<'t> PageDecoder<'t> {
    pub(crate) fn new(task: &'t ExecutorTask) -> Self {
        PageDecoder {
            task,
            extent_cursor: 0,
            spills: Vec::new(),
            overflow_file: None,
            wal_file: None,
            overflow_page: Vec::new(),
            agg: PartialAggregate::default(),
        }
    }

    /// Decodes the leaf pages among the `pages` whole pages starting at `first_page` (a read
    /// may bridge a small gap between extents; those pages are skipped and counted as wasted);
    /// `bytes` must hold at least them.
    pub(crate) fn decode(
        &mut self,
        first_page: u32,
        pages: u32,
        bytes: &[u8],
        report: &mut ExecutorReport,
    ) -> Result<()> {
        self.decode_pages(first_page, pages, bytes, report, true)
    }

    fn decode_pages(
        &mut self,
        first_page: u32,
        pages: u32,
        bytes: &[u8],
        report: &mut ExecutorReport,
        only_leaves: bool,
    ) -> Result<()> {
        let task = self.task;
        let page_size = task.page_size as usize;
        let want = pages as usize * page_size;
        if bytes.len() < want {
            let last = first_page + pages - 1;
            return Err(task.corrupt(
                first_page + (bytes.len() / page_size) as u32,
                format!(
                    "short read: the file ends inside pages {first_page}..={last} (did it shrink during the scan?)"
                ),
            ));
        }
        for (k, page) in bytes[..want].chunks_exact(page_size).enumerate() {
            let page_no = first_page + k as u32;
            if only_leaves && !self.is_leaf(page_no) {
                report.wasted_bytes += page_size as u64;
                continue;
            }
            task.decoder
                .decode_page(page_no, page, &mut self.agg, &mut self.spills)
                .map_err(|what| task.corrupt(page_no, what))?;
            report.pages += 1;
        }
        while let Some(spill) = self.spills.pop() {
            self.follow_overflow(spill, report)?;
        }
        Ok(())
    }

    /// Whether `page` is one of the range's leaf pages (pages must be asked in file order).
    fn is_leaf(&mut self, page: u32) -> bool {
        let extents = &self.task.extents;
        while extents
            .get(self.extent_cursor)
            .is_some_and(|e| e.last_page() < page)
        {
            self.extent_cursor += 1;
        }
        extents
            .get(self.extent_cursor)
            .is_some_and(|e| e.first_page <= page)
    }

    /// Completes a record whose needed columns continue on overflow pages, reading the chain
    /// only as far as the needed columns reach.
    fn follow_overflow(&mut self, spill: Spill, report: &mut ExecutorReport) -> Result<()> {
        let task = self.task;
        let capacity = u64::from(task.usable - 4);
        let total = spill.payload_len;
        let mut payload = spill.local;
        let mut next = spill.first_overflow;
        let max_pages = (total - payload.len() as u64).div_ceil(capacity);
        let mut pages_read = 0u64;
        loop {
            let complete = payload.len() as u64 == total;
            match task
                .decoder
                .eval_record(&payload, complete, &mut self.agg)
                .map_err(|what| task.corrupt(spill.page, what))?
            {
                RecordOutcome::Done => return Ok(()),
                RecordOutcome::NeedMore => {}
            }
            if next == 0 || next > task.page_count || pages_read >= max_pages {
                return Err(task.corrupt(
                    spill.page,
                    format!("overflow chain reaches invalid page {next} after {pages_read} pages"),
                ));
            }
            self.read_page(next, "overflow page")?;
            let take = (total - payload.len() as u64).min(capacity) as usize;
            payload.extend_from_slice(&self.overflow_page[4..4 + take]);
            next = be_u32(&self.overflow_page, 0).unwrap_or(0);
            pages_read += 1;
            report.overflow_pages += 1;
            report.bytes_read += u64::from(task.page_size);
        }
    }
}

impl PageDecoder<'_> {
    /// Reads the latest committed copy of `page` into `self.overflow_page`, from the
    /// write-ahead log when it has one, else from the database file.
    fn read_page(&mut self, page: u32, what: &str) -> Result<()> {
        let task = self.task;
        let location = match &task.wal {
            Some(wal) => wal.location(page),
            None => PageLocation::Main(task.offset(page)),
        };
        self.overflow_page.resize(task.page_size as usize, 0);
        let (slot, path, offset) = match location {
            PageLocation::Main(offset) => (&mut self.overflow_file, &task.path, offset),
            PageLocation::Wal(offset) => {
                let wal = task.wal.as_ref().expect("a WAL location comes from a WAL");
                (&mut self.wal_file, &wal.path, offset)
            }
        };
        if slot.is_none() {
            let f = File::open(path)
                .map_err(|e| task.io_error(format!("open {}", path.display()), e))?;
            *slot = Some(f);
        }
        let file = slot.as_ref().expect("opened above");
        file.read_exact_at(&mut self.overflow_page, offset)
            .map_err(|e| task.io_error(format!("read {what} {page}"), e))
    }

    /// Decodes the range's pages whose latest copy is in the write-ahead log. A live log holds
    /// few pages (it is checkpointed every 1000 by default), so they are read one by one.
    pub(crate) fn decode_wal_pages(&mut self, report: &mut ExecutorReport) -> Result<()> {
        let task = self.task;
        for &(page, _) in &task.wal_pages {
            self.read_page(page, "page")?;
            let bytes = std::mem::take(&mut self.overflow_page);
            let decoded = self.decode_pages(page, 1, &bytes, report, false);
            self.overflow_page = bytes;
            decoded?;
            report.reads_submitted += 1;
            report.bytes_read += u64::from(task.page_size);
            report.wal_pages += 1;
        }
        Ok(())
    }
}

/// Records the final figures of an executor.
pub(crate) fn finish_report(
    report: &mut ExecutorReport,
    agg: &PartialAggregate,
    started: std::time::Instant,
    cpu_before: crate::cputime::CpuTime,
) {
    report.rows = agg.rows_scanned;
    report.rows_matched = agg.rows_matched;
    report.wall_s = started.elapsed().as_secs_f64();
    let used = crate::cputime::CpuTime::thread().since(cpu_before);
    report.user_s = used.user_s;
    report.sys_s = used.sys_s;
}

/// Runs an executor's scan on a plain thread (no io_uring): only `pread` and `mmap` can.
pub(crate) fn run_without_uring(
    task: &ExecutorTask,
    sync_capacity: usize,
) -> Result<(PartialAggregate, ExecutorReport)> {
    let open_error = |e: std::io::Error| task.io_error(format!("open for {}", task.backend), e);
    match task.backend {
        IoBackend::Mmap => pipeline::scan(
            task,
            MmapBackend::open(task, sync_capacity).map_err(open_error)?,
        ),
        _ => pipeline::scan(
            task,
            PreadBackend::open(task, sync_capacity, None).map_err(open_error)?,
        ),
    }
}

/// Runs one executor's scan with its backend on the current (pinned, glommio) thread.
pub(crate) async fn run(
    task: &ExecutorTask,
    sync_capacity: usize,
) -> Result<(PartialAggregate, ExecutorReport)> {
    let open_error = |e: std::io::Error| task.io_error(format!("open for {}", task.backend), e);
    match task.backend {
        IoBackend::Dma => {
            // A filesystem without O_DIRECT makes glommio's open fail with EINVAL; read the file
            // through the page cache instead.
            let why = if task.faults.odirect {
                "injected".to_string()
            } else {
                match dma::scan(task).await? {
                    dma::DmaScan::Done(done) => return Ok(*done),
                    dma::DmaScan::DirectRefused(why) => why,
                }
            };
            let notice = Some(format!(
                "O_DIRECT refused for this file ({why}): pread instead of dma"
            ));
            pipeline::scan(
                task,
                PreadBackend::open(task, sync_capacity, notice).map_err(open_error)?,
            )
        }
        IoBackend::Uring => {
            let b = UringBackend::open(task, sync_capacity).map_err(|e| {
                task.io_error(
                    format!(
                        "set up io_uring{}",
                        if task.sqpoll_cpu.is_some() {
                            " with SQPOLL"
                        } else {
                            ""
                        }
                    ),
                    e,
                )
            })?;
            pipeline::scan(task, b)
        }
        IoBackend::Pread => pipeline::scan(
            task,
            PreadBackend::open(task, sync_capacity, None).map_err(open_error)?,
        ),
        IoBackend::Mmap => pipeline::scan(
            task,
            MmapBackend::open(task, sync_capacity).map_err(open_error)?,
        ),
    }
}
