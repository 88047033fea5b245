//! One table cut into many small segments in b-tree key order, dealt to the executors in turn
//! ([`run_segments`]): the scan of a result that must come out in rowid order (an export)
//! while every executor decodes and renders.
//!
//! Cut into one range per executor, such a scan is serial: range 1's rows can be written only
//! after all of range 0's, so executor 1 fills its bounded channel and waits for executor 0 to
//! finish (half the run, on two executors). Cut into segments of about
//! [`SEGMENT_BYTES`] of leaves, dealt round-robin (executor 0 reads segments 0, 2, 4, ...,
//! executor 1 segments 1, 3, 5, ...), each segment with a channel of its own that holds about
//! a segment's output, the consumer drains segment 0 while segment 1 is being read, and
//! segment 1's rows are waiting when it turns to them: every executor works while the order
//! holds, and memory stays bounded by the channels (two segments' output per executor at
//! most).
//!
//! A failing executor stops no other (as in a key-ordered scan, the rows before the failure
//! are the output): the consumer reaches the failed segment's channel, which closes without
//! its end, stops the scan, and names the executor whose error the run ends with.
//!
//! Layering: beside [`super::files`], with the same units ([`Unit::Part`]) and executor
//! runs ([`super::file_run`]).

use std::path::PathBuf;
use std::sync::Arc;

use partitioner::TablePlan;

use crate::error::Result;
use crate::report::RunReport;
use crate::scan::ScanKernel;
use crate::settings::{ExecutorSpec, ScanSettings};

use super::file_run::{FileScans, PlannedFile, Unit};
use super::launch::Launch;
use super::report::Measure;
use super::{collect, report, validate, RangeOrder};

/// A segment's leaves, about: 1 MiB (256 pages of 4 KiB), a segment's output a few times
/// that at most, so that a channel holding one segment's output stays small.
pub const SEGMENT_BYTES: u64 = 1 << 20;

/// What [`run_segments`] returns.
#[derive(Debug)]
pub struct SegmentsScan<T> {
    /// The run's report.
    pub report: RunReport,
    /// What the consumer returned.
    pub consumed: T,
    /// The executor (by index) that read each segment.
    pub executor_of: Vec<usize>,
}

/// Into how many segments [`run_segments`] cuts `plan`'s table for `executors` executors:
/// `None` when it is too small to be worth more than one range per executor (fewer than
/// four segments per executor) or there is one executor. A plan that left the leaf-parent
/// level to the scan is cut a parent per segment (a parent of 4 KiB pages has a few hundred
/// leaves), listed leaves into runs of [`SEGMENT_BYTES`].
pub fn segment_count(plan: &TablePlan, executors: usize) -> Option<usize> {
    let segments = match (&plan.leaf_parents, plan.listed_leaves()) {
        (Some(parents), _) => parents.pages().len(),
        (None, Some(leaves)) => {
            let per = (SEGMENT_BYTES / u64::from(plan.header.page_size).max(1)).max(1);
            (leaves as u64).div_ceil(per) as usize
        }
        (None, None) => 0,
    };
    (executors > 1 && segments >= 4 * executors).then_some(segments)
}

/// Deals `segments` segments, in order, to executors of `weights`: each next segment to the
/// executor furthest below its weight's share of the segments dealt so far (round-robin for
/// equal weights), so that the segments being read at any time are neighbours.
fn deal_in_turn(segments: usize, weights: &[u32]) -> Vec<usize> {
    let weights: Vec<u64> = weights.iter().map(|&w| u64::from(w.max(1))).collect();
    let mut dealt = vec![0u64; weights.len()];
    (0..segments)
        .map(|_| {
            // The smallest (dealt + 1) / weight, ties to the lower index.
            let e = (0..weights.len())
                .min_by(|&a, &b| {
                    ((dealt[a] + 1) * weights[b])
                        .cmp(&((dealt[b] + 1) * weights[a]))
                        .then(a.cmp(&b))
                })
                .unwrap_or(0);
            dealt[e] += 1;
            e
        })
        .collect()
}

