//! The `dma` loop: glommio's `DmaFile` (`O_DIRECT`) on the executor's own glommio io_uring,
//! reading into DMA buffers from glommio's registered I/O memory.
//!
//! The loop drives the same readahead state machine as the synchronous loop
//! ([`ReadSchedule`]): it keeps up to `readahead` pages in flight while the decoder works and
//! refills the window in batches that are handed to the kernel at once, so one
//! `io_uring_enter` carries several reads. What is particular to glommio: each read is a
//! future kept in an [`InFlight`] ring, and after each refill the loop makes glommio submit at
//! once (see `submit_now`).
//!
//! Layering: a scan loop (it owns the executor's control flow, so it lives here and not among
//! the backends); uses the readahead schedule, `pages`, `task` and the kernel trait.

use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use glommio::io::DmaFile;
use glommio::timer::Timer;

use crate::error::Result;
use crate::hugepages::huge_page_bytes;
use crate::inflight::InFlight;
use crate::readahead::{ReadRequest, ReadSchedule};
use crate::scan::kernel::ScanKernel;
use crate::scan::pages::{PageDecoder, ThreadClock};
use crate::scan::task::{ExecutorReport, ExecutorTask};

/// How a `dma` scan ended, when it did not fail.
pub(crate) enum DmaScan<K: ScanKernel> {
    /// The scan ran (through the page cache when the filesystem refused `O_DIRECT` and glommio
    /// fell back to buffered reads, as it does on tmpfs; the report says so).
    Done(Box<(K::Partial, ExecutorReport)>),
    /// glommio could not open the file at all with `EINVAL`, which some filesystems return
    /// for `O_DIRECT`; the caller reads through the page cache instead, with the kernel given
    /// back untouched.
    DirectRefused(io::Error, K),
}

/// The operating system's error behind a glommio error, with its kind and errno kept (glommio's
/// own conversion keeps the kind only, for errors it enhanced with context we add ourselves).
fn into_io_error<T>(e: glommio::GlommioError<T>) -> io::Error {
    match e {
        glommio::GlommioError::IoError(io) => io,
        glommio::GlommioError::EnhancedIoError { source, .. } => source,
        other => other.into(),
    }
}

/// Runs the scan of `task` on the current glommio executor, computing `kernel`.
pub(crate) async fn scan<K: ScanKernel>(task: &ExecutorTask, kernel: K) -> Result<DmaScan<K>> {
    let clock = ThreadClock::start(&task.faults);
    let mut report = ExecutorReport {
        cpu: task.cpu,
        parent_pages: task.parent_pages,
        parents_s: task.parents_s,
        backend: "dma".into(),
        ..Default::default()
    };
    let file = match DmaFile::open(&task.path).await.map_err(into_io_error) {
        Ok(file) => Rc::new(file),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            return Ok(DmaScan::DirectRefused(e, kernel))
        }
        Err(e) => return Err(task.io_error("open for direct I/O", &task.path, None, e)),
    };
    report.o_direct = crate::backend::has_o_direct(file.as_raw_fd());
    if !report.o_direct {
        report.notice =
            Some("O_DIRECT refused for this file: glommio reads it through the page cache".into());
    }
    let align = file.alignment();

    let read = |req: ReadRequest| {
        let file = file.clone();
        let range = task.byte_range(req);
        async move { (req, file.read_at(range.offset, range.len).await) }
    };
    let mut schedule = ReadSchedule::new(
        &task.extents,
        task.max_read_pages,
        task.readahead,
        task.page_size(),
    );
    let mut ring = InFlight::with_capacity(schedule.max_reads());
    let mut decoder = PageDecoder::new(task, kernel);

    let mut first_buffer: Option<usize> = None;
    loop {
        if !decoder.kernel.wants_more() {
            // The kernel has what it needs (a LIMIT): reads still in flight are dropped.
            break;
        }
        if schedule.fill_before_wait() {
            // The start, or one read at a time: the next read goes out after the decoder.
            report.wasted_bytes += fill(&mut schedule, &mut ring, &read, task, align).await;
        }
        let Some((req, result)) = ring.pop().await else {
            break;
        };
        schedule.completed();
        if schedule.refill_after_completion() {
            let before = schedule.stats().reads_submitted;
            report.wasted_bytes += fill(&mut schedule, &mut ring, &read, task, align).await;
            if schedule.stats().reads_submitted > before {
                // Put the next batch in flight before decoding this read, so the device works
                // while the CPU decodes.
                submit_now().await;
            }
        }
        let buf = result.map_err(|e| task.read_error(req, into_io_error(e)))?;
        // Where glommio's registered I/O memory lies, checked after the scan: reading smaps
        // costs milliseconds with big mappings, which the first page must not wait for.
        first_buffer.get_or_insert(buf.as_ptr() as usize);
        decoder.decode(req.first_page, req.pages, &buf, &mut report)?;
        drop(buf);
        task.check_cancelled()?;
    }
    report.add_schedule(schedule.stats());
    if decoder.kernel.wants_more() {
        decoder.decode_wal_pages(&mut report)?;
    }
    // glommio's registered I/O memory comes from the global allocator, on huge pages when the
    // binary installs `HugePageAlloc`; it lives as long as the executor, so the address of the
    // first buffer still names it.
    report.huge_page_buffers = first_buffer
        .and_then(|addr| huge_page_bytes(addr as *const u8))
        .map(|b| b > 0);
    Ok(DmaScan::Done(Box::new(decoder.finish(report, clock))))
}

