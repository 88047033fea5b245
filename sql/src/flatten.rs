//! Subqueries in `FROM` (derived tables) and `WITH` over one table, answered as SQLite's
//! query flattener answers them (`flattenSubquery` in `select.c`): the outer query is
//! rewritten over the subquery's table, each reference to a subquery column replaced by the
//! column's expression, the two `WHERE`s joined (the subquery's first), and the result is
//! planned as one single-table query: one parallel scan, no intermediate rows.
//!
//! - **`WITH`** names are inlined first ([`inline_ctes`]): each reference to a common table
//!   expression, in `FROM` or in a subquery, becomes that expression as a subquery in `FROM`.
//!   `WITH RECURSIVE` and a `WITH` inside a subquery are refused.
//! - **Flattened** ([`flatten`]): a subquery without `DISTINCT`, window functions, `ORDER BY`,
//!   `LIMIT` or `OFFSET`, over one table (or over such a subquery), in the `FROM` of a query
//!   that reads nothing else; one that aggregates only into a query that does not (its
//!   `GROUP BY` becomes the query's, the query's `WHERE` its `HAVING`, as `flattenSubquery`
//!   moves them). SQLite runs an aggregate subquery as a co-routine instead, which gives the
//!   same rows, and the same order once ties follow the groups' ascending key order
//!   ([`Flat::grouped`]). Anything else is refused, naming what. The
//!   caller also checks that SQLite itself flattens the statement (no `CO-ROUTINE` or
//!   `MATERIALIZE` in its plan), so the answer is that of SQLite's own flattened query.
//! - **Names** are SQLite's: a subquery column is named by its alias, by the column it reads
//!   (as written), or by its text, duplicates taking `:1`, `:2`; an output column that reads a
//!   subquery column is named after it, any other by its text as written.
//! - **Collation and affinity:** a column of the subquery that reads a table column keeps the
//!   column's affinity and collation; any other keeps its affinity and carries its collation
//!   (`BINARY` when it has none) as an implicit one, as SQLite's `substExpr` adds it
//!   ([`IMPLICIT_COLLATION`]); `TRUE`/`FALSE` become `1`/`0`.
//! - A subquery has no rowid: `rowid` over it is SQLite's `no such column: rowid`.

use std::ops::ControlFlow;

use sqlparser::ast::{self, Expr, GroupByExpr, SelectItem, SetExpr, TableFactor, VisitMut};

use super::aggregate::has_aggregate;
use super::error::{invalid, unsupported, SqlError};

/// The name of the internal function that gives its argument an implicit collation: its
/// own, or `BINARY` when it has none (SQLite's `substExpr` wraps a substituted expression
/// that is no plain column in such a `COLLATE`). Not a name SQL text can reach unquoted.
pub(crate) const IMPLICIT_COLLATION: &str = "corescan implicit collation";

/// Whether `query` has a `WITH` or a subquery in its `FROM`: [`inline_ctes`] and [`flatten`]
/// apply.
pub(crate) fn applies(query: &ast::Query) -> bool {
    query.with.is_some()
        || matches!(query.body.as_ref(), SetExpr::Select(s)
            if s.from.iter().any(|f| matches!(f.relation, TableFactor::Derived { .. })))
}

/// One common table expression: its name, query (its own references inlined) and column
/// names.
#[derive(Clone)]
struct Cte {
    name: String,
    query: ast::Query,
    columns: Vec<ast::TableAliasColumnDef>,
}

