//! What a run measured: [`RunReport`] for any scan (I/O, executors, device, CPU), whatever
//! its kernel computed; a kernel's answer sits beside it in its own report (as
//! [`crate::q6::Q6Report`] does).
//!
//! Layering: reports sit above the scan loops (they hold each executor's
//! [`ExecutorReport`]) and below the coordinator, which builds them.

use serde::Serialize;

use crate::counters::HwCounters;
use crate::cputime::CpuTime;
use crate::device::DeviceReport;
use crate::scan::task::ExecutorReport;

/// Which I/O path actually ran, as opposed to what was asked for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IoReport {
    /// The backend that ran: `dma`, `uring`, `pread` or `mmap`.
    pub backend: String,
    /// Whether every executor's file descriptor really had `O_DIRECT` set.
    pub o_direct: bool,
    /// Whether every executor's read buffers were on transparent huge pages (one device segment
    /// per read); `None` when some executor could not tell or reads into no buffers of its own.
    pub huge_page_buffers: Option<bool>,
    /// Whether a kernel SQ poll thread submitted the reads.
    pub sqpoll: bool,
    /// The CPU hosting the (first) poll thread, when there is one; each executor's is in
    /// `executors`.
    pub sqpoll_cpu: Option<usize>,
    /// CPU time used by all SQ poll threads, in seconds, when SQPOLL ran and it could be read.
    pub sqpoll_cpu_s: Option<f64>,
    /// Pages kept in flight ahead of the decoder (0 = one read at a time).
    pub readahead: u32,
    /// The coalescing limit in KiB (0 = one read per page).
    pub coalesce_kib: u32,
    /// The largest single read, in pages, after applying coalescing and the window.
    pub max_read_pages: u32,
    /// A one-line notice when the path that ran differs from the one asked for.
    pub notice: Option<String>,
}

/// How the scan held one committed state of the database (see [`partitioner::snapshot`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SnapshotReport {
    /// `wal-read-mark`, `wal-unreliable-shm`, `rollback-shared` or `verify-retry`.
    pub protocol: String,
    /// The `-shm` read mark `READ(i)` held (WAL mode).
    pub read_mark: Option<usize>,
    /// Times the locks were found busy (or the index moving) before they were taken, over
    /// the last attempt.
    pub lock_retries: u32,
    /// Plans and scans run to get the answer (1 unless a change forced a retry).
    pub attempts: u32,
    /// Attempts abandoned because the database changed (`attempts - 1` on success).
    pub retries: u32,
}

impl SnapshotReport {
    /// The report of one attempt under `read`.
    pub fn of(read: &partitioner::ReadSnapshot) -> Self {
        Self {
            protocol: read.protocol.name().to_string(),
            read_mark: read.read_mark,
            lock_retries: read.lock_retries,
            attempts: 1,
            retries: 0,
        }
    }
}

/// What one scan run measured, whatever its kernel computed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// The database file.
    pub path: String,
    /// The table scanned, as named in the schema.
    pub table: String,
    /// Rows examined.
    pub rows_scanned: u64,
    /// Wall time of the scan (executors started to last partial merged), in seconds.
    pub wall_s: f64,
    /// Bytes read per second of wall time, in GB/s (10^9).
    pub gb_per_s: f64,
    /// Rows examined per second of wall time.
    pub rows_per_s: f64,
    /// Pages read: leaf pages plus overflow pages.
    pub pages_read: u64,
    /// Overflow pages read.
    pub overflow_pages_read: u64,
    /// Pages read from the write-ahead log (their latest committed copies) instead of the
    /// database file.
    pub wal_pages_read: u64,
    /// Bytes read (pages x page size).
    pub bytes_read: u64,
    /// Read requests handed to the rings.
    pub reads_submitted: u64,
    /// Reactor passes that submitted reads; each costs at most one `io_uring_enter`.
    pub submit_batches: u64,
    /// `io_uring_enter` calls, when the backend can count them (`uring`; glommio's `dma`
    /// cannot: null). With SQPOLL, submissions that need no wakeup are not system calls and
    /// are not counted.
    pub io_uring_enters: Option<u64>,
    /// Pages read that the scan did not need: gaps between extents bridged by a coalesced read
    /// (interior or other tables' pages) and `O_DIRECT` alignment padding, rounded up.
    pub wasted_pages: u64,
    /// What I/O path ran.
    pub io: IoReport,
    /// One entry per executor, in plan order.
    pub executors: Vec<ExecutorReport>,
    /// Block-device counters over the run, or null when unknown (see `device_note`).
    pub device: Option<DeviceReport>,
    /// Why `device` is null, when it is.
    pub device_note: Option<String>,
    /// CPU time of the whole process over the run.
    pub cpu_time: CpuTime,
    /// Hardware counters summed over the executors' threads (null, with the reason, where the
    /// kernel exposes none); each executor's are in `executors`.
    pub counters: HwCounters,
    /// Seconds from the start of the run (executors not yet started) to the first page decoded
    /// by any executor: the executors' start-up.
    pub first_page_s: Option<f64>,
    /// Seconds from the process's start to the first page decoded: everything serial before
    /// the scan (argument parsing, planning, the b-tree walk, executor start-up). Null when the
    /// program did not mark its start ([`crate::cputime::mark_process_start`]).
    pub first_page_since_process_start_s: Option<f64>,
    /// The process's peak resident memory, in MiB. With `mmap` this counts the mapped file's
    /// cached pages too, which are page cache rather than memory the scan allocated.
    pub peak_rss_mib: f64,
    /// CPUs this process may run on.
    pub available_cpus: usize,
    /// Whether there were more executors than CPUs (or two on one CPU): timings then measure
    /// time-sharing, not parallel scaling.
    pub oversubscribed: bool,
    /// How the scan held one committed state of the database (of the first file, for a scan
    /// of several files, each of which held its own while it was read).
    pub snapshot: SnapshotReport,
    /// For a scan of several files: the files and their planning (absent for one file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<FilesReport>,
}

/// What a scan of one table over several files did with them (see [`RunReport::files`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilesReport {
    /// Files listed.
    pub files: usize,
    /// Files read.
    pub opened: usize,
    /// Files skipped (without the table, with `--skip-missing`).
    pub skipped: usize,
    /// Mean seconds planning a file read (open, header, schema, read locks, the top of the
    /// b-tree), on the executor that read it.
    pub plan_s_mean: f64,
    /// The longest of those plannings.
    pub plan_s_max: f64,
    /// The most database files open at once: one per executor (each plans, reads and closes
    /// its files one after the other, holding each file's read locks only while reading it),
    /// and the files split among executors (held by the coordinator until the run ends).
    pub open_files_bound: usize,
    /// Files larger than one executor's share, planned by the coordinator and split among
    /// several executors.
    pub split: usize,
}
