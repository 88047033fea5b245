//! The coordinator: plans the executors, starts one pinned glommio executor per planned CPU,
//! collects their partial aggregates over a channel and merges them into a [`ScanReport`].
//!
//! Executors share nothing mutable but a cancellation flag: the first one to fail sets it, the
//! others stop at their next read, and the run ends with that first error, which names the CPU,
//! the page and the cause. A panicking executor is caught and reported the same way; the
//! coordinator always receives exactly one message per executor, so it never waits forever.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::unbounded;
use futures_lite::FutureExt;
use glommio::{LocalExecutorBuilder, Placement};
use partitioner::wal::WalIndex;
use partitioner::{DefaultValue, Extent, TablePlan};

use crate::backend::policy::{
    choose_backend, io_memory_budget, io_uring_available, sqpoll_placement, MIN_IO_MEMORY,
};
use crate::backend::{IoBackend, SqpollMode};
use crate::cputime::{peak_rss_mib, CpuTime};
use crate::datatype3::{Affinity, Collation};
use crate::decoder::{LeafDecoder, MissingValue, Q6ColumnTypes, Q6Columns};
use crate::device::BlockDevice;
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::q6::{PartialAggregate, Q6Filter, Q6Params};
use crate::readahead::max_read_pages;
use crate::report::{IoReport, ScanReport};
use crate::scan::{self, ExecutorReport, ExecutorTask};

/// Which backend to use, or `Auto` to decide from the page cache (see [`crate::backend::residency`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoChoice {
    /// Always this backend.
    Fixed(IoBackend),
    /// `dma` when the table's pages are not in the page cache, `mmap` when they are.
    Auto,
}

impl From<partitioner::topology::IoMode> for IoChoice {
    fn from(mode: partitioner::topology::IoMode) -> Self {
        IoBackend::from_mode(mode).map_or(IoChoice::Auto, IoChoice::Fixed)
    }
}

/// How each executor reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanSettings {
    /// Pages kept in flight ahead of the decoder; 0 = one read at a time.
    pub readahead: u32,
    /// Adjacent pages of an extent are merged into reads of up to this many KiB; 0 = one read
    /// per page (the block layer may still merge concurrent reads).
    pub coalesce_kib: u32,
    /// The I/O backend.
    pub io: IoChoice,
    /// Whether the `uring` backend uses a kernel SQ poll thread.
    pub sqpoll: SqpollMode,
}

impl ScanSettings {
    /// The defaults for a file with `page_size`-byte pages: a window of
    /// [`DEFAULT_READAHEAD_BYTES`] and reads coalesced up to [`DEFAULT_COALESCE_KIB`] KiB, the
    /// fastest settings measured on the reference machine (see the README's benchmark).
    pub fn defaults(page_size: u32) -> Self {
        ScanSettings {
            readahead: (DEFAULT_READAHEAD_BYTES / u64::from(page_size.max(512))).max(16) as u32,
            coalesce_kib: DEFAULT_COALESCE_KIB,
            io: DEFAULT_IO,
            sqpoll: SqpollMode::Off,
        }
    }
}

/// Default readahead window per executor, in bytes (1024 pages of 4 KiB). Smaller windows
/// leave the virtio disk idle between completions (256 pages: 2.07 GB/s cold at SF 1); larger
/// ones measured slower (4096 pages: 1.41 GB/s against 2.14, because their refill batches merge
/// into 2 MiB requests with fewer in flight).
pub const DEFAULT_READAHEAD_BYTES: u64 = 4 << 20;
/// Default backend.
pub const DEFAULT_IO: IoChoice = IoChoice::Auto;
/// Resident fraction of the sampled table pages above which `auto` reads through the page cache.
pub const AUTO_CACHED_FRACTION: f64 = 0.9;
/// Default coalescing limit, in KiB.
pub const DEFAULT_COALESCE_KIB: u32 = 128;
pub use partitioner::topology::{MAX_COALESCE_KIB, MAX_READAHEAD};

/// One executor of a plan: the CPU it is pinned to and its share of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutorSpec {
    /// The CPU (as the kernel numbers it).
    pub cpu: usize,
    /// Relative share of the leaf pages (equal weights give equal page counts).
    pub weight: u32,
    /// The CPU for the executor's SQ poll thread, when a topology file names one; otherwise
    /// the coordinator applies [`ScanSettings::sqpoll`].
    pub sqpoll_cpu: Option<usize>,
}

