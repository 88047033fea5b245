//! One table over several files: [`run_files`] deals the files to the executors in
//! contiguous runs balanced by size ([`deal_files`]), and each executor opens, plans, reads
//! and closes its files one after the other on its own CPU ([`super::launch::Launch::spawn_files`]),
//! so that 1,000 small files keep every core busy without a planning pass over all of them
//! first, an executor holds one file (and its SQLite read locks) at a time, and the partials
//! come back in the files' order: file 0's, then file 1's, each in rowid order.
//!
//! A file is read as one range by the executor it was dealt to; a file larger than its
//! executor's share is not split (yet).

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use partitioner::TablePlan;

use crate::error::{Error, Result};
use crate::report::{FilesReport, RunReport};
use crate::scan::ScanKernel;
use crate::settings::{ExecutorSpec, ScanSettings};

use super::launch::{FileOpener, Launch};
use super::report::Measure;
use super::{collect, report, validate, RangeOrder};

/// What [`run_files`] returns: each file's partial in the listed order (`None` for a file
/// its opener skipped), the executor (by index) that read each file, and the run's report.
#[derive(Debug)]
pub struct FilesScan<P, T = ()> {
    /// Each file's partial, in the listed order (`None`: skipped).
    pub partials: Vec<Option<P>>,
    /// The executor, by index into the executors, that read each file.
    pub executor_of: Vec<usize>,
    /// The run's report, with [`RunReport::files`].
    pub report: RunReport,
    /// What the consumer returned.
    pub consumed: T,
}

/// Deals files of `sizes` bytes to executors of `weights`: contiguous runs of the listed
/// order (executor 0 the first files), each run's bytes as near its weight's share of the
/// total as whole files allow. Executors may get no file when there are fewer files than
/// executors.
pub fn deal_files(sizes: &[u64], weights: &[u32]) -> Vec<Range<usize>> {
    let total: u128 = sizes.iter().map(|&s| u128::from(s.max(1))).sum();
    let weight_sum: u128 = weights.iter().map(|&w| u128::from(w.max(1))).sum();
    let mut runs = Vec::with_capacity(weights.len());
    let (mut start, mut done, mut weight_done) = (0usize, 0u128, 0u128);
    for (e, &w) in weights.iter().enumerate() {
        weight_done += u128::from(w.max(1));
        let end = if e + 1 == weights.len() {
            sizes.len()
        } else {
            // Take files while the run's end stays nearer its target than without the file.
            let target = total * weight_done / weight_sum.max(1);
            let mut end = start;
            while end < sizes.len() {
                let next = done + u128::from(sizes[end].max(1));
                if next <= target || next - target <= target.saturating_sub(done) {
                    done = next;
                    end += 1;
                } else {
                    break;
                }
            }
            end
        };
        runs.push(start..end);
        start = end;
    }
    runs
}

/// Scans one table over `paths` (listed order) with one executor per entry of `executors`:
/// `open(i, path)`, run on the executor's thread, plans file `i` and makes its kernel (or
/// skips it). `probe` is a plan of one of the files (the first), which chooses the I/O path
/// (`auto`'s page-cache test) and the read sizes for all of them. The first error ends the
/// run, naming its file. `consume` runs on the calling thread while the executors scan (a
/// consumer of rows the kernels stream through channels of their own) and returns its value
/// and the index of the first file its answer does not depend on (errors of executors whose
/// files all come after it are ignored; as [`super::run_scan_with`]'s consumer).
pub fn run_files<K: ScanKernel, T>(
    paths: Arc<Vec<PathBuf>>,
    probe: &TablePlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    order: RangeOrder,
    open: Arc<FileOpener<K>>,
    consume: impl FnOnce() -> (T, usize),
) -> Result<FilesScan<K::Partial, T>> {
    let checked = validate::check(settings, executors)?;
    let sizes = paths
        .iter()
        .map(|p| {
            std::fs::metadata(p)
                .map(|m| m.len())
                .map_err(|source| Error::Io {
                    cpu: executors.first().map_or(0, |e| e.cpu),
                    path: p.clone(),
                    op: "read the metadata of".into(),
                    offset: None,
                    source,
                })
        })
        .collect::<Result<Vec<u64>>>()?;
    let weights: Vec<u32> = executors.iter().map(|e| e.weight).collect();
    let dealt = deal_files(&sizes, &weights);
    let mut executor_of = vec![0; paths.len()];
    for (e, run) in dealt.iter().enumerate() {
        for i in run.clone() {
            executor_of[i] = e;
        }
    }
    let dealt_runs = dealt.clone();
    let mut launch = Launch::prepare(probe, settings, executors, order, &checked.available)?;
    let measure = Measure::start(&probe.path);
    let (workers, outcomes) = launch.spawn_files(executors, Arc::clone(&paths), dealt, open);
    let (consumed, files_matter) = consume();
    // The executors whose files include one the answer depends on.
    let matters = match files_matter.min(paths.len()) {
        k if k == paths.len() => executors.len(),
        0 => 0,
        k => executor_of[k - 1] + 1,
    };
    let collected = collect::collect(outcomes, workers, order, executors, matters)?;
    let measured = measure.finish();
    let mut partials = Vec::with_capacity(paths.len());
    for (p, run) in collected.partials.into_iter().zip(&dealt_runs) {
        // An executor that did not finish (its files did not matter) has no partials.
        let p = p.unwrap_or_default();
        let missing = run.len().saturating_sub(p.len());
        partials.extend(p);
        partials.extend((0..missing).map(|_| None));
    }
    let mut report = report::build(
        probe,
        settings,
        &launch,
        &checked,
        measured,
        collected.reports,
    );
    report.files = Some(files_report(&report, paths.len(), executors.len()));
    Ok(FilesScan {
        partials,
        executor_of,
        report,
        consumed,
    })
}

/// The run's file figures from its executors'.
fn files_report(report: &RunReport, files: usize, executors: usize) -> FilesReport {
    let scanned = report.executors.iter().filter_map(|e| e.files.as_ref());
    let (mut opened, mut plan_s, mut plan_s_max) = (0u64, 0.0f64, 0.0f64);
    for s in scanned {
        opened += s.opened;
        plan_s += s.plan_s;
        plan_s_max = plan_s_max.max(s.plan_s_max);
    }
    let opened = opened as usize;
    FilesReport {
        files,
        opened,
        skipped: files.saturating_sub(opened),
        plan_s_mean: if opened > 0 {
            plan_s / opened as f64
        } else {
            0.0
        },
        plan_s_max,
        open_files_bound: executors,
    }
}

#[cfg(test)]
mod tests {
    use super::deal_files;

    #[test]
    fn files_are_dealt_in_contiguous_runs_balanced_by_size() {
        assert_eq!(deal_files(&[10; 6], &[1, 1]), vec![0..3, 3..6]);
        assert_eq!(deal_files(&[10; 7], &[1, 1, 1]), vec![0..2, 2..5, 5..7]);
        // One large file among small ones: it fills its executor's share alone.
        assert_eq!(deal_files(&[100, 1, 1, 1, 1], &[1, 1]), vec![0..1, 1..5]);
        assert_eq!(deal_files(&[1, 1, 1, 1, 100], &[1, 1]), vec![0..4, 4..5]);
        // Weights: a CPU of weight 3 takes three quarters.
        assert_eq!(deal_files(&[1; 8], &[3, 1]), vec![0..6, 6..8]);
        // Fewer files than executors: some get none.
        assert_eq!(deal_files(&[5], &[1, 1]), vec![0..0, 0..1]);
        assert_eq!(deal_files(&[], &[1, 1]), vec![0..0, 0..0]);
    }
}
