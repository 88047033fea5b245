//! What SQLite's parser decides about literals before any expression is coded: which operands
//! it marks always true or false (`EP_IsTrue`, `EP_IsFalse`), so that an `AND` or `OR` reduces
//! by them without computing the other operand ([`and_or`]), and which literals it knows are
//! never NULL (`sqlite3PExprIsNull`).
//!
//! A leaf of the resolver: it reads the parser's tree and builds the engine's expressions,
//! nothing else.

use engine::query::ir::Expr;
use engine::value::Value;
use sqlparser::ast::{self, UnaryOperator};

/// Whether `e` is a number, text or blob literal, under any unary `+` or `-` and parentheses:
/// what SQLite's parser knows is never NULL (`sqlite3PExprIsNull`; a `"quoted"` name is an
/// identifier there, and NULL, TRUE and FALSE are not among them).
pub(super) fn never_null_literal(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::UnaryOp {
            op: UnaryOperator::Plus | UnaryOperator::Minus,
            expr,
        }
        | ast::Expr::Nested(expr) => never_null_literal(expr),
        ast::Expr::Value(v) => matches!(
            v.value,
            ast::Value::Number(..)
                | ast::Value::SingleQuotedString(_)
                | ast::Value::HexStringLiteral(_)
        ),
        _ => false,
    }
}

/// `a AND b` or `a OR b` as SQLite codes it (`sqlite3ExprSimplifiedAndOr`): an integer literal
/// that decides the result stands for the whole (`x OR 1` is `1`, `x` never computed), one
/// that drops out leaves the truth value of the other operand (`1 AND x` is `NOT NOT x`).
/// Otherwise both operands are computed for a value and the engine's jump code decides in a
/// condition. Only literals written as such count (operands are built bottom-up, so a reduced
/// operand is seen as SQLite's reduction sees it); a constant that folds later does not, nor
/// an operand whose flag says SQLite does not mark it ([`has_truth_value`]).
pub(super) fn and_or(and: bool, (a, a_marked): (Expr, bool), (b, b_marked): (Expr, bool)) -> Expr {
    let literal = |e: &Expr, marked: bool| match e {
        Expr::Literal(Value::Integer(i)) if marked => Some(*i != 0),
        _ => None,
    };
    let boolean = |e: Expr| match literal(&e, true) {
        Some(t) => Expr::Literal(Value::Integer(i64::from(t))),
        None => Expr::Not(Box::new(Expr::Not(Box::new(e)))),
    };
    let (la, lb) = (literal(&a, a_marked), literal(&b, b_marked));
    if la == Some(true) || lb == Some(false) {
        boolean(if and { b } else { a })
    } else if lb == Some(true) || la == Some(false) {
        boolean(if and { a } else { b })
    } else if and {
        Expr::And(Box::new(a), Box::new(b))
    } else {
        Expr::Or(Box::new(a), Box::new(b))
    }
}

/// Whether SQLite's parser may have marked `e` always true or false (`EP_IsTrue`,
/// `EP_IsFalse`), which decides an `AND`/`OR` it is an operand of ([`and_or`]): only an
/// integer token that fits in 32 bits (`sqlite3ExprAlloc` with `sqlite3GetInt32`) is, among the
/// literals; `-1` is a negation of one and `9223372036854775807` too large (run seed
/// 1796149705910795367: `(NULL LIKE '%' ESCAPE 'ab') OR -1` computes the LIKE, and fails).
/// Other operands that plan to an integer (a reduced `AND`/`OR`, `IS NULL` of a literal,
/// `TRUE`) are the nodes SQLite marks.
pub(crate) fn has_truth_value(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Nested(x) => has_truth_value(x),
        ast::Expr::UnaryOp {
            op: UnaryOperator::Plus | UnaryOperator::Minus,
            ..
        } => false,
        // A COLLATE or a function call (`likely(1)`) is a node of its own, never marked (run
        // seed 1796152070066248454: `(9223372036854775807 COLLATE BINARY) OR (x LIKE '%'
        // ESCAPE '')` computes the LIKE).
        ast::Expr::Collate { .. } | ast::Expr::Function(_) => false,
        // A subquery plans to its result, a literal, but SQLite's parser marks nothing there
        // (run seed 9313603551829551305: `json_quote(x'01') OR EXISTS (SELECT ...)` computes
        // the failing operand).
        ast::Expr::Exists { .. }
        | ast::Expr::Subquery(_)
        | ast::Expr::In {
            target: ast::InTarget::Subquery(_) | ast::InTarget::Table { .. },
            ..
        } => false,
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => int32_token(n),
            // `0x1F` (an integer; `X'1F'` plans to a blob, never a truth value).
            ast::Value::HexStringLiteral(h) => int32_token(&format!("0x{h}")),
            _ => true,
        },
        _ => true,
    }
}