/// The CPUs this process may run on, in ascending order.
pub fn available_cpus() -> Vec<usize> {
    let mut cpus: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    cpus.sort_unstable();
    cpus
}

/// `n` executors with equal weights over the available CPUs, round-robin when `n` exceeds them.
pub fn spread(n: usize) -> Vec<ExecutorSpec> {
    let cpus = available_cpus();
    let cpus = if cpus.is_empty() { vec![0] } else { cpus };
    (0..n)
        .map(|i| ExecutorSpec {
            cpu: cpus[i % cpus.len()],
            weight: 1,
            sqpoll_cpu: None,
        })
        .collect()
}

/// The four columns Q6 reads, in the order quantity, extended price, discount, ship date.
pub const Q6_COLUMNS: [&str; 4] = ["l_quantity", "l_extendedprice", "l_discount", "l_shipdate"];

/// Finds the four Q6 columns of the plan's table by name.
pub fn q6_columns(plan: &TablePlan) -> Result<Q6Columns> {
    let [quantity, extended_price, discount, ship_date] = Q6_COLUMNS;
    Ok(Q6Columns {
        quantity: plan.column(quantity)?,
        extended_price: plan.column(extended_price)?,
        discount: plan.column(discount)?,
        ship_date: plan.column(ship_date)?,
    })
}

/// The affinity and collation of each Q6 column. A collation other than SQLite's built-in
/// ones was registered by the application that declared it; without it SQLite refuses the
/// query ("no such collation sequence"), and so does corescan, naming the column.
pub fn q6_column_types(plan: &TablePlan) -> Result<Q6ColumnTypes> {
    let mut types = Q6ColumnTypes::default();
    for (k, name) in Q6_COLUMNS.into_iter().enumerate() {
        let column = &plan.definition.columns[plan.column_index(name)?];
        types.affinity[k] = Affinity::of_column(column, plan.definition.strict);
        types.collation[k] = match column.collation.as_deref() {
            None => Collation::Binary,
            Some(c) => Collation::from_name(c).ok_or_else(|| {
                Error::Plan(partitioner::Error::Invalid {
                    path: plan.path.clone(),
                    what: format!(
                        "column {:?} of table {:?} is declared COLLATE {c}, a collation only                          the application that defined it can apply (SQLite too refuses: no                          such collation sequence: {c}); built in are BINARY, NOCASE and RTRIM",
                        column.name, plan.table.name
                    ),
                })
            })?,
        };
    }
    Ok(types)
}

/// What a record written before `ALTER TABLE ADD COLUMN` holds for column `name`.
fn missing_value(plan: &TablePlan, name: &str) -> MissingValue {
    match plan.column_default(name) {
        Ok(DefaultValue::Null) => MissingValue::Null,
        Ok(DefaultValue::Integer(i)) => MissingValue::Integer(i),
        Ok(DefaultValue::Real(x)) => MissingValue::Real(x),
        Ok(DefaultValue::Text(t)) => MissingValue::Text(t.into_bytes()),
        Ok(DefaultValue::Blob(_)) => MissingValue::Blob,
        // Only an error if some record really lacks the column.
        Err(e) => MissingValue::Unavailable(e.to_string()),
    }
}

