//! Uncorrelated subqueries: `(SELECT ...)` as a value, `x [NOT] IN (SELECT ...)` and
//! `[NOT] EXISTS (SELECT ...)`, over any table of the statement's file.
//!
//! SQLite runs an uncorrelated subquery once, at its first use (`OP_Once`), and keeps its
//! result: a scalar subquery's first row (under `LIMIT 1`, or `LIMIT (X<>0)` over its own
//! `LIMIT X`), an `IN` subquery's rows as an ephemeral index, an `EXISTS` subquery's first
//! row's existence (its result columns never computed, its `ORDER BY` ignored). corescan
//! does the same before the statement's scan: while the statement is planned, each subquery
//! is planned as a query of its own and run as its own parallel scan by a
//! [`SubqueryRunner`] (in the statement's snapshot: [`FileScans`]), and the statement is
//! planned over its result (a literal, an [`engine::query::in_set::InSet`], 0 or 1). A
//! subquery whose computation fails becomes an expression that fails where it is evaluated,
//! so the statement fails only where SQLite's would (on an empty table it does not).
//!
//! SQLite's planner is asked about each subquery as the statement it runs (with its `LIMIT`),
//! and about the statement with the subqueries' tables in its copy of the schema
//! ([`crate::sqlite_plan::choose`]), so that the loops followed are SQLite's.
//!
//! A subquery that names a column of the query around it (correlated) is refused, and so are
//! row values: the message points to `corescan sql`, which plans them with DataFusion.
//! Subqueries in `FROM` and `WITH` are `crate::flatten`'s and `crate::materialize`'s.
//!
//! Layering: below the statement planner (`plan`, which hands the context its planning
//! function) and the expression resolver (`expr::subquery`, which asks it for results); it
//! imports only the crate's errors.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::ControlFlow;

use engine::datatype3::{Affinity, Collation};
use engine::query::QueryError;
use engine::value::Value;
use engine::{ExecutorSpec, QueryPlan, ScanSettings};
use partitioner::{PageFile, TablePlan};
use sqlparser::ast;

use crate::error::SqlError;

/// Where a statement's subqueries are read and run.
pub trait SubqueryRunner {
    /// The plan of table `name` (as the query writes it) of the statement's file, in the
    /// snapshot the statement reads.
    fn open_table(&self, name: &str) -> partitioner::Result<TablePlan>;

    /// Runs `query` over `table` to its rows. `Ok(Err(message))`: computing them failed on
    /// an evaluation (`integer overflow`, a function's error), which fails the statement only
    /// where SQLite evaluates the subquery; `Err`: the scan failed (I/O, a malformed page, a
    /// change of the database), which fails the statement.
    fn run(
        &self,
        table: &TablePlan,
        query: QueryPlan,
    ) -> Result<Result<Vec<Vec<Value>>, String>, SqlError>;
}

/// Subqueries read from one open file ([`PageFile`]: its snapshot held, so every subquery
/// and the statement read one committed state) and run on `executors` with `settings`.
pub struct FileScans<'a> {
    /// The statement's file.
    pub file: &'a PageFile,
    /// The scans' settings.
    pub settings: &'a ScanSettings,
    /// One executor per entry.
    pub executors: &'a [ExecutorSpec],
}

impl SubqueryRunner for FileScans<'_> {
    fn open_table(&self, name: &str) -> partitioner::Result<TablePlan> {
        TablePlan::open_for_scan_from(self.file, name)
    }

    fn run(
        &self,
        table: &TablePlan,
        query: QueryPlan,
    ) -> Result<Result<Vec<Vec<Value>>, String>, SqlError> {
        run_on(table, query, self.settings, self.executors)
    }
}

/// Subqueries read from one open file and run with the default placement and settings (one
/// executor per CPU this process may use), resolved at the first subquery: how
/// [`crate::plan_query`] runs them.
pub struct DefaultScans {
    file: PageFile,
    setup: std::cell::OnceCell<(Vec<ExecutorSpec>, ScanSettings)>,
}

impl DefaultScans {
    /// Subqueries of a statement over `file`.
    pub fn new(file: PageFile) -> Self {
        DefaultScans {
            file,
            setup: std::cell::OnceCell::new(),
        }
    }
}

impl SubqueryRunner for DefaultScans {
    fn open_table(&self, name: &str) -> partitioner::Result<TablePlan> {
        TablePlan::open_for_scan_from(&self.file, name)
    }

