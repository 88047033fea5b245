//! Expression resolution: `sqlparser` expressions to the engine's [`Expr`], with each
//! expression's affinity and collation worked out as SQLite does (`sqlite3ExprAffinity`,
//! `sqlite3ExprCollSeq`, `sqlite3BinaryCompareCollSeq`), so every comparison's conversion is
//! fixed at planning.
//!
//! [`Resolver::resolve`] handles what is common to every expression (the depth limit, group
//! keys and constants over a group, result aliases) and hands each operator family to its
//! module, as turso's `translate/expr` does:
//!
//! - [`column`]: names, the rowid, generated columns, aliases, and the row stage's slots;
//! - [`literal`]: numbers, strings, blobs, `NULL`;
//! - [`unary`]: signs, `NOT`, `~`, `IS [NOT] NULL`, `COLLATE`;
//! - [`binary`]: arithmetic, comparisons, `AND`/`OR`, `GLOB`;
//! - [`predicate`]: `BETWEEN`, `IN (list)`, `LIKE`;
//! - [`case_cast`]: `CASE` and `CAST`;
//! - [`subquery`]: `(SELECT ...)`, `IN (SELECT ...)`, `EXISTS`, as their results;
//! - [`function`]: aggregates and scalar functions;
//! - [`window`]: window function calls (`OVER`), resolved into the window stage's
//!   [`WindowContext`] ([`window_context`], a leaf: inputs, calls, SQLite's nesting of
//!   windows into passes, named windows).
//!
//! Below them, two leaves that know nothing of the resolver: [`typed`] (the affinity and
//! collation of a resolved expression, and the comparison of two) and [`truth`] (what SQLite's
//! parser decides about literals: the truth values an `AND`/`OR` reduces by, the literals
//! never NULL). Every family recurses through [`Resolver::resolve`].

mod binary;
mod case_cast;
mod column;
mod function;
mod group_context;
mod literal;
mod predicate;
mod subquery;
mod truth;
mod typed;
mod unary;
mod window;
mod window_context;

use std::collections::HashMap;

use engine::query::ir::{ColumnRead, Expr, SortKey};
use partitioner::TablePlan;
use sqlparser::ast;

use crate::error::{invalid, unsupported, SqlError};

pub(crate) use function::is_probability;
pub use group_context::GroupContext;
pub(crate) use truth::{has_truth_value, parser_folds_and};
pub use typed::Typed;
pub(crate) use typed::{binary_collation, collation_named};
pub(crate) use window_context::{is_window_only, named_window};
pub use window_context::{renumber_results, WindowContext};

/// Where an expression is evaluated.
pub enum Stage<'a> {
    /// Over a decoded record.
    Row,
    /// Over a group: its keys, then its aggregates.
    Group(&'a mut GroupContext),
    /// Over a row of the window stage: its input slots, then its window functions' results.
    Window(&'a mut WindowContext),
}

/// What a row-stage slot reads, so that each column is decoded once however often the query
/// names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum SlotKey {
    Rowid,
    Column(usize),
    File,
}

/// Resolves names against one table and allocates the row stage's slots.
pub struct Resolver<'t> {
    table: &'t TablePlan,
    qualifiers: Vec<String>,
    /// The row stage's slots.
    pub columns: Vec<ColumnRead>,
    slot_of: HashMap<SlotKey, usize>,
    /// Virtual columns being resolved (a cycle guard).
    resolving: Vec<usize>,
    /// The SQL text being resolved (the query, or a generated column's expression).
    source: String,
    /// Result-column aliases and their expressions: SQLite resolves a name that is no column
    /// to one in `WHERE`, `GROUP BY`, `HAVING` and `ORDER BY` (not in the result list).
    pub aliases: Vec<(String, ast::Expr)>,
    /// Whether [`Self::aliases`] apply (off while the result list itself is resolved).
    pub aliases_enabled: bool,
    alias_depth: usize,
    /// The table is spread over several files: the hidden column `_file` names the file of
    /// each row (unless a column takes the name).
    pub files: bool,
    /// What runs the statement's subqueries (none: they are refused).
    pub(crate) subqueries: Option<&'t crate::subquery::Subqueries<'t>>,
}

/// The deepest nesting resolved: deeper expressions are refused rather than overflow the
/// stack.
const MAX_DEPTH: usize = 200;

