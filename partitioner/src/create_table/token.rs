//! SQLite's lexical rules, as far as `CREATE TABLE` needs them: quoted identifiers, string and
//! blob literals, numbers (with `_` digit separators), comments and punctuation.

/// One token of a `CREATE TABLE` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Token {
    /// A bare word: identifier, keyword or number (`1.5`, `.5`, `1e-3`, `0x1F`, `1_000`).
    Word(String),
    /// An identifier in `"..."`, `[...]` or `` `...` ``.
    Quoted(String),
    /// A string literal `'...'` (SQLite also accepts it as an identifier).
    Str(String),
    /// A blob literal `X'...'`, decoded.
    Blob(Vec<u8>),
    /// Any single punctuation character.
    Punct(char),
}

impl Token {
    pub(super) fn is_kw(&self, kw: &str) -> bool {
        matches!(self, Token::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    /// The identifier this token names, if it can name one.
    pub(super) fn ident(&self) -> Option<&str> {
        match self {
            Token::Word(s) | Token::Quoted(s) | Token::Str(s) => Some(s),
            Token::Blob(_) | Token::Punct(_) => None,
        }
    }

    /// The token as SQL text again (quotes restored).
    pub(super) fn text(&self) -> String {
        match self {
            Token::Word(s) => s.clone(),
            Token::Quoted(s) => format!("\"{}\"", s.replace('"', "\"\"")),
            Token::Str(s) => format!("'{}'", s.replace('\'', "''")),
            Token::Blob(b) => {
                let hex: String = b.iter().map(|x| format!("{x:02X}")).collect();
                format!("X'{hex}'")
            }
            Token::Punct(c) => c.to_string(),
        }
    }
}

/// Whether `c` can continue an identifier (SQLite's `IdChar`).
fn is_id_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$' || !c.is_ascii()
}

/// The index one past the number that starts at `start` (a digit, or a `.` before a digit),
/// following SQLite's tokenizer: hexadecimal `0x...`, or digits, an optional fraction and an
/// optional exponent, each allowing `_` separators. Identifier characters glued to the end
/// are taken too (SQLite calls such a token illegal; the literal parser refuses it).
fn number_end(chars: &[char], start: usize) -> usize {
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let digits = |mut i: usize, hex: bool| {
        while (if hex {
            at(i).is_ascii_hexdigit()
        } else {
            at(i).is_ascii_digit()
        }) || at(i) == '_'
        {
            i += 1;
        }
        i
    };
    let mut i = start;
    if at(i) == '0' && matches!(at(i + 1), 'x' | 'X') && at(i + 2).is_ascii_hexdigit() {
        i = digits(i + 2, true);
    } else {
        i = digits(i, false);
        if at(i) == '.' {
            i = digits(i + 1, false);
        }
        if matches!(at(i), 'e' | 'E')
            && (at(i + 1).is_ascii_digit()
                || (matches!(at(i + 1), '+' | '-') && at(i + 2).is_ascii_digit()))
        {
            i = digits(i + 2, false);
        }
    }
    while i < chars.len() && is_id_char(chars[i]) {
        i += 1;
    }
    i
}

/// Splits `sql` into tokens, dropping whitespace and comments.
pub(super) fn tokenize(sql: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = sql.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '-' && next == Some('-') {
            while chars.get(i).is_some_and(|&c| c != '\n') {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            // SQLite lets an unterminated comment run to the end of the input.
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
        } else if matches!(c, 'x' | 'X') && next == Some('\'') {
            let start = i + 2;
            let mut end = start;
            while chars.get(end).is_some_and(char::is_ascii_hexdigit) {
                end += 1;
            }
            if chars.get(end) != Some(&'\'') || (end - start) % 2 != 0 {
                return Err(
                    "malformed blob literal (X'...' needs an even number of hex \
                            digits)"
                        .to_string(),
                );
            }
            let bytes = chars[start..end]
                .chunks(2)
                .map(|pair| {
                    let hex: String = pair.iter().collect();
                    u8::from_str_radix(&hex, 16).unwrap_or(0)
                })
                .collect();
            tokens.push(Token::Blob(bytes));
            i = end + 1;
        } else if let Some(close) = match c {
            '"' => Some('"'),
            '`' => Some('`'),
            '[' => Some(']'),
            '\'' => Some('\''),
            _ => None,
        } {
            let mut text = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(format!("unterminated quote {c}")),
                    Some(&d) if d == close => {
                        // Doubling escapes the quote, except in [...], which has no escape.
                        if close != ']' && chars.get(i + 1) == Some(&close) {
                            text.push(close);
                            i += 2;
                        } else {
                            i += 1;
                            break;
                        }
                    }
                    Some(&d) => {
                        text.push(d);
                        i += 1;
                    }
                }
            }
            tokens.push(if c == '\'' {
                Token::Str(text)
            } else {
                Token::Quoted(text)
            });
        } else if c.is_ascii_digit() || (c == '.' && next.is_some_and(|n| n.is_ascii_digit())) {
            let end = number_end(&chars, i);
            tokens.push(Token::Word(chars[i..end].iter().collect()));
            i = end;
        } else if is_id_char(c) {
            let start = i;
            while chars.get(i).is_some_and(|&c| is_id_char(c)) {
                i += 1;
            }
            tokens.push(Token::Word(chars[start..i].iter().collect()));
        } else {
            tokens.push(Token::Punct(c));
            i += 1;
        }
    }
    Ok(tokens)
}

/// The index one past the parenthesised group that opens at `open`.
pub(super) fn skip_group(tokens: &[Token], open: usize) -> Result<usize, String> {
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        match t {
            Token::Punct('(') => depth += 1,
            Token::Punct(')') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
    }
    Err("unbalanced parentheses".to_string())
}
