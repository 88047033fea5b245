//! `ExecutorTask`, what one executor is asked to do, and [`ExecutorReport`], what it
//! measured: the types every scan loop shares.
//!
//! Layering: the bottom of [`crate::scan`] with [`crate::scan::kernel`]; it uses the backends'
//! option and statistics types, the readahead schedule's figures, the error type and the
//! kernel seam's [`crate::scan::kernel::RowError`], and no other scan module.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use partitioner::plan::IndexScan;
use partitioner::wal::WalIndex;
use partitioner::{DbHeader, Extent, ParentShare};
use serde::Serialize;

use crate::backend::{BackendOptions, BackendStats, ByteRange, IoBackend};
use crate::counters::HwCounters;
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::readahead::{ReadRequest, ScheduleStats};
use crate::scan::kernel::RowError;

/// Which executors of a run must stop because another one failed: all of them, or, in a run
/// whose output is consumed in range order, only those after the failed one (the rows before
/// a failure are still output, as SQLite outputs the rows it scanned before a damaged page).
#[derive(Debug)]
pub(crate) struct Cancel {
    /// Executors with this index or a higher one stop (`usize::MAX`: none).
    from: AtomicUsize,
}

impl Cancel {
    /// Nothing cancelled.
    pub(crate) fn new() -> Self {
        Cancel {
            from: AtomicUsize::new(usize::MAX),
        }
    }

    /// Every executor stops.
    pub(crate) fn all(&self) {
        self.from.store(0, Ordering::Relaxed);
    }

    /// The executors after `index` stop.
    pub(crate) fn after(&self, index: usize) {
        self.from.fetch_min(index + 1, Ordering::Relaxed);
    }

    /// Whether executor `index` must stop.
    pub(crate) fn applies(&self, index: usize) -> bool {
        index >= self.from.load(Ordering::Relaxed)
    }
}

/// Holds the executors of a cold scan back until every one has read its share of the
/// leaf-parent level: an executor that starts its leaf reads first fills the device's queue,
/// and the others' small parent reads then wait behind it (SF 10 cold, two executors: the
/// second one's 2,752 parents took 1.2-1.6 s instead of 0.03 s). Only a performance aid:
/// nobody waits longer than [`StartGate::LIMIT`].
#[derive(Debug)]
pub(crate) struct StartGate {
    /// Executors that have not arrived yet.
    left: Mutex<usize>,
    all_in: Condvar,
}

impl StartGate {
    /// The longest an executor waits for the others.
    const LIMIT: Duration = Duration::from_secs(2);

    /// A gate for `n` executors.
    pub(crate) fn new(n: usize) -> Arc<Self> {
        Arc::new(StartGate {
            left: Mutex::new(n),
            all_in: Condvar::new(),
        })
    }

    fn arrive(&self) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        *left = left.saturating_sub(1);
        if *left == 0 {
            self.all_in.notify_all();
        }
    }

    fn wait(&self) {
        let left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self
            .all_in
            .wait_timeout_while(left, Self::LIMIT, |left| *left > 0);
    }
}

/// One executor's place at a [`StartGate`]: it arrives when this is dropped, whatever the
/// executor's fate (an error, a panic, a thread that never ran its task), so that no other
/// executor waits for it.
#[derive(Debug)]
pub(crate) struct Arrival(pub Arc<StartGate>);

impl Drop for Arrival {
    fn drop(&mut self) {
        self.0.arrive();
    }
}

