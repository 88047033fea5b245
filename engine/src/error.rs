//! The engine's error type: every failure names the CPU of the executor that hit it and, where
//! one is involved, the file and page.

use std::path::PathBuf;

/// An error that stopped a scan.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Planning failed: the file, its schema or its b-tree is unusable.
    #[error(transparent)]
    Plan(#[from] partitioner::Error),
    /// A page read during the scan is malformed.
    #[error("CPU {cpu}: {}: page {page}: {what}", path.display())]
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
    /// A read failed.
    #[error("CPU {cpu}: {}: {op}: {cause}", path.display())]
    Io {
        /// The executor's CPU.
        cpu: usize,
        /// The database file.
        path: PathBuf,
        /// The operation, with its page numbers (`read pages 10..=41`).
        op: String,
        /// The operating system's or glommio's message.
        cause: String,
    },
    /// An executor thread could not be started.
    #[error("CPU {cpu}: cannot start an executor: {cause}")]
    Start {
        /// The CPU it was meant for.
        cpu: usize,
        /// Why (often RLIMIT_MEMLOCK too low for the I/O memory, or a CPU outside the
        /// process's affinity mask).
        cause: String,
    },
    /// An executor panicked (a bug in corescan; the scan is abandoned).
    #[error("CPU {cpu}: executor panicked: {message}")]
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
    /// The scan settings are unusable.
    #[error("invalid scan settings: {0}")]
    Config(String),
}

/// Shorthand for results whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
