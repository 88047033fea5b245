//! # engine: how to read the table, and what to compute
//!
//! `engine` scans a [`partitioner::TablePlan`] with one pinned glommio executor per planned
//! CPU. Each executor has its own io_uring, reads its range of leaf pages in file order with
//! `O_DIRECT` into glommio's registered DMA buffers, and keeps a window of reads in flight
//! ahead of its decoder, because direct I/O gets no readahead from the kernel. What is computed
//! from the rows is a [`ScanKernel`]; TPC-H Q6 ([`q6::run_q6`]) is the first one.
//!
//! ## Layout, bottom to top
//!
//! Every module imports only modules below it (the module docs repeat the rule for their part):
//!
//! 1. [`settings`] ([`ScanSettings`], [`IoChoice`], [`ExecutorSpec`], CPU lists) and
//!    [`error`]; beside them the plain building blocks [`readahead`] (the read plan, window
//!    and [`readahead::ReadSchedule`], the one readahead loop's state machine), [`faults`],
//!    [`hugepages`], [`inflight`], [`cputime`], [`counters`] and [`device`]; and SQLite's value semantics,
//!    which every evaluator calls: [`value`] (storage classes and SQLite's conversions) and
//!    [`datatype3`] (comparison affinity, collations, the order of values);
//! 2. [`backend`]: the I/O paths (a private io_uring with optional SQPOLL, `pread`, `mmap`) as
//!    passive readers of byte ranges that return their own statistics, and
//!    `backend::policy`, which resolves `auto`, SQPOLL placement, the runtime and glommio's
//!    memory into one choice with all its notices;
//! 3. [`scan`]: one executor's loops (the async glommio `dma` loop and the synchronous loop
//!    over the other backends), both driving the same readahead schedule, and the seam
//!    [`scan::kernel`] ([`ScanKernel`]);
//! 4. [`report`] and [`coordinator`] ([`run_scan`]): start the executors (glommio executors
//!    are kept between scans by the private `pool` module below the coordinator: glommio leaks
//!    a descriptor for every executor it ends), hand each a clone of
//!    the kernel and its [`partitioner::LeafRange`], collect the partials in range order over
//!    crossbeam-channel and measure the run; the first failure stops the run with an error
//!    naming the CPU and page; beside them [`retry`] ([`consistent`]), the one loop that
//!    plans and scans again when a database read without SQLite's locks changed meanwhile;
//!    above the seam, [`decode`]: the page-batch record decoder every kernel shares (a page's
//!    cells into the serial types and offsets of the needed columns, fast path without
//!    per-byte branches);
//! 5. kernels on top: [`census`] (rows and overflow pages, for `explain --census`) and
//!    [`q6`]: TPC-H Q6: parameters and exact decimals ([`q6::Q6Params`]), the record
//!    decoder ([`q6::LeafDecoder`]) with its predicates under each column's affinity and
//!    collation, as a kernel, [`q6::run_q6`] and its report ([`q6::Q6Report`]). Their names
//!    stay in their modules (`engine::q6::...`): the crate root publishes the generic scan.
//!
//! ## Policy
//!
//! Direct I/O keeps the scan from evicting the page cache and from copying every byte through
//! it, but it only pays when reads are large or many are in flight: the defaults
//! ([`DEFAULT_READAHEAD_BYTES`] in flight per executor, reads coalesced up to
//! [`DEFAULT_COALESCE_KIB`] KiB) are
//! what measured fastest on the reference machine. Readahead 0 keeps one read in flight, the slow
//! case that motivated this project, so it can be measured.
#![deny(missing_docs)]

pub mod backend;
pub mod census;
pub mod coordinator;
pub mod counters;
pub mod cputime;
pub mod datatype3;
pub mod decode;
pub mod device;
pub mod error;
pub mod faults;
mod handle;
pub mod hugepages;
pub mod inflight;
mod partitions;
pub mod placement;
mod pool;
pub mod q6;
pub mod query;
pub mod readahead;
pub mod report;
pub mod retry;
pub mod scan;
pub mod settings;
mod spec;
pub mod value;

pub use backend::{IoBackend, SqpollMode};
pub use coordinator::{run_scan, running_executors};
pub use error::{Error, Result};
pub use handle::{scan, Batch, Scan, ScanEnd, BATCHES_IN_FLIGHT, BATCH_ROWS};
pub use partitions::{scan_partitions, PartitionStream, PartitionedScan};
pub use placement::{Placement, ScanOptions};
pub use query::{QueryError, QueryPlan};
pub use report::{IoReport, RunReport, SnapshotReport};
pub use retry::{consistent, Consistent};
pub use scan::{RecordOutcome, RowError, ScanKernel, Spill};
pub use settings::{
    spread, ExecutorSpec, IoChoice, ScanSettings, DEFAULT_COALESCE_KIB, DEFAULT_IO,
    DEFAULT_READAHEAD_BYTES,
};
pub use spec::{replan, restrict, Compute, OpenScan, ScanSpec};