/// `query` without its `WITH`: every reference to one of its common table expressions (a
/// table of that name in any `FROM`, the query's or a subquery's) replaced by the expression
/// as a subquery, aliased by the reference's alias or the expression's name.
pub(crate) fn inline_ctes(query: &ast::Query) -> Result<ast::Query, SqlError> {
    let mut q = query.clone();
    let Some(with) = q.with.take() else {
        return Ok(q);
    };
    if with.recursive {
        return unsupported("WITH RECURSIVE (`corescan sql` plans it with DataFusion)");
    }
    let defs: Vec<Cte> = with
        .cte_tables
        .into_iter()
        .map(|cte| Cte {
            name: cte.alias.name.value.clone(),
            query: *cte.query,
            columns: cte.alias.columns,
        })
        .collect();
    for (k, c) in defs.iter().enumerate() {
        if defs[..k]
            .iter()
            .any(|d| d.name.eq_ignore_ascii_case(&c.name))
        {
            return invalid(format!("duplicate WITH table name: {}", c.name));
        }
    }
    // As SQLite expands them: each as the query first names it, a common table expression
    // seeing every other one of the clause, before or after it; one reached again while
    // its own body is expanded is a circular reference (without RECURSIVE), and one never
    // named is never expanded (nor checked).
    let mut expanded: Vec<Option<Cte>> = (0..defs.len()).map(|_| None).collect();
    let mut active = vec![false; defs.len()];
    for name in tables_named(&q) {
        if let Some(k) = defs.iter().position(|d| d.name.eq_ignore_ascii_case(&name)) {
            expand(k, &defs, &mut expanded, &mut active)?;
        }
    }
    let ctes: Vec<Cte> = expanded.into_iter().flatten().collect();
    replace_references(&mut q, &ctes)?;
    Ok(q)
}

/// Expands the common table expression `defs[k]` into `expanded[k]` (see [`inline_ctes`]),
/// the ones its body names first.
fn expand(
    k: usize,
    defs: &[Cte],
    expanded: &mut [Option<Cte>],
    active: &mut [bool],
) -> Result<(), SqlError> {
    if expanded[k].is_some() {
        return Ok(());
    }
    if active[k] {
        // Inlined, it read the table of that name or, revisited, never ended.
        return invalid(format!("circular reference: {}", defs[k].name));
    }
    active[k] = true;
    let mut body = defs[k].query.clone();
    for name in tables_named(&body) {
        if let Some(j) = defs.iter().position(|d| d.name.eq_ignore_ascii_case(&name)) {
            expand(j, defs, expanded, active)?;
        }
    }
    let seen: Vec<Cte> = expanded.iter().flatten().cloned().collect();
    replace_references(&mut body, &seen)?;
    active[k] = false;
    expanded[k] = Some(Cte {
        name: defs[k].name.clone(),
        query: body,
        columns: defs[k].columns.clone(),
    });
    Ok(())
}

/// The one-part table names in the `FROM`s of `q` and its subqueries, in the order written.
fn tables_named(q: &ast::Query) -> Vec<String> {
    let mut names = Vec::new();
    let _ = ast::visit_relations(q, |r| {
        if let [ast::ObjectNamePart::Identifier(id)] = r.0.as_slice() {
            names.push(id.value.clone());
        }
        ControlFlow::<()>::Continue(())
    });
    names
}

/// Replaces the references to `ctes` in `q`'s `FROM`s (its own and its subqueries').
fn replace_references(q: &mut ast::Query, ctes: &[Cte]) -> Result<(), SqlError> {
    struct Inliner<'c> {
        ctes: &'c [Cte],
    }
    impl ast::VisitorMut for Inliner<'_> {
        type Break = SqlError;
        fn pre_visit_query(&mut self, q: &mut ast::Query) -> ControlFlow<SqlError> {
            if q.with.is_some() {
                return ControlFlow::Break(SqlError::Unsupported(
                    "WITH inside a subquery or a common table expression".into(),
                ));
            }
            ControlFlow::Continue(())
        }
        // After the factor's own parts: the subquery put in its place is not visited again
        // (its references were replaced when its expression was defined).
        fn post_visit_table_factor(&mut self, f: &mut TableFactor) -> ControlFlow<SqlError> {
            let TableFactor::Table {
                name, alias, args, ..
            } = f
            else {
                return ControlFlow::Continue(());
            };
            let [ast::ObjectNamePart::Identifier(id)] = name.0.as_slice() else {
                return ControlFlow::Continue(());
            };
            // The last definition of a name wins (SQLite: "duplicate WITH table name" is
            // an error, checked before).
            let Some(cte) = self
                .ctes
                .iter()
                .rev()
                .find(|c| c.name.eq_ignore_ascii_case(&id.value))
            else {
                return ControlFlow::Continue(());
            };
            if args.is_some() {
                return ControlFlow::Continue(());
            }
            let alias = ast::TableAlias {
                explicit: true,
                name: alias
                    .as_ref()
                    .map_or_else(|| ast::Ident::new(cte.name.clone()), |a| a.name.clone()),
                columns: cte.columns.clone(),
                at: None,
            };
            *f = TableFactor::Derived {
                lateral: false,
                subquery: Box::new(cte.query.clone()),
                alias: Some(alias),
                sample: None,
            };
            ControlFlow::Continue(())
        }
    }
    match q.visit(&mut Inliner { ctes }) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// One column of a subquery: its name and the expression it substitutes.
