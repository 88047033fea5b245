//! The crate's typed errors: each names the worker, the file or the path at fault.
//!
//! Layering: the bottom of the crate; every other module returns these.

use std::path::PathBuf;

use datafusion::error::DataFusionError;

/// What went wrong serving or planning a distributed query.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The data directory cannot be used.
    #[error("data directory {}: {what}", path.display())]
    DataDir {
        /// The directory as given.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A path a plan (or a caller) named is not a file under the worker's data directory.
    #[error("{path:?}: {what} (a worker reads only the SQLite files under its data directory)")]
    Refused {
        /// The path as it was sent.
        path: String,
        /// Why it was refused.
        what: String,
    },
    /// A file under the data directory could not be read.
    #[error(transparent)]
    File(#[from] partitioner::Error),
    /// A table could not be described or planned.
    #[error(transparent)]
    Table(#[from] corescan_datafusion::Error),
    /// A worker could not be reached, or answered something else than a catalog.
    #[error("worker {url}: {what}")]
    Worker {
        /// The worker's address.
        url: String,
        /// What happened.
        what: String,
    },
    /// The workers' files do not make one set of tables.
    #[error("{0}")]
    Cluster(String),
    /// Serving failed.
    #[error("serving on {addr}: {what}")]
    Serve {
        /// The address.
        addr: String,
        /// What happened.
        what: String,
    },
}

impl Error {
    /// As a DataFusion error (for DataFusion's traits), keeping this error inside.
    pub fn into_datafusion(self) -> DataFusionError {
        DataFusionError::External(Box::new(self))
    }
}

/// An error and its sources, joined by `: ` (tonic's transport errors say little alone).
pub fn source_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        next = s.source();
    }
    text
}
