//! The partitioner's error type: every error names the file and, where one is involved, the page.
//!
//! Names in these messages come from the file (tables, columns, the schema's SQL), and a hostile
//! file can hold any bytes in them: an ESC sequence that recolours or rewrites the terminal, a
//! newline that forges a second line. [`printable`] is the one escape for such text; every error
//! type of the workspace applies it to its text fields when displayed, and the binary to every
//! `error:` line it prints, so nothing from a file reaches a terminal raw.

use std::borrow::Cow;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// An error reading or interpreting a database file.
///
/// Displays as one line: `FILE: page N: what is wrong` (or `FILE: what is wrong` when no single
/// page is at fault), so the binary can print it after `error:` unchanged.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused an operation on the file.
    #[error("{}: {}: {source}", shown(path), printable(op))]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done (`open`, `read page 7`, ...).
        op: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A page holds something the format does not allow.
    #[error("{}: page {page}: {}", shown(path), printable(what))]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The 1-based page number at fault.
        page: u32,
        /// What is wrong, in a few words.
        what: String,
    },
    /// The file as a whole is invalid or not something we can read (bad header, unknown table,
    /// WITHOUT ROWID table, a hot `-journal`, a `-wal` log that does not fit the file, ...).
    #[error("{}: {}", shown(path), printable(what))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, in a few words.
        what: String,
    },
    /// The file has no table of the name asked for (a file of a table spread over several
    /// files may be skipped for it).
    #[error("{}: {}", shown(path), printable(what))]
    NoSuchTable {
        /// The file.
        path: PathBuf,
        /// The message: the name asked for and the tables there are.
        what: String,
    },
    /// The database changed while it was read without a lock that stops writers (see
    /// [`crate::snapshot::Protocol::VerifyRetry`]), or its log no longer matches the index
    /// it was locked by: planning and scanning again reads a consistent state.
    #[error("{}: {}", shown(path), printable(what))]
    Changed {
        /// The file.
        path: PathBuf,
        /// What changed.
        what: String,
    },
}

impl Error {
    /// The page this error is about, if any.
    pub fn page(&self) -> Option<u32> {
        match self {
            Error::Corrupt { page, .. } => Some(*page),
            _ => None,
        }
    }

    /// Whether this error says the database changed (planning and scanning again may succeed).
    pub fn is_change(&self) -> bool {
        matches!(self, Error::Changed { .. })
    }
}

/// Shorthand for results whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `text` with every character that would act on a terminal instead of showing written as a
/// Rust escape, so that it reads as text: the control characters (C0, DEL and C1: `\n`, `\r`,
/// `\t`, and `\u{1b}` for ESC) and the bidirectional-text controls that reorder what
/// follows them (`\u{202e}`, ...). Everything else, ordinary Unicode included, is unchanged
/// (borrowed when nothing needs escaping). The notation is the one `{:?}` uses for names, so
/// a name reads alike in every message; backslashes are kept as they are, so the escape is for
/// reading, not for reversing.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acts_on_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if acts_on_terminal(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether `c` changes what a terminal shows rather than showing as a glyph: a control
/// character, or a bidirectional-text control (Unicode's `Bidi_Control` property).
fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// A file's path as an error shows it: lossily decoded, then [`printable`] (a path can hold
/// control characters too).
pub fn shown(path: &Path) -> Cow<'_, str> {
    match path.to_string_lossy() {
        Cow::Borrowed(s) => printable(s),
        Cow::Owned(s) => Cow::Owned(printable(&s).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_unicode_kept() {
        assert!(matches!(printable("lineitem"), Cow::Borrowed("lineitem")));
        assert_eq!(printable("ev\x1b[31mil\nname"), "ev\\u{1b}[31mil\\nname");
        assert_eq!(printable("a\tb\rc\u{7f}\u{9b}"), "a\\tb\\rc\\u{7f}\\u{9b}");
        // A right-to-left override would show the rest of the line reversed.
        assert_eq!(printable("x\u{202e}gnp.exe"), "x\\u{202e}gnp.exe");
        assert_eq!(printable("čaj, 茶, \\n as typed"), "čaj, 茶, \\n as typed");
        // Already escaped text is left as it is, so escaping twice is harmless.
        let once = printable("a\u{1b}b").into_owned();
        assert_eq!(printable(&once), once);
    }

    #[test]
    fn errors_display_file_text_escaped_on_one_line() {
        let e = Error::Invalid {
            path: PathBuf::from("/tmp/x\n.db"),
            what: "no table named \"t\" (tables: ev\x1b[31mil\nname)".into(),
        };
        assert_eq!(
            e.to_string(),
            "/tmp/x\\n.db: no table named \"t\" (tables: ev\\u{1b}[31mil\\nname)"
        );
    }
}