struct Column {
    name: String,
    expr: Expr,
    /// It reads a table column itself (no implicit collation is added).
    plain: bool,
}

/// `query` (without `WITH`) with the subquery in its `FROM` flattened into it, recursively:
/// a query over the subquery's table. `sql` is the statement's text (which the parser's
/// locations index) and `star` the table's columns in order (`*`). Refused where SQLite's
/// flattener does not apply or corescan does not follow it yet.
pub(crate) fn flatten(query: &ast::Query, sql: &str, star: &[String]) -> Result<Flat, SqlError> {
    // `true`/`false` name a column of the table inside the subquery but are booleans around
    // it (a subquery's column is never so named: `columnN`); once flattened both would read
    // the table's column.
    let bool_column = star
        .iter()
        .any(|c| c.eq_ignore_ascii_case("true") || c.eq_ignore_ascii_case("false"));
    let mut booleans = false;
    let _ = ast::visit_expressions(query, |e| {
        booleans |= matches!(e, Expr::Value(v) if matches!(v.value, ast::Value::Boolean(_)));
        ControlFlow::<()>::Continue(())
    });
    if bool_column && booleans {
        return unsupported(
            "true or false beside a subquery in FROM over a table with a column of that name",
        );
    }
    let mut grouped = false;
    let (query, names) = flatten_at(query, sql, star, true, &mut grouped)?;
    Ok(Flat {
        query,
        grouped,
        names,
    })
}

/// A query flattened ([`flatten`]).
pub(crate) struct Flat {
    /// The query over the table.
    pub query: ast::Query,
    /// A subquery that aggregates was flattened: SQLite runs such a subquery as a co-routine
    /// (it never flattens one), whose groups reach the query in their key order, ascending;
    /// the rewritten query gives the same rows in the same order as long as its `ORDER BY`
    /// breaks ties in that order (not in the directions SQLite gives a `GROUP BY` it sorts
    /// for an `ORDER BY` of as many terms).
    pub grouped: bool,
    /// The name of each result column of `query` that SQLite names otherwise than its
    /// expression now reads (a subquery column by the subquery's name for it, `*` expanded
    /// over the subquery): names only, not aliases, which an `ORDER BY` would resolve to.
    pub names: Vec<Option<String>>,
}

