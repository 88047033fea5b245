//! [`CorescanExec`]: a DataFusion `ExecutionPlan` whose partitions are the executors of one
//! corescan scan.
//!
//! Planning reads nothing. The first [`ExecutionPlan::execute`] of a plan starts the scan
//! ([`engine::scan_partitions`]: one pinned executor per partition, each reading its range of
//! the table's leaves in rowid order and sending rows through its own bounded channel) and
//! keeps the other partitions' streams in a slot the plan shares; each later `execute` takes its
//! own. A partition executed a second time (a plan run again) starts a fresh scan and keeps only
//! that partition's stream of it. Dropping a partition's stream stops its executor; dropping the
//! plan drops the streams nobody took.
//!
//! Each executor builds its partition's record batches of the session's batch size as it scans
//! ([`engine::scan_partitions_into`] with an [`crate::convert::ArrowSink`] each): a page's
//! selected rows go from the decoded cells into Arrow builders, column by column, in the
//! executor's thread, so the tokio side only receives batches. (A database read without
//! SQLite's locks hands over checked rows instead, which the [`Converter`] turns into batches
//! here.) The first value that does not fit its column's type ends the partition with
//! [`crate::Error::Conversion`], and a scan failure with the engine's error, both as
//! `DataFusionError::External`. With a `limit`, each partition stops after that many rows
//! (DataFusion's own limit above the scan still cuts the total).
//!
//! Layering: above [`crate::convert`]; used by [`crate::table`].

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::Statistics;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet, RecordOutput,
};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning,
    PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream,
};
use engine::{Part, PartitionStream, PartitionedEnd, Placement, ScanEnd, ScanOptions, ScanSpec};
use partitioner::{PageFile, TablePlan};

use crate::convert::{Converter, SinkBatch};
use crate::error::Error;
use crate::pushdown::{quoted, PushColumn};
use crate::types::ColumnType;

/// Where and how a table is scanned: the file, the table, the placement and settings, and what
/// they resolved to when the table was opened (shown in plans).
#[derive(Debug, Clone)]
pub struct ScanTarget {
    /// The database file.
    pub path: PathBuf,
    /// The table as the schema spells it.
    pub table: String,
    /// Where the executors run.
    pub placement: Placement,
    /// The settings given.
    pub options: ScanOptions,
    /// The CPUs of the executors, as placed when the table was opened: one partition each.
    pub cpus: Vec<usize>,
    /// The I/O backend chosen (`auto` decides per scan from the page cache).
    pub backend: String,
    /// The file open in the snapshot every scan of the table reads, when the table was opened
    /// in one held for several tables ([`crate::SqliteSchema`]); `None`: each scan takes its
    /// own.
    pub file: Option<Arc<PageFile>>,
    /// For a table spread over several files: the files holding it, in order (`path` is the
    /// first), and its columns over all of them (the first file's, then those only later
    /// files have); each scan reads every file in its own snapshot.
    pub files: Option<FilesTarget>,
    /// The files lie on other machines (paths relative to their workers' data directories:
    /// the distributed engine ships the scan there); this process never reads them, and
    /// executing the plan here is an error.
    pub remote: bool,
}

/// The files of a table spread over several of them (see [`ScanTarget::files`]).
#[derive(Debug, Clone)]
pub struct FilesTarget {
    /// The files, in order.
    pub paths: Arc<Vec<PathBuf>>,
    /// The table's columns over all the files.
    pub definition: Arc<partitioner::create_table::CreateTable>,
}

impl ScanTarget {
    /// The table's plan for a scan: in the held snapshot, or in a new one.
    pub fn table_plan(&self, name: &str) -> partitioner::Result<TablePlan> {
        match &self.file {
            Some(file) => TablePlan::open_for_scan_from(file, name),
            None => TablePlan::open_for_scan(&self.path, name),
        }
    }
}

/// DataFusion's guess of what a scan yields (`Inexact` statistics, for the join order): rows,
/// and Arrow bytes per row of the projected columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// Rows.
    pub rows: usize,
    /// Arrow bytes per row.
    pub row_bytes: usize,
}

