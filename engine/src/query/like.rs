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

/// The longest text pattern SQLite's `LIKE` and `GLOB` take, in bytes
/// (`SQLITE_MAX_LIKE_PATTERN_LENGTH`, the default of `SQLITE_LIMIT_LIKE_PATTERN_LENGTH`).
pub const PATTERN_LIMIT: usize = 50_000;

/// Whether SQLite's `likeFunc` refuses `pattern` as `LIKE or GLOB pattern too complex`: a
/// text or blob of more than [`PATTERN_LIMIT`] bytes (measured on 3.54: the check comes
/// before the operand or the escape is looked at, so it fails even where they are NULL).
/// Builds with `SQLITE_LIKE_DOESNT_MATCH_BLOBS` (apsw's wheels) answer 0 for a blob first;
/// SQLite's default build, corescan's oracle, does not.
pub fn pattern_too_long(pattern: ValueRef<'_>) -> bool {
    matches!(pattern, ValueRef::Text(t) | ValueRef::Blob(t) if t.len() > PATTERN_LIMIT)
}

/// `x LIKE pattern [ESCAPE escape]` (or `GLOB`): `None` when an operand is NULL.
pub fn like_value(
    x: ValueRef<'_>,
    pattern: ValueRef<'_>,
    escape: Option<ValueRef<'_>>,
    glob: bool,
) -> Result<Option<bool>, String> {
    if pattern_too_long(pattern) {
        return Err("LIKE or GLOB pattern too complex".into());
    }
    let esc = match escape {
        None => None,
        Some(e) => {
            let Some(t) = e.to_text() else {
                return Ok(None);
            };
            let s = String::from_utf8_lossy(&t);
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
    // The characters go into a buffer this thread keeps, and the tokens of the last few
    // patterns are kept with their pattern: a scan compares every row with the same patterns
    // (several in one query), and allocates nothing per row for them.
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let Scratch {
            text,
            chars,
            compiled,
            next,
        } = &mut *scratch;
        // SQLite reads both as C strings (they end at the first NUL), character by character.
        sqlite_chars(&x, text);
        let found = compiled
            .iter()
            .position(|c| c.esc == esc && c.glob == glob && c.pattern[..] == p[..]);
        let at = match found {
            Some(at) => at,
            None => {
                sqlite_chars(&p, chars);
                let mut tokens = Vec::new();
                if glob {
                    glob_tokens(chars, &mut tokens);
                } else {
                    like_tokens(chars, esc, &mut tokens);
                }
                let made = Compiled {
                    pattern: p.to_vec(),
                    esc,
                    glob,
                    tokens,
                };
                if compiled.len() < PATTERNS_KEPT {
                    compiled.push(made);
                    compiled.len() - 1
                } else {
                    let at = *next % PATTERNS_KEPT;
                    *next += 1;
                    compiled[at] = made;
                    at
                }
            }
        };
        Ok(Some(matches(&compiled[at].tokens, text, !glob)))
    })
}

/// How many patterns' tokens [`like_value`] keeps per thread.
const PATTERNS_KEPT: usize = 8;

/// A pattern's tokens, with what they were made from.
struct Compiled {
    pattern: Vec<u8>,
    esc: Option<char>,
    glob: bool,
    tokens: Vec<Token>,
}

/// What [`like_value`] keeps between calls on one thread.
#[derive(Default)]
struct Scratch {
    /// The text's characters.
    text: Vec<char>,
    /// A pattern's characters, while it is tokenised.
    chars: Vec<char>,
    /// The last patterns' tokens.
    compiled: Vec<Compiled>,
    /// The entry of `compiled` the next new pattern replaces once it is full.
    next: usize,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// Characters as `sqlite3Utf8Read` decodes them, up to a NUL: a lead byte and its
/// continuation bytes form one character (overlong forms and surrogates read as U+FFFD);
/// any other byte is a character of its own value. Into `out`, which is cleared first.
fn sqlite_chars(t: &[u8], out: &mut Vec<char>) {
    out.clear();
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
}

fn like_tokens(p: &[char], esc: Option<char>, out: &mut Vec<Token>) {
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
}

fn glob_tokens(p: &[char], out: &mut Vec<Token>) {
    let chars = p;
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
                    return;
                }
                out.push(Token::Set(negated, ranges));
                i = j;
            }
            c => out.push(Token::Char(c)),
        }
        i += 1;
    }
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
    fn kept_patterns_are_told_apart_by_bytes_escape_and_kind() {
        // More patterns than are kept, cycled, and the same bytes as LIKE, GLOB and with an
        // escape: each answer is the one a fresh thread gives.
        let cases: Vec<(&str, &str, Option<&str>, bool)> = (0..3)
            .flat_map(|_| {
                [
                    ("a%c", "a%c", None, false),
                    ("a%c", "a%c", None, true),
                    ("a%c", "a!%c", Some("!"), false),
                    ("abc", "a!%c", Some("!"), false),
                    ("a!xc", "a!%c", None, false),
                    ("abc", "[a-b]*", None, true),
                    ("cbc", "[a-b]*", None, true),
                    ("ABC", "a_c", None, false),
                    ("ABC", "a?c", None, true),
                    ("x", "%", None, false),
                    ("x", "", None, false),
                ]
            })
            .collect();
        let answer = |&(x, p, e, glob): &(&str, &str, Option<&str>, bool)| {
            like_value(
                ValueRef::Text(x.as_bytes()),
                ValueRef::Text(p.as_bytes()),
                e.map(|e| ValueRef::Text(e.as_bytes())),
                glob,
            )
        };
        let fresh: Vec<_> = cases
            .iter()
            .map(|c| {
                let c = *c;
                std::thread::spawn(move || answer(&c)).join().unwrap()
            })
            .collect();
        let here: Vec<_> = cases.iter().map(answer).collect();
        assert_eq!(here, fresh);
        assert_eq!(
            &here[..5],
            &[
                Ok(Some(true)),
                Ok(Some(true)),
                Ok(Some(true)),
                Ok(Some(false)),
                Ok(Some(true))
            ]
        );
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
