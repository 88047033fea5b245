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

use crate::decode::{CellBatch, Slot};
use crate::value::{Value, ValueRef};

use std::cmp::Ordering;

use crate::datatype3::{int_real_cmp, Affinity, Collation};

use super::eval::{arith, compare_truth, eval_ref, maybe_number, truth_of};
use super::ir::{AggFunc, ArithOp, CmpOp, Expr, QueryPlan, Shape};

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
    pub fn slot(&self, r: u32, i: usize) -> ValueRef<'a> {
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
                } => record_value(cells, base, r as usize, needed, real, default),
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
                    *o = record_value(cells, base, r as usize, needed, false, default);
                }
            }
            Source::Record {
                needed,
                real: true,
                default,
            } => {
                for (o, &r) in out.iter_mut().zip(sel) {
                    *o = record_value(cells, base, r as usize, needed, true, default);
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
        Expr::InIntegers { expr, .. } => batchable(expr),
        Expr::InSet { .. } | Expr::Raise(_) => false,
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
        && aggregates.iter().all(|a| {
            !matches!(a.func, AggFunc::Json(_))
                && a.order_by.is_empty()
                && a.filter.is_none()
                && a.exprs().all(batchable)
        })
}

/// A batch's filter, prepared once per query: its conjuncts in order, each a column compared
/// with a constant (decided in a tight loop, its constant's properties worked out here rather
/// than once per page) or any other infallible expression.
#[derive(Debug, Clone)]
pub struct BatchFilter {
    steps: Vec<Step>,
}

/// One conjunct of a [`BatchFilter`].
#[derive(Debug, Clone)]
enum Step {
    /// Plan slot `slot` compared with a constant.
    Compare {
        /// The slot.
        slot: usize,
        /// The comparison.
        compare: PreparedCompare,
    },
    /// Any other conjunct (kept when true).
    Truth(Expr),
}

impl BatchFilter {
    /// The filter `filter`, prepared.
    pub fn new(filter: &Expr) -> Self {
        let mut steps = Vec::new();
        Self::add(filter, &mut steps);
        BatchFilter { steps }
    }

    fn add(e: &Expr, steps: &mut Vec<Step>) {
        // Each conjunct narrows the selection (infallible, so skipping the rows an earlier
        // conjunct dropped changes nothing but the work done).
        if let Expr::And(a, b) = e {
            Self::add(a, steps);
            Self::add(b, steps);
            return;
        }
        let step = match e {
            Expr::Compare {
                op,
                left,
                right,
                affinity,
                collation,
            } => match (&**left, &**right) {
                (Expr::Column(i), Expr::Literal(v)) => Some((*i, v, true)),
                (Expr::Literal(v), Expr::Column(i)) => Some((*i, v, false)),
                _ => None,
            }
            .map(|(slot, v, column_left)| Step::Compare {
                slot,
                compare: PreparedCompare::new(*op, v, *affinity, *collation, column_left),
            }),
            _ => None,
        };
        steps.push(step.unwrap_or_else(|| Step::Truth(e.clone())));
    }

    /// Keeps in `sel` the rows for which the filter is true.
    pub fn retain(&self, batch: &Batch<'_, '_>, sel: &mut Selection) {
        for step in &self.steps {
            if sel.is_empty() {
                return;
            }
            match step {
                Step::Compare { slot, compare } => {
                    retain_compare(batch, *slot, &compare.as_const(), sel)
                }
                Step::Truth(e) => retain_true(e, batch, sel),
            }
        }
    }
}

/// A column compared with a constant, as a [`BatchFilter`] keeps it: the constant owned, its
/// properties worked out once.
#[derive(Debug, Clone)]
struct PreparedCompare {
    rule: CompareRule,
    constant: Value,
}

impl PreparedCompare {
    fn new(
        op: CmpOp,
        constant: &Value,
        affinity: Option<Affinity>,
        collation: Collation,
        column_left: bool,
    ) -> Self {
        let text_stays = matches!(affinity, None | Some(Affinity::Text | Affinity::Blob));
        let text_bytes = collation == Collation::Binary
            && matches!(constant, Value::Text(c) if text_stays || !maybe_number(c));
        PreparedCompare {
            rule: CompareRule {
                op,
                affinity,
                collation,
                column_left,
                text_bytes,
                text_stays,
            },
            constant: constant.clone(),
        }
    }

    /// The comparison, borrowing the constant.
    #[inline(always)]
    fn as_const(&self) -> ConstCompare<'_> {
        ConstCompare {
            rule: self.rule,
            constant: self.constant.as_ref(),
        }
    }
}