/// What one executor is asked to do.
#[derive(Debug, Clone)]
pub(crate) struct ExecutorTask {
    /// The executor's position among the run's ranges.
    pub index: usize,
    pub cpu: usize,
    pub path: PathBuf,
    /// The database header as of the snapshot (page size, page count, usable size).
    pub header: DbHeader,
    /// The range's pages whose latest committed copy is in the database file, in the order
    /// they are read (file order, or key order for an ordered run). Until
    /// [`ExecutorTask::prepare`] runs (on the executor's own thread), the whole range as the
    /// coordinator cut it (empty when the range is `parents`).
    pub extents: Vec<Extent>,
    /// The run of the table's leaf-parent level whose leaves are this executor's range, when
    /// the plan left that level to the scan: [`ExecutorTask::prepare`] reads it.
    pub parents: Option<ParentShare>,
    /// Every leaf page of the range in the order the kernel is fed them: the pages of
    /// `extents` in their order with the `wal_pages` at their places among them (filled by
    /// [`ExecutorTask::prepare`]).
    pub order: Vec<u32>,
    /// The range's pages whose latest committed copy is in the write-ahead log, with the
    /// offset of that copy in the log (filled by [`ExecutorTask::prepare`]).
    pub wal_pages: Vec<(u32, u64)>,
    /// The log's frame map, for overflow pages.
    pub wal: Option<Arc<WalIndex>>,
    pub readahead: u32,
    /// Whether the window's reads ahead are also given to the kernel as hints (not when the
    /// table is already in the page cache, where they only cost system calls).
    pub hints: bool,
    pub max_read_pages: u32,
    pub backend: IoBackend,
    /// The CPU for this executor's kernel SQ poll thread (uring backend only).
    pub sqpoll_cpu: Option<usize>,
    pub faults: Faults,
    pub cancel: Arc<Cancel>,
    /// The plan's index scan, when the range's leaves are an index's
    /// ([`partitioner::plan::IndexScan`]): each leaf is decoded into its entries, numbered by
    /// their places, and the interior entries after it follow.
    pub index_scan: Option<Arc<IndexScan>>,
    /// Leaf-parent pages [`ExecutorTask::prepare`] read, and the seconds that took (for the
    /// report).
    pub parent_pages: u64,
    pub parents_s: f64,
    /// The gate this executor waits at after reading its parents (a cold scan's).
    pub gate: Option<Arc<Arrival>>,
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
    /// Interior pages this executor read to list its leaves: its share of the table's
    /// leaf-parent level (0 when the plan listed the leaves; see
    /// [`partitioner::TablePlan::open_for_scan`]).
    pub parent_pages: u64,
    /// Seconds reading those pages, before the executor's first read of a leaf.
    pub parents_s: f64,
    /// Overflow pages read to reach columns stored beyond a cell's local payload.
    pub overflow_pages: u64,
    /// Rows examined.
    pub rows: u64,
    /// Rows the kernel kept: those that passed its filter (Q6's predicate), as counted by the
    /// code that ran the kernel, which alone knows what its partials hold; `None` when it does
    /// not count them. In JSON `rows_matched`, the key `corescan q6 --json` has always used.
    #[serde(rename = "rows_matched")]
    pub rows_kept: Option<u64>,
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
    /// Hardware counters of the executor's thread over its scan (null, with the reason, where
    /// the kernel exposes none).
    pub counters: HwCounters,
    /// Seconds from the executor's start (rings, buffers, opening the file) to its first page
    /// decoded; null when it decoded none.
    pub first_page_s: Option<f64>,
    /// Rows decoded per second on this core, from its first page to its last (null when it
    /// decoded none).
    pub rows_per_s: Option<f64>,
    /// Leaf-page bytes decoded per second (10^9 bytes) on this core over the same time.
    pub gb_per_s: Option<f64>,
    /// When the first page was decoded (for the run's start-up figure).
    #[serde(skip)]
    pub first_page_at: Option<std::time::Instant>,
    /// For a scan of several files: what this executor did with the files dealt to it
    /// (absent for a scan of one file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<FilesScanned>,
}

/// One executor's share of a scan of several files (see [`ExecutorReport::files`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FilesScanned {
    /// Files dealt to it.
    pub files: u64,
    /// Of those, files read (the others were skipped: excluded by the `WHERE`'s `_file` terms
    /// before opening, or without the table under `--skip-missing`).
    pub opened: u64,
    /// Seconds planning its files (open, header, schema, locks, the walk's top), summed.
    pub plan_s: f64,
    /// The longest of those plannings.
    pub plan_s_max: f64,
}

impl ExecutorReport {
    /// Adds what the readahead schedule issued.
    pub(crate) fn add_schedule(&mut self, s: ScheduleStats) {
        self.reads_submitted += s.reads_submitted;
        self.submit_batches += s.submit_batches;
        self.bytes_read += s.bytes_read;
        self.max_in_flight_pages = self.max_in_flight_pages.max(s.max_in_flight_pages);
    }

