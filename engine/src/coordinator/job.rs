//! What one executor runs ([`ExecutorJob`]): one range of one file with its kernel
//! ([`RangeJob`]), or the units of a scan of several files (`super::file_run::UnitRun`);
//! [`super::launch::Launch`] starts either the same way.
//!
//! Layering: below [`super::launch`] and [`super::file_run`]; above the scan loops.

use std::future::Future;

use crate::error::Result;
use crate::scan::{self, ExecutorReport, ExecutorTask, ScanKernel};

/// What one executor ends with: its partial and report, or its error.
pub(super) type Outcome<P> = Result<(P, ExecutorReport)>;

/// What one executor runs, on a glommio executor (`run_async`) or on a plain pinned thread
/// (`run_sync`, the backends without a ring), with `sync_capacity` reads in flight for the
/// synchronous backends.
pub(super) trait ExecutorJob: Send + 'static {
    /// What it ends with.
    type Partial: Send + 'static;

    /// Runs it on a glommio executor.
    fn run_async(self, sync_capacity: usize) -> impl Future<Output = Outcome<Self::Partial>>;

    /// Runs it on a plain pinned thread.
    fn run_sync(self, sync_capacity: usize) -> Outcome<Self::Partial>;
}

/// One executor's range of one file, with its kernel.
pub(super) struct RangeJob<K> {
    pub task: ExecutorTask,
    pub kernel: K,
}

impl<K: ScanKernel> ExecutorJob for RangeJob<K> {
    type Partial = K::Partial;

    async fn run_async(mut self, sync_capacity: usize) -> Outcome<K::Partial> {
        self.task.prepare()?;
        scan::run(&self.task, self.kernel, sync_capacity).await
    }

    fn run_sync(mut self, sync_capacity: usize) -> Outcome<K::Partial> {
        self.task.prepare()?;
        scan::run_without_uring(&self.task, self.kernel, sync_capacity)
    }
}
