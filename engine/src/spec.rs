//! A scan specification ([`ScanSpec`]): the file, the table, what to compute ([`Compute`]: a
//! planned query, or a projection of columns), where the executors run ([`Placement`]) and
//! the settings a caller overrides ([`ScanOptions`]). [`crate::scan`] and
//! [`crate::scan_partitions`] run one.
//!
//! Opening a spec ([`ScanSpec::open`]) reads the file's header, schema and the top of the
//! table's b-tree, resolves a projection's columns against the schema with SQLite's rules
//! (the rowid under its three names unless a column takes the name, an `INTEGER PRIMARY KEY`
//! as the rowid, a column's `DEFAULT` for records written before `ALTER TABLE ... ADD
//! COLUMN`), narrows the walk to the rowids the query's `WHERE` admits, and places the
//! executors. A `VIRTUAL` generated column is computed from its SQL expression, which only
//! the SQL front end (`corescan-sql`) parses: a projection naming one is refused with an error
//! that says so.
//!
//! Layering: above [`crate::placement`] and [`crate::query`]; below the handles.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use partitioner::create_table::Generated;
use partitioner::plan::IndexScan;
use partitioner::TablePlan;

use crate::datatype3::Affinity;
use crate::error::{Error, Result};
use crate::placement::{resolve, Placement, ScanOptions};
use crate::query::ir::{ColumnRead, Expr, QueryPlan, Shape};
use crate::settings::{ExecutorSpec, ScanSettings};
use crate::value::Value;

/// What a scan computes.
// One per scan, moved once: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Compute {
    /// A query planned by the SQL front end (`corescan_sql::plan_query`), or built by hand.
    Query(QueryPlan),
    /// These columns of every row, by name (case-insensitive; `rowid`, `_rowid_` or `oid` for
    /// the rowid), in rowid order.
    Columns(Vec<String>),
}

/// One scan: the file, the table, what to compute, where and how.
#[derive(Debug, Clone)]
pub struct ScanSpec {
    /// The database file (a symbolic link is followed; its `-wal` is the target's).
    pub path: PathBuf,
    /// The table (case-insensitive).
    pub table: String,
    /// What to compute.
    pub compute: Compute,
    /// Which CPUs run the executors (default: one per available CPU).
    pub placement: Placement,
    /// Settings to override (default: the engine's, for the file's page size).
    pub options: ScanOptions,
    /// A plan of the table already made (by the SQL front end, narrowed to the query's rowid
    /// range), used for the first attempt instead of opening the table again. It is used as
    /// given: a plan of the whole table is correct too, only slower for a rowid-bounded query.
    pub table_plan: Option<TablePlan>,
}

impl ScanSpec {
    /// A scan of `table` in `path` computing `plan`.
    pub fn query(path: impl Into<PathBuf>, table: impl Into<String>, plan: QueryPlan) -> Self {
        Self::new(path.into(), table.into(), Compute::Query(plan))
    }

    /// A scan of `table` in `path` yielding `columns` of every row, in rowid order.
    pub fn columns<S: AsRef<str>>(
        path: impl Into<PathBuf>,
        table: impl Into<String>,
        columns: &[S],
    ) -> Self {
        let columns = columns.iter().map(|c| c.as_ref().to_string()).collect();
        Self::new(path.into(), table.into(), Compute::Columns(columns))
    }

    fn new(path: PathBuf, table: String, compute: Compute) -> Self {
        ScanSpec {
            path,
            table,
            compute,
            placement: Placement::default(),
            options: ScanOptions::default(),
            table_plan: None,
        }
    }

    /// The spec with its executors placed by `placement`.
    pub fn with_placement(self, placement: Placement) -> Self {
        ScanSpec { placement, ..self }
    }

    /// The spec with `options` over the default settings.
    pub fn with_options(self, options: ScanOptions) -> Self {
        ScanSpec { options, ..self }
    }

    /// The spec reusing `plan` (of the same file and table) for its first attempt.
    pub fn with_table_plan(self, plan: TablePlan) -> Self {
        ScanSpec {
            table_plan: Some(plan),
            ..self
        }
    }

    /// Opens the table, resolves what to compute and places the executors.
    pub fn open(self) -> Result<OpenScan> {
        let (table, given) = match self.table_plan {
            Some(plan) => (plan, true),
            None => (TablePlan::open_for_scan(&self.path, &self.table)?, false),
        };
        let query = match self.compute {
            Compute::Query(plan) => plan,
            Compute::Columns(names) => projection(&table, &names)?,
        };
        let table = if given {
            table
        } else {
            restrict(table, &query)?
        };
        // Placed as asked: callers that plan partitions per executor (the DataFusion provider)
        // count on it. A caller that wants small scans on one executor asks for it
        // (`Placement::for_leaves`, as `corescan query` does).
        let (executors, settings) =
            resolve(&self.placement, &self.options, table.header.page_size)?;
        Ok(OpenScan {
            path: self.path,
            table_name: table.table.name.clone(),
            index_scan: table.index_scan.clone(),
            table,
            query,
            executors,
            settings,
        })
    }
}