impl Estimate {
    /// The whole table's rows: the count `ANALYZE` wrote to `sqlite_stat1` (`stat1_rows`)
    /// when there is one, else guessed from its leaf pages (counted, or from the leaf-parent
    /// level's pages at a typical fan-out) and a typical record size of `columns`' types.
    pub fn of(plan: &TablePlan, columns: &[PushColumn], stat1_rows: Option<u64>) -> Estimate {
        if let Some(rows) = stat1_rows {
            return Estimate {
                rows: usize::try_from(rows).unwrap_or(usize::MAX),
                row_bytes: 0,
            };
        }
        let usable = plan.header.usable_size() as usize;
        let leaves = match &plan.leaf_parents {
            Some(parents) => parents.pages().len() * (usable / 10).max(1),
            None => plan.leaves.len(),
        };
        // A record: a header byte and a typical body per column, then the cell's own
        // header (payload size and rowid varints, a cell pointer).
        let record: usize = columns
            .iter()
            .filter(|c| !c.computed)
            .map(|c| 1 + stored_width(c.ty))
            .sum::<usize>()
            + 8;
        // Leaves are about three quarters full after inserts in key order split them.
        let rows = (leaves * usable * 3 / 4) / record.max(1);
        Estimate { rows, row_bytes: 0 }
    }

    /// Rows a scan yields: all, a fifth with a pushed filter (DataFusion's default selectivity),
    /// at most `limit`.
    pub fn rows(&self, filtered: bool, limit: Option<usize>) -> usize {
        let rows = if filtered { self.rows / 5 } else { self.rows };
        limit.map_or(rows, |l| rows.min(l))
    }
}

/// A typical stored size of a value of `ty`, in bytes.
fn stored_width(ty: ColumnType) -> usize {
    match ty {
        ColumnType::Boolean => 1,
        ColumnType::Int64 => 4,
        ColumnType::Float64 | ColumnType::Numeric | ColumnType::Decimal { .. } => 8,
        ColumnType::Date32 => 10,
        ColumnType::Timestamp => 19,
        ColumnType::Utf8 | ColumnType::AnyText | ColumnType::Binary => 24,
    }
}

/// The streams of the scan a plan started, by partition; `None` once taken.
#[derive(Debug, Default)]
struct Slot {
    started: bool,
    streams: Vec<Option<PartitionStream>>,
    /// The outcome of every scan this plan started, in the order they started.
    ends: Vec<PartitionedEnd>,
}

/// One corescan scan as a DataFusion leaf (see the module docs).
#[derive(Debug)]
pub struct CorescanExec {
    target: Arc<ScanTarget>,
    /// The columns the scan reads, as the schema spells them: the rowid's name first (when the
    /// table has one free), then the projected columns.
    scan_columns: Vec<String>,
    converter: Arc<Converter>,
    /// The pushed `WHERE` terms as SQLite SQL ([`crate::pushdown`]), if any.
    filter: Option<String>,
    limit: Option<usize>,
    estimate: Estimate,
    properties: Arc<PlanProperties>,
    slot: Arc<Mutex<Slot>>,
    /// Each partition's output rows and end time (`EXPLAIN ANALYZE`).
    metrics: ExecutionPlanMetricsSet,
}

