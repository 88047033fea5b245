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
//! What is pushed down: the projection (only the projected columns are decoded, straight into
//! Arrow arrays on the executors; a projection of no columns, as `count(*)` asks for, reads only
//! the rowid and yields empty rows), the filters [`crate::pushdown`] can evaluate with exactly
//! DataFusion's result (`Exact`; some others `Inexact`), and the limit (each partition stops
//! after that many rows). Statistics are `Inexact` row counts: `sqlite_stat1`'s when `ANALYZE`
//! wrote one for the table, else a guess from its leaf pages.
//!
//! Layering: above [`crate::exec`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use engine::{IoChoice, Placement, ScanOptions, ScanSpec};
use partitioner::create_table::Generated;
use partitioner::{PageFile, TablePlan};

use crate::convert::{ConvertColumn, Converter};
use crate::error::Error;
use crate::exec::{CorescanExec, Estimate, FilesTarget, ScanTarget};
use crate::pushdown::{translate, PushColumn, Pushed};
use crate::types::ColumnType;

/// The name of the column holding each row's file, in a table over several files
/// ([`TableOptions::file_column`]).
pub const FILE_COLUMN: &str = "_file";

/// What a [`SqliteTable`] does beyond the engine's settings.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Push the `WHERE` terms the engine evaluates exactly as DataFusion does into the scan
    /// ([`crate::pushdown`]); on by default. Off, every row is sent and DataFusion filters.
    pub push_filters: bool,
    /// Read every column as text ([`ColumnType::AnyText`]), whatever its declared type
    /// (DuckDB's `sqlite_all_varchar`); [`TableOptions::types`] still applies.
    pub all_text: bool,
    /// Columns read as another type than their declared type gives.
    pub types: Vec<TypeOverride>,
    /// A table over several files gets a last column `_file` (`Utf8`, never NULL): each row's
    /// file path as given. DataFusion has no hidden columns (apache/datafusion#20135), so it
    /// is in `*` too; `corescan sql` asks for it when a statement names `_file`. A filter on
    /// it alone is pushed into the scan, which never opens a file it excludes. A real column
    /// of that name takes its place; over one file there is none.
    pub file_column: bool,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            push_filters: true,
            all_text: false,
            types: Vec::new(),
            file_column: false,
        }
    }
}

/// One column read as `ty` instead of its declared type's: `TABLE.COLUMN=TYPE`, names matched
/// ASCII case-insensitively, the type as [`ColumnType::from_name`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeOverride {
    /// The table.
    pub table: String,
    /// The column.
    pub column: String,
    /// The type it is read as.
    pub ty: ColumnType,
}

impl std::str::FromStr for TypeOverride {
    type Err = String;

    /// `TABLE.COLUMN=TYPE`, e.g. `orders.o_total=DECIMAL(12,2)`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, ty) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: expected TABLE.COLUMN=TYPE"))?;
        let (table, column) = name
            .rsplit_once('.')
            .filter(|(t, c)| !t.trim().is_empty() && !c.trim().is_empty())
            .ok_or_else(|| format!("{s:?}: expected TABLE.COLUMN before '='"))?;
        let ty = ColumnType::from_name(ty).ok_or_else(|| {
            format!(
                "{s:?}: unknown type {ty:?} (INTEGER, REAL, TEXT, BLOB, DECIMAL(p,s), DATE, \
                 TIMESTAMP, BOOLEAN)"
            )
        })?;
        Ok(TypeOverride {
            table: table.trim().to_string(),
            column: column.trim().to_string(),
            ty,
        })
    }
}

/// The row count `ANALYZE` recorded for `table` in `sqlite_stat1`, if any. Statistics only
/// order DataFusion's joins, so a file whose statistics cannot be read is planned from its
/// page counts instead (its table's own pages are checked when scanned).
fn stat1_rows(file: &PageFile, table: &str) -> Option<u64> {
    let entries = partitioner::schema::read_schema(file).ok()?;
    partitioner::schema::read_stat1(file, &entries)
        .ok()?
        .into_iter()
        .find(|(t, _)| t.eq_ignore_ascii_case(table))
        .map(|(_, n)| n)
}

/// The rows `table` of `file` (at `path`) is estimated to hold, as [`SqliteTable`] tells
/// DataFusion: `sqlite_stat1`'s count when `ANALYZE` wrote one, else a guess from its leaf
/// pages and its columns' declared types. Reads the table's interior pages only.
pub fn estimate_rows(path: &Path, file: &PageFile, table: &str) -> Result<usize, Error> {
    let plan = TablePlan::open_for_scan_from(file, table)?;
    let (columns, _, _) = table_columns(
        path,
        &plan.definition,
        &plan.table.name,
        &TableOptions::default(),
    )?;
    Ok(Estimate::of(&plan, &columns, stat1_rows(file, &plan.table.name)).rows)
}