/// [`flatten`] of the statement's own query (`top`) or of a subquery in `FROM`, whose
/// columns SQLite names before it resolves them: a plain reference by the name as written,
/// not by the column it reads.
fn flatten_at(
    query: &ast::Query,
    sql: &str,
    star: &[String],
    top: bool,
    any_grouped: &mut bool,
) -> Result<(ast::Query, Vec<Option<String>>), SqlError> {
    let SetExpr::Select(outer) = query.body.as_ref() else {
        return unsupported("compound SELECT (UNION, INTERSECT, EXCEPT)");
    };
    let [from] = outer.from.as_slice() else {
        return unsupported("joins (one table only; `corescan sql` plans joins with DataFusion)");
    };
    if !from.joins.is_empty() {
        return unsupported("joins (one table only; `corescan sql` plans joins with DataFusion)");
    }
    let TableFactor::Derived {
        lateral,
        subquery,
        alias,
        ..
    } = &from.relation
    else {
        return Ok((query.clone(), vec![None; outer.projection.len()]));
    };
    if *lateral {
        return unsupported("LATERAL");
    }
    let (inner, inner_names) = flatten_at(subquery, sql, star, false, any_grouped)?;
    let (sub, grouped) = flattenable(&inner)?;
    *any_grouped |= grouped;
    // The subquery's own aliases and GROUP BY positions name its result columns, not the
    // query's: resolved before its clauses move.
    let sub = &own_names_resolved(sub, star)?;
    // An aggregate subquery is flattened only into a query that does not aggregate
    // (restriction 1): its groups become the query's, the query's WHERE their HAVING.
    if grouped && aggregates(outer) {
        return unsupported(
            "an aggregate or GROUP BY over a subquery in FROM that aggregates (SQLite does not \
             flatten it; `corescan sql` plans it with DataFusion)",
        );
    }
    let mut columns = subquery_columns(sub, sql, star, &inner_names)?;
    if let Some(a) = alias {
        if !a.columns.is_empty() {
            if a.columns.len() != columns.len() {
                return invalid(format!(
                    "table {} has {} values for {} columns",
                    a.name.value,
                    columns.len(),
                    a.columns.len()
                ));
            }
            for (c, n) in columns.iter_mut().zip(&a.columns) {
                c.name = n.name.value.clone();
            }
        }
    }
    let scope = Scope {
        alias: alias.as_ref().map(|a| a.name.value.clone()),
        columns,
        aliases: outer
            .projection
            .iter()
            .filter_map(|i| match i {
                SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
                _ => None,
            })
            .collect(),
    };

    // The result columns, each named as SQLite names it before flattening.
    let texts = super::plan::item_texts(sql, outer);
    let mut projection = Vec::with_capacity(outer.projection.len());
    let mut names: Vec<Option<String>> = Vec::with_capacity(outer.projection.len());
    for (k, item) in outer.projection.iter().enumerate() {
        match item {
            SelectItem::UnnamedExpr(e) => {
                let name = match (scope.column_of(e), strip(e)) {
                    (Some(c), _) if top => c.name.clone(),
                    (Some(_), Expr::Identifier(i)) => i.value.clone(),
                    (Some(_), Expr::CompoundIdentifier(parts)) => {
                        parts.last().map(|p| p.value.clone()).unwrap_or_default()
                    }
                    _ => texts
                        .as_ref()
                        .and_then(|t| t.get(k).cloned())
                        .unwrap_or_else(|| e.to_string()),
                };
                projection.push(SelectItem::UnnamedExpr(scope.substitute(e, false)?));
                names.push(Some(name));
            }
            SelectItem::ExprWithAlias { expr, alias } => {
                projection.push(SelectItem::ExprWithAlias {
                    expr: scope.substitute(expr, false)?,
                    alias: alias.clone(),
                });
                names.push(None);
            }
            SelectItem::Wildcard(_) => scope.star(&mut projection, &mut names),
            SelectItem::QualifiedWildcard(kind, _) => {
                match scope.alias.as_deref() {
                    Some(a) => wildcard_table(kind, a)?,
                    None => return invalid(format!("no such table: {}", wildcard_name(kind))),
                }
                scope.star(&mut projection, &mut names);
            }
            other => return unsupported(format!("the select item {other}")),
        }
    }

    let mut select = outer.as_ref().clone();
    select.projection = projection;
    select.from = sub.from.clone();
    let outer_where = match &outer.selection {
        Some(w) => Some(scope.substitute(w, false)?),
        None => None,
    };
    if grouped {
        // flattenSubquery: the subquery's WHERE and GROUP BY, its HAVING and then the
        // query's WHERE as the HAVING.
        select.selection = sub.selection.clone();
        select.group_by = sub.group_by.clone();
        select.having = both(sub.having.clone(), outer_where);
    } else {
        select.selection = both(sub.selection.clone(), outer_where);
        if let GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
            for e in exprs.iter_mut() {
                *e = scope.substitute(e, false)?;
            }
        }
        if let Some(h) = &mut select.having {
            *h = scope.substitute(h, false)?;
        }
    }
    for w in &mut select.named_window {
        scope.substitute_in(w)?;
    }
    let mut q = query.clone();
    q.body = Box::new(SetExpr::Select(Box::new(select)));
    if let Some(ob) = &mut q.order_by {
        if let ast::OrderByKind::Expressions(terms) = &mut ob.kind {
            for t in terms.iter_mut() {
                t.expr = scope.substitute(&t.expr, true)?;
            }
        }
    }
    Ok((q, names))
}

