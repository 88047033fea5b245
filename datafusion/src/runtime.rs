//! [`runtime`]: the tokio runtime DataFusion's operators run on beside corescan's executors.
//!
//! DataFusion spawns its operators' tasks (a hash join's build side, a repartition's inputs)
//! with `tokio::spawn`, so a query must run inside a tokio runtime. The scans' executors are
//! pinned threads of their own and do the reading and decoding; the runtime's workers run
//! joins, aggregates and sorts, so a few of them (two on the reference machine) are enough.
//!
//! Layering: the bottom of the crate; imports nothing from it.

/// A multi-threaded tokio runtime of `workers` threads (at least one), named `corescan-df`,
/// with tokio's I/O and timers when the build has them (the distributed engine's network
/// connections need both).
pub fn runtime(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .thread_name("corescan-df")
        .build()
}
