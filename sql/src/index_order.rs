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
//!   aggregate or a group key returns, and from which row bare columns come. corescan reads a
//!   group's rows in rowid order, which is the index's order when every key column of the
//!   index is a group key or made constant by `WHERE`, and for bare columns beside the one
//!   `max()`/`min()` of the index's last key column ("the latest row per key": ties of the
//!   extreme come by rowid either way); elsewhere ([`Followed::by_place`]) each row is ranked
//!   by its place in the index ([`index_arrival`]), which the group states keep in place of
//!   the rowid. A scan of the table delivers a `GROUP BY` that
//!   holds the rowid (each group is one row): groups in rowid order.
//! - **`MULTI-INDEX OR`** (a loop per term of an `OR`, each row where the first loop finds
//!   it): plain rows are ordered by their first term that holds, that term's index key, then
//!   the rowid ([`multi_or_order`]); groups and `DISTINCT` whose answer depends on that
//!   order, and terms SQLite splits into more loops, are refused, as is any other loop
//!   corescan cannot follow.
//!
//! What differs from SQLite: SQLite's loop stops at the `LIMIT` and seeks the index range
//! the `WHERE` names, so it evaluates `WHERE` on fewer rows. A `WHERE` or output column that
//! fails (an integer overflow, a bad `LIKE` escape) on a row SQLite never reaches fails
//! corescan's query; it never changes an answer.

use std::cmp::Ordering;

use engine::datatype3::{compare_values, Affinity, Collation};
use engine::query::ir::{AggFunc, AggSpec, CmpOp, Expr, Function, Shape, SortKey};
use engine::value::{Value, ValueRef};
use partitioner::index::{KeyField, Place};
use partitioner::TablePlan;
use sqlparser::ast;

use super::error::SqlError;
use super::expr::holds_subquery;
use super::expr::{Resolver, Stage};
use super::order::{constant_columns, skip_collate_and_likely, where_terms};
use super::sqlite_plan::{Access, KeyColumn, KeySource, OrBranch, SqliteChoice};

/// One key column of an index, resolved: its expression (row stage), collation and `DESC`.
struct Key {
    expr: Expr,
    collation: Collation,
    descending: bool,
    /// The affinity of the expression (a column's declared one).
    affinity: Option<Affinity>,
}

/// The `ORDER BY` and direction that give a query SQLite's rows in SQLite's order under
/// `choice`: `order_by` and `backward` as planned for a scan in rowid order, `written` the
/// `ORDER BY` as written (before a scan in rowid order was found to deliver it), `filter`
/// the `WHERE` as written, `distinct` for `SELECT DISTINCT`.
pub(crate) fn follow(
    r: &mut Resolver<'_>,
    choice: &SqliteChoice,
    shape: &Shape,
    filter: Option<&ast::Expr>,
    written: Vec<SortKey>,
    (order_by, backward): (Vec<SortKey>, bool),
    (distinct, one_row_each): (bool, bool),
) -> Result<Followed, SqlError> {
    // `SELECT DISTINCT` through a temporary b-tree over a loop on an index: each row is
    // shown where the loop first meets it, in the loop's order of the index's own keys.
    let temp_distinct = distinct
        && choice
            .lines
            .iter()
            .any(|l| l.contains("USE TEMP B-TREE FOR DISTINCT"));
    // Whether those first meetings must be followed: each row's place in the index's order
    // then stands for its rowid ([`index_arrival`]), so that the first row of each distinct
    // row, and the order in which they come, are the loop's.
    let mut distinct_by_place = false;
    if distinct {
        // SELECT DISTINCT shows each row where the loop first meets it: in rowid order for a
        // forward scan of the table, in the index's key order where the index delivers the
        // distinct rows itself, by place in the loop's order (forwards or backwards) where a
        // temporary b-tree makes them distinct.
        let follows = match &choice.access {
            Access::Rowid { backward } => !backward,
            Access::Index { .. } => true,
            Access::MultiOr(_) | Access::Other(_) => false,
        };
        // Where ORDER BY orders every column as DISTINCT compares it, and no column can hold
        // equal values that differ, the order of first meetings shows nowhere.
        let settled = match shape {
            Shape::Groups {
                keys, aggregates, ..
            } => {
                // A rowid among the columns makes every distinct row one row of the table.
                let rowid = r.rowid().ok().map(|t| t.expr);
                // (Also through `likely()` and its kin, a one-argument coalesce: the
                // differential tester's table seed 18323576647953244486.)
                let is_rowid = |e: &Expr| {
                    let e = match e {
                        Expr::Function(Function::Coalesce, args) if args.len() == 1 => &args[0],
                        e => e,
                    };
                    Some(e) == rowid.as_ref()
                };
                let one_row_each = keys.iter().any(|(e, _)| is_rowid(e));
                // Ordered by the rowid itself: no two rows tie, whatever the other columns.
                let by_rowid = order_by.iter().any(|k| {
                    matches!(k.expr, Expr::Column(i) if keys.get(i).is_some_and(|(e, _)| is_rowid(e)))
                });
                by_rowid
                    || (one_row_each || !order_sensitive(r, keys, aggregates))
                        && keys.iter().enumerate().all(|(i, (_, c))| {
                            order_by
                                .iter()
                                .any(|k| k.expr == Expr::Column(i) && k.collation == *c)
                        })
            }
            Shape::Rows { .. } => false,
        };
        if !follows && !settled {
            return refuse(choice, "order of rows");
        }
        distinct_by_place = temp_distinct && !settled;
    }
    match shape {
        Shape::Rows { .. } => match &choice.access {
            Access::Rowid { backward: b } => {
                if *b && !backward && order_by.is_empty() {
                    return refuse(choice, "order of rows");
                }
                Ok(Followed::rows(order_by, backward))
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
                Ok(Followed::rows(keys, false))
            }
            Access::MultiOr(branches) => multi_or_order(r, choice, branches, filter, written)
                .map(|k| Followed::rows(k, false)),
            Access::Other(_) => refuse(choice, "order of rows"),
        },
        Shape::Groups {
            keys, aggregates, ..
        } => {
            let (name, (b, unique), key) = match &choice.access {
                Access::Rowid { .. } => {
                    return Ok(Followed::rows(
                        rowid_group_order(r, keys, choice, order_by),
                        backward,
                    ))
                }
                Access::Index {
                    name,
                    backward,
                    key,
                    unique,
                    ..
                } => (name, (*backward, *unique), resolve_key(r, name, key)?),
                Access::MultiOr(_) | Access::Other(_) => {
                    if order_sensitive(r, keys, aggregates) {
                        return refuse(choice, "result");
                    }
                    return Ok(Followed::rows(order_by, backward));
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
            // An index whose key columns are the group keys gives each group's rows in rowid
            // order, as the scan does, but only walked forwards: walked backwards (`GROUP BY
            // c ORDER BY c DESC`, SQLite giving the GROUP BY the ORDER BY's direction), in
            // descending rowid order (the differential tester's table seed
            // 17804059554064902102: group_concat listed backwards).
            // Unless each group is one row: a UNIQUE index whose columns are WHERE constants
            // but for one group key (a NULL key, which the index may hold more than once,
            // shows NULL whichever row shows it), with no aggregate listing its rows.
            let covered = key.iter().all(|k| group_key(k).is_some() || constant(k));
            let one_row_groups = unique
                && key.iter().filter(|k| !constant(k)).count() <= 1
                && !aggregates_order_sensitive(r, aggregates);
            // "The latest row per key" (`SELECT k, max(ts), v ... GROUP BY k` over an index on
            // (k, ts)): the bare column shows the first row that reaches the max in the loop's
            // order, whose ties come by rowid after the index's last column, as in a scan.
            let bare_by_last_key = !b
                && !choice.sorts_groups
                && !keys.iter().any(|(e, c)| differs(r, e, *c))
                && deciding_last_key(r, aggregates, &key, |k| {
                    group_key(k).is_some() || constant(k)
                });
            // Otherwise each group's rows must come as the loop meets them: their places in
            // the index's order stand for their rowids ([`index_arrival`]).
            // (Not where the scan reads one row a group: [`first_groups`]' firsts.)
            let by_place = !one_row_each
                && !bare_by_last_key
                && order_sensitive(r, keys, aggregates)
                && (!covered || (b && !one_row_groups));
            if by_place && distinct && !distinct_by_place {
                return Err(within_groups(choice, name, "corescan cannot follow it yet"));
            }
            let mut order_by = order_by;
            // DISTINCT through a temporary b-tree: the loop does not deliver the rows
            // distinct (their order is settled by ORDER BY, see above).
            let sorted = choice.sorts_groups
                || (distinct
                    && choice
                        .lines
                        .iter()
                        .any(|l| l.contains("USE TEMP B-TREE FOR DISTINCT")));
            if !sorted && !keys.is_empty() {
                // The groups come in the loop's order of their keys.
                let mut placed = vec![false; keys.len()];
                let mut whole = true;
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
                        whole = false;
                        break;
                    }
                }
                // Past its key columns an index is in rowid order: a rowid among the group
                // keys comes next (`GROUP BY status, id` over an index on `status`).
                let rowid = r.rowid_if_read();
                let rowid_slot = keys.iter().position(|(e, _)| Some(e) == rowid.as_ref());
                // Once it is placed no two groups tie: the keys not placed never order them.
                if let (true, Some(g)) = (whole, rowid_slot) {
                    if !placed[g] {
                        order_by.push(SortKey {
                            expr: Expr::Column(g),
                            descending: b,
                            nulls_first: !b,
                            collation: Collation::Binary,
                        });
                    }
                    placed.fill(true);
                }
                if placed.iter().any(|p| !p) {
                    return Err(SqlError::Unsupported(format!(
                        "the order of this query's groups: SQLite groups its rows as index \
                         {name:?} gives them ({}), in an order corescan cannot follow yet",
                        choice.lines.join("; ")
                    )));
                }
            }
            Ok(Followed {
                order_by,
                backward,
                by_place: by_place || distinct_by_place,
            })
        }
    }
}

