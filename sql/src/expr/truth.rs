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