/// Runs TPC-H Q6 over `plan`'s table with one executor per entry of `executors`.
pub fn run_q6(
    plan: &TablePlan,
    executors: &[ExecutorSpec],
    params: &Q6Params,
    settings: &ScanSettings,
) -> Result<ScanReport> {
    if executors.is_empty() {
        return Err(Error::Config("at least one executor is needed".into()));
    }
    if settings.readahead > MAX_READAHEAD {
        return Err(Error::Config(format!(
            "readahead {} exceeds the maximum of {MAX_READAHEAD} pages",
            settings.readahead
        )));
    }
    if settings.coalesce_kib > MAX_COALESCE_KIB {
        return Err(Error::Config(format!(
            "coalescing {} KiB exceeds the maximum of {MAX_COALESCE_KIB} KiB",
            settings.coalesce_kib
        )));
    }
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

    let columns = q6_columns(plan)?;
    let header = &plan.header;
    let decoder = LeafDecoder::new(columns, Q6Filter::from(params), header.usable_size())
        .with_types(&q6_column_types(plan)?)
        .with_defaults(Q6_COLUMNS.map(|name| missing_value(plan, name)));
    let weights: Vec<u32> = executors.iter().map(|e| e.weight).collect();
    let ranges = plan.split(&weights);
    let max_read = max_read_pages(settings.coalesce_kib, header.page_size);
    let cancel = Arc::new(AtomicBool::new(false));
    let faults = Faults::from_env().map_err(Error::Config)?;
    let (mut backend, mut notice) = choose_backend(plan, settings)?;
    let (sqpoll_cpus, sqpoll_notice) =
        sqpoll_placement(executors, &available, backend, settings.sqpoll)?;
    if let Some(n) = sqpoll_notice {
        add_notice(&mut notice, n);
    }
    // Without io_uring (kernel.io_uring_disabled, seccomp in containers) neither glommio nor
    // the uring backend can run: plain pinned threads read with pread instead.
    let mut runtime = Runtime::Glommio;
    if let Err(why) = io_uring_available(&faults) {
        runtime = Runtime::Threads;
        if matches!(backend, IoBackend::Dma | IoBackend::Uring) {
            notice = Some(format!(
                "io_uring is unavailable ({why}): pread instead of {backend}"
            ));
            backend = IoBackend::Pread;
        }
    }
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

    // Enough registered I/O memory for a full window of the largest reads plus overflow pages.
    let window_bytes = (u64::from(settings.readahead.max(1)) + u64::from(max_read) + 2)
        * u64::from(header.page_size);
    let wanted_io_memory = if backend == IoBackend::Dma {
        (window_bytes * 2).clamp(1 << 20, 1 << 30) as usize
    } else {
        MIN_IO_MEMORY
    };
    let io_memory = if runtime == Runtime::Glommio {
        let (bytes, memlock_notice) = io_memory_budget(wanted_io_memory, executors.len(), &faults)?;
        if memlock_notice.is_some() {
            notice = memlock_notice;
        }
        bytes
    } else {
        0
    };
    let ring_depth = (settings.readahead.max(1) as usize + 8)
        .next_power_of_two()
        .clamp(128, 4096);

    let (tx, rx) = unbounded::<(usize, Result<(PartialAggregate, ExecutorReport)>)>();
    let mut handles = Vec::with_capacity(executors.len());
    let wal = plan.wal.clone().map(Arc::new);
    for (index, (spec, range)) in executors.iter().zip(ranges).enumerate() {
        let (extents, wal_pages) = split_by_location(&range.extents, wal.as_deref());
        let task = ExecutorTask {
            cpu: spec.cpu,
            path: plan.path.clone(),
            page_size: header.page_size,
            page_count: header.page_count,
            usable: header.usable_size(),
            extents,
            wal_pages,
            wal: wal.clone(),
            decoder: decoder.clone(),
            readahead: settings.readahead,
            max_read_pages: max_read,
            backend,
            sqpoll_cpu: sqpoll_cpus[index],
            faults,
            cancel: cancel.clone(),
        };
        let (exec_tx, exec_cancel) = (tx.clone(), cancel.clone());
        let report = move |result: std::thread::Result<Result<_>>, cpu: usize| {
            let result = result.unwrap_or_else(|payload| {
                Err(Error::Panicked {
                    cpu,
                    message: panic_message(payload.as_ref()),
                })
            });
            if result.is_err() {
                exec_cancel.store(true, Ordering::Relaxed);
            }
            let _ = exec_tx.send((index, result));
        };
        let name = format!("corescan-cpu{}", spec.cpu);
        let spawned = match runtime {
            Runtime::Glommio => LocalExecutorBuilder::new(Placement::Fixed(spec.cpu))
                .name(&name)
                .io_memory(io_memory)
                .ring_depth(ring_depth)
                .spawn(move || async move {
                    let outcome = AssertUnwindSafe(scan::run(&task, sync_capacity))
                        .catch_unwind()
                        .await;
                    report(outcome, task.cpu);
                })
                .map(Worker::Glommio)
                .map_err(|e| e.to_string()),
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
                        scan::run_without_uring(&task, sync_capacity)
                    }));
                    report(outcome, task.cpu);
                })
                .map(Worker::Thread)
                .map_err(|e| e.to_string()),
        };
        match spawned {
            Ok(h) => handles.push((spec.cpu, h)),
            Err(e) => {
                cancel.store(true, Ordering::Relaxed);
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

    let mut partials: Vec<Option<(PartialAggregate, ExecutorReport)>> = vec![None; executors.len()];
    let mut first_error: Option<Error> = None;
    // Every executor sends exactly one message, even when it panics; if a thread dies before
    // sending (glommio failing to build its reactor), its sender drops and recv ends early.
    for _ in 0..executors.len() {
        let Ok((index, result)) = rx.recv() else {
            break;
        };
        match result {
            Ok(p) => partials[index] = Some(p),
            Err(e) => {
                let better = match (&first_error, &e) {
                    (None, _) => true,
                    (Some(Error::Cancelled { .. }), Error::Cancelled { .. }) => false,
                    (Some(Error::Cancelled { .. }), _) => true,
                    _ => false,
                };
                if better {
                    first_error = Some(e);
                }
            }
        }
    }
    let wall = started.elapsed().as_secs_f64();
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
    // Pages read before and after a commit or checkpoint could mix two versions of the table.
    plan.check_unchanged()?;

    let mut total = PartialAggregate::default();
    let mut reports = Vec::with_capacity(executors.len());
    for (i, p) in partials.into_iter().enumerate() {
        let (agg, report) = p.ok_or_else(|| Error::Start {
            cpu: executors[i].cpu,
            cause: "the executor thread ended without reporting".into(),
        })?;
        total.merge(&agg);
        reports.push(report);
    }
    let sum = |f: fn(&ExecutorReport) -> u64| reports.iter().map(f).sum::<u64>();
    let bytes_read = sum(|r| r.bytes_read);
    let leaf_pages = sum(|r| r.pages);
    let overflow = sum(|r| r.overflow_pages);
    let o_direct = reports.iter().all(|r| r.o_direct);
    // A fallback inside an executor (O_DIRECT or SQPOLL refused) changes what ran.
    if let Some(n) = reports.iter().find_map(|r| r.notice.clone()) {
        add_notice(&mut notice, n);
    }
    let ran = reports
        .first()
        .map_or(backend.name().to_string(), |r| r.backend.clone());
    let enters: Option<u64> = reports.iter().map(|r| r.io_uring_enters).sum();
    let sqpoll_cpu = reports.iter().find_map(|r| r.sqpoll_cpu);
    Ok(ScanReport {
        path: plan.path.display().to_string(),
        table: plan.table.name.clone(),
        revenue: total.revenue_text(),
        rows_scanned: total.rows_scanned,
        rows_matched: total.rows_matched,
        wall_s: wall,
        gb_per_s: bytes_read as f64 / wall.max(1e-9) / 1e9,
        rows_per_s: total.rows_scanned as f64 / wall.max(1e-9),
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
            notice,
        },
        executors: reports,
        device,
        device_note,
        cpu_time,
        peak_rss_mib: peak_rss_mib(),
        available_cpus: available.len(),
        oversubscribed,
    })
}

