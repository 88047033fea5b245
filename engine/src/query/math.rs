//! SQLite's math functions (`func.c`, as its default build compiles them with
//! `SQLITE_ENABLE_MATH_FUNCTIONS`) and `sign()`: each reads its arguments as
//! `sqlite3_value_numeric_type` does (text that is wholly a number becomes it, any other text,
//! a blob or NULL gives NULL) and calls the C library's function, as SQLite does, so that the
//! last bit of every result is the platform's own.

use std::ffi::c_double;

use crate::value::{numeric_affinity_of_text, Number, Value, ValueRef};

/// A math function of SQLite's default build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MathFunction {
    /// `ceil(x)`, `ceiling(x)`: integers unchanged.
    Ceil,
    /// `floor(x)`.
    Floor,
    /// `trunc(x)`.
    Trunc,
    /// `ln(x)`.
    Ln,
    /// `log(x)`, `log10(x)`.
    Log10,
    /// `log2(x)`.
    Log2,
    /// `log(b, x)`: the logarithm of `x` to base `b`.
    LogBase,
    /// `exp(x)`.
    Exp,
    /// `pow(x, y)`, `power(x, y)`.
    Pow,
    /// `mod(x, y)`: C's `fmod`.
    Mod,
    /// `acos(x)`.
    Acos,
    /// `asin(x)`.
    Asin,
    /// `atan(x)`.
    Atan,
    /// `atan2(y, x)`.
    Atan2,
    /// `cos(x)`.
    Cos,
    /// `sin(x)`.
    Sin,
    /// `tan(x)`.
    Tan,
    /// `cosh(x)`.
    Cosh,
    /// `sinh(x)`.
    Sinh,
    /// `tanh(x)`.
    Tanh,
    /// `acosh(x)`.
    Acosh,
    /// `asinh(x)`.
    Asinh,
    /// `atanh(x)`.
    Atanh,
    /// `sqrt(x)`.
    Sqrt,
    /// `radians(x)`.
    Radians,
    /// `degrees(x)`.
    Degrees,
    /// `pi()`.
    Pi,
    /// `sign(x)`: -1, 0 or +1 as an integer (built whether or not the math functions are).
    Sign,
}

impl MathFunction {
    /// The function SQLite names `name` with `args` arguments, if it is one of these.
    pub fn from_name(name: &str, args: usize) -> Option<MathFunction> {
        use MathFunction as M;
        let one = |f| (args == 1).then_some(f);
        match name {
            "ceil" | "ceiling" => one(M::Ceil),
            "floor" => one(M::Floor),
            "trunc" => one(M::Trunc),
            "ln" => one(M::Ln),
            "log" if args == 2 => Some(M::LogBase),
            "log" | "log10" => one(M::Log10),
            "log2" => one(M::Log2),
            "exp" => one(M::Exp),
            "pow" | "power" => (args == 2).then_some(M::Pow),
            "mod" => (args == 2).then_some(M::Mod),
            "acos" => one(M::Acos),
            "asin" => one(M::Asin),
            "atan" => one(M::Atan),
            "atan2" => (args == 2).then_some(M::Atan2),
            "cos" => one(M::Cos),
            "sin" => one(M::Sin),
            "tan" => one(M::Tan),
            "cosh" => one(M::Cosh),
            "sinh" => one(M::Sinh),
            "tanh" => one(M::Tanh),
            "acosh" => one(M::Acosh),
            "asinh" => one(M::Asinh),
            "atanh" => one(M::Atanh),
            "sqrt" => one(M::Sqrt),
            "radians" => one(M::Radians),
            "degrees" => one(M::Degrees),
            "pi" => (args == 0).then_some(M::Pi),
            "sign" => one(M::Sign),
            _ => None,
        }
    }

    /// Whether SQLite has a function of this name among these (whatever the argument count).
    pub fn is_name(name: &str) -> bool {
        (0..=2).any(|n| MathFunction::from_name(name, n).is_some())
    }
}

// The C library's functions, which SQLite calls (Rust's own `acosh`, `asinh` and `atanh` use
// formulas of their own that differ in the last bit).
unsafe extern "C" {
    fn ceil(x: c_double) -> c_double;
    fn floor(x: c_double) -> c_double;
    fn trunc(x: c_double) -> c_double;
    fn log(x: c_double) -> c_double;
    fn log10(x: c_double) -> c_double;
    fn log2(x: c_double) -> c_double;
    fn exp(x: c_double) -> c_double;
    fn pow(x: c_double, y: c_double) -> c_double;
    fn fmod(x: c_double, y: c_double) -> c_double;
    fn acos(x: c_double) -> c_double;
    fn asin(x: c_double) -> c_double;
    fn atan(x: c_double) -> c_double;
    fn atan2(y: c_double, x: c_double) -> c_double;
    fn cos(x: c_double) -> c_double;
    fn sin(x: c_double) -> c_double;
    fn tan(x: c_double) -> c_double;
    fn cosh(x: c_double) -> c_double;
    fn sinh(x: c_double) -> c_double;
    fn tanh(x: c_double) -> c_double;
    fn acosh(x: c_double) -> c_double;
    fn asinh(x: c_double) -> c_double;
    fn atanh(x: c_double) -> c_double;
    fn sqrt(x: c_double) -> c_double;
}