/// Queues every read the window admits into the ring, as one batch; they go to the kernel
/// together when the task yields. Returns the `O_DIRECT` alignment padding they read.
async fn fill<F: Future>(
    schedule: &mut ReadSchedule<'_>,
    ring: &mut InFlight<F>,
    read: &impl Fn(ReadRequest) -> F,
    task: &ExecutorTask,
    align: u64,
) -> u64 {
    let mut padding = 0;
    while ring.has_room() {
        let Some(req) = schedule.issue() else { break };
        ring.push(read(req)).await;
        let range = task.byte_range(req);
        let (pos, len) = (range.offset, range.len as u64);
        let aligned_end = (pos + len).div_ceil(align) * align;
        padding += aligned_end - (pos - pos % align) - len;
    }
    schedule.end_batch();
    padding
}

/// Hands the reads queued so far to the kernel now. glommio moves queued I/O into its ring only
/// between task runs, when no task is runnable (or every preemption period, 100 ms by default).
/// A scan task whose next read has already completed never waits, so without this its new reads
/// would sit in glommio's queue until the window had drained and then go out as one batch, which
/// the block layer merges into one huge request: one request in flight per executor and an idle
/// device while the window refills (seen in `/sys/block/<disk>/inflight` and in `strace`: 32
/// reads per `io_uring_enter`). A timer that is still running when first polled makes the task
/// wait, which gives the reactor its pass; an already expired one (such as a 1 ns timer) would
/// not.
fn submit_now() -> ReactorPass {
    ReactorPass { timer: None }
}

/// The future behind `submit_now`: pending once, ready on the next poll, whichever event
/// (the short timer or a completed read) wakes the task.
struct ReactorPass {
    timer: Option<Timer>,
}

/// How long [`ReactorPass`] waits at most when nothing else wakes the task.
const REACTOR_PASS: Duration = Duration::from_micros(20);

impl Future for ReactorPass {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.timer.is_some() {
            // Second poll: the reactor has run (the task was woken by it).
            return Poll::Ready(());
        }
        let timer = self.timer.insert(Timer::new(REACTOR_PASS));
        match Pin::new(timer).poll(cx) {
            // Too slow to catch a 20 us timer before it expires: carry on without the pass.
            Poll::Ready(_) => Poll::Ready(()),
            Poll::Pending => Poll::Pending,
        }
    }
}
