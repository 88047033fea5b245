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
//! Each partition's rows are converted by the [`Converter`] into record batches of about the
//! session's batch size; the first value that does not fit its column's type ends the
//! partition with [`crate::Error::Conversion`], and a scan failure with the engine's error, both
//! as `DataFusionError::External`. With a `limit`, each partition stops after that many rows
//! (DataFusion's own limit above the scan still cuts the total).
//!
//! Layering: above [`crate::convert`]; used by [`crate::table`].

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning,
    PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream,
};
use engine::{PartitionStream, Placement, ScanOptions, ScanSpec};

use crate::convert::Converter;
use crate::error::Error;

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
}

/// The streams of the scan a plan started, by partition; `None` once taken.
#[derive(Debug, Default)]
struct Slot {
    started: bool,
    streams: Vec<Option<PartitionStream>>,
}

/// One corescan scan as a DataFusion leaf (see the module docs).
#[derive(Debug)]
pub struct CorescanExec {
    target: Arc<ScanTarget>,
    /// The columns the scan reads, as the schema spells them: the rowid's name first (when the
    /// table has one free), then the projected columns.
    scan_columns: Vec<String>,
    converter: Arc<Converter>,
    limit: Option<usize>,
    properties: Arc<PlanProperties>,
    slot: Arc<Mutex<Slot>>,
}

impl CorescanExec {
    /// A plan scanning `scan_columns` of `target`'s table, converted by `converter` (whose
    /// schema is the plan's), each partition stopping after `limit` rows.
    pub fn new(
        target: Arc<ScanTarget>,
        scan_columns: Vec<String>,
        converter: Arc<Converter>,
        limit: Option<usize>,
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
            limit,
            properties: Arc::new(properties),
            slot: Arc::new(Mutex::new(Slot::default())),
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

    /// Starts the scan: one stream per executor.
    fn start(&self) -> Result<Vec<PartitionStream>, Error> {
        let t = &self.target;
        let spec = ScanSpec::columns(&t.path, &t.table, &self.scan_columns)
            .with_placement(t.placement.clone())
            .with_options(t.options);
        let mut scan = engine::scan_partitions(spec)?;
        let streams = scan.take_partitions();
        if streams.len() != t.cpus.len() {
            return Err(Error::Partitions {
                path: t.path.clone(),
                table: t.table.clone(),
                planned: t.cpus.len(),
                got: streams.len(),
            });
        }
        Ok(streams)
    }

    /// Partition `i`'s stream: from the plan's scan, started now if it is the first, or from a
    /// fresh scan when the plan's was taken already.
    fn take_stream(&self, i: usize) -> Result<PartitionStream, Error> {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if !slot.started {
            slot.streams = self.start()?.into_iter().map(Some).collect();
            slot.started = true;
        }
        if let Some(stream) = slot.streams.get_mut(i).and_then(Option::take) {
            return Ok(stream);
        }
        drop(slot);
        // The others of the fresh scan are dropped here, which stops their executors.
        Ok(self.start()?.swap_remove(i))
    }
}

impl DisplayAs for CorescanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = &self.target;
        let cpus: Vec<String> = target.cpus.iter().map(usize::to_string).collect();
        let columns = self.columns();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "CorescanExec: file={}, table={}, columns=[{}], executors={} (CPUs {}), io={}",
                    target.path.display(),
                    target.table,
                    columns.join(", "),
                    target.cpus.len(),
                    cpus.join(","),
                    target.backend
                )?;
                if let Some(limit) = self.limit {
                    write!(f, ", limit={limit} per executor")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "file={}", target.path.display())?;
                writeln!(f, "table={}", target.table)?;
                writeln!(f, "columns=[{}]", columns.join(", "))?;
                writeln!(f, "executors={}", target.cpus.len())?;
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
            limit: self.limit,
            properties: Arc::clone(&self.properties),
            slot: Arc::new(Mutex::new(Slot::default())),
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

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let partitions = self.target.cpus.len();
        if partition >= partitions {
            return Err(DataFusionError::Internal(format!(
                "CorescanExec has {partitions} partitions, partition {partition} was asked for"
            )));
        }
        let stream = self
            .take_stream(partition)
            .map_err(Error::into_datafusion)?;
        let batch_rows = context.session_config().batch_size().max(1);
        let state = PartitionState {
            stream: Some(stream),
            converter: Arc::clone(&self.converter),
            left: self.limit,
            batch_rows,
        };
        let batches = futures_lite::stream::unfold(state, |mut state| async move {
            let next = state.next().await?;
            Some((next.map_err(Error::into_datafusion), state))
        });
        let schema: SchemaRef = Arc::clone(&self.converter.schema);
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)))
    }
}

/// One partition being read: its stream (`None` once it ended or failed), the rows it may
/// still yield, and how many rows a record batch gathers.
struct PartitionState {
    stream: Option<PartitionStream>,
    converter: Arc<Converter>,
    left: Option<usize>,
    batch_rows: usize,
}

impl PartitionState {
    /// The next record batch: rows gathered from the stream up to the batch size, the limit
    /// or the stream's end; `None` after the last (or after an error).
    async fn next(
        &mut self,
    ) -> Option<Result<datafusion::arrow::record_batch::RecordBatch, Error>> {
        let stream = self.stream.as_mut()?;
        let mut rows = Vec::new();
        let mut ended = false;
        while rows.len() < self.batch_rows && self.left != Some(0) {
            match stream.next_batch().await {
                None => {
                    ended = true;
                    break;
                }
                Some(Err(e)) => {
                    self.stream = None;
                    return Some(Err(Error::Scan(e)));
                }
                Some(Ok(batch)) => {
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
        if ended || self.left == Some(0) {
            // Dropping the stream stops its executor (at once, for a limit reached).
            self.stream = None;
        }
        if rows.is_empty() {
            return None;
        }
        let batch = self.converter.batch(&rows);
        if batch.is_err() {
            self.stream = None;
        }
        Some(batch)
    }
}