/// How a column is compared with a constant (everything but the constant).
#[derive(Debug, Clone, Copy)]
struct CompareRule {
    op: CmpOp,
    affinity: Option<Affinity>,
    collation: Collation,
    /// The column is the left operand.
    column_left: bool,
    /// The constant is text that the comparison's affinity leaves text, compared under
    /// BINARY: text column values compare as bytes unless the affinity may convert them.
    text_bytes: bool,
    /// The affinity converts no text (none, TEXT or BLOB).
    text_stays: bool,
}

/// A column compared with a constant: the common pairs of storage classes are decided
/// inline, the others by [`compare_truth`].
struct ConstCompare<'a> {
    rule: CompareRule,
    constant: ValueRef<'a>,
}

impl ConstCompare<'_> {
    /// Whether the comparison is true for the column value `v` (what [`compare_truth`] says).
    #[inline(always)]
    fn holds(&self, v: ValueRef<'_>) -> bool {
        let o = match (v, self.constant) {
            (ValueRef::Text(x), ValueRef::Text(c))
                if self.rule.text_bytes && (self.rule.text_stays || !maybe_number(x)) =>
            {
                binary_compare(x, c)
            }
            (ValueRef::Integer(x), ValueRef::Integer(c)) => x.cmp(&c),
            // Never NaN (a stored NaN reads as NULL).
            (ValueRef::Real(x), ValueRef::Real(c)) => x.partial_cmp(&c).unwrap_or(Ordering::Equal),
            (ValueRef::Integer(x), ValueRef::Real(c)) => int_real_cmp(x, c),
            (ValueRef::Real(x), ValueRef::Integer(c)) => int_real_cmp(c, x).reverse(),
            _ => {
                let (a, b) = if self.rule.column_left {
                    (v, self.constant)
                } else {
                    (self.constant, v)
                };
                return compare_truth(self.rule.op, a, b, self.rule.affinity, self.rule.collation)
                    == Some(true);
            }
        };
        self.decide(o)
    }

    /// The constant as a double when that is exact: a REAL, or an integer of magnitude at
    /// most 2^53.
    #[inline(always)]
    fn exact_number(&self) -> Option<f64> {
        match self.constant {
            ValueRef::Real(x) => Some(x),
            ValueRef::Integer(i) if i.unsigned_abs() <= 1 << 53 => Some(i as f64),
            _ => None,
        }
    }

    /// Whether the comparison is true when the column value orders `o` against the constant.
    #[inline(always)]
    fn decide(&self, o: Ordering) -> bool {
        let o = if self.rule.column_left {
            o
        } else {
            o.reverse()
        };
        match self.rule.op {
            CmpOp::Eq | CmpOp::Is => o == Ordering::Equal,
            CmpOp::Ne | CmpOp::IsNot => o != Ordering::Equal,
            CmpOp::Lt => o == Ordering::Less,
            CmpOp::Le => o != Ordering::Greater,
            CmpOp::Gt => o == Ordering::Greater,
            CmpOp::Ge => o != Ordering::Less,
        }
    }

    /// [`Self::holds`] for a text column value `x` against a text constant compared bytewise
    /// (`text_bytes`): `None` when `x` may convert to a number (the general test decides).
    #[inline(always)]
    fn holds_text(&self, x: &[u8], c: &[u8]) -> Option<bool> {
        (self.rule.text_stays || !text_may_convert(x)).then(|| self.decide(binary_compare(x, c)))
    }
}