/// The word SQLite reads as the boolean `b` where no column has that name.
pub(crate) fn bool_word(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

impl<'t> Resolver<'t> {
    /// Whether the table has a column named `name` (compared without case).
    pub(crate) fn table_has_column(&self, name: &str) -> bool {
        self.table
            .definition
            .columns
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// A resolver for `table`, which the query calls `alias` if it gives one.
    pub fn new(table: &'t TablePlan, alias: Option<&str>, sql: &str) -> Self {
        // A table with an alias is known by the alias only (`SELECT t.a FROM t AS u` is `no
        // such column: t.a`): in a subquery, `t.a` is then the outer query's `t`.
        let qualifiers = vec![alias.unwrap_or(&table.table.name).to_ascii_lowercase()];
        Resolver {
            table,
            qualifiers,
            columns: Vec::new(),
            slot_of: HashMap::new(),
            resolving: Vec::new(),
            source: sql.to_string(),
            aliases: Vec::new(),
            aliases_enabled: false,
            alias_depth: 0,
            files: false,
            subqueries: None,
        }
    }

    /// Resolves `e` in `stage`.
    pub fn resolve(
        &mut self,
        e: &ast::Expr,
        stage: &mut Stage<'_>,
        depth: usize,
    ) -> Result<Typed, SqlError> {
        if depth > MAX_DEPTH {
            return invalid("expression nested too deeply");
        }
        if let Stage::Group(ctx) = stage {
            if let Some(t) = self.group_key_or_constant(e, ctx, depth) {
                return Ok(t);
            }
        }
        if let Stage::Window(ctx) = stage {
            if !self.has_window(e) {
                return self.outside_window(e, ctx, depth + 1);
            }
        }
        let d = depth + 1;
        if let ast::Expr::Identifier(i) = e {
            if let Some(aliased) = self.alias_of(&i.value) {
                if self.alias_depth > 8 {
                    return invalid(format!("alias {} refers to itself", i.value));
                }
                self.alias_depth += 1;
                // An alias's windows are copies of the result column's (see
                // WindowContext::copying).
                let copying = match stage {
                    Stage::Window(ctx) => Some(std::mem::replace(&mut ctx.copying, true)),
                    _ => None,
                };
                let r = self.resolve(&aliased, stage, d);
                if let (Stage::Window(ctx), Some(was)) = (&mut *stage, copying) {
                    ctx.copying = was;
                }
                self.alias_depth -= 1;
                return r;
            }
        }
        match e {
            ast::Expr::Identifier(i) => self.identifier(std::slice::from_ref(i), stage),
            ast::Expr::CompoundIdentifier(parts) => self.identifier(parts, stage),
            // `true` and `false` are names to SQLite: a column of that name first, the
            // boolean only where none is (`sqlite3ExprIdToTrueFalse`).
            ast::Expr::Value(v) if matches!(v.value, ast::Value::Boolean(b) if self.table_has_column(bool_word(b))) =>
            {
                let ast::Value::Boolean(b) = v.value else {
                    unreachable!("matched above")
                };
                self.identifier(&[ast::Ident::new(bool_word(b))], stage)
            }
            ast::Expr::Value(v) => Ok(Typed::plain(Expr::Literal(self.literal_at(v, false)?))),
            ast::Expr::Nested(x) => self.resolve(x, stage, d),
            ast::Expr::UnaryOp { op, expr } => self.unary(op, expr, stage, d),
            ast::Expr::BinaryOp { left, op, right } => self.binary_op(left, op, right, stage, d),
            ast::Expr::IsNull(x) => self.is_null(x, false, stage, d),
            ast::Expr::IsNotNull(x) => self.is_null(x, true, stage, d),
            ast::Expr::IsDistinctFrom(a, b) => self.is_distinct(a, b, true, stage, d),
            ast::Expr::IsNotDistinctFrom(a, b) => self.is_distinct(a, b, false, stage, d),
            // `x IS true` compares with a column named `true` where there is one.
            ast::Expr::IsTrue(x)
            | ast::Expr::IsNotTrue(x)
            | ast::Expr::IsFalse(x)
            | ast::Expr::IsNotFalse(x)
                if self.table_has_column(bool_word(matches!(
                    e,
                    ast::Expr::IsTrue(_) | ast::Expr::IsNotTrue(_)
                ))) =>
            {
                let word = bool_word(matches!(e, ast::Expr::IsTrue(_) | ast::Expr::IsNotTrue(_)));
                let negated = matches!(e, ast::Expr::IsNotTrue(_) | ast::Expr::IsNotFalse(_));
                let op = if negated {
                    ast::BinaryOperator::IsNot
                } else {
                    ast::BinaryOperator::Is
                };
                let column = ast::Expr::Identifier(ast::Ident::new(word));
                self.binary_op(x, &op, &column, stage, d)
            }
            ast::Expr::IsTrue(x) => self.truth(x, true, false, stage, d),
            ast::Expr::IsNotTrue(x) => self.truth(x, true, true, stage, d),
            ast::Expr::IsFalse(x) => self.truth(x, false, false, stage, d),
            ast::Expr::IsNotFalse(x) => self.truth(x, false, true, stage, d),
            ast::Expr::Between {
                expr,
                negated,
                low,
                high,
            } => self.between(expr, *negated, low, high, stage, d),
            ast::Expr::In {
                expr,
                target,
                negated,
                ..
            } => self.in_list(expr, target, *negated, stage, d),
            ast::Expr::Like {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            } => {
                if *any {
                    return unsupported("LIKE ANY");
                }
                self.like(expr, pattern, escape_char.as_deref(), *negated, stage, d)
            }
            ast::Expr::ILike { .. } => {
                unsupported("ILIKE (SQLite's LIKE is already case-insensitive)")
            }
            ast::Expr::SimilarTo { .. } | ast::Expr::RLike { .. } => {
                unsupported("SIMILAR TO / REGEXP")
            }
            ast::Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => self.case(
                operand.as_deref(),
                conditions,
                else_result.as_deref(),
                stage,
                d,
            ),
            ast::Expr::Cast {
                kind,
                expr,
                data_type,
                format,
                ..
            } => {
                if !matches!(kind, ast::CastKind::Cast) || format.is_some() {
                    return unsupported(format!("{e}"));
                }
                self.cast(expr, data_type, stage, d)
            }
            ast::Expr::Collate { expr, collation } => self.collate(expr, collation, stage, d),
            ast::Expr::Function(f) => self.function(f, stage, d),
            ast::Expr::Trim {
                trim_where,
                trim_what,
                expr,
                trim_characters,
            } => {
                if trim_where.is_some() || trim_what.is_some() {
                    return unsupported("TRIM(BOTH/LEADING/TRAILING ... FROM ...)");
                }
                self.trim(expr, trim_characters.as_deref(), stage, d)
            }
            ast::Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => self.substring(
                expr,
                substring_from.as_deref(),
                substring_for.as_deref(),
                stage,
                d,
            ),
            ast::Expr::Ceil { expr, field } | ast::Expr::Floor { expr, field } => {
                let name = if matches!(e, ast::Expr::Ceil { .. }) {
                    "ceil"
                } else {
                    "floor"
                };
                self.ceil_floor(name, expr, field, stage, d)
            }
            ast::Expr::Subquery(q) => self.scalar_subquery(q),
            ast::Expr::Exists { subquery, negated } => self.exists(subquery, *negated),

            other => unsupported(format!("the expression {other}")),
        }
    }

    /// Over a group, `e` as the group shows it without taking it apart: a group key's slot
    /// when `e` equals a key, `e` itself when it reads no column (a constant); `None` when it
    /// must be resolved part by part.
    fn group_key_or_constant(
        &mut self,
        e: &ast::Expr,
        ctx: &GroupContext,
        depth: usize,
    ) -> Option<Typed> {
        let saved = (self.columns.len(), self.slot_of.clone());
        if let Ok(t) = self.resolve(e, &mut Stage::Row, depth + 1) {
            if let Some(i) = ctx.keys.iter().position(|k| k.expr == t.expr) {
                let k = &ctx.keys[i];
                return Some(Typed {
                    expr: Expr::Column(i),
                    affinity: k.affinity,
                    collation: k.collation,
                });
            }
            if !uses_slots(&t.expr) {
                return Some(t);
            }
        }
        // Forget slots allocated only for the attempt.
        self.columns.truncate(saved.0);
        self.slot_of = saved.1;
        None
    }
}

/// Whether `x` itself is a subquery (scalar, `EXISTS` or `IN (SELECT ...)`).
pub(super) fn is_subquery(x: &ast::Expr) -> bool {
    matches!(
        x,
        ast::Expr::Subquery(_)
            | ast::Expr::Exists { .. }
            | ast::Expr::In {
                target: ast::InTarget::Subquery(_) | ast::InTarget::Table { .. },
                ..
            }
    )
}

/// Whether `e` holds a subquery anywhere (SQLite's `EP_Subquery`, which its parser carries up
/// the tree).
pub(crate) fn holds_subquery(e: &ast::Expr) -> bool {
    ast::visit_expressions(e, |x| {
        if is_subquery(x) {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// `e` with each subquery in it replaced by `NULL`: what a walk over `e` that must not enter
/// its subqueries (whose names and functions are their own) walks.
pub(crate) fn outside_subqueries(e: &ast::Expr) -> std::borrow::Cow<'_, ast::Expr> {
    if !holds_subquery(e) {
        return std::borrow::Cow::Borrowed(e);
    }
    let mut e = e.clone();
    let _ = ast::visit_expressions_mut(&mut e, |x| {
        if is_subquery(x) {
            *x = ast::Expr::value(ast::Value::Null);
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    std::borrow::Cow::Owned(e)
}

/// Whether `e` reads any slot (the engine's own test, which constant folding uses).
pub fn uses_slots(e: &Expr) -> bool {
    engine::query::fold::reads_slots(e)
}

/// One `ORDER BY` term (of the query or of a window) over its resolved expression.
pub(crate) fn sort_key(term: &ast::OrderByExpr, t: Typed) -> Result<SortKey, SqlError> {
    if term.with_fill.is_some() {
        return unsupported("ORDER BY ... WITH FILL");
    }
    let descending = match term.options.sort {
        None | Some(ast::OrderBySort::Asc) => false,
        Some(ast::OrderBySort::Desc) => true,
        Some(_) => return unsupported("ORDER BY ... USING"),
    };
    Ok(SortKey {
        collation: t.collation(),
        expr: t.expr,
        descending,
        nulls_first: term.options.nulls_first.unwrap_or(!descending),
    })
}
