//! [`QueryError`], why a query failed, and [`QueryOutput`], a collected query's answer.
//!
//! Layering: at the bottom of the query modules, beside [`super::ir`]; the kernel, the runner
//! and the streams return it.

use crate::error::Error;
use crate::report::RunReport;
use crate::value::Value;

/// A query's answer and what the scan measured.
#[derive(Debug)]
pub struct QueryOutput {
    /// The output column names.
    pub names: Vec<String>,
    /// The result rows.
    pub rows: Vec<Vec<Value>>,
    /// A grouped query's groups: how many, their tables' memory, what spilled (`None` for
    /// other queries).
    pub groups: Option<super::group_spill::GroupStats>,
    /// The scan's report.
    pub report: RunReport,
}

/// Why a query failed.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The scan failed: I/O, a malformed page, or a row whose evaluation failed
    /// ([`Error::Eval`], naming the file, page and rowid).
    #[error(transparent)]
    Scan(#[from] Error),
    /// An evaluation that belongs to no row of the file failed: finishing the result
    /// (`integer overflow` in `sum`, a group's output or `HAVING`) or a constant `WHERE`
    /// term tested before the scan. SQLite's message alone: there is no page or rowid to name
    /// (a failing row is [`Error::Eval`] inside [`QueryError::Scan`]).
    #[error("{}", partitioner::printable(.0))]
    Eval(String),
    /// Writing a result row failed (the output was closed, the disk is full).
    #[error("writing the result: {0}")]
    Output(std::io::Error),
    /// A full sort or a grouped query could not write or read its runs in the scratch
    /// directory (full, not writable).
    #[error(transparent)]
    Spill(#[from] super::sort::SpillError),
    /// The caller gave the query up (an embedder dropped its [`crate::Scan`]) before it ended.
    #[error("the scan was abandoned by its caller")]
    Abandoned,
}
