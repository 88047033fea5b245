//! The exact reference for `sum`, `total` and `avg`: the same query run by SQLite with those
//! aggregates replaced by user aggregates (`exact_sum`, `exact_total`, `exact_avg`) that
//! follow SQLite 3.54's `sumStep`/`sumFinalize` (which inputs count as integers, when an
//! integer sum overflows, NULL and empty groups) but add every input exactly, as a rational,
//! and round once, as corescan documents its sums (docs/queries.md, "Sums are exact"): `sum`/`total` are the
//! exact sum correctly rounded to a double, `avg` is that rounded sum divided by the count.
//!
//! SQLite's own compensated sum is correctly rounded only while its error term stays exact;
//! where large terms cancel it can be off in more than the last digit. When corescan's reals
//! differ from SQLite's, the differential tester accepts them only when they equal this
//! reference. The arithmetic here (big integers in units of 2^-1074) shares nothing with
//! corescan's accumulator; the reading of a text or blob argument as a number is SQLite's own
//! (it is asked for `sum(?)` of that one value).

use std::path::Path;

use num_bigint::{BigInt, Sign};
use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OpenFlags};

use super::Answer;

/// An exact sum of doubles and integers: an integer count of 2^-1074 (the unit of the
/// smallest subnormal, so every finite double is a whole number of them), plus whether an
/// infinity of either sign was added.
#[derive(Debug, Clone, Default)]
pub struct ExactReal {
    units: BigInt,
    pos_inf: bool,
    neg_inf: bool,
}

impl ExactReal {
    /// Adds a double.
    pub fn add_f64(&mut self, r: f64) {
        if r.is_infinite() {
            if r > 0.0 {
                self.pos_inf = true;
            } else {
                self.neg_inf = true;
            }
            return;
        }
        let bits = r.to_bits();
        let exp = (bits >> 52) & 0x7ff;
        let frac = bits & ((1 << 52) - 1);
        // A normal double is (2^52 + frac) * 2^(exp - 1075), so (2^52 + frac) << (exp - 1)
        // units; a subnormal is frac units.
        let m = if exp == 0 {
            BigInt::from(frac)
        } else {
            BigInt::from(frac | 1 << 52) << (exp - 1)
        };
        if r.is_sign_negative() {
            self.units -= m;
        } else {
            self.units += m;
        }
    }

    /// Adds an integer.
    pub fn add_i64(&mut self, i: i64) {
        self.units += BigInt::from(i) << 1074;
    }

    /// The sum rounded to the nearest double, ties to even (NaN for +inf plus -inf).
    pub fn to_f64(&self) -> f64 {
        match (self.pos_inf, self.neg_inf) {
            (true, true) => return f64::NAN,
            (true, false) => return f64::INFINITY,
            (false, true) => return f64::NEG_INFINITY,
            _ => {}
        }
        let (sign, n) = (self.units.sign(), self.units.magnitude().clone());
        let len = n.bits();
        let magnitude = if len <= 53 {
            // At most 53 bits: exactly a double (subnormal or normal), and the product is exact.
            let m: u64 = n.try_into().expect("53 bits");
            m as f64 * f64::from_bits(1)
        } else {
            let shift = len - 53;
            let mut top: u64 = (&n >> shift).try_into().expect("53 bits");
            let rest = &n - (num_bigint::BigUint::from(top) << shift);
            let half = num_bigint::BigUint::from(1u8) << (shift - 1);
            if rest > half || (rest == half && top & 1 == 1) {
                top += 1;
            }
            let mut exp2 = shift as i64 - 1074; // value = top * 2^exp2
            if top == 1 << 53 {
                top >>= 1;
                exp2 += 1;
            }
            // top is in [2^52, 2^53): the biased exponent of top * 2^exp2.
            let biased = exp2 + 52 + 1023;
            if biased >= 0x7ff {
                f64::INFINITY
            } else {
                f64::from_bits(((biased as u64) << 52) | (top - (1 << 52)))
            }
        };
        if sign == Sign::Minus {
            -magnitude
        } else {
            magnitude
        }
    }
}

/// A number as `sum()` reads its argument: NULL, an integer, or a double.
enum Input {
    Null,
    Integer(i64),
    Real(f64),
}

