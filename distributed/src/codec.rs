//! The one codec for corescan's scan node: a [`CorescanExec`] crossing the network.
//!
//! The coordinator encodes a scan as a [`ScanNode`] (JSON): the table, its files as paths
//! relative to the worker's data directory, the `CREATE TABLE` statements its columns come
//! from (one per distinct definition, in file order: a column some files lack reads NULL
//! there), the projected columns and their Arrow types, the pushed filter as SQLite SQL, the
//! per-partition limit, the statistics' guess and the partition count. Nothing else: no
//! absolute path, no I/O settings (a worker reads as its own command line says).
//!
//! A worker decodes it into a [`CorescanExec`] over its own files, each path resolved by its
//! [`DataDir`] (refused unless it is a file under the directory), on its own first
//! `partitions` executors. A share with no files decodes to an empty plan of as many
//! partitions. The same codec serves datafusion-distributed here and would serve Ballista,
//! which takes the same `PhysicalExtensionCodec`.
//!
//! Layering: above [`crate::data_dir`] and [`crate::definition`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use corescan_datafusion::convert::{ConvertColumn, Converter};
use corescan_datafusion::exec::{Estimate, FilesTarget, ScanTarget};
use corescan_datafusion::{ColumnType, CorescanExec};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::{internal_err, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use engine::ExecutorSpec;
use engine::{Placement, ScanOptions};
use serde::{Deserialize, Serialize};

use crate::data_dir::DataDir;
use crate::definition::merge_definitions;
use crate::error::Error;

/// A corescan scan as it crosses the network (see the module docs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ScanNode {
    /// The table, as the schema spells it.
    pub table: String,
    /// The files to read, relative to the worker's data directory, in order.
    pub files: Vec<String>,
    /// The `CREATE TABLE` statements the table's columns come from, in order.
    pub definition: Vec<String>,
    /// The columns read, as the schema spells them (the rowid's name first when free).
    pub scan_columns: Vec<String>,
    /// The projected columns and the Arrow type each is read as.
    pub columns: Vec<(String, ColumnType)>,
    /// Whether each row starts with the rowid.
    pub rowid_first: bool,
    /// The pushed `WHERE` terms, as SQLite SQL.
    pub filter: Option<String>,
    /// Rows each partition stops after.
    pub limit: Option<usize>,
    /// Estimated rows.
    pub rows: usize,
    /// Estimated Arrow bytes per row.
    pub row_bytes: usize,
    /// Partitions (executors) the scan runs on.
    pub partitions: usize,
}

/// The Arrow schema of `columns` as the scan's record batches carry it (lower-cased names,
/// nullable, as [`corescan_datafusion::SqliteTable`] declares them).
fn schema_of(columns: &[(String, ColumnType)]) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|(name, ty)| Field::new(name.to_lowercase(), ty.data_type(), true))
            .collect::<Vec<_>>(),
    ))
}

/// The worker's side of the codec: where its files are and how it scans them.
#[derive(Debug, Clone)]
pub struct WorkerScans {
    /// The data directory.
    pub dir: Arc<DataDir>,
    /// Its executors, in order: a scan of `n` partitions runs on the first `n`.
    pub executors: Vec<ExecutorSpec>,
    /// Its scan settings.
    pub options: ScanOptions,
}

impl WorkerScans {
    /// The plan for `node` over this worker's files.
    pub fn plan(&self, node: ScanNode) -> Result<Arc<dyn ExecutionPlan>, Error> {
        let schema = schema_of(&node.columns);
        if node.files.is_empty() {
            return Ok(Arc::new(
                EmptyExec::new(schema).with_partitions(node.partitions),
            ));
        }
        if node.partitions == 0 || node.partitions > self.executors.len() {
            return Err(Error::Cluster(format!(
                "a scan of {} partitions was sent to a worker of {} executors",
                node.partitions,
                self.executors.len()
            )));
        }
        let paths = node
            .files
            .iter()
            .map(|f| self.dir.resolve(f))
            .collect::<Result<Vec<PathBuf>, Error>>()?;
        let definition = merge_definitions(&node.table, &node.definition)?;
        let executors = self.executors[..node.partitions].to_vec();
        let backend = match self.options.io {
            Some(engine::IoChoice::Fixed(b)) => b.name().to_string(),
            _ => "auto".to_string(),
        };
        let target = ScanTarget {
            path: paths[0].clone(),
            table: node.table.clone(),
            placement: Placement::Executors(executors.clone()),
            options: self.options,
            cpus: executors.iter().map(|e| e.cpu).collect(),
            backend,
            file: None,
            files: Some(FilesTarget {
                paths: Arc::new(paths.clone()),
                definition: Arc::new(definition),
            }),
            remote: false,
        };
        let converter = Converter {
            path: paths[0].clone(),
            table: node.table,
            columns: node
                .columns
                .into_iter()
                .map(|(name, ty)| ConvertColumn { name, ty })
                .collect(),
            rowid_first: node.rowid_first,
            schema,
        };
        Ok(Arc::new(CorescanExec::new(
            Arc::new(target),
            node.scan_columns,
            Arc::new(converter),
            node.filter,
            node.limit,
            Estimate {
                rows: node.rows,
                row_bytes: node.row_bytes,
            },
        )))
    }
}

