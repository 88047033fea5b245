//! Literals: numbers (decimal and `0x` hex integers, reals as SQLite's `atof` reads them),
//! strings, blobs, `NULL` and booleans, with a unary minus folded in as SQLite's parser folds
//! it (`-9223372036854775808` is the smallest integer, `-'x'` the arithmetic on a text).

use engine::query::ir::ArithOp;
use engine::value::Value;
use sqlparser::ast;

use super::Resolver;
use crate::error::{invalid, unsupported, SqlError};
use crate::source::text_at;

impl Resolver<'_> {
    /// A literal, telling `0x1F` (an integer) from `X'1F'` (a blob) by the source text, which
    /// the parser gives the same token.
    pub(super) fn literal_at(
        &self,
        v: &ast::ValueWithSpan,
        negative: bool,
    ) -> Result<Value, SqlError> {
        if let ast::Value::HexStringLiteral(h) = &v.value {
            let written = text_at(&self.source, v.span.start);
            if written.is_some_and(|t| t.starts_with("0x") || t.starts_with("0X")) {
                return literal(&ast::Value::Number(format!("0x{h}"), false), negative);
            }
        }
        literal(&v.value, negative)
    }
}

/// A literal's value (`negative`: it was written after a unary minus).
pub fn literal(v: &ast::Value, negative: bool) -> Result<Value, SqlError> {
    Ok(match v {
        ast::Value::Number(text, _) => {
            let t = text.as_str();
            if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                if hex.len() > 16 {
                    return invalid(format!("hex literal too big: {t}"));
                }
                let u = u64::from_str_radix(hex, 16)
                    .map_err(|_| SqlError::Invalid(format!("malformed hex literal {t}")))?;
                let i = u as i64;
                return Ok(Value::Integer(if negative { i.wrapping_neg() } else { i }));
            }
            let signed = if negative {
                format!("-{t}")
            } else {
                t.to_string()
            };
            if t.bytes().all(|b| b.is_ascii_digit()) {
                if let Ok(i) = signed.parse::<i64>() {
                    return Ok(Value::Integer(i));
                }
            }
            Value::Real(partitioner::numeric_text::atof(signed.as_bytes()).1)
        }
        ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => {
            let v = Value::text(s.clone());
            if negative {
                return Ok(engine::query::eval::arith(
                    ArithOp::Sub,
                    engine::value::ValueRef::Integer(0),
                    v.as_ref(),
                ));
            }
            v
        }
        ast::Value::HexStringLiteral(h) => {
            if h.len() % 2 != 0 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                return invalid(format!("malformed blob literal X'{h}'"));
            }
            let blob = Value::Blob(
                (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap_or(0))
                    .collect(),
            );
            if negative {
                return Ok(engine::query::eval::arith(
                    ArithOp::Sub,
                    engine::value::ValueRef::Integer(0),
                    blob.as_ref(),
                ));
            }
            blob
        }
        ast::Value::Boolean(b) => Value::Integer(i64::from(*b)),
        ast::Value::Null => Value::Null,
        ast::Value::Placeholder(p) => return unsupported(format!("parameters ({p})")),
        other => return unsupported(format!("the literal {other}")),
    })
}
