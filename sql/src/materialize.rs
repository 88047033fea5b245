//! A subquery in `FROM` (or the one common table expression of a `WITH`) that SQLite does not
//! flatten, answered as SQLite answers it: the subquery's rows first (its co-routine or
//! materialized table), then the query around it over them.
//!
//! The subquery is planned and run by corescan, as its own parallel scan through the
//! statement's [`SubqueryRunner`] (in the statement's snapshot), its rows in SQLite's order.
//! The query around it reads nothing else (one `FROM` item, no subquery, no join): SQLite
//! itself (the 3.54 library the binary links for `printf` and the planner's choices) runs
//! it over those rows, loaded into an in-memory table that is what SQLite's co-routine hands
//! over: the rows in their order (the table's rowids), each column with the affinity and
//! collation SQLite gives a subquery's column (`sqlite3SubqueryColumnTypes`), asked of
//! SQLite on a copy of the table's schema (a view of the subquery: its columns' names and
//! declared types, and the collation of a sorter over each), and the values stored as the
//! subquery computed them (no affinity applied on the way in, as a co-routine applies none).
//!
//! So `SELECT avg(n) FROM (SELECT k, count(*) AS n FROM t GROUP BY k)`, a `DISTINCT` or an
//! `ORDER BY ... LIMIT` inside, and a `WITH` of them are answered; the scan, which is the
//! work, stays corescan's. What differs from SQLite: SQLite stops a co-routine at the outer
//! `LIMIT` and skips the columns the outer query never reads, so a subquery's row or column
//! that fails there fails corescan's query where SQLite answers (an error, never another
//! answer).
//!
//! Layering: above the statement planner ([`crate::plan`]) and the subquery runner; below
//! the crate's API.

use rusqlite::limits::Limit;
use rusqlite::types::{ToSqlOutput, ValueRef as SqlValueRef};
use rusqlite::Connection;
use sqlparser::ast::{self, SetExpr, Spanned, TableFactor, Visit, Visitor};
use std::ops::ControlFlow;

use engine::value::Value;

use crate::error::{unsupported, SqlError};
use crate::source::offset_of;
use crate::subquery::SubqueryRunner;

/// The answer of a statement over a materialized subquery: its column names and rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Materialized {
    /// The output column names, as SQLite names them.
    pub names: Vec<String>,
    /// The rows, in SQLite's order.
    pub rows: Vec<Vec<Value>>,
}

/// Where the subquery is in the statement's text.
struct Shape {
    /// The subquery's SQL (between its parentheses).
    inner: String,
    /// The statement with the subquery replaced by `{table}` (a quoted name).
    outer: String,
    /// The name the rows' table takes (the alias, the common table expression's name).
    table: String,
    /// The names the query around the subquery reads that name a rowid (`rowid`, `q.oid`),
    /// as written: a subquery has none, so each must be one of its columns.
    rowids: Vec<(String, String)>,
    /// Whether the statement is a plain `SELECT *` of the subquery (no other clause).
    plain_outer: bool,
    /// Whether the statement only counts the subquery's rows (`SELECT count(*) FROM (...)`,
    /// no other clause, no `LIMIT` inside): neither their order nor which of equal values a
    /// row shows (`'a'` or `'A'` under `NOCASE`) changes its answer.
    counts_only: bool,
}

/// Answers `sql` when it is a query over one subquery in `FROM` or over the one common table
/// expression of its `WITH` (see the module docs), the subquery run by `runner`; `Ok(None)`
/// when the statement has another shape.
pub fn answer_materialized(
    sql: &str,
    runner: &dyn SubqueryRunner,
) -> Result<Option<Materialized>, SqlError> {
    let Some(shape) = shape_of(sql)? else {
        return Ok(None);
    };
    // Only counted, the subquery's rows may come in any order (no index of SQLite's to
    // follow, no refusal where its order cannot be followed): their number is the same.
    let planned = crate::plan::plan_query_running_in(&shape.inner, runner, shape.counts_only)?;
    let db = Connection::open_in_memory().map_err(sqlite)?;
    db.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)
        .map_err(sqlite)?;
    let mut columns = subquery_columns(&db, &planned.table.table.sql, &shape.inner)?;
    name_as_written(&shape.inner, &mut columns);
    // The rows' table has a rowid, the subquery none (`no such column: rowid`).
    for (written, last) in &shape.rowids {
        if !columns.iter().any(|c| c.name.eq_ignore_ascii_case(last)) {
            return Err(SqlError::Invalid(format!("no such column: {written}")));
        }
    }
    if !shape.counts_only {
        same_loop(&planned.table, sql, &shape.inner, shape.plain_outer)?;
    }
    // The copy of the table's schema goes: the rows' table may take its name.
    db.execute_batch(&format!(
        "DROP VIEW temp.\"corescan subquery\"; DROP TABLE main.{};",
        quote(&planned.table.table.name)
    ))
    .map_err(sqlite)?;
    let rows = match runner.run(&planned.table, planned.query)? {
        Ok(rows) => rows,
        Err(message) => return Err(SqlError::Invalid(message)),
    };
    // An index that promised rows the table lacks is damaged (as for any statement).
    if let Some(p) = &planned.index_plan {
        p.check_rows(rows.len() as u64)?;
    }
    load(&db, &shape.table, &columns, &rows)?;
    run_outer(&db, &shape.outer).map(Some)
}