/// `s` with the names its `WHERE`, `GROUP BY` and `HAVING` resolve to its own result
/// aliases (a name that is no column of the table, `star`, nor the rowid) replaced by the
/// aliased expressions, and its `GROUP BY` positions by the result columns they name.
fn own_names_resolved(s: &ast::Select, star: &[String]) -> Result<ast::Select, SqlError> {
    let aliases: Vec<(String, Expr)> = s
        .projection
        .iter()
        .filter_map(|i| match i {
            SelectItem::ExprWithAlias { expr, alias } => Some((alias.value.clone(), expr.clone())),
            _ => None,
        })
        .collect();
    let items: Vec<Option<&Expr>> = s
        .projection
        .iter()
        .map(|i| match i {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
            _ => None,
        })
        .collect();
    let is_column = |n: &str| {
        star.iter().any(|c| c.eq_ignore_ascii_case(n))
            || ["rowid", "_rowid_", "oid"]
                .iter()
                .any(|r| r.eq_ignore_ascii_case(n))
    };
    struct Aliases<'a> {
        aliases: &'a [(String, Expr)],
        is_column: &'a dyn Fn(&str) -> bool,
        depth: usize,
    }
    impl ast::VisitorMut for Aliases<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            if self.depth == 0 {
                if let Expr::Identifier(i) = e {
                    if !(self.is_column)(&i.value) {
                        if let Some((_, x)) = self
                            .aliases
                            .iter()
                            .find(|(a, _)| a.eq_ignore_ascii_case(&i.value))
                        {
                            *e = Expr::Nested(Box::new(x.clone()));
                        }
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut out = s.clone();
    let resolve = |e: &mut Expr| {
        let _ = e.visit(&mut Aliases {
            aliases: &aliases,
            is_column: &is_column,
            depth: 0,
        });
    };
    if let Some(w) = &mut out.selection {
        resolve(w);
    }
    if let Some(h) = &mut out.having {
        resolve(h);
    }
    if let GroupByExpr::Expressions(exprs, _) = &mut out.group_by {
        for (n, e) in exprs.iter_mut().enumerate() {
            if let Expr::Value(v) = strip(e) {
                if let ast::Value::Number(k, _) = &v.value {
                    let k: usize = k.parse().unwrap_or(0);
                    match items.get(k.wrapping_sub(1)).copied().flatten() {
                        Some(x) => *e = x.clone(),
                        None => {
                            return invalid(format!(
                                "{} GROUP BY term out of range - should be between 1 and {}",
                                super::plan::ordinal(n + 1),
                                items.len()
                            ))
                        }
                    }
                    continue;
                }
            }
            resolve(e);
        }
    }
    Ok(out)
}

/// `a AND b` (each in parentheses), or the one there is.
fn both(a: Option<Expr>, b: Option<Expr>) -> Option<Expr> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Expr::BinaryOp {
            left: Box::new(Expr::Nested(Box::new(a))),
            op: ast::BinaryOperator::And,
            right: Box::new(Expr::Nested(Box::new(b))),
        }),
        (a, b) => a.or(b),
    }
}

/// Whether `s` aggregates: `GROUP BY`, `HAVING` or an aggregate call in its result columns.
pub(crate) fn aggregates(s: &ast::Select) -> bool {
    let grouped = match &s.group_by {
        GroupByExpr::Expressions(e, m) => !e.is_empty() || !m.is_empty(),
        GroupByExpr::All(_) => true,
    };
    grouped
        || s.having.is_some()
        || s.projection.iter().any(|item| match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                has_aggregate(e)
            }
            _ => false,
        })
}