    /// Adds another scan's figures of the same executor (the next file of a scan of several
    /// files): counts add up, the first page and notice are the first scan's, the rates are
    /// left for [`ExecutorReport::rates_over`].
    pub(crate) fn absorb(&mut self, r: ExecutorReport) {
        self.pages += r.pages;
        self.parent_pages += r.parent_pages;
        self.parents_s += r.parents_s;
        self.overflow_pages += r.overflow_pages;
        self.rows += r.rows;
        self.rows_kept = match (self.rows_kept, r.rows_kept) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.wal_pages += r.wal_pages;
        self.reads_submitted += r.reads_submitted;
        self.submit_batches += r.submit_batches;
        self.io_uring_enters = match (self.io_uring_enters, r.io_uring_enters) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.bytes_read += r.bytes_read;
        self.wasted_bytes += r.wasted_bytes;
        self.max_in_flight_pages = self.max_in_flight_pages.max(r.max_in_flight_pages);
        self.o_direct = self.o_direct && r.o_direct;
        self.huge_page_buffers = self.huge_page_buffers.or(r.huge_page_buffers);
        self.sqpoll_cpu = self.sqpoll_cpu.or(r.sqpoll_cpu);
        self.sqpoll_cpu_s = match (self.sqpoll_cpu_s, r.sqpoll_cpu_s) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.user_s += r.user_s;
        self.sys_s += r.sys_s;
        self.counters = HwCounters::sum([&self.counters, &r.counters]);
        if self.first_page_at.is_none() {
            self.first_page_at = r.first_page_at;
        }
        if self.notice.is_none() {
            self.notice = r.notice;
        }
        if self.backend.is_empty() {
            self.backend = r.backend;
        }
    }

    /// Sets the wall time, start-up and per-core rates over an executor's whole run that
    /// started at `started` (a scan of several files, after [`ExecutorReport::absorb`]).
    pub(crate) fn rates_over(&mut self, started: std::time::Instant, page_size: u32) {
        self.wall_s = started.elapsed().as_secs_f64();
        self.first_page_s = self
            .first_page_at
            .map(|t| t.duration_since(started).as_secs_f64());
        let decoding = self
            .first_page_at
            .map_or(0.0, |t| t.elapsed().as_secs_f64());
        if decoding > 0.0 {
            self.rows_per_s = Some(self.rows as f64 / decoding);
            self.gb_per_s = Some((self.pages * u64::from(page_size)) as f64 / decoding / 1e9);
        }
    }

    /// Adds what the backend measured.
    pub(crate) fn add_backend(&mut self, s: BackendStats) {
        self.io_uring_enters = s.io_uring_enters.or(self.io_uring_enters);
        self.huge_page_buffers = s.huge_page_buffers.or(self.huge_page_buffers);
        self.sqpoll_cpu_s = s.sqpoll_cpu_s.or(self.sqpoll_cpu_s);
    }
}

impl ExecutorTask {
    /// Turns the range the coordinator cut (`extents`, every leaf of the range, or the
    /// `parents` whose leaves it is, read here) into what the scan loops read: the pages'
    /// order, the runs read from the database file and the pages read from the write-ahead
    /// log. Run by the executor on its own thread, so that this work, which grows with the
    /// table (2,760 interior pages and a million leaves per executor at SF 10), is done by
    /// every executor at once rather than by the coordinator before any of them starts.
    pub(crate) fn prepare(&mut self) -> Result<()> {
        if let Some(parents) = self.parents.take() {
            let started = std::time::Instant::now();
            self.parent_pages = parents.parents().len() as u64;
            self.extents = parents.read()?.extents;
            self.parents_s = started.elapsed().as_secs_f64();
        }
        if let Some(arrival) = self.gate.take() {
            let gate = arrival.0.clone();
            drop(arrival);
            gate.wait();
        }
        self.order = self
            .extents
            .iter()
            .flat_map(|e| e.first_page..=e.last_page())
            .collect();
        let (extents, wal_pages) = split_by_location(&self.extents, self.wal.as_deref());
        self.extents = extents;
        self.wal_pages = wal_pages;
        Ok(())
    }

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

    /// A row of leaf page `page` whose evaluation failed (the page itself is sound).
    pub(crate) fn eval_error(&self, page: u32, row: RowError) -> Error {
        Error::Eval {
            cpu: self.cpu,
            path: self.path.clone(),
            page,
            rowid: row.rowid,
            message: row.message,
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

    /// Page size in bytes.
    pub(crate) fn page_size(&self) -> u32 {
        self.header.page_size
    }

    /// Byte offset of a 1-based page.
    pub(crate) fn offset(&self, page: u32) -> u64 {
        u64::from(page - 1) * u64::from(self.page_size())
    }

    /// The byte range of a read of the database file.
    pub(crate) fn byte_range(&self, req: ReadRequest) -> ByteRange {
        ByteRange {
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
            hints: self.hints,
            sqpoll_cpu: self.sqpoll_cpu,
            faults: self.faults,
        }
    }

    /// Fails with [`Error::Cancelled`] once another executor has failed.
    pub(crate) fn check_cancelled(&self) -> Result<()> {
        if self.cancel.applies(self.index) {
            Err(Error::Cancelled { cpu: self.cpu })
        } else {
            Ok(())
        }
    }

    pub(crate) fn open_error(&self, source: io::Error) -> Error {
        self.io_error(
            format!("open for {}", self.backend),
            &self.path,
            None,
            source,
        )
    }
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
