//! One table over several files: [`run_files`] deals the files to the executors in
//! contiguous runs balanced by size ([`deal_files`]), and each executor opens, plans, reads
//! and closes its files one after the other on its own CPU ([`super::launch::Launch::spawn_files`]),
//! so that 1,000 small files keep every core busy without a planning pass over all of them
//! first, an executor holds one file (and its SQLite read locks) at a time, and the partials
//! come back in the files' order: file 0's, then file 1's, each in rowid order.
//!
//! A file larger than one executor's share is planned by the coordinator and split among
//! executors, as one file's table is; its snapshot is then held until the run ends.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use partitioner::TablePlan;

use crate::error::{Error, Result};
use crate::report::{FilesReport, RunReport};
use crate::scan::ScanKernel;
use crate::settings::{ExecutorSpec, ScanSettings};

use super::file_run::{FileScans, PlannedFile, Unit};
use super::launch::Launch;
use super::report::Measure;
use super::{collect, report, validate, RangeOrder};

/// What [`run_files`] returns: each unit's partial in the run's order (`None` for a unit
/// not read), the file and the executor (by index) of each unit, and the run's report.
#[derive(Debug)]
pub struct FilesScan<P, T = ()> {
    /// Each unit's partial, in the run's order (`None`: skipped or not read).
    pub partials: Vec<Option<P>>,
    /// The file (index in the listed order) of each unit.
    pub file_of: Vec<usize>,
    /// The executor, by index into the executors, that read each unit.
    pub executor_of: Vec<usize>,
    /// The run's report, with [`RunReport::files`].
    pub report: RunReport,
    /// What the consumer returned.
    pub consumed: T,
}

/// Files smaller than this are never split among executors: planning them twice (once on
/// the coordinator) costs more than the balance gains.
const SPLIT_MIN_BYTES: u64 = 4 << 20;

/// Into how many shares each file of `sizes` bytes is cut for `executors` executors: 1 (read
/// whole by one executor) unless it is larger than one executor's share of the total and
/// than [`SPLIT_MIN_BYTES`]; then about its size in shares, at most one per executor.
pub fn split_counts(sizes: &[u64], executors: usize) -> Vec<usize> {
    let n = executors.max(1);
    let total: u64 = sizes.iter().sum();
    let share = (total / n as u64).max(1);
    sizes
        .iter()
        .map(|&size| {
            if n < 2 || size <= share || size < SPLIT_MIN_BYTES {
                1
            } else {
                (size.saturating_mul(n as u64).div_ceil(total.max(1)) as usize).clamp(2, n)
            }
        })
        .collect()
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

/// Scans one table over `paths` (listed order) with one executor per entry of `executors`.
/// The files are cut into units ([`Unit`]): a file larger than one executor's share (and than
/// [`SPLIT_MIN_BYTES`]) is planned here and split into shares for several executors (its
/// snapshot held until the run ends); every other file is a unit its executor plans, reads
/// and closes. The units, in order (file by file, a split file's shares in order), are dealt
/// to the executors in contiguous runs balanced by size ([`deal_files`]). `probe` is a plan
/// of one of the files (the first), which chooses the I/O path (`auto`'s page-cache test) and
/// the read sizes for all of them. The first error ends the run, naming its file.
///
/// `consume` runs on the calling thread while the executors scan (a consumer of rows the
/// kernels stream through channels of their own, laid out by [`FileScans::layout`]) and
/// returns its value and how many units, from the first, its answer depends on (errors of
/// executors whose units all come after them are ignored, as for [`super::run_scan_with`]).
pub fn run_files<K: ScanKernel, S: FileScans<K>, T>(
    paths: Arc<Vec<PathBuf>>,
    probe: &TablePlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    order: RangeOrder,
    scans: Arc<S>,
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
    let key_order = matches!(order, RangeOrder::Key);
    let (mut units, mut unit_sizes, mut held) = (Vec::new(), Vec::new(), Vec::new());
    let mut planned_s = Vec::new();
    for ((file, &size), parts) in sizes
        .iter()
        .enumerate()
        .zip(split_counts(&sizes, executors.len()))
    {
        if parts < 2 {
            units.push(Unit::Whole { file });
            unit_sizes.push(size);
            continue;
        }
        let started = std::time::Instant::now();
        let Some((plan, bound)) = scans.plan(file, &paths[file])? else {
            units.push(Unit::Skipped { file });
            unit_sizes.push(0);
            continue;
        };
        let shares = plan.shares(&vec![1; parts], key_order)?;
        let planned = Arc::new(PlannedFile {
            path: plan.path.clone(),
            header: plan.header.clone(),
            wal: plan.wal.clone().map(Arc::new),
            bound,
            index_scan: plan.index_scan.clone(),
        });
        let each = size / shares.len().max(1) as u64;
        for share in shares {
            units.push(Unit::Part {
                file,
                planned: Arc::clone(&planned),
                share,
            });
            unit_sizes.push(each);
        }
        planned_s.push(started.elapsed().as_secs_f64());
        held.push(plan);
    }
    let file_of: Vec<usize> = units.iter().map(Unit::file).collect();
    scans.layout(&file_of);
    let weights: Vec<u32> = executors.iter().map(|e| e.weight).collect();
    let runs = deal_files(&unit_sizes, &weights);
    let mut executor_of = vec![0; units.len()];
    let mut dealt: Vec<Vec<(usize, Unit<S::Bound>)>> = runs.iter().map(|_| Vec::new()).collect();
    for (u, unit) in units.into_iter().enumerate() {
        let e = runs.iter().position(|r| r.contains(&u)).unwrap_or(0);
        executor_of[u] = e;
        dealt[e].push((u, unit));
    }
    let mut launch = Launch::prepare(probe, settings, executors, order, &checked.available)?;
    let measure = Measure::start(&probe.path);
    let (workers, outcomes) = launch.spawn_units(executors, Arc::clone(&paths), dealt, scans);
    let (consumed, units_matter) = consume();
    // The executors whose units include one the answer depends on.
    let matters = match units_matter.min(file_of.len()) {
        k if k == file_of.len() => executors.len(),
        0 => 0,
        k => executor_of[k - 1] + 1,
    };
    let collected = collect::collect(outcomes, workers, order, executors, matters)?;
    let measured = measure.finish();
    // The split files were read in the state their plans hold: check, then release them.
    for plan in held {
        plan.check_unchanged()?;
    }
    let mut partials = Vec::with_capacity(file_of.len());
    for (p, run) in collected.partials.into_iter().zip(&runs) {
        // An executor that did not finish (its units did not matter) has no partials.
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
    report.files = Some(files_report(
        &report,
        paths.len(),
        executors.len(),
        &planned_s,
    ));
    Ok(FilesScan {
        partials,
        file_of,
        executor_of,
        report,
        consumed,
    })
}

/// The run's file figures from its executors' and the split files' planning times.
fn files_report(
    report: &RunReport,
    files: usize,
    executors: usize,
    split_plan_s: &[f64],
) -> FilesReport {
    let scanned = report.executors.iter().filter_map(|e| e.files.as_ref());
    let (mut opened, mut plan_s, mut plan_s_max) = (
        split_plan_s.len() as u64,
        split_plan_s.iter().sum::<f64>(),
        split_plan_s.iter().copied().fold(0.0f64, f64::max),
    );
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
        open_files_bound: executors + split_plan_s.len(),
        split: split_plan_s.len(),
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
