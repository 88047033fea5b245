//! Statement-level planning: one `SELECT` over one table, to a [`QueryPlan`].

use std::path::Path;

use engine::datatype3::Collation;
use engine::query::eval::eval;
use engine::query::ir::{AggFunc, AggSpec, Expr, Function, QueryPlan, Shape, SortKey, WindowStage};
use engine::query::json::JsonFunc;
use engine::value::Value;
use partitioner::TablePlan;
use sqlparser::ast::{self, SelectItem, SetExpr, Statement, TableFactor};

use super::aggregate::has_aggregate;
use super::covering::{columns_in_index, covering_scan, Covering};
use super::error::{invalid, unsupported, SqlError};
use super::expr::{
    collation_named, holds_subquery, parser_folds_and, renumber_results, sort_key, GroupContext,
    Resolver, Stage, Typed, WindowContext,
};
use super::index_order::{
    counted_entries, first_groups, first_rows, follow, index_arrival, key_bounds, minmax_row,
    multi_or_seek, or_seek_targets, order_listings, order_sensitive, range_count, range_seek,
    range_walk_place, rowid_group_order, rowid_in, seek_target, FirstGroups, KeyRanges, SeekTarget,
    MAX_SEEK_ROWS,
};
use super::init_constants::init_constants;
use super::order::{scan_order, ScanOrder};
use super::position::{position_term, skip_collate};
use super::source::offset_of;
use super::sqlite_plan::{ask, choose, Access, SqliteChoice};
use super::subquery::{has_subquery, DefaultScans, PlannedSubquery, Subqueries, SubqueryRunner};

/// A planned query and the table it scans.
#[derive(Debug)]
pub struct PlannedQuery {
    /// The table's plan (header, schema, leaves).
    pub table: TablePlan,
    /// The query.
    pub query: QueryPlan,
    /// How SQLite reads the table for the query and how corescan follows it, when the table
    /// has indexes (and the plan follows SQLite's order: [`plan_query`], [`plan_query_with`]).
    pub index_plan: Option<IndexPlan>,
    /// Whether the statement's subqueries were run while it was planned
    /// ([`plan_query_running`]): its plan holds their results, so planning it again (after
    /// the database changed) means running them again.
    pub ran_subqueries: bool,
}

impl PlannedQuery {
    /// Whether planning the statement read more than the table's schema: its subqueries'
    /// results, or the entries of an index (SQLite's first rows, a range, a min/max entry),
    /// which the plan's `WHERE` now names by rowid. After a change of the database (read
    /// without SQLite's locks) the statement is planned again, not only its table.
    pub fn replans(&self) -> bool {
        self.ran_subqueries || self.index_plan.is_some()
    }
}

/// SQLite's plan of a query over a table with indexes, and corescan's.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexPlan {
    /// `EXPLAIN QUERY PLAN`'s lines (SQLite 3.54's planner on the table's schema and
    /// statistics), indented two spaces per level.
    pub sqlite: Vec<String>,
    /// What corescan runs: the scan in rowid order, its rows ordered as SQLite's loop gives
    /// them when that is an index.
    pub corescan: String,
    /// When corescan read the rows SQLite's loop gives first from the index (and then only
    /// those rows from the table): how many result rows that gives if the table holds every
    /// row the index lists. Fewer means a damaged index: [`IndexPlan::check_rows`].
    pub seek_rows: Option<u64>,
}

impl IndexPlan {
    /// Fails when a result of `rows` rows is shorter than the index's entries promise
    /// ([`IndexPlan::seek_rows`]): the index lists rowids the table lacks, where SQLite stops
    /// with `database disk image is malformed`.
    pub fn check_rows(&self, rows: u64) -> Result<(), SqlError> {
        match self.seek_rows {
            Some(want) if rows < want => Err(SqlError::Invalid(format!(
                "database disk image is malformed: the index SQLite reads ({}) lists rows the \
                 table lacks ({rows} of {want} found)",
                self.sqlite.join("; ")
            ))),
            _ => Ok(()),
        }
    }
}

/// The order a plan gives rows in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// One file, SQLite's order: the index SQLite's planner reads the table through is
    /// followed ([`crate::sqlite_plan`]).
    Sqlite,
    /// One file, the scan's rowid order whatever index SQLite would use: for callers that
    /// take the rows in any order (DataFusion's scans).
    Scan,
    /// Several files: file by file, each in rowid order.
    Files,
    /// Several files, the rows in any order (DataFusion's scans of a table over several
    /// files): as [`Order::Scan`], with the hidden `_file` column.
    ScanFiles,
}

impl PlannedQuery {
    /// The scan of this query, for [`engine::scan`] or [`engine::scan_partitions`] (the table's
    /// plan is reused for the first attempt), with the default placement and settings.
    pub fn into_spec(self) -> engine::ScanSpec {
        let path = self.table.path.clone();
        let name = self.table.table.name.clone();
        engine::ScanSpec::query(path, name, self.query).with_table_plan(self.table)
    }
}

/// Parses `sql`, opens its table in `db` and plans it: the scan specification to run with
/// [`engine::scan`].
pub fn scan_spec(db: &Path, sql: &str) -> Result<engine::ScanSpec, SqlError> {
    Ok(plan_query(db, sql)?.into_spec())
}

/// Parses `sql`, opens its table in `db` and plans the query; its uncorrelated subqueries
/// run first, each as a parallel scan with the default placement and settings, in the same
/// snapshot of the file ([`plan_query_running`] with [`DefaultScans`]).
pub fn plan_query(db: &Path, sql: &str) -> Result<PlannedQuery, SqlError> {
    let scans = DefaultScans::new(partitioner::PageFile::open(db)?);
    plan_query_running(sql, &scans)
}

/// Parses `sql` and plans it over the table of that name in several files (a table spread
/// over them): against the first file that has the table, its columns extended by those only
/// later files have (in order of first appearance; matched by name, case-insensitively), so
/// that `*` and every column of any file can be named. With `skip_missing`, files without the
/// table are passed over; else the first is an error naming it. Whether a file's columns fit
/// (the same affinity, rowid and generation) is checked when the file is read
/// ([`engine::query::bind_to_file`]).
pub fn plan_query_files(
    files: &[std::path::PathBuf],
    sql: &str,
    skip_missing: bool,
) -> Result<PlannedQuery, SqlError> {
    plan_query_in(
        sql,
        |name| union_table(files, name, skip_missing),
        Order::Files,
    )
}

