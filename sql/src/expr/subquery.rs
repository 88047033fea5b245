//! Subqueries in expressions: `(SELECT ...)`, `x [NOT] IN (SELECT ...)` and `[NOT] EXISTS
//! (SELECT ...)`, each resolved to its result, which [`crate::subquery`] computes before the
//! statement's scan: a literal with the subquery's affinity and no collation (a `TK_SELECT`
//! has the affinity of its first result column and carries no `COLLATE`), a set of values
//! compared under the affinity and collation SQLite gives an `IN (SELECT ...)`, or 0 and 1.

use std::sync::Arc;

use engine::datatype3::{comparison_affinity, Affinity};
use engine::query::in_set::InSet;
use engine::query::ir::Expr;
use engine::value::Value;
use sqlparser::ast;

use super::typed::{binary_collation, first_explicit, Typed};
use super::{Resolver, Stage};
use crate::error::{unsupported, SqlError};
use crate::subquery::{Outcome, OuterNames, Want};

impl Resolver<'_> {
    /// `(SELECT ...)`: its first row's value, NULL without a row.
    pub(super) fn scalar_subquery(&mut self, q: &ast::Query) -> Result<Typed, SqlError> {
        let outcome = self.subquery(q, Want::Scalar)?;
        outcome.one_column()?;
        let expr = match &outcome.rows {
            Ok(rows) => Expr::Literal(
                rows.first()
                    .and_then(|r| r.first())
                    .cloned()
                    .unwrap_or(Value::Null),
            ),
            Err(m) => Expr::Raise(Arc::from(m.as_str())),
        };
        Ok(Typed {
            expr,
            affinity: outcome.affinity,
            collation: None,
        })
    }

    /// `expr [NOT] IN (SELECT ...)`: the comparison's affinity is the left operand's and the
    /// subquery column's (`exprINAffinity`), its collation theirs as for `=`
    /// (`sqlite3BinaryCompareCollSeq`); the result carries the left operand's `COLLATE`.
    pub(super) fn in_subquery(
        &mut self,
        expr: &ast::Expr,
        q: &ast::Query,
        negated: bool,
        stage: &mut Stage<'_>,
        d: usize,
    ) -> Result<Typed, SqlError> {
        if matches!(expr, ast::Expr::Tuple(_)) {
            return unsupported("row values (`(a, b) IN (SELECT ...)`)");
        }
        let x = self.resolve(expr, stage, d)?;
        let outcome = self.subquery(q, Want::In)?;
        outcome.one_column()?;
        let column = Typed {
            expr: Expr::Literal(Value::Null),
            affinity: outcome.affinity,
            collation: outcome.collation,
        };
        // One side's REAL affinity stays REAL (sqlite3CompareAffinity keeps the one affinity
        // there is; the comparison operators treat it as NUMERIC, the IN lookup does not: it
        // turns a large integer into a real, see engine::query::in_set).
        let affinity = match (x.affinity, column.affinity) {
            (Some(Affinity::Real), None) | (None, Some(Affinity::Real)) => Some(Affinity::Real),
            (l, r) => comparison_affinity(l, r),
        };
        let collation = binary_collation(&x, &column);
        let carried = first_explicit([&x]);
        let expr = match &outcome.rows {
            Ok(rows) => Expr::InSet {
                set: Arc::new(InSet::new(
                    rows.iter()
                        .map(|r| r.first().cloned().unwrap_or(Value::Null))
                        .collect(),
                    affinity,
                    collation,
                )),
                expr: Box::new(x.expr),
                negated,
            },
            // SQLite computes the subquery before the left operand.
            Err(m) => Expr::Raise(Arc::from(m.as_str())),
        };
        Ok(Typed {
            collation: carried,
            ..Typed::plain(expr)
        })
    }

    /// `[NOT] EXISTS (SELECT ...)`: 1 or 0.
    pub(super) fn exists(&mut self, q: &ast::Query, negated: bool) -> Result<Typed, SqlError> {
        let outcome = self.subquery(q, Want::Exists)?;
        let expr = match &outcome.rows {
            Ok(rows) => Expr::Literal(Value::Integer(i64::from(rows.is_empty() == negated))),
            Err(m) => Expr::Raise(Arc::from(m.as_str())),
        };
        Ok(Typed::plain(expr))
    }

    fn subquery(&mut self, q: &ast::Query, want: Want) -> Result<Outcome, SqlError> {
        let Some(subqueries) = self.subqueries else {
            return unsupported(
                "subqueries here (corescan query runs them over one file; `corescan sql` \
                 plans them with DataFusion)",
            );
        };
        subqueries.evaluate(q, want, self.outer_names())
    }

    /// The names a subquery of this query could mean here.
    fn outer_names(&self) -> OuterNames {
        let mut columns: Vec<String> = self
            .table
            .definition
            .columns
            .iter()
            .map(|c| c.name.to_ascii_lowercase())
            .collect();
        columns.extend(["rowid", "_rowid_", "oid"].map(String::from));
        OuterNames {
            qualifiers: self.qualifiers.clone(),
            columns,
        }
    }
}
