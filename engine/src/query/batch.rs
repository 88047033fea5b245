//! Evaluation over a page's batch of rows: a grouped query's filter, keys and aggregate
//! arguments are evaluated node by node over all the page's decoded rows (with a selection
//! vector for the filter), so the cost of walking the expression tree is paid once per page,
//! not once per row.
//!
//! Only **infallible** expressions run this way ([`batchable`]): columns, literals,
//! arithmetic, comparisons and logic, none of which can raise an error. So the order in which
//! the batch evaluates them (a whole conjunct for every row before the next one, `AND`
//! without per-row short-circuits) cannot change which error a query reports, and every
//! value is the one the row-at-a-time evaluator gives. Anything else (functions, `LIKE`,
//! `CASE`, computed text) keeps the row path ([`super::eval`]).

use smallvec::SmallVec;

use crate::decode::CellBatch;
use crate::value::{Value, ValueRef};

use super::eval::{arith, compare_truth, eval_ref, truth_of};
use super::ir::{AggSpec, ArithOp, Expr, QueryPlan, Shape};

/// Where a batch's rows are read from.
pub enum Rows<'a, 'b> {
    /// Values already decoded, row-major (`width` per row).
    Values(&'b [ValueRef<'a>]),
    /// A page's decoded cells, read lazily: only the values a node asks for are made, so a
    /// filter that rejects a row on its first column never reads the others.
    Cells {
        /// The decoded cells.
        cells: &'b CellBatch,
        /// The page their offsets point into.
        base: &'a [u8],
        /// Where each plan slot comes from.
        sources: &'b [Source<'a>],
    },
}

/// Where one plan slot's value comes from in [`Rows::Cells`].
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// Needed record column `needed`; `real`: the column has REAL affinity (integers read
    /// back as reals); `default`: the value of a record that ends before the column.
    Record {
        /// The index among the decoder's needed columns.
        needed: usize,
        /// REAL affinity.
        real: bool,
        /// The column's DEFAULT.
        default: ValueRef<'a>,
    },
    /// The rowid.
    Rowid,
}

/// Row indices into a [`Batch`].
pub type Selection = SmallVec<[u32; 128]>;

/// A page's rows, `width` slots each.
pub struct Batch<'a, 'b> {
    /// The rows.
    pub rows: Rows<'a, 'b>,
    /// Slots per row.
    pub width: usize,
}