/// The order of SQLite's `MULTI-INDEX OR` (`branches`: `INDEX 1`, `INDEX 2`, ...): for each
/// term of the `WHERE`'s `OR` in turn, the rows its own loop finds (an index's in its key
/// order, then by rowid; the integer primary key's by rowid), each row where the first loop
/// found it (wherecode.c: a sub-`WHERE` per term, then `OP_RowSetTest`). A row that
/// satisfies the whole `WHERE` is found by a term's loop exactly when it satisfies the term
/// (each loop's `WHERE` is its term and the `WHERE`'s other terms), so its place is its first
/// term that holds (`CASE WHEN x1 THEN 0 WHEN x2 THEN 1 ... END`), then that term's index
/// key (each key column under `CASE` of that term: the other terms' keys are NULL), then the
/// rowid: sort keys after `written` (whose ties come in the loop's order). The terms are the
/// `OR`'s, left to right, as `whereSplit` lists them; refused where they cannot be matched
/// with SQLite's loops one for one (another count, a term that can fail, a term SQLite
/// splits into more, a second `OR`).
fn multi_or_order(
    r: &mut Resolver<'_>,
    choice: &SqliteChoice,
    branches: &[OrBranch],
    filter: Option<&ast::Expr>,
    mut keys: Vec<SortKey>,
) -> Result<Vec<SortKey>, SqlError> {
    let mut terms = Vec::new();
    if let Some(f) = filter {
        where_terms(f, &mut terms);
    }
    let is_or = |e: &ast::Expr| {
        matches!(
            e,
            ast::Expr::BinaryOp {
                op: ast::BinaryOperator::Or,
                ..
            }
        )
    };
    let ors: Vec<&ast::Expr> = terms.into_iter().filter(|t| is_or(t)).collect();
    let [or] = ors.as_slice() else {
        return refuse(choice, "order of rows");
    };
    let mut disjuncts = Vec::new();
    let mut stack = vec![*or];
    while let Some(e) = stack.pop() {
        match skip_collate_and_likely(e) {
            ast::Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::Or,
                right,
            } => stack.extend([right.as_ref(), left.as_ref()]),
            _ => disjuncts.push(e),
        }
    }
    if disjuncts.len() != branches.len() || !disjuncts.iter().all(|d| one_sub_term(d)) {
        return refuse(choice, "order of rows");
    }
    let mut whens = Vec::with_capacity(disjuncts.len());
    for (i, d) in disjuncts.iter().enumerate() {
        let x = r.resolve(d, &mut Stage::Row, 0)?.expr;
        if x.may_fail() {
            return refuse(choice, "order of rows");
        }
        whens.push((x, int(i), None, Collation::Binary));
    }
    let term = Expr::Case {
        operand: None,
        whens,
        otherwise: Some(Box::new(int(branches.len()))),
    };
    keys.push(SortKey {
        expr: term.clone(),
        descending: false,
        nulls_first: true,
        collation: Collation::Binary,
    });
    for (i, branch) in branches.iter().enumerate() {
        let OrBranch::Index { name, key, .. } = branch else {
            continue;
        };
        for k in resolve_key(r, name, key)? {
            keys.push(SortKey {
                expr: Expr::Case {
                    operand: Some(Box::new(term.clone())),
                    whens: vec![(int(i), k.expr, None, Collation::Binary)],
                    otherwise: None,
                },
                descending: k.descending,
                nulls_first: !k.descending,
                collation: k.collation,
            });
        }
    }
    keys.push(SortKey {
        expr: r.rowid()?.expr,
        descending: false,
        nulls_first: true,
        collation: Collation::Binary,
    });
    Ok(keys)
}

/// An integer literal.
fn int(i: usize) -> Expr {
    Expr::Literal(Value::Integer(i as i64))
}

/// Whether SQLite's `WHERE` analysis keeps the `OR` term `e` one term of its `OR` clause
/// (`exprAnalyze` adds terms of its own to the clause for `BETWEEN`, `LIKE`, `GLOB`, a
/// comparison of two columns or of a column with an indexed expression, `IS NOT NULL` and
/// others, each a loop of the `MULTI-INDEX OR` of its own): a comparison of a column with a
/// literal (`=`, `IS`, `<`, `<=`, `>`, `>=`), an `IN` list of literals, `IS NULL`, or an
/// `AND` of any terms without a subquery (whose own terms go to a clause of the `AND`'s).
fn one_sub_term(e: &ast::Expr) -> bool {
    use ast::BinaryOperator as B;
    let literal = |e: &ast::Expr| match skip_collate_and_likely(e) {
        ast::Expr::Value(_) => true,
        ast::Expr::UnaryOp { expr, .. } => matches!(expr.as_ref(), ast::Expr::Value(_)),
        _ => false,
    };
    let column = |e: &ast::Expr| {
        matches!(
            skip_collate_and_likely(e),
            ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
        )
    };
    match skip_collate_and_likely(e) {
        e @ ast::Expr::BinaryOp { op: B::And, .. } => !holds_subquery(e),
        ast::Expr::BinaryOp {
            left,
            op: B::Eq | B::Is | B::Lt | B::LtEq | B::Gt | B::GtEq,
            right,
        } => (column(left) && literal(right)) || (literal(left) && column(right)),
        ast::Expr::In {
            expr,
            target: ast::InTarget::List(list),
            negated: false,
            ..
        } => column(expr) && list.iter().all(literal),
        ast::Expr::IsNull(x) => column(x),
        _ => false,
    }
}