/// `sqlite3_value_numeric_type` and the number it leaves: integers and reals as they are, text
/// that is wholly a number as that number, anything else `None`.
fn numeric(v: ValueRef<'_>) -> Option<Number> {
    match v {
        ValueRef::Integer(i) => Some(Number::Integer(i)),
        ValueRef::Real(r) => Some(Number::Real(r)),
        ValueRef::Text(z) => numeric_affinity_of_text(z),
        ValueRef::Blob(_) | ValueRef::Null => None,
    }
}

/// Calls `f` on `a` (the resolver checked the argument count).
pub fn apply(f: MathFunction, a: &[ValueRef<'_>]) -> Value {
    use MathFunction as M;
    let arg = |i: usize| a.get(i).copied().unwrap_or(ValueRef::Null);
    let one = |g: unsafe extern "C" fn(c_double) -> c_double| match numeric(arg(0)) {
        // SAFETY: a C library math function of one double, defined for every input.
        Some(x) => Value::real(unsafe { g(x.as_f64()) }),
        None => Value::Null,
    };
    let two = |g: unsafe extern "C" fn(c_double, c_double) -> c_double| {
        match (numeric(arg(0)), numeric(arg(1))) {
            // SAFETY: as above, two doubles.
            (Some(x), Some(y)) => Value::real(unsafe { g(x.as_f64(), y.as_f64()) }),
            _ => Value::Null,
        }
    };
    // `ceilingFunc`: an integer is its own ceiling, floor and truncation.
    let rounding = |g: unsafe extern "C" fn(c_double) -> c_double| match numeric(arg(0)) {
        Some(Number::Integer(i)) => Value::Integer(i),
        // SAFETY: as above.
        Some(Number::Real(r)) => Value::real(unsafe { g(r) }),
        None => Value::Null,
    };
    match f {
        M::Ceil => rounding(ceil),
        M::Floor => rounding(floor),
        M::Trunc => rounding(trunc),
        M::Ln | M::Log10 | M::Log2 => match numeric(arg(0)).map(Number::as_f64) {
            Some(x) if x > 0.0 => Value::real(unsafe {
                // SAFETY: as above.
                match f {
                    M::Ln => log(x),
                    M::Log10 => log10(x),
                    _ => log2(x),
                }
            }),
            _ => Value::Null,
        },
        // `logFunc` with two arguments checks the type of the first argument twice and reads
        // the second with `sqlite3_value_double` (its numeric prefix: `log(2, '8x')` is 3.0).
        M::LogBase => match numeric(arg(0)).map(Number::as_f64) {
            Some(base) if base > 0.0 => {
                // SAFETY: as above.
                let b = unsafe { log(base) };
                let x = arg(1).to_f64().unwrap_or(0.0);
                if b <= 0.0 || x <= 0.0 {
                    Value::Null
                } else {
                    // SAFETY: as above.
                    Value::real(unsafe { log(x) } / b)
                }
            }
            _ => Value::Null,
        },
        M::Exp => one(exp),
        M::Pow => two(pow),
        M::Mod => two(fmod),
        M::Acos => one(acos),
        M::Asin => one(asin),
        M::Atan => one(atan),
        M::Atan2 => two(atan2),
        M::Cos => one(cos),
        M::Sin => one(sin),
        M::Tan => one(tan),
        M::Cosh => one(cosh),
        M::Sinh => one(sinh),
        M::Tanh => one(tanh),
        M::Acosh => one(acosh),
        M::Asinh => one(asinh),
        M::Atanh => one(atanh),
        M::Sqrt => one(sqrt),
        M::Radians => match numeric(arg(0)) {
            Some(x) => Value::real(x.as_f64() * (std::f64::consts::PI / 180.0)),
            None => Value::Null,
        },
        M::Degrees => match numeric(arg(0)) {
            Some(x) => Value::real(x.as_f64() * (180.0 / std::f64::consts::PI)),
            None => Value::Null,
        },
        M::Pi => Value::real(std::f64::consts::PI),
        M::Sign => match numeric(arg(0)).map(Number::as_f64) {
            Some(x) => Value::Integer(if x < 0.0 {
                -1
            } else if x > 0.0 {
                1
            } else {
                0
            }),
            None => Value::Null,
        },
    }
}
