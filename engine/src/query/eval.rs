//! The expression evaluator: SQLite's semantics for every [`Expr`], over one stage's slots.
//!
//! Every comparison goes through [`crate::datatype3::compare`] and every conversion through
//! [`crate::value`]; this file only decides which of them an operator applies. Errors (an
//! integer overflow in `abs`, a bad `ESCAPE`) are messages the caller puts in context.

use std::cmp::Ordering;

use crate::datatype3::{self, Affinity};
use crate::value::{Number, Value, ValueRef};

use super::functions;
use super::ir::{ArithOp, CmpOp, Expr, Function};
use super::like;

/// The result of evaluating an expression.
pub type EvalResult = Result<Value, String>;

/// An operand: borrowed from the row or the plan when it is a column or a literal (the
/// common case in filters, evaluated without copying text), else computed.
enum Operand<'a> {
    Borrowed(ValueRef<'a>),
    Owned(Value),
}

impl Operand<'_> {
    fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Operand::Borrowed(v) => *v,
            Operand::Owned(v) => v.as_ref(),
        }
    }
}

fn operand<'a>(expr: &'a Expr, slots: &'a [ValueRef<'a>]) -> Result<Operand<'a>, String> {
    Ok(match expr {
        Expr::Column(i) => Operand::Borrowed(
            slots
                .get(*i)
                .copied()
                .ok_or_else(|| format!("internal: slot {i} out of range"))?,
        ),
        Expr::Literal(v) => Operand::Borrowed(v.as_ref()),
        other => Operand::Owned(eval(other, slots)?),
    })
}

