//! The synchronous loop shared by the `uring`, `pread` and `mmap` backends: the same read plan,
//! readahead window and decoder as the `dma` loop, over a `SyncBackend`.

use std::collections::VecDeque;
use std::time::Instant;

use crate::backend::SyncBackend;
use crate::cputime::CpuTime;
use crate::error::Result;
use crate::q6::PartialAggregate;
use crate::readahead::{bridge_pages, ReadPlan, ReadRequest, ReadaheadWindow};
use crate::scan::{finish_report, ExecutorReport, ExecutorTask, PageDecoder};

/// Runs the scan of `task` through `backend` on the current thread.
pub(crate) fn scan<B: SyncBackend>(
    task: &ExecutorTask,
    mut backend: B,
) -> Result<(PartialAggregate, ExecutorReport)> {
    let started = Instant::now();
    let cpu_before = CpuTime::thread();
    let mut report = ExecutorReport {
        cpu: task.cpu,
        backend: backend.name().to_string(),
        notice: backend.notice(),
        o_direct: backend.o_direct(),
        sqpoll_cpu: backend.sqpoll_cpu(),
        ..Default::default()
    };
    let bridge = bridge_pages(task.max_read_pages);
    let mut plan = ReadPlan::bridging(&task.extents, task.max_read_pages, bridge);
    let mut window = ReadaheadWindow::new(task.readahead, task.page_size);
    let mut in_flight: VecDeque<ReadRequest> = VecDeque::with_capacity(window.max_reads());
    let mut decoder = PageDecoder::new(task);

    let fill = |plan: &mut ReadPlan<'_>,
                window: &mut ReadaheadWindow,
                in_flight: &mut VecDeque<ReadRequest>,
                backend: &mut B,
                report: &mut ExecutorReport|
     -> Result<()> {
        let mut queued = 0;
        while in_flight.len() < backend.capacity() {
            match plan.peek() {
                Some(req) if window.admits(req.pages) => {
                    plan.next();
                    backend
                        .start(task, req)
                        .map_err(|e| task.io_error(read_op(req), e))?;
                    window.issued(req.pages);
                    in_flight.push_back(req);
                    queued += 1;
                    report.bytes_read += u64::from(req.pages) * u64::from(task.page_size);
                }
                _ => break,
            }
        }
        if queued > 0 {
            backend
                .flush()
                .map_err(|e| task.io_error("submit reads".into(), e))?;
            report.reads_submitted += queued;
            report.submit_batches += 1;
            report.max_in_flight_pages = report.max_in_flight_pages.max(window.in_flight_pages());
        }
        Ok(())
    };

    if task.readahead > 0 {
        fill(
            &mut plan,
            &mut window,
            &mut in_flight,
            &mut backend,
            &mut report,
        )?;
    }
    loop {
        if task.readahead == 0 {
            fill(
                &mut plan,
                &mut window,
                &mut in_flight,
                &mut backend,
                &mut report,
            )?;
        }
        let Some(req) = in_flight.pop_front() else {
            break;
        };
        backend
            .wait(task, req)
            .map_err(|e| task.io_error(read_op(req), e))?;
        window.completed(req.pages);
        if task.readahead > 0 && window.wants_refill() {
            fill(
                &mut plan,
                &mut window,
                &mut in_flight,
                &mut backend,
                &mut report,
            )?;
        }
        let bytes = backend.bytes(req);
        let decoded = decoder.decode(req.first_page, req.pages, bytes, &mut report);
        // A file that shrank under the map reads as zeros: say that, not "corrupt page".
        backend
            .check()
            .map_err(|e| task.io_error(read_op(req), e))?;
        decoded?;
        backend.release(req);
        task.check_cancelled()?;
    }
    backend.finish(&mut report);
    decoder.decode_wal_pages(&mut report)?;
    let agg = decoder.agg;
    finish_report(&mut report, &agg, started, cpu_before);
    Ok((agg, report))
}

fn read_op(req: ReadRequest) -> String {
    format!(
        "read pages {}..={}",
        req.first_page,
        req.first_page + req.pages - 1
    )
}