/// Gives `group_concat`, `string_agg` and the JSON aggregates (without `DISTINCT`) of a
/// grouped query the order in which SQLite's loop over an index (`choice`) delivers each
/// group's rows: the index's key columns (their collations and directions, all reversed when
/// it is walked backwards), then the rowid, appended to the aggregate's own `ORDER BY`, whose
/// ties come in that order. A group's rows keep the loop's order in SQLite whether its loop
/// delivers the groups or a sorter makes them (the sorter's records end with a sequence
/// number), so the rows then come as SQLite lists them, and the aggregate no longer depends on
/// corescan's scan order ([`aggregates_order_sensitive`] sees a rowid last). Other
/// order-sensitive parts (a key or a `min()` that can show equal values that differ, bare
/// columns, `DISTINCT`) are left to [`follow`]; an index key corescan cannot compute leaves
/// the aggregates as they are (and the query refused there).
pub(crate) fn order_listings(
    r: &mut Resolver<'_>,
    choice: &SqliteChoice,
    shape: &mut Shape,
) -> Result<(), SqlError> {
    let (
        Shape::Groups { aggregates, .. },
        Access::Index {
            name,
            backward,
            key,
            ..
        },
    ) = (shape, &choice.access)
    else {
        return Ok(());
    };
    let listing: Vec<usize> = aggregates
        .iter()
        .enumerate()
        .filter(|(_, a)| {
            matches!(a.func, AggFunc::GroupConcat | AggFunc::Json(_))
                && !a.distinct
                && aggregates_order_sensitive(r, std::slice::from_ref(a))
        })
        .map(|(i, _)| i)
        .collect();
    if listing.is_empty() {
        return Ok(());
    }
    let Ok(keys) = resolve_key(r, name, key) else {
        return Ok(());
    };
    let mut order: Vec<SortKey> = keys
        .into_iter()
        .map(|k| {
            let descending = k.descending != *backward;
            SortKey {
                expr: k.expr,
                descending,
                nulls_first: !descending,
                collation: k.collation,
            }
        })
        .collect();
    order.push(SortKey {
        expr: r.rowid()?.expr,
        descending: *backward,
        nulls_first: !*backward,
        collation: Collation::Binary,
    });
    for i in listing {
        aggregates[i].order_by.extend(order.iter().cloned());
    }
    Ok(())
}

/// `order_by` with the order in which SQLite's scan of the table (`choice`) delivers the
/// groups of a `GROUP BY` that holds the rowid without sorting them: each group is one row,
/// and they come in the loop's rowid order (`SELECT i, id, ... GROUP BY i, id` with `id` the
/// `INTEGER PRIMARY KEY`: found by the differential tester), which breaks the ties of the
/// query's `ORDER BY`. Unchanged where SQLite sorts the groups (`GROUP BY i, +id`).
pub(crate) fn rowid_group_order(
    r: &Resolver<'_>,
    keys: &[(Expr, Collation)],
    choice: &SqliteChoice,
    mut order_by: Vec<SortKey>,
) -> Vec<SortKey> {
    let Access::Rowid { backward } = choice.access else {
        return order_by;
    };
    let rowid = r.rowid_if_read();
    let slot = keys.iter().position(|(e, _)| Some(e) == rowid.as_ref());
    if let (false, Some(g)) = (choice.sorts_groups, slot) {
        order_by.push(SortKey {
            expr: Expr::Column(g),
            descending: backward,
            nulls_first: !backward,
            collation: Collation::Binary,
        });
    }
    order_by
}

/// The most rows ([`first_rows`]) read from an index before the scan; a larger `LIMIT` scans
/// the table.
pub(crate) const MAX_SEEK_ROWS: u64 = 10_000;

/// Where SQLite's loop reads an index and stops at the `LIMIT`, with no `WHERE` to skip
/// rows and no sorter after it (`SELECT url FROM urls LIMIT 5`, `ORDER BY created DESC LIMIT
/// 20` served by an index on `created`): the rowids of the first `LIMIT + OFFSET` entries of
/// the index in the loop's direction past the first `OFFSET` (counted from the leaves' cell
/// counts, not read: SQLite's loop steps over them without computing their output columns),
/// which are exactly the rows SQLite returns: the plan's `OFFSET` is then spent. The scan
/// then reads only their leaves ([`engine::query::ir::QueryPlan::rowid_ranges`]), and the
/// order [`follow`] gives them is the index's. `None` where that does not hold (a `WHERE`, a
/// grouped query, a `USE TEMP B-TREE` after the loop, a partial index, a `LIMIT` of more
/// than [`MAX_SEEK_ROWS`] rows). Under verify-retry (a database read without SQLite's locks) a
/// change re-plans the whole statement ([`crate::PlannedQuery::replans`]), reading the index
/// again.
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
        Some(l) if l > 0 => l,
        _ => return Ok(None),
    };
    if !matches!(shape, Shape::Rows { .. })
        || filter.is_some()
        || n > MAX_SEEK_ROWS
        || choice.lines.iter().any(|l| l.contains("USE TEMP B-TREE"))
    {
        return Ok(None);
    }
    let Some(root) = index_root(table, name) else {
        return Ok(None);
    };
    Ok(Some(table.index_rowids(
        root, *fields, *backward, offset, n as usize,
    )?))
}

/// Where SQLite's loop over an index delivers the groups of a `GROUP BY` or `SELECT DISTINCT`
/// (no `USE TEMP B-TREE`) and stops once its `LIMIT` (after the `OFFSET`) is complete, with
/// no `WHERE` to drop rows and no `HAVING` to drop groups (`SELECT user_id, max(ts) FROM
/// events GROUP BY user_id LIMIT 3` over an index on `(user_id, ts)`): the rowids of the
/// index's first entries that hold every row of those groups, in the loop's order, and how
/// many runs of equal first keys they are (the groups are at least as many). A group's rows
/// share the index's first key column, which is a group key; stretches of entries whose
/// first fields are equal under a comparison coarser than every collation (ASCII case and
/// trailing spaces ignored, integers and reals by value) are therefore whole groups, one or
/// more, and the first `LIMIT + OFFSET` of them hold the groups SQLite returns. The scan then
/// reads only those rows, and groups and orders them as for the whole table. `None` where
/// that does not hold, or beyond [`MAX_SEEK_ROWS`] entries.
///
/// Under a `WHERE` or a `HAVING` that cannot fail, the runs may hold fewer groups than the
/// `LIMIT` wants (the `WHERE` drops rows, the `HAVING` groups): `factor` times as many runs are read, and the caller runs the
/// query and asks for more while it returns fewer rows than the `LIMIT` and the index had
/// more ([`FirstGroups::requested`]). A `factor` of 0 (a planner that cannot run the
/// query) scans the table.
///
/// A `SELECT DISTINCT` of the index's first key column alone, under its collation, in a UTF-8
/// database, takes each value's first entry, as SQLite's ordered `DISTINCT` compares values
/// (`sqlite3MemCompare` under the collation), with or without a `LIMIT` (`firsts`: the row
/// whose value `DISTINCT` shows), seeking past the rest of each value's entries as SQLite's
/// skip-ahead does. Up to [`MAX_SEEK_ROWS`] distinct values.
pub(crate) fn first_groups(
    r: &mut Resolver<'_>,
    table: &TablePlan,
    choice: &SqliteChoice,
    (shape, distinct): (&Shape, bool),
    (filter, factor): (Option<&Expr>, u64),
    (limit, offset): (Option<u64>, u64),
) -> Result<Option<FirstGroups>, SqlError> {
    let Access::Index {
        name,
        backward,
        key,
        fields,
        partial: false,
        ..
    } = &choice.access
    else {
        return Ok(None);
    };
    let Shape::Groups {
        keys,
        having,
        aggregates,
        ..
    } = shape
    else {
        return Ok(None);
    };
    // Under a WHERE or a HAVING, only one that cannot fail (the rows of runs past SQLite's
    // stop are read), for a planner that runs the query and asks for more runs (`factor`).
    let filtered = filter.is_some() || having.is_some();
    let fails = |e: &Expr| factor == 0 || e.may_fail();
    if keys.is_empty()
        || filter.is_some_and(fails)
        || having.as_ref().is_some_and(fails)
        || choice.lines.iter().any(|l| l.contains("USE TEMP B-TREE"))
    {
        return Ok(None);
    }
    let Some((first, root)) = first_column_key(table, name, key) else {
        return Ok(None);
    };
    let first = resolve_key(r, name, std::slice::from_ref(first))?;
    let first = &first[0];
    if !keys.iter().any(|(e, _)| *e == first.expr) {
        return Ok(None);
    }
    let utf8 = table.header.text_encoding == 1;
    let groups = limit.map(|l| l.checked_add(offset));
    let collation = first.collation;
    if distinct
        && !filtered
        && utf8
        && aggregates.is_empty()
        && matches!(keys.as_slice(), [(_, c)] if *c == collation)
        && limit != Some(0)
    {
        // SQLite's ordered DISTINCT compares with `sqlite3MemCompare` under the column's
        // collation; the index is in that order (a DESC column's reversed).
        let order = key_order(first);
        let keys = groups.unwrap_or(Some(u64::MAX)).unwrap_or(u64::MAX);
        let found = table.index_distinct_firsts(
            root,
            (*fields, *backward),
            (keys, MAX_SEEK_ROWS as usize),
            &order,
        )?;
        return Ok(found.map(|rowids| FirstGroups {
            runs: rowids.len() as u64,
            requested: keys,
            rowids,
            firsts: true,
        }));
    }
    let runs = match groups.flatten() {
        Some(g) if g > offset => g.saturating_mul(if filtered { factor } else { 1 }),
        _ => return Ok(None),
    };
    if runs > MAX_SEEK_ROWS {
        return Ok(None);
    }
    let coarse = |a: KeyField<'_>, b: KeyField<'_>| coarsely_equal(a, b, utf8);
    let found = table.index_first_runs(
        root,
        (*fields, *backward),
        (runs, MAX_SEEK_ROWS as usize),
        &coarse,
    )?;
    Ok(found.map(|(rowids, found)| FirstGroups {
        rowids,
        runs: found,
        requested: runs,
        firsts: false,
    }))
}

