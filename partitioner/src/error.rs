//! The partitioner's error type: every error names the file and, where one is involved, the page.

use std::path::PathBuf;

/// An error reading or interpreting a database file.
///
/// Displays as one line: `FILE: page N: what is wrong` (or `FILE: what is wrong` when no single
/// page is at fault), so the binary can print it after `error:` unchanged.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused an operation on the file.
    #[error("{}: {op}: {source}", path.display())]
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
    #[error("{}: page {page}: {what}", path.display())]
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
    #[error("{}: {what}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, in a few words.
        what: String,
    },
    /// The database changed while it was read without a lock that stops writers (see
    /// [`crate::snapshot::Protocol::VerifyRetry`]), or its log no longer matches the index
    /// it was locked by: planning and scanning again reads a consistent state.
    #[error("{}: {what}", path.display())]
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
