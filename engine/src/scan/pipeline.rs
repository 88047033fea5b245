//! The synchronous loop over the `uring`, `pread` and `mmap` backends: the readahead
//! schedule ([`ReadSchedule`]) and page decoder the `dma` loop drives too, over a
//! `SyncBackend`.
//!
//! Layering: a scan loop; uses the backends, the readahead schedule, `pages`, `task` and the
//! kernel trait, and is called only by the scan dispatch (`scan::run`).

use crate::backend::SyncBackend;
use crate::error::Result;
use crate::readahead::ReadSchedule;
use crate::scan::kernel::ScanKernel;
use crate::scan::pages::{PageDecoder, ThreadClock};
use crate::scan::task::{ExecutorReport, ExecutorTask};

/// Runs the scan of `task` through `backend` on the current thread, computing `kernel`.
pub(crate) fn scan<K: ScanKernel, B: SyncBackend>(
    task: &ExecutorTask,
    kernel: K,
    mut backend: B,
) -> Result<(K::Partial, ExecutorReport)> {
    let clock = ThreadClock::start(&task.faults);
    let mut report = ExecutorReport {
        cpu: task.cpu,
        parent_pages: task.parent_pages,
        parents_s: task.parents_s,
        backend: backend.name().to_string(),
        notice: backend.notice(),
        o_direct: backend.o_direct(),
        sqpoll_cpu: backend.sqpoll_cpu(),
        ..Default::default()
    };
    let mut schedule = ReadSchedule::new(
        &task.extents,
        task.max_read_pages,
        task.readahead,
        task.page_size(),
    );
    let mut decoder = PageDecoder::new(task, kernel);

    // Issues every read the window admits and the backend has room for, as one batch.
    let fill = |schedule: &mut ReadSchedule<'_>, backend: &mut B| -> Result<()> {
        while schedule.in_flight() < backend.capacity() {
            let Some(req) = schedule.issue() else { break };
            backend
                .start(task.byte_range(req))
                .map_err(|e| task.read_error(req, e))?;
        }
        if schedule.end_batch() > 0 {
            backend
                .flush()
                .map_err(|e| task.io_error("submit reads", &task.path, None, e))?;
        }
        Ok(())
    };

    loop {
        if !decoder.kernel.wants_more() {
            // The kernel has what it needs (a LIMIT): reads still in flight are dropped.
            break;
        }
        if schedule.fill_before_wait() {
            fill(&mut schedule, &mut backend)?;
        }
        let Some(req) = schedule.oldest() else {
            break;
        };
        let range = task.byte_range(req);
        backend.wait(range).map_err(|e| task.read_error(req, e))?;
        schedule.completed();
        if schedule.refill_after_completion() {
            fill(&mut schedule, &mut backend)?;
        }
        let decoded = decoder.decode(req.first_page, req.pages, backend.bytes(range), &mut report);
        // A file that shrank under the map reads as zeros: say that, not "corrupt page".
        backend.check().map_err(|e| task.read_error(req, e))?;
        if decoded.is_err() {
            backend
                .check_after_damage()
                .map_err(|e| task.read_error(req, e))?;
        }
        decoded?;
        backend.release();
        task.check_cancelled()?;
    }
    report.add_schedule(schedule.stats());
    report.add_backend(backend.stats());
    if decoder.kernel.wants_more() {
        decoder.decode_wal_pages(&mut report)?;
    }
    Ok(decoder.finish(report, clock))
}