impl CorescanExec {
    /// A plan scanning `scan_columns` of `target`'s table, keeping the rows `filter` (SQLite
    /// SQL over the table's columns) admits, converted by `converter` (whose schema is the
    /// plan's), each partition stopping after `limit` rows; `estimate` is its statistics.
    pub fn new(
        target: Arc<ScanTarget>,
        scan_columns: Vec<String>,
        converter: Arc<Converter>,
        filter: Option<String>,
        limit: Option<usize>,
        estimate: Estimate,
    ) -> Self {
        let schema = Arc::clone(&converter.schema);
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(target.cpus.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        CorescanExec {
            target,
            scan_columns,
            converter,
            filter,
            limit,
            estimate,
            properties: Arc::new(properties),
            slot: Arc::new(Mutex::new(Slot::default())),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The table scanned.
    pub fn target(&self) -> &ScanTarget {
        &self.target
    }

    /// The projected columns' names, as the schema spells them.
    pub fn columns(&self) -> Vec<&str> {
        self.converter
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .collect()
    }

    /// The rows each partition stops after, if any.
    pub fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// The pushed filter, as SQLite SQL, if any.
    pub fn filter(&self) -> Option<&str> {
        self.filter.as_deref()
    }

    /// The columns the scan reads, as the schema spells them (the rowid's name first when the
    /// table has one free).
    pub fn scan_columns(&self) -> &[String] {
        &self.scan_columns
    }

    /// How the rows become record batches (the plan's schema and the columns' Arrow types).
    pub fn converter(&self) -> &Arc<Converter> {
        &self.converter
    }

    /// The statistics' guess.
    pub fn estimate(&self) -> Estimate {
        self.estimate
    }

    /// The same scan of another target (the same table elsewhere, or another share of its
    /// files), with as many partitions as `target` has executors.
    pub fn with_target(&self, target: Arc<ScanTarget>) -> CorescanExec {
        CorescanExec::new(
            target,
            self.scan_columns.clone(),
            Arc::clone(&self.converter),
            self.filter.clone(),
            self.limit,
            self.estimate,
        )
    }

    /// Waits for every scan this plan started to end and returns their outcomes, in the order
    /// they started (each taken once: a second call gives only scans started since). For a
    /// report after the query: call it once the query's streams have ended or been dropped.
    pub fn scan_ends(&self) -> Vec<Result<ScanEnd, engine::QueryError>> {
        let ends = std::mem::take(&mut self.slot.lock().unwrap_or_else(|e| e.into_inner()).ends);
        ends.into_iter().map(PartitionedEnd::wait).collect()
    }

    /// Starts the scan: one stream per executor (each executor building record batches of
    /// `batch_rows` rows), and the scan's outcome.
    fn start(&self, batch_rows: usize) -> Result<(Vec<PartitionStream>, PartitionedEnd), Error> {
        let t = &self.target;
        if let Some(files) = &t.files {
            return self.start_files(files, batch_rows);
        }
        let spec = match &self.filter {
            None => ScanSpec::columns(&t.path, &t.table, &self.scan_columns)
                .with_table_plan(t.table_plan(&t.table)?),
            Some(filter) => {
                let sql = format!(
                    "SELECT {} FROM {} WHERE {filter}",
                    self.scan_columns
                        .iter()
                        .map(|c| quoted(c))
                        .collect::<Vec<_>>()
                        .join(", "),
                    quoted(&t.table)
                );
                corescan_sql::plan_unordered_with(&sql, |name| t.table_plan(name))
                    .map_err(|source| Error::Filter {
                        path: t.path.clone(),
                        table: t.table.clone(),
                        sql: sql.clone(),
                        source: Box::new(source),
                    })?
                    .into_spec()
            }
        }
        .with_placement(t.placement.clone())
        .with_options(t.options);
        // Each executor builds its partition's record batches as it decodes.
        let converter = Arc::clone(&self.converter);
        let sinks = move |_partition: usize| -> Box<dyn engine::BatchSink> {
            Box::new(converter.sink(batch_rows))
        };
        self.partitions(engine::scan_partitions_into(spec, &sinks)?)
    }

    /// [`CorescanExec::start`] for a table over several files: the projection planned against
    /// its columns over all of them, each file bound to its own by name as its executor
    /// reaches it ([`engine::scan_files_partitions_into`]).
    fn start_files(
        &self,
        files: &FilesTarget,
        batch_rows: usize,
    ) -> Result<(Vec<PartitionStream>, PartitionedEnd), Error> {
        let t = &self.target;
        let mut sql = format!(
            "SELECT {} FROM {}",
            self.scan_columns
                .iter()
                .map(|c| quoted(c))
                .collect::<Vec<_>>()
                .join(", "),
            quoted(&t.table)
        );
        if let Some(filter) = &self.filter {
            sql.push_str(" WHERE ");
            sql.push_str(filter);
        }
        let planned = corescan_sql::plan_files_unordered_with(&sql, |name| {
            let mut plan = TablePlan::open_for_scan(&t.path, name)?;
            plan.definition = (*files.definition).clone();
            Ok(plan)
        })
        .map_err(|source| Error::Filter {
            path: t.path.clone(),
            table: t.table.clone(),
            sql: sql.clone(),
            source: Box::new(source),
        })?;
        let converter = Arc::clone(&self.converter);
        let sinks =
            move |_partition: usize, path: &std::path::Path| -> Box<dyn engine::BatchSink> {
                let mut c = (*converter).clone();
                c.path = path.to_path_buf();
                Box::new(Arc::new(c).sink(batch_rows))
            };
        let spec = engine::FilesSpec {
            paths: files.paths.to_vec(),
            base: planned.table,
            query: planned.query,
            placement: t.placement.clone(),
            options: t.options,
            missing: engine::query::MissingTable::Fail,
        };
        self.partitions(engine::scan_files_partitions_into(
            spec,
            Some(Arc::new(sinks)),
        )?)
    }

    /// The started scan's streams (one per executor, as planned) and its outcome.
    fn partitions(
        &self,
        mut scan: engine::PartitionedScan,
    ) -> Result<(Vec<PartitionStream>, PartitionedEnd), Error> {
        let t = &self.target;
        let streams = scan.take_partitions();
        let end = scan.into_end();
        if streams.len() != t.cpus.len() {
            return Err(Error::Partitions {
                path: t.path.clone(),
                table: t.table.clone(),
                planned: t.cpus.len(),
                got: streams.len(),
            });
        }
        Ok((streams, end))
    }

    /// Partition `i`'s stream: from the plan's scan, started now if it is the first, or from a
    /// fresh scan when the plan's was taken already.
    fn take_stream(&self, i: usize, batch_rows: usize) -> Result<PartitionStream, Error> {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if !slot.started {
            let (streams, end) = self.start(batch_rows)?;
            slot.streams = streams.into_iter().map(Some).collect();
            slot.ends.push(end);
            slot.started = true;
        }
        if let Some(stream) = slot.streams.get_mut(i).and_then(Option::take) {
            return Ok(stream);
        }
        drop(slot);
        // The others of the fresh scan are dropped here, which stops their executors.
        let (mut streams, end) = self.start(batch_rows)?;
        self.slot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ends
            .push(end);
        Ok(streams.swap_remove(i))
    }
}

/// The file a scan reads, or its first and how many more.
fn shown_files(target: &ScanTarget) -> String {
    match &target.files {
        Some(f) if f.paths.is_empty() => "(none: this share reads no file)".to_string(),
        Some(f) if f.paths.len() > 1 => format!(
            "{} and {} more file{}",
            target.path.display(),
            f.paths.len() - 1,
            if f.paths.len() == 2 { "" } else { "s" }
        ),
        _ => target.path.display().to_string(),
    }
}

impl DisplayAs for CorescanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = &self.target;
        let cpus: Vec<String> = target.cpus.iter().map(usize::to_string).collect();
        let columns = self.columns();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                let placed = if target.remote {
                    format!("on workers, executors={} each", target.cpus.len())
                } else {
                    format!(
                        "executors={} (CPUs {}), io={}",
                        target.cpus.len(),
                        cpus.join(","),
                        target.backend
                    )
                };
                write!(
                    f,
                    "CorescanExec: file={}, table={}, columns=[{}], {placed}",
                    shown_files(target),
                    target.table,
                    columns.join(", "),
                )?;
                if let Some(filter) = &self.filter {
                    write!(f, ", filter={filter}")?;
                }
                if let Some(limit) = self.limit {
                    write!(f, ", limit={limit} per executor")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "file={}", shown_files(target))?;
                writeln!(f, "table={}", target.table)?;
                writeln!(f, "columns=[{}]", columns.join(", "))?;
                writeln!(f, "executors={}", target.cpus.len())?;
                if let Some(filter) = &self.filter {
                    writeln!(f, "filter={filter}")?;
                }
                write!(f, "io={}", target.backend)
            }
        }
    }
}

