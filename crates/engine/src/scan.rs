//! One executor's scan: DMA (`O_DIRECT`) reads through glommio with application readahead,
//! decoded in file order into a [`PartialAggregate`].
//!
//! The executor owns everything it touches: its file handle, its io_uring (glommio's, private to
//! the thread), its DMA buffers (from glommio's registered I/O memory) and its aggregate. Reads
//! come from a [`ReadPlan`] over its range's extents; a [`ReadaheadWindow`] keeps up to `readahead`
//! pages in flight while the decoder works, and all reads admitted at once are queued before the
//! task yields, so glommio's reactor submits them with one `io_uring_enter`.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use glommio::io::DmaFile;
use partitioner::format::be_u32;
use partitioner::Extent;
use serde::Serialize;

use crate::cputime::CpuTime;
use crate::decoder::{LeafDecoder, RecordOutcome, Spill};
use crate::error::{Error, Result};
use crate::inflight::InFlight;
use crate::q6::PartialAggregate;
use crate::readahead::{ReadPlan, ReadRequest, ReadaheadWindow};

/// What one executor is asked to do.
#[derive(Debug, Clone)]
pub(crate) struct ExecutorTask {
    pub cpu: usize,
    pub path: PathBuf,
    pub page_size: u32,
    pub page_count: u32,
    pub usable: u32,
    pub extents: Vec<Extent>,
    pub decoder: LeafDecoder,
    pub readahead: u32,
    pub max_read_pages: u32,
    pub cancel: Arc<AtomicBool>,
}

/// One executor's statistics.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ExecutorReport {
    /// The CPU the executor was pinned to.
    pub cpu: usize,
    /// Leaf pages decoded.
    pub pages: u64,
    /// Overflow pages read to reach columns stored beyond a cell's local payload.
    pub overflow_pages: u64,
    /// Rows examined.
    pub rows: u64,
    /// Rows that matched Q6.
    pub rows_matched: u64,
    /// Read requests handed to the ring.
    pub reads_submitted: u64,
    /// Groups of reads queued together and submitted by one reactor pass (one
    /// `io_uring_enter` at most per group).
    pub submit_batches: u64,
    /// Bytes requested (pages x page size).
    pub bytes_read: u64,
    /// Extra bytes read only to satisfy `O_DIRECT` alignment.
    pub wasted_bytes: u64,
    /// The most pages that were in flight at once.
    pub max_in_flight_pages: u32,
    /// Whether the file was really opened with `O_DIRECT` (false on tmpfs).
    pub o_direct: bool,
    /// Time from the executor's start to its last page.
    pub wall_s: f64,
    /// CPU time in user mode on the executor's thread.
    pub user_s: f64,
    /// CPU time in the kernel on the executor's thread.
    pub sys_s: f64,
}

impl ExecutorTask {
    fn io_error(&self, op: String, e: impl std::fmt::Display) -> Error {
        Error::Io {
            cpu: self.cpu,
            path: self.path.clone(),
            op,
            cause: e.to_string(),
        }
    }

    fn corrupt(&self, page: u32, what: String) -> Error {
        Error::Corrupt {
            cpu: self.cpu,
            path: self.path.clone(),
            page,
            what,
        }
    }

    fn offset(&self, page: u32) -> u64 {
        u64::from(page - 1) * u64::from(self.page_size)
    }
}

