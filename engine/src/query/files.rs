//! A query over one table held by several files ([`run_query_files`]): the plan made against
//! one file's schema is bound to each file's own ([`bind_to_file`]: columns matched by name,
//! a column the file lacks read as NULL, a column whose affinity differs refused), each file
//! is planned and read by the executor it is dealt to ([`crate::run_files`]), and the
//! partials are merged in the files' listed order, each file's rows in rowid order, as the
//! ranges of one file are.
//!
//! Layering: above the kernel, the merge and the coordinator, beside [`super::run`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use partitioner::create_table::{CreateTable, Generated};
use partitioner::TablePlan;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use async_channel::{Receiver, Sender};

use crate::coordinator::{run_files, FileScans, RangeOrder};
use crate::datatype3::Affinity;
use crate::error::Error;
use crate::report::RunReport;
use crate::settings::{ExecutorSpec, ScanSettings};
use crate::spec::restrict;
use crate::value::Value;

use super::dates;
use super::distinct_count::DistinctCount;
use super::error::QueryError;
use super::eval::holds;
use super::fold::{fold_plan, reads_slots};
use super::ir::{ColumnRead, Expr, QueryPlan, Shape};
use super::kernel::QueryKernel;
use super::marks::sorts_with_limit;
use super::merge::{merge_files, MergeError, Partial};
use super::row_stream::{Renderer, RowStream, StreamMsg, CHANNEL_CHUNKS};
use super::run::test_constant_terms;
use super::sink::FileSinkFactory;
use super::sort::SortSpace;

/// What to do with a listed file that has no such table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingTable {
    /// Fail, naming the file.
    #[default]
    Fail,
    /// Skip it (counted in the report's [`crate::FilesReport::skipped`]).
    Skip,
}

/// The result of a query over several files.
#[derive(Debug)]
pub struct FilesOutput {
    /// The output column names.
    pub names: Vec<String>,
    /// The result rows.
    pub rows: Vec<Vec<Value>>,
    /// A grouped query's groups: how many, their tables' memory, what spilled (`None` for
    /// other queries).
    pub groups: Option<super::group_spill::GroupStats>,
    /// The scan's report, with [`RunReport::files`].
    pub report: RunReport,
}

/// Runs `query`, planned against `base` (a plan of the table in one of the files, whose
/// schema the query was resolved with), over the table in every file of `paths`, in that
/// order, with one executor per entry of `executors`. See the module docs.
pub fn run_query_files(
    paths: Vec<PathBuf>,
    base: &TablePlan,
    query: QueryPlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    missing: MissingTable,
) -> Result<FilesOutput, QueryError> {
    // `count(DISTINCT x)` without GROUP BY: scanned as `GROUP BY x`, in bounded memory.
    let counting = DistinctCount::of(&query);
    let query = counting.as_ref().map_or(query, DistinctCount::inner);
    let scanned = scan_query_files(paths, base, query, settings, executors, missing)?;
    let ScannedFiles {
        query,
        paths,
        partials,
        files,
        units,
        executor_of,
        report,
    } = scanned;
    let merged = match &counting {
        Some(c) => c.merge(partials, executors.len()),
        None => merge_files(&query, partials, Some(&files), executors.len()),
    }
    .map_err(|e| match e {
        MergeError::Eval(e) => QueryError::Eval(e),
        MergeError::Spill(e) => QueryError::Spill(e),
        MergeError::Row { range, failure } => {
            let unit = units[range];
            let cpu = executors[executor_of[unit]].cpu;
            QueryError::Scan(failure.into_error(cpu, &paths[files[range]]))
        }
    })?;
    Ok(FilesOutput {
        names: query.names.clone(),
        rows: merged.rows,
        groups: merged.groups,
        report,
    })
}

/// A collected query's scan of several files, before the merge.
pub(super) struct ScannedFiles {
    /// The plan, its constant terms tested.
    pub query: Arc<QueryPlan>,
    /// The files, in the listed order.
    pub paths: Arc<Vec<PathBuf>>,
    /// The partials of the units that were read, in file order.
    pub partials: Vec<Partial>,
    /// Each partial's file (an index into `paths`).
    pub files: Vec<usize>,
    /// Each partial's unit.
    pub units: Vec<usize>,
    /// Each unit's executor.
    pub executor_of: Vec<usize>,
    /// The scan's report.
    pub report: RunReport,
}