    fn run(
        &self,
        table: &TablePlan,
        query: QueryPlan,
    ) -> Result<Result<Vec<Vec<Value>>, String>, SqlError> {
        let (executors, settings) = match self.setup.get() {
            Some(s) => s,
            None => {
                let s = engine::placement::resolve(
                    &engine::Placement::default(),
                    &engine::ScanOptions::default(),
                    self.file.header().page_size,
                )
                .map_err(|e| SqlError::Scan(Box::new(e)))?;
                self.setup.get_or_init(|| s)
            }
        };
        run_on(table, query, settings, executors)
    }
}

/// Runs a subquery's plan (see [`SubqueryRunner::run`]).
fn run_on(
    table: &TablePlan,
    query: QueryPlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
) -> Result<Result<Vec<Vec<Value>>, String>, SqlError> {
    let table = engine::restrict(table.clone(), &query)?;
    match engine::query::run_query(&table, query, settings, executors) {
        Ok(out) => Ok(Ok(out.rows)),
        Err(QueryError::Eval(m)) => Ok(Err(m)),
        Err(QueryError::Scan(e @ engine::Error::Eval { .. })) => Ok(Err(e.to_string())),
        Err(QueryError::Scan(e)) => Err(SqlError::Scan(Box::new(e))),
        Err(e) => Err(SqlError::Invalid(e.to_string())),
    }
}

/// What the statement wants of a subquery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Want {
    /// Its first row's value (`(SELECT ...)`).
    Scalar,
    /// Its rows (`x IN (SELECT ...)`).
    In,
    /// Whether it has a row (`EXISTS (SELECT ...)`).
    Exists,
}

/// A subquery planned as a query of its own, ready to run.
pub(crate) struct PlannedSubquery {
    /// Its table.
    pub table: TablePlan,
    /// Its plan.
    pub query: QueryPlan,
    /// Its result columns.
    pub columns: usize,
    /// Whether SQLite's sorter orders its rows (an `ORDER BY` its loop does not deliver).
    pub sorted: bool,
    /// The affinity of its first result column (`sqlite3ExprAffinity` of the expression).
    pub affinity: Option<Affinity>,
    /// The collation of its first result column, and whether it was written (`COLLATE`).
    pub collation: Option<(Collation, bool)>,
    /// When its rows came from an index's entries: how many the index promised, and its
    /// plan's words (fewer rows is a damaged index).
    pub seek_rows: Option<(u64, String)>,
}

/// A subquery's result.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// Its rows, or the error computing them met.
    pub rows: Result<std::sync::Arc<Vec<Vec<Value>>>, String>,
    /// Its result columns.
    pub columns: usize,
    /// Its first result column's affinity.
    pub affinity: Option<Affinity>,
    /// Its first result column's collation, and whether it was written.
    pub collation: Option<(Collation, bool)>,
}

impl Outcome {
    /// SQLite's error for a subquery of several columns where one value is wanted.
    pub fn one_column(&self) -> Result<(), SqlError> {
        if self.columns == 1 {
            Ok(())
        } else {
            Err(SqlError::Invalid(format!(
                "sub-select returns {} columns - expected 1",
                self.columns
            )))
        }
    }
}

/// The names a subquery could mean in the queries around it: a name the subquery's own
/// table lacks but one of these has makes it correlated.
#[derive(Debug, Clone, Default)]
pub(crate) struct OuterNames {
    /// The table's name and alias, lower case.
    pub qualifiers: Vec<String>,
    /// Its column names, lower case (and the rowid's names).
    pub columns: Vec<String>,
}

/// Plans a subquery (the statement planner's function, handed in so that this module needs
/// nothing above it).
pub(crate) type PlanSubquery =
    fn(&ast::Query, &Subqueries<'_>) -> Result<PlannedSubquery, SqlError>;

/// One statement's subqueries: how they are planned and run, and the results so far (a
/// subquery written twice, or resolved twice, runs once).
pub(crate) struct Subqueries<'a> {
    runner: &'a dyn SubqueryRunner,
    plan: PlanSubquery,
    /// The statement's text (parser locations index it).
    pub sql: &'a str,
    results: RefCell<HashMap<(Want, String), Outcome>>,
    outers: RefCell<Vec<OuterNames>>,
    /// The tables subqueries read, for SQLite's planner to see (its copy of the schema).
    tables: RefCell<Vec<TablePlan>>,
}

