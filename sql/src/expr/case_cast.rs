//! `CASE` (with and without a base operand) and `CAST`: the two expressions that choose their
//! result's affinity and collation from parts other than their operands' values.

use engine::datatype3::{comparison_affinity, Affinity, Collation};
use engine::query::ir::Expr;
use sqlparser::ast;

use super::typed::{binary_collation, Typed};
use super::{Resolver, Stage};
use crate::error::SqlError;

impl Resolver<'_> {
    /// `CASE [operand] WHEN ... THEN ... [ELSE ...] END`.
    pub(super) fn case(
        &mut self,
        operand: Option<&ast::Expr>,
        conditions: &[ast::CaseWhen],
        else_result: Option<&ast::Expr>,
        stage: &mut Stage<'_>,
        d: usize,
    ) -> Result<Typed, SqlError> {
        let base = match operand {
            Some(o) => Some(self.resolve(o, stage, d)?),
            None => None,
        };
        let mut whens = Vec::with_capacity(conditions.len());
        // The result carries the first explicit COLLATE of its parts, in order.
        let mut carried = base.as_ref().and_then(|b| b.collation.filter(|c| c.1));
        for c in conditions {
            let w = self.resolve(&c.condition, stage, d)?;
            let t = self.resolve(&c.result, stage, d)?;
            for part in [&w, &t] {
                if carried.is_none() {
                    carried = part.collation.filter(|c| c.1);
                }
            }
            let (affinity, collation) = match &base {
                Some(b) => (
                    comparison_affinity(b.affinity, w.affinity),
                    binary_collation(b, &w),
                ),
                None => (None, Collation::Binary),
            };
            whens.push((w.expr, t.expr, affinity, collation));
        }
        let otherwise = match else_result {
            Some(x) => {
                let e = self.resolve(x, stage, d)?;
                if carried.is_none() {
                    carried = e.collation.filter(|c| c.1);
                }
                Some(Box::new(e.expr))
            }
            None => None,
        };
        Ok(Typed {
            expr: Expr::Case {
                operand: base.map(|b| Box::new(b.expr)),
                whens,
                otherwise,
            },
            affinity: None,
            collation: carried,
        })
    }

    /// `CAST(expr AS type)`: the affinity of the type's name, as a column declared with it
    /// would have.
    pub(super) fn cast(
        &mut self,
        expr: &ast::Expr,
        data_type: &ast::DataType,
        stage: &mut Stage<'_>,
        d: usize,
    ) -> Result<Typed, SqlError> {
        let x = self.resolve(expr, stage, d)?;
        let affinity = Affinity::of_declared_type(&data_type.to_string());
        Ok(Typed {
            expr: Expr::Cast(Box::new(x.expr), affinity),
            affinity: Some(affinity),
            collation: x.collation,
        })
    }
}