/// The order of an index's fields in its key column `key` (`sqlite3MemCompare` under the
/// column's collation, reversed for a `DESC` column).
fn key_order(key: &Key) -> impl Fn(KeyField<'_>, KeyField<'_>) -> Ordering {
    let (collation, descending) = (key.collation, key.descending);
    move |a, b| {
        let o = compare_values(key_value(a), key_value(b), collation);
        if descending {
            o.reverse()
        } else {
            o
        }
    }
}

/// An index field as a value.
fn key_value(k: KeyField<'_>) -> ValueRef<'_> {
    match k {
        KeyField::Null => ValueRef::Null,
        KeyField::Integer(i) => ValueRef::Integer(i),
        KeyField::Real(r) => ValueRef::Real(r),
        KeyField::Text(t) => ValueRef::Text(t),
        KeyField::Blob(b) => ValueRef::Blob(b),
    }
}

/// The index entries [`first_groups`] found: their rowids in the loop's order, how many runs
/// of keys they are, and whether only each run's first entry was kept.
pub(crate) struct FirstGroups {
    pub rowids: Vec<i64>,
    pub runs: u64,
    /// The runs asked for (more than `runs` when the index has fewer).
    pub requested: u64,
    pub firsts: bool,
}

/// Whether two index fields may be equal under some collation SQLite knows (`BINARY`,
/// `NOCASE`, `RTRIM`), or as numbers: equal values always are; so are texts that differ
/// only in ASCII case and trailing spaces (any two texts outside UTF-8, whose bytes this
/// does not fold), and numbers with the same nearest double. It is the equality of an
/// image of each value, so an equivalence: the runs it cuts an index into do not depend on
/// which entry of a run is compared.
fn coarsely_equal(a: KeyField<'_>, b: KeyField<'_>, utf8: bool) -> bool {
    let folded = |t: &[u8]| {
        let end = t.iter().rposition(|&c| c != b' ').map_or(0, |i| i + 1);
        t[..end].to_ascii_lowercase()
    };
    match (a, b) {
        (KeyField::Null, KeyField::Null) => true,
        // Numbers by their nearest doubles: an equivalence coarser than SQLite's exact one.
        (KeyField::Integer(_) | KeyField::Real(_), KeyField::Integer(_) | KeyField::Real(_)) => {
            let image = |k| match k {
                KeyField::Integer(i) => i as f64,
                KeyField::Real(f) => f,
                _ => f64::NAN,
            };
            image(a) == image(b)
        }
        (KeyField::Text(x), KeyField::Text(y)) => !utf8 || folded(x) == folded(y),
        (KeyField::Blob(x), KeyField::Blob(y)) => x == y,
        _ => false,
    }
}

/// Where SQLite counts the rows of `count(*)` over an index (a query of that one aggregate,
/// no `GROUP BY`, no `WHERE`, SQLite's loop over a whole index that is not partial: `SCAN t
/// USING COVERING INDEX i`, its `OP_Count`): the index's number of entries, counted from its
/// pages' cell counts, one per row of the table.
///
/// And where the one aggregate is `count(DISTINCT x)` of the first key column of the index
/// SQLite reads, under the index's collation, in a UTF-8 database: the number of distinct
/// values other than NULL in the index, found by seeking past each value
/// ([`TablePlan::index_distinct_count`]), equal under `sqlite3MemCompare` as SQLite's
/// distinct aggregate compares them. `None` elsewhere.
pub(crate) fn counted_entries(
    r: &mut Resolver<'_>,
    table: &TablePlan,
    choice: &SqliteChoice,
    shape: &Shape,
    has_where: bool,
) -> Result<Option<Counted>, SqlError> {
    let Access::Index {
        name,
        partial: false,
        key,
        fields,
        ..
    } = &choice.access
    else {
        return Ok(None);
    };
    let Shape::Groups {
        keys, aggregates, ..
    } = shape
    else {
        return Ok(None);
    };
    let Some(root) = index_root(table, name).filter(|_| !has_where && keys.is_empty()) else {
        return Ok(None);
    };
    match aggregates.as_slice() {
        [AggSpec {
            func: AggFunc::CountStar,
            distinct: false,
            filter: None,
            ..
        }] => Ok(Some(Counted {
            count: table.index_entries(root)?,
            how: format!("entries of index {name:?} counted from its pages' cell counts"),
        })),
        [AggSpec {
            func: AggFunc::Count,
            arg: Some(arg),
            distinct: true,
            filter: None,
            collation,
            ..
        }] if table.header.text_encoding == 1 => {
            let Some((first, _)) = first_column_key(table, name, key) else {
                return Ok(None);
            };
            let first = resolve_key(r, name, std::slice::from_ref(first))?;
            let first = &first[0];
            if *arg != first.expr || *collation != first.collation {
                return Ok(None);
            }
            let order = key_order(first);
            Ok(Some(Counted {
                count: table.index_distinct_count(root, *fields, &order)?,
                how: format!(
                    "distinct values of index {name:?}'s first column counted by seeking past \
                     each"
                ),
            }))
        }
        _ => Ok(None),
    }
}

/// What [`counted_entries`] counted, and how (for the report).
pub(crate) struct Counted {
    pub count: u64,
    pub how: String,
}

/// Where SQLite answers `min(x)` or `max(x)` from one entry of an index on `x` (its
/// min/max optimization: `SEARCH t USING [COVERING] INDEX i`, no constraint, the loop left
/// after its first row): the rowid of that entry, `Some(None)` when there is none. `max()`
/// takes the first entry in the loop's direction (`Last`, or the first of a `DESC`
/// column), `min()` the first whose key is not NULL (`SeekGT` past the NULLs). Of equal keys
/// that differ (`'a'` and `'A'` under `NOCASE`, `1` and `1.0`) that entry is the row SQLite
/// shows, with its bare columns; the scan then reads only that row. `None` where that does
/// not hold: other aggregates, `DISTINCT`, `FILTER`, `GROUP BY`, a `WHERE`, an index whose
/// first key column is not `x` under the aggregate's collation, or a partial index.
pub(crate) fn minmax_row(
    r: &mut Resolver<'_>,
    table: &TablePlan,
    choice: &SqliteChoice,
    shape: &Shape,
    filter: Option<&ast::Expr>,
) -> Result<Option<Option<i64>>, SqlError> {
    let Access::Index {
        name,
        backward,
        key,
        fields,
        partial: false,
        ..
    } = &choice.access
    else {
        return Ok(None);
    };
    let Shape::Groups {
        keys, aggregates, ..
    } = shape
    else {
        return Ok(None);
    };
    // Bare columns are no aggregate functions to SQLite: they come from that entry's row.
    let functions: Vec<&AggSpec> = aggregates
        .iter()
        .filter(|a| a.func != AggFunc::Shown)
        .collect();
    let [spec @ AggSpec {
        func: AggFunc::Min | AggFunc::Max,
        arg: Some(Expr::Column(slot)),
        distinct: false,
        filter: None,
        second: None,
        ..
    }] = functions.as_slice()
    else {
        return Ok(None);
    };
    // The optimization's loop: one SEARCH through the index with no range of its own, left
    // after its first row. The plan's text alone does not tell: `max(+x)` is planned as the
    // same SEARCH but its loop reads every entry (the differential tester's table seed
    // 11824729079214927573), so the bytecode's early out decides.
    let searched = choice.first_row_only
        && matches!(choice.lines.as_slice(), [line]
        if line.trim_start().starts_with("SEARCH ")
            && line.contains(&format!("INDEX {name}"))
            && !line.contains('('));
    if !keys.is_empty() || filter.is_some() || !spec.order_by.is_empty() || !searched {
        return Ok(None);
    }
    let Some((first, root)) = first_column_key(table, name, key) else {
        return Ok(None);
    };
    let resolved = resolve_key(r, name, std::slice::from_ref(first))?;
    match resolved.first() {
        Some(Key {
            expr: Expr::Column(c),
            collation,
            ..
        }) if c == slot && *collation == spec.collation => {}
        _ => return Ok(None),
    }
    let rowid = if spec.func == AggFunc::Min {
        table.index_first_not_null(root, *fields, *backward)?
    } else {
        table.index_rowids(root, *fields, *backward, 0, 1)?.pop()
    };
    Ok(Some(rowid))
}

/// The first key column of `table`'s index `name` (its columns `key`) when it is a table
/// column, with the index's root page.
fn first_column_key<'k>(
    table: &TablePlan,
    name: &str,
    key: &'k [KeyColumn],
) -> Option<(&'k KeyColumn, u32)> {
    let first = key
        .first()
        .filter(|k| matches!(k.source, KeySource::Column(_)))?;
    Some((first, index_root(table, name)?))
}