/// A spec opened: the table's plan for the first attempt, the query, the executors and the
/// settings.
#[derive(Debug)]
pub struct OpenScan {
    /// The database file.
    pub path: PathBuf,
    /// The table's name as the schema spells it.
    pub table_name: String,
    /// The plan of the first attempt.
    pub table: TablePlan,
    /// The index the first plan scans in place of the table, which a plan made again scans
    /// too ([`replan_scan`]).
    pub index_scan: Option<Arc<IndexScan>>,
    /// The query.
    pub query: QueryPlan,
    /// The executors.
    pub executors: Vec<ExecutorSpec>,
    /// The settings.
    pub settings: ScanSettings,
}

/// The table planned again (a database read without SQLite's locks that changed during a
/// scan), narrowed as the first plan was.
pub fn replan(path: &Path, table: &str, query: &QueryPlan) -> partitioner::Result<TablePlan> {
    restrict(TablePlan::open_for_scan(path, table)?, query)
}

/// [`replan`] for a first plan that scanned `index` in place of the table
/// ([`TablePlan::index_scan`]): the same index planned again, whose `CREATE INDEX` must be
/// the one the query was planned on (its record positions are the query's columns); a
/// changed or dropped index is [`partitioner::Error::Changed`]. Without `index`, [`replan`].
pub fn replan_scan(
    path: &Path,
    table: &str,
    query: &QueryPlan,
    index: Option<&IndexScan>,
) -> partitioner::Result<TablePlan> {
    let Some(index) = index else {
        return replan(path, table, query);
    };
    let plan = TablePlan::open_for_scan(path, table)?;
    let same = plan
        .indexes
        .iter()
        .any(|e| e.name == index.name && e.sql == index.sql);
    if !same {
        return Err(partitioner::Error::Changed {
            path: path.to_path_buf(),
            what: format!(
                "index {:?}, which the query reads in place of the table, changed",
                index.name
            ),
        });
    }
    plan.index_scan(&index.name, index.fields, None)
}

/// The table's plan cut down to the leaves that can hold the rowids the query's `WHERE`
/// admits ([`QueryPlan::rowid_ranges`]), as SQLite seeks a rowid, a rowid range or the
/// rowids of an `IN` list instead of scanning: `WHERE rowid = 7` reads a root-to-leaf path,
/// not the table.
pub fn restrict(table: TablePlan, query: &QueryPlan) -> partitioner::Result<TablePlan> {
    match query.rowid_ranges() {
        Some(ranges) => table.restrict_to_rowid_ranges(&ranges),
        None => Ok(table),
    }
}

/// The plan of a projection of `names`, resolved against `table`'s schema.
fn projection(table: &TablePlan, names: &[String]) -> Result<QueryPlan> {
    let def = &table.definition;
    let invalid = |what: String| {
        Error::Plan(partitioner::Error::Invalid {
            path: table.path.clone(),
            what,
        })
    };
    if names.is_empty() {
        return Err(invalid("a projection needs at least one column".into()));
    }
    let mut columns = Vec::with_capacity(names.len());
    let mut out = Vec::with_capacity(names.len());
    // SQLite names a bare column's output by the column's declared spelling.
    let mut shown = Vec::with_capacity(names.len());
    for name in names {
        shown.push(index_name(def, name));
        let index = def
            .columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name));
        let read = match index {
            None if ["rowid", "_rowid_", "oid"]
                .iter()
                .any(|r| r.eq_ignore_ascii_case(name)) =>
            {
                ColumnRead::Rowid
            }
            None => {
                let known: Vec<&str> = def.columns.iter().map(|c| c.name.as_str()).collect();
                return Err(invalid(format!(
                    "table {:?} has no column {name:?} (columns: {})",
                    table.table.name,
                    known.join(", ")
                )));
            }
            Some(i) if def.columns[i].rowid_alias => ColumnRead::Rowid,
            Some(i) if def.columns[i].generated == Some(Generated::Virtual) => {
                return Err(invalid(format!(
                    "column {:?} of table {:?} is a VIRTUAL generated column: plan it with \
                     the SQL front end (corescan-sql), which computes its expression",
                    def.columns[i].name, table.table.name
                )))
            }
            Some(i) => {
                let col = &def.columns[i];
                let position = def.record_position(i).ok_or_else(|| {
                    invalid(format!("column {:?} is not stored in the record", col.name))
                })?;
                ColumnRead::Record {
                    position,
                    default: table
                        .column_default(&col.name)
                        .map(Value::from)
                        .map_err(|e| e.to_string()),
                    real_affinity: Affinity::of_column(col, def.strict) == Affinity::Real,
                }
            }
        };
        out.push(Expr::Column(columns.len()));
        columns.push(read);
    }
    Ok(QueryPlan {
        columns,
        constant_terms: Vec::new(),
        filter: None,
        shape: Shape::Rows { outputs: out },
        order_by: Vec::new(),
        backward: false,
        limit: None,
        offset: 0,
        names: shown,
        distinct: false,
        windows: None,
        arrival: None,
    })
}

/// The declared spelling of column `name`, or `name` itself (the rowid's names).
fn index_name(def: &partitioner::create_table::CreateTable, name: &str) -> String {
    def.columns
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(name))
        .map_or_else(|| name.to_string(), |c| c.name.clone())
}