thread_local! {
    /// Asked how `sum()` reads one text or blob value.
    static READER: Connection = Connection::open_in_memory().expect("an in-memory database");
}

fn input(v: ValueRef<'_>) -> Input {
    match v {
        ValueRef::Null => Input::Null,
        ValueRef::Integer(i) => Input::Integer(i),
        ValueRef::Real(r) => Input::Real(r),
        ValueRef::Text(_) | ValueRef::Blob(_) => {
            // Bound as the bytes it is (a text need not be valid UTF-8).
            let owned = rusqlite::types::ToSqlOutput::Borrowed(v);
            let read: SqlValue = READER
                .with(|c| c.query_row("SELECT sum(?1)", [owned], |row| row.get(0)))
                .expect("sum() of one value");
            match read {
                SqlValue::Integer(i) => Input::Integer(i),
                SqlValue::Real(r) => Input::Real(r),
                other => panic!("sum() of one text or blob gave {other:?}"),
            }
        }
    }
}

/// `sumStep`'s state, with the exact sum beside it.
#[derive(Default)]
struct SumCtx {
    cnt: i64,
    approx: bool,
    ovrfl: bool,
    /// The running integer sum while `!approx`.
    i_sum: i64,
    exact: ExactReal,
}

impl SumCtx {
    fn step(&mut self, v: ValueRef<'_>) {
        let x = input(v);
        match x {
            Input::Null => return,
            Input::Integer(i) => {
                self.exact.add_i64(i);
                if !self.approx {
                    match self.i_sum.checked_add(i) {
                        Some(s) => self.i_sum = s,
                        None => {
                            self.ovrfl = true;
                            self.approx = true;
                        }
                    }
                }
            }
            Input::Real(r) => {
                self.exact.add_f64(r);
                // A non-integer input clears an earlier overflow (sumStep's `p->ovrfl = 0`
                // once approximate; before that, the overflow flag is still clear).
                self.approx = true;
                self.ovrfl = false;
            }
        }
        self.cnt += 1;
    }
}

impl SumCtx {
    /// `sumInverse`: the value leaves a window frame. The state stays approximate once it
    /// is (a real that left keeps the sum a real), and the integer sum can overflow here too.
    fn inverse(&mut self, v: ValueRef<'_>) {
        match input(v) {
            Input::Null => return,
            Input::Integer(i) => {
                self.exact.add_i64(i.wrapping_neg());
                if i == i64::MIN {
                    // -i64::MIN wraps to itself: add 2^63 in full.
                    self.exact.add_i64(i64::MAX);
                    self.exact.add_i64(1);
                    self.exact.add_i64(i64::MAX);
                    self.exact.add_i64(1);
                }
                if !self.approx {
                    match self.i_sum.checked_sub(i) {
                        Some(s) => self.i_sum = s,
                        None => {
                            self.ovrfl = true;
                            self.approx = true;
                        }
                    }
                }
            }
            Input::Real(r) => self.exact.add_f64(-r),
        }
        self.cnt -= 1;
    }
}

/// Which of the three aggregates.
#[derive(Clone, Copy)]
enum Kind {
    Sum,
    Total,
    Avg,
}

struct ExactAggregate(Kind);

fn real(r: f64) -> SqlValue {
    if r.is_nan() {
        SqlValue::Null
    } else {
        SqlValue::Real(r)
    }
}

impl Aggregate<SumCtx, SqlValue> for ExactAggregate {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<SumCtx> {
        Ok(SumCtx::default())
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut SumCtx) -> rusqlite::Result<()> {
        acc.step(ctx.get_raw(0));
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, acc: Option<SumCtx>) -> rusqlite::Result<SqlValue> {
        self.result(&acc.unwrap_or_default())
    }
}

/// As window functions: SQLite's frames, partitions and order, with exact sums (`sumInverse`
/// removes a row leaving a frame, exactly).
impl rusqlite::functions::WindowAggregate<SumCtx, SqlValue> for ExactAggregate {
    fn value(&self, acc: Option<&mut SumCtx>) -> rusqlite::Result<SqlValue> {
        match acc {
            Some(p) => self.result(p),
            None => self.result(&SumCtx::default()),
        }
    }

    fn inverse(&self, ctx: &mut Context<'_>, acc: &mut SumCtx) -> rusqlite::Result<()> {
        acc.inverse(ctx.get_raw(0));
        Ok(())
    }
}