impl<'a> Subqueries<'a> {
    /// The subqueries of statement `sql`, planned by `plan` and run by `runner`.
    pub fn new(runner: &'a dyn SubqueryRunner, plan: PlanSubquery, sql: &'a str) -> Self {
        Subqueries {
            runner,
            plan,
            sql,
            results: RefCell::new(HashMap::new()),
            outers: RefCell::new(Vec::new()),
            tables: RefCell::new(Vec::new()),
        }
    }

    /// Opens table `name` for a subquery.
    pub fn open_table(&self, name: &str) -> partitioner::Result<TablePlan> {
        let table = self.runner.open_table(name)?;
        let mut tables = self.tables.borrow_mut();
        if !tables
            .iter()
            .any(|t| t.table.name.eq_ignore_ascii_case(&table.table.name))
        {
            tables.push(table.clone());
        }
        Ok(table)
    }

    /// The tables the subqueries planned so far read.
    pub fn tables(&self) -> Vec<TablePlan> {
        self.tables.borrow().clone()
    }

    /// The result of subquery `q`, used as `want` by a query over `outer`'s names.
    pub fn evaluate(
        &self,
        q: &ast::Query,
        want: Want,
        outer: OuterNames,
    ) -> Result<Outcome, SqlError> {
        if want == Want::Exists {
            dropped_projection_errors(q)?;
        }
        let ordered = q.order_by.clone();
        let (mut q, uncomputed) = shaped(q, want);
        if want == Want::In && q.order_by.is_some() && self.reads_rowids_directly(&q) {
            // SQLite searches the table's rowids for the IN (`USING ROWID SEARCH ON TABLE
            // t FOR IN-OPERATOR`): the subquery never runs, its ORDER BY never computed
            // (the differential tester's run seed 1796530039104147478: a json_array() of a
            // blob there failed corescan's query, not SQLite's).
            q.order_by = None;
        }
        if q.order_by.is_none() && ordered.is_some() {
            // ... but still resolved: a position out of range or a name of no column fails
            // the statement (the differential tester's run seed 1796683528331465109: `t IN
            // (SELECT id FROM t ORDER BY ('x' ISNULL))` is `ORDER BY 0` to SQLite).
            let mut resolved = q.clone();
            resolved.order_by = ordered;
            self.resolve_dropped_order_by(&resolved, &outer)?;
        }
        let key = (want, q.to_string());
        if let Some(done) = self.results.borrow().get(&key) {
            return Ok(done.clone());
        }
        self.outers.borrow_mut().push(outer);
        let planned = (self.plan)(&q, self);
        let outers = self.outers.borrow_mut().pop().map(|o| vec![o]);
        let mut planned = planned.map_err(|e| self.correlated(e, outers.as_deref()))?;
        if want == Want::Scalar && planned.sorted {
            outputs_of_every_sorted_row(&mut planned.query);
        }
        if uncomputed {
            // The loop is chosen with the result columns, which are never computed.
            if let engine::query::ir::Shape::Rows { outputs } = &mut planned.query.shape {
                *outputs = vec![engine::query::ir::Expr::Literal(Value::Integer(1))];
            }
        }
        let rows = self.runner.run(&planned.table, planned.query)?;
        if let (Ok(rows), Some((want, plan))) = (&rows, &planned.seek_rows) {
            if (rows.len() as u64) < *want {
                return Err(SqlError::Invalid(format!(
                    "database disk image is malformed: the index SQLite reads for a subquery \
                     ({plan}) lists rows the table lacks ({} of {want} found)",
                    rows.len()
                )));
            }
        }
        let outcome = Outcome {
            rows: rows.map(std::sync::Arc::new),
            columns: planned.columns,
            affinity: planned.affinity,
            collation: planned.collation,
        };
        self.results.borrow_mut().insert(key, outcome.clone());
        Ok(outcome)
    }