/// The `SELECT` of a subquery in `FROM` when SQLite's flattener takes it and corescan
/// follows it, and whether it aggregates; else the refusal naming what it has.
fn flattenable(q: &ast::Query) -> Result<(&ast::Select, bool), SqlError> {
    let SetExpr::Select(s) = q.body.as_ref() else {
        return unsupported("a compound SELECT (UNION, ...) in FROM");
    };
    let refuse = |what: &str| {
        unsupported(format!(
            "a subquery in FROM with {what} (corescan query flattens only subqueries that \
             filter and compute columns; `corescan sql` plans the others with DataFusion)"
        ))
    };
    if q.order_by.is_some() {
        return refuse("ORDER BY");
    }
    if q.limit_clause.is_some() || q.fetch.is_some() {
        return refuse("LIMIT or OFFSET");
    }
    if s.distinct.is_some() {
        return refuse("DISTINCT");
    }
    if !s.named_window.is_empty() {
        return refuse("window functions");
    }
    for item in &s.projection {
        let e = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => continue,
        };
        if has_window(e) {
            return refuse("window functions");
        }
    }
    // SQLite resolves every result column, also those the statement never reads, which
    // flattening drops (the differential tester's table seed 15168459189746329112).
    crate::subquery::dropped_projection_errors(q)?;
    match s.from.as_slice() {
        [one] if one.joins.is_empty() => Ok((s, aggregates(s))),
        [] => unsupported("a subquery in FROM without FROM (corescan scans a table)"),
        _ => unsupported("joins (one table only; `corescan sql` plans joins with DataFusion)"),
    }
}