/// Checks that SQLite runs the subquery inside `sql` as its co-routine or materialized table
/// with the loop it gives `inner` alone (which corescan followed): it pushes the outer
/// `WHERE` terms it can into the subquery (`pushDownWhereTerms`), which can change its
/// choice of index and so the order of the subquery's rows.
fn same_loop(
    table: &partitioner::TablePlan,
    sql: &str,
    inner: &str,
    plain_outer: bool,
) -> Result<(), SqlError> {
    let plan = |s: &str| {
        crate::sqlite_plan::plan_lines(table, s).map_err(|e| SqlError::Invalid(e.to_string()))
    };
    let (whole, alone) = (plan(sql)?, plan(inner)?);
    let depth = |l: &str| l.len() - l.trim_start().len();
    let alone: Vec<&str> = alone.iter().map(|l| l.trim()).collect();
    // A co-routine or materialized table (a window's sub-select may hold it in turn). A
    // statement SQLite flattens is refused even where its plan reads as the subquery's
    // alone (the subquery's ORDER BY can give way to the statement's, whose ties then come
    // in another order: tester table seed 11649506705936902268), but for a plain `SELECT *`
    // of it, which flattened is the subquery itself.
    let whole_text = || {
        whole
            .iter()
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let runs_apart = |l: &String| {
        let t = l.trim_start();
        t.starts_with("CO-ROUTINE") || t.starts_with("MATERIALIZE")
    };
    if !whole.iter().any(runs_apart) {
        if plain_outer && whole.iter().map(|l| l.trim()).eq(alone.iter().copied()) {
            return Ok(());
        }
        return unsupported(format!(
            "a subquery in FROM that SQLite flattens into the statement here ({}), where the \
             subquery's ORDER BY can give way to the statement's; `corescan sql` plans it \
             with DataFusion",
            whole_text()
        ));
    }
    let same = whole.iter().enumerate().any(|(at, l)| {
        let t = l.trim_start();
        if !(t.starts_with("CO-ROUTINE") || t.starts_with("MATERIALIZE")) {
            return false;
        }
        let d = depth(l);
        whole[at + 1..]
            .iter()
            .take_while(|l| depth(l) > d)
            .map(|l| l.trim())
            .eq(alone.iter().copied())
    });
    if !same {
        return unsupported(format!(
            "a subquery in FROM that SQLite reads otherwise inside the statement ({}) than \
             alone ({}): the outer WHERE pushed into it, or its ORDER BY dropped; `corescan \
             sql` plans it with DataFusion",
            whole_text(),
            alone.join("; ")
        ));
    }
    Ok(())
}

/// Whether `sql` is a statement [`answer_materialized`] answers (or refuses, naming why).
pub fn is_materializable(sql: &str) -> bool {
    !matches!(shape_of(sql), Ok(None))
}

/// One column of the subquery: its name, declared type and collation.
struct Column {
    name: String,
    declared: String,
    collation: String,
}

/// The statement's subquery and the query around it, if it has the shape.
fn shape_of(sql: &str) -> Result<Option<Shape>, SqlError> {
    let Ok(statements) = crate::dialect::parse(sql) else {
        return Ok(None);
    };
    let [ast::Statement::Query(query)] = statements.as_slice() else {
        return Ok(None);
    };
    let SetExpr::Select(select) = query.body.as_ref() else {
        return Ok(None);
    };
    let [from] = select.from.as_slice() else {
        return Ok(None);
    };
    if !from.joins.is_empty() {
        return Ok(None);
    }
    let (inner_query, table, cut) = match (&query.with, &from.relation) {
        (
            None,
            TableFactor::Derived {
                lateral: false,
                subquery,
                alias,
                sample: None,
            },
        ) => {
            if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
                return Ok(None);
            }
            let Some(open) = opening_paren(sql, subquery.span().start) else {
                return Ok(None);
            };
            let Some(close) = matching_paren(sql, open) else {
                return Ok(None);
            };
            let table = alias
                .as_ref()
                .map_or("(subquery)".to_string(), |a| a.name.value.clone());
            // The table takes the subquery's place; its alias stays written after it.
            let quoted = quote(&table);
            // `(...) AS q` becomes `"q" AS q`.
            let outer = format!("{}{quoted}{}", &sql[..open], &sql[close + 1..]);
            (subquery.as_ref(), table, (open, close, outer))
        }
        (Some(with), TableFactor::Table { name, alias: _, .. }) => {
            let [cte] = with.cte_tables.as_slice() else {
                return Ok(None);
            };
            if with.recursive || !cte.alias.columns.is_empty() || cte.materialized.is_some() {
                return Ok(None);
            }
            let [part] = name.0.as_slice() else {
                return Ok(None);
            };
            let Some(ident) = part.as_ident() else {
                return Ok(None);
            };
            if !ident.value.eq_ignore_ascii_case(&cte.alias.name.value) {
                return Ok(None);
            }
            let Some(open) = opening_paren(sql, cte.query.span().start) else {
                return Ok(None);
            };
            let Some(close) = matching_paren(sql, open) else {
                return Ok(None);
            };
            let (Some(start), Some(body)) = (
                offset_of(sql, with.with_token.0.span.start),
                offset_of(sql, query.body.span().start),
            ) else {
                return Ok(None);
            };
            if body <= close {
                return Ok(None);
            }
            // The statement without its WITH: the name now reads the rows' table.
            let outer = format!("{}{}", &sql[..start], &sql[body..]);
            (
                cte.query.as_ref(),
                cte.alias.name.value.clone(),
                (open, close, outer),
            )
        }
        _ => return Ok(None),
    };
    // The query around the subquery reads nothing else: no other subquery, no WITH inside.
    let mut around = query.as_ref().clone();
    around.with = None;
    if let SetExpr::Select(s) = around.body.as_mut() {
        s.from.clear();
    }
    if reads_a_table(&around) {
        return Ok(None);
    }
    let rowids = rowid_names(&around);
    let plain_outer = query.order_by.is_none()
        && query.limit_clause.is_none()
        && select.distinct.is_none()
        && select.selection.is_none()
        && select.having.is_none()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty())
        && matches!(
            select.projection.as_slice(),
            [ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..)]
        );
    let count_star = |item: &ast::SelectItem| {
        let (ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }) =
            item
        else {
            return false;
        };
        let ast::Expr::Function(f) = e else {
            return false;
        };
        f.name.to_string().eq_ignore_ascii_case("count")
            && f.over.is_none()
            && f.filter.is_none()
            && f.within_group.is_empty()
            && matches!(&f.parameters, ast::FunctionArguments::None)
            && matches!(&f.args, ast::FunctionArguments::List(l)
                if l.duplicate_treatment.is_none()
                    && l.clauses.is_empty()
                    && matches!(l.args.as_slice(),
                        [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)]))
    };
    // (Without a LIMIT inside: SQLite's loop, stopping there, would meet other rows, and a
    // row that fails among them fails its statement.)
    let counts_only = inner_query.limit_clause.is_none()
        && query.order_by.is_none()
        && query.limit_clause.is_none()
        && select.distinct.is_none()
        && select.selection.is_none()
        && select.having.is_none()
        && select.named_window.is_empty()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty())
        && !select.projection.is_empty()
        && select.projection.iter().all(count_star);
    if inner_query.with.is_some() {
        return unsupported("a WITH inside a subquery in FROM");
    }
    // SQLite drops a subquery's ORDER BY without LIMIT under a statement's own ORDER BY
    // (select.c, "omit superfluous ORDER BY on FROM-clause subquery"), unless an aggregate of
    // the statement needs it: the subquery's rows then come unsorted, which its plan does
    // not show (tester table seed 16960405019891652534).
    if inner_query.order_by.is_some()
        && inner_query.limit_clause.is_none()
        && query.order_by.is_some()
    {
        return unsupported(
            "a subquery in FROM with ORDER BY but no LIMIT under a statement with its own \
             ORDER BY (SQLite drops the subquery's, and its rows' order is then its loop's); \
             `corescan sql` plans it with DataFusion",
        );
    }
    let (open, close, outer) = cut;
    Ok(Some(Shape {
        inner: sql[open + 1..close].to_string(),
        outer,
        table,
        rowids,
        plain_outer,
        counts_only,
    }))
}