/// Scans `plan`'s table in `segments` key-ordered segments dealt to the executors in turn
/// (see the module docs), each segment's kernel made by `scans` ([`FileScans::kernel`], file
/// 0, from `bound`) after [`FileScans::layout`] was told the segments. `consume` runs on the
/// calling thread while the executors scan; it gets each segment's executor and returns its
/// value and the segment whose failure ends the answer (`None`: the segments it needed all
/// ended), whose executor's error is the run's. Every other error is ignored: the consumer
/// stops the scan once it has its answer ([`FileScans::complete`]).
pub fn run_segments<K: ScanKernel, S: FileScans<K>, T>(
    plan: &TablePlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    segments: usize,
    scans: Arc<S>,
    bound: S::Bound,
    consume: impl FnOnce(&[usize]) -> (T, Option<usize>),
) -> Result<SegmentsScan<T>> {
    let checked = validate::check(settings, executors)?;
    let mut cut = plan.clone();
    if let Some(parents) = cut.leaf_parents.as_mut() {
        parents.set_min_parents_per_share(1);
    }
    let shares = cut.shares(&vec![1; segments.max(1)], true)?;
    let weights: Vec<u32> = executors.iter().map(|e| e.weight).collect();
    let executor_of = deal_in_turn(shares.len(), &weights);
    let mut launch = Launch::prepare_shares(
        plan,
        Vec::new(),
        settings,
        executors,
        RangeOrder::Key,
        &checked.available,
    )?;
    launch.keep_going = true;
    let planned = Arc::new(PlannedFile {
        path: plan.path.clone(),
        header: plan.header.clone(),
        wal: plan.wal.clone().map(Arc::new),
        bound,
        index_scan: plan.index_scan.clone(),
    });
    scans.layout(&vec![0; shares.len()]);
    let mut dealt: Vec<Vec<(usize, Unit<S::Bound>)>> =
        executors.iter().map(|_| Vec::new()).collect();
    for (u, share) in shares.into_iter().enumerate() {
        dealt[executor_of[u]].push((
            u,
            Unit::Part {
                file: 0,
                planned: Arc::clone(&planned),
                share,
            },
        ));
    }
    let measure = Measure::start(&plan.path);
    let paths: Arc<Vec<PathBuf>> = Arc::new(vec![plan.path.clone()]);
    let (workers, outcomes) = launch.spawn_units(executors, paths, dealt, scans);
    let (consumed, failed) = consume(&executor_of);
    let blamed = failed.and_then(|u| executor_of.get(u).copied());
    let mut collected = collect::collect_blaming(outcomes, workers, executors, blamed)?;
    let measured = measure.finish();
    // Without SQLite's locks (verify-retry), pages read before and after a commit or
    // checkpoint could mix two versions of the table; under the locks this is a no-op.
    plan.check_unchanged()?;
    for r in &mut collected.reports {
        // One file, read in parts: no file figures.
        r.files = None;
    }
    let report = report::build(
        plan,
        settings,
        &launch,
        &checked,
        measured,
        collected.reports,
    );
    Ok(SegmentsScan {
        report,
        consumed,
        executor_of,
    })
}

#[cfg(test)]
mod tests {
    use super::deal_in_turn;

    #[test]
    fn segments_are_dealt_in_turn_by_weight() {
        assert_eq!(deal_in_turn(6, &[1, 1]), vec![0, 1, 0, 1, 0, 1]);
        assert_eq!(deal_in_turn(5, &[1, 1, 1]), vec![0, 1, 2, 0, 1]);
        // Twice the weight, twice the segments, spread among the other's.
        let dealt = deal_in_turn(9, &[2, 1]);
        assert_eq!(dealt.iter().filter(|&&e| e == 0).count(), 6);
        assert_eq!(dealt, vec![0, 0, 1, 0, 0, 1, 0, 0, 1]);
        assert!(deal_in_turn(0, &[1, 1]).is_empty());
    }
}
