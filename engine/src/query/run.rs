//! Running a collected query: [`run_query`] tests the plan's constant `WHERE` terms once
//! ([`test_constant_terms`]), runs one [`QueryKernel`] per executor over its range, and merges
//! their partials on the coordinator ([`super::merge`]); [`run_query_until`] also gives up when
//! its caller no longer wants the answer. A plain projection without `ORDER BY` streams instead
//! ([`super::stream`]).
//!
//! Layering: above the kernel, the merge and the coordinator; below the streams.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use partitioner::TablePlan;

use crate::coordinator::{run_scan_in, RangeOrder};
use crate::report::RunReport;
use crate::settings::{ExecutorSpec, ScanSettings};
use crate::value::Value;

use super::dates;
use super::distinct_count::DistinctCount;
use super::error::{QueryError, QueryOutput};
use super::eval::holds;
use super::ir::QueryPlan;
use super::kernel::QueryKernel;
use super::marks::sorts_with_limit;
use super::merge::{merge, MergeError, Partial};
use super::sort::SortSpace;

/// Tests `plan`'s constant `WHERE` terms ([`QueryPlan::constant_terms`]) once, in order, at
/// the statement's time `now`, as SQLite does before its scan: the first that fails is the
/// query's error (also on an empty table), and the first that is false or NULL leaves no row
/// (the filter becomes `0`: no other expression is computed, and a query without `GROUP BY`
/// still has its one aggregate row). The terms are then gone from the plan.
pub fn test_constant_terms(plan: &mut QueryPlan, now: i64) -> Result<(), QueryError> {
    dates::set_statement_time(now);
    for term in std::mem::take(&mut plan.constant_terms) {
        if !holds(&term, &[]).map_err(QueryError::Eval)? {
            plan.filter = Some(super::ir::Expr::Literal(Value::Integer(0)));
            break;
        }
    }
    Ok(())
}

/// Runs `query` over `table` with one executor per entry of `executors`: each evaluates the
/// filter and projection or partial groups over its range, and the partials are merged here.
pub fn run_query(
    table: &TablePlan,
    query: QueryPlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
) -> std::result::Result<QueryOutput, QueryError> {
    run_query_until(table, query, settings, executors, None)
}

/// [`run_query`] that gives up once `abandoned` is set (nobody wants the answer: the
/// executors stop at their next read, and the partials are not merged). An abandoned run
/// returns [`QueryError::Abandoned`].
pub fn run_query_until(
    table: &TablePlan,
    query: QueryPlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    abandoned: Option<Arc<AtomicBool>>,
) -> std::result::Result<QueryOutput, QueryError> {
    // `count(DISTINCT x)` without GROUP BY: scanned as `GROUP BY x`, in bounded memory.
    let counting = DistinctCount::of(&query);
    let query = counting.as_ref().map_or(query, DistinctCount::inner);
    let scanned = scan_query(table, query, settings, executors, abandoned)?;
    let Scanned {
        query,
        partials,
        report,
    } = scanned;
    let merged = match &counting {
        Some(c) => c.merge(partials, executors.len()),
        None => merge(&query, partials),
    }
    .map_err(|e| merge_error(e, table, executors))?;
    Ok(QueryOutput {
        names: query.names.clone(),
        rows: merged.rows,
        groups: merged.groups,
        report,
    })
}

/// A collected query's scan, before the merge.
pub(super) struct Scanned {
    /// The plan, its constant terms tested.
    pub query: Arc<QueryPlan>,
    /// The executors' partials, in range order.
    pub partials: Vec<Partial>,
    /// The scan's report.
    pub report: RunReport,
}

/// [`run_query_until`]'s scan: the partials, not merged (the statement's time is left set
/// for the merge).
pub(super) fn scan_query(
    table: &TablePlan,
    query: QueryPlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    abandoned: Option<Arc<AtomicBool>>,
) -> std::result::Result<Scanned, QueryError> {
    let mut query = query;
    let now = dates::statement_time();
    test_constant_terms(&mut query, now)?;
    let query = Arc::new(query);
    let kernel = QueryKernel::new(Arc::clone(&query), table.header.usable_size())
        .at_time(now)
        .abandoned_when(abandoned.clone())
        .sorting_in(&SortSpace::for_query(settings, executors.len()));
    // A sorting plan with a LIMIT counts the rows before each marked row in rowid order, so
    // its ranges follow the b-tree (range 0's rows, then range 1's, ... in rowid order).
    let order = if sorts_with_limit(&query) {
        RangeOrder::Key
    } else {
        RangeOrder::File
    };
    let (partials, report) = run_scan_in(table, settings, executors, order, kernel)?;
    if abandoned.is_some_and(|a| a.load(Ordering::Relaxed)) {
        return Err(QueryError::Abandoned);
    }
    // HAVING and the outputs of groups are evaluated here: the same 'now' as the rows.
    dates::set_statement_time(now);
    Ok(Scanned {
        query,
        partials,
        report,
    })
}

/// The query's error for a merge's: a marked row names its executor's CPU and the file.
fn merge_error(e: MergeError, table: &TablePlan, executors: &[ExecutorSpec]) -> QueryError {
    match e {
        MergeError::Eval(e) => QueryError::Eval(e),
        MergeError::Spill(e) => QueryError::Spill(e),
        MergeError::Row { range, failure } => {
            QueryError::Scan(failure.into_error(executors[range].cpu, &table.path))
        }
    }
}