/// The names in `query` whose last part names a rowid (`rowid`, `_rowid_`, `oid`): each as
/// written, with that part.
fn rowid_names(query: &ast::Query) -> Vec<(String, String)> {
    struct Names(Vec<(String, String)>);
    impl Visitor for Names {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<()> {
            let parts: Vec<&ast::Ident> = match e {
                ast::Expr::Identifier(i) => vec![i],
                ast::Expr::CompoundIdentifier(p) => p.iter().collect(),
                _ => return ControlFlow::Continue(()),
            };
            if let Some(last) = parts.last() {
                if ["rowid", "_rowid_", "oid"]
                    .iter()
                    .any(|r| last.value.eq_ignore_ascii_case(r))
                {
                    let written: Vec<&str> = parts.iter().map(|p| p.value.as_str()).collect();
                    self.0.push((written.join("."), last.value.clone()));
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut names = Names(Vec::new());
    let _ = query.visit(&mut names);
    names.0
}

/// Whether `query` (with its `FROM` cleared) holds a subquery anywhere.
fn reads_a_table(query: &ast::Query) -> bool {
    struct Finds(bool);
    impl Visitor for Finds {
        type Break = ();
        fn pre_visit_query(&mut self, _: &ast::Query) -> ControlFlow<()> {
            self.0 = true;
            ControlFlow::Break(())
        }
    }
    // The query itself is the first query visited: look below it.
    let mut finds = Finds(false);
    let body = query.body.as_ref();
    let _ = body.visit(&mut finds);
    if finds.0 {
        return true;
    }
    let _ = query.order_by.visit(&mut finds);
    let _ = query.limit_clause.visit(&mut finds);
    finds.0
}

/// The byte offset of the `(` before the subquery starting at `start` (only blanks and
/// comments between them).
fn opening_paren(sql: &str, start: sqlparser::tokenizer::Location) -> Option<usize> {
    let at = offset_of(sql, start)?;
    let before = sql.get(..at)?.trim_end();
    before.ends_with('(').then(|| before.len() - 1)
}

/// The byte offset of the `)` that closes the `(` at `open`, past strings, quoted names and
/// comments.
fn matching_paren(sql: &str, open: usize) -> Option<usize> {
    let bytes = sql.as_bytes();
    let mut depth = 0usize;
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            q @ (b'\'' | b'"' | b'`') => {
                // To the closing quote; a doubled quote is one inside.
                i += 1;
                while i < bytes.len() {
                    if bytes[i] == q {
                        if bytes.get(i + 1) == Some(&q) {
                            i += 1;
                        } else {
                            break;
                        }
                    }
                    i += 1;
                }
            }
            b'[' => {
                while i < bytes.len() && bytes[i] != b']' {
                    i += 1;
                }
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// `name` as a double-quoted SQL identifier.
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// SQLite's error as the statement's.
fn sqlite(e: rusqlite::Error) -> SqlError {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(m)) => SqlError::Invalid(m),
        other => SqlError::Invalid(other.to_string()),
    }
}

/// The columns SQLite gives the subquery `inner` over the table created by `base`: a view
/// of it on a copy of the table's schema, its columns' names and declared types
/// (`PRAGMA table_xinfo`), and the collation of a sorter over each column (the key of
/// `ORDER BY random(), column`, which no order of the subquery satisfies).
fn subquery_columns(db: &Connection, base: &str, inner: &str) -> Result<Vec<Column>, SqlError> {
    let words: Vec<String> = base
        .split(|c: char| c.is_whitespace() || c == '(')
        .filter(|w| !w.is_empty())
        .take(2)
        .map(str::to_ascii_uppercase)
        .collect();
    if words != ["CREATE", "TABLE"] {
        return unsupported(
            "a subquery in FROM over a table whose schema entry is no CREATE TABLE",
        );
    }
    db.execute_batch(base).map_err(sqlite)?;
    db.execute_batch(&format!(
        "CREATE TEMP VIEW \"corescan subquery\" AS {inner}"
    ))
    .map_err(|e| match sqlite(e) {
        // A subquery of the subquery reads another table, which the copy lacks.
        SqlError::Invalid(m) if m.starts_with("no such table") => SqlError::Unsupported(
            "a subquery in FROM that reads another table in a subquery of its own".into(),
        ),
        other => other,
    })?;
    let mut columns = Vec::new();
    {
        let mut stmt = db
            .prepare("SELECT name, type FROM pragma_table_xinfo('corescan subquery', 'temp')")
            .map_err(sqlite)?;
        let mut rows = stmt.query([]).map_err(sqlite)?;
        while let Some(row) = rows.next().map_err(sqlite)? {
            columns.push(Column {
                name: row.get(0).map_err(sqlite)?,
                declared: row
                    .get::<_, Option<String>>(1)
                    .map_err(sqlite)?
                    .unwrap_or_default(),
                collation: String::new(),
            });
        }
    }
    for c in &mut columns {
        let probe = format!(
            "EXPLAIN SELECT 1 FROM temp.\"corescan subquery\" ORDER BY random(), {}",
            quote(&c.name)
        );
        let mut stmt = db.prepare(&probe).map_err(sqlite)?;
        let mut rows = stmt.query([]).map_err(sqlite)?;
        let mut key = None;
        while let Some(row) = rows.next().map_err(sqlite)? {
            let opcode: String = row.get(1).map_err(sqlite)?;
            let p4: Option<String> = row.get(5).ok();
            if matches!(opcode.as_str(), "SorterOpen" | "OpenEphemeral") {
                if let Some(k) = p4.filter(|k| k.starts_with("k(2,")) {
                    key = Some(k);
                }
            }
        }
        // `k(2,B,NOCASE)`: the second key's collation (`B` is BINARY; a `-` marks DESC).
        let collation = key
            .as_deref()
            .and_then(|k| k.strip_prefix("k(2,"))
            .and_then(|k| k.strip_suffix(')'))
            .and_then(|k| k.split(',').nth(1))
            .map(|k| k.trim_start_matches('-').to_string());
        c.collation = match collation.as_deref() {
            Some("B") | None => "BINARY".into(),
            Some(other) => other.to_string(),
        };
    }
    Ok(columns)
}

/// A subquery's column without an alias is named by the name as written (`rowid`, `ID`) or
/// its text: SQLite names a subquery's columns before it resolves them
/// (`sqlite3ColumnsFromExprList` on `TK_ID`, or the span), where a view's (asked of SQLite
/// above) are named after the column resolved (`id` for `rowid`, `g` for `likely(g)`).
/// Duplicates then take `:1`, `:2`, ... again.
fn name_as_written(inner: &str, columns: &mut [Column]) {
    let Ok(statements) = crate::dialect::parse(inner) else {
        return;
    };
    let [ast::Statement::Query(q)] = statements.as_slice() else {
        return;
    };
    let SetExpr::Select(s) = q.body.as_ref() else {
        return;
    };
    let stars = s
        .projection
        .iter()
        .filter(|i| {
            matches!(
                i,
                ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..)
            )
        })
        .count();
    let expanded = match stars {
        0 => 0,
        1 => match columns.len().checked_sub(s.projection.len() - 1) {
            Some(n) => n,
            None => return,
        },
        _ => return,
    };
    let texts = crate::plan::item_texts(inner, s);
    let mut at = 0;
    let mut renamed = false;
    for (k, item) in s.projection.iter().enumerate() {
        match item {
            ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                at += expanded;
                continue;
            }
            ast::SelectItem::UnnamedExpr(e) => {
                let mut e = e;
                while let ast::Expr::Nested(x) | ast::Expr::Collate { expr: x, .. } = e {
                    e = x;
                }
                // Any other expression by its text as written (`likelihood(g, 1.0)`, which a
                // view names `g`, resolved).
                let written = match e {
                    ast::Expr::Identifier(i) => Some(i.value.clone()),
                    ast::Expr::CompoundIdentifier(p) => p.last().map(|i| i.value.clone()),
                    _ => texts.as_ref().and_then(|t| t.get(k).cloned()),
                };
                // (A name SQLite would read as a boolean is its `columnN`, as SQLite gave it.)
                let written = written.filter(|w| {
                    !w.eq_ignore_ascii_case("true") && !w.eq_ignore_ascii_case("false")
                });
                if let (Some(w), Some(c)) = (written, columns.get_mut(at)) {
                    renamed |= c.name != w;
                    c.name = w;
                }
            }
            _ => {}
        }
        at += 1;
    }
    if !renamed {
        return;
    }
    for i in 1..columns.len() {
        let base = columns[i].name.clone();
        let taken = |n: &str, c: &[Column]| c[..i].iter().any(|c| c.name.eq_ignore_ascii_case(n));
        if taken(&base, columns) {
            let mut k = 1;
            while taken(&format!("{base}:{k}"), columns) {
                k += 1;
            }
            columns[i].name = format!("{base}:{k}");
        }
    }
}

/// Creates `table` with `columns` and loads `rows` into it in order, the values as they are
/// (the columns untyped while loading), then gives the columns their declared types and
/// collations (SQLite reads a table's affinity from its schema entry).
fn load(
    db: &Connection,
    table: &str,
    columns: &[Column],
    rows: &[Vec<Value>],
) -> Result<(), SqlError> {
    let untyped: Vec<String> = columns.iter().map(|c| quote(&c.name)).collect();
    // The declared type by its affinity's own name (only the affinity counts).
    let typed: Vec<String> = columns
        .iter()
        .map(|c| {
            use partitioner::affinity::Affinity as A;
            let declared = match A::of_declared_type(&c.declared) {
                A::Blob => "BLOB",
                A::Text => "TEXT",
                A::Numeric => "NUMERIC",
                A::Integer => "INTEGER",
                A::Real => "REAL",
            };
            format!("{} {declared} COLLATE {}", quote(&c.name), c.collation)
        })
        .collect();
    db.execute_batch(&format!(
        "CREATE TABLE {}({})",
        quote(table),
        untyped.join(", ")
    ))
    .map_err(sqlite)?;
    db.execute_batch("BEGIN").map_err(sqlite)?;
    {
        let marks = vec!["?"; columns.len()].join(", ");
        let mut insert = db
            .prepare(&format!("INSERT INTO {} VALUES ({marks})", quote(table)))
            .map_err(sqlite)?;
        for row in rows {
            let params: Vec<ToSqlOutput<'_>> = row
                .iter()
                .map(|v| {
                    ToSqlOutput::Borrowed(match v {
                        Value::Null => SqlValueRef::Null,
                        Value::Integer(i) => SqlValueRef::Integer(*i),
                        Value::Real(r) => SqlValueRef::Real(*r),
                        Value::Text(t) => SqlValueRef::Text(t),
                        Value::Blob(b) => SqlValueRef::Blob(b),
                    })
                })
                .collect();
            insert
                .execute(rusqlite::params_from_iter(params.iter()))
                .map_err(sqlite)?;
        }
    }
    db.execute_batch("COMMIT").map_err(sqlite)?;
    db.execute_batch("PRAGMA writable_schema = ON")
        .map_err(sqlite)?;
    db.execute(
        "UPDATE sqlite_schema SET sql = ?1 WHERE type = 'table' AND name = ?2",
        (
            format!("CREATE TABLE {}({})", quote(table), typed.join(", ")),
            table,
        ),
    )
    .map_err(sqlite)?;
    db.execute_batch("PRAGMA writable_schema = RESET")
        .map_err(sqlite)?;
    db.execute_batch("PRAGMA writable_schema = OFF")
        .map_err(sqlite)?;
    Ok(())
}

/// Runs the query around the subquery over the loaded table.
fn run_outer(db: &Connection, outer: &str) -> Result<Materialized, SqlError> {
    let mut stmt = db.prepare(outer).map_err(sqlite)?;
    let names: Vec<String> = stmt.column_names().map(str::to_string).collect();
    let width = names.len();
    let mut rows = Vec::new();
    let mut cursor = stmt.query([]).map_err(sqlite)?;
    while let Some(row) = cursor.next().map_err(sqlite)? {
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            values.push(match row.get_ref(i).map_err(sqlite)? {
                SqlValueRef::Null => Value::Null,
                SqlValueRef::Integer(v) => Value::Integer(v),
                SqlValueRef::Real(v) => Value::Real(v),
                SqlValueRef::Text(t) => Value::Text(t.to_vec()),
                SqlValueRef::Blob(b) => Value::Blob(b.to_vec()),
            });
        }
        rows.push(values);
    }
    Ok(Materialized { names, rows })
}
