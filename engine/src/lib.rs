//! # engine: how to read the table, and what to compute
//!
//! `engine` scans a table of a SQLite-format file with one pinned executor per planned CPU.
//! Each executor reads its own range of the table's leaf pages (with `O_DIRECT` on its own
//! io_uring and a window of reads in flight ahead of its decoder, since direct I/O gets no
//! readahead from the kernel; or through the page cache when the table is already there),
//! decodes only the columns it needs, and computes its share of the answer; a coordinator
//! merges the shares.
//!
//! ## Embedding: a scan specification in, batches of rows out
//!
//! A [`ScanSpec`] names the file, the table, what to compute ([`Compute`]: a planned query,
//! from the `corescan-sql` crate, or a projection of columns), where the executors run
//! ([`Placement`]: every CPU, `N` executors, a CPU list or a topology file) and the settings to
//! override ([`ScanOptions`]). [`scan`] starts it and returns a [`Scan`] that yields [`Batch`]es
//! of rows in the result's order, as an iterator or awaited from any async runtime without
//! blocking its threads, and its report ([`ScanEnd`]) at the end; [`scan_partitions`] gives one
//! stream per executor instead (a query engine's partitions), and [`scan_partitions_into`] has
//! each executor build the embedder's own batches ([`BatchSink`]: Arrow arrays, say) from the
//! decoded pages as it scans. Dropping a handle cancels the
//! executors at their next read.
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! # let db = dir.path().join("app.db");
//! # rusqlite::Connection::open(&db).unwrap().execute_batch(
//! #     "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT);
//! #      INSERT INTO users(name) VALUES ('ada'), ('grace');").unwrap();
//! use engine::{Placement, ScanSpec};
//!
//! let spec = ScanSpec::columns(&db, "users", &["id", "name"]).with_placement(Placement::Cores(2));
//! let mut rows = Vec::new();
//! for batch in engine::scan(spec)? {
//!     rows.extend(batch?.rows);
//! }
//! assert_eq!(rows.len(), 2);
//! assert_eq!(rows[1][1].to_string(), "grace");
//! # Ok::<(), engine::QueryError>(())
//! ```
//!
//! Lower down, [`run_scan`] runs any [`ScanKernel`] (what is computed from each page's
//! records: TPC-H Q6 in [`q6`], the census in [`census`], a query's kernel in [`query`]) over a
//! [`partitioner::TablePlan`] with explicit executors and settings.
//!
//! ## Layout, bottom to top
//!
//! Every module imports only modules below it (the module docs repeat the rule for their part).
//! The public modules are those an embedder or a kernel author uses; the machinery is private
//! and publishes its few types at the crate root.
//!
//! 1. `settings` ([`ScanSettings`], [`IoChoice`], [`ExecutorSpec`], CPU lists) and
//!    [`error`]; beside them the plain building blocks `readahead` (the read plan, window and
//!    the one readahead loop's state machine), [`faults`], [`hugepages`], `inflight`,
//!    `cputime`, `counters` and `device`; and SQLite's value semantics, which every evaluator
//!    calls: [`value`] (storage classes and SQLite's conversions) and [`datatype3`] (comparison
//!    affinity, collations, the order of values);
//! 2. `backend`: the I/O paths (a private io_uring with optional SQPOLL, `pread`, `mmap`) as
//!    passive readers of byte ranges that return their own statistics, and `backend::policy`,
//!    which resolves `auto`, SQPOLL placement, the runtime and glommio's memory into one choice
//!    with all its notices;
//! 3. [`scan`]: one executor's loops (the async glommio `dma` loop and the synchronous loop
//!    over the other backends), both driving the same readahead schedule, and the seam
//!    [`scan::kernel`] ([`ScanKernel`]);
//! 4. `report` and `coordinator` ([`run_scan`]): start the executors (glommio executors are
//!    kept between scans by the private `pool` module below the coordinator: glommio leaks a
//!    descriptor for every executor it ends), hand each its kernel and its share of the leaves,
//!    collect the partials in range order and measure the run; the first failure stops the run
//!    with an error naming the CPU and page; beside them `retry` ([`consistent`]), the one loop
//!    that plans and scans again when a database read without SQLite's locks changed
//!    meanwhile; above the seam, [`decode`]: the page-batch record decoder every kernel shares;
//! 5. kernels on top: [`census`], [`q6`] (TPC-H Q6 with exact decimals; its names stay in
//!    `engine::q6::...`) and [`query`] (a planned single-table query with SQLite's semantics);
//! 6. the embedding seam: [`placement`] (CPU placement, the library form of `--cores`,
//!    `--cpus` and `--topology`), the spec (`spec`), and the handles ([`scan`],
//!    [`scan_partitions`]).
//!
//! ## Policy
//!
//! Direct I/O keeps the scan from evicting the page cache and from copying every byte through
//! it, but it only pays when reads are large or many are in flight: the defaults
//! ([`DEFAULT_READAHEAD_BYTES`] in flight per executor, reads coalesced up to
//! [`DEFAULT_COALESCE_KIB`] KiB) are what measured fastest on the reference machine. Readahead
//! 0 keeps one read in flight, the slow case that motivated this project, so it can be
//! measured.
#![deny(missing_docs)]

mod backend;
pub mod census;
mod coordinator;
mod counters;
mod cputime;
pub mod datatype3;
pub mod decode;
mod device;
pub mod error;
pub mod faults;
mod handle;
pub mod hugepages;
mod inflight;
mod partitions;
pub mod placement;
mod pool;
pub mod q6;
pub mod query;
mod readahead;
mod report;
mod retry;
pub mod scan;
mod settings;
mod spec;
pub mod value;

pub use backend::residency;
pub use coordinator::{
    available_cpus, deal_files, run_files, run_scan, run_scan_in, run_scan_with, running_executors,
    split_counts, FileScans, FilesScan, RangeOrder, ScanWith,
};
pub use counters::HwCounters;
pub use cputime::{mark_process_start, CpuTime};
pub use device::{BlockDevice, DeviceReport};
pub use error::{Error, Result};
pub use handle::{scan, Batch, Scan, ScanEnd, BATCHES_IN_FLIGHT, BATCH_ROWS};
pub use partitions::{
    scan_files_partitions_into, scan_partitions, scan_partitions_into, FileSinkFactory, FilesSpec,
    Part, PartitionStream, PartitionedEnd, PartitionedScan, SinkFactory,
};
pub use placement::{Placement, ScanOptions};
pub use query::{BatchSink, QueryError, QueryPlan, SinkRows};
pub use report::{FilesReport, IoReport, RunReport, SnapshotReport};
pub use retry::{consistent, Consistent, MAX_ATTEMPTS};
pub use scan::{ExecutorReport, FilesScanned, RecordOutcome, RowError, ScanKernel, Spill};
pub use settings::{
    list_cpus, spread, ExecutorSpec, IoBackend, IoChoice, ScanSettings, SqpollMode,
    AUTO_BUFFERED_BYTES, AUTO_CACHED_FRACTION, DEFAULT_COALESCE_KIB, DEFAULT_IO,
    DEFAULT_READAHEAD_BYTES, MAX_COALESCE_KIB, MAX_READAHEAD,
};
pub use spec::{replan, replan_scan, restrict, Compute, OpenScan, ScanSpec};
