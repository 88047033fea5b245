//! Gathering a run's outcomes: one message per executor, in range order; the run's error (the
//! cause, not its echoes); the executors joined or given back to the pool.

use crate::error::{Error, Result};
use crate::scan::ExecutorReport;
use crate::settings::ExecutorSpec;

use super::job::Outcome;
use super::launch::{Outcomes, Workers};
use super::range_order::RangeOrder;

/// The executors' results, in range order.
pub(super) struct Collected<P> {
    /// Each executor's partial (`None` for one whose answer did not matter and did not finish).
    pub partials: Vec<Option<P>>,
    /// The reports of the executors that finished.
    pub reports: Vec<ExecutorReport>,
}

/// Receives every executor's outcome from `outcomes`, joins `workers`, and returns the
/// partials, or the first error among the `matters` executors the answer depends on (from
/// range 0).
pub(super) fn collect<P>(
    outcomes: Outcomes<P>,
    workers: Workers,
    order: RangeOrder,
    executors: &[ExecutorSpec],
    matters: usize,
) -> Result<Collected<P>> {
    let matters = matters.min(executors.len());
    gather(outcomes, workers, executors, matters, |got| {
        first_error(order, &mut got[..matters])
    })
}

/// [`collect`] for a run whose answer depends on one executor's error only: `blamed`'s (the
/// executor of the first unit, in the result's order, that did not end; `None`: every unit
/// the answer needs ended). Every other error, and every missing partial, is ignored.
pub(super) fn collect_blaming<P>(
    outcomes: Outcomes<P>,
    workers: Workers,
    executors: &[ExecutorSpec],
    blamed: Option<usize>,
) -> Result<Collected<P>> {
    gather(outcomes, workers, executors, 0, |got| {
        let failed = got.get_mut(blamed?)?;
        match failed.take() {
            Some(Err(e)) => Some(e),
            other => {
                *failed = other;
                None
            }
        }
    })
}

/// Receives every executor's outcome, picks the run's error with `error_of`, joins the
/// workers; an executor among the first `matters` that sent nothing is an error.
fn gather<P>(
    outcomes: Outcomes<P>,
    workers: Workers,
    executors: &[ExecutorSpec],
    matters: usize,
    error_of: impl FnOnce(&mut [Option<Outcome<P>>]) -> Option<Error>,
) -> Result<Collected<P>> {
    let mut got: Vec<Option<Outcome<P>>> = (0..executors.len()).map(|_| None).collect();
    // Every executor sends exactly one message, even when it panics; if a thread dies before
    // sending (glommio failing to build its reactor), its sender drops and recv ends early.
    for _ in 0..executors.len() {
        let Ok((index, result)) = outcomes.recv() else {
            break;
        };
        got[index] = Some(result);
    }
    let mut error = error_of(&mut got);
    for (cpu, w) in workers {
        if let Err(cause) = w.join() {
            error.get_or_insert(Error::Start { cpu, cause });
        }
    }
    if let Some(e) = error {
        return Err(e);
    }
    let mut partials = Vec::with_capacity(executors.len());
    let mut reports = Vec::with_capacity(executors.len());
    for (i, outcome) in got.into_iter().enumerate() {
        match outcome {
            Some(Ok((partial, report))) => {
                partials.push(Some(partial));
                reports.push(report);
            }
            None if i < matters => {
                return Err(Error::Start {
                    cpu: executors[i].cpu,
                    cause: "the executor thread ended without reporting".into(),
                })
            }
            _ => partials.push(None),
        }
    }
    Ok(Collected { partials, reports })
}

/// The error a run ends with, taken out of `outcomes` (the executors the answer depends on):
/// in file order the first that is not a cancellation (the cause, not its echo); in key order
/// the lowest range's, as the rows before it were the output.
fn first_error<P>(order: RangeOrder, outcomes: &mut [Option<Result<P>>]) -> Option<Error> {
    let failed = |o: &Option<Result<P>>, cancelled: bool| matches!(o, Some(Err(e)) if matches!(e, Error::Cancelled { .. }) == cancelled);
    let at = match order {
        RangeOrder::File => outcomes
            .iter()
            .position(|o| failed(o, false))
            .or_else(|| outcomes.iter().position(|o| failed(o, true))),
        RangeOrder::Key => outcomes.iter().position(|o| matches!(o, Some(Err(_)))),
    }?;
    match outcomes[at].take() {
        Some(Err(e)) => Some(e),
        _ => None,
    }
}