/// [`run_query_files`]'s scan: the partials, not merged (the statement's time is left set
/// for the merge).
pub(super) fn scan_query_files(
    paths: Vec<PathBuf>,
    base: &TablePlan,
    query: QueryPlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    missing: MissingTable,
) -> Result<ScannedFiles, QueryError> {
    let mut query = query;
    let now = dates::statement_time();
    test_constant_terms(&mut query, now)?;
    let order = if sorts_with_limit(&query) {
        RangeOrder::Key
    } else {
        RangeOrder::File
    };
    let query = Arc::new(query);
    let paths = Arc::new(paths);
    let scans = Arc::new(
        QueryFiles::new(base, missing, Arc::clone(&query), now, None)
            .sorting_in(SortSpace::for_query(settings, executors.len())),
    );
    let scan = run_files(
        Arc::clone(&paths),
        base,
        settings,
        executors,
        order,
        scans,
        || ((), usize::MAX),
    )?;
    dates::set_statement_time(now);
    let (units, partials) = in_file_order(scan.partials, &scan.file_of, &paths)?;
    let files: Vec<usize> = units.iter().map(|&u| scan.file_of[u]).collect();
    Ok(ScannedFiles {
        query,
        paths,
        partials,
        files,
        units,
        executor_of: scan.executor_of,
        report: scan.report,
    })
}

/// The units' partials that were read, with their units' indices, each file's rowid tags
/// shifted above the previous file's, so that every tie the merge decides by rowid (a
/// group's first row, min() and max() ties, DISTINCT's first value) is decided by file, then
/// rowid: the order of the files' union. The units of one file (a split file's shares) share
/// one shift.
fn in_file_order(
    partials: Vec<Option<Partial>>,
    file_of: &[usize],
    paths: &[PathBuf],
) -> Result<(Vec<usize>, Vec<Partial>), QueryError> {
    let mut units = Vec::with_capacity(partials.len());
    let mut read = Vec::with_capacity(partials.len());
    for (u, p) in partials.into_iter().enumerate() {
        if let Some(p) = p {
            units.push(u);
            read.push(p);
        }
    }
    let mut next: Option<i128> = None;
    let mut at = 0;
    while at < read.len() {
        let file = file_of[units[at]];
        let end = at
            + units[at..]
                .iter()
                .take_while(|&&u| file_of[u] == file)
                .count();
        let span = read[at..end]
            .iter()
            .filter_map(Partial::rowid_span)
            .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)));
        if let Some((lo, hi)) = span {
            let by = next.map_or(0, |n| n - i128::from(lo));
            let top = i128::from(hi) + by;
            let Some(by) = i64::try_from(by)
                .ok()
                .filter(|_| top <= i128::from(i64::MAX))
            else {
                return Err(QueryError::Scan(Error::Plan(partitioner::Error::Invalid {
                    path: paths[file].clone(),
                    what: "the files' rowids span more than 64 bits together: their rows \
                           cannot be ordered file by file"
                        .into(),
                })));
            };
            read[at..end].iter_mut().for_each(|p| p.shift_rowids(by));
            next = Some(top + 1);
        }
        at = end;
    }
    Ok((units, read))
}

/// The query's side of a scan of several files ([`FileScans`]): each file opened through
/// [`Binding`], each unit's kernel collecting its partial, or streaming its rows through a
/// channel of its own ([`UnitStreams`]).
pub(crate) struct QueryFiles {
    binding: Binding,
    query: Arc<QueryPlan>,
    now: i64,
    streams: Option<UnitStreams>,
    partitions: Option<ExecutorStreams>,
    abandoned: Option<Arc<AtomicBool>>,
    /// A full sort's budget, shared by every unit's kernel.
    sort: SortSpace,
}

/// The channels of a partitioned scan of several files ([`crate::scan_files_partitions_into`]):
/// one per executor, carrying its units' rows (or its sink's batches) in order, ended by the
/// executor once its last unit is done.
pub(crate) struct ExecutorStreams {
    /// Each executor's sender.
    senders: Mutex<Vec<Option<Sender<StreamMsg>>>>,
    /// Makes each unit's sink, by its executor's index and its file's path.
    sinks: Option<Arc<FileSinkFactory>>,
    /// The files, in order (for the sinks).
    paths: Arc<Vec<PathBuf>>,
    stop: Arc<AtomicBool>,
}