    /// Plans `q` (a subquery with the `ORDER BY` that SQLite resolves but never computes)
    /// only for the errors SQLite's name resolution gives: an `ORDER BY` position out of
    /// range, a name of no column. Anything else (corescan's own limits) is no error: the
    /// `ORDER BY` is dropped for the run.
    fn resolve_dropped_order_by(&self, q: &ast::Query, outer: &OuterNames) -> Result<(), SqlError> {
        self.outers.borrow_mut().push(outer.clone());
        let planned = (self.plan)(q, self);
        let outers = self.outers.borrow_mut().pop().map(|o| vec![o]);
        match planned.map_err(|e| self.correlated(e, outers.as_deref())) {
            Err(e @ SqlError::Invalid(_)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Whether `x IN (q)` is SQLite's `IN_INDEX_ROWID` (`sqlite3FindInIndex`): `q` is a
    /// candidate for the IN optimization (`isCandidateForInOpt`: one `SELECT` without
    /// `WHERE`, `LIMIT`, `GROUP BY`, aggregates or windows, over one table named in `FROM`,
    /// whose one result column is a column) and that column is the table's rowid or its
    /// `INTEGER PRIMARY KEY` alias. (Where an index on the column serves the IN instead,
    /// `USING INDEX i FOR IN-OPERATOR`, corescan still runs the subquery.)
    fn reads_rowids_directly(&self, q: &ast::Query) -> bool {
        let ast::SetExpr::Select(select) = q.body.as_ref() else {
            return false;
        };
        if q.with.is_some()
            || q.limit_clause.is_some()
            || select.selection.is_some()
            || select.having.is_some()
            || !matches!(&select.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
        {
            return false;
        }
        let [from] = select.from.as_slice() else {
            return false;
        };
        let ast::TableFactor::Table {
            name, args: None, ..
        } = &from.relation
        else {
            return false;
        };
        if !from.joins.is_empty() {
            return false;
        }
        let [item] = select.projection.as_slice() else {
            return false;
        };
        let column = match item {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => return false,
        };
        let column = match column {
            ast::Expr::Identifier(i) => &i.value,
            ast::Expr::CompoundIdentifier(parts) => match parts.last() {
                Some(i) => &i.value,
                None => return false,
            },
            _ => return false,
        };
        // Windows anywhere (ORDER BY too) make it another query. An aggregate in the ORDER
        // BY alone does not (SQLite's `SF_Aggregate` comes from the result columns: `k IN
        // (SELECT id FROM t ORDER BY sum(k))` is still `USING ROWID SEARCH`).
        let mut other = false;
        let _ = ast::visit_expressions(q, |e| {
            if let ast::Expr::Function(f) = e {
                other |= f.over.is_some();
            }
            ControlFlow::<()>::Continue(())
        });
        if other {
            return false;
        }
        let Ok(table) = self.open_table(&name.to_string()) else {
            return false;
        };
        let columns = &table.definition.columns;
        let is_column = |n: &str| columns.iter().any(|c| c.name.eq_ignore_ascii_case(n));
        match table.definition.rowid_alias() {
            Some(i) if columns[i].name.eq_ignore_ascii_case(column) => true,
            _ => {
                ["rowid", "oid", "_rowid_"]
                    .iter()
                    .any(|r| r.eq_ignore_ascii_case(column))
                    && !is_column(column)
                    && !table.definition.without_rowid
            }
        }
    }

    /// `e`, from planning a subquery, as a refusal of a correlated subquery when the name it
    /// could not find is one of the queries around it.
    fn correlated(&self, e: SqlError, innermost: Option<&[OuterNames]>) -> SqlError {
        let SqlError::Invalid(message) = &e else {
            return e;
        };
        let Some(name) = message.strip_prefix("no such column: ") else {
            return e;
        };
        let name = name.to_ascii_lowercase();
        let (qualifier, column) = match name.rsplit_once('.') {
            Some((q, c)) => (Some(q.to_string()), c.to_string()),
            None => (None, name.clone()),
        };
        let outers = self.outers.borrow();
        let names_it = |o: &OuterNames| match &qualifier {
            Some(q) => o.qualifiers.contains(q),
            None => o.columns.contains(&column),
        };
        if outers.iter().chain(innermost.unwrap_or(&[])).any(names_it) {
            return SqlError::Unsupported(format!(
                "correlated subqueries (the subquery reads {name} of the query around it; \
                 `corescan sql` plans correlated subqueries and joins with DataFusion)"
            ));
        }
        e
    }
}

/// Whether `q` has a subquery in an expression.
pub(crate) fn has_subquery(q: &ast::Query) -> bool {
    ast::visit_expressions(q, |e| match e {
        ast::Expr::Subquery(_)
        | ast::Expr::Exists { .. }
        | ast::Expr::In {
            target: ast::InTarget::Subquery(_) | ast::InTarget::Table { .. },
            ..
        } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// The errors SQLite raises while it prepares a subquery's result columns, which [`shaped`]
/// drops for `EXISTS` and flattening drops for those a statement does not read: a
/// `likelihood()` whose probability is not a constant between 0.0 and 1.0 (the differential
/// tester's run seeds 1796403129984150137 and 1796404138119078016).
pub(crate) fn dropped_projection_errors(q: &ast::Query) -> Result<(), SqlError> {
    let ast::SetExpr::Select(select) = q.body.as_ref() else {
        return Ok(());
    };
    let bad = ast::visit_expressions(&select.projection, |e| match e {
        ast::Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("likelihood") => {
            let args: Vec<&ast::Expr> = match &f.args {
                ast::FunctionArguments::List(l) => l
                    .args
                    .iter()
                    .filter_map(|a| match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => Some(x),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            match args.get(1) {
                Some(p) if args.len() == 2 && !crate::expr::is_probability(p) => {
                    ControlFlow::Break(())
                }
                _ => ControlFlow::Continue(()),
            }
        }
        _ => ControlFlow::Continue(()),
    });
    if bad.is_break() {
        return Err(SqlError::Invalid(
            "second argument to likelihood() must be a constant between 0.0 and 1.0".into(),
        ));
    }
    Ok(())
}

/// A scalar subquery's sorter (`ORDER BY` its loop does not deliver) receives every row that
/// passes `WHERE` with its result columns computed: the deferred row load that spares the
/// rows a top-level `ORDER BY ... LIMIT` drops (`engine::query::marks`) is not done for a
/// subquery's `SRT_Mem`, so a result column that fails on any such row fails the subquery
/// (table seed 17583062050652823761: `(SELECT json_object('a', b) FROM t ORDER BY i LIMIT 1)`
/// fails on the rows whose `b` is a blob). Where a result column can fail, `plan`'s `WHERE`
/// computes them all, after its own terms and before the sort keys as SQLite does, and
/// holds whatever they are.
fn outputs_of_every_sorted_row(plan: &mut QueryPlan) {
    use engine::query::ir::{Expr, Shape};
    let Shape::Rows { outputs } = &plan.shape else {
        return;
    };
    if !outputs.iter().any(Expr::may_fail) {
        return;
    }
    let computed = outputs
        .iter()
        .map(|o| Expr::computing(o.clone()))
        .reduce(|a, b| Expr::And(Box::new(a), Box::new(b)));
    plan.filter = match (plan.filter.take(), computed) {
        (Some(f), Some(c)) => Some(Expr::And(Box::new(f), Box::new(c))),
        (f, c) => f.or(c),
    };
}

/// `q` as SQLite runs it for `want`: a scalar or `EXISTS` subquery under `LIMIT 1` (its own
/// `LIMIT X` becomes `LIMIT (X<>0)`, `sqlite3CodeSubselect`); an `EXISTS` subquery without
/// aggregates also without `DISTINCT` and, unless it has an `OFFSET`, `ORDER BY`
/// (`IgnorableOrderby`), and with whether its result columns go uncomputed (`true` for such
/// a subquery: SQLite keeps them, and chooses its loop with them, a covering index only if
/// it holds them too (table seed 16182026074300445653), but never computes them).
fn shaped(q: &ast::Query, want: Want) -> (ast::Query, bool) {
    let mut q = q.clone();
    if want == Want::In {
        return (q, false);
    }
    let one = ast::Expr::value(ast::Value::Number("1".into(), false));
    let limited = |x: &ast::Expr| {
        ast::Expr::Nested(Box::new(ast::Expr::BinaryOp {
            left: Box::new(x.clone()),
            op: ast::BinaryOperator::NotEq,
            right: Box::new(ast::Expr::value(ast::Value::Number("0".into(), false))),
        }))
    };
    let has_offset = match &mut q.limit_clause {
        None => {
            q.limit_clause = Some(ast::LimitClause::LimitOffset {
                limit: Some(one.clone()),
                offset: None,
                limit_by: Vec::new(),
            });
            false
        }
        Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => {
            *limit = Some(limit.as_ref().map_or_else(|| one.clone(), limited));
            offset.is_some()
        }
        Some(ast::LimitClause::OffsetCommaLimit { limit, .. }) => {
            *limit = limited(limit);
            true
        }
    };
    if want == Want::Exists {
        if let ast::SetExpr::Select(select) = q.body.as_mut() {
            let aggregated = !matches!(&select.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
                || select.having.is_some()
                || select
                    .projection
                    .iter()
                    .any(|i| matches!(i, ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } if crate::aggregate::has_aggregate(e)));
            if !aggregated {
                select.distinct = None;
                if !has_offset {
                    q.order_by = None;
                }
                return (q, true);
            }
        }
    }
    (q, false)
}
