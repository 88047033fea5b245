//! The expression evaluator: SQLite's semantics for every [`Expr`], over one stage's slots.
//!
//! Every comparison goes through [`crate::datatype3::compare`] and every conversion through
//! [`crate::value`]; this file only decides which of them an operator applies. Errors (an
//! integer overflow in `abs`, a bad `ESCAPE`) are messages the caller puts in context.

use std::cmp::Ordering;

use smallvec::SmallVec;

use crate::datatype3::{self, Affinity};
use crate::value::{Number, Value, ValueRef};

use super::ir::{ArithOp, CmpOp, Expr, Function};
use super::like;
use super::{functions, json};

/// The result of evaluating an expression to an owned value.
pub type EvalResult = Result<Value, String>;

/// An evaluated value: borrowed from the row or the plan when the expression is a column, a
/// literal or a node that passes one of them through (`CASE`, `coalesce`), or a number (no
/// storage needed); owned only when text or a blob was computed. Evaluating a filter or an
/// aggregate argument therefore allocates nothing in the common case.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand<'a> {
    /// A value borrowed from the row or the plan (or a number).
    Borrowed(ValueRef<'a>),
    /// A computed text or blob.
    Owned(Value),
}

impl<'a> Operand<'a> {
    /// Borrows the value.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Operand::Borrowed(v) => *v,
            Operand::Owned(v) => v.as_ref(),
        }
    }

    /// An owned copy.
    pub fn into_owned(self) -> Value {
        match self {
            Operand::Borrowed(v) => v.to_owned(),
            Operand::Owned(v) => v,
        }
    }

    /// Whether the value is NULL.
    pub fn is_null(&self) -> bool {
        self.as_ref().is_null()
    }
}

impl From<Value> for Operand<'_> {
    /// Numbers and NULL need no storage: they become [`Operand::Borrowed`].
    fn from(v: Value) -> Self {
        match v {
            Value::Null => Operand::Borrowed(ValueRef::Null),
            Value::Integer(i) => Operand::Borrowed(ValueRef::Integer(i)),
            Value::Real(r) => Operand::Borrowed(ValueRef::Real(r)),
            other => Operand::Owned(other),
        }
    }
}

const NULL: Operand<'static> = Operand::Borrowed(ValueRef::Null);

fn slot<'a>(slots: &[ValueRef<'a>], i: usize) -> Result<ValueRef<'a>, String> {
    slots
        .get(i)
        .copied()
        .ok_or_else(|| format!("internal: slot {i} out of range"))
}

fn truth_operand(t: Option<bool>) -> Operand<'static> {
    match t {
        None => NULL,
        Some(b) => Operand::Borrowed(ValueRef::Integer(i64::from(b))),
    }
}

