//! [`QueryKernel`]: one executor's share of a query (decode, filter, project or aggregate
//! into a [`Partial`]); [`super::run`] runs the kernels and the coordinator's [`merge`] (in
//! [`super::merge`]) of their partials; which failing rows are kept, and where, is
//! [`super::marks`]'s.
//!
//! Order: a plain query's rows carry their rowid, and rows are ordered by the `ORDER BY` keys,
//! then by rowid; without `ORDER BY` that is rowid order, SQLite's full-scan order, whatever
//! the order of the leaf pages in the file. [`super::run`] collects the rows and sorts them
//! here (ranges cut by page number); `corescan query` streams a plain projection without
//! `ORDER BY` instead ([`super::stream`]: ranges in b-tree order, rows sent in chunks as the
//! kernel decodes them). With `LIMIT`, each executor keeps only its best `LIMIT + OFFSET`
//! rows. `ORDER BY rowid DESC` ([`QueryPlan::backward`]) is collected, descending. Grouped results come in group-key order (then `ORDER BY`), each group showing the
//! key values of the row [`super::key_row`] picks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use smallvec::{smallvec, SmallVec};

use crate::datatype3::{apply_column_affinity, Collation};
use crate::decode::{CellBatch, NeededColumns};
use crate::value::{Value, ValueRef};

use super::aggregate::{take_growth, AggState, OrderedRow, SumState};
use super::batch::{self, Batch, Rows, Selection, Source};
use super::dates;
use super::eval::{eval, eval_ref, holds, with_json_arguments, Operand};
use super::group_merge::GroupQuery;
use super::group_spill::{self, GroupRuns, GroupStats, SpilledGroups, MAX_RUNS};
use super::groups::packed_key;
pub use super::groups::{Group, GroupTable};
use super::ir::{AggFunc, ColumnRead, Expr, QueryPlan, Shape};
use super::key_row::{self, KeyRow};
pub use super::marks::compare_key;
use super::marks::{
    compare_key_ref, compare_rows, keep_best, past_end, plan_marks, resolve_marks, sorts_fully,
    sorts_with_limit,
};
pub use super::merge::{merge, MergeError, Partial};
use super::numeric::{NumericRuns, RunKind};
use super::page_groups::{packed_slots, PageRows};
use super::program::{Node, RowProgram};
use super::row_stream::RowStream;
pub use super::row_stream::{OutRow, RowFailure};
use super::sink::SinkRows;
use super::sort::{SortBuffer, SortSpace, SpillError};
use super::window;
use crate::scan::{RecordOutcome, RowError, ScanKernel, Spill};

/// Up to this many groups, a page's updates of one aggregate go through a table of its
/// states, one per group, gathered once per page.
const FEW_GROUPS: usize = 16;

/// One executor's query state.
#[derive(Debug, Clone)]
pub struct QueryKernel {
    plan: Arc<QueryPlan>,
    /// The record columns the plan reads, in the order of `record_slots`.
    needed: NeededColumns,
    /// For each needed record column: its plan slot, and whether the column has REAL
    /// affinity (SQLite stores integral reals of such a column as integers and reads them
    /// back as reals).
    record_slots: Vec<(usize, bool)>,
    /// The plan slots holding the rowid.
    rowid_slots: Vec<usize>,
    /// The page's decoded cells (reused from page to page).
    cells: CellBatch,
    usable: u32,
    has_virtual: bool,
    /// Whether pages are evaluated as batches ([`super::batch`]).
    batched: bool,
    /// The filter a batched plan applies to a page (the plan's, its conjuncts possibly
    /// reordered: see [`window::window_and_filter`]).
    batch_filter: Option<batch::BatchFilter>,
    /// A batched plan's keys and aggregate arguments as shared nodes.
    program: Option<RowProgram>,
    /// For each plan slot read from the record: its index among the needed columns and
    /// whether it has REAL affinity.
    sources: Vec<Option<(usize, bool)>>,
    /// The group of each selected row of the page (reused from page to page).
    group_of: Vec<u32>,
    /// The page's aggregate arguments as typed runs (reused from page to page).
    numeric: NumericRuns,
    partial: Partial,
    rows: u64,
    /// Which row of a group shows its keys.
    key_row: KeyRow,
    /// The statement's time, what `'now'` reads (see [`super::dates`]).
    now: i64,
    /// A streaming query's channel to the coordinator (see [`super::stream`]): the rows in
    /// `partial` are then only those not yet sent.
    stream: Option<RowStream>,
    /// The first failing row of the page being decoded (rowid, error), raised when the page is
    /// done (a grouped or ordered query, where every row is evaluated): none after it is
    /// evaluated, as SQLite stops at the row that fails.
    failed: Option<(i64, String)>,
    /// A plain query without `ORDER BY`: no row after this rowid in the scan's order (higher,
    /// or lower for a [`QueryPlan::backward`] scan) is evaluated or kept (its rows end at a
    /// marked row the result cannot skip: see [`RowFailure`]).
    end_at: Option<i64>,
    /// A sorting plan with a `LIMIT` has marked rows on the page being decoded whose place
    /// is not yet known ([`resolve_marks`]).
    unresolved: bool,
    /// A top-k plan (`ORDER BY ... LIMIT`): the `k`-th best row this executor has kept (its
    /// keys and rowid), once it has `k` rows whose output columns are computed. A later row
    /// that ranks after it is not among the range's best `k`, and SQLite's sorter drops it
    /// before computing its output columns: it is neither allocated nor kept
    /// ([`QueryKernel::update_cutoff`]).
    cutoff: Option<OutRow>,
    /// Set when nobody wants the answer any more (an embedder dropped its handle): the
    /// executor stops at its next read.
    abandoned: Option<Arc<AtomicBool>>,
    /// A streamed projection of plain columns into an embedder's sink whose filter cannot
    /// fail: the output columns' slots. Its pages (those without records on overflow pages)
    /// go to the sink straight from the decoded cells ([`QueryKernel::eval_columnar`]).
    columnar: Option<Vec<usize>>,
    /// A grouped query's groups beyond its memory budget ([`super::group_spill`]).
    spilled: GroupSpill,
}

