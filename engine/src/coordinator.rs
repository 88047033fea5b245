//! The coordinator: plans the executors, starts one pinned glommio executor per planned CPU,
//! hands each its kernel ([`ScanKernel`]: clones of one for [`run_scan`], one per range for
//! [`run_scan_with`]), collects their partial results over a channel and returns them in range
//! order with a [`RunReport`]. [`run_scan_with`] also runs a consumer on the calling thread
//! while the executors scan (the streamed rows of a projection, `crate::query::stream`), with
//! ranges cut in file order or in b-tree key order ([`RangeOrder`]).
//!
//! Executors share nothing mutable but a cancellation mark: the first one to fail sets it, the
//! others stop at their next read (in a key-ordered run only the ranges after the failed one,
//! whose output would come after the error), and the run ends with that first error, which
//! names the CPU, the page and the cause. A panicking executor is caught and reported the same way; the
//! coordinator always receives exactly one message per executor, so it never waits forever.
//!
//! Layering: the top of the generic engine. It uses the settings, the backend policy
//! (`crate::backend::policy`, one resolved choice with all its notices), the scan loops and
//! the reports; nothing below imports it. Queries (such as [`crate::q6`]) are built on
//! [`run_scan`].

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::unbounded;
use futures_lite::FutureExt;
use partitioner::{Share, TablePlan};

pub use crate::settings::available_cpus;

use crate::backend::policy::{self, Runtime};
use crate::counters::HwCounters;
use crate::cputime::{peak_rss_mib, process_start, CpuTime};
use crate::device::BlockDevice;
use crate::error::{Error, Result};
use crate::pool;
use crate::readahead::max_read_pages;
use crate::report::{IoReport, RunReport, SnapshotReport};
use crate::scan::task::Cancel;
use crate::scan::{self, Arrival, ExecutorReport, ExecutorTask, ScanKernel, StartGate};
use crate::settings::{list_cpus, ExecutorSpec, ScanSettings};

/// Scans `plan`'s table with one executor per entry of `executors`, each computing a clone of
/// `kernel` over its range of leaf pages (cut by page number, read in file order). Returns each
/// executor's partial in range order (range 0, the table's first leaf pages, first) and the
/// run's report.
pub fn run_scan<K: ScanKernel>(
    plan: &TablePlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    kernel: K,
) -> Result<(Vec<K::Partial>, RunReport)> {
    run_scan_in(plan, settings, executors, RangeOrder::File, kernel)
}

