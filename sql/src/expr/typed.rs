//! What SQLite attaches to every resolved expression besides the expression itself: its
//! affinity and its collation (`sqlite3ExprAffinity`, `sqlite3ExprCollSeq`), how two operands'
//! collations combine in a comparison (`sqlite3BinaryCompareCollSeq`) or carry into an
//! operator's result, and the comparison built from two typed operands.
//!
//! A leaf of the resolver: it knows nothing of names, stages or the table.

use engine::datatype3::{comparison_affinity, Affinity, Collation};
use engine::query::ir::{CmpOp, Expr};
use sqlparser::ast;

use crate::error::{unsupported, SqlError};

/// A resolved expression with the affinity and collation SQLite gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Typed {
    /// The expression.
    pub expr: Expr,
    /// Its affinity (a column's, a `CAST`'s), if any.
    pub affinity: Option<Affinity>,
    /// Its collation, if any, and whether it was written (`COLLATE`) rather than declared.
    pub collation: Option<(Collation, bool)>,
}

impl Typed {
    /// An expression without affinity or collation (a literal, an operator's result).
    pub(super) fn plain(expr: Expr) -> Typed {
        Typed {
            expr,
            affinity: None,
            collation: None,
        }
    }

    /// This expression under an explicit `COLLATE`, when `collation` is one.
    pub fn collated(self, collation: Option<Collation>) -> Typed {
        match collation {
            Some(c) => Typed {
                collation: Some((c, true)),
                ..self
            },
            None => self,
        }
    }

    /// The collation of an ordering or grouping by this expression.
    pub fn collation(&self) -> Collation {
        self.collation.map_or(Collation::Binary, |c| c.0)
    }
}

/// The collation of a comparison of `l` with `r` (`sqlite3BinaryCompareCollSeq`).
pub(crate) fn binary_collation(l: &Typed, r: &Typed) -> Collation {
    match (l.collation, r.collation) {
        (Some((c, true)), _) => c,
        (_, Some((c, true))) => c,
        (Some((c, _)), _) => c,
        (_, Some((c, _))) => c,
        _ => Collation::Binary,
    }
}

/// The explicit collation of an operator's operands, which its result carries.
pub(super) fn carried_collation(l: &Typed, r: &Typed) -> Option<(Collation, bool)> {
    first_explicit([l, r])
}

/// The first explicit collation among an expression's operands, in SQLite's order of them
/// (its left operand, then its right one or its list), which the expression carries: every
/// operator, whatever its result, is marked `EP_Collate` when an operand is, and
/// `sqlite3ExprCollSeq` walks down the marked operands to the `COLLATE` (the differential
/// tester's run seed 1796129852002950112: `b || ((b COLLATE NOCASE) IN (r))` orders under
/// NOCASE).
pub(super) fn first_explicit<'a>(
    operands: impl IntoIterator<Item = &'a Typed>,
) -> Option<(Collation, bool)> {
    operands
        .into_iter()
        .find_map(|t| t.collation.filter(|c| c.1))
}

/// The comparison `l op r` with the affinity and collation SQLite applies to it.
pub(super) fn compare(op: CmpOp, l: Typed, r: Typed) -> Typed {
    let affinity = comparison_affinity(l.affinity, r.affinity);
    let collation = binary_collation(&l, &r);
    let carried = carried_collation(&l, &r);
    Typed {
        collation: carried,
        ..Typed::plain(Expr::Compare {
            op,
            left: Box::new(l.expr),
            right: Box::new(r.expr),
            affinity,
            collation,
        })
    }
}

/// The parts of a (possibly qualified) name.
pub(super) fn ident_name(parts: &ast::ObjectName) -> Result<Vec<String>, SqlError> {
    parts
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => Ok(i.value.clone()),
            other => unsupported(format!("name {other}")),
        })
        .collect()
}

/// The collation a `COLLATE` clause names.
pub(crate) fn collation_named(name: &ast::ObjectName) -> Result<Collation, SqlError> {
    let name = ident_name(name)?.join(".");
    Collation::from_name(&name)
        .ok_or_else(|| SqlError::Invalid(format!("no such collation sequence: {name}")))
}
