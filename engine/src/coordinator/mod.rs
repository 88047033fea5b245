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
//! The work is split by job: [`validate`] checks the executors and settings, [`launch`]
//! resolves the I/O path and starts the executors, [`collect`] gathers their outcomes in range
//! order and picks the run's error, and [`report`] measures the run and builds its
//! [`RunReport`].
//!
//! Layering: the top of the generic engine. It uses the settings, the backend policy
//! (`crate::backend::policy`, one resolved choice with all its notices), the scan loops and
//! the reports; nothing below imports it. Queries (such as [`crate::q6`]) are built on
//! [`run_scan`].

mod collect;
mod file_run;
mod files;
mod job;
mod launch;
mod range_order;
mod report;
mod segments;
mod validate;

use partitioner::TablePlan;

pub use crate::settings::available_cpus;

use crate::error::{Error, Result};
use crate::report::RunReport;
use crate::scan::ScanKernel;
use crate::settings::{ExecutorSpec, ScanSettings};

pub use file_run::FileScans;
pub use files::{deal_files, run_files, split_counts, FilesScan};
pub use launch::running_executors;
pub use range_order::RangeOrder;
pub use segments::{run_segments, segment_count};

use launch::Launch;
use report::Measure;

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
    kernel_for: impl FnMut(usize) -> K,
    consume: impl FnOnce() -> (T, usize),
) -> Result<ScanWith<K::Partial, T>> {
    let checked = validate::check(settings, executors)?;
    let mut launch = Launch::prepare(plan, settings, executors, order, &checked.available)?;
    let measure = Measure::start(&plan.path);
    let (workers, outcomes) = launch.spawn(plan, executors, kernel_for);
    let (consumed, matters) = consume();
    let collected = collect::collect(outcomes, workers, order, executors, matters)?;
    let measured = measure.finish();
    // Without SQLite's locks (verify-retry), pages read before and after a commit or
    // checkpoint could mix two versions of the table; under the locks this is a no-op.
    plan.check_unchanged()?;
    let report = report::build(
        plan,
        settings,
        &launch,
        &checked,
        measured,
        collected.reports,
    );
    Ok((collected.partials, report, consumed))
}