/// Runs the scan of `task` on the current glommio executor.
pub(crate) async fn scan_dma(task: &ExecutorTask) -> Result<(PartialAggregate, ExecutorReport)> {
    let started = Instant::now();
    let cpu_before = CpuTime::thread();
    let mut agg = PartialAggregate::default();
    let mut report = ExecutorReport {
        cpu: task.cpu,
        ..Default::default()
    };
    let file = Rc::new(
        DmaFile::open(&task.path)
            .await
            .map_err(|e| task.io_error("open for direct I/O".into(), e))?,
    );
    report.o_direct = has_o_direct(file.as_raw_fd());
    let align = file.alignment();
    let page_bytes = u64::from(task.page_size);

    let read = |req: ReadRequest| {
        let file = file.clone();
        let pos = task.offset(req.first_page);
        let len = u64::from(req.pages) * page_bytes;
        async move { (req, file.read_at(pos, len as usize).await) }
    };
    let mut plan = ReadPlan::new(&task.extents, task.max_read_pages);
    let mut window = ReadaheadWindow::new(task.readahead);
    let mut ring = InFlight::with_capacity(window.max_reads());
    let mut spills: Vec<Spill> = Vec::new();

    if task.readahead > 0 {
        fill(
            &mut plan,
            &mut window,
            &mut ring,
            &read,
            &mut report,
            align,
            page_bytes,
        )
        .await;
    }
    loop {
        if task.readahead == 0 {
            // One read at a time: the next read is issued only after the decoder is done.
            fill(
                &mut plan,
                &mut window,
                &mut ring,
                &read,
                &mut report,
                align,
                page_bytes,
            )
            .await;
        }
        let Some((req, result)) = ring.pop().await else {
            break;
        };
        window.completed(req.pages);
        if task.readahead > 0 && window.wants_refill() {
            // Put the next batch in flight before decoding this read, so the device works
            // while the CPU decodes.
            let queued = fill(
                &mut plan,
                &mut window,
                &mut ring,
                &read,
                &mut report,
                align,
                page_bytes,
            )
            .await;
            if queued > 0 {
                submit_now().await;
            }
        }
        let last = req.first_page + req.pages - 1;
        let buf = result
            .map_err(|e| task.io_error(format!("read pages {}..={last}", req.first_page), e))?;
        let want = req.pages as usize * task.page_size as usize;
        if buf.len() < want {
            return Err(task.corrupt(
                req.first_page + (buf.len() / task.page_size as usize) as u32,
                format!(
                    "short read: the file ends inside pages {}..={last} (did it shrink during the scan?)",
                    req.first_page
                ),
            ));
        }
        for (k, page) in buf[..want]
            .chunks_exact(task.page_size as usize)
            .enumerate()
        {
            let page_no = req.first_page + k as u32;
            task.decoder
                .decode_page(page_no, page, &mut agg, &mut spills)
                .map_err(|what| task.corrupt(page_no, what))?;
        }
        report.pages += u64::from(req.pages);
        drop(buf);
        for spill in spills.drain(..) {
            follow_overflow(task, &file, spill, &mut agg, &mut report).await?;
        }
        if task.cancel.load(Ordering::Relaxed) {
            return Err(Error::Cancelled { cpu: task.cpu });
        }
    }

    report.rows = agg.rows_scanned;
    report.rows_matched = agg.rows_matched;
    report.wall_s = started.elapsed().as_secs_f64();
    let used = CpuTime::thread().since(cpu_before);
    report.user_s = used.user_s;
    report.sys_s = used.sys_s;
    Ok((agg, report))
}

/// Hands the reads queued so far to the kernel now. glommio submits only when its reactor runs,
/// which happens when every task is waiting; while completed reads are waiting to be decoded
/// the scan task never waits, so new reads would sit in the queue and the device would idle.
/// A timer that expires at once makes the task wait for exactly one reactor pass.
async fn submit_now() {
    glommio::timer::sleep(std::time::Duration::from_nanos(1)).await;
}

/// Queues every read the window admits; they go to the kernel together when the task yields.
/// Returns how many were queued.
async fn fill<F: std::future::Future>(
    plan: &mut ReadPlan<'_>,
    window: &mut ReadaheadWindow,
    ring: &mut InFlight<F>,
    read: &impl Fn(ReadRequest) -> F,
    report: &mut ExecutorReport,
    align: u64,
    page_bytes: u64,
) -> u64 {
    let mut queued = 0;
    while ring.has_room() {
        match plan.peek() {
            Some(req) if window.admits(req.pages) => {
                plan.next();
                window.issued(req.pages);
                ring.push(read(req)).await;
                queued += 1;
                let pos = u64::from(req.first_page - 1) * page_bytes;
                let len = u64::from(req.pages) * page_bytes;
                report.bytes_read += len;
                report.wasted_bytes += align_up(pos + len, align) - (pos - pos % align) - len;
            }
            _ => break,
        }
    }
    if queued > 0 {
        report.reads_submitted += queued;
        report.submit_batches += 1;
        report.max_in_flight_pages = report.max_in_flight_pages.max(window.in_flight_pages());
    }
    queued
}

fn align_up(v: u64, align: u64) -> u64 {
    v.div_ceil(align) * align
}

/// Completes a record whose needed columns continue on overflow pages, reading the chain one
/// page at a time only as far as the needed columns reach.
async fn follow_overflow(
    task: &ExecutorTask,
    file: &DmaFile,
    spill: Spill,
    agg: &mut PartialAggregate,
    report: &mut ExecutorReport,
) -> Result<()> {
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
            .eval_record(&payload, complete, agg)
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
        let page = file
            .read_at(task.offset(next), task.page_size as usize)
            .await
            .map_err(|e| task.io_error(format!("read overflow page {next}"), e))?;
        if page.len() < task.usable as usize {
            return Err(task.corrupt(next, "short read of an overflow page".into()));
        }
        let take = (total - payload.len() as u64).min(capacity) as usize;
        payload.extend_from_slice(&page[4..4 + take]);
        next = be_u32(&page, 0).unwrap_or(0);
        pages_read += 1;
        report.overflow_pages += 1;
        report.reads_submitted += 1;
        report.submit_batches += 1;
        report.bytes_read += u64::from(task.page_size);
    }
}

fn has_o_direct(fd: i32) -> bool {
    // SAFETY: F_GETFL on a file descriptor we own has no side effects.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_DIRECT != 0
}