/// The root page of `table`'s index `name`, as the file's schema lists it.
fn index_root(table: &TablePlan, name: &str) -> Option<u32> {
    table
        .indexes
        .iter()
        .find(|i| i.name.eq_ignore_ascii_case(name) && i.root_page > 0)
        .map(|i| i.root_page)
}

/// `rowid IN (rowids)`: the filter that keeps the rows [`first_rows`] found.
pub(crate) fn rowid_in(r: &mut Resolver<'_>, rowids: &[i64]) -> Result<Expr, SqlError> {
    let Expr::Column(slot) = r.rowid()?.expr else {
        return Err(SqlError::Invalid("the rowid is not a column".into()));
    };
    Ok(in_rowids(slot, rowids.to_vec()))
}

/// `rowid IN (rowids)` for the rowid in `slot`, as a sorted set.
fn in_rowids(slot: usize, mut rowids: Vec<i64>) -> Expr {
    rowids.sort_unstable();
    rowids.dedup();
    Expr::InIntegers {
        expr: Box::new(Expr::Column(slot)),
        values: rowids.into(),
    }
}

/// An index SQLite's loop reads whose first key column a `WHERE` may bound
/// ([`range_seek`]): where the index lies, and the slots of that column and of the rowid.
#[derive(Debug, Clone)]
pub(crate) struct SeekTarget {
    root: u32,
    fields: usize,
    column: usize,
    rowid: usize,
    /// The column is `DESC` in the index: its entries run from the largest value down.
    descending: bool,
    /// The column's collation in the index.
    collation: Collation,
    /// The column's affinity (`None`: none, as `BLOB`).
    affinity: Option<Affinity>,
}

/// The [`SeekTarget`] of SQLite's loop, when it reads an index whose first key column is a
/// table column, and the query has a `WHERE`.
pub(crate) fn seek_target(
    r: &mut Resolver<'_>,
    table: &TablePlan,
    choice: &SqliteChoice,
    filter: Option<&Expr>,
) -> Result<Option<SeekTarget>, SqlError> {
    let Access::Index {
        name, key, fields, ..
    } = &choice.access
    else {
        return Ok(None);
    };
    if filter.is_none() {
        return Ok(None);
    }
    index_seek_target(r, table, name, key, *fields)
}

/// The [`SeekTarget`] of index `name` (its `key` columns, `fields` in each entry), when its
/// first key column is a table column.
fn index_seek_target(
    r: &mut Resolver<'_>,
    table: &TablePlan,
    name: &str,
    key: &[KeyColumn],
    fields: usize,
) -> Result<Option<SeekTarget>, SqlError> {
    let Some((first, root)) = first_column_key(table, name, key) else {
        return Ok(None);
    };
    let resolved = resolve_key(r, name, std::slice::from_ref(first))?;
    let Some(Key {
        expr: Expr::Column(column),
        collation: resolved_collation,
        affinity: column_affinity,
        ..
    }) = resolved.first()
    else {
        return Ok(None);
    };
    let (resolved_collation, column_affinity) = (*resolved_collation, *column_affinity);
    Ok(Some(SeekTarget {
        root,
        fields,
        column: *column,
        descending: first.descending,
        collation: resolved_collation,
        affinity: column_affinity,
        rowid: match r.rowid()?.expr {
            Expr::Column(s) => s,
            _ => return Ok(None),
        },
    }))
}

/// The indexes SQLite's `MULTI-INDEX OR` reads (as [`SeekTarget`]s: those whose first key
/// column is a table column) and the rowid's slot, for [`multi_or_seek`]; `None` for another
/// loop.
pub(crate) fn or_seek_targets(
    r: &mut Resolver<'_>,
    table: &TablePlan,
    choice: &SqliteChoice,
) -> Result<Option<(Vec<SeekTarget>, usize)>, SqlError> {
    let Access::MultiOr(branches) = &choice.access else {
        return Ok(None);
    };
    let Expr::Column(rowid) = r.rowid()?.expr else {
        return Ok(None);
    };
    let mut targets = Vec::new();
    for branch in branches {
        if let OrBranch::Index { name, key, fields } = branch {
            targets.extend(index_seek_target(r, table, name, key, *fields)?);
        }
    }
    Ok(Some((targets, rowid)))
}

