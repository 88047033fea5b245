//! [`SqliteTable`]: one table of one SQLite file as a DataFusion `TableProvider`.
//!
//! Opening the table ([`SqliteTable::open`]) reads the file's header and schema and places the
//! executors once, for the Arrow schema ([`crate::types`]) and the partition count; nothing of
//! the table's rows is read until a plan is executed, and nothing is held open in between (a
//! provider keeps no lock on the file: every scan takes its own snapshot).
//!
//! Column names are lower-cased for DataFusion, which lower-cases unquoted identifiers (SQLite
//! matches names case-insensitively, and its column names are unique that way); the scan uses
//! the schema's spelling.
//!
//! What is pushed down: the projection (only the projected columns are decoded; a projection of
//! no columns, as `count(*)` asks for, reads only the rowid and yields empty rows) and the limit
//! (each partition stops after that many rows). Filters are not pushed down yet
//! (`Unsupported`): DataFusion filters every row the scan yields. No statistics are given.
//!
//! Layering: above [`crate::exec`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use engine::{IoChoice, Placement, ScanOptions, ScanSpec};
use partitioner::create_table::Generated;
use partitioner::TablePlan;

use crate::convert::{ConvertColumn, Converter};
use crate::error::Error;
use crate::exec::{CorescanExec, ScanTarget};
use crate::types::ColumnType;

/// One declared column.
#[derive(Debug, Clone)]
struct TableColumn {
    /// The name as the schema spells it.
    name: String,
    ty: ColumnType,
    /// A `VIRTUAL` generated column: computed from its expression on read, which only the
    /// SQL front end does.
    computed: bool,
}

/// A SQLite table as a DataFusion table (see the module docs).
#[derive(Debug)]
pub struct SqliteTable {
    target: Arc<ScanTarget>,
    columns: Vec<TableColumn>,
    /// The name the rowid is read by: `rowid`, `_rowid_` or `oid`, whichever no column takes,
    /// else the `INTEGER PRIMARY KEY` column; `None` if there is neither.
    rowid_name: Option<String>,
    schema: SchemaRef,
}

impl SqliteTable {
    /// Opens `table` (case-insensitive) of `path`: reads its schema and places its executors
    /// by `placement`, with `options` over the engine's default settings.
    pub fn open(
        path: impl AsRef<Path>,
        table: &str,
        placement: Placement,
        options: ScanOptions,
    ) -> Result<Self, Error> {
        let path: PathBuf = path.as_ref().to_path_buf();
        let plan = TablePlan::open_for_scan(&path, table)?;
        let def = &plan.definition;
        let columns: Vec<TableColumn> = def
            .columns
            .iter()
            .map(|c| TableColumn {
                name: c.name.clone(),
                ty: ColumnType::of_column(c, def.strict),
                computed: c.generated == Some(Generated::Virtual),
            })
            .collect();
        let taken = |n: &str| columns.iter().any(|c| c.name.eq_ignore_ascii_case(n));
        let rowid_name = ["rowid", "_rowid_", "oid"]
            .into_iter()
            .find(|n| !taken(n))
            .map(str::to_string)
            .or_else(|| def.rowid_alias().map(|i| def.columns[i].name.clone()));
        let fields: Vec<Field> = columns
            .iter()
            .map(|c| Field::new(c.name.to_lowercase(), c.ty.data_type(), true))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let name = plan.table.name.clone();
        // Opening a scan of the rowid places the executors as a scan would (and takes the
        // plan, so the file is read once); nothing is scanned.
        let probe: Vec<&str> = match &rowid_name {
            Some(r) => vec![r.as_str()],
            None => columns
                .iter()
                .filter(|c| !c.computed)
                .map(|c| c.name.as_str())
                .take(1)
                .collect(),
        };
        let open = ScanSpec::columns(&path, &name, &probe)
            .with_placement(placement.clone())
            .with_options(options)
            .with_table_plan(plan)
            .open()?;
        let backend = match open.settings.io {
            IoChoice::Auto => "auto".to_string(),
            IoChoice::Fixed(b) => b.name().to_string(),
        };
        let target = ScanTarget {
            path,
            table: name,
            placement,
            options,
            cpus: open.executors.iter().map(|e| e.cpu).collect(),
            backend,
        };
        Ok(SqliteTable {
            target: Arc::new(target),
            columns,
            rowid_name,
            schema,
        })
    }

    /// The table's name as the schema spells it.
    pub fn name(&self) -> &str {
        &self.target.table
    }

    /// The executors a scan of it runs (one partition each).
    pub fn partitions(&self) -> usize {
        self.target.cpus.len()
    }

    /// The plan of a scan of the columns at `projection` (all when `None`).
    pub fn plan(
        &self,
        projection: Option<&[usize]>,
        limit: Option<usize>,
    ) -> Result<CorescanExec, Error> {
        let indices: Vec<usize> = match projection {
            Some(p) => p.to_vec(),
            None => (0..self.columns.len()).collect(),
        };
        let mut scan_columns = Vec::with_capacity(indices.len() + 1);
        scan_columns.extend(self.rowid_name.clone());
        let mut converted = Vec::with_capacity(indices.len());
        for &i in &indices {
            let c = &self.columns[i];
            if c.computed {
                return Err(Error::Unsupported {
                    path: self.target.path.clone(),
                    table: self.target.table.clone(),
                    column: c.name.clone(),
                    reason: "a VIRTUAL generated column, which corescan sql does not compute \
                             yet (corescan query does)"
                        .into(),
                });
            }
            scan_columns.push(c.name.clone());
            converted.push(ConvertColumn {
                name: c.name.clone(),
                ty: c.ty,
            });
        }
        if scan_columns.is_empty() {
            // No rowid name is free and no column is projected: read the first stored column
            // for the row count.
            let first = self.columns.iter().find(|c| !c.computed);
            scan_columns.extend(first.map(|c| c.name.clone()));
        }
        let schema = Arc::new(
            self.schema
                .project(&indices)
                .map_err(|e| Error::Unsupported {
                    path: self.target.path.clone(),
                    table: self.target.table.clone(),
                    column: String::new(),
                    reason: format!("projecting the schema: {e}"),
                })?,
        );
        let converter = Converter {
            path: self.target.path.clone(),
            table: self.target.table.clone(),
            columns: converted,
            rowid_first: self.rowid_name.is_some(),
            schema,
        };
        Ok(CorescanExec::new(
            Arc::clone(&self.target),
            scan_columns,
            Arc::new(converter),
            limit,
        ))
    }
}

#[async_trait]
impl TableProvider for SqliteTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let plan = self
            .plan(projection.map(Vec::as_slice), limit)
            .map_err(Error::into_datafusion)?;
        Ok(Arc::new(plan))
    }
}