impl ExactAggregate {
    /// `sumFinalize` (also as `xValue`) on the exact state.
    fn result(&self, p: &SumCtx) -> rusqlite::Result<SqlValue> {
        Ok(match self.0 {
            Kind::Sum if p.cnt == 0 => SqlValue::Null,
            Kind::Sum if p.ovrfl => {
                return Err(rusqlite::Error::UserFunctionError(
                    "integer overflow".into(),
                ))
            }
            Kind::Sum if !p.approx => SqlValue::Integer(p.i_sum),
            Kind::Sum | Kind::Total => real(p.exact.to_f64()),
            Kind::Avg if p.cnt == 0 => SqlValue::Null,
            Kind::Avg => real(p.exact.to_f64() / p.cnt as f64),
        })
    }
}

/// Whether `sql` calls `sum`, `total` or `avg`.
pub fn has_real_sum(sql: &str) -> bool {
    rewrite(sql) != sql
}

/// `sql` with `sum(`, `total(` and `avg(` (not inside a longer name) calling the exact
/// aggregates instead.
fn rewrite(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut rest = sql;
    'scan: while !rest.is_empty() {
        for name in ["sum(", "total(", "avg("] {
            // `get`: a multi-byte character may straddle the name's length.
            let starts = rest
                .get(..name.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(name));
            let after_name_char = out
                .chars()
                .last()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            if starts && !after_name_char {
                out.push_str("exact_");
                out.push_str(name);
                rest = &rest[name.len()..];
                continue 'scan;
            }
        }
        let c = rest.chars().next().expect("not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// SQLite's answer to `sql` with exact `sum`/`total`/`avg` (see the module docs); the column
/// names are those of `sql` itself.
pub fn exact_answer(path: &Path, sql: &str) -> Answer {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| e.to_string())?;
    for (name, kind) in [
        ("exact_sum", Kind::Sum),
        ("exact_total", Kind::Total),
        ("exact_avg", Kind::Avg),
    ] {
        conn.create_window_function(
            name,
            1,
            FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
            ExactAggregate(kind),
        )
        .map_err(|e| e.to_string())?;
    }
    let names: Vec<String> = conn
        .prepare(sql)
        .map_err(|e| e.to_string())?
        .column_names()
        .map(|s| s.to_string())
        .collect();
    let (_, rows) = super::answer_on(&conn, &rewrite(sql))?;
    Ok((names, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(values: &[f64]) -> f64 {
        let mut e = ExactReal::default();
        for v in values {
            e.add_f64(*v);
        }
        e.to_f64()
    }

    #[test]
    fn exact_sums_round_once() {
        assert_eq!(exact(&[0.1, 0.2]), 0.30000000000000004);
        assert_eq!(exact(&[1e100, 1.0, -1e100]), 1.0);
        assert_eq!(exact(&[f64::MAX, f64::MAX]), f64::INFINITY);
        assert_eq!(exact(&[f64::MAX, f64::MAX, -f64::MAX]), f64::MAX);
        assert_eq!(
            exact(&[f64::from_bits(1), f64::from_bits(2)]),
            f64::from_bits(3)
        );
        assert_eq!(exact(&[-5e-324]), -5e-324);
        // 2^53 + 1 is a tie: to even (2^53); 2^53 + 3 rounds up to 2^53 + 4.
        let two53 = 9007199254740992.0;
        assert_eq!(exact(&[two53, 1.0]), two53);
        assert_eq!(exact(&[two53, 1.0, 2.0]), two53 + 4.0);
        assert_eq!(exact(&[two53, 1.0, 1e-300]), two53 + 2.0);
        assert!(exact(&[f64::INFINITY, f64::NEG_INFINITY]).is_nan());
        let mut e = ExactReal::default();
        e.add_i64(i64::MAX);
        e.add_i64(i64::MAX);
        assert_eq!(e.to_f64(), 1.8446744073709552e19);
    }

    #[test]
    fn rewrite_renames_only_the_three_aggregates() {
        assert_eq!(
            rewrite("SELECT sum(x), total(y), AVG(DISTINCT z), xsum(1), count(*) FROM t"),
            "SELECT exact_sum(x), exact_total(y), exact_avg(DISTINCT z), xsum(1), count(*) FROM t"
        );
    }
}