/// What an executor's grouped query spilled: a table past its share of the budget is sorted
/// by key and written to the scratch directory between two pages.
#[derive(Debug, Clone, Default)]
struct GroupSpill {
    /// The budget and scratch directory (`None`: the table is never spilled).
    space: Option<SortSpace>,
    /// The runs written, in order (earlier rows first).
    runs: Vec<SpilledGroups>,
    /// The first failure to write or merge runs: the query's error.
    failed: Option<SpillError>,
    stats: GroupStats,
}

impl QueryKernel {
    /// A kernel for `plan` over pages with `usable` usable bytes.
    pub fn new(plan: Arc<QueryPlan>, usable: u32) -> Self {
        let partial = match plan.shape {
            Shape::Rows { .. } if sorts_fully(&plan) => {
                Partial::Sorted(SortBuffer::new(SortSpace::unbounded()))
            }
            Shape::Rows { .. } => Partial::Rows(Vec::new()),
            Shape::Groups { .. } => Partial::Groups(GroupTable::default()),
        };
        let has_virtual = plan
            .columns
            .iter()
            .any(|c| matches!(c, ColumnRead::Virtual { .. }));
        let mut positions = Vec::new();
        let mut record_slots = Vec::new();
        let mut rowid_slots = Vec::new();
        for (slot, c) in plan.columns.iter().enumerate() {
            match c {
                ColumnRead::Record {
                    position,
                    real_affinity,
                    ..
                } => {
                    positions.push(*position);
                    record_slots.push((slot, *real_affinity));
                }
                ColumnRead::Rowid => rowid_slots.push(slot),
                // Bound to a literal before a scan of several files; NULL otherwise.
                ColumnRead::Virtual { .. } | ColumnRead::File => {}
            }
        }
        let sources: Vec<Option<(usize, bool)>> = plan
            .columns
            .iter()
            .enumerate()
            .map(|(slot, _)| {
                record_slots
                    .iter()
                    .position(|&(s, _)| s == slot)
                    .map(|needed| (needed, record_slots[needed].1))
            })
            .collect();
        let batched = batch::plan_batchable(&plan, has_virtual);
        // A seek's leaves: the decoder skips the rows whose rowid the filter rejects.
        let mut needed = NeededColumns::new(&positions).with_rowid_ranges(plan.rowid_ranges());
        let mut batch_filter = plan.filter.clone();
        if batched {
            // Every row of a decoded page goes through the batch's filter: the decoder may
            // drop the rows a text range rejects, and the batch then tests that range last.
            let sources: &[Option<(usize, bool)>] = &sources;
            if let Some((w, filter)) = window::window_and_filter(plan.filter.as_ref(), |slot| {
                sources.get(slot).copied().flatten().map(|(n, _)| n)
            }) {
                needed = needed.with_window(Some(w));
                batch_filter = Some(filter);
            }
        }
        let program = match &plan.shape {
            Shape::Groups {
                keys, aggregates, ..
            } if batched => Some(RowProgram::new(keys, aggregates)),
            _ => None,
        };
        QueryKernel {
            now: dates::statement_time(),
            key_row: KeyRow::of(&plan.shape, plan.order_by.iter().map(|k| &k.expr)),
            stream: None,
            failed: None,
            end_at: None,
            unresolved: false,
            cutoff: None,
            abandoned: None,
            columnar: None,
            spilled: GroupSpill::default(),
            needed,
            batch_filter: batch_filter.as_ref().map(batch::BatchFilter::new),
            record_slots,
            rowid_slots,
            cells: CellBatch::new(),
            has_virtual,
            batched,
            program,
            sources,
            group_of: Vec::new(),
            numeric: NumericRuns::default(),
            plan,
            usable,
            partial,
            rows: 0,
        }
    }

    /// A kernel for a plain projection without `ORDER BY` that sends its rows, in rowid order,
    /// through `stream` as it scans (the range must be decoded in key order).
    /// `now` is the statement's time ([`dates::statement_time`], read once for all
    /// executors).
    pub fn streaming(plan: Arc<QueryPlan>, usable: u32, stream: RowStream, now: i64) -> Self {
        let kernel = QueryKernel::new(plan, usable);
        let columnar = if stream.has_sink() {
            columnar_outputs(&kernel.plan, kernel.has_virtual)
        } else {
            None
        };
        QueryKernel {
            stream: Some(stream),
            failed: None,
            now,
            columnar,
            ..kernel
        }
    }

    /// The kernel with `'now'` read as the statement's time `now` ([`dates::statement_time`],
    /// read once for all executors).
    pub fn at_time(self, now: i64) -> Self {
        QueryKernel { now, ..self }
    }

    /// The kernel, with a full sort's rows ([`sorts_fully`]) held within `space` (without it:
    /// in memory, however many).
    pub fn sorting_in(self, space: &SortSpace) -> Self {
        match self.partial {
            Partial::Sorted(_) => QueryKernel {
                partial: Partial::Sorted(SortBuffer::new(space.clone())),
                ..self
            },
            // A grouped query's table within the same budget: spilled beyond it.
            Partial::Groups(_) => QueryKernel {
                spilled: GroupSpill {
                    space: Some(space.clone()),
                    ..GroupSpill::default()
                },
                ..self
            },
            _ => self,
        }
    }

    /// The kernel, stopping at its next read once `abandoned` is set (`None`: never).
    pub fn abandoned_when(self, abandoned: Option<Arc<AtomicBool>>) -> Self {
        QueryKernel { abandoned, ..self }
    }

    /// The statement's time this kernel's `'now'` reads.
    pub fn statement_time(&self) -> i64 {
        self.now
    }
}

