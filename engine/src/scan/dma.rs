//! The `dma` loop: glommio's `DmaFile` (`O_DIRECT`) on the executor's own glommio io_uring,
//! reading into DMA buffers from glommio's registered I/O memory.
//!
//! Reads come from a [`ReadPlan`] over the executor's extents; a [`ReadaheadWindow`] keeps up to
//! `readahead` pages in flight while the decoder works. The window is refilled in batches that
//! are handed to the kernel at once, so one `io_uring_enter` carries several reads.

use std::future::Future;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use glommio::io::DmaFile;
use glommio::timer::Timer;

use crate::cputime::CpuTime;
use crate::error::Result;
use crate::hugepages::huge_page_bytes;
use crate::inflight::InFlight;
use crate::q6::PartialAggregate;
use crate::readahead::{bridge_pages, ReadPlan, ReadRequest, ReadaheadWindow};
use crate::scan::{finish_report, ExecutorReport, ExecutorTask, PageDecoder};

/// How a `dma` scan ended, when it did not fail.
pub(crate) enum DmaScan {
    /// The scan ran (through the page cache when the filesystem refused `O_DIRECT` and glommio
    /// fell back to buffered reads, as it does on tmpfs; the report says so).
    Done(Box<(PartialAggregate, ExecutorReport)>),
    /// glommio could not open the file at all with `EINVAL`, which some filesystems return
    /// for `O_DIRECT`; the caller reads through the page cache instead.
    DirectRefused(String),
}

/// The errno behind a glommio error, when it wraps one.
fn os_error<T>(e: &glommio::GlommioError<T>) -> Option<i32> {
    match e {
        glommio::GlommioError::IoError(io) => io.raw_os_error(),
        glommio::GlommioError::EnhancedIoError { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

/// Runs the scan of `task` on the current glommio executor.
pub(crate) async fn scan(task: &ExecutorTask) -> Result<DmaScan> {
    let started = Instant::now();
    let cpu_before = CpuTime::thread();
    let mut report = ExecutorReport {
        cpu: task.cpu,
        backend: "dma".into(),
        ..Default::default()
    };
    let file = match DmaFile::open(&task.path).await {
        Ok(file) => Rc::new(file),
        Err(e) if os_error(&e) == Some(libc::EINVAL) => {
            return Ok(DmaScan::DirectRefused(e.to_string()))
        }
        Err(e) => return Err(task.io_error("open for direct I/O".into(), e)),
    };
    report.o_direct = crate::backend::has_o_direct(file.as_raw_fd());
    if !report.o_direct {
        report.notice =
            Some("O_DIRECT refused for this file: glommio reads it through the page cache".into());
    }
    let align = file.alignment();
    let page_bytes = u64::from(task.page_size);

    let read = |req: ReadRequest| {
        let file = file.clone();
        let pos = task.offset(req.first_page);
        let len = u64::from(req.pages) * page_bytes;
        async move { (req, file.read_at(pos, len as usize).await) }
    };
    let bridge = bridge_pages(task.max_read_pages);
    let mut plan = ReadPlan::bridging(&task.extents, task.max_read_pages, bridge);
    let mut window = ReadaheadWindow::new(task.readahead, task.page_size);
    let mut ring = InFlight::with_capacity(window.max_reads());
    let mut decoder = PageDecoder::new(task);
    let mut refill = Refill {
        report: &mut report,
        align,
        page_bytes,
    };

    if task.readahead > 0 {
        refill.fill(&mut plan, &mut window, &mut ring, &read).await;
    }
    let mut buffers_checked = false;
    loop {
        if task.readahead == 0 {
            // One read at a time: the next read is issued only after the decoder is done.
            refill.fill(&mut plan, &mut window, &mut ring, &read).await;
        }
        let Some((req, result)) = ring.pop().await else {
            break;
        };
        window.completed(req.pages);
        if task.readahead > 0
            && window.wants_refill()
            && refill.fill(&mut plan, &mut window, &mut ring, &read).await > 0
        {
            // Put the next batch in flight before decoding this read, so the device works
            // while the CPU decodes.
            submit_now().await;
        }
        let last = req.first_page + req.pages - 1;
        let buf = result
            .map_err(|e| task.io_error(format!("read pages {}..={last}", req.first_page), e))?;
        if !buffers_checked {
            // Once (smaps is read once even when it cannot tell): glommio's registered I/O
            // memory comes from the global allocator, on huge pages when the binary installs
            // `HugePageAlloc`.
            buffers_checked = true;
            refill.report.huge_page_buffers = huge_page_bytes(buf.as_ptr()).map(|b| b > 0);
        }
        decoder.decode(req.first_page, req.pages, &buf, refill.report)?;
        drop(buf);
        task.check_cancelled()?;
    }
    decoder.decode_wal_pages(&mut report)?;
    let agg = decoder.agg;
    finish_report(&mut report, &agg, started, cpu_before);
    Ok(DmaScan::Done(Box::new((agg, report))))
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

/// The future behind [`submit_now`]: pending once, ready on the next poll, whichever event
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

/// Issues reads into the ring and accounts for them.
struct Refill<'r> {
    report: &'r mut ExecutorReport,
    align: u64,
    page_bytes: u64,
}

impl Refill<'_> {
    /// Queues every read the window admits; they go to the kernel together when the task
    /// yields. Returns how many were queued.
    async fn fill<F: std::future::Future>(
        &mut self,
        plan: &mut ReadPlan<'_>,
        window: &mut ReadaheadWindow,
        ring: &mut InFlight<F>,
        read: &impl Fn(ReadRequest) -> F,
    ) -> u64 {
        let mut queued = 0;
        while ring.has_room() {
            match plan.peek() {
                Some(req) if window.admits(req.pages) => {
                    plan.next();
                    window.issued(req.pages);
                    ring.push(read(req)).await;
                    queued += 1;
                    let pos = u64::from(req.first_page - 1) * self.page_bytes;
                    let len = u64::from(req.pages) * self.page_bytes;
                    self.report.bytes_read += len;
                    let aligned_end = (pos + len).div_ceil(self.align) * self.align;
                    self.report.wasted_bytes += aligned_end - (pos - pos % self.align) - len;
                }
                _ => break,
            }
        }
        if queued > 0 {
            self.report.reads_submitted += queued;
            self.report.submit_batches += 1;
            self.report.max_in_flight_pages = self
                .report
                .max_in_flight_pages
                .max(window.in_flight_pages());
        }
        queued
    }
}