/// The plan of table `name` in the first of `files` that has it, its columns extended by
/// those only later files have (in order of first appearance; matched by name,
/// case-insensitively): the table a query over several files is planned against. With
/// `skip_missing`, files without the table are passed over; else the first is an error naming
/// it.
pub fn union_table(
    files: &[std::path::PathBuf],
    name: &str,
    skip_missing: bool,
) -> partitioner::Result<TablePlan> {
    let mut base: Option<TablePlan> = None;
    let mut first_missing = None;
    for f in files {
        let def = match &base {
            None => match TablePlan::open_for_scan(f, name) {
                Ok(plan) => {
                    base = Some(plan);
                    continue;
                }
                Err(e) => Err(e),
            },
            Some(_) => partitioner::table_definition(f, name),
        };
        let def = match def {
            Ok(def) => def,
            Err(e @ partitioner::Error::NoSuchTable { .. }) => {
                if !skip_missing {
                    return Err(e);
                }
                first_missing.get_or_insert(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let Some(base) = base.as_mut() else { continue };
        for column in def.columns {
            let known = base
                .definition
                .columns
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(&column.name));
            if known {
                continue;
            }
            if column.rowid_alias || column.generated.is_some() {
                return Err(partitioner::Error::Invalid {
                    path: f.clone(),
                    what: format!(
                        "column {:?} of table {name:?} is {} here, and earlier files have \
                     no such column",
                        column.name,
                        if column.rowid_alias {
                            "the INTEGER PRIMARY KEY (the rowid)"
                        } else {
                            "a generated column"
                        }
                    ),
                });
            }
            base.definition.columns.push(column);
        }
    }
    match (base, first_missing) {
        (Some(base), _) => Ok(base),
        (None, Some(e)) => Err(e),
        (None, None) => Err(partitioner::Error::Invalid {
            path: std::path::PathBuf::new(),
            what: "no database file".into(),
        }),
    }
}

/// [`plan_query`] with the table opened by `open_table` (given the table's name as the query
/// writes it): a caller that holds a snapshot of the file plans in it
/// ([`TablePlan::open_for_scan_in`]), so that several queries read one committed state.
pub fn plan_query_with(
    sql: &str,
    open_table: impl FnOnce(&str) -> partitioner::Result<TablePlan>,
) -> Result<PlannedQuery, SqlError> {
    plan_query_in(sql, open_table, Order::Sqlite)
}

/// [`plan_query_with`] for a caller that takes the rows in any order (a scan under
/// DataFusion): the rows come in rowid order whatever index SQLite would read the table
/// through, without asking SQLite's planner.
pub fn plan_unordered_with(
    sql: &str,
    open_table: impl FnOnce(&str) -> partitioner::Result<TablePlan>,
) -> Result<PlannedQuery, SqlError> {
    plan_query_in(sql, open_table, Order::Scan)
}

/// [`plan_unordered_with`] over a table spread over several files, whose hidden `_file`
/// column (each row's file) the query may name: the engine binds it (`bind_file_column`)
/// to each file's path as the file is reached, and a file its `WHERE` excludes that way is
/// never opened.
pub fn plan_files_unordered_with(
    sql: &str,
    open_table: impl FnOnce(&str) -> partitioner::Result<TablePlan>,
) -> Result<PlannedQuery, SqlError> {
    plan_query_in(sql, open_table, Order::ScanFiles)
}

/// [`plan_query_with`] in `order`.
fn plan_query_in(
    sql: &str,
    open_table: impl FnOnce(&str) -> partitioner::Result<TablePlan>,
    order: Order,
) -> Result<PlannedQuery, SqlError> {
    plan_statement(sql, open_table, order, None)
}

/// Parses `sql` and plans it over the tables `runner` opens, running its uncorrelated
/// subqueries (`(SELECT ...)`, `IN (SELECT ...)`, `EXISTS (SELECT ...)`, over any table of
/// the file) with `runner` while it plans ([`crate::subquery`]): the statement's plan is over
/// their results. Rows in SQLite's order, as [`plan_query`].
pub fn plan_query_running(
    sql: &str,
    runner: &dyn SubqueryRunner,
) -> Result<PlannedQuery, SqlError> {
    plan_query_running_in(sql, runner, false)
}

/// [`plan_query_running`], or for a caller that takes the rows in any order (`any_order`: a
/// statement that only counts them) in rowid order whatever index SQLite would read the table
/// through, as [`plan_unordered_with`].
pub(crate) fn plan_query_running_in(
    sql: &str,
    runner: &dyn SubqueryRunner,
    any_order: bool,
) -> Result<PlannedQuery, SqlError> {
    let order = if any_order {
        Order::Scan
    } else {
        Order::Sqlite
    };
    plan_statement(sql, |name| runner.open_table(name), order, Some(runner))
}

/// Parses and plans `sql`, its subqueries run by `runner` (refused without one).
fn plan_statement(
    sql: &str,
    open_table: impl FnOnce(&str) -> partitioner::Result<TablePlan>,
    order: Order,
    runner: Option<&dyn SubqueryRunner>,
) -> Result<PlannedQuery, SqlError> {
    let statements = crate::dialect::parse(sql).map_err(|e| {
        // Statements the parser does not know still get a refusal that names them.
        let first = sql
            .trim_start()
            .split(|c: char| !c.is_ascii_alphabetic())
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        match first.as_str() {
            "PRAGMA" | "ATTACH" | "DETACH" | "VACUUM" | "REINDEX" | "ANALYZE" => {
                SqlError::Unsupported(first)
            }
            "INSERT" | "UPDATE" | "DELETE" | "REPLACE" | "CREATE" | "DROP" | "ALTER" => {
                SqlError::Unsupported("writes (corescan only reads: use SELECT)".into())
            }
            // `sqlparser` 0.64 parses no EXCLUDE in a window frame.
            _ if sql
                .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .any(|w| w.eq_ignore_ascii_case("EXCLUDE"))
                && sql.to_ascii_uppercase().contains("OVER") =>
            {
                SqlError::Unsupported("EXCLUDE in a window frame".into())
            }
            _ => SqlError::Syntax(e.to_string()),
        }
    })?;
    let statement = match statements.as_slice() {
        [one] => one,
        [] => return invalid("no SQL statement"),
        _ => return unsupported("more than one statement"),
    };
    let query = match statement {
        Statement::Query(q) => q,
        Statement::Insert(_)
        | Statement::Update(_)
        | Statement::Delete(_)
        | Statement::Merge(_)
        | Statement::CreateTable(_)
        | Statement::CreateIndex(_)
        | Statement::CreateView(_)
        | Statement::Drop { .. }
        | Statement::AlterTable(_)
        | Statement::Truncate(_) => return unsupported("writes (corescan only reads: use SELECT)"),
        Statement::AttachDatabase { .. } | Statement::DetachDuckDBDatabase { .. } => {
            return unsupported("ATTACH")
        }
        Statement::Pragma { .. } => return unsupported("PRAGMA"),
        Statement::Explain { .. } | Statement::ExplainTable { .. } => {
            return unsupported("EXPLAIN (see corescan explain)")
        }
        _ => return unsupported("statements other than SELECT"),
    };
    // WITH and subqueries in FROM: flattened into one query over the table.
    let mut open_table = Some(open_table);
    let (flat, opened) = if crate::flatten::applies(query) {
        let (flat, table) = flattened(query, sql, |name| {
            open_table.take().expect("the table is opened once")(name)
        })?;
        (Some(flat), Some(table))
    } else {
        (None, None)
    };
    let query: &ast::Query = flat.as_ref().map_or(query, |f| &f.query);
    let (select, name, alias) = one_table(query)?;
    let subqueries = match runner {
        Some(runner) if has_subquery(query) => Some(Subqueries::new(runner, plan_subquery, sql)),
        _ => None,
    };
    let table = match opened {
        Some(t) => t,
        None => open_table.take().expect("the table is opened once")(&name)?,
    };
    if let (Some(flat), true) = (&flat, !matches!(order, Order::Scan | Order::ScanFiles)) {
        let others = subqueries
            .as_ref()
            .map(Subqueries::tables)
            .unwrap_or_default();
        sqlite_flattens(flat, &table, sql, &others)?;
    }
    // The constants SQLite computes when the statement starts (not for DataFusion's scans,
    // whose statement is not SQLite's).
    let init = match order {
        Order::Scan | Order::ScanFiles => Vec::new(),
        _ => init_constants(query),
    };
    // The first groups of an index under a WHERE: run, and planned over more runs of keys
    // while they hold fewer groups than the LIMIT and the index has more
    // ([`GroupsProbe::grow`]); a failing run (an evaluation error in rows SQLite may not
    // read), or growth past what a table scan costs, plans the table scan.
    let mut groups_factor = u64::from(runner.is_some());
    let planned = loop {
        let planned = plan_select(
            &table,
            alias.as_deref(),
            select,
            query,
            sql,
            sql,
            order,
            subqueries.as_ref(),
            &init,
            flat.as_ref(),
            groups_factor,
        )?;
        let (Some(probe), Some(runner)) = (planned.groups_probe, runner) else {
            break planned;
        };
        // Run without the OFFSET (its groups counted too): the groups the runs hold, up to
        // those the LIMIT and the OFFSET want.
        let mut counting = planned.query.clone();
        counting.limit = Some(probe.wanted);
        counting.offset = 0;
        let rows = runner.run(&table, counting)?;
        groups_factor = match rows {
            Ok(rows) if rows.len() as u64 >= probe.wanted || probe.exhausted => break planned,
            Ok(rows) => match probe.grow(rows.len() as u64, rowid_reads_cap(&table)) {
                Some(times) => groups_factor.saturating_mul(times),
                None => 0,
            },
            Err(_) => 0,
        };
    };
    let table = planned.scanned(table)?;
    Ok(PlannedQuery {
        table,
        query: planned.query,
        index_plan: planned.index_plan,
        ran_subqueries: subqueries.is_some(),
    })
}

/// `query` (which has a `WITH` or a subquery in `FROM`) flattened into one query over its
/// table ([`crate::flatten`]), with the table `open_table` opened.
fn flattened(
    query: &ast::Query,
    sql: &str,
    open_table: impl FnOnce(&str) -> partitioner::Result<TablePlan>,
) -> Result<(crate::flatten::Flat, TablePlan), SqlError> {
    let inlined = crate::flatten::inline_ctes(query)?;
    let mut innermost = &inlined;
    while let SetExpr::Select(s) = innermost.body.as_ref() {
        match s.from.as_slice() {
            [one] if one.joins.is_empty() => match &one.relation {
                TableFactor::Derived { subquery, .. } => innermost = subquery,
                _ => break,
            },
            _ => break,
        }
    }
    let (_, name, _) = one_table(innermost)?;
    let table = open_table(&name)?;
    let star: Vec<String> = table
        .definition
        .columns
        .iter()
        .map(|c| c.name.clone())
        .collect();
    Ok((crate::flatten::flatten(&inlined, sql, &star)?, table))
}

/// Whether `q` calls a window function anywhere.
fn has_window_call(q: &ast::Query) -> bool {
    use std::ops::ControlFlow;
    ast::visit_expressions(q, |e| match e {
        ast::Expr::Function(f) if f.over.is_some() => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// Refuses a statement whose subquery in `FROM` SQLite does not flatten (it runs it as a
/// co-routine or materializes it): its rows' order and the rows a `LIMIT` keeps are then the
/// subquery's, which corescan's flattened query does not follow. But two co-routines are
/// followed: a subquery that aggregates (`flat.grouped`; SQLite never flattens one) in a
/// statement without window functions, and one that does not under window functions (which
/// stop SQLite's flattener): the co-routine hands the rows over in its loop's order, the
/// loop corescan follows for the window stage's ties, as SQLite's plan of the statement
/// names it.
fn sqlite_flattens(
    flat: &crate::flatten::Flat,
    table: &TablePlan,
    sql: &str,
    others: &[TablePlan],
) -> Result<(), SqlError> {
    if flat.grouped != has_window_call(&flat.query) {
        return Ok(());
    }
    let choice = ask(table, sql, others).map_err(|e| {
        SqlError::Unsupported(format!(
            "a subquery in FROM: SQLite's plan could not be asked ({e})"
        ))
    })?;
    match choice
        .lines
        .iter()
        .find(|l| l.contains("CO-ROUTINE") || l.contains("MATERIALIZE"))
    {
        Some(line) => unsupported(format!(
            "a subquery in FROM that SQLite does not flatten ({}; `corescan sql` plans it \
             with DataFusion)",
            line.trim()
        )),
        None => Ok(()),
    }
}

/// The refusal of `WITH`.
const WITH_REFUSED: &str = "WITH where it is not flattened (a common table expression \
                            inside a subquery; `corescan sql` plans it with DataFusion)";

/// A subquery of a statement planned as a query of its own ([`crate::subquery`]'s planning
/// function).
fn plan_subquery(q: &ast::Query, subs: &Subqueries<'_>) -> Result<PlannedSubquery, SqlError> {
    // SQLite plans the subquery as it runs it (under its LIMIT 1, say).
    let planner_sql = q.to_string();
    let (flat, opened) = if crate::flatten::applies(q) {
        let (flat, table) = flattened(q, subs.sql, |name| subs.open_table(name))?;
        sqlite_flattens(&flat, &table, &planner_sql, &subs.tables())?;
        (Some(flat), Some(table))
    } else {
        (None, None)
    };
    let q = flat.as_ref().map_or(q, |f| &f.query);
    let (select, name, alias) = one_table(q)?;
    let table = match opened {
        Some(t) => t,
        None => subs.open_table(&name)?,
    };
    let planned = plan_select(
        &table,
        alias.as_deref(),
        select,
        q,
        subs.sql,
        &planner_sql,
        Order::Sqlite,
        Some(subs),
        &[],
        flat.as_ref(),
        0,
    )?;
    let table = planned.scanned(table)?;
    // Sorted unless the loop delivers the ORDER BY (the scan in rowid order: no ORDER BY
    // left; an index: no sorter in SQLite's plan).
    let sorted = !planned.query.order_by.is_empty()
        && planned.index_plan.as_ref().is_none_or(|p| {
            p.sqlite
                .iter()
                .any(|l| l.contains("TEMP B-TREE FOR") && l.contains("ORDER BY"))
        });
    Ok(PlannedSubquery {
        table,
        sorted,
        columns: planned.query.names.len(),
        query: planned.query,
        affinity: planned.first.as_ref().and_then(|t| t.affinity),
        collation: planned.first.as_ref().and_then(|t| t.collation),
        seek_rows: planned
            .index_plan
            .and_then(|p| p.seek_rows.map(|n| (n, p.sqlite.join("; ")))),
    })
}

/// The `SELECT` of `query` and the one table it reads (its name and alias), or the refusal
/// of what a single-table scan does not answer.
fn one_table(query: &ast::Query) -> Result<(&ast::Select, String, Option<String>), SqlError> {
    if query.with.is_some() {
        return unsupported(WITH_REFUSED);
    }
    if query.fetch.is_some() || !query.locks.is_empty() || query.for_clause.is_some() {
        return unsupported("FETCH, FOR UPDATE or FOR clauses");
    }
    let select = match query.body.as_ref() {
        SetExpr::Select(s) => s,
        SetExpr::SetOperation { .. } => {
            return unsupported("compound SELECT (UNION, INTERSECT, EXCEPT)")
        }
        SetExpr::Query(_) => return unsupported("subqueries"),
        SetExpr::Values(_) => return unsupported("VALUES"),
        _ => return unsupported("statements other than SELECT"),
    };
    if let Some(ast::Distinct::On(_)) = &select.distinct {
        return unsupported("DISTINCT ON");
    }
    if select.top.is_some() || select.into.is_some() || select.prewhere.is_some() {
        return unsupported("TOP, INTO or PREWHERE");
    }
    if select.qualify.is_some() {
        return unsupported("QUALIFY");
    }
    if !select.lateral_views.is_empty()
        || !select.cluster_by.is_empty()
        || !select.distribute_by.is_empty()
        || !select.sort_by.is_empty()
        || !select.connect_by.is_empty()
    {
        return unsupported("LATERAL VIEW, CLUSTER BY, SORT BY or CONNECT BY");
    }
    let from = match select.from.as_slice() {
        [] => return unsupported("SELECT without FROM (corescan scans a table)"),
        [one] if one.joins.is_empty() => one,
        _ => {
            return unsupported(
                "joins (one table only; `corescan sql` plans joins with DataFusion)",
            )
        }
    };
    let (name, alias) = match &from.relation {
        TableFactor::Table {
            name, alias, args, ..
        } => {
            if args.is_some() {
                return unsupported("table-valued functions");
            }
            let parts: Vec<String> = name
                .0
                .iter()
                .map(|p| match p {
                    ast::ObjectNamePart::Identifier(i) => i.value.clone(),
                    other => other.to_string(),
                })
                .collect();
            let table = match parts.as_slice() {
                [t] => t.clone(),
                [s, t] if s.eq_ignore_ascii_case("main") => t.clone(),
                _ => return unsupported(format!("table {name} in another schema (ATTACH)")),
            };
            (table, alias.as_ref().map(|a| a.name.value.clone()))
        }
        TableFactor::Derived { .. } => {
            return unsupported("subqueries in FROM (`corescan sql` plans them with DataFusion)")
        }
        _ => return unsupported("FROM clauses other than one table"),
    };
    Ok((select, name, alias))
}

/// Plans table `name` of `db` for a scan of `query` (planned on an earlier plan of the same
/// table): what [`plan_query`] does again when a database read without SQLite's locks changed
/// and the scan is retried, for a plan that does not [`PlannedQuery::replans`].
pub fn plan_table(db: &Path, name: &str, query: &QueryPlan) -> partitioner::Result<TablePlan> {
    engine::replan(db, name, query)
}

/// One output column before resolution.
struct Output<'q> {
    expr: &'q ast::Expr,
    alias: Option<String>,
    name: String,
}

/// One `SELECT` planned: the query, SQLite's plan of it when the table has indexes, and its
/// first result column as resolved (a subquery's affinity and collation).
struct SelectPlan {
    query: QueryPlan,
    index_plan: Option<IndexPlan>,
    /// The first groups of an index read under a `WHERE` ([`GroupsProbe`]).
    groups_probe: Option<GroupsProbe>,
    first: Option<Typed>,
    /// A lone `min(rowid)` (`Some(false)`) or `max(rowid)` (`Some(true)`): SQLite reads the
    /// table's first or last entry (`Rewind`, `Last`), and only the first or last leaf, which
    /// holds it, need be scanned ([`edge_leaf`]).
    edge: Option<bool>,
    /// The covering index scanned in place of the table: the plan's columns are positions in
    /// its records ([`crate::covering`]).
    index_scan: Option<CoveringScan>,
}

/// A covering index scanned in place of the table.
struct CoveringScan {
    /// The index.
    name: String,
    /// The fields of each entry.
    fields: usize,
    /// The ranges of its first key column the `WHERE` bounds, if it bounds it.
    range: Option<(SeekTarget, KeyRanges)>,
}

impl SelectPlan {
    /// The plan of the table the query scans: the covering index in place of the table, or
    /// the table narrowed to the rowids the query admits (and to its first or last leaf).
    fn scanned(&self, table: TablePlan) -> Result<TablePlan, SqlError> {
        match &self.index_scan {
            Some(CoveringScan {
                name,
                fields,
                range: None,
            }) => Ok(table.index_scan(name, *fields, None)?),
            Some(CoveringScan {
                name,
                fields,
                range: Some((target, ranges)),
            }) => {
                let place = range_walk_place(target, ranges.clone());
                Ok(table.index_scan(name, *fields, Some(&place))?)
            }
            None => Ok(edge_leaf(engine::restrict(table, &self.query)?, self.edge)?),
        }
    }
}

/// A query planned to read the entries of an index's first runs of keys under a `WHERE`
/// ([`first_groups`]): complete when the runs hold the groups of the `LIMIT` and the
/// `OFFSET` (`wanted`: they are the first in the index's order), or when the runs were all
/// the index has (`exhausted`); otherwise [`plan_statement`] plans it again over more runs.
#[derive(Debug, Clone, Copy)]
struct GroupsProbe {
    /// The groups the `LIMIT` and the `OFFSET` take.
    wanted: u64,
    /// The index entries read (the rows of the runs).
    entries: u64,
    exhausted: bool,
}

impl GroupsProbe {
    /// How many times as many runs to read after runs that held `held` groups (fewer than
    /// wanted): the entries the wanted groups would take at the rate these held them, with
    /// a quarter more, or as many entries per group as these were when they held none.
    /// `None` when that is more than `cap` entries ([`rowid_reads_cap`]): the table scan is
    /// then cheaper than runs that grow towards it.
    fn grow(&self, held: u64, cap: u64) -> Option<u64> {
        let entries = self.entries.max(1);
        let projected = match held {
            0 => entries.saturating_mul(self.wanted),
            held => entries.saturating_mul(self.wanted).saturating_mul(5) / (held * 4),
        };
        (projected <= cap).then(|| projected.div_ceil(entries).max(2))
    }
}

/// The most rows by rowid worth reading instead of scanning `table`: a sixteenth of the
/// file's pages (each row read by rowid is a leaf read out of order, the scan reads every
/// leaf in order on every core; measured: 7,500 rows by rowid took about two thirds of the
/// time of a 5M-row table's scan), but at least 4,096 and at most [`MAX_SEEK_ROWS`].
fn rowid_reads_cap(table: &TablePlan) -> u64 {
    (u64::from(table.header.page_count) / 16).clamp(4_096, MAX_SEEK_ROWS)
}

/// `table` cut down to its first leaf (`last` false) or its last, as [`SelectPlan::edge`]
/// asks, else as it is.
fn edge_leaf(table: TablePlan, edge: Option<bool>) -> partitioner::Result<TablePlan> {
    match edge {
        // The subtrees that can hold the smallest or largest rowid: the leftmost or the
        // rightmost path.
        Some(last) => {
            let k = if last { i64::MAX } else { i64::MIN };
            table.restrict_to_rowids(k, k)
        }
        None => Ok(table),
    }
}

/// Whether `plan` is a lone `min()` (`Some(false)`) or `max()` (`Some(true)`) of the rowid
/// in `rowid` over the whole table, whose row is the table's first or last.
fn rowid_edge(plan: &QueryPlan, rowid: Option<&Expr>) -> Option<bool> {
    let Shape::Groups {
        keys, aggregates, ..
    } = &plan.shape
    else {
        return None;
    };
    let [spec] = aggregates.as_slice() else {
        return None;
    };
    let lone = keys.is_empty()
        && plan.filter.is_none()
        && plan.windows.is_none()
        && !spec.distinct
        && spec.filter.is_none()
        && spec.order_by.is_empty()
        && rowid.is_some()
        && spec.arg.as_ref() == rowid;
    match spec.func {
        AggFunc::Min if lone => Some(false),
        AggFunc::Max if lone => Some(true),
        _ => None,
    }
}

/// Plans `select` (of `query`) over `table`: `sql` is the statement's text (which parser
/// locations index), `planner_sql` the text SQLite's planner is asked about for this query,
/// `subqueries` what runs its subqueries (refused without).
#[allow(clippy::too_many_arguments)]
fn plan_select(
    table: &TablePlan,
    alias: Option<&str>,
    select: &ast::Select,
    query: &ast::Query,
    sql: &str,
    planner_sql: &str,
    order: Order,
    subqueries: Option<&Subqueries<'_>>,
    init: &[ast::Expr],
    flat: Option<&crate::flatten::Flat>,
    groups_factor: u64,
) -> Result<SelectPlan, SqlError> {
    let coroutine_groups = flat.is_some_and(|f| f.grouped);
    let mut r = Resolver::new(table, alias, sql);
    r.files = matches!(order, Order::Files | Order::ScanFiles);
    r.subqueries = subqueries;
    // The output list, with `*` expanded.
    let star_exprs: Vec<ast::Expr> = r
        .star()
        .into_iter()
        .map(|c| ast::Expr::Identifier(ast::Ident::with_quote('"', c)))
        .collect();
    let mut outputs: Vec<Output<'_>> = Vec::new();
    let texts = item_texts(sql, select);
    for (k, item) in select.projection.iter().enumerate() {
        match item {
            SelectItem::UnnamedExpr(e) => outputs.push(Output {
                expr: e,
                alias: None,
                name: r.column_name(e).unwrap_or_else(|| {
                    texts
                        .as_ref()
                        .map_or_else(|| e.to_string(), |t| t[k].clone())
                }),
            }),
            SelectItem::ExprWithAlias { expr, alias } => outputs.push(Output {
                expr,
                alias: Some(alias.value.clone()),
                name: alias.value.clone(),
            }),
            SelectItem::Wildcard(opts) | SelectItem::QualifiedWildcard(_, opts) => {
                if opts.opt_exclude.is_some()
                    || opts.opt_except.is_some()
                    || opts.opt_replace.is_some()
                    || opts.opt_rename.is_some()
                    || opts.opt_ilike.is_some()
                {
                    return unsupported("* with EXCLUDE, EXCEPT, REPLACE or RENAME");
                }
                if let SelectItem::QualifiedWildcard(kind, _) = item {
                    crate::flatten::wildcard_table(kind, alias.unwrap_or(&table.table.name))?;
                }
                // SQLite names the columns `*` expands to as an `AS` names them
                // (ENAME_NAME): an ORDER BY name finds them in the result list's order,
                // before a later alias of the same name (`SELECT *, gs AS r ... ORDER BY r`
                // is the column r).
                for (e, n) in star_exprs.iter().zip(r.star()) {
                    outputs.push(Output {
                        expr: e,
                        alias: Some(n.clone()),
                        name: n,
                    });
                }
            }
            other => return unsupported(format!("the select item {other}")),
        }
    }

    // The names SQLite gives a flattened subquery's columns (names, not aliases).
    if let Some(names) = flat.map(|f| &f.names).filter(|n| n.len() == outputs.len()) {
        for (o, n) in outputs.iter_mut().zip(names) {
            if let Some(n) = n {
                o.name = n.clone();
            }
        }
    }

    // ORDER BY and GROUP BY terms by alias or position.
    // A position may carry a COLLATE, which replaces the result column's own collation.
    let by_alias_or_position = |e: &ast::Expr,
                                what: &str,
                                i: usize|
     -> Result<Option<(usize, Option<Collation>)>, SqlError> {
        if let Some((k, collate)) = position_term(e, sql) {
            if k < 1 || k as usize > outputs.len() {
                return invalid(format!(
                    "{} {what} term out of range - should be between 1 and {}",
                    ordinal(i + 1),
                    outputs.len()
                ));
            }
            let collation = collate.map(collation_named).transpose()?;
            return Ok(Some((k as usize - 1, collation)));
        }
        // An alias, also in parentheses and under COLLATE: `ORDER BY (i)` with an alias `i`
        // that is also a column is the alias.
        if let (ast::Expr::Identifier(id), collate) = skip_collate(e) {
            if let Some(p) = outputs.iter().position(|o| {
                o.alias
                    .as_deref()
                    .is_some_and(|a| a.eq_ignore_ascii_case(&id.value))
            }) {
                let collation = collate.map(collation_named).transpose()?;
                return Ok(Some((p, collation)));
            }
        }
        Ok(None)
    };

    r.aliases = outputs
        .iter()
        .filter_map(|o| o.alias.clone().map(|a| (a, o.expr.clone())))
        .collect();
    r.aliases_enabled = true;
    let (constant_terms, filter) = match &select.selection {
        Some(w) => where_terms(&mut r, w)?,
        None => (Vec::new(), None),
    };

    let group_exprs: Vec<&ast::Expr> = match &select.group_by {
        ast::GroupByExpr::Expressions(exprs, modifiers) => {
            if !modifiers.is_empty() {
                return unsupported("GROUP BY modifiers (ROLLUP, CUBE, ...)");
            }
            exprs.iter().collect()
        }
        ast::GroupByExpr::All(_) => return unsupported("GROUP BY ALL"),
    };
    let order_terms: Vec<&ast::OrderByExpr> = match &query.order_by {
        None => Vec::new(),
        Some(o) => match &o.kind {
            ast::OrderByKind::Expressions(v) => v.iter().collect(),
            ast::OrderByKind::All(_) => return unsupported("ORDER BY ALL"),
        },
    };
    let grouped = !group_exprs.is_empty()
        || select.having.is_some()
        || outputs.iter().any(|o| has_aggregate(o.expr));
    if !grouped && order_terms.iter().any(|o| has_aggregate(&o.expr)) {
        // Not an aggregate query to SQLite (`SF_Aggregate` comes from the result columns):
        // its sorter fails with `misuse of aggregate: sum()` where it codes the term, and a
        // term its loop delivers is never coded (`ORDER BY id, sum(k)` answers every row).
        return unsupported(
            "an aggregate function in the ORDER BY of a query without aggregates (SQLite \
             fails it with `misuse of aggregate` unless its loop delivers the order)",
        );
    }
    // SELECT DISTINCT: groups keyed by the output columns, in the order of their first rows.
    let distinct = matches!(select.distinct, Some(ast::Distinct::Distinct));
    if distinct && grouped {
        return unsupported("SELECT DISTINCT with GROUP BY or aggregates");
    }
    let grouped = grouped || distinct;
    let windowed = outputs.iter().any(|o| r.has_window(o.expr))
        || order_terms.iter().any(|o| r.has_window(&o.expr));
    if windowed && grouped && has_subquery(query) {
        // SQLite never takes two copies of an expression holding a subquery for the same
        // expression (sqlite3ExprCompare), so an aggregate with one that a window reads
        // (`rank() OVER (ORDER BY max(x) FILTER (WHERE x IN (SELECT ...)))`) is computed in
        // its sub-select apart from the result column's, and its rows come in an order
        // corescan does not model yet (the differential tester's table seeds
        // 13267366271447367240 and 4446134211579377219).
        return unsupported(
            "window functions over groups in a statement with a subquery (corescan query \
             computes windows over groups without subqueries)",
        );
    }
    if windowed && distinct {
        return unsupported(
            "window functions with SELECT DISTINCT (corescan query computes windows over a \
             table's rows or its groups)",
        );
    }

    // The group keys: SELECT DISTINCT's output columns, or the GROUP BY terms.
    let mut group_keys: Vec<Typed> = Vec::new();
    if distinct {
        // The keys are the output columns as written (aliases are not seen in them),
        // each under its own collation, as DISTINCT compares them.
        r.aliases_enabled = false;
        for o in &outputs {
            let t = r.resolve(o.expr, &mut Stage::Row, 0)?;
            group_keys.push(t);
        }
        r.aliases_enabled = true;
    }
    for (i, g) in group_exprs.iter().enumerate() {
        // A GROUP BY name is a column before it is an alias (the reverse of ORDER BY,
        // where `resolveAsName` looks at the result set first).
        let column =
            matches!(skip_collate(g).0, ast::Expr::Identifier(id) if r.names_a_column(&id.value));
        let by = if column {
            None
        } else {
            by_alias_or_position(g, "GROUP BY", i)?
        };
        let t = match by {
            Some((p, collation)) => {
                if has_aggregate(outputs[p].expr) {
                    return invalid("aggregate functions are not allowed in the GROUP BY clause");
                }
                r.resolve(outputs[p].expr, &mut Stage::Row, 0)?
                    .collated(collation)
            }
            None => r.resolve(g, &mut Stage::Row, 0)?,
        };
        group_keys.push(t);
    }

    let mut backward = false;
    let mut window_stage: Option<(WindowStage, bool)> = None;
    let first: Option<Typed>;
    let (mut shape, order_by, written) = if windowed {
        // The scan returns the window stage's inputs in SQLite's loop order; the stage does
        // the rest on the coordinator.
        let mut ctx = WindowContext::with_named(named_windows(select)?);
        if grouped {
            // SQLite's rewrite: the windows read the rows of a grouped sub-select.
            ctx.group = Some(GroupContext {
                keys: group_keys.clone(),
                aggregates: Vec::new(),
            });
        }
        let mut resolved = Vec::with_capacity(outputs.len());
        r.aliases_enabled = false;
        for o in &outputs {
            resolved.push(r.resolve(o.expr, &mut Stage::Window(&mut ctx), 0)?);
        }
        r.aliases_enabled = true;
        let mut order_by = Vec::new();
        // Result columns an ORDER BY term names (by alias, position or as the same
        // expression): SQLite's sorter holds the term's copy of the column and shows it.
        let mut shown: Vec<(usize, usize)> = Vec::new();
        for (i, term) in order_terms.iter().enumerate() {
            let named = match by_alias_or_position(&term.expr, "ORDER BY", i)? {
                Some(by) => Some(by),
                None => outputs
                    .iter()
                    .position(|o| *o.expr == term.expr)
                    .map(|p| (p, None)),
            };
            let t = match named {
                // SQLite resolves the term to a copy of the result column, whose windows
                // are windows of their own.
                Some((p, collation)) => {
                    shown.push((p, i));
                    r.aliases_enabled = false;
                    ctx.copying = true;
                    let t = r.resolve(outputs[p].expr, &mut Stage::Window(&mut ctx), 0);
                    ctx.copying = false;
                    r.aliases_enabled = true;
                    t?.collated(collation)
                }
                None => r.resolve(&term.expr, &mut Stage::Window(&mut ctx), 0)?,
            };
            order_by.push(sort_key(term, t)?);
        }
        first = resolved.first().cloned();
        let having = match (&select.having, ctx.group.as_mut()) {
            (Some(h), Some(group)) => Some(r.resolve(h, &mut Stage::Group(group), 0)?.expr),
            _ => None,
        };
        let inputs = ctx.inputs.len();
        let (passes, remap) = ctx.finish();
        // Over groups, the sub-select is ordered by the innermost window's partition and
        // ORDER BY (the first pass): a grouped query's ORDER BY, so its groups come in the
        // order SQLite's grouped sub-select gives them, ties included; the stage's stable
        // sort of the first pass then keeps it.
        let group_order: Vec<SortKey> = match (&ctx.group, passes.first()) {
            (Some(_), Some(pass)) => pass
                .partition
                .iter()
                .map(|&(slot, collation)| SortKey {
                    expr: ctx.inputs[slot].clone(),
                    descending: false,
                    nulls_first: true,
                    collation,
                })
                .chain(pass.order.iter().map(|k| SortKey {
                    expr: match &k.expr {
                        Expr::Column(slot) => ctx.inputs[*slot].clone(),
                        other => other.clone(),
                    },
                    ..k.clone()
                }))
                .collect(),
            _ => Vec::new(),
        };
        let mut outs: Vec<Expr> = resolved.into_iter().map(|t| t.expr).collect();
        for e in &mut outs {
            renumber_results(e, inputs, &remap);
        }
        for k in &mut order_by {
            renumber_results(&mut k.expr, inputs, &remap);
        }
        for &(p, i) in &shown {
            outs[p] = order_by[i].expr.clone();
        }
        window_stage = Some((
            WindowStage {
                passes,
                inputs,
                outputs: outs,
                order_by,
                limit: None,
                offset: 0,
            },
            ctx.fallible_outside,
        ));
        match ctx.group {
            Some(group) => (
                Shape::Groups {
                    keys: group
                        .keys
                        .iter()
                        .map(|k| (k.expr.clone(), k.collation()))
                        .collect(),
                    aggregates: group.aggregates,
                    having,
                    outputs: ctx.inputs,
                },
                group_order.clone(),
                group_order,
            ),
            None => (
                Shape::Rows {
                    outputs: ctx.inputs,
                },
                Vec::new(),
                Vec::new(),
            ),
        }
    } else if !grouped {
        let mut resolved = Vec::with_capacity(outputs.len());
        r.aliases_enabled = false;
        for o in &outputs {
            resolved.push(r.resolve(o.expr, &mut Stage::Row, 0)?);
        }
        r.aliases_enabled = true;
        let mut order_by = Vec::new();
        for (i, term) in order_terms.iter().enumerate() {
            let t = match by_alias_or_position(&term.expr, "ORDER BY", i)? {
                Some((p, collation)) => resolved[p].clone().collated(collation),
                None => r.resolve(&term.expr, &mut Stage::Row, 0)?,
            };
            order_by.push(sort_key(term, t)?);
        }
        first = resolved.first().cloned();
        let written = order_by.clone();
        if !order_terms.is_empty() {
            let mut written = Vec::with_capacity(order_terms.len());
            for (i, term) in order_terms.iter().enumerate() {
                written.push(match by_alias_or_position(&term.expr, "ORDER BY", i)? {
                    Some((p, _)) => outputs[p].expr,
                    None => &term.expr,
                });
            }
            // The scan's own order, forwards or backwards: no sorter, so the rows are the
            // plain scan's, with its LIMIT and OFFSET rules.
            let scan = if order != Order::Files {
                scan_order(&mut r, select.selection.as_ref(), &written, &order_by)?
            } else {
                None
            };
            match scan {
                Some(ScanOrder::Forward) => order_by.clear(),
                Some(ScanOrder::Backward) => {
                    order_by.clear();
                    backward = true;
                }
                None => {}
            }
        }
        (
            Shape::Rows {
                outputs: resolved.into_iter().map(|t| t.expr).collect(),
            },
            order_by,
            written,
        )
    } else {
        let mut ctx = GroupContext {
            keys: group_keys,
            aggregates: Vec::new(),
        };
        let mut resolved: Vec<Typed> = Vec::with_capacity(outputs.len());
        r.aliases_enabled = false;
        for o in &outputs {
            resolved.push(r.resolve(o.expr, &mut Stage::Group(&mut ctx), 0)?);
        }
        r.aliases_enabled = true;
        let having = match &select.having {
            Some(h) => Some(r.resolve(h, &mut Stage::Group(&mut ctx), 0)?.expr),
            None => None,
        };
        let mut order_by = Vec::new();
        for (i, term) in order_terms.iter().enumerate() {
            let t = match by_alias_or_position(&term.expr, "ORDER BY", i)? {
                // A copy of the result column, as SQLite's ORDER BY takes it: an aggregate in
                // it that holds a subquery is then an aggregate of its own (see
                // `Resolver::function`).
                Some((p, collation)) if holds_subquery(outputs[p].expr) => {
                    r.aliases_enabled = false;
                    let t = r.resolve(outputs[p].expr, &mut Stage::Group(&mut ctx), 0);
                    r.aliases_enabled = true;
                    t?.collated(collation)
                }
                Some((p, collation)) => resolved[p].clone().collated(collation),
                None if distinct => r
                    .resolve(&term.expr, &mut Stage::Group(&mut ctx), 0)
                    .map_err(|_| {
                        SqlError::Unsupported(format!(
                            "SELECT DISTINCT ordered by {}, which is not among its columns",
                            term.expr
                        ))
                    })?,
                None => r.resolve(&term.expr, &mut Stage::Group(&mut ctx), 0)?,
            };
            order_by.push(sort_key(term, t)?);
        }
        if distinct {
            // Without ORDER BY, or ordered by the rowid first (the scan's own order: no sort),
            // SQLite stops reading at the LIMIT: a row after it is never evaluated, so a key
            // or WHERE that can fail would fail only here.
            let fallible = |e: &Expr| e.may_fail();
            let rowid = r.rowid().ok().map(|t| t.expr);
            let scan_order = order_by.first().is_none_or(|k| {
                matches!(k.expr, Expr::Column(i)
                    if ctx.keys.get(i).map(|t| &t.expr) == rowid.as_ref())
            });
            if scan_order
                && query.limit_clause.is_some()
                && (ctx.keys.iter().any(|k| fallible(&k.expr))
                    || filter.as_ref().is_some_and(fallible))
            {
                return unsupported(
                    "SELECT DISTINCT with LIMIT and no ORDER BY (or ordered by the rowid) over \
                     expressions that can fail (SQLite stops at the LIMIT and never evaluates \
                     the later rows)",
                );
            }
        }
        first = resolved.first().cloned();
        let keys = ctx
            .keys
            .iter()
            .map(|k| (k.expr.clone(), k.collation()))
            .collect();
        (
            Shape::Groups {
                keys,
                aggregates: ctx.aggregates,
                having,
                outputs: resolved.into_iter().map(|t| t.expr).collect(),
            },
            order_by.clone(),
            order_by,
        )
    };

    let (limit, offset) = match &query.limit_clause {
        None => (None, 0),
        Some(ast::LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) => {
            if !limit_by.is_empty() {
                return unsupported("LIMIT BY");
            }
            let l = match limit {
                Some(e) => constant_int(&mut r, e, "LIMIT")?,
                None => None,
            };
            let o = match offset {
                Some(o) => constant_int(&mut r, &o.value, "OFFSET")?.unwrap_or(0),
                None => 0,
            };
            (l, o)
        }
        Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => (
            constant_int(&mut r, limit, "LIMIT")?,
            constant_int(&mut r, offset, "OFFSET")?.unwrap_or(0),
        ),
    };

    // A window query's LIMIT and OFFSET are its window stage's: its scan reads every row.
    let (limit, mut offset) = match window_stage.as_mut() {
        Some((stage, fallible)) => {
            if *fallible && limit.is_some() && !stage.order_by.is_empty() {
                // SQLite's sorter under a LIMIT drops rows before computing their columns.
                return unsupported(
                    "window functions with ORDER BY and LIMIT over output columns that can \
                     fail (SQLite's sorter never computes the columns of rows past the LIMIT)",
                );
            }
            stage.limit = limit;
            stage.offset = offset;
            (limit.filter(|&l| l == 0), 0)
        }
        None => (limit, offset),
    };
    // A LIMIT of 0 jumps past the scan (computeLimitRegisters): no row is evaluated, so no
    // expression can fail (run seed 1796143330066918182: a failing LIKE in an aggregate).
    let (constant_terms, mut filter) = if limit == Some(0) {
        (Vec::new(), Some(Expr::Literal(Value::Integer(0))))
    } else {
        (constant_terms, filter)
    };
    // The constants computed when the statement starts (`init_constants`), before the
    // WHERE's, LIMIT 0 or not: each a term that computes one and holds, `(c IS NULL) OR 1`.
    let mut constant_terms = constant_terms;
    for (k, e) in init.iter().enumerate() {
        let c = r.resolve(e, &mut Stage::Row, 0)?.expr;
        constant_terms.insert(k, Expr::computing(c));
    }
    // The last min()/max() decides which row shows a group's keys; with FILTER by the
    // "magnet" register's rules (`engine::query::key_row`), with DISTINCT a duplicate row
    // repeats the previous row's decision, which depends on every row before it: refused
    // where equal keys can show differently (the differential tester's table seeds
    // 4548612221040139265 and 9333272895976208442 had the FILTER case).
    if let Shape::Groups {
        keys, aggregates, ..
    } = &shape
    {
        let deciding = engine::query::key_row::deciding(&shape, written.iter().map(|k| &k.expr));
        if !keys.is_empty()
            && deciding.is_some_and(|a| aggregates[a].distinct)
            && order_sensitive(&r, keys, &[])
        {
            return unsupported(
                "min(DISTINCT) or max(DISTINCT) as the last min() or max() of a grouped query \
                 whose keys can hold equal values that differ (1 and 1.0, 'a' and 'A' under \
                 NOCASE): which row shows the keys then follows SQLite's duplicate rows, not \
                 modelled yet",
            );
        }
    }
    // Bare columns come from the row the deciding min()/max() chose; a DISTINCT one skips
    // its duplicate values without deciding (the row before decides again), and a FILTER
    // leaves the decision of the row before it in place: neither modelled.
    if let Shape::Groups {
        keys, aggregates, ..
    } = &shape
    {
        if engine::query::key_row::shows_columns(aggregates) {
            let deciding =
                engine::query::key_row::deciding(&shape, written.iter().map(|k| &k.expr));
            if deciding.is_some_and(|a| aggregates[a].distinct) {
                return unsupported(
                    "a bare column (outside GROUP BY and the aggregates) beside min(DISTINCT) \
                     or max(DISTINCT): which row shows it then follows SQLite's duplicate \
                     rows, not modelled yet",
                );
            }
            // Without GROUP BY there is no magnet register: a row the FILTER leaves out
            // repeats the decision of the row before it.
            if keys.is_empty() && minmax_with_filter(query) {
                return unsupported(
                    "a bare column beside min() or max() with FILTER and no GROUP BY: which row \
                     shows it then follows SQLite's FILTER rules, not modelled yet",
                );
            }
        }
    }
    // SQLite's loop: through an index, the rows come in its order.
    let mut index_plan = None;
    let mut groups_probe = None;
    let mut seek: Option<SeekTarget> = None;
    // The indexes of SQLite's MULTI-INDEX OR, and the rowid's slot.
    let mut or_seek: Option<(Vec<SeekTarget>, usize)> = None;
    // Whether SQLite sorts the groups itself (a temporary b-tree for the GROUP BY), not
    // taking them in the order an index or the rowid gives them.
    let mut groups_sorted = true;
    // Each group's rows ranked by their places in the index SQLite reads.
    let mut arrival = None;
    // The index entries (in key order) of the only rows read, when those are the first
    // groups' (`first_groups`): the places each group's rows are ranked by.
    let mut arrival_range: Option<Vec<i64>> = None;
    let written_directions: Vec<bool> = written.iter().map(|k| k.descending).collect();
    if order == Order::Sqlite {
        let others = subqueries.map(Subqueries::tables).unwrap_or_default();
        let rowid = r.rowid_if_read();
        let has_where = select.selection.is_some();
        first_row_shows(&mut shape, table, planner_sql, &others, has_where, rowid)?;
    }
    // Whether SQLite's loop reads the table itself (no index), in rowid order.
    let mut loops_table = false;
    // Whether the index `seek` targets lists every row (is not partial).
    let mut whole_index = false;
    // SQLite's loop over a covering index alone: scanned in place of the table when the
    // query reads nothing else (decided once the plan's columns are known).
    let mut covering: Option<Covering> = None;
    let (order_by, backward) = if order == Order::Sqlite {
        let others = subqueries.map(Subqueries::tables).unwrap_or_default();
        let chosen = choose(table, planner_sql, &others);
        loops_table = matches!(
            &chosen,
            Ok(None)
                | Ok(Some(SqliteChoice {
                    access: Access::Rowid { .. },
                    ..
                }))
        );
        // min(x) or max(x) from one entry of an index on x.
        let minmax = match &chosen {
            Ok(Some(choice)) => {
                minmax_row(&mut r, table, choice, &shape, select.selection.as_ref())?
            }
            _ => None,
        };
        // count(*) from an index's page headers.
        let counted = match &chosen {
            Ok(Some(choice)) if window_stage.is_none() && constant_terms.is_empty() => {
                counted_entries(&mut r, table, choice, &shape, select.selection.is_some())?
            }
            _ => None,
        };
        match chosen {
            // A table without an index: SQLite scans it, and may deliver a GROUP BY that
            // holds the rowid without sorting (asked of SQLite only then).
            Ok(None) => match &shape {
                Shape::Groups { keys, .. }
                    if !distinct
                        && r.rowid_if_read()
                            .is_some_and(|t| keys.iter().any(|(e, _)| *e == t)) =>
                {
                    match ask(table, planner_sql, &others) {
                        Ok(choice) => {
                            groups_sorted = choice.sorts_groups;
                            (rowid_group_order(&r, keys, &choice, order_by), backward)
                        }
                        Err(e) => {
                            return Err(SqlError::Unsupported(format!(
                                "the order of this query's groups: SQLite's plan could not be \
                             asked ({e})"
                            )))
                        }
                    }
                }
                _ => (order_by, backward),
            },
            Ok(Some(choice)) if window_stage.is_some() && !grouped => {
                // The windows' rows in the loop's order; the stage sorts them (stably).
                let followed = match choice.access {
                    Access::Rowid { backward: true } => (
                        vec![SortKey {
                            expr: r.rowid()?.expr,
                            descending: true,
                            nulls_first: false,
                            collation: Collation::Binary,
                        }],
                        false,
                    ),
                    _ => {
                        let followed = follow(
                            &mut r,
                            &choice,
                            &shape,
                            select.selection.as_ref(),
                            Vec::new(),
                            (order_by, backward),
                            (false, false),
                        )?;
                        debug_assert!(!followed.by_place, "a plain query has no groups");
                        (followed.order_by, followed.backward)
                    }
                };
                index_plan = Some(IndexPlan {
                    corescan: match &choice.access {
                        Access::Index { name, .. } => format!(
                            "the table in rowid order, rows ordered as index {name:?} gives \
                             them, then the windows"
                        ),
                        _ => "the table in rowid order, then the windows".to_string(),
                    },
                    sqlite: choice.lines,
                    seek_rows: None,
                });
                followed
            }
            Ok(Some(choice)) if counted.is_some() => {
                // No row is read: the count (the one aggregate, slot 0) is the index's.
                let counted = counted.expect("counted above");
                filter = Some(rowid_in(&mut r, &[])?);
                let count = i64::try_from(counted.count).map_err(|_| {
                    SqlError::Invalid(format!("an index counts {} entries", counted.count))
                })?;
                let mut order_by = order_by;
                put_count(&mut shape, &mut order_by, count);
                index_plan = Some(IndexPlan {
                    corescan: format!("the {count} {}, no table page read", counted.how),
                    sqlite: choice.lines.clone(),
                    seek_rows: None,
                });
                (order_by, backward)
            }
            Ok(Some(choice)) if minmax.is_some() => {
                // Only the row of the entry SQLite reads.
                let row = minmax.flatten();
                filter = Some(match row {
                    Some(rowid) => rowid_in(&mut r, &[rowid])?,
                    None => Expr::Literal(engine::value::Value::Integer(0)),
                });
                let Access::Index { name, .. } = &choice.access else {
                    unreachable!("minmax_row reads an index")
                };
                index_plan = Some(IndexPlan {
                    corescan: format!(
                        "the entry of index {name:?} that SQLite's min()/max() reads, then its \
                         row by rowid"
                    ),
                    sqlite: choice.lines.clone(),
                    // The table must hold the row the index lists.
                    seek_rows: row.filter(|_| constant_terms.is_empty()).map(|_| 1),
                });
                (order_by, backward)
            }
            Ok(Some(choice)) => {
                // ORDER BY ... LIMIT sorted after an index's loop: SQLite's sorter drops a row
                // that ranks after the rows it holds before computing its output columns, and
                // the rows come in the index's order; corescan follows that only for rows
                // that come in rowid order (`engine::query::marks`), so where an output
                // column can fail the rows it computes differ (the differential tester's run
                // seed 1796506713577954049).
                if let (Access::Index { name, .. }, Shape::Rows { outputs }) =
                    (&choice.access, &shape)
                {
                    let sorter = choice
                        .lines
                        .iter()
                        .any(|l| l.contains("TEMP B-TREE FOR") && l.contains("ORDER BY"));
                    if sorter && limit.is_some_and(|l| l != 0) && outputs.iter().any(Expr::may_fail)
                    {
                        return unsupported(format!(
                            "ORDER BY with LIMIT sorted after a loop over index {name:?}, over \
                             output columns that can fail (SQLite computes them for the rows \
                             its sorter takes as the index gives them, an order corescan does \
                             not follow)"
                        ));
                    }
                }
                groups_sorted = choice.sorts_groups;
                order_listings(&mut r, &choice, &mut shape)?;
                // NULLs placed against the index's order (`DESC NULLS FIRST`, `ASC NULLS
                // LAST`): SQLite's loop visits the NULL entries first or last in a loop of
                // their own (WHERE_BIGNULL_SORT), so the index's first entries are not the
                // first rows (the differential tester's run seed 1796289694601585759).
                let bignull = order_terms.iter().any(|t| {
                    let descending = matches!(t.options.sort, Some(ast::OrderBySort::Desc));
                    t.options.nulls_first.is_some_and(|f| f == descending)
                });
                let mut skipped = 0;
                let first = if bignull {
                    None
                } else {
                    first_rows(table, &choice, &shape, filter.as_ref(), limit, offset)?
                };
                // The first groups' rows, where the index delivers the groups and nothing
                // drops rows or groups before the LIMIT.
                let groups_first = match (&first, &window_stage, bignull) {
                    (None, None, false) => first_groups(
                        &mut r,
                        table,
                        &choice,
                        (&shape, distinct),
                        (filter.as_ref(), groups_factor),
                        (limit, offset),
                    )?,
                    _ => None,
                };
                // A DISTINCT's first entries of each key: one row a group.
                let one_row_each = groups_first.as_ref().is_some_and(|g| g.firsts);
                let rows = matches!(shape, Shape::Rows { .. });
                let candidate = match (&first, &groups_first, &window_stage) {
                    (None, None, None) => covering_scan(&choice, rows, &written, bignull),
                    _ => None,
                };
                let followed = follow(
                    &mut r,
                    &choice,
                    &shape,
                    select.selection.as_ref(),
                    written,
                    (order_by, backward),
                    (distinct, one_row_each),
                )?;
                if followed.by_place {
                    // Ranked once the range the scan reads is known (below).
                    arrival = Some(choice.clone());
                }
                let followed = (followed.order_by, followed.backward);
                if let Some(rowids) = &first {
                    filter = Some(rowid_in(&mut r, rowids)?);
                    // The entries past the OFFSET: the rows read are the answer's.
                    skipped = std::mem::take(&mut offset);
                } else if let Some(FirstGroups {
                    rowids,
                    runs,
                    requested,
                    ..
                }) = &groups_first
                {
                    let only = rowid_in(&mut r, rowids)?;
                    // Under a WHERE or a HAVING the runs may hold fewer groups than the LIMIT
                    // wants: the statement's planner runs the query and asks for more runs
                    // while it returns fewer rows and the index has more.
                    let having = matches!(
                        &shape,
                        Shape::Groups {
                            having: Some(_),
                            ..
                        }
                    );
                    if filter.is_some() || having {
                        groups_probe = Some(GroupsProbe {
                            wanted: limit.unwrap_or(u64::MAX).saturating_add(offset),
                            entries: rowids.len() as u64,
                            exhausted: runs < requested,
                        });
                    }
                    filter = Some(match filter.take() {
                        Some(f) => Expr::And(Box::new(only), Box::new(f)),
                        None => only,
                    });
                    if arrival.is_some() {
                        // Ranked among these entries (in key order, as a range is given).
                        let mut in_key_order = rowids.clone();
                        if matches!(choice.access, Access::Index { backward: true, .. }) {
                            in_key_order.reverse();
                        }
                        arrival_range = Some(in_key_order);
                    }
                } else {
                    seek = seek_target(&mut r, table, &choice, filter.as_ref())?;
                    or_seek = or_seek_targets(&mut r, table, &choice)?;
                    whole_index = matches!(choice.access, Access::Index { partial: false, .. });
                    covering = candidate;
                }
                index_plan = Some(IndexPlan {
                    corescan: match (&choice.access, &shape) {
                        (Access::Index { name, .. }, Shape::Rows { .. }) if first.is_some() => {
                            let n = first.as_ref().map_or(0, Vec::len);
                            let which = match skipped {
                                0 => format!("the first {n} entries"),
                                s => format!("the {n} entries after the first {s} (counted)"),
                            };
                            format!(
                                "{which} of index {name:?}, then their rows by rowid, ordered \
                                 as the index gives them"
                            )
                        }
                        (Access::Index { name, .. }, Shape::Rows { .. }) => format!(
                            "the table in rowid order, rows ordered as index {name:?} gives them"
                        ),
                        (Access::Index { name, .. }, Shape::Groups { .. })
                            if groups_first.is_some() =>
                        {
                            let g = groups_first.as_ref().expect("the first groups");
                            let (rowids, runs) = (g.rowids.len(), g.runs);
                            if g.firsts {
                                format!(
                                    "the first entry of each of the first {runs} keys of index \
                                     {name:?} (the row DISTINCT shows), then those rows by rowid"
                                )
                            } else {
                                format!(
                                    "the first {rowids} entries of index {name:?} (the rows of \
                                     its first {runs} keys, which hold the first groups), then \
                                     their rows by rowid, {}",
                                    if arrival.is_some() {
                                        "each group's rows ranked by their places in the index"
                                    } else {
                                        "groups ordered as the index gives their keys"
                                    }
                                )
                            }
                        }
                        (Access::Index { name, .. }, Shape::Groups { .. }) if arrival.is_some() => {
                            format!(
                                "the table in rowid order, each group's rows ranked by their \
                                 places in index {name:?}"
                            )
                        }
                        (Access::Index { name, .. }, Shape::Groups { keys, .. })
                            if !choice.sorts_groups && !keys.is_empty() =>
                        {
                            format!(
                                "the table in rowid order, groups ordered as index {name:?} \
                                 gives their keys"
                            )
                        }
                        (Access::MultiOr(_), Shape::Rows { .. }) => {
                            "the table in rowid order, rows ordered as SQLite's MULTI-INDEX OR \
                             meets them (each OR term's loop in turn, a row where the first \
                             finds it)"
                                .to_string()
                        }
                        _ => "the table in rowid order".to_string(),
                    },
                    sqlite: choice.lines,
                    // A constant WHERE term that is false leaves no row whatever the index
                    // lists (`WHERE 0 ORDER BY a LIMIT 1`): nothing to check then.
                    seek_rows: match (&first, &groups_first) {
                        _ if !constant_terms.is_empty() => None,
                        (Some(f), _) => {
                            let found = f.len() as u64;
                            Some(limit.map_or(found, |l| found.min(l)))
                        }
                        // At least as many groups as runs of keys (without a WHERE).
                        (None, Some(FirstGroups { runs, .. })) if groups_probe.is_none() => {
                            let past = runs.saturating_sub(offset);
                            Some(limit.map_or(past, |l| past.min(l)))
                        }
                        (None, _) => None,
                    },
                });
                followed
            }
            Err(e) => {
                let free = matches!(&shape, Shape::Groups { keys, aggregates, .. }
                    if keys.is_empty() && !super::index_order::order_sensitive(&r, keys, aggregates));
                if !free {
                    return unsupported(format!(
                        "cannot tell how SQLite reads the table {:?} through its indexes for \
                         this query ({e}), and the answer depends on it",
                        table.table.name
                    ));
                }
                (order_by, backward)
            }
        }
    } else {
        (order_by, backward)
    };
    // `LIMIT n OFFSET m` over SQLite's loop of the table, with no WHERE, sorter or
    // aggregate: the rows are the table's entries after its first m in the loop's
    // direction, and SQLite steps over those m without reading their columns. corescan
    // counts them from the leaves' cell counts and reads only the n rows after them.
    let plain = matches!(shape, Shape::Rows { .. }) && !distinct && window_stage.is_none();
    if loops_table && plain && offset > 0 && filter.is_none() && order_by.is_empty() {
        if let Some(n) = limit.filter(|&l| l > 0 && l <= MAX_SEEK_ROWS) {
            let rowids = table.table_rowids(backward, offset, n as usize)?;
            filter = Some(rowid_in(&mut r, &rowids)?);
            if let Some(p) = &mut index_plan {
                p.corescan = format!(
                    "the table's {} rows after its first {offset} (counted), by rowid",
                    rowids.len()
                );
            }
            offset = 0;
        }
    }
    // Groups of a subquery's co-routine come in ascending key order: ties stay so.
    let order_by = group_ties(
        &shape,
        order_by,
        &written_directions,
        distinct || !groups_sorted || coroutine_groups,
    );
    let rowid_slot = r.rowid_if_read();
    let mut plan = QueryPlan {
        columns: r.columns,
        constant_terms,
        filter,
        shape,
        order_by,
        backward,
        limit,
        offset,
        names: outputs.into_iter().map(|o| o.name).collect(),
        distinct,
        windows: window_stage.map(|(stage, _)| Box::new(stage)),
        arrival: None,
    };
    // Constant subexpressions are evaluated once here, not once per row.
    engine::query::fold::fold_plan(&mut plan);
    json_parse_cache(&plan)?;
    // A WHERE bounding the first key column of the index SQLite reads: only the rows of the
    // index's entries in that range are read (on the folded WHERE, whose constants are
    // literals by now).
    // count(*) alone over exactly the index range the WHERE bounds: counted from the index.
    let counts_only = matches!(&plan.shape, Shape::Groups { keys, aggregates, .. }
    if keys.is_empty() && matches!(aggregates.as_slice(), [AggSpec {
        func: AggFunc::CountStar, distinct: false, filter: None, ..
    }]));
    // Whether an index range was read or counted: no covering scan then.
    let mut seeked = false;
    if let Some(target) = seek.as_ref().filter(|_| {
        counts_only && whole_index && plan.constant_terms.is_empty() && plan.windows.is_none()
    }) {
        if let Some((entries, no_rows)) = range_count(table, target, plan.filter.as_ref())? {
            let count = i64::try_from(entries)
                .map_err(|_| SqlError::Invalid(format!("an index range of {entries} entries")))?;
            put_count(&mut plan.shape, &mut plan.order_by, count);
            plan.filter = Some(no_rows);
            seeked = true;
            if let Some(p) = &mut index_plan {
                p.corescan = format!(
                    "the {entries} entries of the index in the range the WHERE bounds, counted \
                     (whole leaves from their cell counts), no table page read"
                );
            }
            seek = None;
        }
    }
    // A range of an index that covers the query is scanned there (its leaves, no table page),
    // not read as rows by rowid.
    let covers = !plan.backward
        && covering
            .as_ref()
            .is_some_and(|c| columns_in_index(table, c, &plan.columns).is_some());
    if let Some(target) = seek.as_ref().filter(|_| !covers) {
        if let Some((rowids, in_key_order)) = range_seek(table, target, plan.filter.as_ref())? {
            seeked = true;
            let found = in_key_order.len();
            if let Some(choice) = &arrival {
                plan.arrival = Some(index_arrival(table, choice, Some(in_key_order))?);
            }
            plan.filter = Some(match plan.filter.take() {
                Some(f) => Expr::And(Box::new(rowids), Box::new(f)),
                None => rowids,
            });
            if let Some(p) = &mut index_plan {
                p.corescan = format!(
                    "the {found} entries of the index in the range the WHERE bounds, then their \
                     rows by rowid{}",
                    if matches!(plan.shape, Shape::Rows { .. }) {
                        ", ordered as the index gives them".to_string()
                    } else if plan.arrival.is_some() {
                        ", each group's rows ranked by their places in the index".to_string()
                    } else {
                        String::new()
                    }
                );
            }
        }
    }
    // The rows SQLite's MULTI-INDEX OR seeks, each term's in turn: only theirs are read.
    if let Some((targets, rowid)) = or_seek.as_ref().filter(|_| !seeked) {
        if let Some((rowids, found)) =
            multi_or_seek(table, (targets, *rowid), plan.filter.as_ref())?
        {
            seeked = true;
            plan.filter = Some(match plan.filter.take() {
                Some(f) => Expr::And(Box::new(rowids), Box::new(f)),
                None => rowids,
            });
            if let Some(p) = &mut index_plan {
                p.corescan = format!(
                    "the {found} rows the OR's terms seek (each term's index range or rowids), \
                     then those rows by rowid{}",
                    match plan.shape {
                        Shape::Rows { .. } => ", ordered as SQLite's MULTI-INDEX OR meets them",
                        Shape::Groups { .. } => "",
                    }
                );
            }
        }
    }
    // A covering index's entries as the rows, where the query reads nothing else and its
    // range was not counted above (`count(*)` of exactly a range: from the leaves' cells).
    let index_scan = match covering.filter(|_| !seeked) {
        Some(c) if !plan.backward => match columns_in_index(table, &c, &plan.columns) {
            Some(columns) => {
                plan.columns = columns;
                if let Some(order) = c.rows_order {
                    plan.order_by = order;
                    engine::query::fold::fold_plan(&mut plan);
                }
                arrival = None;
                arrival_range = None;
                let range = seek.as_ref().and_then(|target| {
                    key_bounds(table, target, plan.filter.as_ref()).map(|b| (target.clone(), b))
                });
                if let Some(p) = &mut index_plan {
                    p.corescan = format!(
                        "the entries of index {:?} in key order{} in place of the table's rows \
                         (the index covers the query), cut across the executors",
                        c.name,
                        if range.is_some() {
                            ", the leaves that can hold the range the WHERE bounds,"
                        } else {
                            ""
                        }
                    );
                }
                Some(CoveringScan {
                    name: c.name,
                    fields: c.fields,
                    range,
                })
            }
            None => None,
        },
        _ => None,
    };
    // Each group's rows ranked by their places in the whole index, when no range was read.
    if let (Some(choice), None) = (&arrival, &plan.arrival) {
        let ranged = arrival_range.is_some();
        let ranks = index_arrival(table, choice, arrival_range.take())?;
        if let Some(p) = index_plan.as_mut().filter(|_| !ranged) {
            p.corescan = format!("{} ({} entries read)", p.corescan, ranks.len());
        }
        plan.arrival = Some(ranks);
    }
    // As a rowid range: also under verify-retry, whose later attempts scan the table
    // (`plan_table` plans them from the query).
    let edge = rowid_edge(&plan, rowid_slot.as_ref()).filter(|_| index_scan.is_none());
    Ok(SelectPlan {
        query: plan,
        index_plan,
        groups_probe,
        first,
        edge,
        index_scan,
    })
}

/// The count of a `count(*)` query answered without reading rows (slot 0, its one
/// aggregate) put into its outputs, `HAVING` and `ORDER BY` as a literal.
fn put_count(shape: &mut Shape, order_by: &mut [SortKey], count: i64) {
    let mut with_count = |slot: usize| (slot == 0).then_some(Expr::Literal(Value::Integer(count)));
    if let Shape::Groups {
        outputs, having, ..
    } = shape
    {
        outputs
            .iter_mut()
            .chain(having.iter_mut())
            .for_each(|e| e.replace_slots(&mut with_count));
    }
    for k in order_by {
        k.expr.replace_slots(&mut with_count);
    }
}

/// `WHERE` split at its top-level `AND`s (`sqlite3WhereSplit`, also through `likely()` and
/// its kin) into the terms that read no column, which SQLite tests once, in order, before the
/// scan ([`QueryPlan::constant_terms`]; every function corescan knows is deterministic, so
/// none stays in the loop as `random()` would), and the others, rejoined in their order as
/// the row filter. One of the first that fails fails the query whatever the others decide,
/// even on an empty table (run seed 1796150127262878177: `WHERE id AND (n IN (1e3) AND
/// abs(-9223372036854775808))` fails in SQLite).
///
/// A term that holds a subquery stays in the loop though it reads no column: SQLite's
/// `prereqAll` of a subquery is not empty, so the term is tested on each row where the terms
/// before it hold, and the subquery computed there, once (`OP_Once`). A failing term before
/// it fails the query where corescan's earlier test of the subquery's `0` would have skipped
/// the scan (the differential tester's table seed 9202923161938340359), and a failing
/// subquery fails it only where a row reaches it. But for a term that is an `EXISTS` SQLite
/// turns into a loop of its own, outside the table's ([`exists_to_join`]): tested once,
/// before the scan, as a constant.
fn where_terms(
    r: &mut Resolver<'_>,
    filter: &ast::Expr,
) -> Result<(Vec<Expr>, Option<Expr>), SqlError> {
    fn pieces<'e>(e: &'e ast::Expr, out: &mut Vec<&'e ast::Expr>) {
        match e {
            ast::Expr::Nested(x) => pieces(x, out),
            // SQLite's parser made it the integer 0 (`sqlite3ExprAnd`): one piece.
            ast::Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::And,
                right,
            } if !parser_folds_and(left, right) => {
                pieces(left, out);
                pieces(right, out);
            }
            e => out.push(e),
        }
    }
    let mut found = Vec::new();
    pieces(filter, &mut found);
    let (mut constant, mut rest) = (Vec::new(), Vec::new());
    for piece in found {
        let in_loop = holds_subquery(piece) && !exists_to_join(piece);
        for term in split_where(r.resolve(piece, &mut Stage::Row, 0)?.expr) {
            if in_loop || super::expr::uses_slots(&term) {
                rest.push(term);
            } else {
                constant.push(term);
            }
        }
    }
    let filter = rest
        .into_iter()
        .reduce(|a, b| Expr::And(Box::new(a), Box::new(b)));
    Ok((constant, filter))
}

/// `WHERE` terms split at their `AND`s as `sqlite3WhereSplit` splits them (through the
/// truth value of `x AND 1` and `likely()`).
fn split_where(filter: Expr) -> Vec<Expr> {
    fn split(e: Expr, terms: &mut Vec<Expr>) {
        match e {
            Expr::And(a, b) => {
                split(*a, terms);
                split(*b, terms);
            }
            // An AND holding a subquery is split all the same (the terms' order is then
            // the WHERE clause's).
            Expr::ShortCircuit { expr, .. } if matches!(*expr, Expr::And(..)) => {
                split(*expr, terms);
            }
            // `x AND 1` planned as the truth value of `x` (see `expr::and_or`): SQLite
            // still splits the `AND`s of `x`, and the `1` decides nothing.
            Expr::Not(n) if matches!(&*n, Expr::Not(x) if matches!(**x, Expr::And(..))) => {
                let Expr::Not(x) = *n else { unreachable!() };
                split(*x, terms);
            }
            // `likely(x)`, `unlikely(x)`, `likelihood(x, p)`: a one-argument coalesce, which
            // `sqlite3WhereSplit` looks through.
            Expr::Function(Function::Coalesce, mut args) if args.len() == 1 => {
                split(args.pop().expect("one argument"), terms);
            }
            e => terms.push(e),
        }
    }
    let mut terms = Vec::new();
    split(filter, &mut terms);
    terms
}

/// Whether SQLite turns the `WHERE` term `e` into a loop over the subquery's table run
/// before the statement's own (`EXISTS (SELECT ... FROM t ...)` of one table, not a
/// subquery, without aggregates, `LIMIT` or a compound: its plan's `SCAN t EXISTS`), which
/// stops at the subquery's first row; without one the statement's loop never runs.
fn exists_to_join(e: &ast::Expr) -> bool {
    let ast::Expr::Exists {
        subquery,
        negated: false,
    } = e
    else {
        return false;
    };
    let ast::SetExpr::Select(select) = subquery.body.as_ref() else {
        return false;
    };
    subquery.with.is_none()
        && subquery.limit_clause.is_none()
        && subquery.fetch.is_none()
        && !crate::flatten::aggregates(select)
        && matches!(select.from.as_slice(), [ast::TableWithJoins { relation: TableFactor::Table { args: None, .. }, joins }] if joins.is_empty())
}

/// Whether `query` calls a one-argument `min()` or `max()` aggregate with `FILTER`.
/// Bare columns beside the one `min(x)`/`max(x)` of a query without `GROUP BY` whose loop
/// SQLite leaves after its first row (the min/max optimization's early out, where a `WHERE`
/// makes `x` one value: `x IS NULL`, `x = 5`): they come from that first row, not from the
/// row the aggregate's steps choose (the last of all-NULL values). Over a scan of the table
/// in rowid order that row is the first the `WHERE` keeps, and its `x` is the aggregate's
/// value, so the aggregate becomes a bare column of its own (`shape` rewritten). Backwards,
/// `max(rowid)`'s row is the aggregate's own choice (`rowid` is the plan's rowid slot, if
/// read). Through an index with a `WHERE` (the first entry of a range), refused; without
/// one, the entry is read as one row (`index_order::minmax_row`).
fn first_row_shows(
    shape: &mut Shape,
    table: &TablePlan,
    sql: &str,
    others: &[TablePlan],
    has_where: bool,
    rowid: Option<Expr>,
) -> Result<(), SqlError> {
    let Shape::Groups {
        keys, aggregates, ..
    } = shape
    else {
        return Ok(());
    };
    if !keys.is_empty() || !engine::query::key_row::shows_columns(aggregates) {
        return Ok(());
    }
    let mut functions = aggregates
        .iter()
        .enumerate()
        .filter(|(_, a)| a.func != AggFunc::Shown);
    let (Some((m, spec)), None) = (functions.next(), functions.next()) else {
        return Ok(());
    };
    if !matches!(spec.func, AggFunc::Min | AggFunc::Max) || spec.distinct {
        return Ok(());
    }
    let choice = match ask(table, sql, others) {
        Ok(c) => c,
        Err(e) => {
            return unsupported(format!(
                "a bare column beside min() or max(): SQLite's plan could not be asked ({e})"
            ))
        }
    };
    if !choice.first_row_only {
        return Ok(());
    }
    match choice.access {
        Access::Rowid { backward: false } => {
            aggregates[m].func = AggFunc::Shown;
            Ok(())
        }
        // `max(rowid)` from the last row back: the aggregate's own choice, the first row
        // holding the maximum.
        Access::Rowid { backward: true } if spec.arg.is_some() && spec.arg == rowid => Ok(()),
        Access::Index { .. } if !has_where => Ok(()),
        Access::Index { name, .. } => unsupported(format!(
            "a bare column beside min() or max() that SQLite answers from the first entry of \
             its loop through index {name:?} ({}), which corescan does not follow yet",
            choice.lines.join("; ")
        )),
        _ => unsupported(format!(
            "a bare column beside min() or max() that SQLite answers from the first row of \
             its loop ({}), which corescan does not follow yet",
            choice.lines.join("; ")
        )),
    }
}

fn minmax_with_filter(query: &ast::Query) -> bool {
    use std::ops::ControlFlow;
    ast::visit_expressions(query, |e| match e {
        ast::Expr::Function(f)
            if f.filter.is_some()
                && f.over.is_none()
                && matches!(
                    f.name.to_string().to_ascii_lowercase().as_str(),
                    "min" | "max"
                )
                && matches!(&f.args, ast::FunctionArguments::List(l) if l.args.len() == 1) =>
        {
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// A grouped query's `ORDER BY` (`order_by`, whose terms as written are `descending` or not)
/// with the group keys
/// added as its last terms where SQLite's sorter meets ties in an order of its own choosing:
/// when the `ORDER BY` has as many terms as the `GROUP BY`, SQLite gives each `GROUP BY` term
/// the direction of the `ORDER BY` term at its place (select.c: "set the ASC/DESC flags in
/// the GROUP BY to match those in the ORDER BY"), so the groups reach the `ORDER BY`'s
/// (stable) sorter ordered by their keys in those directions, not ascending. Only where
/// SQLite sorts the groups itself (`unsorted` otherwise: `SELECT DISTINCT`, or groups in an
/// index's or the rowid's order, which the index planning decides).
fn group_ties(
    shape: &Shape,
    order_by: Vec<SortKey>,
    descending: &[bool],
    unsorted: bool,
) -> Vec<SortKey> {
    let Shape::Groups { keys, .. } = shape else {
        return order_by;
    };
    if unsorted || keys.is_empty() || order_by.is_empty() || descending.len() != keys.len() {
        return order_by;
    }
    let mut order_by = order_by;
    for (k, ((_, collation), &desc)) in keys.iter().zip(descending).enumerate() {
        order_by.push(SortKey {
            expr: Expr::Column(k),
            descending: desc,
            // A DESC term sorts NULLs last (SQLite's NULL is the smallest value); the
            // direction alone is copied, not a NULLS FIRST/LAST.
            nulls_first: !desc,
            collation: *collation,
        });
    }
    order_by
}

/// The `WINDOW` clause's windows by name, each on a base window extended.
fn named_windows(select: &ast::Select) -> Result<Vec<(String, ast::WindowSpec)>, SqlError> {
    let mut named: Vec<(String, ast::WindowSpec)> = Vec::new();
    for ast::NamedWindowDefinition(name, def) in &select.named_window {
        let spec = match def {
            ast::NamedWindowExpr::NamedWindow(base) => ast::WindowSpec {
                window_name: Some(base.clone()),
                partition_by: Vec::new(),
                order_by: Vec::new(),
                window_frame: None,
            },
            ast::NamedWindowExpr::WindowSpec(spec) => spec.clone(),
        };
        let spec = crate::expr::named_window(&named, spec)?;
        named.push((name.value.clone(), spec));
    }
    Ok(named)
}

/// A `LIMIT`/`OFFSET` value: a constant integer expression; a negative `LIMIT` means none
/// (`None`), a negative `OFFSET` zero.
fn constant_int(r: &mut Resolver<'_>, e: &ast::Expr, what: &str) -> Result<Option<u64>, SqlError> {
    let t = r.resolve(e, &mut Stage::Row, 0)?;
    if super::expr::uses_slots(&t.expr) {
        return invalid(format!("{what} must be a constant"));
    }
    let v = eval(&t.expr, &[]).map_err(SqlError::Invalid)?;
    let i = match v {
        Value::Integer(i) => i,
        Value::Text(ref s) => match engine::value::numeric_affinity_of_text(s) {
            Some(engine::value::Number::Integer(i)) => i,
            _ => return invalid("datatype mismatch"),
        },
        Value::Real(x) if x.fract() == 0.0 && x.abs() < 9.2e18 => x as i64,
        _ => return invalid("datatype mismatch"),
    };
    Ok(u64::try_from(i).ok())
}

pub(crate) fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The select list's items as written, from byte `start` (just after `SELECT`) to the
/// top-level `FROM`: SQLite names an unaliased output column by its expression's text.
/// Refuses a query whose JSON answers SQLite's per-statement JSON parse cache could change
/// in ways corescan does not follow (`engine::query::json`): an edit whose text SQLite caches
/// with its JSONB (`json_set`, `json_remove`, ...), and a reader whose answer can differ when
/// it reads equal text through that cache, on a document that is not the edit's own result
/// handed over directly (a row's value equal to an earlier row's edit, say).
fn json_parse_cache(plan: &QueryPlan) -> Result<(), SqlError> {
    let mut exprs: Vec<&Expr> = Vec::new();
    for c in &plan.columns {
        if let engine::query::ir::ColumnRead::Virtual { expr, .. } = c {
            exprs.push(expr);
        }
    }
    exprs.extend(plan.constant_terms.iter());
    exprs.extend(plan.filter.iter());
    exprs.extend(plan.order_by.iter().map(|k| &k.expr));
    match &plan.shape {
        Shape::Rows { outputs } => exprs.extend(outputs),
        Shape::Groups {
            keys,
            aggregates,
            having,
            outputs,
        } => {
            exprs.extend(keys.iter().map(|(e, _)| e));
            exprs.extend(aggregates.iter().flat_map(AggSpec::exprs));
            exprs.extend(having.iter());
            exprs.extend(outputs);
        }
    }
    let (mut edits, mut readers) = (false, false);
    for e in exprs {
        e.visit(&mut |x| {
            if let Expr::Function(Function::Json(f), args) = x {
                edits |= f.caches_output(args.len());
                let documents: &[Expr] = match f {
                    JsonFunc::Patch | JsonFunc::JsonbPatch => args,
                    _ => args.get(..1).unwrap_or(&[]),
                };
                readers |= f.cache_sensitive()
                    && documents
                        .iter()
                        .any(|d| !matches!(d, Expr::Function(Function::Json(_), _)));
            }
        });
    }
    if edits && readers {
        return unsupported(
            "a JSON edit (json_set, json_remove, ...) beside a JSON function reading another \
             document in the same query: SQLite's JSON parse cache can hand that reader the \
             edit's cached form",
        );
    }
    Ok(())
}

/// The text of each item of `select`'s result list as written in `sql` (which names an
/// unaliased result column), when it can be read.
pub(crate) fn item_texts(sql: &str, select: &ast::Select) -> Option<Vec<String>> {
    offset_of(sql, select.select_token.0.span.end)
        .map(|start| select_item_texts(sql, after_distinct(sql, start, select)))
        .filter(|t| t.len() == select.projection.len())
}

/// Where the select list starts after `SELECT` at `start`: past `DISTINCT` or `ALL`.
fn after_distinct(sql: &str, start: usize, select: &ast::Select) -> usize {
    let word = match select.distinct {
        Some(ast::Distinct::Distinct) => "DISTINCT",
        Some(ast::Distinct::All) => "ALL",
        _ => return start,
    };
    let rest = &sql[start..];
    let skipped = rest.len() - rest.trim_start().len();
    let at = start + skipped;
    match sql.get(at..at + word.len()) {
        Some(w) if w.eq_ignore_ascii_case(word) => at + word.len(),
        _ => start,
    }
}

fn select_item_texts(sql: &str, start: usize) -> Vec<String> {
    let b = sql.as_bytes();
    let mut items = Vec::new();
    let (mut i, mut item_start, mut depth) = (start, start, 0i64);
    let push = |items: &mut Vec<String>, from: usize, to: usize| {
        items.push(sql[from..to].trim().to_string());
    };
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += 1;
                }
            }
            b'[' => {
                while i < b.len() && b[i] != b']' {
                    i += 1;
                }
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' => depth += 1,
            b')' => depth -= 1,
            b',' if depth == 0 => {
                push(&mut items, item_start, i);
                item_start = i + 1;
            }
            c if depth == 0
                && c.eq_ignore_ascii_case(&b'f')
                && b.len() >= i + 4
                && sql[i..i + 4].eq_ignore_ascii_case("from")
                && (i == 0 || !is_word(b[i - 1]))
                && b.get(i + 4).is_none_or(|&n| !is_word(n))
                // `x IS [NOT] DISTINCT FROM y` is an item's own FROM.
                && !sql[..i]
                    .trim_end()
                    .to_ascii_lowercase()
                    .ends_with("distinct") =>
            {
                break;
            }
            _ => {}
        }
        i += 1;
    }
    push(&mut items, item_start, i.min(b.len()));
    // "expr AS alias" items are named by their alias, so only unaliased texts are used.
    items
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals() {
        assert_eq!(ordinal(1), "1st");
        assert_eq!(ordinal(2), "2nd");
        assert_eq!(ordinal(11), "11th");
        assert_eq!(ordinal(23), "23rd");
    }

    #[test]
    fn expression_text_as_written() {
        let sql = "SELECT a+1,  count( * ), typeof(abs(x)), 'a,b' , -i, CAST(s AS INT) FROM t";
        assert_eq!(
            select_item_texts(sql, 6),
            [
                "a+1",
                "count( * )",
                "typeof(abs(x))",
                "'a,b'",
                "-i",
                "CAST(s AS INT)"
            ]
        );
    }
}
