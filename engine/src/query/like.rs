//! `LIKE` and `GLOB` as SQLite's `patternCompare` defines them: `LIKE` has `%`, `_` and an
//! optional `ESCAPE` character and folds ASCII letters only (SQLite's built-in, without ICU);
//! `GLOB` has `*`, `?` and `[...]` sets (`[^...]` negated, `a-z` ranges) and is case-sensitive.
//! Both work on characters, not bytes.

use crate::value::ValueRef;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// `%` or `*`.
    AnySequence,
    /// `_` or `?`.
    AnyChar,
    /// A literal character.
    Char(char),
    /// A GLOB set: negated, and its ranges (a single character is a range of one).
    Set(bool, Vec<(char, char)>),
}

/// `x LIKE pattern [ESCAPE escape]` (or `GLOB`): `None` when an operand is NULL.
pub fn like_value(
    x: ValueRef<'_>,
    pattern: ValueRef<'_>,
    escape: Option<ValueRef<'_>>,
    glob: bool,
) -> Result<Option<bool>, String> {
    let esc = match escape {
        None => None,
        Some(e) => {
            let Some(t) = e.to_text() else {
                return Ok(None);
            };
            let s = String::from_utf8_lossy(&t).into_owned();
            let mut chars = s.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Some(c),
                _ => return Err("ESCAPE expression must be a single character".into()),
            }
        }
    };
    let (Some(x), Some(p)) = (x.to_text(), pattern.to_text()) else {
        return Ok(None);
    };
    // SQLite reads both as C strings (they end at the first NUL), character by character.
    let x = sqlite_chars(&x);
    let p = sqlite_chars(&p);
    let tokens = if glob {
        glob_tokens(&p)
    } else {
        like_tokens(&p, esc)
    };
    let text = x;
    Ok(Some(matches(&tokens, &text, !glob)))
}

/// Characters as `sqlite3Utf8Read` decodes them, up to a NUL: a lead byte and its
/// continuation bytes form one character (overlong forms and surrogates read as U+FFFD);
/// any other byte is a character of its own value.
fn sqlite_chars(t: &[u8]) -> Vec<char> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() && t[i] != 0 {
        let b = t[i];
        i += 1;
        let mut c = u32::from(b);
        if b >= 0xc0 {
            c = match b {
                0xc0..=0xdf => u32::from(b & 0x1f),
                0xe0..=0xef => u32::from(b & 0x0f),
                0xf0..=0xf7 => u32::from(b & 0x07),
                0xf8..=0xfb => u32::from(b & 0x03),
                _ => u32::from(b & 0x01),
            };
            while i < t.len() && t[i] & 0xc0 == 0x80 {
                c = (c << 6) | u32::from(t[i] & 0x3f);
                i += 1;
            }
            if c < 0x80 || (c & 0xFFFF_F800) == 0xD800 || (c & 0xFFFF_FFFE) == 0xFFFE {
                c = 0xFFFD;
            }
        }
        out.push(char::from_u32(c).unwrap_or('\u{FFFD}'));
    }
    out
}

fn like_tokens(p: &[char], esc: Option<char>) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = p.iter().copied();
    while let Some(c) = chars.next() {
        if Some(c) == esc {
            // An escape at the very end matches nothing literal: SQLite then fails the match.
            match chars.next() {
                Some(n) => out.push(Token::Char(n)),
                None => out.push(Token::Set(false, Vec::new())),
            }
        } else if c == '%' {
            out.push(Token::AnySequence);
        } else if c == '_' {
            out.push(Token::AnyChar);
        } else {
            out.push(Token::Char(c));
        }
    }
    out
}

fn glob_tokens(p: &[char]) -> Vec<Token> {
    let chars = p;
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => out.push(Token::AnySequence),
            '?' => out.push(Token::AnyChar),
            '[' => {
                let mut j = i + 1;
                let negated = chars.get(j) == Some(&'^');
                if negated {
                    j += 1;
                }
                let mut ranges = Vec::new();
                if chars.get(j) == Some(&']') {
                    ranges.push((']', ']'));
                    j += 1;
                }
                let mut closed = false;
                while j < chars.len() {
                    let c = chars[j];
                    if c == ']' {
                        closed = true;
                        break;
                    }
                    if chars.get(j + 1) == Some(&'-') && j + 2 < chars.len() && chars[j + 2] != ']'
                    {
                        ranges.push((c, chars[j + 2]));
                        j += 3;
                    } else {
                        ranges.push((c, c));
                        j += 1;
                    }
                }
                if !closed {
                    // An unterminated set matches nothing.
                    out.push(Token::Set(false, Vec::new()));
                    return out;
                }
                out.push(Token::Set(negated, ranges));
                i = j;
            }
            c => out.push(Token::Char(c)),
        }
        i += 1;
    }
    out
}

fn one(t: &Token, c: char, fold: bool) -> bool {
    match t {
        Token::AnyChar => true,
        Token::Char(p) => {
            if fold {
                p.eq_ignore_ascii_case(&c)
            } else {
                *p == c
            }
        }
        Token::Set(negated, ranges) => {
            ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
        }
        Token::AnySequence => true,
    }
}

/// Matching with one backtrack point per star, which is exact because every other token
/// matches exactly one character.
fn matches(tokens: &[Token], text: &[char], fold: bool) -> bool {
    let (mut t, mut s) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while s < text.len() {
        if t < tokens.len() && tokens[t] == Token::AnySequence {
            star = Some((t, s));
            t += 1;
        } else if t < tokens.len() && one(&tokens[t], text[s], fold) {
            t += 1;
            s += 1;
        } else if let Some((st, ss)) = star {
            t = st + 1;
            s = ss + 1;
            star = Some((st, ss + 1));
        } else {
            return false;
        }
    }
    tokens[t..].iter().all(|k| *k == Token::AnySequence)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn like(x: &str, p: &str) -> bool {
        like_value(
            ValueRef::Text(x.as_bytes()),
            ValueRef::Text(p.as_bytes()),
            None,
            false,
        )
        .unwrap()
        .unwrap()
    }

    fn glob(x: &str, p: &str) -> bool {
        like_value(
            ValueRef::Text(x.as_bytes()),
            ValueRef::Text(p.as_bytes()),
            None,
            true,
        )
        .unwrap()
        .unwrap()
    }

    #[test]
    fn like_patterns() {
        assert!(like("Hello", "h%"));
        assert!(like("Hello", "%LL%"));
        assert!(!like("Hello", "h_l%x"));
        assert!(like("", "%"));
        assert!(!like("abc", "ab"));
        let esc = like_value(
            ValueRef::Text(b"a%c"),
            ValueRef::Text(b"a\\%c"),
            Some(ValueRef::Text(b"\\")),
            false,
        );
        assert_eq!(esc, Ok(Some(true)));
        assert!(like("É", "É"));
        assert!(!like("é", "É"));
    }

    #[test]
    fn glob_patterns() {
        assert!(glob("abc", "a*"));
        assert!(!glob("Abc", "a*"));
        assert!(glob("abc", "a?c"));
        assert!(glob("abc", "[a-c]bc"));
        assert!(!glob("dbc", "[a-c]bc"));
        assert!(glob("dbc", "[^a-c]bc"));
        assert!(glob("]", "[]]"));
    }
}
