//! One executor's scan: reads its range in the order of its extents (file order, or b-tree key
//! order for a run whose rows must come out in rowid order), keeps a readahead window in
//! flight, and feeds the pages, in that order, to a [`ScanKernel`] (what is computed from the
//! rows); the kernel can end the scan early ([`ScanKernel::wants_more`]).
//!
//! - [`kernel`]: the [`ScanKernel`] trait, the seam between the loop and the computation;
//! - [`task`]: what an executor is asked to do and the report of what it did;
//! - `pages`: the part common to both loops: which pages of a read are the range's leaves,
//!   handing them to the kernel, following overflow chains (with the partitioner's one chain
//!   walk, [`partitioner::cell::OverflowChain`]) and reading pages whose latest copy is in the
//!   write-ahead log;
//! - [`dma`]: the async loop over glommio's `DmaFile` (`O_DIRECT`) on the executor's ring;
//! - [`pipeline`]: the synchronous loop over the other backends (a private io_uring with
//!   optional SQPOLL, buffered `pread`, `mmap`), inside the same pinned executor thread.
//!
//! Both loops drive the same readahead state machine, [`crate::readahead::ReadSchedule`].
//!
//! Layering, inside: `kernel` and `task` at the bottom, then `pages`, then the two loops, then
//! this file's dispatch (`run`) on top. Outside: scan loops sit above the backends ([`crate::backend`], which know nothing of
//! tasks, pages or kernels) and below the coordinator. The rule for where a loop lives: code
//! that owns an executor's control flow (what to read next, when to wait, what to decode) is a
//! scan loop, here; a backend is a passive reader the loop calls. So the `dma` loop is here,
//! with glommio's `DmaFile` as its backend.

pub mod dma;
pub mod kernel;
mod pages;
pub mod pipeline;
pub mod task;

pub use kernel::{RecordOutcome, RowError, ScanKernel, Spill};
pub(crate) use task::{Arrival, ExecutorTask, StartGate};
pub use task::{ExecutorReport, FilesScanned};

use crate::backend::mmap::MmapBackend;
use crate::backend::pread::PreadBackend;
use crate::backend::uring::UringBackend;
use crate::backend::IoBackend;
use crate::error::Result;

/// Runs an executor's scan on a plain thread (no io_uring): only `pread` and `mmap` can.
pub(crate) fn run_without_uring<K: ScanKernel>(
    task: &ExecutorTask,
    kernel: K,
    sync_capacity: usize,
) -> Result<(K::Partial, ExecutorReport)> {
    let options = task.backend_options(sync_capacity);
    match task.backend {
        IoBackend::Mmap => pipeline::scan(
            task,
            kernel,
            MmapBackend::open(&options).map_err(|e| task.open_error(e))?,
        ),
        _ => pipeline::scan(
            task,
            kernel,
            PreadBackend::open(&options, None).map_err(|e| task.open_error(e))?,
        ),
    }
}

/// Runs one executor's scan with its backend on the current (pinned, glommio) thread.
pub(crate) async fn run<K: ScanKernel>(
    task: &ExecutorTask,
    kernel: K,
    sync_capacity: usize,
) -> Result<(K::Partial, ExecutorReport)> {
    let options = task.backend_options(sync_capacity);
    match task.backend {
        IoBackend::Dma => {
            // A filesystem without O_DIRECT makes glommio's open fail with EINVAL; read the file
            // through the page cache instead.
            let (why, kernel) = if task.faults.odirect {
                ("injected".to_string(), kernel)
            } else {
                match dma::scan(task, kernel).await? {
                    dma::DmaScan::Done(done) => return Ok(*done),
                    dma::DmaScan::DirectRefused(why, kernel) => (why.to_string(), kernel),
                }
            };
            let notice = Some(format!(
                "O_DIRECT refused for this file ({why}): pread instead of dma"
            ));
            pipeline::scan(
                task,
                kernel,
                PreadBackend::open(&options, notice).map_err(|e| task.open_error(e))?,
            )
        }
        IoBackend::Uring => {
            let b = UringBackend::open(&options).map_err(|e| {
                let op = if task.sqpoll_cpu.is_some() {
                    "set up io_uring with SQPOLL"
                } else {
                    "set up io_uring"
                };
                task.io_error(op, &task.path, None, e)
            })?;
            pipeline::scan(task, kernel, b)
        }
        IoBackend::Pread => pipeline::scan(
            task,
            kernel,
            PreadBackend::open(&options, None).map_err(|e| task.open_error(e))?,
        ),
        IoBackend::Mmap => pipeline::scan(
            task,
            kernel,
            MmapBackend::open(&options).map_err(|e| task.open_error(e))?,
        ),
    }
}