impl<'a> Batch<'a, '_> {
    /// Slot `i` of row `r`.
    #[inline(always)]
    fn slot(&self, r: u32, i: usize) -> ValueRef<'a> {
        match &self.rows {
            Rows::Values(v) => v[r as usize * self.width + i],
            Rows::Cells {
                cells,
                base,
                sources,
            } => match sources[i] {
                Source::Record {
                    needed,
                    real,
                    default,
                } => match cells.value(base, r as usize, needed) {
                    Some(ValueRef::Integer(x)) if real => ValueRef::Real(x as f64),
                    Some(v) => v,
                    None => default,
                },
                Source::Rowid => ValueRef::Integer(cells.rowid(base, r as usize)),
            },
        }
    }

    /// Slot `i` of every selected row, into `out` (one loop per kind of source).
    pub fn column(&self, i: usize, sel: &Selection, out: &mut [ValueRef<'a>]) {
        debug_assert_eq!(out.len(), sel.len());
        let Rows::Cells {
            cells,
            base,
            sources,
        } = &self.rows
        else {
            for (o, &r) in out.iter_mut().zip(sel) {
                *o = self.slot(r, i);
            }
            return;
        };
        match sources[i] {
            Source::Record {
                needed,
                real: false,
                default,
            } => {
                for (o, &r) in out.iter_mut().zip(sel) {
                    *o = cells.value(base, r as usize, needed).unwrap_or(default);
                }
            }
            Source::Record {
                needed,
                real: true,
                default,
            } => {
                for (o, &r) in out.iter_mut().zip(sel) {
                    *o = match cells.value(base, r as usize, needed) {
                        Some(ValueRef::Integer(x)) => ValueRef::Real(x as f64),
                        Some(v) => v,
                        None => default,
                    };
                }
            }
            Source::Rowid => {
                for (o, &r) in out.iter_mut().zip(sel) {
                    *o = ValueRef::Integer(cells.rowid(base, r as usize));
                }
            }
        }
    }

    /// Calls `f` with row `r`'s slots (made on the stack for [`Rows::Cells`]).
    fn with_row<T>(&self, r: u32, f: impl FnOnce(&[ValueRef<'a>]) -> T) -> T {
        match &self.rows {
            Rows::Values(v) => {
                let at = r as usize * self.width;
                f(&v[at..at + self.width])
            }
            Rows::Cells { .. } => {
                let row: SmallVec<[ValueRef<'a>; 32]> =
                    (0..self.width).map(|i| self.slot(r, i)).collect();
                f(&row)
            }
        }
    }
}

/// Whether `e` can be evaluated over a batch: it cannot fail and computes no text.
pub fn batchable(e: &Expr) -> bool {
    match e {
        Expr::Column(_) | Expr::Literal(_) => true,
        Expr::Negate(x) | Expr::Not(x) | Expr::BitNot(x) | Expr::IsNull(x, _) => batchable(x),
        Expr::Arith(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => batchable(a) && batchable(b),
        Expr::Compare { left, right, .. } => batchable(left) && batchable(right),
        Expr::InList { expr, list, .. } => {
            batchable(expr) && list.iter().all(|(x, _)| batchable(x))
        }
        _ => false,
    }
}

/// Whether a plan's row stage can run over batches: a grouped query without generated
/// columns, whose missing columns all have a known DEFAULT (reading a slot cannot fail), and
/// whose filter, keys and aggregate arguments are all [`batchable`].
pub fn plan_batchable(plan: &QueryPlan, has_virtual: bool) -> bool {
    let Shape::Groups {
        keys, aggregates, ..
    } = &plan.shape
    else {
        return false;
    };
    let defaults_known = plan.columns.iter().all(|c| {
        !matches!(
            c,
            super::ir::ColumnRead::Record {
                default: Err(_),
                ..
            }
        )
    });
    !has_virtual
        && defaults_known
        && plan.filter.as_ref().is_none_or(batchable)
        && keys.iter().all(|(e, _)| batchable(e))
        && aggregates
            .iter()
            .all(|AggSpec { arg, .. }| arg.as_ref().is_none_or(batchable))
}

/// Keeps in `sel` the rows for which `filter` is true.
pub fn filter(filter: &Expr, batch: &Batch<'_, '_>, sel: &mut Selection) {
    match filter {
        // Each conjunct narrows the selection (infallible, so skipping the rows an earlier
        // conjunct dropped changes nothing but the work done).
        Expr::And(a, b) => {
            self::filter(a, batch, sel);
            self::filter(b, batch, sel);
        }
        // The common filter term: a column against a literal, in a tight loop.
        Expr::Compare {
            op,
            left,
            right,
            affinity,
            collation,
        } => match (&**left, &**right) {
            (Expr::Column(i), Expr::Literal(v)) => {
                let v = v.as_ref();
                sel.retain(|r| {
                    compare_truth(*op, batch.slot(*r, *i), v, *affinity, *collation) == Some(true)
                });
            }
            (Expr::Literal(v), Expr::Column(i)) => {
                let v = v.as_ref();
                sel.retain(|r| {
                    compare_truth(*op, v, batch.slot(*r, *i), *affinity, *collation) == Some(true)
                });
            }
            _ => retain_true(filter, batch, sel),
        },
        other => retain_true(other, batch, sel),
    }
}

fn retain_true(e: &Expr, batch: &Batch<'_, '_>, sel: &mut Selection) {
    // Infallible (see `batchable`): an error cannot happen, and would keep no row.
    sel.retain(|r| batch.with_row(*r, |row| truth_of(e, row)) == Ok(Some(true)));
}

/// A number (or NULL) as a value that borrows nothing.
fn number_ref(v: Value) -> ValueRef<'static> {
    match v {
        Value::Integer(i) => ValueRef::Integer(i),
        Value::Real(r) => ValueRef::Real(r),
        _ => ValueRef::Null,
    }
}

/// `+`, `-` or `*` (`real` on doubles) over a batch: operands that are reals, or a real and an
/// integer, take the double operation inline (what [`arith`] does for them); anything else
/// goes through [`arith`].
#[inline(always)]
fn arith_loop<'a>(
    op: ArithOp,
    real: impl Fn(f64, f64) -> f64,
    x: &Input<'a>,
    y: &Input<'a>,
    batch: &Batch<'a, '_>,
    sel: &Selection,
    out: &mut [ValueRef<'a>],
) {
    let real_ref = |r: f64| {
        if r.is_nan() {
            ValueRef::Null
        } else {
            ValueRef::Real(r)
        }
    };
    for (k, o) in out.iter_mut().enumerate() {
        let (p, q) = (x.get(batch, sel, k), y.get(batch, sel, k));
        *o = match (p, q) {
            (ValueRef::Real(p), ValueRef::Real(q)) => real_ref(real(p, q)),
            (ValueRef::Integer(i), ValueRef::Real(q)) => real_ref(real(i as f64, q)),
            (ValueRef::Real(p), ValueRef::Integer(j)) => real_ref(real(p, j as f64)),
            _ => number_ref(arith(op, p, q)),
        };
    }
}

/// An operand of a batch node: a column and a literal are read in place, anything else is
/// evaluated into a scratch run first.
enum Input<'a> {
    Column(usize),
    Literal(ValueRef<'a>),
    Values(Vec<ValueRef<'a>>),
}

impl<'a> Input<'a> {
    fn of(e: &'a Expr, batch: &Batch<'a, '_>, sel: &Selection) -> Self {
        match e {
            Expr::Column(i) => Input::Column(*i),
            Expr::Literal(v) => Input::Literal(v.as_ref()),
            other => {
                let mut v = vec![ValueRef::Null; sel.len()];
                eval(other, batch, sel, &mut v);
                Input::Values(v)
            }
        }
    }

    #[inline(always)]
    fn get(&self, batch: &Batch<'a, '_>, sel: &Selection, k: usize) -> ValueRef<'a> {
        match self {
            Input::Column(i) => batch.slot(sel[k], *i),
            Input::Literal(v) => *v,
            Input::Values(v) => v[k],
        }
    }
}

/// `e` for every selected row, into `out` (one entry per entry of `sel`).
pub fn eval<'a>(e: &'a Expr, batch: &Batch<'a, '_>, sel: &Selection, out: &mut [ValueRef<'a>]) {
    debug_assert_eq!(out.len(), sel.len());
    match e {
        Expr::Column(i) => {
            for (o, &r) in out.iter_mut().zip(sel) {
                *o = batch.slot(r, *i);
            }
        }
        Expr::Literal(v) => out.fill(v.as_ref()),
        Expr::Arith(op, a, b) => {
            let (x, y) = (Input::of(a, batch, sel), Input::of(b, batch, sel));
            match op {
                ArithOp::Add => arith_loop(*op, |p, q| p + q, &x, &y, batch, sel, out),
                ArithOp::Sub => arith_loop(*op, |p, q| p - q, &x, &y, batch, sel, out),
                ArithOp::Mul => arith_loop(*op, |p, q| p * q, &x, &y, batch, sel, out),
                _ => {
                    for (k, o) in out.iter_mut().enumerate() {
                        *o = number_ref(arith(*op, x.get(batch, sel, k), y.get(batch, sel, k)));
                    }
                }
            }
        }
        // Negation, bit-not and the logical nodes: the row evaluator, per selected row (they
        // yield numbers or NULL, which borrow nothing).
        other => {
            for (o, &r) in out.iter_mut().zip(sel) {
                *o = batch.with_row(r, |row| {
                    eval_ref(other, row).map_or(ValueRef::Null, |v| match v.as_ref() {
                        ValueRef::Integer(i) => ValueRef::Integer(i),
                        ValueRef::Real(x) => ValueRef::Real(x),
                        _ => ValueRef::Null,
                    })
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype3::{Affinity, Collation};
    use crate::query::eval::eval as eval_row;
    use crate::query::ir::CmpOp;

    fn b(e: Expr) -> Box<Expr> {
        Box::new(e)
    }

    /// Every batchable node gives, for each row, what the row evaluator gives, and the filter
    /// keeps exactly the rows the row evaluator keeps.
    #[test]
    fn batches_agree_with_the_row_evaluator() {
        let cmp = |op, l: Expr, r: Expr, affinity| Expr::Compare {
            op,
            left: b(l),
            right: b(r),
            affinity,
            collation: Collation::NoCase,
        };
        let lit = |v: Value| Expr::Literal(v);
        let exprs = [
            Expr::Arith(ArithOp::Mul, b(Expr::Column(0)), b(Expr::Column(1))),
            Expr::Arith(
                ArithOp::Sub,
                b(lit(Value::Integer(1))),
                b(Expr::Arith(
                    ArithOp::Add,
                    b(Expr::Column(1)),
                    b(lit(Value::Real(0.5))),
                )),
            ),
            Expr::Arith(ArithOp::Rem, b(Expr::Column(0)), b(Expr::Column(1))),
            // Infinity times zero is NaN, which SQLite makes NULL.
            Expr::Arith(
                ArithOp::Mul,
                b(Expr::Column(0)),
                b(lit(Value::Real(f64::INFINITY))),
            ),
            Expr::Arith(ArithOp::Add, b(Expr::Column(1)), b(Expr::Column(0))),
            Expr::Negate(b(Expr::Column(0))),
            cmp(
                CmpOp::Lt,
                Expr::Column(0),
                lit(Value::Integer(24)),
                Some(Affinity::Numeric),
            ),
            cmp(
                CmpOp::Ge,
                lit(Value::text("ABC")),
                Expr::Column(1),
                Some(Affinity::Text),
            ),
            cmp(CmpOp::Is, Expr::Column(0), Expr::Column(1), None),
            Expr::And(
                b(cmp(CmpOp::Ne, Expr::Column(0), lit(Value::Null), None)),
                b(Expr::Column(1)),
            ),
            Expr::Or(
                b(Expr::Not(b(Expr::Column(0)))),
                b(Expr::IsNull(b(Expr::Column(1)), false)),
            ),
            Expr::And(
                b(cmp(
                    CmpOp::Gt,
                    Expr::Column(0),
                    lit(Value::Real(1.0)),
                    Some(Affinity::Real),
                )),
                b(cmp(
                    CmpOp::Le,
                    Expr::Column(1),
                    lit(Value::text("24")),
                    Some(Affinity::Text),
                )),
            ),
        ];
        let values = [
            ValueRef::Null,
            ValueRef::Integer(3),
            ValueRef::Integer(i64::MAX),
            ValueRef::Real(2.5),
            ValueRef::Real(-0.0),
            ValueRef::Text(b"24"),
            ValueRef::Text(b"abc"),
            ValueRef::Blob(b"\x01"),
        ];
        let mut slots = Vec::new();
        for x in values {
            for y in values {
                slots.extend([x, y]);
            }
        }
        let n = slots.len() / 2;
        let batch = Batch {
            rows: Rows::Values(&slots),
            width: 2,
        };
        let row = |r: u32| &slots[r as usize * 2..r as usize * 2 + 2];
        let all: Selection = (0..n as u32).collect();
        for e in &exprs {
            assert!(batchable(e), "{e:?}");
            let mut out = vec![ValueRef::Null; n];
            eval(e, &batch, &all, &mut out);
            let mut sel = all.clone();
            filter(e, &batch, &mut sel);
            let mut kept = Selection::new();
            for r in 0..n as u32 {
                let want = eval_row(e, row(r)).unwrap();
                assert_eq!(out[r as usize].to_owned(), want, "{e:?} on {:?}", row(r));
                if truth_of(e, row(r)) == Ok(Some(true)) {
                    kept.push(r);
                }
            }
            assert_eq!(sel, kept, "{e:?}");
        }
    }
}
