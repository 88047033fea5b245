//! Views read as the queries they stand for: a statement that names a view of the file
//! (`CREATE VIEW recent AS SELECT ... FROM orders WHERE ...`) is rewritten with the view's
//! `SELECT` in the name's place, as a subquery in `FROM` under the view's name, which is what
//! SQLite does with a view (`sqlite3ExpandSubquery`: the view's `SELECT` copied in as a
//! subquery, then flattened or run as a co-routine like any other). The statement's text is
//! kept byte for byte around the name, so everything else is planned exactly as written; the
//! subquery then takes the paths every subquery in `FROM` takes (flattened as SQLite flattens
//! it, or run first and the query around it over its rows, or refused).
//!
//! Refused: a view with a column list (`CREATE VIEW v(a, b) AS ...`: a subquery in `FROM`
//! cannot rename its columns in SQLite's grammar), and views nested more than
//! [`MAX_DEPTH`] deep. A name that a `WITH` of the statement defines is the common table
//! expression's, never a view's.
//!
//! Layering: beside the statement planner; reads the file's schema through `partitioner`.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use partitioner::{PageFile, SchemaEntry};
use sqlparser::ast::{self, Spanned, TableFactor, Visit, Visitor};

use crate::error::{unsupported, SqlError};
use crate::source::offset_of;

/// Views within views are expanded up to this depth.
pub const MAX_DEPTH: usize = 32;

/// `sql` with every view of `file` it names replaced by the view's query (see the module
/// docs), or `None` when it names no view (or `file` has none).
pub fn expand_views(file: &PageFile, sql: &str) -> Result<Option<String>, SqlError> {
    let entries = partitioner::schema::read_schema(file)?;
    if !entries.iter().any(|e| e.kind == "view") {
        return Ok(None);
    }
    let mut text = sql.to_string();
    for depth in 0..=MAX_DEPTH {
        match expand_once(&text, &entries)? {
            Some(next) => text = next,
            None => return Ok((depth > 0).then_some(text)),
        }
    }
    unsupported(format!("views nested more than {MAX_DEPTH} deep"))
}

/// A view named in the statement: where its name is, whether an alias follows, its entry.
struct Named<'e> {
    from: usize,
    to: usize,
    aliased: bool,
    view: &'e SchemaEntry,
}

/// Finds the `FROM` items that name a view and the names of common table expressions.
struct Finder<'s, 'e> {
    sql: &'s str,
    entries: &'e [SchemaEntry],
    named: Vec<Named<'e>>,
    ctes: BTreeSet<String>,
    unplaced: bool,
}

impl Visitor for Finder<'_, '_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &ast::Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.insert(cte.alias.name.value.to_ascii_lowercase());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        let TableFactor::Table { name, alias, .. } = factor else {
            return ControlFlow::Continue(());
        };
        let parts: Vec<&str> = name
            .0
            .iter()
            .filter_map(|p| p.as_ident().map(|i| i.value.as_str()))
            .collect();
        let table = match parts.as_slice() {
            [t] => *t,
            [schema, t] if schema.eq_ignore_ascii_case("main") => *t,
            _ => return ControlFlow::Continue(()),
        };
        let Some(view) = self
            .entries
            .iter()
            .find(|e| e.kind == "view" && e.name.eq_ignore_ascii_case(table))
        else {
            return ControlFlow::Continue(());
        };
        let span = name.span();
        match (
            offset_of(self.sql, span.start),
            offset_of(self.sql, span.end),
        ) {
            (Some(from), Some(to)) if from < to => self.named.push(Named {
                from,
                to,
                aliased: alias.is_some(),
                view,
            }),
            _ => self.unplaced = true,
        }
        ControlFlow::Continue(())
    }
}

/// One round of expansion: the views `sql` names replaced by their queries (`None`: none).
fn expand_once(sql: &str, entries: &[SchemaEntry]) -> Result<Option<String>, SqlError> {
    // A statement that does not parse is left as written: planning it says why.
    let Ok(statements) = crate::dialect::parse(sql) else {
        return Ok(None);
    };
    let mut finder = Finder {
        sql,
        entries,
        named: Vec::new(),
        ctes: BTreeSet::new(),
        unplaced: false,
    };
    let _ = statements.visit(&mut finder);
    let Finder {
        mut named,
        ctes,
        unplaced,
        ..
    } = finder;
    named.retain(|n| !ctes.contains(&n.view.name.to_ascii_lowercase()));
    if named.is_empty() {
        return Ok(None);
    }
    if unplaced {
        return unsupported("a view whose place in the statement could not be found");
    }
    named.sort_by_key(|n| n.from);
    let mut out = String::with_capacity(sql.len() * 2);
    let mut at = 0;
    for n in &named {
        if n.from < at {
            return unsupported("a view whose place in the statement could not be found");
        }
        out.push_str(&sql[at..n.from]);
        out.push('(');
        out.push_str(&view_query(n.view)?);
        out.push(')');
        if !n.aliased {
            out.push_str(" AS \"");
            out.push_str(&n.view.name.replace('"', "\"\""));
            out.push('"');
        }
        at = n.to;
    }
    out.push_str(&sql[at..]);
    Ok(Some(out))
}

/// The text of the `SELECT` that view `entry` stands for, as its `CREATE VIEW` has it.
fn view_query(entry: &SchemaEntry) -> Result<String, SqlError> {
    let name = &entry.name;
    let Some(create) = entry.sql.as_deref() else {
        return unsupported(format!("view {name:?} has no CREATE VIEW statement"));
    };
    let statements = crate::dialect::parse(create).map_err(|e| {
        SqlError::Unsupported(format!(
            "view {name:?}: its CREATE VIEW does not parse: {e}"
        ))
    })?;
    let [ast::Statement::CreateView(view)] = statements.as_slice() else {
        return unsupported(format!("view {name:?}: its CREATE VIEW does not parse"));
    };
    if !view.columns.is_empty() {
        return unsupported(format!(
            "view {name:?} names its columns (CREATE VIEW {name}(...)); a view without a \
             column list is read"
        ));
    }
    let Some(start) = offset_of(create, view.query.span().start) else {
        return unsupported(format!("view {name:?}: its query could not be found"));
    };
    Ok(create[start..].trim_end().trim_end_matches(';').to_string())
}