/// Splits extents into the runs of pages read from the database file and the pages whose
/// latest committed copy is in the write-ahead log (with that copy's offset in the log).
fn split_by_location(extents: &[Extent], wal: Option<&WalIndex>) -> (Vec<Extent>, Vec<(u32, u64)>) {
    let Some(wal) = wal.filter(|w| !w.frames.is_empty()) else {
        return (extents.to_vec(), Vec::new());
    };
    let mut main = Vec::with_capacity(extents.len());
    let mut logged = Vec::new();
    for e in extents {
        let mut run: Option<Extent> = None;
        for page in e.first_page..=e.last_page() {
            match wal.frame_offset(page) {
                Some(offset) => {
                    logged.push((page, offset));
                    main.extend(run.take());
                }
                None => match &mut run {
                    Some(r) => r.pages += 1,
                    None => {
                        run = Some(Extent {
                            first_page: page,
                            pages: 1,
                        })
                    }
                },
            }
        }
        main.extend(run);
    }
    (main, logged)
}

/// Where executors run: glommio executors, or plain pinned threads when io_uring is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runtime {
    Glommio,
    Threads,
}

/// A running executor thread.
enum Worker {
    Glommio(glommio::ExecutorJoinHandle<()>),
    Thread(std::thread::JoinHandle<()>),
}

impl Worker {
    fn join(self) -> std::result::Result<(), String> {
        match self {
            Worker::Glommio(h) => h.join().map_err(|e| e.to_string()),
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

/// Formats CPU numbers compactly: `0-3,6`.
pub fn list_cpus(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", cpus[i], cpus[j])
        } else {
            cpus[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

/// Appends `more` to the run's notice, `; `-separated.
fn add_notice(notice: &mut Option<String>, more: String) {
    *notice = Some(match notice.take() {
        Some(first) => format!("{first}; {more}"),
        None => more,
    });
}