/// Where a top-level `AND` term of the `WHERE` of `filter` (folded) is an `OR` whose every
/// term can be sought, as SQLite's `MULTI-INDEX OR` seeks them: a term on the rowid (`=`,
/// `IS` or `IN` of integers: those rowids) or one that bounds the first key column of one of
/// `targets` (the rowids of the entries in its ranges, [`range_seek`]'s walk). Every row
/// the `WHERE` keeps satisfies one of the terms, so it is among their rowids: the filter
/// `rowid IN (...)` of them all to add, and how many there are. `None` where a term cannot
/// be sought, or the terms find more than [`MAX_SEEK_ROWS`] rows.
pub(crate) fn multi_or_seek(
    table: &TablePlan,
    (targets, rowid): (&[SeekTarget], usize),
    filter: Option<&Expr>,
) -> Result<Option<(Expr, usize)>, SqlError> {
    let utf8 = table.header.text_encoding == 1;
    let terms = and_terms(filter);
    'terms: for or in terms.into_iter().filter(|t| matches!(t, Expr::Or(..))) {
        let mut disjuncts = Vec::new();
        let mut stack = vec![or];
        while let Some(e) = stack.pop() {
            match e {
                Expr::Or(a, b) => stack.extend([a.as_ref(), b.as_ref()]),
                other => disjuncts.push(other),
            }
        }
        let mut rowids: Vec<i64> = Vec::new();
        for d in disjuncts {
            let is_rowid = |e: &Expr| matches!(e, Expr::Column(s) if *s == rowid);
            let points = match d {
                Expr::Compare {
                    op: CmpOp::Eq | CmpOp::Is,
                    left,
                    right,
                    ..
                } => match (left.as_ref(), right.as_ref()) {
                    (c, Expr::Literal(Value::Integer(v)))
                    | (Expr::Literal(Value::Integer(v)), c)
                        if is_rowid(c) =>
                    {
                        Some(vec![*v])
                    }
                    _ => None,
                },
                Expr::InIntegers { expr, values } if is_rowid(expr) => Some(values.to_vec()),
                Expr::InList {
                    expr,
                    list,
                    negated: false,
                    ..
                } if is_rowid(expr) => list
                    .iter()
                    .map(|(v, _)| match v {
                        Expr::Literal(Value::Integer(i)) => Some(*i),
                        _ => None,
                    })
                    .collect(),
                _ => None,
            };
            if let Some(points) = points {
                rowids.extend(points);
            } else {
                let ranges = targets
                    .iter()
                    .find_map(|t| key_range(t, Some(d), utf8, false).map(|r| (t, r)));
                let Some((target, ranges)) = ranges else {
                    continue 'terms;
                };
                let room = (MAX_SEEK_ROWS as usize).saturating_sub(rowids.len());
                let in_index_order = range_place(target, ranges);
                let Some(found) =
                    table.index_range_rowids(target.root, target.fields, &in_index_order, room)?
                else {
                    return Ok(None);
                };
                rowids.extend(found);
            }
            if rowids.len() > MAX_SEEK_ROWS as usize {
                return Ok(None);
            }
        }
        rowids.sort_unstable();
        rowids.dedup();
        let found = rowids.len();
        return Ok(Some((in_rowids(rowid, rowids), found)));
    }
    Ok(None)
}

/// The top-level `AND` terms of `filter` (folded).
fn and_terms(filter: Option<&Expr>) -> Vec<&Expr> {
    let mut terms = Vec::new();
    let mut stack: Vec<&Expr> = filter.into_iter().collect();
    while let Some(e) = stack.pop() {
        match e {
            Expr::And(a, b) => stack.extend([a.as_ref(), b.as_ref()]),
            other => terms.push(other),
        }
    }
    terms
}

/// One end of a range: a value, and whether it is in the range.
pub(crate) type Bound = Option<(Value, bool)>;

/// Disjoint ranges of an index's first key column, in the order of its values (not of a
/// `DESC` index): one for comparisons and `BETWEEN`, one per value for an `IN` list.
pub(crate) type KeyRanges = Vec<(Bound, Bound)>;

/// The ranges of `target`'s first key column that the `WHERE` of `filter` (folded) bounds, as
/// [`range_seek`] finds them, for a scan of the index that walks only the subtrees that can
/// hold them ([`range_walk_place`]); `None` when nothing bounds the column.
pub(crate) fn key_bounds(
    table: &TablePlan,
    target: &SeekTarget,
    filter: Option<&Expr>,
) -> Option<KeyRanges> {
    key_range(target, filter, table.header.text_encoding == 1, false)
}

