//! [`NumericRuns`]: a batched grouped query's aggregate arguments over one page as typed
//! runs, a double and an "is an integer" flag per selected row, computed in tight loops
//! instead of through [`ValueRef`] values.
//!
//! The runs hold exactly what the row evaluator would give, or the page is refused and takes
//! the general path ([`super::program::RowProgram::eval`]):
//!
//! - a stored integer is held as a double only when its magnitude is below 2^53, where the
//!   conversion is exact; under REAL affinity it is a real (as [`super::batch`] reads it);
//! - `+ - *` of two integers below 2^53 computed in doubles is exact while the result stays
//!   below 2^53 (an integer of that size is a double, and IEEE arithmetic returns a
//!   representable exact result unchanged); a result that reaches 2^53 refuses the page
//!   (SQLite would keep an exact 64-bit integer, or make a real on overflow);
//! - an integer and a real, or two reals, are the double operation [`super::eval::arith`]
//!   does for them; a NaN result (SQLite's NULL) refuses the page;
//! - NULL, text, blobs, a stored NaN (read as NULL) and a missing column whose DEFAULT is not
//!   a number refuse the page: they keep SQLite's conversions on the general path.
//!
//! So a sum over a run adds the same integers and the same reals as the general path does,
//! in the same order ([`super::aggregate::SumState::update_number`]).

use partitioner::format::read_be_int;

use crate::decode::{CellBatch, ABSENT};
use crate::value::ValueRef;

use super::batch::{Selection, Source};
use super::ir::ArithOp;
use super::program::{Node, RowProgram};

/// Integers of this magnitude and above are not held (2^53: every integer below is a double).
const EXACT: f64 = 9_007_199_254_740_992.0;

/// What every value of one run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// Every value is an integer.
    Integers,
    /// Every value is a real.
    Reals,
    /// Some of each.
    Mixed,
}

/// The typed runs of a page's selected rows, one per program node the aggregates read
/// (reused from page to page).
#[derive(Debug, Clone, Default)]
pub struct NumericRuns {
    /// Values per run (the selected rows).
    n: usize,
    /// `values[node * n + k]`: node `node`'s value for selected row `k`.
    values: Vec<f64>,
    /// `ints[node * n + k]`: whether that value is an integer.
    ints: Vec<bool>,
    /// Each node's [`RunKind`] (`None` for nodes not computed).
    kinds: Vec<Option<RunKind>>,
}

/// Whether `x` is held as an integer: below 2^53 in magnitude.
#[inline(always)]
fn small(i: i64) -> bool {
    i.unsigned_abs() < 1 << 53
}

/// A number (or `None`) as a typed value.
#[inline(always)]
fn typed(v: ValueRef<'_>, real: bool) -> Option<(f64, bool)> {
    match v {
        ValueRef::Integer(i) if real => Some((i as f64, false)),
        ValueRef::Integer(i) if small(i) => Some((i as f64, true)),
        ValueRef::Real(x) => Some((x, false)),
        _ => None,
    }
}

impl NumericRuns {
    /// Node `node`'s values and integer flags.
    #[inline]
    pub fn run(&self, node: usize) -> (&[f64], &[bool]) {
        let at = node * self.n;
        (&self.values[at..at + self.n], &self.ints[at..at + self.n])
    }

    /// Node `node`'s kind (computed nodes only).
    #[inline]
    pub fn kind(&self, node: usize) -> RunKind {
        self.kinds[node].expect("a computed node")
    }