impl ExecutionPlan for CorescanExec {
    fn name(&self) -> &str {
        "CorescanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    /// A copy with a fresh slot: a leaf has no children, and a plan rebuilt (or reset to run
    /// again) must start its own scan.
    fn replace_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(CorescanExec {
            target: Arc::clone(&self.target),
            scan_columns: self.scan_columns.clone(),
            converter: Arc::clone(&self.converter),
            filter: self.filter.clone(),
            limit: self.limit,
            estimate: self.estimate,
            properties: Arc::clone(&self.properties),
            slot: Arc::new(Mutex::new(Slot::default())),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> DfResult<Arc<Statistics>> {
        let parts = self.target.cpus.len().max(1);
        let rows = match args.partition() {
            Some(_) => self.estimate.rows / parts,
            None => self.estimate.rows,
        };
        let mut stats = Statistics::new_unknown(&self.converter.schema);
        stats.num_rows = Precision::Inexact(rows);
        stats.total_byte_size = Precision::Inexact(rows.saturating_mul(self.estimate.row_bytes));
        Ok(Arc::new(stats))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let partitions = self.target.cpus.len();
        if self.target.remote {
            return Err(DataFusionError::Execution(format!(
                "the scan of table {:?} ({}) belongs on the workers holding its files, and \
                 was about to run in this process",
                self.target.table,
                shown_files(&self.target)
            )));
        }
        if partition >= partitions {
            return Err(DataFusionError::Internal(format!(
                "CorescanExec has {partitions} partitions, partition {partition} was asked for"
            )));
        }
        let batch_rows = context.session_config().batch_size().max(1);
        let stream = self
            .take_stream(partition, batch_rows)
            .map_err(Error::into_datafusion)?;
        let state = PartitionState {
            stream: Some(stream),
            converter: Arc::clone(&self.converter),
            left: self.limit,
            batch_rows,
            held: None,
            metrics: BaselineMetrics::new(&self.metrics, partition),
        };
        let batches = futures_lite::stream::unfold(state, |mut state| async move {
            let next = state.next().await;
            match &next {
                Some(Ok(batch)) => {
                    // Rows, batches and Arrow bytes.
                    let _ = batch.record_output(&state.metrics);
                }
                _ => state.metrics.done(),
            }
            Some((next?.map_err(Error::into_datafusion), state))
        });
        let schema: SchemaRef = Arc::clone(&self.converter.schema);
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)))
    }
}

