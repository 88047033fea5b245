//! [`RowProgram`]: a batched grouped query's row stage (its group keys and aggregate
//! arguments) compiled into one list of nodes, each common subexpression once, evaluated over
//! a page's selected rows node by node.
//!
//! TPC-H Q1 computes `l_extendedprice * (1 - l_discount)` in two aggregates and reads
//! `l_extendedprice` in four: here each is one node, evaluated once per row. Columns, literals
//! and arithmetic are the shared nodes (arithmetic over two earlier nodes, so a shared operand
//! is shared too); any other batchable expression is one node of its own, evaluated by the
//! row evaluator. Every node is infallible ([`super::batch::batchable`]), so evaluating a
//! shared node once, or a node no row needs, cannot change a result or an error.
//!
//! Aggregates whose states would see the same values share one state while the pages are
//! scanned ([`RowProgram::shares`]): `sum(x)`, `total(x)` and `avg(x)` keep the same running
//! sum of the same argument, and `count(*)` is one count however often it appears.

use crate::value::{Value, ValueRef};

use super::batch::{self, Batch, Selection};
use super::eval::arith;
use crate::datatype3::Collation;

use super::ir::{AggFunc, AggSpec, ArithOp, Expr};

/// The index of a node in a [`RowProgram`].
pub type NodeId = usize;

/// One node of a [`RowProgram`]: its run holds one value per selected row.
#[derive(Debug, Clone)]
pub enum Node {
    /// A row-stage slot (a decoded column or the rowid).
    Slot(usize),
    /// A constant.
    Literal(Value),
    /// An arithmetic operator over two earlier nodes.
    Arith(ArithOp, NodeId, NodeId),
    /// Any other batchable expression, evaluated row by row.
    Row(Expr),
}

/// Whether two nodes compute the same values (literals by their bits: `0.0` is not `-0.0`).
fn same(a: &Node, b: &Node) -> bool {
    match (a, b) {
        (Node::Slot(x), Node::Slot(y)) => x == y,
        (Node::Literal(x), Node::Literal(y)) => match (x, y) {
            (Value::Real(p), Value::Real(q)) => p.to_bits() == q.to_bits(),
            (Value::Real(_), _) | (_, Value::Real(_)) => false,
            _ => x == y,
        },
        (Node::Arith(o, a, b), Node::Arith(p, c, d)) => o == p && a == c && b == d,
        // Rarely repeated; not worth a structural comparison that must tell -0.0 from 0.0.
        _ => false,
    }
}

/// A grouped query's keys and aggregate arguments as shared nodes.
#[derive(Debug, Clone)]
pub struct RowProgram {
    /// Every node after its operands.
    nodes: Vec<Node>,
    /// The node of each group key.
    keys: Vec<NodeId>,
    /// The node of each aggregate's argument (`None` for `count(*)`).
    args: Vec<Option<NodeId>>,
    /// For each aggregate, the aggregate whose state it shares (itself, or an earlier one).
    shares: Vec<usize>,
    /// The nodes the keys read (the keys' own and their operands).
    key_nodes: Vec<bool>,
    /// The nodes the aggregate arguments read, when every one of them can be a typed run
    /// ([`super::numeric`]: slots, numeric literals, `+ - *`).
    numeric: Option<Vec<bool>>,
}

/// Which aggregates keep the same state from the same values.
fn state_class(spec: &AggSpec) -> Option<u8> {
    if spec.distinct {
        return None;
    }
    match spec.func {
        AggFunc::Sum | AggFunc::Total | AggFunc::Avg => Some(0),
        AggFunc::Count => Some(1),
        AggFunc::CountStar => Some(2),
        // min()/max() also choose a group's shown keys: kept apart.
        AggFunc::Min | AggFunc::Max | AggFunc::GroupConcat | AggFunc::Json(_) | AggFunc::Shown => {
            None
        }
    }
}