/// [`maybe_number`], answered at once for a text that starts like an ISO date (four digits
/// and a `-`, which no number has there: `maybe_number` stops at that `-` too).
#[inline(always)]
fn text_may_convert(x: &[u8]) -> bool {
    if let Some(&[a, b, c, d, b'-']) = x.first_chunk::<5>() {
        if [a, b, c, d].iter().all(u8::is_ascii_digit) {
            return false;
        }
    }
    maybe_number(x)
}

/// BINARY collation (`memcmp`, then length), deciding on the first eight bytes without a call
/// when they differ (dates, codes).
#[inline(always)]
fn binary_compare(x: &[u8], y: &[u8]) -> Ordering {
    if let (Some(a), Some(b)) = (x.first_chunk::<8>(), y.first_chunk::<8>()) {
        let (a, b) = (u64::from_be_bytes(*a), u64::from_be_bytes(*b));
        if a != b {
            return a.cmp(&b);
        }
    }
    x.cmp(y)
}

/// Keeps in `sel` the rows whose slot `i` satisfies `c`, reading the slot straight from the
/// decoded cells.
fn retain_compare(batch: &Batch<'_, '_>, i: usize, c: &ConstCompare<'_>, sel: &mut Selection) {
    match &batch.rows {
        Rows::Cells {
            cells,
            base,
            sources,
        } => match sources[i] {
            Source::Record {
                needed,
                real,
                default,
            } => {
                let general =
                    |r: u32| c.holds(record_value(cells, base, r as usize, needed, real, default));
                if let Some(k) = c.exact_number() {
                    // A number constant: REALs and integers of up to four bytes (the common
                    // stored numbers) are compared as doubles straight from their bytes,
                    // which is exact for both (see `small_number`).
                    return retain_rows(sel, |r| {
                        match small_number(cells.slot(r as usize, needed), base) {
                            Some(x) => c.decide(x.partial_cmp(&k).unwrap_or(Ordering::Equal)),
                            None => general(r),
                        }
                    });
                }
                match (c.rule.text_bytes, c.constant) {
                    // A text constant compared bytewise: text values of the column are decided
                    // here, from the slot's bytes, without making a value.
                    (true, ValueRef::Text(constant)) => retain_rows(sel, |r| {
                        let slot = cells.slot(r as usize, needed);
                        if slot.is_text() {
                            if let Some(keep) = c.holds_text(slot.bytes(base), constant) {
                                return keep;
                            }
                        }
                        general(r)
                    }),
                    _ => retain_rows(sel, general),
                }
            }
            Source::Rowid => {
                sel.retain(|r| c.holds(ValueRef::Integer(cells.rowid(base, *r as usize))))
            }
        },
        Rows::Values(_) => sel.retain(|r| c.holds(batch.slot(*r, i))),
    }
}

/// A stored REAL (not NaN, which reads as NULL) or an integer of at most four bytes, as a
/// double: exact for both, so comparing it with an exact double constant
/// ([`ConstCompare::exact_number`]) orders the two as SQLite does (integer against integer,
/// `sqlite3IntFloatCompare`, or real against real) whatever the column's affinity. `None` for
/// anything else (the general test decides).
#[inline(always)]
fn small_number(slot: Slot, base: &[u8]) -> Option<f64> {
    let at = slot.offset as usize;
    let int = |n: usize| -> Option<f64> {
        let bytes = base.get(at..at + n)?;
        let mut word = [0u8; 4];
        word[4 - n..].copy_from_slice(bytes);
        // Sign-extend from the stored width.
        let shift = 32 - 8 * n as u32;
        Some(f64::from((i32::from_be_bytes(word) << shift) >> shift))
    };
    match slot.serial {
        7 => {
            let x = f64::from_be_bytes(base.get(at..at + 8)?.try_into().ok()?);
            (!x.is_nan()).then_some(x)
        }
        8 => Some(0.0),
        9 => Some(1.0),
        s @ 1..=4 => int(s as usize),
        _ => None,
    }
}

