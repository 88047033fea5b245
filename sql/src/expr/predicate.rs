//! The predicates with more than two operands: `BETWEEN`, `IN (list)` and `LIKE ... ESCAPE`,
//! each with the affinity, collation and operand order SQLite gives it.

use engine::datatype3::comparison_affinity;
use engine::query::ir::{CmpOp, Expr};
use sqlparser::ast;

use super::typed::{compare, first_explicit, Typed};
use super::{Resolver, Stage};
use crate::error::{unsupported, SqlError};

impl Resolver<'_> {
    /// `expr [NOT] BETWEEN low AND high`: `expr >= low AND expr <= high`, each comparison
    /// typed on its own.
    pub(super) fn between(
        &mut self,
        expr: &ast::Expr,
        negated: bool,
        low: &ast::Expr,
        high: &ast::Expr,
        stage: &mut Stage<'_>,
        d: usize,
    ) -> Result<Typed, SqlError> {
        let x = self.resolve(expr, stage, d)?;
        let lo = self.resolve(low, stage, d)?;
        let hi = self.resolve(high, stage, d)?;
        let carried = first_explicit([&x, &lo, &hi]);
        let constant = !super::uses_slots(&x.expr);
        let mut both = Expr::And(
            Box::new(compare(CmpOp::Ge, x.clone(), lo).expr),
            Box::new(compare(CmpOp::Le, x, hi).expr),
        );
        if constant {
            // One WHERE term to SQLite, coded `x >= lo AND x <= hi` (left first): with a
            // constant `x`, a half may read no column, and the WHERE splitter would test it
            // before the scan (table seed 1629092737016841608: `0 BETWEEN json_object(...)
            // ->> 1 AND -5` computes json_object() on every row). `NOT NOT NOT NOT` is the
            // same condition and the same value, and the splitter (which looks through one
            // `NOT NOT`, an `x AND 1` reduced) does not cut it; negated too, or `NOT (x NOT
            // BETWEEN ...)` is such a `NOT NOT` (table seed 2594443131820274577). A column
            // `x` stays a plain `AND` for the planner's seeks and batch filters.
            for _ in 0..4 {
                both = Expr::Not(Box::new(both));
            }
        }
        Ok(Typed {
            collation: carried,
            ..Typed::plain(if negated {
                Expr::Not(Box::new(both))
            } else {
                both
            })
        })
    }

    /// `expr [NOT] IN (list)` (a subquery is refused).
    pub(super) fn in_list(
        &mut self,
        expr: &ast::Expr,
        target: &ast::InTarget,
        negated: bool,
        stage: &mut Stage<'_>,
        d: usize,
    ) -> Result<Typed, SqlError> {
        let list = match target {
            ast::InTarget::List(list) => list,
            // `x IN ((SELECT ...))` is `x IN (SELECT ...)` to SQLite (the differential
            // tester's run seed 1796341550060625303).
            ast::InTarget::Subquery(q)
                if q.with.is_none()
                    && q.order_by.is_none()
                    && q.limit_clause.is_none()
                    && matches!(q.body.as_ref(), ast::SetExpr::Query(_)) =>
            {
                let ast::SetExpr::Query(inner) = q.body.as_ref() else {
                    unreachable!()
                };
                let target = ast::InTarget::Subquery(inner.clone());
                return self.in_list(expr, &target, negated, stage, d);
            }
            ast::InTarget::Subquery(q) => return self.in_subquery(expr, q, negated, stage, d),
            // `x IN t` is `x IN (SELECT * FROM t)`.
            ast::InTarget::Table { name, args: None } => {
                let q = crate::dialect::parse(&format!("SELECT * FROM {name}"))
                    .ok()
                    .and_then(|mut s| match s.pop() {
                        Some(ast::Statement::Query(q)) => Some(q),
                        _ => None,
                    });
                return match q {
                    Some(q) => self.in_subquery(expr, &q, negated, stage, d),
                    None => unsupported(format!("IN {target}")),
                };
            }
            _ => return unsupported(format!("IN {target}")),
        };
        let x = self.resolve(expr, stage, d)?;
        let mut carried = first_explicit([&x]);
        let mut items = Vec::with_capacity(list.len());
        for item in list {
            let t = self.resolve(item, stage, d)?;
            carried = carried.or(first_explicit([&t]));
            items.push((t.expr, comparison_affinity(x.affinity, None)));
        }
        Ok(Typed {
            collation: carried,
            ..Typed::plain(Expr::InList {
                collation: x.collation(),
                expr: Box::new(x.expr),
                list: items,
                negated,
            })
        })
    }

    /// `expr [NOT] LIKE pattern [ESCAPE escape]`.
    pub(super) fn like(
        &mut self,
        expr: &ast::Expr,
        pattern: &ast::Expr,
        escape: Option<&ast::Expr>,
        negated: bool,
        stage: &mut Stage<'_>,
        d: usize,
    ) -> Result<Typed, SqlError> {
        let x = self.resolve(expr, stage, d)?;
        let p = self.resolve(pattern, stage, d)?;
        let escape = match escape {
            Some(c) => Some(self.resolve(c, stage, d)?),
            None => None,
        };
        // `x LIKE p ESCAPE e` is the call `like(p, x, e)` to SQLite.
        let carried = first_explicit([&p, &x].into_iter().chain(escape.as_ref()));
        Ok(Typed {
            collation: carried,
            ..Typed::plain(Expr::Like {
                expr: Box::new(x.expr),
                pattern: Box::new(p.expr),
                escape: escape.map(|t| Box::new(t.expr)),
                negated,
                glob: false,
            })
        })
    }
}