/// One partition being read: its stream (`None` once it ended or failed), the rows it may
/// still yield, and how many rows a record batch of rows gathers.
struct PartitionState {
    stream: Option<PartitionStream>,
    converter: Arc<Converter>,
    left: Option<usize>,
    batch_rows: usize,
    /// A built batch that came after rows, handed over next.
    held: Option<SinkBatch>,
    /// The partition's output rows and end time.
    metrics: BaselineMetrics,
}

impl PartitionState {
    /// The next record batch: one its executor built, or rows (a database read without
    /// SQLite's locks hands over checked rows) gathered up to the batch size, cut to the
    /// limit; `None` after the last (or after an error).
    async fn next(&mut self) -> Option<Result<RecordBatch, Error>> {
        let next = self.read().await;
        if !matches!(next, Some(Ok(_))) || self.left == Some(0) {
            // Dropping the stream stops its executor (at once, for a limit reached).
            self.stream = None;
        }
        next
    }

    async fn read(&mut self) -> Option<Result<RecordBatch, Error>> {
        if let Some(batch) = self.held.take() {
            return Some(batch.map(|b| self.cut(b)));
        }
        let stream = self.stream.as_mut()?;
        let mut rows = Vec::new();
        while rows.len() < self.batch_rows && self.left != Some(0) {
            match stream.next_part().await {
                None => break,
                Some(Err(e)) => return Some(Err(Error::Scan(e))),
                Some(Ok(Part::Built { batch, .. })) => {
                    let batch = match batch.downcast::<SinkBatch>() {
                        Ok(batch) => *batch,
                        Err(_) => unreachable!("the plan's sinks build SinkBatches"),
                    };
                    if rows.is_empty() {
                        return Some(batch.map(|b| self.cut(b)));
                    }
                    // (A partition's parts are all built or all rows; kept in order anyway.)
                    self.held = Some(batch);
                    break;
                }
                Some(Ok(Part::Rows(batch))) => {
                    let mut got = batch.rows;
                    if let Some(left) = self.left {
                        got.truncate(left);
                        self.left = Some(left - got.len());
                    }
                    if rows.is_empty() {
                        rows = got;
                    } else {
                        rows.extend(got);
                    }
                }
            }
        }
        if rows.is_empty() {
            return None;
        }
        Some(self.converter.batch(&rows))
    }

    /// `batch` cut to the rows the limit leaves.
    fn cut(&mut self, batch: RecordBatch) -> RecordBatch {
        match self.left {
            None => batch,
            Some(left) => {
                let n = batch.num_rows().min(left);
                self.left = Some(left - n);
                batch.slice(0, n)
            }
        }
    }
}
