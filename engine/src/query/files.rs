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

use crate::coordinator::{run_files, FileOpener, RangeOrder};
use crate::datatype3::Affinity;
use crate::error::Error;
use crate::report::RunReport;
use crate::settings::{ExecutorSpec, ScanSettings};
use crate::spec::restrict;
use crate::value::Value;

use super::dates;
use super::error::QueryError;
use super::eval::holds;
use super::fold::{fold_plan, reads_slots};
use super::ir::{ColumnRead, Expr, QueryPlan, Shape};
use super::kernel::QueryKernel;
use super::marks::sorts_with_limit;
use super::merge::{merge_files, MergeError};
use super::run::test_constant_terms;

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
    let open: Arc<FileOpener<QueryKernel>> = {
        let (query, binding) = (Arc::clone(&query), Binding::new(base, missing));
        Arc::new(move |_executor: usize, _file: usize, path: &Path| {
            let Some((plan, bound)) = binding.open(path, &query)? else {
                return Ok(None);
            };
            let kernel = QueryKernel::new(Arc::new(bound), plan.header.usable_size()).at_time(now);
            Ok(Some((plan, kernel)))
        })
    };
    let scan = run_files(
        Arc::clone(&paths),
        base,
        settings,
        executors,
        order,
        open,
        || ((), usize::MAX),
    )?;
    dates::set_statement_time(now);
    let mut files = Vec::with_capacity(paths.len());
    let mut partials = Vec::with_capacity(paths.len());
    // Each file's rowid tags shifted above the previous file's, so that every tie the merge
    // decides by rowid (a group's first row, min() and max() ties, DISTINCT's first value)
    // is decided by file, then rowid: the order of the files' union.
    let mut next: Option<i128> = None;
    for (i, p) in scan.partials.into_iter().enumerate() {
        let Some(mut p) = p else { continue };
        if let Some((lo, hi)) = p.rowid_span() {
            let by = next.map_or(0, |n| n - i128::from(lo));
            let top = i128::from(hi) + by;
            let by = i64::try_from(by)
                .ok()
                .filter(|_| top <= i128::from(i64::MAX));
            let Some(by) = by else {
                return Err(QueryError::Scan(Error::Plan(partitioner::Error::Invalid {
                    path: paths[i].clone(),
                    what: "the files' rowids span more than 64 bits together: their rows \
                           cannot be ordered file by file"
                        .into(),
                })));
            };
            p.shift_rowids(by);
            next = Some(top + 1);
        }
        files.push(i);
        partials.push(p);
    }
    let rows = merge_files(&query, partials, Some(&files)).map_err(|e| match e {
        MergeError::Eval(e) => QueryError::Eval(e),
        MergeError::Row { range, failure } => {
            let file = files[range];
            let cpu = executors[scan.executor_of[file]].cpu;
            QueryError::Scan(failure.into_error(cpu, &paths[file]))
        }
    })?;
    Ok(FilesOutput {
        names: query.names.clone(),
        rows,
        report: scan.report,
    })
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
                if let Some(x) = &mut a.arg {
                    x.replace_slots(&mut with);
                }
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
