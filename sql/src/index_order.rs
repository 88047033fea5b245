//! Following SQLite's loop ([`crate::sqlite_plan`]) when it reads the table through an
//! index: corescan still scans the table (in parallel, in rowid order), and gives the rows
//! the order SQLite's loop gives them.
//!
//! - **Plain rows**: the loop's order is the index's key order, each key column ascending or
//!   descending as the index declares it (all reversed when SQLite walks the index
//!   backwards), with its collation, NULLs lowest, then the rowid. Appended to the query's own
//!   `ORDER BY` as tie-breakers (SQLite's sorter keeps ties in the order the loop gives them),
//!   or alone without `ORDER BY`, that order picks SQLite's rows under `LIMIT`/`OFFSET` in
//!   SQLite's order. The rows a `WHERE` keeps are the same whichever loop finds them.
//! - **Groups**: when SQLite's loop delivers the `GROUP BY` (no `USE TEMP B-TREE FOR GROUP
//!   BY`), groups come in the index's order of their keys, which can be descending; that
//!   order breaks the ties of the query's `ORDER BY`. Within a group, rows come in index
//!   order; that shows only where equal values differ (`'a'` and `'A'` under `NOCASE`, `1`
//!   and `1.0` in a column without a type): in which of them `min()`, `max()`, a `DISTINCT`
//!   aggregate or a group key returns. corescan reads a group's rows in rowid order, which is
//!   the index's order when every key column of the index is a group key or made constant by
//!   `WHERE`; other such queries are refused.
//! - A loop corescan cannot follow (`MULTI-INDEX OR`: the rows of one index, then those of
//!   the next not yet seen) is refused where the answer depends on its order.
//!
//! What differs from SQLite: SQLite's loop stops at the `LIMIT` and seeks the index range
//! the `WHERE` names, so it evaluates `WHERE` on fewer rows. A `WHERE` or output column that
//! fails (an integer overflow, a bad `LIKE` escape) on a row SQLite never reaches fails
//! corescan's query; it never changes an answer.

use engine::datatype3::Collation;
use engine::query::ir::{AggFunc, AggSpec, Expr, Shape, SortKey};
use engine::value::Value;
use partitioner::TablePlan;
use sqlparser::ast;

use super::error::SqlError;
use super::expr::{Resolver, Stage};
use super::order::constant_columns;
use super::sqlite_plan::{Access, KeyColumn, KeySource, SqliteChoice};

/// One key column of an index, resolved: its expression (row stage), collation and `DESC`.
struct Key {
    expr: Expr,
    collation: Collation,
    descending: bool,
}