/// A SQLite table as a DataFusion table (see the module docs).
#[derive(Debug)]
pub struct SqliteTable {
    target: Arc<ScanTarget>,
    columns: Vec<PushColumn>,
    /// The name the rowid is read by: `rowid`, `_rowid_` or `oid`, whichever no column takes,
    /// else the `INTEGER PRIMARY KEY` column; `None` if there is neither.
    rowid_name: Option<String>,
    schema: SchemaRef,
    table_options: TableOptions,
    /// The estimated rows and bytes of the whole table (for DataFusion's join order).
    estimate: Estimate,
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
        Self::open_with(path, table, placement, options, TableOptions::default())
    }

    /// [`SqliteTable::open`] with `table_options`.
    pub fn open_with(
        path: impl AsRef<Path>,
        table: &str,
        placement: Placement,
        options: ScanOptions,
        table_options: TableOptions,
    ) -> Result<Self, Error> {
        Self::open_in(path, table, None, placement, options, table_options)
    }

    /// [`SqliteTable::open_with`], the table read in the snapshot `file` holds when given
    /// (every scan of it then reads that committed state: [`crate::SqliteSchema`] holds one
    /// for all the tables of a file), else each scan in its own.
    pub fn open_in(
        path: impl AsRef<Path>,
        table: &str,
        file: Option<Arc<PageFile>>,
        placement: Placement,
        options: ScanOptions,
        table_options: TableOptions,
    ) -> Result<Self, Error> {
        let path: PathBuf = path.as_ref().to_path_buf();
        let plan = match &file {
            Some(f) => TablePlan::open_for_scan_from(f, table)?,
            None => TablePlan::open_for_scan(&path, table)?,
        };
        Self::from_plan(path, plan, file, placement, options, table_options, None)
    }

    /// Opens `table` (case-insensitive) spread over `paths` (each holding it), as one table:
    /// the union of its rows over the files, file by file, its columns the first file's then
    /// those only later files have (matched by name; a file without a column reads NULL for
    /// it, one whose column has another affinity is an error naming it when scanned). Each
    /// scan reads every file in its own snapshot, the files dealt to the executors
    /// ([`engine::scan_files_partitions_into`]). One path is [`SqliteTable::open_with`].
    pub fn open_files(
        paths: &[PathBuf],
        table: &str,
        placement: Placement,
        options: ScanOptions,
        table_options: TableOptions,
    ) -> Result<Self, Error> {
        let [first, ..] = paths else {
            return Err(Error::Session(format!("no file holds table {table:?}")));
        };
        if paths.len() == 1 {
            return Self::open_with(first, table, placement, options, table_options);
        }
        let plan = corescan_sql::union_table(paths, table, false)?;
        let files = FilesTarget {
            paths: Arc::new(paths.to_vec()),
            definition: Arc::new(plan.definition.clone()),
        };
        Self::from_plan(
            first.clone(),
            plan,
            None,
            placement,
            options,
            table_options,
            Some(files),
        )
    }

    /// The table whose plan (of `path`, or of the first of [`FilesTarget::paths`]) is `plan`.
    fn from_plan(
        path: PathBuf,
        plan: TablePlan,
        file: Option<Arc<PageFile>>,
        placement: Placement,
        options: ScanOptions,
        table_options: TableOptions,
        files: Option<FilesTarget>,
    ) -> Result<Self, Error> {
        let (mut columns, rowid_name, mut schema) =
            table_columns(&path, &plan.definition, &plan.table.name, &table_options)?;
        let file_column = files.is_some()
            && table_options.file_column
            && !columns
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(FILE_COLUMN));
        if file_column {
            columns.push(PushColumn {
                field: FILE_COLUMN.into(),
                name: FILE_COLUMN.into(),
                ty: ColumnType::Utf8,
                binary_collation: true,
                computed: false,
                declared: true,
            });
            let mut fields: Vec<Field> = schema.fields().iter().map(|f| (**f).clone()).collect();
            fields.push(Field::new(FILE_COLUMN, ColumnType::Utf8.data_type(), false));
            schema = Arc::new(Schema::new(fields));
        }
        let name = plan.table.name.clone();
        let stat1_rows = match &file {
            Some(f) => stat1_rows(f, &name),
            None => PageFile::open(&path)
                .ok()
                .and_then(|f| stat1_rows(&f, &name)),
        };
        let mut estimate = Estimate::of(&plan, &columns, stat1_rows);
        if let Some(f) = &files {
            // The other files' rows, guessed from their sizes beside the first's.
            let size = |p: &PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
            let first = size(&path).max(1);
            let all: u64 = f.paths.iter().map(size).sum();
            estimate.rows = (estimate.rows as f64 * all as f64 / first as f64) as usize;
        }
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
            file,
            files,
            remote: false,
        };
        Ok(Self::assemble(
            target,
            (columns, rowid_name, schema),
            table_options,
            estimate,
        ))
    }

    /// The table of `target` whose columns, rowid name and schema are `described`.
    fn assemble(
        target: ScanTarget,
        described: (Vec<PushColumn>, Option<String>, SchemaRef),
        table_options: TableOptions,
        estimate: Estimate,
    ) -> Self {
        let (columns, rowid_name, schema) = described;
        SqliteTable {
            target: Arc::new(target),
            columns,
            rowid_name,
            schema,
            table_options,
            estimate,
        }
    }

    /// The table `definition` declares, scanned as `target` says, without reading anything
    /// (the files may lie elsewhere: [`ScanTarget::remote`]); `rows` is its estimated row
    /// count, for DataFusion's join order.
    pub fn from_definition(
        target: ScanTarget,
        definition: &partitioner::create_table::CreateTable,
        rows: usize,
        table_options: TableOptions,
    ) -> Result<Self, Error> {
        let described = table_columns(&target.path, definition, &target.table, &table_options)?;
        Ok(Self::assemble(
            target,
            described,
            table_options,
            Estimate { rows, row_bytes: 0 },
        ))
    }

    /// The table's name as the schema spells it.
    pub fn name(&self) -> &str {
        &self.target.table
    }

    /// The executors a scan of it runs (one partition each).
    pub fn partitions(&self) -> usize {
        self.target.cpus.len()
    }

    /// How each of `filters` would be pushed into a scan of this table.
    pub fn pushdown(&self, filters: &[&Expr]) -> Vec<TableProviderFilterPushDown> {
        filters
            .iter()
            .map(|f| match self.pushed(f) {
                Some(p) if p.exact => TableProviderFilterPushDown::Exact,
                Some(_) => TableProviderFilterPushDown::Inexact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect()
    }

    fn pushed(&self, filter: &Expr) -> Option<Pushed> {
        if !self.table_options.push_filters {
            return None;
        }
        translate(filter, &self.columns)
    }

    /// The plan of a scan of the columns at `projection` (all when `None`), keeping the rows
    /// `filters` admit (those of them that can be pushed: [`SqliteTable::pushdown`]).
    pub fn plan(
        &self,
        projection: Option<&[usize]>,
        filters: &[Expr],
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
        let width: usize = converted.iter().map(|c| byte_width(c.ty)).sum();
        let converter = Converter {
            path: self.target.path.clone(),
            table: self.target.table.clone(),
            columns: converted,
            rowid_first: self.rowid_name.is_some(),
            schema,
        };
        let terms: Vec<String> = filters
            .iter()
            .filter_map(|f| self.pushed(f))
            .map(|p| p.sql)
            .collect();
        let filter = (!terms.is_empty()).then(|| terms.join(" AND "));
        let rows = self.estimate.rows(filter.is_some(), limit);
        Ok(CorescanExec::new(
            Arc::clone(&self.target),
            scan_columns,
            Arc::new(converter),
            filter,
            limit,
            Estimate {
                rows,
                row_bytes: width.max(1),
            },
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

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(self.pushdown(filters))
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let plan = self
            .plan(projection.map(Vec::as_slice), filters, limit)
            .map_err(Error::into_datafusion)?;
        Ok(Arc::new(plan))
    }
}

/// The columns of the table `definition` declares as DataFusion reads them (its declared
/// types, or `table_options`' overrides), the name its rowid is read by, and its Arrow schema.
fn table_columns(
    path: &Path,
    def: &partitioner::create_table::CreateTable,
    table: &str,
    table_options: &TableOptions,
) -> Result<(Vec<PushColumn>, Option<String>, SchemaRef), Error> {
    let overrides: Vec<&TypeOverride> = table_options
        .types
        .iter()
        .filter(|o| o.table.eq_ignore_ascii_case(table))
        .collect();
    if let Some(o) = overrides.iter().find(|o| {
        !def.columns
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(&o.column))
    }) {
        return Err(Error::Unsupported {
            path: path.to_path_buf(),
            table: table.to_string(),
            column: o.column.clone(),
            reason: "no such column (in a type override)".into(),
        });
    }
    let columns: Vec<PushColumn> = def
        .columns
        .iter()
        .map(|c| {
            let declared = ColumnType::of_column(c, def.strict);
            let given = overrides
                .iter()
                .rev()
                .find(|o| o.column.eq_ignore_ascii_case(&c.name))
                .map(|o| o.ty)
                .or(table_options.all_text.then_some(ColumnType::AnyText));
            (c, declared, given)
        })
        .map(|(c, declared, given)| PushColumn {
            field: c.name.to_lowercase(),
            name: c.name.clone(),
            ty: given.unwrap_or(declared),
            declared: given.is_none_or(|g| g == declared),
            binary_collation: c
                .collation
                .as_deref()
                .is_none_or(|n| n.eq_ignore_ascii_case("binary")),
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
        .map(|c| Field::new(c.field.clone(), c.ty.data_type(), true))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    Ok((columns, rowid_name, schema))
}

/// A guess of the bytes one value of `ty` takes in Arrow, for the statistics.
fn byte_width(ty: ColumnType) -> usize {
    match ty {
        ColumnType::Boolean => 1,
        ColumnType::Date32 => 4,
        ColumnType::Int64 | ColumnType::Float64 | ColumnType::Numeric | ColumnType::Timestamp => 8,
        ColumnType::Decimal { .. } => 16,
        // Offsets and a short text's bytes.
        ColumnType::Utf8 | ColumnType::AnyText | ColumnType::Binary => 24,
    }
}