impl ExecutorStreams {
    /// Streams through `senders`, one per executor, each unit's rows into a sink `sinks`
    /// makes when given.
    pub(crate) fn new(
        senders: Vec<Sender<StreamMsg>>,
        sinks: Option<Arc<FileSinkFactory>>,
        paths: Arc<Vec<PathBuf>>,
    ) -> Self {
        ExecutorStreams {
            senders: Mutex::new(senders.into_iter().map(Some).collect()),
            sinks,
            paths,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    fn sender(&self, executor: usize) -> Option<Sender<StreamMsg>> {
        self.senders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(executor)?
            .clone()
    }
}

/// The channels of a streamed query over several files: one per unit, drained in order.
pub(crate) struct UnitStreams {
    /// Each unit's sender, until its kernel takes it.
    senders: Mutex<Vec<Option<Sender<StreamMsg>>>>,
    /// The receivers, until the consumer takes them.
    receivers: Mutex<Vec<Receiver<StreamMsg>>>,
    /// Set once the answer is complete (or its reader gone).
    pub stop: Arc<AtomicBool>,
    /// Each executor's wait for room in its channels.
    pub waited: Vec<Arc<AtomicU64>>,
    /// How the executors render rows.
    render: Option<Renderer>,
    /// Chunks each unit's channel holds.
    capacity: usize,
    /// How far ahead of the unit being drained a unit may start (a segmented scan's).
    window: Option<Window>,
}

/// How far the units being read may run ahead of the one the consumer drains: a unit starts
/// only when it is fewer than `units` after it. A segmented scan's channels each hold about a
/// unit's output, so without it an executor faster than the consumer would fill channel
/// after channel; with it, memory is bounded by `units` channels.
#[derive(Debug)]
struct Window {
    units: usize,
    /// The unit being drained.
    at: Mutex<usize>,
    moved: std::sync::Condvar,
}

impl UnitStreams {
    /// Streams for `executors` executors, rendering rows with `render`.
    pub(super) fn new(executors: usize, render: Option<Renderer>) -> Self {
        UnitStreams {
            senders: Mutex::new(Vec::new()),
            receivers: Mutex::new(Vec::new()),
            stop: Arc::new(AtomicBool::new(false)),
            waited: (0..executors).map(|_| Arc::default()).collect(),
            render,
            capacity: CHANNEL_CHUNKS,
            window: None,
        }
    }

    /// These streams with a unit started only when it is fewer than `units` after the one
    /// being drained ([`UnitStreams::draining`]).
    pub(super) fn with_window(mut self, units: usize) -> Self {
        self.window = Some(Window {
            units: units.max(1),
            at: Mutex::new(0),
            moved: std::sync::Condvar::new(),
        });
        self
    }

    /// The consumer drains unit `unit` now (or, once [`UnitStreams::stop`] is set, no more).
    pub(super) fn draining(&self, unit: usize) {
        if let Some(w) = &self.window {
            *w.at.lock().unwrap_or_else(|e| e.into_inner()) = unit;
            w.moved.notify_all();
        }
    }

    /// Waits until unit `unit` may start (see [`Window`]), the scan is stopped or
    /// `abandoned()` holds.
    fn wait_for_turn(&self, unit: usize, abandoned: impl Fn() -> bool) {
        let Some(w) = &self.window else { return };
        let mut at = w.at.lock().unwrap_or_else(|e| e.into_inner());
        while unit >= at.saturating_add(w.units)
            && !self.stop.load(Ordering::Relaxed)
            && !abandoned()
        {
            // Timed: a stop comes with a notification, but a missed one costs only this.
            at = w
                .moved
                .wait_timeout(at, std::time::Duration::from_millis(20))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// These streams with `chunks` chunks per unit's channel.
    pub(super) fn with_capacity(mut self, chunks: usize) -> Self {
        self.capacity = chunks.max(1);
        self
    }

    /// The units' receivers, in order (once, after the layout).
    pub(super) fn take_receivers(&self) -> Vec<Receiver<StreamMsg>> {
        std::mem::take(&mut *self.receivers.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn sender(&self, unit: usize) -> Option<Sender<StreamMsg>> {
        self.senders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(unit)?
            .take()
    }
}

impl QueryFiles {
    /// The scans of `query` (planned against `base`) over files holding its table.
    pub(crate) fn new(
        base: &TablePlan,
        missing: MissingTable,
        query: Arc<QueryPlan>,
        now: i64,
        streams: Option<UnitStreams>,
    ) -> Self {
        QueryFiles {
            binding: Binding::new(base, missing),
            query,
            now,
            streams,
            partitions: None,
            abandoned: None,
            sort: SortSpace::unbounded(),
        }
    }

    /// The scans, a full sort's rows held within `space` (see [`super::sort`]).
    pub(crate) fn sorting_in(mut self, space: SortSpace) -> Self {
        self.sort = space;
        self
    }

    /// The scans streaming through one channel per executor (see [`ExecutorStreams`]),
    /// stopping once `abandoned` is set.
    pub(crate) fn partitioned(
        mut self,
        partitions: ExecutorStreams,
        abandoned: Arc<AtomicBool>,
    ) -> Self {
        self.partitions = Some(partitions);
        self.abandoned = Some(abandoned);
        self
    }

    /// The scans stopping once `abandoned` is set (`None`: never): kernels stop at their next
    /// read and the units not yet started are skipped.
    pub(super) fn abandoned_when(mut self, abandoned: Option<Arc<AtomicBool>>) -> Self {
        self.abandoned = abandoned;
        self
    }

    fn is_abandoned(&self) -> bool {
        self.abandoned
            .as_ref()
            .is_some_and(|a| a.load(Ordering::Relaxed))
    }

    /// The streams, for a streamed query.
    pub(super) fn streams(&self) -> Option<&UnitStreams> {
        self.streams.as_ref()
    }
}

impl FileScans<QueryKernel> for QueryFiles {
    type Bound = Arc<QueryPlan>;

    fn plan(
        &self,
        _file: usize,
        path: &Path,
    ) -> crate::Result<Option<(TablePlan, Arc<QueryPlan>)>> {
        if self
            .streams
            .as_ref()
            .is_some_and(|s| s.stop.load(Ordering::Relaxed))
        {
            // The answer is complete: no later file is opened.
            return Ok(None);
        }
        Ok(self
            .binding
            .open(path, &self.query)?
            .map(|(plan, bound)| (plan, Arc::new(bound))))
    }

    fn kernel(
        &self,
        executor: usize,
        unit: usize,
        file: usize,
        bound: &Arc<QueryPlan>,
        usable: u32,
    ) -> crate::Result<QueryKernel> {
        if let Some(p) = &self.partitions {
            let tx = p
                .sender(executor)
                .ok_or_else(|| Error::Config(format!("executor {executor} has no channel")))?;
            let mut stream = RowStream::new(
                tx,
                Arc::clone(&p.stop),
                self.query.keep(),
                Arc::new(AtomicU64::new(0)),
            )
            .without_end();
            if let Some(make) = &p.sinks {
                stream.set_sink(make(executor, &p.paths[file]));
            }
            return Ok(
                QueryKernel::streaming(Arc::clone(bound), usable, stream, self.now)
                    .abandoned_when(self.abandoned.clone()),
            );
        }
        let Some(streams) = &self.streams else {
            return Ok(QueryKernel::new(Arc::clone(bound), usable)
                .at_time(self.now)
                .sorting_in(&self.sort));
        };
        streams.wait_for_turn(unit, || self.is_abandoned());
        let tx = streams
            .sender(unit)
            .ok_or_else(|| Error::Config(format!("unit {unit} has no channel")))?;
        let mut stream = RowStream::new(
            tx,
            Arc::clone(&streams.stop),
            self.query.keep(),
            Arc::clone(&streams.waited[executor]),
        );
        stream.set_render(streams.render.clone());
        Ok(
            QueryKernel::streaming(Arc::clone(bound), usable, stream, self.now)
                .abandoned_when(self.abandoned.clone()),
        )
    }

    fn skipped(&self, unit: usize) {
        if let Some(tx) = self.streams.as_ref().and_then(|s| s.sender(unit)) {
            // An empty stream (its channel is empty: this does not wait).
            let _ = tx.send_blocking(StreamMsg::End);
        }
    }

    fn complete(&self) -> bool {
        self.is_abandoned()
            || self
                .streams
                .as_ref()
                .is_some_and(|s| s.stop.load(Ordering::Relaxed))
    }

    fn failed(&self, unit: usize) {
        // Its channel closes without the end once its kernel (if any) is gone.
        drop(self.streams.as_ref().and_then(|s| s.sender(unit)));
    }

    fn executor_done(&self, executor: usize, ok: bool) {
        let Some(p) = &self.partitions else { return };
        let tx = p
            .senders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(executor)
            .and_then(Option::take);
        // A failed executor's channel closes without the end: its stream ends with the error.
        if let (Some(tx), true) = (tx, ok) {
            let _ = tx.send_blocking(StreamMsg::End);
        }
    }

    fn layout(&self, file_of_unit: &[usize]) {
        let Some(s) = &self.streams else { return };
        let (mut senders, mut receivers) = (Vec::new(), Vec::new());
        for _ in file_of_unit {
            let (tx, rx) = async_channel::bounded(s.capacity);
            senders.push(Some(tx));
            receivers.push(rx);
        }
        *s.senders.lock().unwrap_or_else(|e| e.into_inner()) = senders;
        *s.receivers.lock().unwrap_or_else(|e| e.into_inner()) = receivers;
    }
}

/// How each file of a query over several files is opened: the table by name, the plan bound
/// to the file's own columns ([`bind_to_file`]), narrowed to the rowids the query admits.
#[derive(Debug, Clone)]
pub(super) struct Binding {
    table: String,
    base: Arc<CreateTable>,
    missing: MissingTable,
}

impl Binding {
    /// For files whose table is `base`'s (by name), bound to `base`'s columns.
    pub(super) fn new(base: &TablePlan, missing: MissingTable) -> Self {
        Binding {
            table: base.table.name.clone(),
            base: Arc::new(base.definition.clone()),
            missing,
        }
    }

    /// The file's plan (its snapshot held) and `query` bound to it; `None` when the file
    /// has no such table and such files are skipped, or when the query's `WHERE` excludes
    /// the file by its path (`_file`), which is then never opened.
    pub(super) fn open(
        &self,
        path: &Path,
        query: &QueryPlan,
    ) -> crate::Result<Option<(TablePlan, QueryPlan)>> {
        let mut query = query.clone();
        if bind_file_column(&mut query, path) {
            return Ok(None);
        }
        let query = &query;
        let plan = match TablePlan::open_for_scan(path, &self.table) {
            Ok(plan) => plan,
            Err(partitioner::Error::NoSuchTable { .. }) if self.missing == MissingTable::Skip => {
                return Ok(None)
            }
            Err(e) => return Err(Error::Plan(e)),
        };
        let bound = bind_to_file(&self.base, query, &plan).map_err(|what| {
            Error::Plan(partitioner::Error::Invalid {
                path: path.to_path_buf(),
                what,
            })
        })?;
        let plan = restrict(plan, &bound)?;
        Ok(Some((plan, bound)))
    }
}

/// Replaces the hidden `_file` column ([`ColumnRead::File`]) of `plan`'s row stage by the
/// text of `path` and folds what became constant; returns whether the `WHERE` clause now
/// excludes every row (a top-level `AND` term that is constant and not true), so that the
/// file need not be opened. The slot itself then reads the rowid, which nothing uses.
pub fn bind_file_column(plan: &mut QueryPlan, path: &Path) -> bool {
    let slots: Vec<usize> = (0..plan.columns.len())
        .filter(|&i| matches!(plan.columns[i], ColumnRead::File))
        .collect();
    if slots.is_empty() {
        return false;
    }
    let text = Value::text(path.to_string_lossy().into_owned());
    let mut with = |i: usize| slots.contains(&i).then(|| Expr::Literal(text.clone()));
    for c in &mut plan.columns {
        if let ColumnRead::Virtual { expr, .. } = c {
            expr.replace_slots(&mut with);
        }
    }
    if let Some(f) = &mut plan.filter {
        f.replace_slots(&mut with);
    }
    match &mut plan.shape {
        Shape::Rows { outputs } => {
            outputs.iter_mut().for_each(|e| e.replace_slots(&mut with));
            // A plain query's ORDER BY is of the row stage (a grouped one's, of the groups').
            for k in &mut plan.order_by {
                k.expr.replace_slots(&mut with);
            }
        }
        Shape::Groups {
            keys, aggregates, ..
        } => {
            keys.iter_mut()
                .for_each(|(e, _)| e.replace_slots(&mut with));
            for a in aggregates {
                a.exprs_mut().for_each(|x| x.replace_slots(&mut with));
            }
        }
    }
    for &i in &slots {
        plan.columns[i] = ColumnRead::Rowid;
    }
    fold_plan(plan);
    let mut terms = Vec::new();
    if let Some(f) = &plan.filter {
        conjuncts(f, &mut terms);
    }
    terms
        .iter()
        .any(|t| !reads_slots(t) && matches!(holds(t, &[]), Ok(false)))
}

/// The top-level `AND` terms of `e`.
fn conjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::And(a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        other => out.push(other),
    }
}

/// `plan`, resolved against `base`'s columns, bound to the same table in another file
/// (`file`): each column the plan reads is found by name; one the file lacks reads as NULL
/// (as a column added by `ALTER TABLE ... ADD COLUMN` without a default does); one whose
/// affinity, rowid aliasing or generation differs is refused, as why.
pub fn bind_to_file(
    base: &CreateTable,
    plan: &QueryPlan,
    file: &TablePlan,
) -> Result<QueryPlan, String> {
    let def = &file.definition;
    let table = &file.table.name;
    // The record position of every stored column of the base schema.
    let by_position = |position: usize| {
        (0..base.columns.len()).find(|&i| base.record_position(i) == Some(position))
    };
    let mut bound = plan.clone();
    for read in &mut bound.columns {
        let ColumnRead::Record { position, .. } = read else {
            continue;
        };
        let Some(b) = by_position(*position) else {
            return Err(format!(
                "record position {position} is no column of the first file's table {table:?}"
            ));
        };
        let column = &base.columns[b];
        let affinity = Affinity::of_column(column, base.strict);
        let Some(j) = def
            .columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(&column.name))
        else {
            *read = ColumnRead::Record {
                position: def.columns.len(),
                default: Ok(Value::Null),
                real_affinity: affinity == Affinity::Real,
            };
            continue;
        };
        let theirs = &def.columns[j];
        let their_affinity = Affinity::of_column(theirs, def.strict);
        if their_affinity != affinity {
            return Err(format!(
                "column {:?} of table {table:?} is declared {:?} ({their_affinity:?} affinity) \
                 here but {:?} ({affinity:?} affinity) in the first file",
                theirs.name, theirs.declared_type, column.declared_type
            ));
        }
        if theirs.rowid_alias {
            *read = ColumnRead::Rowid;
            continue;
        }
        if theirs.generated == Some(Generated::Virtual) {
            return Err(format!(
                "column {:?} of table {table:?} is a VIRTUAL generated column here but stored \
                 in the first file",
                theirs.name
            ));
        }
        let position = def
            .record_position(j)
            .ok_or_else(|| format!("column {:?} is not stored in the record", theirs.name))?;
        *read = ColumnRead::Record {
            position,
            default: file
                .column_default(&theirs.name)
                .map(Value::from)
                .map_err(|e| e.to_string()),
            real_affinity: affinity == Affinity::Real,
        };
    }
    // A rowid alias or generated column of the first file must be one here too (the plan
    // reads it as the rowid, or computes it from the other columns).
    for column in &base.columns {
        let theirs = def
            .columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(&column.name));
        let Some(theirs) = theirs else { continue };
        if column.rowid_alias != theirs.rowid_alias {
            return Err(format!(
                "column {:?} of table {table:?} is {} here but {} in the first file",
                theirs.name,
                if theirs.rowid_alias {
                    "the INTEGER PRIMARY KEY (the rowid)"
                } else {
                    "not the rowid"
                },
                if column.rowid_alias {
                    "the rowid"
                } else {
                    "not"
                },
            ));
        }
        if column.generated != theirs.generated
            && (column.generated == Some(Generated::Virtual)
                || theirs.generated == Some(Generated::Virtual))
        {
            return Err(format!(
                "column {:?} of table {table:?} is generated differently here than in the \
                 first file",
                theirs.name
            ));
        }
    }
    Ok(bound)
}