impl RowProgram {
    /// The program of a grouped query with these keys and aggregates (all batchable).
    pub fn new(keys: &[(Expr, Collation)], aggregates: &[AggSpec]) -> Self {
        let mut p = RowProgram {
            nodes: Vec::new(),
            keys: Vec::new(),
            args: Vec::new(),
            shares: Vec::new(),
            key_nodes: Vec::new(),
            numeric: None,
        };
        p.keys = keys.iter().map(|(e, _)| p.add(e)).collect();
        p.args = aggregates
            .iter()
            .map(|a| a.arg.as_ref().map(|e| p.add(e)))
            .collect();
        for (j, spec) in aggregates.iter().enumerate() {
            let class = state_class(spec);
            let shared = (0..j).find(|&i| {
                class.is_some()
                    && state_class(&aggregates[i]) == class
                    && p.args[i] == p.args[j]
                    && p.shares[i] == i
            });
            p.shares.push(shared.unwrap_or(j));
        }
        p.key_nodes = p.reached(p.keys.iter().copied());
        let args = p.reached(p.args.iter().flatten().copied());
        let typed = |n: &Node| match n {
            Node::Slot(_) => true,
            Node::Literal(Value::Integer(i)) => i.unsigned_abs() < 1 << 53,
            Node::Literal(Value::Real(_)) => true,
            Node::Arith(op, _, _) => matches!(op, ArithOp::Add | ArithOp::Sub | ArithOp::Mul),
            _ => false,
        };
        if p.nodes
            .iter()
            .zip(&args)
            .all(|(n, &used)| !used || typed(n))
        {
            p.numeric = Some(args);
        }
        p
    }

    /// The nodes that `roots` read: themselves and, through arithmetic, their operands.
    fn reached(&self, roots: impl Iterator<Item = NodeId>) -> Vec<bool> {
        let mut used = vec![false; self.nodes.len()];
        for r in roots {
            used[r] = true;
        }
        // Operands come before the nodes that read them.
        for i in (0..self.nodes.len()).rev() {
            if let (true, Node::Arith(_, a, b)) = (used[i], &self.nodes[i]) {
                used[*a] = true;
                used[*b] = true;
            }
        }
        used
    }

    /// The nodes the aggregate arguments read, when all of them can be typed runs
    /// ([`super::numeric::NumericRuns`]); `None` otherwise.
    pub fn numeric(&self) -> Option<&[bool]> {
        self.numeric.as_deref()
    }

    fn add(&mut self, e: &Expr) -> NodeId {
        let node = match e {
            Expr::Column(i) => Node::Slot(*i),
            Expr::Literal(v) => Node::Literal(v.clone()),
            Expr::Arith(op, a, b) => {
                let (a, b) = (self.add(a), self.add(b));
                Node::Arith(*op, a, b)
            }
            other => Node::Row(other.clone()),
        };
        if let Some(i) = self.nodes.iter().position(|n| same(n, &node)) {
            return i;
        }
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// The nodes, every one after its operands.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node of group key `j`.
    pub fn key(&self, j: usize) -> NodeId {
        self.keys[j]
    }

    /// The node of aggregate `j`'s argument (`None` for `count(*)`).
    pub fn arg(&self, j: usize) -> Option<NodeId> {
        self.args[j]
    }

    /// The aggregate whose state aggregate `j` shares while pages are scanned: `j` itself
    /// when it keeps its own; an earlier one that sees the same values and keeps the same
    /// state otherwise (its state is copied to `j` when the executor finishes).
    pub fn shares(&self, j: usize) -> usize {
        self.shares[j]
    }

    /// Evaluates every node over the selected rows of `batch`: run `i` (`sel.len()` values) of
    /// `runs` is node `i`'s.
    pub fn eval<'a>(&'a self, batch: &Batch<'a, '_>, sel: &Selection, runs: &mut [ValueRef<'a>]) {
        self.eval_nodes(batch, sel, runs, false);
    }

    /// [`Self::eval`] of the nodes the keys read only (when typed runs hold the aggregate
    /// arguments); the other runs are left as they were.
    pub fn eval_keys<'a>(
        &'a self,
        batch: &Batch<'a, '_>,
        sel: &Selection,
        runs: &mut [ValueRef<'a>],
    ) {
        self.eval_nodes(batch, sel, runs, true);
    }

    fn eval_nodes<'a>(
        &'a self,
        batch: &Batch<'a, '_>,
        sel: &Selection,
        runs: &mut [ValueRef<'a>],
        keys_only: bool,
    ) {
        let n = sel.len();
        debug_assert_eq!(runs.len(), n * self.nodes.len());
        if n == 0 {
            return;
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if keys_only && !self.key_nodes[i] {
                continue;
            }
            let (done, rest) = runs.split_at_mut(i * n);
            let out = &mut rest[..n];
            match node {
                Node::Slot(s) => batch.column(*s, sel, out),
                Node::Literal(v) => out.fill(v.as_ref()),
                Node::Arith(op, a, b) => arith_runs(
                    *op,
                    &done[a * n..(a + 1) * n],
                    &done[b * n..(b + 1) * n],
                    out,
                ),
                Node::Row(e) => batch::eval(e, batch, sel, out),
            }
        }
    }
}

/// A real result: NaN (infinity minus infinity, zero times infinity) is NULL in SQLite.
#[inline(always)]
fn real_ref(r: f64) -> ValueRef<'static> {
    if r.is_nan() {
        ValueRef::Null
    } else {
        ValueRef::Real(r)
    }
}