/// The `ORDER BY` and direction that give a query SQLite's rows in SQLite's order under
/// `choice`: `order_by` and `backward` as planned for a scan in rowid order, `written` the
/// `ORDER BY` as written (before a scan in rowid order was found to deliver it), `filter`
/// the `WHERE` as written.
pub(crate) fn follow(
    r: &mut Resolver<'_>,
    choice: &SqliteChoice,
    shape: &Shape,
    filter: Option<&ast::Expr>,
    written: Vec<SortKey>,
    order_by: Vec<SortKey>,
    backward: bool,
) -> Result<(Vec<SortKey>, bool), SqlError> {
    match shape {
        Shape::Rows { .. } => match &choice.access {
            Access::Rowid { backward: b } => {
                if *b && !backward && order_by.is_empty() {
                    return refuse(choice, "order of rows");
                }
                Ok((order_by, backward))
            }
            Access::Index {
                name,
                backward: b,
                key,
                ..
            } => {
                let mut keys = written;
                for k in resolve_key(r, name, key)? {
                    let descending = k.descending != *b;
                    keys.push(SortKey {
                        expr: k.expr,
                        descending,
                        nulls_first: !descending,
                        collation: k.collation,
                    });
                }
                keys.push(SortKey {
                    expr: r.rowid()?.expr,
                    descending: *b,
                    nulls_first: !*b,
                    collation: Collation::Binary,
                });
                Ok((keys, false))
            }
            Access::Other(_) => refuse(choice, "order of rows"),
        },
        Shape::Groups {
            keys, aggregates, ..
        } => {
            let (name, b, key) = match &choice.access {
                Access::Rowid { .. } => return Ok((order_by, backward)),
                Access::Index {
                    name,
                    backward,
                    key,
                    ..
                } => (name, *backward, resolve_key(r, name, key)?),
                Access::Other(_) => {
                    if order_sensitive(r, keys, aggregates) {
                        return refuse(choice, "result");
                    }
                    return Ok((order_by, backward));
                }
            };
            let constants = constant_columns(r, filter);
            let constant = |k: &Key| {
                matches!(k.expr, Expr::Column(slot) if constants.iter().any(|&(s, c)| {
                    s == slot && c.is_none_or(|c| c == k.collation)
                }))
            };
            let group_key = |k: &Key| {
                keys.iter()
                    .position(|(e, c)| *e == k.expr && *c == k.collation)
            };
            if order_sensitive(r, keys, aggregates)
                && !key.iter().all(|k| group_key(k).is_some() || constant(k))
            {
                return Err(SqlError::Unsupported(format!(
                    "the result of this query depends on the order of the rows within its \
                     groups, which SQLite takes from index {name:?} ({}): a group key or the \
                     argument of min(), max() or a DISTINCT aggregate can hold equal values \
                     that differ (1 and 1.0 in a column without a type, 'a' and 'A' under \
                     NOCASE), and which of them shows depends on that order; corescan cannot \
                     follow it yet",
                    choice.lines.join("; ")
                )));
            }
            let mut order_by = order_by;
            if !choice.sorts_groups && !keys.is_empty() {
                // The groups come in the loop's order of their keys.
                let mut placed = vec![false; keys.len()];
                for k in &key {
                    if let Some(g) = group_key(k) {
                        if !placed[g] {
                            placed[g] = true;
                            let descending = k.descending != b;
                            order_by.push(SortKey {
                                expr: Expr::Column(g),
                                descending,
                                nulls_first: !descending,
                                collation: k.collation,
                            });
                        }
                    } else if !constant(k) {
                        break;
                    }
                }
                if placed.iter().any(|p| !p) {
                    return Err(SqlError::Unsupported(format!(
                        "the order of this query's groups: SQLite groups its rows as index \
                         {name:?} gives them ({}), in an order corescan cannot follow yet",
                        choice.lines.join("; ")
                    )));
                }
            }
            Ok((order_by, backward))
        }
    }
}

/// The most rows ([`first_rows`]) read from an index before the scan; a larger `LIMIT` plus
/// `OFFSET` scans the table.
pub(crate) const MAX_SEEK_ROWS: u64 = 10_000;

/// Where SQLite's loop reads an index and stops at the `LIMIT`, with no `WHERE` to skip
/// rows and no sorter after it (`SELECT url FROM urls LIMIT 5`, `ORDER BY created DESC LIMIT
/// 20` served by an index on `created`): the rowids of the first `LIMIT + OFFSET` entries of
/// the index in the loop's direction, which are exactly the rows SQLite returns. The scan
/// then reads only their leaves ([`engine::query::ir::QueryPlan::rowid_ranges`]), and the
/// order [`follow`] gives them is the index's. `None` where that does not hold (a `WHERE`, a
/// grouped query, a `USE TEMP B-TREE` after the loop, a partial index, more than
/// [`MAX_SEEK_ROWS`] rows, a snapshot read without SQLite's locks, which a change would
/// make scan again against the index read before it).
pub(crate) fn first_rows(
    table: &TablePlan,
    choice: &SqliteChoice,
    shape: &Shape,
    filter: Option<&Expr>,
    limit: Option<u64>,
    offset: u64,
) -> Result<Option<Vec<i64>>, SqlError> {
    let Access::Index {
        name,
        backward,
        fields,
        partial: false,
        ..
    } = &choice.access
    else {
        return Ok(None);
    };
    let n = match limit {
        Some(l) if l > 0 => l.saturating_add(offset),
        _ => return Ok(None),
    };
    if !matches!(shape, Shape::Rows { .. })
        || filter.is_some()
        || n > MAX_SEEK_ROWS
        || choice.lines.iter().any(|l| l.contains("USE TEMP B-TREE"))
        || table.read.needs_verification()
    {
        return Ok(None);
    }
    let Some(index) = table
        .indexes
        .iter()
        .find(|i| i.name.eq_ignore_ascii_case(name) && i.root_page > 0)
    else {
        return Ok(None);
    };
    Ok(Some(table.index_rowids(
        index.root_page,
        *fields,
        *backward,
        n as usize,
    )?))
}