/// [`run_scan`] with the leaves cut into ranges in `order`.
pub fn run_scan_in<K: ScanKernel>(
    plan: &TablePlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    order: RangeOrder,
    kernel: K,
) -> Result<(Vec<K::Partial>, RunReport)> {
    let (partials, report, ()) = run_scan_with(
        plan,
        settings,
        executors,
        order,
        |_| kernel.clone(),
        || ((), executors.len()),
    )?;
    let partials = partials
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            p.ok_or_else(|| Error::Start {
                cpu: executors[i].cpu,
                cause: "the executor thread ended without reporting".into(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((partials, report))
}

/// What [`run_scan_with`] returns: the partials in range order (`None` for an executor that
/// did not finish), the run's report, and what the consumer returned.
pub type ScanWith<P, T> = (Vec<Option<P>>, RunReport, T);

/// What one executor ends with.
type Outcome<P> = Result<(P, ExecutorReport)>;

/// How the leaves are cut into ranges and in which order an executor reads and decodes its
/// range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeOrder {
    /// Ranges cut from the leaves by page number, each read in file order: the most
    /// coalesced I/O, for kernels that do not care in which order rows come.
    File,
    /// Ranges cut from the leaves in b-tree order
    /// ([`partitioner::TablePlan::split_in_key_order`]), each read and decoded in that order,
    /// so that range 0's rows, then range 1's, ... are the table in rowid order, whatever the
    /// order of the leaves in the file. An executor that fails cancels only the executors
    /// after it: the output before a failure still comes out.
    Key,
}

/// [`run_scan`] with a kernel per executor (`kernel_for(index)`), ranges in `order`, and
/// `consume` run on the calling thread while the executors scan (a consumer of rows the
/// kernels stream through channels of their own). `consume` returns its value and how many
/// executors, from range 0, its answer depends on: the errors of the others are ignored (a
/// `LIMIT` reached in range 2 does not depend on a damaged page in range 3), and their
/// partials may be missing. The partials come back in range order, `None` for an executor
/// that did not finish.
pub fn run_scan_with<K: ScanKernel, T>(
    plan: &TablePlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    order: RangeOrder,
    mut kernel_for: impl FnMut(usize) -> K,
    consume: impl FnOnce() -> (T, usize),
) -> Result<ScanWith<K::Partial, T>> {
    if executors.is_empty() {
        return Err(Error::Config("at least one executor is needed".into()));
    }
    settings.validate()?;
    let available = available_cpus();
    for e in executors {
        if !available.is_empty() && !available.contains(&e.cpu) {
            return Err(Error::Config(format!(
                "CPU {} is not available to this process (available: {})",
                e.cpu,
                list_cpus(&available)
            )));
        }
    }
    let mut seen = std::collections::HashSet::new();
    let oversubscribed =
        executors.len() > available.len().max(1) || !executors.iter().all(|e| seen.insert(e.cpu));

    let header = &plan.header;
    let weights: Vec<u32> = executors.iter().map(|e| e.weight).collect();
    // A plan that left the leaf-parent level to the scan is cut into runs of that level,
    // which each executor reads on its own CPU (ExecutorTask::prepare).
    let shares = plan.shares(&weights, matches!(order, RangeOrder::Key))?;
    let max_read = max_read_pages(settings.coalesce_kib, header.page_size);
    let cancel = Arc::new(Cancel::new());
    let faults = settings.faults;
    let window_bytes = (u64::from(settings.readahead.max(1)) + u64::from(max_read) + 2)
        * u64::from(header.page_size);
    let io = policy::resolve(plan, settings, executors, &available, window_bytes, &faults)?;
    let backend = io.backend;
    // Reads in flight per executor for the synchronous backends: enough for a full window of
    // the largest reads, with room for smaller ones at extent ends.
    let window = settings.readahead.max(1);
    let sync_capacity = ((window / max_read) * 2 + 2).min(window + 1) as usize;

    // Device counters are read right before the executors start and right after they finish.
    let device = BlockDevice::for_file(&plan.path).and_then(|d| {
        let before = d.read()?;
        Ok((d, before, Instant::now()))
    });
    let cpu_before = CpuTime::process();
    let started = Instant::now();
    let ring_depth = (settings.readahead.max(1) as usize + 8)
        .next_power_of_two()
        .clamp(128, 4096);

    // A cold scan's executors read their parents first, all of them, then the leaves.
    let parents_shared = shares.iter().any(|s| matches!(s, Share::Parents(_)));
    let gate = (parents_shared && !io.cached && executors.len() > 1)
        .then(|| StartGate::new(executors.len()));
    let (tx, rx) = unbounded::<(usize, Result<(K::Partial, ExecutorReport)>)>();
    let mut handles = Vec::with_capacity(executors.len());
    let wal = plan.wal.clone().map(Arc::new);
    for (index, (spec, share)) in executors.iter().zip(shares).enumerate() {
        let (extents, parents) = match share {
            Share::Leaves(range) => (range.extents, None),
            Share::Parents(parents) => (Vec::new(), Some(parents)),
        };
        let mut task = ExecutorTask {
            index,
            cpu: spec.cpu,
            path: plan.path.clone(),
            header: header.clone(),
            extents,
            parents,
            parent_pages: 0,
            parents_s: 0.0,
            gate: gate.clone().map(|g| Arc::new(Arrival(g))),
            order: Vec::new(),
            wal_pages: Vec::new(),
            wal: wal.clone(),
            readahead: settings.readahead,
            hints: settings.readahead > 0 && !io.cached,
            max_read_pages: max_read,
            backend,
            sqpoll_cpu: io.sqpoll_cpus[index],
            faults,
            cancel: cancel.clone(),
        };
        let kernel = kernel_for(index);
        let (exec_tx, exec_cancel) = (tx.clone(), cancel.clone());
        let report = move |result: std::thread::Result<Result<_>>, cpu: usize| {
            let result = result.unwrap_or_else(|payload| {
                Err(Error::Panicked {
                    cpu,
                    message: panic_message(payload.as_ref()),
                })
            });
            if result.is_err() {
                match order {
                    RangeOrder::File => exec_cancel.all(),
                    RangeOrder::Key => exec_cancel.after(index),
                }
            }
            let _ = exec_tx.send((index, result));
        };
        let name = format!("corescan-cpu{}", spec.cpu);
        let spawned = match io.runtime {
            Runtime::Glommio => {
                let key = pool::Key {
                    cpu: spec.cpu,
                    ring_depth,
                    io_memory: io.io_memory,
                };
                let job: pool::Job = Box::new(move || {
                    Box::pin(async move {
                        let cpu = task.cpu;
                        let outcome = AssertUnwindSafe(async move {
                            task.prepare()?;
                            scan::run(&task, kernel, sync_capacity).await
                        })
                        .catch_unwind()
                        .await;
                        report(outcome, cpu);
                    })
                });
                pool::Executor::start(key, &name, job).map(Worker::Pooled)
            }
            Runtime::Threads => std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    let pinned =
                        core_affinity::set_for_current(core_affinity::CoreId { id: task.cpu });
                    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        if !pinned {
                            return Err(Error::Start {
                                cpu: task.cpu,
                                cause: "cannot pin the thread to this CPU".into(),
                            });
                        }
                        // On its own CPU: the threads do this work at once, not in turn.
                        task.prepare()?;
                        scan::run_without_uring(&task, kernel, sync_capacity)
                    }));
                    report(outcome, task.cpu);
                })
                .map(Worker::Thread)
                .map_err(|e| e.to_string()),
        };
        match spawned {
            Ok(h) => handles.push((spec.cpu, h)),
            Err(e) => {
                match order {
                    RangeOrder::File => cancel.all(),
                    RangeOrder::Key => cancel.after(index),
                }
                let _ = tx.send((
                    index,
                    Err(Error::Start {
                        cpu: spec.cpu,
                        cause: e,
                    }),
                ));
            }
        }
    }
    drop(tx);
    let (consumed, matters) = consume();
    let matters = matters.min(executors.len());

    let mut outcomes: Vec<Option<Outcome<K::Partial>>> =
        (0..executors.len()).map(|_| None).collect();
    // Every executor sends exactly one message, even when it panics; if a thread dies before
    // sending (glommio failing to build its reactor), its sender drops and recv ends early.
    for _ in 0..executors.len() {
        let Ok((index, result)) = rx.recv() else {
            break;
        };
        outcomes[index] = Some(result);
    }
    let wall = started.elapsed().as_secs_f64();
    let mut first_error = first_error(order, &mut outcomes[..matters]);
    for (cpu, h) in handles {
        if let Err(cause) = h.join() {
            first_error.get_or_insert(Error::Start { cpu, cause });
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let cpu_time = CpuTime::process().since(cpu_before);
    let (device, device_note) =
        match device.and_then(|(d, before, at)| Ok(d.report(before, d.read()?, at.elapsed()))) {
            Ok(report) => (Some(report), None),
            Err(reason) => (None, Some(reason)),
        };
    // Without SQLite's locks (verify-retry), pages read before and after a commit or
    // checkpoint could mix two versions of the table; under the locks this is a no-op.
    plan.check_unchanged()?;

    let mut results = Vec::with_capacity(executors.len());
    let mut reports = Vec::with_capacity(executors.len());
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Some(Ok((partial, report))) => {
                results.push(Some(partial));
                reports.push(report);
            }
            None if i < matters => {
                return Err(Error::Start {
                    cpu: executors[i].cpu,
                    cause: "the executor thread ended without reporting".into(),
                })
            }
            _ => results.push(None),
        }
    }
    let sum = |f: fn(&ExecutorReport) -> u64| reports.iter().map(f).sum::<u64>();
    let bytes_read = sum(|r| r.bytes_read);
    let leaf_pages = sum(|r| r.pages);
    let overflow = sum(|r| r.overflow_pages);
    let rows = sum(|r| r.rows);
    let o_direct = reports.iter().all(|r| r.o_direct);
    let mut notices = io.notices;
    notices.extend(plan.read.notice.clone());
    // A fallback inside an executor (O_DIRECT or SQPOLL refused) changes what ran.
    notices.extend(reports.iter().find_map(|r| r.notice.clone()));
    let ran = reports
        .first()
        .map_or(backend.name().to_string(), |r| r.backend.clone());
    let enters: Option<u64> = reports.iter().map(|r| r.io_uring_enters).sum();
    let sqpoll_cpu = reports.iter().find_map(|r| r.sqpoll_cpu);
    let first_page = reports.iter().filter_map(|r| r.first_page_at).min();
    let report = RunReport {
        path: plan.path.display().to_string(),
        table: plan.table.name.clone(),
        rows_scanned: rows,
        wall_s: wall,
        gb_per_s: bytes_read as f64 / wall.max(1e-9) / 1e9,
        rows_per_s: rows as f64 / wall.max(1e-9),
        pages_read: leaf_pages + overflow,
        overflow_pages_read: overflow,
        wal_pages_read: sum(|r| r.wal_pages),
        bytes_read,
        reads_submitted: sum(|r| r.reads_submitted),
        submit_batches: sum(|r| r.submit_batches),
        io_uring_enters: enters,
        wasted_pages: sum(|r| r.wasted_bytes).div_ceil(u64::from(header.page_size)),
        io: IoReport {
            backend: ran,
            o_direct,
            huge_page_buffers: reports
                .iter()
                .map(|r| r.huge_page_buffers)
                .collect::<Option<Vec<bool>>>()
                .map(|all| all.iter().all(|&h| h)),
            sqpoll: sqpoll_cpu.is_some(),
            sqpoll_cpu,
            sqpoll_cpu_s: reports
                .iter()
                .filter_map(|r| r.sqpoll_cpu_s)
                .reduce(|a, b| a + b),
            readahead: settings.readahead,
            coalesce_kib: settings.coalesce_kib,
            max_read_pages: max_read,
            notice: (!notices.is_empty()).then(|| notices.join("; ")),
        },
        counters: HwCounters::sum(reports.iter().map(|r| &r.counters)),
        first_page_s: first_page.map(|t| t.duration_since(started).as_secs_f64()),
        first_page_since_process_start_s: first_page
            .zip(process_start())
            .map(|(t, p)| t.checked_duration_since(p).map_or(0.0, |d| d.as_secs_f64())),
        executors: reports,
        device,
        device_note,
        cpu_time,
        peak_rss_mib: peak_rss_mib(),
        available_cpus: available.len(),
        oversubscribed,
        snapshot: SnapshotReport::of(&plan.read),
    };
    Ok((results, report, consumed))
}

