//! # engine: how to read the table, and what to compute
//!
//! `engine` runs TPC-H Q6 over a [`partitioner::TablePlan`] with one pinned glommio executor per
//! planned CPU. Each executor has its own io_uring, reads its range of leaf pages in file order
//! with `O_DIRECT` into glommio's registered DMA buffers, and keeps a window of reads in flight
//! ahead of its decoder, because direct I/O gets no readahead from the kernel:
//!
//! - [`coordinator`] ([`run_q6`]) starts the executors, hands each its [`partitioner::LeafRange`],
//!   receives a [`PartialAggregate`] and statistics from each over crossbeam-channel, merges them
//!   and builds the [`ScanReport`]; the first failure stops the run with an error naming the CPU
//!   and page;
//! - [`scan`] is one executor's loop: reads from a [`readahead::ReadPlan`], admitted by a
//!   [`readahead::ReadaheadWindow`], decoded in order; [`backend`] holds the I/O paths it can
//!   take (glommio DMA, a private io_uring with optional SQPOLL, `pread`, `mmap`, and `auto`);
//! - [`decoder`] ([`LeafDecoder`]) turns table-leaf cells into the four Q6 columns, following
//!   overflow chains only when a needed column lies beyond the local payload;
//! - [`q6`] holds the parameters ([`Q6Params`]) and the exact decimal arithmetic;
//! - [`device`] and [`cputime`] measure what reached the block device and what the CPUs spent.
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
pub mod coordinator;
pub mod cputime;
pub mod datatype3;
pub mod decoder;
pub mod device;
pub mod error;
pub mod faults;
pub mod hugepages;
pub mod inflight;
pub mod q6;
pub mod readahead;
pub mod report;
pub mod scan;
pub mod value;

pub use backend::{IoBackend, SqpollMode};
pub use coordinator::{
    run_q6, spread, ExecutorSpec, IoChoice, ScanSettings, DEFAULT_COALESCE_KIB, DEFAULT_IO,
    DEFAULT_READAHEAD_BYTES,
};
pub use decoder::{LeafDecoder, Q6ColumnTypes, Q6Columns};
pub use error::{Error, Result};
pub use q6::{PartialAggregate, Q6Params};
pub use report::{IoReport, ScanReport};
