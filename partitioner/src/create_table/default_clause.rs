//! A column's `DEFAULT` clause, parsed the way SQLite's grammar reads it.
//!
//! SQLite accepts `DEFAULT` followed by a literal (`NULL`, a number, `'text'`, `X'blob'`,
//! `CURRENT_TIME` and friends), a signed literal (`-0.06`, `+5`), a bare or quoted identifier
//! (read as a string: `DEFAULT abc` means `'abc'`, except `TRUE`/`FALSE`), or a parenthesised
//! expression. Parentheses and unary signs are kept as they shape SQLite's evaluation (see
//! [`crate::default_value`]); anything else in parentheses is kept as text, since only SQLite
//! can evaluate it.

use super::token::{skip_group, Token};

/// A column's `DEFAULT` clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultClause {
    /// A literal under zero or more unary signs, outermost first, as SQLite's parse tree has
    /// them: parentheses leave no trace, and a sign applied to a `+` replaces it. So `-0.06`,
    /// `(-(0.06))` and `(-(+0.06))` are all `[Minus]` over `0.06`, while `(- -1)` is
    /// `[Minus, Minus]` over `1`.
    Constant {
        /// The unary signs, outermost first.
        signs: Vec<Sign>,
        /// The literal they apply to.
        literal: Literal,
    },
    /// `CURRENT_TIME`, `CURRENT_DATE` or `CURRENT_TIMESTAMP` (upper-cased), evaluated when a
    /// row is inserted.
    CurrentTime(String),
    /// Any other expression, as written (tokens re-joined), e.g. `(round(1.5,2))`.
    Expression(String),
}

/// A unary sign in front of a `DEFAULT` literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    /// `+`: no effect on the value (after folding, it only survives outside every `-`).
    Plus,
    /// `-`.
    Minus,
}

/// A literal in a `DEFAULT` clause. Numbers keep their text, as SQLite's parser does, because
/// how the text is converted depends on the column's affinity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    /// `NULL`.
    Null,
    /// An integer token, decimal (`42`) or hexadecimal (`0x1F`), `_` separators removed.
    Integer(String),
    /// A real-number token (with a `.` or an exponent: `0.06`, `.5`, `1e3`), `_` separators
    /// removed.
    Float(String),
    /// A string literal (`'a''b'` is `a'b`), or a bare or quoted identifier outside
    /// parentheses, which SQLite reads as a string.
    Text(String),
    /// A blob literal `X'00ff'`, decoded.
    Blob(Vec<u8>),
    /// `TRUE` (1) or `FALSE` (0).
    Bool(bool),
}