/// Evaluates `expr` over `slots`.
pub fn eval(expr: &Expr, slots: &[ValueRef<'_>]) -> EvalResult {
    Ok(match expr {
        Expr::Column(i) => slots
            .get(*i)
            .copied()
            .ok_or_else(|| format!("internal: slot {i} out of range"))?
            .to_owned(),
        Expr::Literal(v) => v.clone(),
        Expr::Negate(x) => negate(eval(x, slots)?),
        Expr::Not(x) => match truth(eval(x, slots)?.as_ref()) {
            None => Value::Null,
            Some(b) => bool_value(!b),
        },
        Expr::BitNot(x) => match eval(x, slots)?.as_ref().to_i64() {
            None => Value::Null,
            Some(i) => Value::Integer(!i),
        },
        Expr::Arith(op, a, b) => arith(*op, &eval(a, slots)?, &eval(b, slots)?),
        Expr::Concat(a, b) => {
            let (a, b) = (eval(a, slots)?, eval(b, slots)?);
            match (a.as_ref().to_text(), b.as_ref().to_text()) {
                (Some(x), Some(y)) => {
                    let mut t = x.into_owned();
                    t.extend_from_slice(&y);
                    Value::Text(t)
                }
                _ => Value::Null,
            }
        }
        Expr::Compare {
            op,
            left,
            right,
            affinity,
            collation,
        } => {
            let (a, b) = (operand(left, slots)?, operand(right, slots)?);
            compare_op(*op, a.as_ref(), b.as_ref(), *affinity, *collation)
        }
        Expr::And(a, b) => {
            let x = truth(eval(a, slots)?.as_ref());
            if x == Some(false) {
                return Ok(bool_value(false));
            }
            match (x, truth(eval(b, slots)?.as_ref())) {
                (_, Some(false)) => bool_value(false),
                (Some(true), Some(true)) => bool_value(true),
                _ => Value::Null,
            }
        }
        Expr::Or(a, b) => {
            let x = truth(eval(a, slots)?.as_ref());
            if x == Some(true) {
                return Ok(bool_value(true));
            }
            match (x, truth(eval(b, slots)?.as_ref())) {
                (_, Some(true)) => bool_value(true),
                (Some(false), Some(false)) => bool_value(false),
                _ => Value::Null,
            }
        }
        Expr::IsNull(x, negated) => bool_value(operand(x, slots)?.as_ref().is_null() != *negated),
        Expr::InList {
            expr,
            list,
            negated,
            collation,
        } => {
            if list.is_empty() {
                return Ok(bool_value(*negated));
            }
            let x = operand(expr, slots)?;
            if x.as_ref().is_null() {
                return Ok(Value::Null);
            }
            let mut saw_null = false;
            for (item, affinity) in list {
                let v = operand(item, slots)?;
                match datatype3::compare(x.as_ref(), v.as_ref(), *affinity, *collation) {
                    None => saw_null = true,
                    Some(Ordering::Equal) => return Ok(bool_value(!negated)),
                    Some(_) => {}
                }
            }
            if saw_null {
                Value::Null
            } else {
                bool_value(*negated)
            }
        }
        Expr::Like {
            expr,
            pattern,
            escape,
            negated,
            glob,
        } => {
            let x = eval(expr, slots)?;
            let p = eval(pattern, slots)?;
            let e = match escape {
                Some(e) => Some(eval(e, slots)?),
                None => None,
            };
            match like::like_value(x.as_ref(), p.as_ref(), e.as_ref().map(Value::as_ref), *glob)? {
                None => Value::Null,
                Some(m) => bool_value(m != *negated),
            }
        }
        Expr::Case {
            operand,
            whens,
            otherwise,
        } => {
            let base = match operand {
                Some(o) => Some(eval(o, slots)?),
                None => None,
            };
            for (when, then, affinity, collation) in whens {
                let w = eval(when, slots)?;
                let hit = match &base {
                    Some(b) => {
                        datatype3::compare(b.as_ref(), w.as_ref(), *affinity, *collation)
                            == Some(Ordering::Equal)
                    }
                    None => truth(w.as_ref()) == Some(true),
                };
                if hit {
                    return eval(then, slots);
                }
            }
            match otherwise {
                Some(e) => eval(e, slots)?,
                None => Value::Null,
            }
        }
        Expr::Cast(x, affinity) => cast(eval(x, slots)?.as_ref(), *affinity),
        Expr::Function(f, args) => call_function(*f, args, slots)?,
    })
}

/// Whether `expr` holds for the row: SQLite's `WHERE` keeps a row only when the filter is
/// true (NULL and false drop it).
pub fn holds(expr: &Expr, slots: &[ValueRef<'_>]) -> Result<bool, String> {
    Ok(truth(eval(expr, slots)?.as_ref()) == Some(true))
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
    if matches!(op, CmpOp::Is | CmpOp::IsNot) {
        let same = match (a.is_null(), b.is_null()) {
            (true, true) => true,
            (true, false) | (false, true) => false,
            _ => datatype3::compare(a, b, affinity, collation) == Some(Ordering::Equal),
        };
        return bool_value(same == (op == CmpOp::Is));
    }
    match datatype3::compare(a, b, affinity, collation) {
        None => Value::Null,
        Some(o) => bool_value(match op {
            CmpOp::Eq => o == Ordering::Equal,
            CmpOp::Ne => o != Ordering::Equal,
            CmpOp::Lt => o == Ordering::Less,
            CmpOp::Le => o != Ordering::Greater,
            CmpOp::Gt => o == Ordering::Greater,
            CmpOp::Ge => o != Ordering::Less,
            CmpOp::Is | CmpOp::IsNot => unreachable!("handled above"),
        }),
    }
}

fn negate(v: Value) -> Value {
    match v.as_ref().to_number() {
        None => Value::Null,
        Some(Number::Integer(i)) => match i.checked_neg() {
            Some(n) => Value::Integer(n),
            None => Value::real(-(i as f64)),
        },
        Some(Number::Real(r)) => Value::real(-r),
    }
}

/// SQLite's arithmetic (`OP_Add` ... `OP_Remainder`, `OP_BitAnd` ... `OP_ShiftRight`).
pub fn arith(op: ArithOp, a: &Value, b: &Value) -> Value {
    let (Some(x), Some(y)) = (a.as_ref().to_number(), b.as_ref().to_number()) else {
        return Value::Null;
    };
    match op {
        ArithOp::BitAnd | ArithOp::BitOr | ArithOp::ShiftLeft | ArithOp::ShiftRight => {
            let (Some(i), Some(j)) = (a.as_ref().to_i64(), b.as_ref().to_i64()) else {
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
            let (i, j) = (
                a.as_ref().to_i64().unwrap_or(0),
                b.as_ref().to_i64().unwrap_or(0),
            );
            if j == 0 {
                return Value::Null;
            }
            let j = if j == -1 { 1 } else { j };
            Value::real((i % j) as f64)
        }
        _ => unreachable!("bitwise handled above"),
    }
}

fn f64_to_i64(r: f64) -> i64 {
    ValueRef::Real(r).to_i64().unwrap_or(0)
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
            ValueRef::Text(t) | ValueRef::Blob(t) => match crate::value::text_to_number(t) {
                Number::Real(r) => {
                    let i = f64_to_i64(r);
                    if (i as f64) == r && r.abs() < 9.2e18 {
                        Value::Integer(i)
                    } else {
                        Value::real(r)
                    }
                }
                n => Value::from(n),
            },
            ValueRef::Null => Value::Null,
        },
    }
}

/// Calls `f` on `args` (evaluated over `slots`; `coalesce` evaluates them lazily).
fn call_function(f: Function, args: &[Expr], slots: &[ValueRef<'_>]) -> Result<Value, String> {
    if f == Function::Coalesce {
        for a in args {
            let v = eval(a, slots)?;
            if !v.is_null() {
                return Ok(v);
            }
        }
        return Ok(Value::Null);
    }
    let values = args
        .iter()
        .map(|a| eval(a, slots))
        .collect::<Result<Vec<Value>, String>>()?;
    let refs: Vec<ValueRef<'_>> = values.iter().map(Value::as_ref).collect();
    functions::apply(f, &refs)
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
        let max = Value::Integer(i64::MAX);
        assert_eq!(
            arith(ArithOp::Add, &max, &Value::Integer(1)),
            Value::Real(9.223_372_036_854_776e18)
        );
        assert_eq!(
            arith(ArithOp::Div, &Value::Integer(7), &Value::Integer(2)),
            Value::Integer(3)
        );
        assert_eq!(
            arith(ArithOp::Div, &Value::Integer(7), &Value::Integer(0)),
            Value::Null
        );
        assert_eq!(
            arith(ArithOp::Rem, &Value::Real(5.5), &Value::Integer(2)),
            Value::Real(1.0)
        );
        assert_eq!(
            arith(ArithOp::Add, &Value::text("12abc"), &Value::Integer(1)),
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
}