/// Whether `e` calls a window function (outside its subqueries, which are queries of their
/// own).
fn has_window(e: &Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(e, |x| {
        if let Expr::Function(f) = x {
            if f.over.is_some() {
                found = true;
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    found
}

/// The result columns of the flattenable subquery `s`, named as SQLite names them
/// (`sqlite3ColumnsFromExprList`).
fn subquery_columns(
    s: &ast::Select,
    sql: &str,
    star: &[String],
    names: &[Option<String>],
) -> Result<Vec<Column>, SqlError> {
    let texts = super::plan::item_texts(sql, s);
    let mut out: Vec<Column> = Vec::new();
    let quoted = |n: &str| Expr::Identifier(ast::Ident::with_quote('"', n));
    // `true` or `false` names the table's column of that name where there is one.
    let named_bool = |e: &Expr| match strip(e) {
        Expr::Value(v) => match v.value {
            ast::Value::Boolean(b) => star
                .iter()
                .find(|c| c.eq_ignore_ascii_case(crate::expr::bool_word(b))),
            _ => None,
        },
        _ => None,
    };
    for (k, item) in s.projection.iter().enumerate() {
        if let Some(c) = match item {
            SelectItem::UnnamedExpr(e) => named_bool(e).map(|c| (c.clone(), c)),
            SelectItem::ExprWithAlias { expr, alias } => {
                named_bool(expr).map(|c| (alias.value.clone(), c))
            }
            _ => None,
        } {
            out.push(Column {
                name: c.0,
                expr: quoted(c.1),
                plain: true,
            });
            continue;
        }
        match item {
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                for c in star {
                    out.push(Column {
                        name: c.clone(),
                        expr: quoted(c),
                        plain: true,
                    });
                }
            }
            SelectItem::ExprWithAlias { expr, alias } => out.push(Column {
                name: alias.value.clone(),
                expr: expr.clone(),
                plain: is_column(expr),
            }),
            SelectItem::UnnamedExpr(e) => {
                let name = match skip_collate(e) {
                    Expr::Identifier(i) => i.value.clone(),
                    Expr::CompoundIdentifier(parts) => {
                        parts.last().map(|p| p.value.clone()).unwrap_or_default()
                    }
                    _ => texts
                        .as_ref()
                        .and_then(|t| t.get(k).cloned())
                        .unwrap_or_else(|| e.to_string()),
                };
                out.push(Column {
                    name,
                    expr: e.clone(),
                    plain: is_column(e),
                });
            }
            other => return unsupported(format!("the select item {other}")),
        }
    }
    // A column the subquery's own flattening named (one per result item then: no `*`).
    if names.len() == out.len() {
        for (c, n) in out.iter_mut().zip(names) {
            if let Some(n) = n {
                c.name = n.clone();
            }
        }
    }
    // A name SQLite would read as a boolean is `columnN` (`sqlite3IsTrueOrFalse`).
    for (i, c) in out.iter_mut().enumerate() {
        if c.name.eq_ignore_ascii_case("true") || c.name.eq_ignore_ascii_case("false") {
            c.name = format!("column{}", i + 1);
        }
    }
    // Duplicate names take `:1`, `:2`, ... (compared without case).
    for i in 1..out.len() {
        let base = out[i].name.clone();
        let taken =
            |n: &str, out: &[Column]| out[..i].iter().any(|c| c.name.eq_ignore_ascii_case(n));
        if taken(&base, &out) {
            let mut k = 1;
            while taken(&format!("{base}:{k}"), &out) {
                k += 1;
            }
            out[i].name = format!("{base}:{k}");
        }
    }
    Ok(out)
}

/// `e` without the parentheses around it.
fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Nested(x) => strip(x),
        _ => e,
    }
}

/// `e` without parentheses and `COLLATE` around it (SQLite's
/// `sqlite3ExprSkipCollateAndLikely` before names are resolved, when `likely()` is still a
/// function: it names a subquery's column).
fn skip_collate(e: &Expr) -> &Expr {
    match e {
        Expr::Nested(x) | Expr::Collate { expr: x, .. } => skip_collate(x),
        _ => e,
    }
}

/// Whether `e` reads a column itself (SQLite's `TK_COLUMN`, parentheses aside).
fn is_column(e: &Expr) -> bool {
    matches!(strip(e), Expr::Identifier(_) | Expr::CompoundIdentifier(_))
}

/// The names the outer query sees: the subquery's columns, under its alias.
struct Scope {
    alias: Option<String>,
    columns: Vec<Column>,
    /// The outer query's result aliases (names that are not columns may be these).
    aliases: Vec<String>,
}

impl Scope {
    /// The subquery column a plain reference `e` names.
    fn column_of(&self, e: &Expr) -> Option<&Column> {
        let name = match strip(e) {
            Expr::Identifier(i) => &i.value,
            Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [q, c]
                    if self
                        .alias
                        .as_deref()
                        .is_some_and(|a| a.eq_ignore_ascii_case(&q.value)) =>
                {
                    &c.value
                }
                _ => return None,
            },
            _ => return None,
        };
        self.columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// What a reference to column `c` becomes.
    fn replacement(c: &Column) -> Expr {
        let e = match strip(&c.expr) {
            Expr::Value(v) if matches!(v.value, ast::Value::Boolean(_)) => {
                let ast::Value::Boolean(b) = v.value else {
                    unreachable!()
                };
                Expr::value(ast::Value::Number(if b { "1" } else { "0" }.into(), false))
            }
            _ => c.expr.clone(),
        };
        if c.plain {
            return e;
        }
        Expr::Function(ast::Function {
            name: ast::ObjectName::from(vec![ast::Ident::new(IMPLICIT_COLLATION)]),
            uses_odbc_syntax: false,
            parameters: ast::FunctionArguments::None,
            args: ast::FunctionArguments::List(ast::FunctionArgumentList {
                duplicate_treatment: None,
                args: vec![ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(
                    Expr::Nested(Box::new(e)),
                ))],
                clauses: Vec::new(),
            }),
            filter: None,
            null_treatment: None,
            over: None,
            within_group: Vec::new(),
        })
    }

    /// `e` with its references to the subquery's columns replaced (not inside its own
    /// subqueries, which see the subquery as an outer table). `order_by`: a name that is one
    /// of the outer query's aliases stays (an `ORDER BY` name is an alias first).
    fn substitute(&self, e: &Expr, order_by: bool) -> Result<Expr, SqlError> {
        if order_by {
            let bare = match strip(e) {
                Expr::Collate { expr, .. } => strip(expr),
                x => x,
            };
            if let Expr::Identifier(i) = bare {
                if self
                    .aliases
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(&i.value))
                {
                    return Ok(e.clone());
                }
            }
        }
        let mut e = e.clone();
        self.substitute_in(&mut e)?;
        Ok(e)
    }

    /// [`Self::substitute`] in place, in any part of the AST.
    fn substitute_in<V: VisitMut>(&self, node: &mut V) -> Result<(), SqlError> {
        struct Subst<'s> {
            scope: &'s Scope,
            depth: usize,
        }
        impl ast::VisitorMut for Subst<'_> {
            type Break = SqlError;
            fn pre_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<SqlError> {
                self.depth += 1;
                ControlFlow::Continue(())
            }
            fn post_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<SqlError> {
                self.depth -= 1;
                ControlFlow::Continue(())
            }
            fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<SqlError> {
                // An AND SQLite's parser made the integer 0 names nothing (`rowid AND 0`).
                if let Expr::BinaryOp {
                    left,
                    op: ast::BinaryOperator::And,
                    right,
                } = e
                {
                    if crate::expr::parser_folds_and(left, right) {
                        *e = Expr::value(ast::Value::Number("0".into(), false));
                    }
                }
                ControlFlow::Continue(())
            }
            fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<SqlError> {
                if self.depth > 0 {
                    return ControlFlow::Continue(());
                }
                let name = match e {
                    Expr::Identifier(i) => i.value.clone(),
                    Expr::CompoundIdentifier(parts) => parts
                        .iter()
                        .map(|p| p.value.as_str())
                        .collect::<Vec<_>>()
                        .join("."),
                    _ => return ControlFlow::Continue(()),
                };
                match self.scope.column_of(e) {
                    Some(c) => *e = Scope::replacement(c),
                    // SQLite reads a double-quoted name that names no column as a string.
                    None if matches!(e, Expr::Identifier(i) if i.quote_style == Some('"'))
                        && !self
                            .scope
                            .aliases
                            .iter()
                            .any(|a| a.eq_ignore_ascii_case(&name)) =>
                    {
                        *e = Expr::value(ast::Value::SingleQuotedString(name));
                    }
                    None => {
                        let alias = matches!(e, Expr::Identifier(_))
                            && self
                                .scope
                                .aliases
                                .iter()
                                .any(|a| a.eq_ignore_ascii_case(&name));
                        if !alias {
                            return ControlFlow::Break(SqlError::Invalid(format!(
                                "no such column: {name}"
                            )));
                        }
                    }
                }
                ControlFlow::Continue(())
            }
        }
        match node.visit(&mut Subst {
            scope: self,
            depth: 0,
        }) {
            ControlFlow::Break(e) => Err(e),
            ControlFlow::Continue(()) => Ok(()),
        }
    }

    /// The result columns of `*` over the subquery: named as by `AS` (SQLite's expansion
    /// names them so, and an `ORDER BY` name finds them).
    fn star(&self, projection: &mut Vec<SelectItem>, names: &mut Vec<Option<String>>) {
        for c in &self.columns {
            projection.push(SelectItem::ExprWithAlias {
                expr: Scope::replacement(c),
                alias: ast::Ident::with_quote('"', c.name.clone()),
            });
            names.push(None);
        }
    }
}

/// Checks that `t.*` names `table` (the table's name or alias, case-insensitively): SQLite's
/// `no such table: x` otherwise, and its syntax error for a schema-qualified `main.t.*`.
pub(crate) fn wildcard_table(
    kind: &ast::SelectItemQualifiedWildcardKind,
    table: &str,
) -> Result<(), SqlError> {
    let name = match kind {
        ast::SelectItemQualifiedWildcardKind::ObjectName(n) => match n.0.as_slice() {
            [one] => one.as_ident().map(|i| i.value.clone()),
            _ => return Err(SqlError::Syntax("near \"*\": syntax error".into())),
        },
        ast::SelectItemQualifiedWildcardKind::Expr(_) => None,
    };
    match name {
        Some(n) if n.eq_ignore_ascii_case(table) => Ok(()),
        _ => invalid(format!("no such table: {}", wildcard_name(kind))),
    }
}

/// The `x` of `x.*`, as written.
pub(crate) fn wildcard_name(kind: &ast::SelectItemQualifiedWildcardKind) -> String {
    match kind {
        ast::SelectItemQualifiedWildcardKind::ObjectName(n) => n.to_string(),
        ast::SelectItemQualifiedWildcardKind::Expr(e) => e.to_string(),
    }
}