/// The literal a number token spells, following SQLite's tokenizer (hexadecimal `0x...`, or
/// digits with an optional fraction and exponent) and its rule that a `_` separator stands
/// between two digits; `None` when `word` is not exactly one number.
pub(crate) fn number_literal(word: &str) -> Option<Literal> {
    let s = word.as_bytes();
    let hex = s.len() > 2 && s[0] == b'0' && matches!(s[1], b'x' | b'X');
    let is_digit = |b: u8| {
        if hex {
            b.is_ascii_hexdigit()
        } else {
            b.is_ascii_digit()
        }
    };
    // Every separator sits between two digits (of the number's base).
    for (i, &b) in s.iter().enumerate() {
        if b == b'_' && !(i > 0 && is_digit(s[i - 1]) && s.get(i + 1).is_some_and(|&n| is_digit(n)))
        {
            return None;
        }
    }
    let clean: String = word.chars().filter(|&c| c != '_').collect();
    if hex {
        return (clean.len() > 2 && clean.bytes().skip(2).all(|b| b.is_ascii_hexdigit()))
            .then_some(Literal::Integer(clean));
    }
    let b = clean.as_bytes();
    let digits = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let int_end = digits(0);
    let mut i = int_end;
    let mut float = false;
    if b.get(i) == Some(&b'.') {
        float = true;
        i = digits(i + 1);
    }
    // At least one mantissa digit: `.` alone is not a number.
    if i == usize::from(float) {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        float = true;
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let start = i;
        i = digits(i);
        if i == start {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    Some(if float {
        Literal::Float(clean)
    } else {
        Literal::Integer(clean)
    })
}

const CURRENT_TIME_WORDS: &[&str] = &["CURRENT_TIME", "CURRENT_DATE", "CURRENT_TIMESTAMP"];

fn current_time(t: &Token) -> Option<String> {
    CURRENT_TIME_WORDS
        .iter()
        .find(|w| t.is_kw(w))
        .map(|w| w.to_string())
}

/// The literal one token spells where SQLite's grammar expects a `term` (after `DEFAULT`, or
/// inside an expression when `in_expression`). Outside an expression a bare or quoted
/// identifier is a string; inside one it would be a column reference, which is not a literal.
fn literal(t: &Token, in_expression: bool) -> Option<Literal> {
    match t {
        Token::Str(s) => Some(Literal::Text(s.clone())),
        Token::Blob(b) => Some(Literal::Blob(b.clone())),
        Token::Quoted(s) => (!in_expression).then(|| Literal::Text(s.clone())),
        Token::Word(w) => {
            let first = w.as_bytes().first().copied().unwrap_or(0);
            if first.is_ascii_digit() || first == b'.' {
                number_literal(w)
            } else if t.is_kw("NULL") {
                Some(Literal::Null)
            } else if t.is_kw("TRUE") || t.is_kw("FALSE") {
                Some(Literal::Bool(t.is_kw("TRUE")))
            } else if in_expression || current_time(t).is_some() {
                None
            } else {
                Some(Literal::Text(w.clone()))
            }
        }
        Token::Punct(_) => None,
    }
}

/// Re-joins tokens as SQL text, with a space only between two words.
fn render(tokens: &[Token]) -> String {
    let mut out = String::new();
    for (i, t) in tokens.iter().enumerate() {
        let word = |t: &Token| !matches!(t, Token::Punct(_));
        if i > 0 && word(t) && word(&tokens[i - 1]) {
            out.push(' ');
        }
        out.push_str(&t.text());
    }
    out
}

/// Parses `tokens` as `sign* (literal | '(' inner ')')` in SQLite's expression grammar (in a
/// loop: a hostile schema may nest a DEFAULT far deeper than SQLite's own parser allows).
fn signed_literal(mut tokens: &[Token], mut signs: Vec<Sign>) -> Option<(Vec<Sign>, Literal)> {
    loop {
        match tokens {
            [Token::Punct('+'), rest @ ..] => {
                signs.push(Sign::Plus);
                tokens = rest;
            }
            [Token::Punct('-'), rest @ ..] => {
                signs.push(Sign::Minus);
                tokens = rest;
            }
            [Token::Punct('('), inner @ .., Token::Punct(')')] => tokens = inner,
            [one] => return literal(one, true).map(|l| (signs, l)),
            _ => return None,
        }
    }
}

/// Applies SQLite's parser rule for `expr ::= PLUS|MINUS expr`: a sign applied to a `+` node
/// takes that node's place, so `-(+x)` is `-x` and `+(+x)` is `+x`.
fn fold_plus(signs: Vec<Sign>) -> Vec<Sign> {
    let mut tree: Vec<Sign> = Vec::new(); // innermost first
    for &sign in signs.iter().rev() {
        match tree.last_mut() {
            Some(top) if *top == Sign::Plus => *top = sign,
            _ => tree.push(sign),
        }
    }
    tree.reverse();
    tree
}

/// Parses the `DEFAULT` clause whose value starts at `item[at]` (just after the keyword);
/// returns it and the index of the first token after it.
pub(super) fn parse_default(item: &[Token], at: usize) -> Result<(DefaultClause, usize), String> {
    let missing = || "DEFAULT without a value".to_string();
    match item.get(at).ok_or_else(missing)? {
        Token::Punct('(') => {
            let end = skip_group(item, at)?;
            let group = &item[at..end];
            let inner = &group[1..group.len() - 1];
            let clause = if let Some((signs, literal)) = signed_literal(group, Vec::new()) {
                DefaultClause::Constant {
                    signs: fold_plus(signs),
                    literal,
                }
            } else if let Some(kw) = inner
                .first()
                .and_then(current_time)
                .filter(|_| inner.len() == 1)
            {
                DefaultClause::CurrentTime(kw)
            } else {
                DefaultClause::Expression(render(group))
            };
            Ok((clause, end))
        }
        Token::Punct(c @ ('+' | '-')) => {
            let sign = if *c == '-' { Sign::Minus } else { Sign::Plus };
            let term = item.get(at + 1).ok_or_else(missing)?;
            // SQLite's `term` here is a literal, never an identifier.
            let clause = match literal(term, true) {
                // `DEFAULT +x` has no sign node in SQLite's parse tree.
                Some(literal) => DefaultClause::Constant {
                    signs: if sign == Sign::Minus {
                        vec![sign]
                    } else {
                        Vec::new()
                    },
                    literal,
                },
                None => DefaultClause::Expression(render(&item[at..at + 2])),
            };
            Ok((clause, at + 2))
        }
        Token::Punct(c) => Err(format!("unexpected {c} after DEFAULT")),
        t => {
            let clause = if let Some(kw) = current_time(t) {
                DefaultClause::CurrentTime(kw)
            } else if let Some(literal) = literal(t, false) {
                DefaultClause::Constant {
                    signs: Vec::new(),
                    literal,
                }
            } else {
                DefaultClause::Expression(t.text())
            };
            Ok((clause, at + 1))
        }
    }
}
