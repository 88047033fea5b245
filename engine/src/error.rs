//! The engine's error type: every failure names the CPU of the executor that hit it and, where
//! one is involved, the file and page. A row whose evaluation fails ([`Error::Eval`]) is kept
//! apart from a damaged page ([`Error::Corrupt`]): the file is sound, the query fails on that
//! row's values, as SQLite's would, so a caller can tell the two apart (and needs no retry or
//! repair for the first).
//!
//! Layering: at the bottom of the crate with [`crate::settings`]; every other module may use it.
//! An I/O failure keeps the operating system's [`std::io::Error`] (its kind and errno) beside
//! the operation, file, CPU and offset, as glommio's `EnhancedIoError` does, so callers decide
//! by [`std::io::Error::kind`] or [`std::io::Error::raw_os_error`], never by the message text.

use std::io;
use std::path::PathBuf;

// Text from the file (names, values in SQLite's messages) and paths are shown through the
// partitioner's one escape, so a hostile file cannot put raw control characters in a message.
use partitioner::error::{printable, shown};

/// An error that stopped a scan.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Planning failed: the file, its schema or its b-tree is unusable.
    #[error(transparent)]
    Plan(#[from] partitioner::Error),
    /// A page read during the scan is malformed.
    #[error("CPU {cpu}: {}: page {page}: {}", shown(path), printable(what))]
    Corrupt {
        /// The executor's CPU.
        cpu: usize,
        /// The database file.
        path: PathBuf,
        /// The page at fault.
        page: u32,
        /// What is wrong with it.
        what: String,
    },
    /// Evaluating a row failed with SQLite's error for it (`integer overflow`, a function's
    /// error): the file is sound, the query fails on this row's values. Displayed without the
    /// CPU, which does not change the answer: the file, page, rowid and SQLite's message.
    #[error("{}: page {page}: rowid {rowid}: {}", shown(path), printable(message))]
    Eval {
        /// The executor's CPU.
        cpu: usize,
        /// The database file.
        path: PathBuf,
        /// The leaf page holding the row.
        page: u32,
        /// The row's rowid.
        rowid: i64,
        /// SQLite's error message, as its `sqlite3_errmsg` gives it.
        message: String,
    },
    /// A read (or the open or ring set-up before it) failed.
    #[error(
        "CPU {cpu}: {}: {}{}: {source}",
        shown(path),
        printable(op),
        offset.map(|o| format!(" at byte offset {o}")).unwrap_or_default()
    )]
    Io {
        /// The executor's CPU.
        cpu: usize,
        /// The file the operation was on (the database, or its write-ahead log).
        path: PathBuf,
        /// The operation, with its page numbers (`read pages 10..=41`).
        op: String,
        /// The byte offset in `path` the operation started at, when it is a read.
        offset: Option<u64>,
        /// The operating system's error, with its kind and errno.
        source: io::Error,
    },
    /// An executor thread could not be started.
    #[error("CPU {cpu}: cannot start an executor: {}", printable(cause))]
    Start {
        /// The CPU it was meant for.
        cpu: usize,
        /// Why (often RLIMIT_MEMLOCK too low for the I/O memory, or a CPU outside the
        /// process's affinity mask).
        cause: String,
    },
    /// An executor panicked (a bug in corescan; the scan is abandoned).
    #[error("CPU {cpu}: executor panicked: {}", printable(message))]
    Panicked {
        /// The executor's CPU.
        cpu: usize,
        /// The panic message.
        message: String,
    },
    /// The executor stopped because another one failed first.
    #[error("CPU {cpu}: scan cancelled after another executor failed")]
    Cancelled {
        /// The executor's CPU.
        cpu: usize,
    },
    /// The executors could not be placed (hwloc, a topology file, or a CPU list).
    #[error(transparent)]
    Placement(#[from] partitioner::topology::TopologyError),
    /// The scan settings are unusable.
    #[error("invalid scan settings: {}", printable(.0))]
    Config(String),
}

/// Shorthand for results whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The operating system's error behind an [`Error::Io`], to decide by kind or errno.
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