/// The error a run ends with, taken out of `outcomes` (the executors the answer depends on):
/// in file order the first that is not a cancellation (the cause, not its echo); in key order
/// the lowest range's, as the rows before it were the output.
fn first_error<P>(order: RangeOrder, outcomes: &mut [Option<Result<P>>]) -> Option<Error> {
    let failed = |o: &Option<Result<P>>, cancelled: bool| matches!(o, Some(Err(e)) if matches!(e, Error::Cancelled { .. }) == cancelled);
    let at = match order {
        RangeOrder::File => outcomes
            .iter()
            .position(|o| failed(o, false))
            .or_else(|| outcomes.iter().position(|o| failed(o, true))),
        RangeOrder::Key => outcomes.iter().position(|o| matches!(o, Some(Err(_)))),
    }?;
    match outcomes[at].take() {
        Some(Err(e)) => Some(e),
        _ => None,
    }
}

/// An executor running a scan's range.
enum Worker {
    /// A glommio executor of the pool ([`crate::pool`]), given back when its range is done.
    Pooled(pool::Executor),
    /// A plain pinned thread (no io_uring).
    Thread(std::thread::JoinHandle<()>),
}

impl Worker {
    /// Waits for a plain thread; gives a pooled executor back (its job has reported).
    fn join(self) -> std::result::Result<(), String> {
        match self {
            Worker::Pooled(e) => {
                e.release();
                Ok(())
            }
            Worker::Thread(h) => h.join().map_err(|p| panic_message(p.as_ref())),
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}