    /// Computes the nodes `program` marks as the aggregates' ([`RowProgram::numeric`]) over
    /// the selected rows of the page whose cells are `cells` (slots from `sources`). Returns
    /// `false` when a value is not one the runs hold (see the module docs): the page then
    /// takes the general path.
    pub fn eval(
        &mut self,
        program: &RowProgram,
        cells: &CellBatch,
        base: &[u8],
        sources: &[Source<'_>],
        sel: &Selection,
    ) -> bool {
        let Some(needed) = program.numeric() else {
            return false;
        };
        let n = sel.len();
        let nodes = program.nodes();
        self.n = n;
        if self.values.len() < n * nodes.len() {
            self.values.resize(n * nodes.len(), 0.0);
            self.ints.resize(n * nodes.len(), false);
        }
        self.kinds.clear();
        self.kinds.resize(nodes.len(), None);
        for (i, node) in nodes.iter().enumerate() {
            if !needed[i] {
                continue;
            }
            let (done_v, rest_v) = self.values.split_at_mut(i * n);
            let (done_i, rest_i) = self.ints.split_at_mut(i * n);
            let (out, out_int) = (&mut rest_v[..n], &mut rest_i[..n]);
            let ints = match node {
                Node::Slot(s) => column(cells, base, sources[*s], sel, out, out_int),
                Node::Literal(v) => typed(v.as_ref(), false).map(|(x, int)| {
                    out.fill(x);
                    out_int.fill(int);
                    if int {
                        n
                    } else {
                        0
                    }
                }),
                Node::Arith(op, a, b) => {
                    let run = |m: usize| (&done_v[m * n..(m + 1) * n], &done_i[m * n..(m + 1) * n]);
                    let (x, y) = (run(*a), run(*b));
                    match op {
                        ArithOp::Add => arith(|p, q| p + q, x, y, out, out_int),
                        ArithOp::Sub => arith(|p, q| p - q, x, y, out, out_int),
                        ArithOp::Mul => arith(|p, q| p * q, x, y, out, out_int),
                        _ => None,
                    }
                }
                Node::Row(_) => None,
            };
            let Some(ints) = ints else {
                return false;
            };
            self.kinds[i] = Some(if ints == n {
                RunKind::Integers
            } else if ints == 0 {
                RunKind::Reals
            } else {
                RunKind::Mixed
            });
        }
        true
    }
}

/// A column's typed values for the selected rows, straight from the decoded cells; how many
/// are integers, or `None` when a value is not one the runs hold.
fn column(
    cells: &CellBatch,
    base: &[u8],
    source: Source<'_>,
    sel: &Selection,
    out: &mut [f64],
    out_int: &mut [bool],
) -> Option<usize> {
    let sel: &[u32] = sel;
    let n = sel.len();
    let (out, out_int) = (&mut out[..n], &mut out_int[..n]);
    let (mut bad, mut ints) = (false, 0usize);
    match source {
        Source::Record {
            needed,
            real,
            default,
        } => {
            let all = cells.cells();
            let stride = all.len() / cells.len().max(1);
            for k in 0..n {
                let slot = all[sel[k] as usize * stride + needed];
                let at = slot.offset as usize;
                let (x, int) = match slot.serial {
                    7 => {
                        let bytes: [u8; 8] = base.get(at..at + 8)?.try_into().ok()?;
                        // A stored NaN reads as NULL.
                        let x = f64::from_bits(u64::from_be_bytes(bytes));
                        bad |= x.is_nan();
                        (x, false)
                    }
                    1 => (f64::from(*base.get(at)? as i8), !real),
                    8 => (0.0, !real),
                    9 => (1.0, !real),
                    s @ 2..=6 => {
                        let size = [0, 1, 2, 3, 4, 6, 8][s as usize];
                        let i = read_be_int(base.get(at..at + size)?);
                        bad |= !real && !small(i);
                        (i as f64, !real)
                    }
                    ABSENT => typed(default, real)?,
                    _ => return None,
                };
                out[k] = x;
                out_int[k] = int;
                ints += usize::from(int);
            }
        }
        Source::Rowid => {
            for k in 0..n {
                let i = cells.rowid(base, sel[k] as usize);
                bad |= !small(i);
                out[k] = i as f64;
                out_int[k] = true;
            }
            ints = n;
        }
    }
    (!bad).then_some(ints)
}

/// `+`, `-` or `*` (`f` on doubles) over two typed runs; how many results are integers, or
/// `None` when a result is NaN or an integer result reaches 2^53.
#[inline(always)]
fn arith(
    f: impl Fn(f64, f64) -> f64,
    x: (&[f64], &[bool]),
    y: (&[f64], &[bool]),
    out: &mut [f64],
    out_int: &mut [bool],
) -> Option<usize> {
    let n = out.len();
    let (x, xi, y, yi) = (&x.0[..n], &x.1[..n], &y.0[..n], &y.1[..n]);
    let out_int = &mut out_int[..n];
    let (mut bad, mut ints) = (false, 0usize);
    for k in 0..n {
        let z = f(x[k], y[k]);
        let int = xi[k] & yi[k];
        bad |= z.is_nan() | (int & (z.abs() >= EXACT));
        out[k] = z;
        out_int[k] = int;
        ints += usize::from(int);
    }
    (!bad).then_some(ints)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::NeededColumns;
    use crate::query::batch::{Batch, Rows};
    use crate::query::ir::{AggFunc, AggSpec, Expr};
    use crate::value::Value;
    use rusqlite::types::Value as SqlValue;

    fn b(e: Expr) -> Box<Expr> {
        Box::new(e)
    }

    fn arith(op: ArithOp, x: Expr, y: Expr) -> Expr {
        Expr::Arith(op, b(x), b(y))
    }

    /// Blocks of rows whose values the typed runs hold (small integers, reals, integers in a
    /// REAL column) and blocks holding something they refuse: NULL, a text number, integers
    /// whose products reach 2^53, infinities whose difference is NaN.
    fn make_db(path: &std::path::Path) {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch("PRAGMA page_size=512; CREATE TABLE t(a INTEGER, p DECIMAL, r REAL);")
            .unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        let mut rng = testkit::Rng::xorshift64(0x2545_f491_4f6c_dd1d);
        let mut next = move |n: u64| rng.below(n);
        for block in 0..60 {
            for _ in 0..30 {
                let a = SqlValue::Integer(next(100) as i64 - 50);
                let p = if next(4) == 0 {
                    SqlValue::Integer(next(1000) as i64)
                } else {
                    SqlValue::Real(next(100_000) as f64 / 100.0)
                };
                let r = if next(3) == 0 {
                    SqlValue::Real(next(10) as f64)
                } else {
                    SqlValue::Real(next(11) as f64 / 100.0)
                };
                let mut row = [a, p, r];
                match (block % 6, next(10)) {
                    (1, 0) => row[1] = SqlValue::Null,
                    (2, 0) => row[0] = SqlValue::Text("12".into()),
                    (3, 0) => row[0] = SqlValue::Integer(1 << 40),
                    (4, 0) => row[2] = SqlValue::Real(f64::INFINITY),
                    (5, 0) => row[0] = SqlValue::Integer(i64::MIN),
                    _ => {}
                }
                tx.execute(
                    "INSERT INTO t(a, p, r) VALUES (?, ?, ?)",
                    rusqlite::params_from_iter(row),
                )
                .unwrap();
            }
        }
        tx.commit().unwrap();
    }

    /// On every page, either the typed runs hold, value for value (storage class and bits),
    /// what the general runs hold, or the page is refused because a general value is one they
    /// do not hold (not a number, an integer of 2^53 or more); both happen.
    #[test]
    fn typed_runs_agree_with_the_value_runs_or_refuse_the_page() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("typed.db");
        make_db(&path);
        let plan = partitioner::TablePlan::open(&path, "t").unwrap();
        let file = std::fs::read(&path).unwrap();
        let usable = plan.header.usable_size();
        let (a, p, r) = (Expr::Column(0), Expr::Column(1), Expr::Column(2));
        let one = || Expr::Literal(Value::Integer(1));
        let args = [
            a.clone(),
            p.clone(),
            r.clone(),
            arith(
                ArithOp::Mul,
                p.clone(),
                arith(ArithOp::Sub, one(), r.clone()),
            ),
            arith(
                ArithOp::Mul,
                arith(
                    ArithOp::Mul,
                    p.clone(),
                    arith(ArithOp::Sub, one(), r.clone()),
                ),
                arith(ArithOp::Add, one(), a.clone()),
            ),
            arith(ArithOp::Mul, a.clone(), a.clone()),
            arith(
                ArithOp::Mul,
                arith(ArithOp::Mul, a.clone(), a.clone()),
                a.clone(),
            ),
            arith(ArithOp::Sub, r.clone(), r.clone()),
            arith(ArithOp::Add, a.clone(), Expr::Literal(Value::Real(0.5))),
        ];
        let aggregates: Vec<AggSpec> = args
            .iter()
            .map(|e| AggSpec::new(AggFunc::Sum, Some(e.clone())))
            .collect();
        let program = RowProgram::new(&[], &aggregates);
        let needed = program.numeric().expect("typed-capable arguments").to_vec();
        let columns = NeededColumns::new(&[0, 1, 2]);
        let sources: Vec<Source<'_>> = (0..3)
            .map(|c| Source::Record {
                needed: c,
                real: c == 2,
                default: ValueRef::Null,
            })
            .collect();
        let (mut typed_pages, mut refused_pages) = (0, 0);
        let mut cells = CellBatch::new();
        let mut runs = NumericRuns::default();
        let ps = plan.header.page_size as usize;
        for &leaf in &plan.leaves {
            let page = &file[(leaf as usize - 1) * ps..leaf as usize * ps];
            let mut spills = Vec::new();
            let rows = cells
                .decode_page(&columns, leaf, page, usable, &mut spills)
                .unwrap();
            assert!(spills.is_empty());
            // Every other row, so that runs are indexed by selection.
            let sel: Selection = (0..rows as u32).filter(|r| r % 2 == leaf % 2).collect();
            let n = sel.len();
            let batch = Batch {
                rows: Rows::Cells {
                    cells: &cells,
                    base: page,
                    sources: &sources,
                },
                width: 3,
            };
            let mut general = vec![ValueRef::Null; program.nodes().len() * n];
            program.eval(&batch, &sel, &mut general);
            let holdable = |v: ValueRef<'_>| match v {
                ValueRef::Integer(i) => i.unsigned_abs() < 1 << 53,
                ValueRef::Real(_) => true,
                _ => false,
            };
            // Two integers whose result is not an integer below 2^53 (SQLite keeps an exact
            // integer, or makes a real when it overflows) are a reason too.
            let node_holds = |i: usize, k: usize| match program.nodes()[i] {
                Node::Arith(_, x, y) => match (general[x * n + k], general[y * n + k]) {
                    (ValueRef::Integer(_), ValueRef::Integer(_)) => {
                        matches!(general[i * n + k], ValueRef::Integer(z) if holdable(ValueRef::Integer(z)))
                    }
                    _ => holdable(general[i * n + k]),
                },
                _ => holdable(general[i * n + k]),
            };
            let all_holdable = (0..program.nodes().len())
                .filter(|&i| needed[i])
                .all(|i| (0..n).all(|k| node_holds(i, k)));
            if runs.eval(&program, &cells, page, &sources, &sel) {
                typed_pages += 1;
                assert!(all_holdable, "page {leaf} typed");
                for i in (0..program.nodes().len()).filter(|&i| needed[i]) {
                    let (x, int) = runs.run(i);
                    for k in 0..n {
                        let got = if int[k] {
                            ValueRef::Integer(x[k] as i64)
                        } else {
                            ValueRef::Real(x[k])
                        };
                        let want = general[i * n + k];
                        let same = match (got, want) {
                            (ValueRef::Real(g), ValueRef::Real(w)) => g.to_bits() == w.to_bits(),
                            _ => got == want,
                        };
                        assert!(same, "page {leaf}, node {i}, row {k}: {got:?} / {want:?}");
                    }
                    let ints = int.iter().filter(|&&i| i).count();
                    let kind = match ints {
                        0 if n > 0 => RunKind::Reals,
                        i if i == n => RunKind::Integers,
                        _ => RunKind::Mixed,
                    };
                    assert_eq!(runs.kind(i), kind, "page {leaf}, node {i}");
                }
            } else {
                refused_pages += 1;
                assert!(!all_holdable, "page {leaf} refused");
            }
        }
        assert!(
            typed_pages > 10 && refused_pages > 10,
            "{typed_pages} / {refused_pages}"
        );
    }
}