/// corescan's `PhysicalExtensionCodec` (see the module docs): encodes on the coordinator,
/// decodes on a worker.
#[derive(Debug, Clone, Default)]
pub struct CorescanCodec {
    /// Each table's `CREATE TABLE` statements, by lower-cased name (the coordinator's).
    definitions: Arc<HashMap<String, Arc<Vec<String>>>>,
    /// The worker's files and executors (a worker's codec).
    worker: Option<Arc<WorkerScans>>,
}

impl CorescanCodec {
    /// The coordinator's codec, encoding scans of tables whose definitions are `definitions`.
    pub fn coordinator(definitions: Arc<HashMap<String, Arc<Vec<String>>>>) -> Self {
        CorescanCodec {
            definitions,
            worker: None,
        }
    }

    /// A worker's codec, decoding scans over `scans`' files.
    pub fn worker(scans: Arc<WorkerScans>) -> Self {
        CorescanCodec {
            definitions: Arc::default(),
            worker: Some(scans),
        }
    }

    /// `exec` as it crosses the network.
    pub fn node(&self, exec: &CorescanExec) -> Result<ScanNode, Error> {
        let t = exec.target();
        let Some(files) = t.files.as_ref().filter(|_| t.remote) else {
            return Err(Error::Cluster(format!(
                "the scan of {:?} reads a local file, which no worker holds",
                t.table
            )));
        };
        let definition = self
            .definitions
            .get(&t.table.to_ascii_lowercase())
            .ok_or_else(|| Error::Cluster(format!("no definition of table {:?}", t.table)))?;
        let converter = exec.converter();
        let columns: Vec<(String, ColumnType)> = converter
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.ty))
            .collect();
        if schema_of(&columns) != converter.schema {
            return Err(Error::Cluster(format!(
                "the scan of {:?} has a schema its columns do not give",
                t.table
            )));
        }
        let estimate = exec.estimate();
        Ok(ScanNode {
            table: t.table.clone(),
            files: files
                .paths
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            definition: definition.to_vec(),
            scan_columns: exec.scan_columns().to_vec(),
            columns,
            rowid_first: converter.rowid_first,
            filter: exec.filter().map(str::to_string),
            limit: exec.limit(),
            rows: estimate.rows,
            row_bytes: estimate.row_bytes,
            partitions: t.cpus.len(),
        })
    }
}

impl PhysicalExtensionCodec for CorescanCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        _ctx: &TaskContext,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if !inputs.is_empty() {
            return internal_err!("a corescan scan has no inputs, {} were sent", inputs.len());
        }
        let Some(worker) = &self.worker else {
            return internal_err!("a corescan scan is decoded on the worker that reads it");
        };
        let node: ScanNode = serde_json::from_slice(buf).map_err(|e| {
            Error::Cluster(format!("an unreadable corescan scan: {e}")).into_datafusion()
        })?;
        worker.plan(node).map_err(Error::into_datafusion)
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<()> {
        let Some(exec) = node.downcast_ref::<CorescanExec>() else {
            return internal_err!("corescan's codec encodes CorescanExec, not {}", node.name());
        };
        let scan = self.node(exec).map_err(Error::into_datafusion)?;
        serde_json::to_writer(buf, &scan)
            .map_err(|e| Error::Cluster(format!("writing a corescan scan: {e}")).into_datafusion())
    }
}