/// A number (or NULL) as a value that borrows nothing.
#[inline(always)]
fn number_ref(v: Value) -> ValueRef<'static> {
    match v {
        Value::Integer(i) => ValueRef::Integer(i),
        Value::Real(r) => ValueRef::Real(r),
        _ => ValueRef::Null,
    }
}

/// `op` over two runs, value by value, into `out`.
fn arith_runs<'a>(op: ArithOp, x: &[ValueRef<'a>], y: &[ValueRef<'a>], out: &mut [ValueRef<'a>]) {
    match op {
        ArithOp::Add => numeric_loop(op, |p, q| p + q, i64::checked_add, x, y, out),
        ArithOp::Sub => numeric_loop(op, |p, q| p - q, i64::checked_sub, x, y, out),
        ArithOp::Mul => numeric_loop(op, |p, q| p * q, i64::checked_mul, x, y, out),
        _ => {
            for ((o, &p), &q) in out.iter_mut().zip(x).zip(y) {
                *o = number_ref(arith(op, p, q));
            }
        }
    }
}

/// `+`, `-` or `*` over two runs: two numbers take the operation inline (`real` on doubles
/// when either is a real, `int` on two integers, a real when that overflows), as
/// [`arith`] computes them; anything else (text, blobs, NULL) goes through [`arith`].
#[inline(always)]
fn numeric_loop<'a>(
    op: ArithOp,
    real: impl Fn(f64, f64) -> f64,
    int: impl Fn(i64, i64) -> Option<i64>,
    x: &[ValueRef<'a>],
    y: &[ValueRef<'a>],
    out: &mut [ValueRef<'a>],
) {
    for ((o, &p), &q) in out.iter_mut().zip(x).zip(y) {
        *o = match (p, q) {
            (ValueRef::Real(p), ValueRef::Real(q)) => real_ref(real(p, q)),
            (ValueRef::Integer(i), ValueRef::Real(q)) => real_ref(real(i as f64, q)),
            (ValueRef::Real(p), ValueRef::Integer(j)) => real_ref(real(p, j as f64)),
            (ValueRef::Integer(i), ValueRef::Integer(j)) => match int(i, j) {
                Some(v) => ValueRef::Integer(v),
                None => real_ref(real(i as f64, j as f64)),
            },
            _ => number_ref(arith(op, p, q)),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::batch::Rows;
    use crate::query::eval::eval as eval_row;

    fn b(e: Expr) -> Box<Expr> {
        Box::new(e)
    }

    fn arith(op: ArithOp, a: Expr, c: Expr) -> Expr {
        Expr::Arith(op, b(a), b(c))
    }

    fn agg(func: AggFunc, arg: Option<Expr>) -> AggSpec {
        AggSpec::new(func, arg)
    }

    /// Q1's aggregates: `price * (1 - discount)` is computed once and the charge builds on
    /// it; `sum(x)`/`avg(x)` share a state, `count(*)` is one count, `min`, `max` and
    /// `DISTINCT` keep their own.
    #[test]
    fn common_subexpressions_and_states_are_shared() {
        let (qty, price, disc, tax) = (
            Expr::Column(0),
            Expr::Column(1),
            Expr::Column(2),
            Expr::Column(3),
        );
        let one = || Expr::Literal(Value::Integer(1));
        let disc_price = arith(
            ArithOp::Mul,
            price.clone(),
            arith(ArithOp::Sub, one(), disc.clone()),
        );
        let charge = arith(
            ArithOp::Mul,
            disc_price.clone(),
            arith(ArithOp::Add, one(), tax),
        );
        let mut distinct = agg(AggFunc::Sum, Some(qty.clone()));
        distinct.distinct = true;
        let aggregates = [
            agg(AggFunc::Sum, Some(qty.clone())),
            agg(AggFunc::Sum, Some(price.clone())),
            agg(AggFunc::Sum, Some(disc_price)),
            agg(AggFunc::Sum, Some(charge)),
            agg(AggFunc::Avg, Some(qty.clone())),
            agg(AggFunc::Avg, Some(price.clone())),
            agg(AggFunc::Avg, Some(disc.clone())),
            agg(AggFunc::CountStar, None),
            agg(AggFunc::CountStar, None),
            agg(AggFunc::Total, Some(qty.clone())),
            agg(AggFunc::Count, Some(qty.clone())),
            agg(AggFunc::Min, Some(qty.clone())),
            agg(AggFunc::Min, Some(qty.clone())),
            distinct,
        ];
        let keys = [
            (Expr::Column(4), Collation::Binary),
            (Expr::Column(5), Collation::Binary),
        ];
        let p = RowProgram::new(&keys, &aggregates);
        // Slots 4, 5, 0, 1, 2, 3, the literal 1, 1 - disc, price * (1 - disc), 1 + tax,
        // the charge.
        assert_eq!(p.nodes().len(), 11, "{:?}", p.nodes());
        assert_eq!(p.arg(0), p.arg(4));
        let shares: Vec<usize> = (0..aggregates.len()).map(|j| p.shares(j)).collect();
        assert_eq!(shares, [0, 1, 2, 3, 0, 1, 6, 7, 7, 0, 10, 11, 12, 13]);
        // 0.0 and -0.0 are different literals.
        let zero = |z: f64| arith(ArithOp::Mul, qty.clone(), Expr::Literal(Value::Real(z)));
        let p = RowProgram::new(
            &[],
            &[
                agg(AggFunc::Sum, Some(zero(0.0))),
                agg(AggFunc::Sum, Some(zero(-0.0))),
            ],
        );
        assert_ne!(p.arg(0), p.arg(1));
        assert_eq!(p.shares(1), 1);
    }

    /// Every node's run holds, row for row, what the row evaluator gives for its expression:
    /// integer overflow into reals, NaN as NULL, text and blobs through SQLite's conversions.
    #[test]
    fn runs_agree_with_the_row_evaluator() {
        let (x, y) = (Expr::Column(0), Expr::Column(1));
        let lit = |v: Value| Expr::Literal(v);
        let exprs = [
            arith(ArithOp::Mul, x.clone(), y.clone()),
            arith(ArithOp::Add, x.clone(), y.clone()),
            arith(ArithOp::Sub, y.clone(), x.clone()),
            arith(ArithOp::Div, x.clone(), y.clone()),
            arith(ArithOp::Rem, x.clone(), y.clone()),
            arith(
                ArithOp::Mul,
                arith(ArithOp::Sub, lit(Value::Integer(1)), y.clone()),
                x.clone(),
            ),
            arith(ArithOp::Mul, x.clone(), lit(Value::Real(f64::INFINITY))),
            arith(ArithOp::Add, x.clone(), lit(Value::Real(f64::NEG_INFINITY))),
            Expr::Negate(b(arith(ArithOp::Mul, x.clone(), y.clone()))),
            lit(Value::text("k")),
            x.clone(),
        ];
        let values = [
            ValueRef::Null,
            ValueRef::Integer(3),
            ValueRef::Integer(-7),
            ValueRef::Integer(i64::MAX),
            ValueRef::Integer(i64::MIN),
            ValueRef::Real(2.5),
            ValueRef::Real(-0.0),
            ValueRef::Real(f64::INFINITY),
            ValueRef::Real(1e308),
            ValueRef::Text(b"24"),
            ValueRef::Text(b"1.5e3x"),
            ValueRef::Text(b"abc"),
            ValueRef::Blob(b"7"),
        ];
        let mut slots = Vec::new();
        for p in values {
            for q in values {
                slots.extend([p, q]);
            }
        }
        let n = slots.len() / 2;
        let batch = Batch {
            rows: Rows::Values(&slots),
            width: 2,
        };
        // Every other row selected, so runs are indexed by selection, not by row.
        let sel: Selection = (0..n as u32).filter(|r| r % 2 == 1).collect();
        let aggregates: Vec<AggSpec> = exprs
            .iter()
            .map(|e| agg(AggFunc::Sum, Some(e.clone())))
            .collect();
        let p = RowProgram::new(&[(y.clone(), Collation::Binary)], &aggregates);
        let mut runs = vec![ValueRef::Null; p.nodes().len() * sel.len()];
        p.eval(&batch, &sel, &mut runs);
        let m = sel.len();
        for (j, e) in exprs.iter().enumerate() {
            let node = p.arg(j).unwrap();
            for (k, &r) in sel.iter().enumerate() {
                let row = &slots[r as usize * 2..r as usize * 2 + 2];
                let want = eval_row(e, row).unwrap();
                let got = runs[node * m + k].to_owned();
                let same = match (&want, &got) {
                    (Value::Real(a), Value::Real(c)) => a.to_bits() == c.to_bits(),
                    _ => want == got,
                };
                assert!(same, "{e:?} on {row:?}: {want:?} / {got:?}");
            }
        }
        let key = p.key(0);
        for (k, &r) in sel.iter().enumerate() {
            assert_eq!(runs[key * m + k], slots[r as usize * 2 + 1]);
        }
    }
}