/// Whether SQLite's parser makes `a AND b` the integer 0 itself (`sqlite3ExprAnd`), before any
/// name is looked up: when one operand is a node it marks always false (`EP_IsFalse`) and
/// neither holds a function call (`EP_HasFunc`, which `LIKE`, `GLOB` and `->` are too, but
/// not one inside a subquery). The operands are then never resolved, so `rowid AND 0` over a
/// subquery in `FROM` is no `no such column` (tester table seed 9571989600706404804).
/// Measured on 3.54: `0`, `00`, `0x0`, `(0)`, `'a' IS NULL` and such a folded `AND` are
/// marked; `-0`, `+0`, `0.0`, `FALSE` and `0 COLLATE NOCASE` are not.
pub(crate) fn parser_folds_and(a: &ast::Expr, b: &ast::Expr) -> bool {
    (parser_false(a) || parser_false(b)) && !has_function(a) && !has_function(b)
}

/// Whether SQLite's parser marks `e` always false (`EP_IsFalse`), see [`parser_folds_and`].
fn parser_false(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Nested(x) => parser_false(x),
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => int32_token(n) && n.bytes().all(|c| c == b'0'),
            _ => false,
        },
        ast::Expr::IsNull(x) => never_null_literal(x),
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => parser_folds_and(left, right),
        _ => false,
    }
}

/// Whether `e` holds a function call outside its subqueries (SQLite's `EP_HasFunc`, which a
/// node passes up from its operands): any node not known to be free of one counts as one.
fn has_function(e: &ast::Expr) -> bool {
    use ast::BinaryOperator as B;
    match e {
        ast::Expr::Identifier(_)
        | ast::Expr::CompoundIdentifier(_)
        | ast::Expr::Value(_)
        | ast::Expr::Exists { .. }
        | ast::Expr::Subquery(_) => false,
        ast::Expr::Nested(x)
        | ast::Expr::UnaryOp { expr: x, .. }
        | ast::Expr::IsNull(x)
        | ast::Expr::IsNotNull(x)
        | ast::Expr::IsTrue(x)
        | ast::Expr::IsNotTrue(x)
        | ast::Expr::IsFalse(x)
        | ast::Expr::IsNotFalse(x)
        | ast::Expr::Cast { expr: x, .. }
        | ast::Expr::Collate { expr: x, .. } => has_function(x),
        ast::Expr::IsDistinctFrom(a, b) | ast::Expr::IsNotDistinctFrom(a, b) => {
            has_function(a) || has_function(b)
        }
        ast::Expr::BinaryOp { left, op, right } => {
            !matches!(
                op,
                B::Plus
                    | B::Minus
                    | B::Multiply
                    | B::Divide
                    | B::Modulo
                    | B::StringConcat
                    | B::Gt
                    | B::Lt
                    | B::GtEq
                    | B::LtEq
                    | B::Eq
                    | B::NotEq
                    | B::And
                    | B::Or
                    | B::BitwiseOr
                    | B::BitwiseAnd
                    | B::PGBitwiseShiftLeft
                    | B::PGBitwiseShiftRight
                    | B::Is
                    | B::IsNot
            ) || has_function(left)
                || has_function(right)
        }
        ast::Expr::Between {
            expr, low, high, ..
        } => has_function(expr) || has_function(low) || has_function(high),
        ast::Expr::In { expr, target, .. } => {
            has_function(expr)
                || match target {
                    ast::InTarget::List(list) => list.iter().any(has_function),
                    ast::InTarget::Subquery(_) => false,
                    _ => true,
                }
        }
        ast::Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            operand.as_deref().is_some_and(has_function)
                || conditions
                    .iter()
                    .any(|w| has_function(&w.condition) || has_function(&w.result))
                || else_result.as_deref().is_some_and(has_function)
        }
        _ => true,
    }
}

/// Whether the number token `n` is what `sqlite3GetInt32` reads whole: decimal digits, or
/// `0x` and hex digits, of a value below 2^31.
fn int32_token(n: &str) -> bool {
    let n = n.to_ascii_lowercase();
    if let Some(hex) = n.strip_prefix("0x") {
        let digits = hex.trim_start_matches('0');
        return !hex.is_empty()
            && hex.bytes().all(|c| c.is_ascii_hexdigit())
            && digits.len() <= 8
            && u32::from_str_radix(if digits.is_empty() { "0" } else { digits }, 16)
                .is_ok_and(|u| u < 0x8000_0000);
    }
    !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) && n.parse::<i32>().is_ok()
}