/// A streamed plain projection's output slots, when its pages can go to a sink straight from
/// the decoded cells: every output a plain column, no `ORDER BY`, `OFFSET` or generated
/// column, every missing column's DEFAULT known and a filter that cannot fail (so no row is
/// ever marked, and the page's rows are its selected cells).
fn columnar_outputs(plan: &QueryPlan, has_virtual: bool) -> Option<Vec<usize>> {
    let Shape::Rows { outputs } = &plan.shape else {
        return None;
    };
    let defaults_known = plan.columns.iter().all(|c| {
        !matches!(
            c,
            ColumnRead::Record {
                default: Err(_),
                ..
            }
        )
    });
    if has_virtual
        || !defaults_known
        || !plan.order_by.is_empty()
        || plan.backward
        || plan.offset > 0
        || !plan.filter.as_ref().is_none_or(batch::batchable)
    {
        return None;
    }
    outputs
        .iter()
        .map(|e| match e {
            Expr::Column(slot) => Some(*slot),
            _ => None,
        })
        .collect()
}

/// Row `r` of `cells` (values borrowed from `base`, the page or the spilled payload) as the
/// plan's row-stage slots: record columns (their DEFAULT when the record ends before them),
/// the rowid, and NULL for virtual columns (computed by the caller). `out` has one entry per
/// plan column.
#[inline]
fn row_slots<'a>(
    kernel: (&'a QueryPlan, &[(usize, bool)], &[usize]),
    cells: &CellBatch,
    base: &'a [u8],
    r: usize,
    out: &mut [ValueRef<'a>],
) -> Result<(), String> {
    let (plan, record_slots, rowid_slots) = kernel;
    for (j, &(slot, real)) in record_slots.iter().enumerate() {
        out[slot] = match cells.value(base, r, j) {
            Some(ValueRef::Integer(i)) if real => ValueRef::Real(i as f64),
            Some(v) => v,
            None => match &plan.columns[slot] {
                ColumnRead::Record { default: Ok(d), .. } => d.as_ref(),
                ColumnRead::Record {
                    default: Err(why), ..
                } => return Err(why.clone()),
                _ => ValueRef::Null,
            },
        };
    }
    let rowid = cells.rowid(base, r);
    for &slot in rowid_slots {
        out[slot] = ValueRef::Integer(rowid);
    }
    Ok(())
}

/// The `k`-th best of a top-k plan's `rows` just cut by [`keep_best`], if the first `k`
/// all have their output columns (a marked row among them leaves no cutoff).
fn cutoff_of(plan: &QueryPlan, rows: &[OutRow], k: u64) -> Option<OutRow> {
    if plan.order_by.is_empty() {
        return None;
    }
    let k = usize::try_from(k).ok()?;
    let best = rows.get(..k)?;
    if k == 0 || best.iter().any(|r| r.values.is_err()) {
        return None;
    }
    let last = &best[k - 1];
    Some(OutRow {
        keys: last.keys.clone(),
        rowid: last.rowid,
        values: Ok(Vec::new()),
    })
}

/// Whether the row in `slots` (rowid `rowid`) ranks strictly after `cutoff` in `plan`'s
/// order ([`compare_rows`]), its `ORDER BY` keys evaluated without allocating.
fn ranks_after(
    plan: &QueryPlan,
    slots: &[ValueRef<'_>],
    rowid: i64,
    cutoff: &OutRow,
) -> Result<bool, String> {
    for (k, c) in plan.order_by.iter().zip(&cutoff.keys) {
        let v = eval_ref(&k.expr, slots)?;
        match compare_key_ref(k, v.as_ref(), c.as_ref()) {
            std::cmp::Ordering::Equal => {}
            o => return Ok(o == std::cmp::Ordering::Greater),
        }
    }
    let scan = if plan.backward {
        cutoff.rowid.cmp(&rowid)
    } else {
        rowid.cmp(&cutoff.rowid)
    };
    Ok(scan == std::cmp::Ordering::Greater)
}

impl ScanKernel for QueryKernel {
    type Partial = Partial;

    fn rows(&self) -> u64 {
        self.rows
    }

    fn page_done(&mut self) -> Result<(), RowError> {
        if std::mem::take(&mut self.unresolved) {
            if let (Partial::Rows(rows), Some(k)) = (&mut self.partial, self.plan.keep()) {
                resolve_marks(&self.plan.order_by, rows, k);
                if rows.len() as u64 >= 2 * k.max(512) {
                    keep_best(&self.plan, rows, k);
                    self.cutoff = cutoff_of(&self.plan, rows, k);
                }
            }
        }
        if let (Some(stream), Partial::Rows(rows)) = (&mut self.stream, &mut self.partial) {
            // Records completed from overflow pages may have been evaluated after the row
            // the stream ends at.
            if let Some(end) = self.end_at {
                rows.retain(|r| r.rowid <= end);
            }
            stream.page_done(rows);
        }
        match self.failed.take() {
            Some((rowid, message)) => Err(RowError { rowid, message }),
            None => Ok(()),
        }
    }

    fn wants_more(&self) -> bool {
        if self
            .abandoned
            .as_ref()
            .is_some_and(|a| a.load(Ordering::Relaxed))
        {
            return false;
        }
        match (&self.stream, &self.partial) {
            (Some(stream), Partial::Rows(rows)) => {
                self.end_at.is_none() && stream.wants_more(rows.len())
            }
            _ => true,
        }
    }

    fn finish(mut self) -> Partial {
        if let (Some(stream), Partial::Rows(rows)) = (&mut self.stream, &mut self.partial) {
            // Rows of a page whose decoding did not complete are not output; finish comes
            // after the last complete page.
            rows.clear();
            stream.finish();
        }
        if let Some(groups) = self.take_groups() {
            // Sorted here, on the executor, so the coordinator only merges sorted runs.
            let spilled = std::mem::take(&mut self.spilled);
            self.partial = Partial::KeyOrder(GroupRuns {
                spilled: spilled.runs,
                memory: groups,
                failed: spilled.failed,
                stats: spilled.stats,
            });
        }
        if let Partial::Sorted(buffer) = &mut self.partial {
            buffer.finish(&self.plan.order_by, self.plan.backward);
        }
        if let Partial::Rows(rows) = &mut self.partial {
            if self.end_at.is_some() {
                let (end, backward) = (self.end_at, self.plan.backward);
                rows.retain(|r| !past_end(end, backward, r.rowid));
            }
            if let Some(k) = self.plan.keep() {
                keep_best(&self.plan, rows, k);
            } else if !self.plan.order_by.is_empty() {
                // A full sort: each executor sorts its own rows, in parallel, so that the
                // coordinator's sort of the ranges' rows one after the other only merges
                // sorted runs (the standard sort finds and merges them).
                rows.sort_by(|a, b| compare_rows(&self.plan, a, b));
            }
        }
        self.partial
    }

    fn decode_page(
        &mut self,
        page_no: u32,
        page: &[u8],
        next: &[u8],
        spills: &mut Vec<Spill>,
    ) -> Result<(), String> {
        self.spill_groups_if_full();
        dates::set_statement_time(self.now);
        let cells =
            self.cells
                .decode_page_ahead(&self.needed, page_no, page, next, self.usable, spills)?;
        self.eval_decoded(page_no, page, cells, spills.is_empty())
    }

    fn decode_index_page(
        &mut self,
        page_no: u32,
        page: &[u8],
        first_place: i64,
        spills: &mut Vec<Spill>,
    ) -> Result<(), String> {
        self.spill_groups_if_full();
        dates::set_statement_time(self.now);
        let cells = self.cells.decode_index_page(
            &self.needed,
            page,
            (page_no, first_place),
            self.usable,
            spills,
        )?;
        self.eval_decoded(page_no, page, cells, spills.is_empty())
    }

    fn eval_spill(
        &mut self,
        spill: &Spill,
        payload: &[u8],
        complete: bool,
    ) -> Result<RecordOutcome, String> {
        dates::set_statement_time(self.now);
        let outcome = self
            .cells
            .decode_record(&self.needed, spill.rowid, payload, complete)?;
        // A record after the page's failing row is not evaluated (SQLite stops at that row).
        let after_failure = self.failed.as_ref().is_some_and(|(f, _)| spill.rowid > *f);
        if outcome == RecordOutcome::Done && !after_failure {
            self.eval_rows(spill.page, payload, false);
        }
        Ok(outcome)
    }
}

impl QueryKernel {
    /// Evaluates the `cells` rows of a page just decoded (`whole`: none of them waits for its
    /// overflow pages).
    fn eval_decoded(
        &mut self,
        page_no: u32,
        page: &[u8],
        cells: usize,
        whole: bool,
    ) -> Result<(), String> {
        self.rows += cells as u64;
        if self.batched {
            return self.eval_batch(page);
        }
        if self.columnar.is_some() && whole {
            self.eval_columnar(page);
            return Ok(());
        }
        // The LIMIT may cut the page's rows only when none of them waits for its overflow
        // pages: such a record is completed after the page's other cells, and may come first.
        self.eval_rows(page_no, page, whole);
        Ok(())
    }

    /// A grouped query's groups sorted by key, its table emptied (`None` for other
    /// queries); its peak size counted in the figures.
    fn take_groups(&mut self) -> Option<Vec<Group>> {
        let (Shape::Groups { keys, .. }, Partial::Groups(table)) =
            (&self.plan.shape, &mut self.partial)
        else {
            return None;
        };
        if let Some(program) = &self.program {
            // Aggregates that shared a state during the scan get their own copy.
            for group in &mut table.groups {
                for j in 0..group.states.len() {
                    let from = program.shares(j);
                    if from != j {
                        group.states[j] = group.states[from].clone();
                    }
                }
            }
        }
        table.add_bytes(take_growth());
        let stats = &mut self.spilled.stats;
        stats.table_bytes = stats.table_bytes.max(table.bytes() as u64);
        let collations: Vec<_> = keys.iter().map(|k| k.1).collect();
        Some(std::mem::take(table).into_key_order(&collations))
    }

    /// Writes a grouped query's table to the scratch directory if it is past its share of
    /// the budget (between pages: every row of the last page has updated its group), and
    /// merges the executor's runs once [`MAX_RUNS`] of them have one level.
    fn spill_groups_if_full(&mut self) {
        let (Some(space), Partial::Groups(table)) = (&self.spilled.space, &mut self.partial) else {
            return;
        };
        table.add_bytes(take_growth());
        if table.bytes() < space.buffer_limit()
            || table.groups.len() < 2
            || self.spilled.failed.is_some()
        {
            return;
        }
        let dir = space.dir().to_path_buf();
        let Some(groups) = self.take_groups() else {
            return;
        };
        let collations: Vec<Collation> = match &self.plan.shape {
            Shape::Groups { keys, .. } => keys.iter().map(|k| k.1).collect(),
            Shape::Rows { .. } => Vec::new(),
        };
        let spill = &mut self.spilled;
        match group_spill::spill(&dir, &collations, groups) {
            Ok(run) => {
                spill.stats.spilled_runs += 1;
                spill.stats.spilled_bytes += run.bytes;
                spill.runs.push(run);
            }
            Err(e) => {
                spill.failed = Some(e);
                return;
            }
        }
        let query = GroupQuery::of(&self.plan).expect("a grouped plan");
        while spill.runs.len() >= MAX_RUNS {
            let from = spill.runs.len() - MAX_RUNS;
            let level = spill.runs[from].level;
            if spill.runs[from..].iter().any(|r| r.level != level) {
                break;
            }
            match query.compact(&spill.runs[from..], &dir) {
                Ok(run) => {
                    spill.stats.spilled_runs += 1;
                    spill.stats.spilled_bytes += run.bytes;
                    spill.runs.truncate(from);
                    spill.runs.push(run);
                }
                Err(e) => {
                    spill.failed = Some(e);
                    return;
                }
            }
        }
    }

    /// Whether the row `rowid` comes after the row the result ends at, in the scan's order
    /// ([`QueryKernel::end_at`]).
    fn beyond_end(&self, rowid: i64) -> bool {
        past_end(self.end_at, self.plan.backward, rowid)
    }

    /// Whether a streamed projection (no `ORDER BY`; its range read in rowid order) has the
    /// `LIMIT + OFFSET` rows its executor can contribute, or the output has all it needs.
    /// Collected rows are not cut here: their ranges are read in page order, so an executor's
    /// first rows need not be its lowest rowids.
    fn has_its_limit(&self) -> bool {
        match (&self.stream, &self.partial) {
            (Some(_), Partial::Rows(_)) => !self.wants_more(),
            _ => false,
        }
    }

    /// The decoded rows of leaf page `page_no` one at a time (values borrowed from `base`);
    /// with `cut`, none after a projection's `LIMIT` (see [`QueryKernel::has_its_limit`]) is
    /// evaluated. A row that fails ends the evaluation: a plain query without `ORDER BY` keeps
    /// it as a marked row ([`RowFailure`]; one failing in its output columns ends it only
    /// when no `OFFSET` can skip it), the others raise its error when the page is done
    /// ([`ScanKernel::page_done`]).
    fn eval_rows(&mut self, page_no: u32, base: &[u8], cut: bool) {
        // Borrowed, not cloned: an `Arc` clone per row is an atomic on a cache line every
        // executor shares. The row's values live on the stack for the usual widths.
        let plan = &*self.plan;
        let layout = (plan, &self.record_slots[..], &self.rowid_slots[..]);
        let mut slots: SmallVec<[ValueRef<'_>; 32]> = smallvec![ValueRef::Null; plan.columns.len()];
        for r in 0..self.cells.len() {
            if cut && self.has_its_limit() {
                // SQLite stops at the LIMIT: the rows after it are not evaluated (an error in
                // one of them is not the query's).
                break;
            }
            let rowid = self.cells.rowid(base, r);
            if self.beyond_end(rowid) {
                if plan.backward {
                    // The page's later cells have higher rowids: they come first backwards.
                    continue;
                }
                // Cells come in rowid order: none after the row the result ends at matters.
                break;
            }
            let evaluated = (|| {
                row_slots(layout, &self.cells, base, r, &mut slots)?;
                if self.has_virtual {
                    // Generated columns: computed in slot order over owned copies.
                    let mut owned: Vec<Value> =
                        slots.iter().map(|v| ValueRef::to_owned(*v)).collect();
                    for (i, c) in plan.columns.iter().enumerate() {
                        if let ColumnRead::Virtual { expr, affinity } = c {
                            let refs: Vec<ValueRef<'_>> = owned.iter().map(Value::as_ref).collect();
                            let v = eval(expr, &refs)?;
                            owned[i] = apply_column_affinity(v.as_ref(), *affinity);
                        }
                    }
                    let refs: Vec<ValueRef<'_>> = owned.iter().map(Value::as_ref).collect();
                    accept(
                        plan,
                        self.key_row,
                        &mut self.partial,
                        self.cutoff.as_ref(),
                        (page_no, rowid),
                        &refs,
                    )
                } else {
                    accept(
                        plan,
                        self.key_row,
                        &mut self.partial,
                        self.cutoff.as_ref(),
                        (page_no, rowid),
                        &slots,
                    )
                }
            })();
            match (evaluated, &mut self.partial) {
                (Ok(Kept::Row), Partial::Rows(rows)) => {
                    if let Some(k) = plan.keep() {
                        // While the page has unresolved marked rows its rows all stay.
                        if !self.unresolved && rows.len() as u64 >= 2 * k.max(512) {
                            keep_best(plan, rows, k);
                            self.cutoff = cutoff_of(plan, rows, k);
                        }
                    }
                }
                (Ok(Kept::Row), Partial::Groups(_) | Partial::KeyOrder(_) | Partial::Sorted(_)) => {
                }
                (Ok(Kept::Marked), Partial::Rows(_)) if sorts_with_limit(plan) => {
                    self.unresolved = true;
                }
                (Ok(Kept::Marked), Partial::Rows(rows)) => {
                    // Its output columns failed: an OFFSET may still skip it, unless the rows
                    // before it in this range alone reach the OFFSET. Then the result either
                    // ends before it (the LIMIT) or fails there: nothing after it matters.
                    let ends = self.stream.as_ref().is_some_and(|stream| {
                        // Its place in this range's rows: after the rows sent and those of
                        // this page before it (a record completed from its overflow pages
                        // comes after the page's other cells, some of them after it).
                        let before = rows.iter().filter(|r| r.rowid < rowid).count();
                        stream.produced(before) >= self.plan.offset
                    });
                    if ends {
                        self.end_at = Some(rowid);
                        break;
                    }
                }
                (Err(e), Partial::Rows(rows)) if plan_marks(plan) => {
                    // A failure before the output columns (WHERE): the scan fails where it
                    // reaches this row, unless the LIMIT ends the result before it.
                    rows.push(OutRow {
                        keys: Vec::new(),
                        rowid,
                        values: Err(RowFailure {
                            page: page_no,
                            rowid,
                            what: e,
                            in_output: false,
                            ahead: None,
                        }),
                    });
                    if plan.backward {
                        // Backwards, the scan reaches this page's later cells first.
                        self.end_at = Some(self.end_at.map_or(rowid, |end| end.max(rowid)));
                        continue;
                    }
                    self.end_at = Some(self.end_at.map_or(rowid, |end| end.min(rowid)));
                    break;
                }
                (Err(e), _) => {
                    // Cells come in rowid order; a record completed from its overflow pages
                    // may fail at a lower rowid than a cell did.
                    if self.failed.as_ref().is_none_or(|(f, _)| rowid < *f) {
                        self.failed = Some((rowid, e));
                    }
                    break;
                }
                (
                    Ok(Kept::Marked),
                    Partial::Groups(_) | Partial::KeyOrder(_) | Partial::Sorted(_),
                ) => {
                    unreachable!("only plain queries keep marked rows")
                }
            }
        }
    }

    /// A streamed projection's decoded page (no record on overflow pages) straight to the
    /// sink: the filter over the page's cells as a batch, the selected rows cut to the room
    /// the `LIMIT` leaves, then the sink copies each output column from the cells.
    fn eval_columnar(&mut self, page: &[u8]) {
        let plan = &*self.plan;
        let rows = self.cells.len();
        let (Some(outputs), Some(stream)) = (&self.columnar, &mut self.stream) else {
            unreachable!("columnar pages belong to a streamed projection into a sink");
        };
        if rows == 0 {
            return;
        }
        let sources = batch_sources(plan, &self.sources);
        let b = page_batch(&self.cells, page, &sources, plan.columns.len());
        let rowids = self.cells.rowids().expect("the query decoder reads rowids");
        let mut sel = selected(&b, rows, self.batch_filter.as_ref());
        let room = usize::try_from(stream.room(0)).unwrap_or(usize::MAX);
        sel.truncate(room);
        stream.append_page(&SinkRows::page(&b, &sel, outputs, rowids));
    }

    /// A grouped query's decoded page as one batch: filter the batch, evaluate the program
    /// (keys and aggregate arguments, each common subexpression once) node by node, find
    /// every selected row's group, then update the aggregates one at a time over the page's
    /// rows. Values are read from the decoded cells only when a node asks for them.
    fn eval_batch(&mut self, page: &[u8]) -> Result<(), String> {
        let plan = &*self.plan;
        let program = self.program.as_ref().expect("batched plans have a program");
        let width = plan.columns.len();
        let rows = self.cells.len();
        if rows == 0 {
            // The decoder's window dropped every row of the page.
            return Ok(());
        }
        let sources = batch_sources(plan, &self.sources);
        let b = page_batch(&self.cells, page, &sources, width);
        let rowids = self.cells.rowids().expect("the query decoder reads rowids");
        let sel = selected(&b, rows, self.batch_filter.as_ref());
        let n = sel.len();
        if n == 0 {
            return Ok(());
        }
        // Rows met in an index's order: their places in it stand for their rowids (only the
        // selected rows': a partial index lists no other).
        let places: Vec<i64>;
        let rowids = match &plan.arrival {
            Some(arrival) => {
                let mut p = vec![0; rowids.len()];
                for &r in &sel {
                    p[r as usize] = arrival.place(rowids[r as usize])?;
                }
                places = p;
                &places[..]
            }
            None => rowids,
        };
        let (
            Shape::Groups {
                keys, aggregates, ..
            },
            Partial::Groups(table),
        ) = (&plan.shape, &mut self.partial)
        else {
            unreachable!("only grouped plans are batched");
        };
        let first = self.key_row == KeyRow::First;
        // The aggregate arguments as typed runs when every value is a plain number; the
        // value runs then hold only the keys.
        let typed = first
            && self
                .numeric
                .eval(program, &self.cells, page, &sources, &sel);
        // Keys that are plain columns are read from the cells as the groups are found; any
        // other key (or an untyped page) has its value runs.
        let slot_keys: Option<SmallVec<[usize; 4]>> = if typed {
            (0..keys.len())
                .map(|j| match program.nodes()[program.key(j)] {
                    Node::Slot(s) => Some(s),
                    _ => None,
                })
                .collect()
        } else {
            None
        };
        let mut runs: Vec<ValueRef<'_>> = Vec::new();
        if slot_keys.is_none() {
            runs = vec![ValueRef::Null; program.nodes().len() * n];
            if typed {
                program.eval_keys(&b, &sel, &mut runs);
            } else {
                program.eval(&b, &sel, &mut runs);
            }
        }
        let run = |node: usize| &runs[node * n..(node + 1) * n];
        let numeric = &self.numeric;
        // An argument's value for selected row `k`.
        let arg_value = |a: usize, k: usize| -> ValueRef<'_> {
            if typed {
                let (x, int) = numeric.run(a);
                if int[k] {
                    ValueRef::Integer(x[k] as i64)
                } else {
                    ValueRef::Real(x[k])
                }
            } else {
                run(a)[k]
            }
        };
        // Every selected row's group.
        let collations: SmallVec<[Collation; 8]> = keys.iter().map(|k| k.1).collect();
        let key_runs: SmallVec<[&[ValueRef<'_>]; 4]> = if slot_keys.is_some() {
            SmallVec::new()
        } else {
            (0..keys.len()).map(|j| run(program.key(j))).collect()
        };
        let groups = &mut self.group_of;
        let new_group = || aggregates.iter().map(AggState::new).collect();
        let found = PageRows {
            sel: &sel,
            rowids,
            collations: &collations,
            lowest_rowid_keys: first,
        };
        match &slot_keys {
            Some(slots) => {
                let slot_sources: SmallVec<[Source<'_>; 4]> =
                    slots.iter().map(|&s| sources[s]).collect();
                let packed =
                    |r: u32| packed_slots(&self.cells, page, &slot_sources, &collations, r);
                found.resolve(
                    table,
                    groups,
                    new_group,
                    |_, r| packed(r),
                    |_, r, j| b.slot(r, slots[j]),
                )
            }
            None => {
                let packed = |k: usize| {
                    packed_key(
                        key_runs
                            .iter()
                            .zip(&collations)
                            .map(|(run, &c)| (run[k], c)),
                    )
                };
                found.resolve(
                    table,
                    groups,
                    new_group,
                    |k, _| packed(k),
                    |k, _, j| key_runs[j][k],
                )
            }
        }
        let mut key: SmallVec<[ValueRef<'_>; 4]> = SmallVec::new();
        let groups = &*groups;
        let table = &mut table.groups;
        if first {
            // The aggregates one at a time over the page's rows, each shared state once.
            for (j, spec) in aggregates.iter().enumerate() {
                if program.shares(j) != j {
                    continue;
                }
                match (spec.func, program.arg(j)) {
                    (AggFunc::CountStar, _) if !spec.distinct && table.len() <= FEW_GROUPS => {
                        // Counted on the stack, then added to the groups' counts.
                        let mut counts = [0i64; FEW_GROUPS];
                        for &g in groups {
                            counts[g as usize] += 1;
                        }
                        for (group, n) in table.iter_mut().zip(counts) {
                            *count_of(group, j) += n;
                        }
                    }
                    (AggFunc::CountStar, _) if !spec.distinct => {
                        for &g in groups {
                            *count_of(&mut table[g as usize], j) += 1;
                        }
                    }
                    (AggFunc::Sum | AggFunc::Total | AggFunc::Avg, Some(a))
                        if !spec.distinct && table.len() <= FEW_GROUPS =>
                    {
                        let mut sums: SmallVec<[&mut SumState; FEW_GROUPS]> =
                            table.iter_mut().map(|g| sum_of(g, j)).collect();
                        let sums = sums.as_mut_slice();
                        if typed {
                            let (x, int) = numeric.run(a);
                            let pairs = groups.iter().zip(x);
                            match numeric.kind(a) {
                                RunKind::Integers => {
                                    for (&g, &x) in pairs {
                                        sums[g as usize].add_integer(x as i64);
                                    }
                                }
                                RunKind::Reals => {
                                    for (&g, &x) in pairs {
                                        sums[g as usize].add_real(x);
                                    }
                                }
                                RunKind::Mixed => {
                                    for ((&g, &x), &int) in pairs.zip(int) {
                                        sums[g as usize].update_number(x, int);
                                    }
                                }
                            }
                        } else {
                            for (&g, &v) in groups.iter().zip(run(a)) {
                                sums[g as usize].update(v);
                            }
                        }
                    }
                    (AggFunc::Sum | AggFunc::Total | AggFunc::Avg, Some(a))
                        if !spec.distinct && typed =>
                    {
                        // Many groups: each row's sum reached through its group, the
                        // argument's run read as the numbers it holds.
                        let (x, int) = numeric.run(a);
                        let pairs = groups.iter().zip(x);
                        match numeric.kind(a) {
                            RunKind::Integers => {
                                for (&g, &x) in pairs {
                                    sum_of(&mut table[g as usize], j).add_integer(x as i64);
                                }
                            }
                            RunKind::Reals => {
                                for (&g, &x) in pairs {
                                    sum_of(&mut table[g as usize], j).add_real(x);
                                }
                            }
                            RunKind::Mixed => {
                                for ((&g, &x), &int) in pairs.zip(int) {
                                    sum_of(&mut table[g as usize], j).update_number(x, int);
                                }
                            }
                        }
                    }
                    (_, arg) => {
                        for (k, (&g, &r)) in groups.iter().zip(&sel).enumerate() {
                            let v = arg.map_or(ValueRef::Null, |a| arg_value(a, k));
                            table[g as usize].states[j].update(spec, v, rowids[r as usize]);
                        }
                    }
                }
            }
        } else {
            // A min()/max() chooses the shown keys: row by row, as each row's update decides.
            for (k, (&g, &r)) in groups.iter().zip(&sel).enumerate() {
                let rowid = rowids[r as usize];
                let group = &mut table[g as usize];
                for (j, (spec, state)) in aggregates.iter().zip(&mut group.states).enumerate() {
                    if program.shares(j) == j {
                        let v = program.arg(j).map_or(ValueRef::Null, |a| arg_value(a, k));
                        state.update(spec, v, rowid);
                    }
                }
                key.clear();
                key.extend(key_runs.iter().map(|run| run[k]));
                key_row::after_update(self.key_row, group, &key, rowid);
            }
        }
        if key_row::shows_columns(aggregates) {
            // The bare columns of the rows that now show their groups.
            for (k, (&g, &r)) in groups.iter().zip(&sel).enumerate() {
                key_row::load_shown(&mut table[g as usize], rowids[r as usize], |j| {
                    let a = program.arg(j).expect("a bare column reads a value");
                    Ok(arg_value(a, k).to_owned())
                })?;
            }
        }
        Ok(())
    }
}

/// The count `count(*)` number `j` keeps in `group`.
#[inline(always)]
fn count_of(group: &mut Group, j: usize) -> &mut i64 {
    match &mut group.states[j] {
        AggState::Count(c) => c,
        _ => unreachable!("count(*) keeps a count"),
    }
}

/// The sum state `sum`, `total` or `avg` number `j` keeps in `group`.
#[inline(always)]
fn sum_of(group: &mut Group, j: usize) -> &mut SumState {
    match &mut group.states[j] {
        AggState::Sum(s) => s,
        _ => unreachable!("sums keep a sum state"),
    }
}

/// Where a batch reads each plan slot: a needed record column (`sources`: its index among the
/// needed columns and whether it has REAL affinity, with the column's DEFAULT when a record
/// ends before it), else the rowid.
fn batch_sources<'a>(
    plan: &'a QueryPlan,
    sources: &[Option<(usize, bool)>],
) -> SmallVec<[Source<'a>; 32]> {
    plan.columns
        .iter()
        .zip(sources)
        .map(|(c, s)| match (c, s) {
            (ColumnRead::Record { default, .. }, &Some((needed, real))) => Source::Record {
                needed,
                real,
                // Known: plans with an unknown DEFAULT are neither batched nor columnar.
                default: default.as_ref().map_or(ValueRef::Null, Value::as_ref),
            },
            _ => Source::Rowid,
        })
        .collect()
}

/// A decoded page's `cells` (values in `base`) as a batch of `width` slots read from
/// `sources` ([`batch_sources`]).
fn page_batch<'a, 'b>(
    cells: &'b CellBatch,
    base: &'a [u8],
    sources: &'b [Source<'a>],
    width: usize,
) -> Batch<'a, 'b> {
    Batch {
        rows: Rows::Cells {
            cells,
            base,
            sources,
        },
        width,
    }
}

/// The rows of a batch of `rows` rows that `filter` keeps (all of them without one).
fn selected(b: &Batch<'_, '_>, rows: usize, filter: Option<&batch::BatchFilter>) -> Selection {
    let mut sel: Selection = (0..rows as u32).collect();
    if let Some(f) = filter {
        f.retain(b, &mut sel);
    }
    sel
}

/// What [`accept`] did with a row that did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// It was filtered out, or kept in the rows or groups.
    Row,
    /// Its output columns failed; it was kept as a marked row ([`plan_marks`]).
    Marked,
}

/// Keeps the row whose values are `slots`, if it passes the filter: in the executor's rows or
/// its groups. `at` is the row's leaf page and rowid.
fn accept(
    plan: &QueryPlan,
    key_row: KeyRow,
    partial: &mut Partial,
    cutoff: Option<&OutRow>,
    at: (u32, i64),
    slots: &[ValueRef<'_>],
) -> Result<Kept, String> {
    let (page, rowid) = at;
    if let Some(f) = &plan.filter {
        if !holds(f, slots)? {
            return Ok(Kept::Row);
        }
    }
    let mut kept = Kept::Row;
    match (&plan.shape, partial) {
        (Shape::Rows { outputs }, Partial::Rows(rows)) => {
            if let Some(cutoff) = cutoff {
                if ranks_after(plan, slots, rowid, cutoff)?
                    && outputs.iter().all(|e| eval_ref(e, slots).is_ok())
                {
                    // Not among the range's best `k`. (A row whose output columns fail is
                    // kept as a marked row below: rows that rank before it may have come
                    // after it in the scan's order, which is not the order pages arrive in.)
                    return Ok(Kept::Row);
                }
            }
            let keys = plan
                .order_by
                .iter()
                .map(|k| eval(&k.expr, slots))
                .collect::<Result<Vec<_>, _>>()?;
            let values = match outputs.iter().map(|e| eval(e, slots)).collect() {
                Err(what) if plan_marks(plan) || sorts_with_limit(plan) => {
                    kept = Kept::Marked;
                    Err(RowFailure {
                        page,
                        rowid,
                        what,
                        in_output: true,
                        ahead: None,
                    })
                }
                values => Ok(values?),
            };
            rows.push(OutRow {
                keys,
                rowid,
                values,
            });
        }
        (Shape::Rows { outputs }, Partial::Sorted(buffer)) => {
            // Encoded straight into the buffer: no row is an allocation of its own.
            let keys = plan
                .order_by
                .iter()
                .map(|k| eval_ref(&k.expr, slots))
                .collect::<Result<SmallVec<[Operand<'_>; 4]>, _>>()?;
            let values = outputs
                .iter()
                .map(|e| eval_ref(e, slots))
                .collect::<Result<SmallVec<[Operand<'_>; 8]>, _>>()?;
            let keys: SmallVec<[ValueRef<'_>; 4]> = keys.iter().map(Operand::as_ref).collect();
            let values: SmallVec<[ValueRef<'_>; 8]> = values.iter().map(Operand::as_ref).collect();
            buffer.push(&plan.order_by, plan.backward, &keys, rowid, &values);
        }
        (
            Shape::Groups {
                keys, aggregates, ..
            },
            Partial::Groups(table),
        ) => {
            // Rows met in an index's order: the row's place in it stands for its rowid.
            let rowid = match &plan.arrival {
                Some(arrival) => arrival.place(rowid)?,
                None => rowid,
            };
            // Borrowed key values: an owned key is made only for a new group.
            let mut key_values: SmallVec<[Operand<'_>; 4]> = SmallVec::new();
            for (e, _) in keys {
                key_values.push(eval_ref(e, slots)?);
            }
            let refs: SmallVec<[ValueRef<'_>; 4]> =
                key_values.iter().map(Operand::as_ref).collect();
            let collations: SmallVec<[Collation; 8]> = keys.iter().map(|k| k.1).collect();
            let g =
                table.find_or_insert(&refs, &collations, rowid, key_row == KeyRow::First, || {
                    aggregates.iter().map(AggState::new).collect()
                });
            let group = &mut table.groups[g];
            for (spec, state) in aggregates.iter().zip(&mut group.states) {
                if let Some(c) = &spec.filter {
                    if !holds(c, slots)? {
                        continue;
                    }
                }
                if !spec.order_by.is_empty() {
                    // The ORDER BY terms first, then the arguments, as SQLite codes them.
                    let mut keys = SmallVec::new();
                    for k in &spec.order_by {
                        keys.push(eval_ref(&k.expr, slots)?.as_ref().to_owned());
                    }
                    let exprs: SmallVec<[&Expr; 2]> = spec.arg.iter().chain(&spec.second).collect();
                    let args = if matches!(spec.func, AggFunc::Json(_)) {
                        with_json_arguments(exprs.iter().copied(), slots, |args| {
                            args.iter().map(|a| (a.value.to_owned(), a.json)).collect()
                        })?
                    } else {
                        let mut args = SmallVec::new();
                        for e in exprs {
                            args.push((eval_ref(e, slots)?.as_ref().to_owned(), false));
                        }
                        args
                    };
                    state.push_ordered(OrderedRow { keys, rowid, args });
                    continue;
                }
                match &spec.arg {
                    None => state.update(spec, ValueRef::Null, rowid),
                    Some(a) if matches!(spec.func, AggFunc::Json(_)) => {
                        let args = std::iter::once(a).chain(&spec.second);
                        with_json_arguments(args, slots, |args| {
                            state.update_json(spec, args, rowid)
                        })??;
                    }
                    Some(a) => {
                        let v = eval_ref(a, slots)?;
                        state.update(spec, v.as_ref(), rowid);
                    }
                }
            }
            // With a min()/max() deciding the shown keys, they are chosen after the update;
            // the bare columns come from the row that shows them.
            key_row::after_update(key_row, group, &refs, rowid);
            key_row::load_shown(group, rowid, |j| {
                let arg = aggregates[j]
                    .arg
                    .as_ref()
                    .expect("a bare column reads a value");
                Ok(eval_ref(arg, slots)?.as_ref().to_owned())
            })?;
        }
        _ => unreachable!("the partial matches the plan's shape"),
    }
    Ok(kept)
}