/// Keeps in `sel` the rows for which `keep` is true (in order, without a branch on the answer).
#[inline(always)]
fn retain_rows(sel: &mut Selection, keep: impl Fn(u32) -> bool) {
    let rows: &mut [u32] = sel;
    let mut kept = 0;
    for k in 0..rows.len() {
        let r = rows[k];
        rows[kept] = r;
        kept += usize::from(keep(r));
    }
    sel.truncate(kept);
}

/// Needed record column `needed` of row `row`: integers read back as reals under REAL affinity
/// (`real`), `default` when the record ends before the column (see [`Source::Record`]).
#[inline(always)]
fn record_value<'a>(
    cells: &CellBatch,
    base: &'a [u8],
    row: usize,
    needed: usize,
    real: bool,
    default: ValueRef<'a>,
) -> ValueRef<'a> {
    match cells.value(base, row, needed) {
        Some(ValueRef::Integer(x)) if real => ValueRef::Real(x as f64),
        Some(v) => v,
        None => default,
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

    /// A column compared with a constant (the filter's inline pairs of storage classes) keeps
    /// exactly the rows the row evaluator keeps: every operator, affinity, collation and
    /// operand order, text that may or may not convert, texts whose first eight bytes tie.
    #[test]
    fn constant_comparisons_agree_with_the_row_evaluator() {
        let values = [
            ValueRef::Null,
            ValueRef::Integer(12),
            ValueRef::Integer(-3),
            ValueRef::Integer(i64::MAX),
            ValueRef::Integer(9_007_199_254_740_993),
            ValueRef::Real(12.0),
            ValueRef::Real(-0.0),
            ValueRef::Real(0.0),
            ValueRef::Real(9_007_199_254_740_992.0),
            ValueRef::Real(2.5),
            ValueRef::Text(b"12"),
            ValueRef::Text(b" 12 "),
            ValueRef::Text(b"1e3"),
            ValueRef::Text(b"1994-01-01"),
            ValueRef::Text(b"1994-01-02"),
            ValueRef::Text(b"1994-01-0"),
            ValueRef::Text(b"abcdefgh"),
            ValueRef::Text(b"abcdefghi"),
            ValueRef::Text(b"ABCDEFGH"),
            ValueRef::Text(b""),
            ValueRef::Blob(b"12"),
            ValueRef::Blob(b"abcdefgh"),
        ];
        let slots: Vec<ValueRef<'_>> = values.to_vec();
        let batch = Batch {
            rows: Rows::Values(&slots),
            width: 1,
        };
        let all: Selection = (0..slots.len() as u32).collect();
        let ops = [
            CmpOp::Eq,
            CmpOp::Ne,
            CmpOp::Lt,
            CmpOp::Le,
            CmpOp::Gt,
            CmpOp::Ge,
            CmpOp::Is,
            CmpOp::IsNot,
        ];
        let affinities = [
            None,
            Some(Affinity::Numeric),
            Some(Affinity::Integer),
            Some(Affinity::Real),
            Some(Affinity::Text),
            Some(Affinity::Blob),
        ];
        for op in ops {
            for affinity in affinities {
                for collation in [Collation::Binary, Collation::NoCase] {
                    for constant in values {
                        for column_left in [true, false] {
                            let (col, lit) =
                                (b(Expr::Column(0)), b(Expr::Literal(constant.to_owned())));
                            let (left, right) = if column_left { (col, lit) } else { (lit, col) };
                            let e = Expr::Compare {
                                op,
                                left,
                                right,
                                affinity,
                                collation,
                            };
                            let mut sel = all.clone();
                            BatchFilter::new(&e).retain(&batch, &mut sel);
                            let want: Selection = all
                                .iter()
                                .copied()
                                .filter(|&r| {
                                    truth_of(&e, &slots[r as usize..r as usize + 1])
                                        == Ok(Some(true))
                                })
                                .collect();
                            assert_eq!(sel, want, "{e:?}");
                        }
                    }
                }
            }
        }
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
            BatchFilter::new(e).retain(&batch, &mut sel);
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