/// `rowid IN (rowids)`: the filter that keeps the rows [`first_rows`] found.
pub(crate) fn rowid_in(r: &mut Resolver<'_>, rowids: &[i64]) -> Result<Expr, SqlError> {
    Ok(Expr::InList {
        expr: Box::new(r.rowid()?.expr),
        list: rowids
            .iter()
            .map(|&id| (Expr::Literal(Value::Integer(id)), None))
            .collect(),
        negated: false,
        collation: Collation::Binary,
    })
}

/// Whether a grouped query's answer can depend on the order of the rows within a group:
/// a group key, or the argument of `min()`, `max()` or a `DISTINCT` aggregate other than
/// `count()`, whose equal values can differ (a collation other than `BINARY`, or no plain
/// column of a type). An expression that reads no column has one value on every row; a
/// `count(DISTINCT)` counts classes of equal values, whichever value stands for each.
pub(crate) fn order_sensitive(
    r: &Resolver<'_>,
    keys: &[(Expr, Collation)],
    aggregates: &[AggSpec],
) -> bool {
    let differs =
        |e: &Expr, c: Collation| !e.reads_no_slot() && (c != Collation::Binary || !one_form(r, e));
    keys.iter().any(|(e, c)| differs(e, *c))
        || aggregates.iter().any(|a| {
            let shows_a_value = matches!(a.func, AggFunc::Min | AggFunc::Max)
                || (a.distinct && !matches!(a.func, AggFunc::Count));
            shows_a_value && a.arg.as_ref().is_some_and(|e| differs(e, a.collation))
        })
}

/// Whether values of `e` that compare equal under `BINARY` are the same value: never an
/// integer beside an equal real (`1` and `1.0`, `0.0` and `-0.0`). True of a column with a
/// type ([`Resolver::slot_is_canonical`]), and of expressions whose values are only text or
/// blobs (which are equal only byte for byte), or only integers.
fn one_form(r: &Resolver<'_>, e: &Expr) -> bool {
    use engine::datatype3::Affinity;
    use engine::query::ir::Function as F;
    match e {
        Expr::Column(s) => r.slot_is_canonical(*s),
        Expr::Cast(_, a) => matches!(a, Affinity::Text | Affinity::Blob | Affinity::Integer),
        // 0, 1 or NULL.
        Expr::Not(_)
        | Expr::IsNull(..)
        | Expr::And(..)
        | Expr::Or(..)
        | Expr::Compare { .. }
        | Expr::InList { .. }
        | Expr::Like { .. }
        | Expr::Concat(..) => true,
        Expr::Function(f, _) => matches!(
            f,
            F::Length
                | F::Instr
                | F::Lower
                | F::Upper
                | F::Substr
                | F::Trim
                | F::LTrim
                | F::RTrim
                | F::TypeOf
                | F::Hex
                | F::Replace
                | F::Date
                | F::Time
                | F::DateTime
                | F::Strftime
                | F::TimeDiff
                | F::Char
        ),
        _ => false,
    }
}

/// Index `name`'s key columns resolved against the table.
fn resolve_key(r: &mut Resolver<'_>, name: &str, key: &[KeyColumn]) -> Result<Vec<Key>, SqlError> {
    let aliases = std::mem::replace(&mut r.aliases_enabled, false);
    let resolved = key
        .iter()
        .map(|k| {
            let collation = Collation::from_name(&k.collation).ok_or_else(|| {
                SqlError::Unsupported(format!(
                    "index {name:?} orders by collation {}, which corescan does not know",
                    k.collation
                ))
            })?;
            let e = match &k.source {
                KeySource::Column(c) => ast::Expr::Identifier(ast::Ident::with_quote('"', c)),
                KeySource::Expression(e) => (**e).clone(),
            };
            let t = r.resolve(&e, &mut Stage::Row, 0).map_err(|e| {
                SqlError::Unsupported(format!(
                    "index {name:?}: corescan cannot compute its key ({e})"
                ))
            })?;
            Ok(Key {
                expr: t.expr,
                collation,
                descending: k.descending,
            })
        })
        .collect();
    r.aliases_enabled = aliases;
    resolved
}

fn refuse<T>(choice: &SqliteChoice, what: &str) -> Result<T, SqlError> {
    Err(SqlError::Unsupported(format!(
        "the {what} of this query depends on how SQLite reads the table ({}), which corescan \
         cannot follow yet",
        choice.lines.join("; ")
    )))
}