/// Evaluates `expr` over `slots` to an owned value.
pub fn eval(expr: &Expr, slots: &[ValueRef<'_>]) -> EvalResult {
    eval_ref(expr, slots).map(Operand::into_owned)
}

/// Evaluates `expr` over `slots`, borrowing from them or from the plan where it can.
pub fn eval_ref<'a>(expr: &'a Expr, slots: &[ValueRef<'a>]) -> Result<Operand<'a>, String> {
    Ok(match expr {
        Expr::Column(i) => Operand::Borrowed(slot(slots, *i)?),
        Expr::Literal(v) => Operand::Borrowed(v.as_ref()),
        Expr::Negate(x) => Operand::from(negate(eval_ref(x, slots)?.as_ref())),
        Expr::BitNot(x) => match eval_ref(x, slots)?.as_ref().to_i64() {
            None => NULL,
            Some(i) => Operand::Borrowed(ValueRef::Integer(!i)),
        },
        Expr::Arith(op, a, b) => {
            let x = eval_ref(a, slots)?;
            let y = eval_ref(b, slots)?;
            Operand::from(arith(*op, x.as_ref(), y.as_ref()))
        }
        Expr::Concat(a, b) => {
            let (a, b) = (eval_ref(a, slots)?, eval_ref(b, slots)?);
            match (a.as_ref().to_text(), b.as_ref().to_text()) {
                (Some(x), Some(y)) => {
                    let mut t = Vec::with_capacity(x.len() + y.len());
                    t.extend_from_slice(&x);
                    t.extend_from_slice(&y);
                    Operand::Owned(Value::Text(t))
                }
                _ => NULL,
            }
        }
        Expr::Compare { .. }
        | Expr::Not(_)
        | Expr::And(..)
        | Expr::Or(..)
        | Expr::IsNull(..)
        | Expr::InList { .. }
        | Expr::InIntegers { .. }
        | Expr::InSet { .. }
        | Expr::Like { .. }
        | Expr::ShortCircuit { .. } => truth_operand(truth_of(expr, slots)?),
        Expr::Raise(message) => return Err(message.to_string()),
        Expr::Case { .. } => match case_branch(expr, slots)? {
            Some(e) => eval_ref(e, slots)?,
            None => NULL,
        },
        Expr::Cast(x, affinity) => Operand::from(cast(eval_ref(x, slots)?.as_ref(), *affinity)),
        Expr::Function(f, args) => call_function(*f, args, slots)?,
        Expr::NullFirst { first, expr } => {
            if eval_ref(first, slots)?.is_null() {
                NULL
            } else {
                eval_ref(expr, slots)?
            }
        }
    })
}

/// The truth value of `expr` over `slots` (`None`: NULL), computed without materializing the
/// 0/1 of comparisons and logical operators.
pub fn truth_of(expr: &Expr, slots: &[ValueRef<'_>]) -> Result<Option<bool>, String> {
    Ok(match expr {
        Expr::Compare {
            op,
            left,
            right,
            affinity,
            collation,
        } => {
            let a = eval_ref(left, slots)?;
            let b = eval_ref(right, slots)?;
            compare_truth(*op, a.as_ref(), b.as_ref(), *affinity, *collation)
        }
        // A value (exprCodeTargetAndOr): both operands are computed, so an operand that
        // fails fails the row even when the other one settles the answer (the planner has
        // already reduced an AND or OR that an integer literal decides, as SQLite does).
        Expr::And(a, b) => {
            let (x, y) = (truth_of(a, slots)?, truth_of(b, slots)?);
            match (x, y) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            }
        }
        Expr::Or(a, b) => {
            let (x, y) = (truth_of(a, slots)?, truth_of(b, slots)?);
            match (x, y) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            }
        }
        Expr::ShortCircuit { expr, right_first } => {
            let (and, a, b) = match &**expr {
                Expr::And(a, b) => (true, a, b),
                Expr::Or(a, b) => (false, a, b),
                other => return truth_of(other, slots),
            };
            let (first, second) = if *right_first { (b, a) } else { (a, b) };
            match truth_of(first, slots)? {
                // The first operand decides: the second is never computed.
                Some(t) if t != and => Some(t),
                x => match (x, truth_of(second, slots)?) {
                    (_, Some(t)) if t != and => Some(t),
                    (Some(_), Some(y)) => Some(y),
                    _ => None,
                },
            }
        }
        Expr::Not(x) => truth_of(x, slots)?.map(|b| !b),
        Expr::IsNull(x, negated) => Some(eval_ref(x, slots)?.is_null() != *negated),
        Expr::InList {
            expr,
            list,
            negated,
            collation,
        } => {
            if list.is_empty() {
                return Ok(Some(*negated));
            }
            let x = eval_ref(expr, slots)?;
            if x.is_null() {
                // SQLite still computes the list (sqlite3ExprCodeIN compares the left value
                // with each item in turn; none equals NULL), so an item that fails fails.
                for (item, _) in list {
                    eval_ref(item, slots)?;
                }
                return Ok(None);
            }
            let mut saw_null = false;
            for (item, affinity) in list {
                let v = eval_ref(item, slots)?;
                match datatype3::compare(x.as_ref(), v.as_ref(), *affinity, *collation) {
                    None => saw_null = true,
                    Some(Ordering::Equal) => return Ok(Some(!negated)),
                    Some(_) => {}
                }
            }
            if saw_null {
                None
            } else {
                Some(*negated)
            }
        }
        Expr::InSet { expr, set, negated } => {
            let x = eval_ref(expr, slots)?;
            set.contains(x.as_ref()).map(|found| found != *negated)
        }
        Expr::InIntegers { expr, values } => {
            // As the InList of integer literals it stands for, compared without an affinity:
            // a number equal to one of them, never text or a blob.
            let x = eval_ref(expr, slots)?;
            Some(match x.as_ref() {
                ValueRef::Null => return Ok(None),
                ValueRef::Integer(i) => values.binary_search(&i).is_ok(),
                ValueRef::Real(r) => {
                    let i = r as i64;
                    datatype3::int_real_cmp(i, r) == Ordering::Equal
                        && values.binary_search(&i).is_ok()
                }
                _ => false,
            })
        }
        Expr::Like {
            expr,
            pattern,
            escape,
            negated,
            glob,
        } => {
            let x = eval_ref(expr, slots)?;
            let p = eval_ref(pattern, slots)?;
            let e = match escape {
                Some(e) => Some(eval_ref(e, slots)?),
                None => None,
            };
            like::like_value(
                x.as_ref(),
                p.as_ref(),
                e.as_ref().map(Operand::as_ref),
                *glob,
            )?
            .map(|m| m != *negated)
        }
        other => truth(eval_ref(other, slots)?.as_ref()),
    })
}

/// Whether `expr` holds for the row: SQLite's `WHERE` keeps a row only when the filter is
/// true (NULL and false drop it). A condition (`WHERE`, `HAVING`, `CASE WHEN`) is SQLite's
/// jump code, `sqlite3ExprIfFalse(.., SQLITE_JUMPIFNULL)`, which stops at the first operand
/// that decides where to jump ([`jumps`]); what it computes decides which failures surface.
pub fn holds(expr: &Expr, slots: &[ValueRef<'_>]) -> Result<bool, String> {
    Ok(!jumps(expr, false, true, slots)?)
}

/// Whether SQLite's jump code for `expr` jumps: `sqlite3ExprIfTrue` (`want` true) or
/// `sqlite3ExprIfFalse`, a NULL jumping when `if_null`. `AND` and `OR` evaluate their right
/// operand only when the left one did not decide (a NULL left decides when it jumps), and `NOT`
/// swaps the two.
fn jumps(expr: &Expr, want: bool, if_null: bool, slots: &[ValueRef<'_>]) -> Result<bool, String> {
    Ok(match (expr, want) {
        (Expr::And(a, b), _) => jumps_and_or(true, a, b, want, if_null, slots)?,
        (Expr::Or(a, b), _) => jumps_and_or(false, a, b, want, if_null, slots)?,
        // The operand without the subquery first (`exprEvalRhsFirst`).
        (Expr::ShortCircuit { expr, right_first }, _) => match &**expr {
            Expr::And(a, b) | Expr::Or(a, b) => {
                let and = matches!(**expr, Expr::And(..));
                let (a, b) = if *right_first { (b, a) } else { (a, b) };
                jumps_and_or(and, a, b, want, if_null, slots)?
            }
            x => jumps(x, want, if_null, slots)?,
        },
        (Expr::Not(x), _) => jumps(x, !want, if_null, slots)?,
        // TK_TRUTH: the jump code of its operand, a NULL jumping as the test takes it
        // (`sqlite3ExprIfTrue`/`sqlite3ExprIfFalse`); the statement's own `if_null` cannot
        // apply, the test is never NULL.
        (Expr::Function(Function::Truth { is_true, negated }, args), _) if args.len() == 1 => {
            let tests_true = *is_true != *negated;
            let null_jumps = if want { *negated } else { !*negated };
            jumps(&args[0], want == tests_true, null_jumps, slots)?
        }
        _ => match truth_of(expr, slots)? {
            Some(t) => t == want,
            None => if_null,
        },
    })
}

/// [`jumps`] for `a AND b` (`and`) or `a OR b`, `a` coded first.
fn jumps_and_or(
    and: bool,
    a: &Expr,
    b: &Expr,
    want: bool,
    if_null: bool,
    slots: &[ValueRef<'_>],
) -> Result<bool, String> {
    Ok(match (and, want) {
        // IfTrue(a AND b): IfFalse(a) to the end (NULL flipped), then IfTrue(b).
        (true, true) => !jumps(a, false, !if_null, slots)? && jumps(b, true, if_null, slots)?,
        // IfFalse(a AND b): IfFalse(a), then IfFalse(b), both to the target.
        (true, false) => jumps(a, false, if_null, slots)? || jumps(b, false, if_null, slots)?,
        // IfTrue(a OR b): IfTrue(a), then IfTrue(b), both to the target.
        (false, true) => jumps(a, true, if_null, slots)? || jumps(b, true, if_null, slots)?,
        // IfFalse(a OR b): IfTrue(a) to the end (NULL flipped), then IfFalse(b).
        (false, false) => !jumps(a, true, !if_null, slots)? && jumps(b, false, if_null, slots)?,
    })
}

/// SQLite's truth value of `v` (`sqlite3VdbeBooleanValue`): `None` for NULL, numbers are true
/// when non-zero, text and blobs when the number they read as is non-zero.
pub fn truth(v: ValueRef<'_>) -> Option<bool> {
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i != 0),
        ValueRef::Real(r) => Some(r != 0.0),
        other => Some(other.to_f64().unwrap_or(0.0) != 0.0),
    }
}

/// The integer 1 or 0.
pub fn bool_value(b: bool) -> Value {
    Value::Integer(i64::from(b))
}

/// A comparison operator on two values (NULL unless `IS`/`IS NOT`).
pub fn compare_op(
    op: CmpOp,
    a: ValueRef<'_>,
    b: ValueRef<'_>,
    affinity: Option<Affinity>,
    collation: datatype3::Collation,
) -> Value {
    match compare_truth(op, a, b, affinity, collation) {
        None => Value::Null,
        Some(t) => bool_value(t),
    }
}

/// A comparison operator's truth value on two values (`None`: NULL, never for `IS`/`IS NOT`).
#[inline]
pub fn compare_truth(
    op: CmpOp,
    a: ValueRef<'_>,
    b: ValueRef<'_>,
    affinity: Option<Affinity>,
    collation: datatype3::Collation,
) -> Option<bool> {
    if matches!(op, CmpOp::Is | CmpOp::IsNot) {
        let same = match (a.is_null(), b.is_null()) {
            (true, true) => true,
            (true, false) | (false, true) => false,
            _ => datatype3::compare(a, b, affinity, collation) == Some(Ordering::Equal),
        };
        return Some(same == (op == CmpOp::Is));
    }
    let o = match (a, b) {
        (ValueRef::Null, _) | (_, ValueRef::Null) => return None,
        // No conversion can apply: numeric affinity converts only text, text affinity only
        // when an operand is text.
        (
            ValueRef::Integer(_) | ValueRef::Real(_) | ValueRef::Blob(_),
            ValueRef::Integer(_) | ValueRef::Real(_) | ValueRef::Blob(_),
        ) => datatype3::compare_values(a, b, collation),
        (ValueRef::Text(x), ValueRef::Text(y))
            if matches!(affinity, None | Some(Affinity::Text | Affinity::Blob))
                || (!maybe_number(x) && !maybe_number(y)) =>
        {
            collation.compare(x, y)
        }
        _ => datatype3::compare(a, b, affinity, collation)?,
    };
    Some(match op {
        CmpOp::Eq => o == Ordering::Equal,
        CmpOp::Ne => o != Ordering::Equal,
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Le => o != Ordering::Greater,
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Ge => o != Ordering::Less,
        CmpOp::Is | CmpOp::IsNot => unreachable!("handled above"),
    })
}

/// A quick test that `t` cannot be wholly a number (so a numeric affinity leaves it text):
/// false only when `t` starts with a byte no number starts with, or has a sign that neither
/// follows the leading spaces nor an exponent (`'1994-01-01'`). True means "maybe": the full
/// test (`numeric_affinity_of_text`) decides.
#[inline]
pub(super) fn maybe_number(t: &[u8]) -> bool {
    let space = partitioner::numeric_text::is_space;
    match t.first() {
        None => return false,
        Some(&b) if b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.') || space(b) => {}
        Some(_) => return false,
    }
    for w in t.windows(2) {
        match w[1] {
            0 => return true,
            b'+' | b'-' if !(matches!(w[0], b'e' | b'E') || space(w[0])) => return false,
            _ => {}
        }
    }
    true
}

/// SQLite's unary minus of anything but a numeric literal (which the parser negates itself):
/// `0 - x` (`sqlite3ExprCodeTarget`'s `TK_UMINUS`), so the negated zero real is `+0.0`, never
/// `-0.0` (`power(-r, -7)` of a zero `r` is `+inf`: the differential tester's run seed
/// 1796510084326036891).
fn negate(v: ValueRef<'_>) -> Value {
    match v.to_number() {
        None => Value::Null,
        Some(Number::Integer(i)) => match i.checked_neg() {
            Some(n) => Value::Integer(n),
            None => Value::real(-(i as f64)),
        },
        Some(Number::Real(r)) => Value::real(0.0 - r),
    }
}

/// SQLite's arithmetic (`OP_Add` ... `OP_Remainder`, `OP_BitAnd` ... `OP_ShiftRight`).
#[inline]
pub fn arith(op: ArithOp, a: ValueRef<'_>, b: ValueRef<'_>) -> Value {
    // The common cases first: two reals, or a real and an integer, add as doubles.
    match (op, a, b) {
        (ArithOp::Add, ValueRef::Real(r), ValueRef::Real(s)) => return Value::real(r + s),
        (ArithOp::Sub, ValueRef::Real(r), ValueRef::Real(s)) => return Value::real(r - s),
        (ArithOp::Mul, ValueRef::Real(r), ValueRef::Real(s)) => return Value::real(r * s),
        (ArithOp::Add | ArithOp::Sub | ArithOp::Mul, ValueRef::Integer(i), ValueRef::Real(s)) => {
            return real_arith(op, i as f64, s)
        }
        (ArithOp::Add | ArithOp::Sub | ArithOp::Mul, ValueRef::Real(r), ValueRef::Integer(j)) => {
            return real_arith(op, r, j as f64)
        }
        _ => {}
    }
    let (Some(x), Some(y)) = (a.to_number(), b.to_number()) else {
        return Value::Null;
    };
    match op {
        ArithOp::BitAnd | ArithOp::BitOr | ArithOp::ShiftLeft | ArithOp::ShiftRight => {
            let (Some(i), Some(j)) = (a.to_i64(), b.to_i64()) else {
                return Value::Null;
            };
            return Value::Integer(match op {
                ArithOp::BitAnd => i & j,
                ArithOp::BitOr => i | j,
                ArithOp::ShiftLeft => shift_left(i, j),
                _ => shift_left(i, j.checked_neg().unwrap_or(i64::MAX)),
            });
        }
        _ => {}
    }
    if let (Number::Integer(i), Number::Integer(j)) = (x, y) {
        let exact = match op {
            ArithOp::Add => i.checked_add(j),
            ArithOp::Sub => i.checked_sub(j),
            ArithOp::Mul => i.checked_mul(j),
            ArithOp::Div => {
                if j == 0 {
                    return Value::Null;
                }
                i.checked_div(j)
            }
            ArithOp::Rem => {
                if j == 0 {
                    return Value::Null;
                }
                Some(if j == -1 { 0 } else { i % j })
            }
            _ => unreachable!("bitwise handled above"),
        };
        if let Some(v) = exact {
            return Value::Integer(v);
        }
    }
    let (r, s) = (x.as_f64(), y.as_f64());
    match op {
        ArithOp::Add => Value::real(r + s),
        ArithOp::Sub => Value::real(r - s),
        ArithOp::Mul => Value::real(r * s),
        ArithOp::Div => {
            if s == 0.0 {
                Value::Null
            } else {
                Value::real(r / s)
            }
        }
        ArithOp::Rem => {
            // SQLite takes the remainder of the operands' integer values (sqlite3VdbeIntValue
            // of each: an integer stays exact, text reads its integer prefix), as a real.
            let (i, j) = (a.to_i64().unwrap_or(0), b.to_i64().unwrap_or(0));
            if j == 0 {
                return Value::Null;
            }
            let j = if j == -1 { 1 } else { j };
            Value::real((i % j) as f64)
        }
        _ => unreachable!("bitwise handled above"),
    }
}

#[inline]
fn real_arith(op: ArithOp, r: f64, s: f64) -> Value {
    Value::real(match op {
        ArithOp::Add => r + s,
        ArithOp::Sub => r - s,
        _ => r * s,
    })
}

fn shift_left(i: i64, by: i64) -> i64 {
    if by >= 64 {
        0
    } else if by >= 0 {
        ((i as u64) << by) as i64
    } else if by <= -64 {
        if i < 0 {
            -1
        } else {
            0
        }
    } else {
        i >> (-by)
    }
}

/// `CAST(v AS type)` for a type of `affinity` (`sqlite3VdbeMemCast`).
pub fn cast(v: ValueRef<'_>, affinity: Affinity) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    match affinity {
        Affinity::Text => Value::Text(v.to_text().unwrap_or_default().into_owned()),
        Affinity::Blob => match v {
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
            other => Value::Blob(other.to_text().unwrap_or_default().into_owned()),
        },
        Affinity::Integer => Value::Integer(v.to_i64().unwrap_or(0)),
        Affinity::Real => Value::real(v.to_f64().unwrap_or(0.0)),
        Affinity::Numeric => match v {
            ValueRef::Integer(_) | ValueRef::Real(_) => v.to_owned(),
            ValueRef::Text(t) | ValueRef::Blob(t) => numerify(t),
            ValueRef::Null => Value::Null,
        },
    }
}

/// `sqlite3VdbeMemNumerify`, what `CAST(text AS NUMERIC)` does: the integer prefix when the
/// number the text starts with has neither a `.` nor an exponent (`sqlite3AtoF`'s code) and
/// that prefix fits (`sqlite3Atoi64` says at most 1: text may follow it), else the real, which
/// becomes an integer only when it is one within +-2^51 (`sqlite3RealSameAsInt`). This is not the
/// arithmetic's reading of text ([`crate::value::text_to_number`]): `'9223372036854775807'`
/// followed by a NUL and more bytes is that integer here (the differential tester's run seed
/// 1796133777926429607) and a real in arithmetic; `'2.382286786918725e18'` stays a real
/// (run seed 1796125371024183120).
fn numerify(t: &[u8]) -> Value {
    use partitioner::numeric_text::{atof, atoi64, real_same_as_int, real_to_i64};
    let (rc, r) = atof(t);
    // No `.` and no exponent in the number (or its prefix): bit 1 of sqlite3AtoF's code.
    if rc & 2 == 0 {
        let (code, i) = atoi64(t);
        if code <= 1 {
            return Value::Integer(i);
        }
    }
    let i = real_to_i64(r);
    if real_same_as_int(r, i) {
        Value::Integer(i)
    } else {
        Value::real(r)
    }
}

/// Calls `f` on `args` (evaluated over `slots`; `coalesce` evaluates them lazily). The
/// arguments live on the stack.
fn call_function<'a>(
    f: Function,
    args: &'a [Expr],
    slots: &[ValueRef<'a>],
) -> Result<Operand<'a>, String> {
    if let Function::Json(j) = f {
        return json_call(j, args, slots).map(|r| Operand::Owned(r.value));
    }
    if f == Function::Coalesce {
        for a in args {
            let v = eval_ref(a, slots)?;
            if !v.is_null() {
                return Ok(v);
            }
        }
        return Ok(NULL);
    }
    let mut values: SmallVec<[Operand<'a>; 4]> = SmallVec::with_capacity(args.len());
    for a in args {
        values.push(eval_ref(a, slots)?);
    }
    let refs: SmallVec<[ValueRef<'_>; 4]> = values.iter().map(Operand::as_ref).collect();
    functions::apply(f, &refs).map(Operand::from)
}

/// The branch a `CASE` takes on this row (`None`: no branch, NULL).
fn case_branch<'e>(case: &'e Expr, slots: &[ValueRef<'_>]) -> Result<Option<&'e Expr>, String> {
    let Expr::Case {
        operand,
        whens,
        otherwise,
    } = case
    else {
        return Ok(None);
    };
    let base = match operand {
        Some(o) => Some(eval_ref(o, slots)?),
        None => None,
    };
    for (when, then, affinity, collation) in whens {
        let hit = match &base {
            Some(b) => {
                let w = eval_ref(when, slots)?;
                datatype3::compare(b.as_ref(), w.as_ref(), *affinity, *collation)
                    == Some(Ordering::Equal)
            }
            None => holds(when, slots)?,
        };
        if hit {
            return Ok(Some(then));
        }
    }
    Ok(otherwise.as_deref())
}

/// A JSON function's argument as it reaches the function: a JSON call's whole result (its
/// JSON subtype, and the JSONB SQLite caches with an edit's text), or a plain value.
enum Held<'a> {
    Json(json::JsonResult),
    Plain(Operand<'a>),
}

impl Held<'_> {
    fn value(&self) -> ValueRef<'_> {
        match self {
            Held::Json(r) => r.value.as_ref(),
            Held::Plain(o) => o.as_ref(),
        }
    }
}

/// `e` as the argument of a JSON function: a JSON call's result is handed over whole, also
/// through the nodes that keep SQLite's JSON subtype (checked against SQLite: `CASE` and
/// `iif`, `coalesce`/`ifnull`/`likely`, `nullif`, `CAST(... AS TEXT)`); anything else is a
/// plain value.
fn json_argument<'a>(e: &'a Expr, slots: &[ValueRef<'a>]) -> Result<Held<'a>, String> {
    Ok(match e {
        Expr::Function(Function::Json(f), args) => Held::Json(json_call(*f, args, slots)?),
        Expr::Case { .. } => match case_branch(e, slots)? {
            Some(b) => json_argument(b, slots)?,
            None => Held::Plain(NULL),
        },
        Expr::Function(Function::Coalesce, args) => {
            for a in args {
                let h = json_argument(a, slots)?;
                if !h.value().is_null() {
                    return Ok(h);
                }
            }
            Held::Plain(NULL)
        }
        Expr::Function(Function::NullIf(c), args) if args.len() == 2 => {
            let h = json_argument(&args[0], slots)?;
            let b = eval_ref(&args[1], slots)?;
            if datatype3::compare_values(h.value(), b.as_ref(), *c) == Ordering::Equal {
                Held::Plain(NULL)
            } else {
                h
            }
        }
        Expr::Cast(x, Affinity::Text) => match json_argument(x, slots)? {
            Held::Json(r) if matches!(r.value, Value::Text(_)) => Held::Json(r),
            other => Held::Plain(Operand::from(cast(other.value(), Affinity::Text))),
        },
        other => Held::Plain(eval_ref(other, slots)?),
    })
}

/// Calls `f` with the values of `exprs` over `slots` as a JSON function receives its
/// arguments (a JSON call's result with its JSON subtype, see [`json_argument`]): how a JSON
/// call and a JSON aggregate take their arguments.
pub fn with_json_arguments<'e, R>(
    exprs: impl IntoIterator<Item = &'e Expr>,
    slots: &[ValueRef<'e>],
    f: impl FnOnce(&[json::JsonArg<'_>]) -> R,
) -> Result<R, String> {
    let mut held: SmallVec<[Held<'_>; 4]> = SmallVec::new();
    for a in exprs {
        held.push(json_argument(a, slots)?);
    }
    let args: SmallVec<[json::JsonArg<'_>; 4]> = held
        .iter()
        .map(|h| match h {
            Held::Json(r) => json::JsonArg::result(r),
            Held::Plain(o) => json::JsonArg::sql(o.as_ref()),
        })
        .collect();
    Ok(f(&args))
}

/// A JSON call: an argument that is itself a JSON call hands over its whole result (the JSON
/// subtype, and the JSONB SQLite caches with an edit's text), any other its value
/// ([`json_argument`]).
fn json_call(
    f: json::JsonFunc,
    args: &[Expr],
    slots: &[ValueRef<'_>],
) -> Result<json::JsonResult, String> {
    with_json_arguments(args, slots, |args| json::call_full(f, args))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype3::Collation;

    fn lit(v: Value) -> Box<Expr> {
        Box::new(Expr::Literal(v))
    }

    #[test]
    fn integer_arithmetic_overflows_into_reals() {
        use ValueRef as R;
        assert_eq!(
            arith(ArithOp::Add, R::Integer(i64::MAX), R::Integer(1)),
            Value::Real(9.223_372_036_854_776e18)
        );
        assert_eq!(
            arith(ArithOp::Div, R::Integer(7), R::Integer(2)),
            Value::Integer(3)
        );
        assert_eq!(
            arith(ArithOp::Div, R::Integer(7), R::Integer(0)),
            Value::Null
        );
        assert_eq!(
            arith(ArithOp::Rem, R::Real(5.5), R::Integer(2)),
            Value::Real(1.0)
        );
        assert_eq!(
            arith(ArithOp::Add, R::Text(b"12abc"), R::Integer(1)),
            Value::Integer(13)
        );
    }

    #[test]
    fn three_valued_logic() {
        let null = || lit(Value::Null);
        let t = || lit(Value::Integer(1));
        let f = || lit(Value::Integer(0));
        assert_eq!(eval(&Expr::And(null(), f()), &[]), Ok(Value::Integer(0)));
        assert_eq!(eval(&Expr::And(null(), t()), &[]), Ok(Value::Null));
        assert_eq!(eval(&Expr::Or(null(), t()), &[]), Ok(Value::Integer(1)));
        assert_eq!(eval(&Expr::Or(null(), f()), &[]), Ok(Value::Null));
        assert_eq!(eval(&Expr::Not(null()), &[]), Ok(Value::Null));
    }

    #[test]
    fn in_lists_with_nulls() {
        let e = |x: Value, list: Vec<Value>| Expr::InList {
            expr: lit(x),
            list: list.into_iter().map(|v| (Expr::Literal(v), None)).collect(),
            negated: false,
            collation: Collation::Binary,
        };
        assert_eq!(
            eval(
                &e(Value::Integer(1), vec![Value::Null, Value::Integer(1)]),
                &[]
            ),
            Ok(Value::Integer(1))
        );
        assert_eq!(
            eval(
                &e(Value::Integer(2), vec![Value::Null, Value::Integer(1)]),
                &[]
            ),
            Ok(Value::Null)
        );
        assert_eq!(eval(&e(Value::Null, vec![]), &[]), Ok(Value::Integer(0)));
    }

    #[test]
    fn casts() {
        assert_eq!(
            cast(ValueRef::Text(b"12abc"), Affinity::Integer),
            Value::Integer(12)
        );
        assert_eq!(
            cast(ValueRef::Text(b"1.0"), Affinity::Numeric),
            Value::Integer(1)
        );
        assert_eq!(
            cast(ValueRef::Real(2.5), Affinity::Text),
            Value::text("2.5")
        );
    }

    /// The quick rejection never rejects text that numeric affinity converts.
    #[test]
    fn maybe_number_is_conservative() {
        let pieces: [&[u8]; 14] = [
            b"", b" ", b"\t", b"+", b"-", b".", b"1", b"23", b"e", b"E", b"x", b"\0", b"0x1",
            b"-01",
        ];
        let mut count = 0;
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let t = [a, b, c].concat();
                    if crate::value::numeric_affinity_of_text(&t).is_some() {
                        assert!(maybe_number(&t), "{:?}", String::from_utf8_lossy(&t));
                        count += 1;
                    }
                }
            }
        }
        assert!(count > 100, "{count}");
        assert!(!maybe_number(b"1994-01-01"));
        assert!(!maybe_number(b"abc"));
    }
}