/// Where a first field lies against the ranges of [`key_bounds`], in the index's order.
pub(crate) fn range_walk_place(
    target: &SeekTarget,
    ranges: KeyRanges,
) -> impl Fn(KeyField<'_>) -> Place + '_ {
    range_place(target, ranges)
}

/// Where the `WHERE` of `filter` (folded) bounds the first key column of `target` with
/// literals (`=`, `IS`, `<`, `<=`, `>`, `>=`, `BETWEEN`, an `IN` list, in top-level `AND`
/// terms): the filter `rowid IN (...)` of the index entries in that range, read from the
/// index, to add, so that the scan reads only their leaves. `None` when nothing bounds the
/// column or more than [`MAX_SEEK_ROWS`] entries are in the range.
///
/// Every row the `WHERE` keeps lies in the range: SQLite compares the column's value with the
/// literal in the order the index keeps (`sqlite3MemCompare`: NULL, numbers, text under the
/// collation, blobs), provided the comparison converts neither side. The column's values are
/// left as they are when the comparison has no affinity or the column's own (a `CAST` folded
/// to a literal can give an untyped column's `'5'` a numeric affinity, which would make it
/// `5`); then a number bounds the column unless the affinity is `TEXT` (which would make it
/// text), text under the index column's own collation in a UTF-8 database (a text literal a
/// numeric affinity would convert is a number by now: the plan is folded), and a blob
/// always. The `WHERE` still decides every row read.
pub(crate) fn range_seek(
    table: &TablePlan,
    target: &SeekTarget,
    filter: Option<&Expr>,
) -> Result<Option<(Expr, Vec<i64>)>, SqlError> {
    let utf8 = table.header.text_encoding == 1;
    let Some(ranges) = key_range(target, filter, utf8, false) else {
        return Ok(None);
    };
    let in_index_order = range_place(target, ranges);
    let Some(rowids) = table.index_range_rowids(
        target.root,
        target.fields,
        &in_index_order,
        MAX_SEEK_ROWS as usize,
    )?
    else {
        return Ok(None);
    };
    Ok(Some((in_rowids(target.rowid, rowids.clone()), rowids)))
}

/// The ranges of the first key column of `target` that the top-level `AND` terms of `filter`
/// bound with literals, as [`range_seek`] describes, in the order of the column's values:
/// the values of the first `IN` list, `OR` of equalities or `IS NULL` (one range each, inside
/// the comparisons' bounds; NULL's only without any), else the one range the comparisons
/// bound; `None` when nothing bounds the column. With `exact`, only where the terms are all
/// such bounds (`=`, `IS`, `<`, `<=`, `>`, `>=`, one list): then an entry is in a range
/// exactly when its row satisfies the `WHERE` (the comparisons follow the index's order, and
/// the ranges leave the NULL entries out, as the comparisons do, but for `IS NULL`'s:
/// [`range_place`]).
fn key_range(
    target: &SeekTarget,
    filter: Option<&Expr>,
    utf8: bool,
    exact: bool,
) -> Option<KeyRanges> {
    let terms = and_terms(filter);
    let numeric = |a: Option<Affinity>| {
        matches!(
            a,
            Some(Affinity::Numeric | Affinity::Integer | Affinity::Real)
        )
    };
    // Whether a comparison of this affinity leaves the column's values as the index holds
    // them: no affinity, or the column's own (whose conversions its values have had).
    let unchanged = |a: Option<Affinity>| match a {
        None | Some(Affinity::Blob) => true,
        Some(Affinity::Text) => target.affinity == Some(Affinity::Text),
        a => numeric(a) && numeric(target.affinity),
    };
    // The literal, if it bounds the column under a comparison of this affinity and collation.
    let bound_by = |e: &Expr, affinity: Option<Affinity>, collation: Collation| match e {
        _ if !unchanged(affinity) => None,
        // TEXT affinity would make the number text.
        Expr::Literal(v @ (Value::Integer(_) | Value::Real(_))) => {
            (affinity != Some(Affinity::Text)).then(|| v.clone())
        }
        Expr::Literal(v @ Value::Text(_)) => {
            (utf8 && collation == target.collation).then(|| v.clone())
        }
        Expr::Literal(v @ Value::Blob(_)) => Some(v.clone()),
        _ => None,
    };
    let is_column = |e: &Expr| matches!(e, Expr::Column(s) if *s == target.column);
    // The values an `IN` list, or an `OR` of equalities and `IN` lists of the column, admits
    // (SQLite's OR-to-IN: `x = 1 OR x = 5` is `x IN (1, 5)`); `None` for any other term.
    let points_of = |e: &Expr| -> Option<Vec<Value>> {
        let mut values = Vec::new();
        let mut stack = vec![e];
        while let Some(e) = stack.pop() {
            match e {
                Expr::Or(a, b) => stack.extend([b.as_ref(), a.as_ref()]),
                Expr::Compare {
                    op: CmpOp::Eq | CmpOp::Is,
                    left,
                    right,
                    affinity,
                    collation,
                } => {
                    let literal = match (is_column(left), is_column(right)) {
                        (true, _) => right,
                        (_, true) => left,
                        _ => return None,
                    };
                    values.push(bound_by(literal, *affinity, *collation)?);
                }
                Expr::InList {
                    expr,
                    list,
                    negated: false,
                    collation,
                } if is_column(expr) => {
                    for (v, a) in list {
                        values.push(bound_by(v, *a, *collation)?);
                    }
                }
                // Integers compared without an affinity (see Expr::InIntegers).
                Expr::InIntegers { expr, values: v } if is_column(expr) => {
                    values.extend(v.iter().map(|&i| Value::Integer(i)));
                }
                // The NULL entries, first in the index (`SEARCH ... (x=?)`).
                Expr::IsNull(x, false) if is_column(x) => values.push(Value::Null),
                _ => return None,
            }
        }
        (!values.is_empty()).then_some(values)
    };
    let order = |a: &Value, b: &Value| compare_values(a.as_ref(), b.as_ref(), target.collation);
    let (mut lower, mut upper): (Bound, Bound) = (None, None);
    // The values of the first `IN` list (or `OR` of equalities).
    let mut points: Option<Vec<Value>> = None;
    let tighten = |bound: &mut Bound, v: Value, inclusive: bool, keep: Ordering| {
        let replace = match bound {
            None => true,
            Some((b, inc)) => match order(&v, b) {
                Ordering::Equal => *inc && !inclusive,
                o => o == keep,
            },
        };
        if replace {
            *bound = Some((v, inclusive));
        }
    };
    let mut bounded = false;
    let terms_len = terms.len();
    let mut used = 0;
    for term in terms {
        match term {
            Expr::Compare {
                op,
                left,
                right,
                affinity,
                collation,
            } => {
                let (op, v) = if is_column(left) {
                    match bound_by(right, *affinity, *collation) {
                        Some(v) => (*op, v),
                        None => continue,
                    }
                } else if is_column(right) {
                    let Some(v) = bound_by(left, *affinity, *collation) else {
                        continue;
                    };
                    (op.mirrored(), v)
                } else {
                    continue;
                };
                match op {
                    CmpOp::Eq | CmpOp::Is => {
                        tighten(&mut lower, v.clone(), true, Ordering::Greater);
                        tighten(&mut upper, v, true, Ordering::Less);
                    }
                    CmpOp::Lt => tighten(&mut upper, v, false, Ordering::Less),
                    CmpOp::Le => tighten(&mut upper, v, true, Ordering::Less),
                    CmpOp::Gt => tighten(&mut lower, v, false, Ordering::Greater),
                    CmpOp::Ge => tighten(&mut lower, v, true, Ordering::Greater),
                    _ => continue,
                }
                bounded = true;
                used += 1;
            }
            Expr::Or(..) | Expr::InList { .. } | Expr::InIntegers { .. } | Expr::IsNull(..) => {
                let Some(values) = points_of(term) else {
                    continue;
                };
                bounded = true;
                match points {
                    None => {
                        points = Some(values);
                        used += 1;
                    }
                    // A second list bounds the first's range.
                    Some(_) => {
                        let lo = values.iter().min_by(|a, b| order(a, b)).cloned();
                        let hi = values.iter().max_by(|a, b| order(a, b)).cloned();
                        if let (Some(lo), Some(hi)) = (lo, hi) {
                            tighten(&mut lower, lo, true, Ordering::Greater);
                            tighten(&mut upper, hi, true, Ordering::Less);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if !bounded || (exact && used != terms_len) {
        return None;
    }
    let Some(mut points) = points else {
        return Some(vec![(lower, upper)]);
    };
    // One range per value inside the comparisons' bounds, in order, equal values once (NULL,
    // for which no comparison holds, only where there is none).
    let within = |v: &Value| {
        if *v == Value::Null {
            return lower.is_none() && upper.is_none();
        }
        lower
            .as_ref()
            .is_none_or(|(lo, inclusive)| match order(v, lo) {
                Ordering::Equal => *inclusive,
                o => o == Ordering::Greater,
            })
            && upper
                .as_ref()
                .is_none_or(|(hi, inclusive)| match order(v, hi) {
                    Ordering::Equal => *inclusive,
                    o => o == Ordering::Less,
                })
    };
    points.retain(within);
    points.sort_by(order);
    points.dedup_by(|a, b| order(a, b) == Ordering::Equal);
    Some(
        points
            .into_iter()
            .map(|v| (Some((v.clone(), true)), Some((v, true))))
            .collect(),
    )
}

/// Where an index entry's first field lies against the ranges of [`key_range`] (in the order
/// of the values), in the index's order (a `DESC` column's largest values first).
fn range_place(target: &SeekTarget, ranges: KeyRanges) -> impl Fn(KeyField<'_>) -> Place + '_ {
    // Where the key lies against one range, in the order of the values.
    let side = move |key: KeyField<'_>, (lower, upper): &(Bound, Bound)| {
        // No bound's comparison holds for NULL (the literals are not NULL), and NULL comes
        // before every value: an upper bound alone leaves the NULL entries out too. Only
        // the range of `IS NULL` holds them (NULL at both ends).
        if key == KeyField::Null {
            let null = |b: &Bound| matches!(b, Some((Value::Null, true)));
            return match null(lower) && null(upper) {
                true => Ordering::Equal,
                false => Ordering::Less,
            };
        }
        let at = |b: &Value| compare_values(key_value(key), b.as_ref(), target.collation);
        if let Some((lo, inclusive)) = lower {
            match at(lo) {
                Ordering::Less => return Ordering::Less,
                Ordering::Equal if !inclusive => return Ordering::Less,
                _ => {}
            }
        }
        if let Some((hi, inclusive)) = upper {
            match at(hi) {
                Ordering::Greater => return Ordering::Greater,
                Ordering::Equal if !inclusive => return Ordering::Greater,
                _ => {}
            }
        }
        Ordering::Equal
    };
    move |key: KeyField<'_>| {
        let n = ranges.len();
        // The ranges wholly below the key, in the order of the values.
        let below = ranges.partition_point(|r| side(key, r) == Ordering::Greater);
        let inside = ranges
            .get(below)
            .is_some_and(|r| side(key, r) == Ordering::Equal);
        match (target.descending, inside) {
            (false, true) => Place::Inside(below),
            (false, false) if below == n => Place::Above,
            (false, false) => Place::Before(below),
            // In a DESC column's index the largest values come first: range `below` of the
            // values is range `n - 1 - below` of the index.
            (true, true) => Place::Inside(n - 1 - below),
            (true, false) if below == 0 => Place::Above,
            (true, false) => Place::Before(n - below),
        }
    }
}

/// Where SQLite counts `count(*)` over the range of an index that the `WHERE` bounds (`SELECT
/// count(*) FROM t WHERE status = 'paid'`: `SEARCH t USING COVERING INDEX i (status=?)`) and
/// the `WHERE` is exactly that range ([`key_range`] with `exact`): the number of entries in
/// the range, counted from the index (whole leaves inside it from their cell counts), no
/// table page read, and the filter `rowid IN ()` that reads no row. `None` elsewhere, where
/// the table is scanned.
pub(crate) fn range_count(
    table: &TablePlan,
    target: &SeekTarget,
    filter: Option<&Expr>,
) -> Result<Option<(u64, Expr)>, SqlError> {
    let utf8 = table.header.text_encoding == 1;
    let Some(ranges) = key_range(target, filter, utf8, true) else {
        return Ok(None);
    };
    let in_index_order = range_place(target, ranges);
    let n = table.index_range_count(target.root, target.fields, &in_index_order)?;
    // No row is read: the count is the index's.
    Ok(Some((n, in_rowids(target.rowid, Vec::new()))))
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
    keys.iter().any(|(e, c)| differs(r, e, *c)) || aggregates_order_sensitive(r, aggregates)
}

/// Whether equal values of `e` under `c` can show differently (`1` and `1.0`, `'a'` and
/// `'A'` under NOCASE): which of them a group shows depends on the order of its rows.
fn differs(r: &Resolver<'_>, e: &Expr, c: Collation) -> bool {
    !e.reads_no_slot() && (c != Collation::Binary || !one_form(r, e))
}

/// Whether the rows that show a group's bare columns are the same in the loop over an index
/// with key `key` (walked forwards) as in rowid order: the only `min()`/`max()` (without
/// `DISTINCT` or `FILTER`) decides them, its argument is the index's last key column (under
/// the index's collation, and one form for equal values), every other key column is `fixed`
/// (a group key or a `WHERE` constant), and no other aggregate depends on the order. Ties of
/// the argument then come by rowid in both orders, so the first row that reaches the extreme
/// is the same, and a group whose arguments are all NULL comes in rowid order.
fn deciding_last_key(
    r: &Resolver<'_>,
    aggregates: &[AggSpec],
    key: &[Key],
    fixed: impl Fn(&Key) -> bool,
) -> bool {
    let mut deciding = aggregates
        .iter()
        .filter(|a| matches!(a.func, AggFunc::Min | AggFunc::Max));
    let (Some(a), None) = (deciding.next(), deciding.next()) else {
        return false;
    };
    let Some((last, rest)) = key.split_last() else {
        return false;
    };
    let others: Vec<AggSpec> = aggregates
        .iter()
        .filter(|x| !matches!(x.func, AggFunc::Shown | AggFunc::Min | AggFunc::Max))
        .cloned()
        .collect();
    !a.distinct
        && a.filter.is_none()
        && a.arg.as_ref() == Some(&last.expr)
        && a.collation == last.collation
        && !differs(r, &last.expr, a.collation)
        && rest.iter().all(fixed)
        && !aggregates_order_sensitive(r, &others)
}

/// [`order_sensitive`]'s part that comes from the aggregates (not the keys).
pub(crate) fn aggregates_order_sensitive(r: &Resolver<'_>, aggregates: &[AggSpec]) -> bool {
    let differs = |e: &Expr, c: Collation| differs(r, e, c);
    aggregates.iter().any(|a| {
        let shows_a_value = matches!(a.func, AggFunc::Min | AggFunc::Max)
            || (a.distinct && !matches!(a.func, AggFunc::Count));
        // group_concat and the JSON aggregates show every value in the order the rows
        // come; with ORDER BY inside, only ties come in that order (none after a rowid
        // term, none that show differently when the terms order by the one argument
        // itself), but DISTINCT keeps each value's first row, with its ORDER BY values.
        let ties_show = match a.order_by.last() {
            None => true,
            Some(last) => {
                let rowid = matches!(last.expr, Expr::Column(s)
                        if matches!(r.columns.get(s), Some(engine::query::ir::ColumnRead::Rowid)));
                let by_itself = a.second.is_none()
                    && a.arg.as_ref().is_some_and(|x| {
                        a.order_by
                            .iter()
                            .any(|k| k.expr == *x && !differs(x, k.collation))
                    });
                a.distinct || !(rowid || by_itself)
            }
        };
        let in_order = matches!(a.func, AggFunc::GroupConcat | AggFunc::Json(_))
            && ties_show
            && a.exprs().any(|e| !e.reads_no_slot());
        // A bare column shows the value of whichever row shows the group.
        let bare = a.func == AggFunc::Shown;
        bare || in_order
            || (shows_a_value && a.arg.as_ref().is_some_and(|e| differs(e, a.collation)))
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
                | F::Truth { .. }
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
                affinity: t.affinity,
            })
        })
        .collect();
    r.aliases_enabled = aliases;
    resolved
}

/// What [`follow`] gives a query: the `ORDER BY` and direction that give SQLite's rows in
/// SQLite's order, and whether each group's rows must also be ranked by their places in the
/// index SQLite reads ([`index_arrival`]).
#[derive(Debug)]
pub(crate) struct Followed {
    /// The `ORDER BY` to run.
    pub order_by: Vec<SortKey>,
    /// The scan's direction ([`engine::query::ir::QueryPlan::backward`]).
    pub backward: bool,
    /// Whether the result depends on the order in which the index delivers each group's rows.
    pub by_place: bool,
}

impl Followed {
    fn rows(order_by: Vec<SortKey>, backward: bool) -> Followed {
        Followed {
            order_by,
            backward,
            by_place: false,
        }
    }
}

/// The most rows [`index_arrival`] ranks (16 bytes each); a larger index leaves the query
/// refused.
pub(crate) const MAX_ARRIVAL_ROWS: usize = 20_000_000;

/// Each row's place in the order SQLite's loop over the index of `choice` meets the rows
/// ([`engine::query::ir::Arrival`]): from `range`, the rowids of the index range the `WHERE`
/// bounds in key order ([`range_seek`]), or else from the whole index's entries; refused
/// beyond [`MAX_ARRIVAL_ROWS`].
pub(crate) fn index_arrival(
    table: &TablePlan,
    choice: &SqliteChoice,
    range: Option<Vec<i64>>,
) -> Result<engine::query::ir::Arrival, SqlError> {
    let Access::Index {
        name,
        backward,
        fields,
        ..
    } = &choice.access
    else {
        return Err(SqlError::Invalid(
            "the rows' places come from an index".into(),
        ));
    };
    let rowids = match range {
        // The entries of a range the loop seeks, in key order: the rows it can meet, in the
        // order of their places in the whole index (a loop over an `IN` list takes its
        // values in the index's order too).
        Some(mut rowids) => {
            if *backward {
                rowids.reverse();
            }
            rowids
        }
        None => {
            let Some(root) = index_root(table, name) else {
                return Err(within_groups(
                    choice,
                    name,
                    "corescan cannot read that index",
                ));
            };
            table.index_rowids(root, *fields, *backward, 0, MAX_ARRIVAL_ROWS + 1)?
        }
    };
    if rowids.len() > MAX_ARRIVAL_ROWS {
        return Err(within_groups(
            choice,
            name,
            &format!("corescan follows it for indexes of up to {MAX_ARRIVAL_ROWS} rows"),
        ));
    }
    engine::query::ir::Arrival::new(name.clone(), &rowids).map_err(|rowid| {
        SqlError::Invalid(format!(
            "database disk image is malformed: index {name:?} lists row {rowid} twice"
        ))
    })
}

/// The refusal of a query whose result depends on the order in which index `name` delivers
/// each group's rows, and why (`why`).
fn within_groups(choice: &SqliteChoice, name: &str, why: &str) -> SqlError {
    SqlError::Unsupported(format!(
        "the result of this query depends on the order of the rows within its groups, which \
         SQLite takes from index {name:?} ({}): a group key or the argument of min(), max() \
         or a DISTINCT aggregate can hold equal values that differ (1 and 1.0 in a column \
         without a type, 'a' and 'A' under NOCASE), and which of them shows depends on that \
         order, as does the order group_concat and the JSON aggregates list their rows in \
         (with ORDER BY inside, the order of its ties: end it with the rowid to settle them); \
         {why}",
        choice.lines.join("; ")
    ))
}

fn refuse<T>(choice: &SqliteChoice, what: &str) -> Result<T, SqlError> {
    Err(SqlError::Unsupported(format!(
        "the {what} of this query depends on how SQLite reads the table ({}), which corescan \
         cannot follow yet",
        choice.lines.join("; ")
    )))
}
