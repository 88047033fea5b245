//! [`SqlError`]: why `corescan query` cannot run a query. Layering: the bottom of `sql`; it
//! imports nothing from the crate.
//!
//! Its messages quote names from the file's schema (and the query's text): they are shown
//! through [`partitioner::printable`], so control characters in a hostile name read as escapes.

use partitioner::printable;

/// A query corescan cannot run, with the reason.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The SQL does not parse.
    #[error("SQL syntax: {}", printable(.0))]
    Syntax(String),
    /// A construct outside single-table scans.
    #[error("not supported by corescan query: {}", printable(.0))]
    Unsupported(String),
    /// A name or usage error (unknown column or function, wrong argument count, ...).
    #[error("{}", printable(.0))]
    Invalid(String),
    /// The table could not be opened or planned.
    #[error(transparent)]
    Plan(#[from] partitioner::Error),
    /// A subquery's scan failed (I/O, a malformed page, a change of the database).
    #[error(transparent)]
    Scan(Box<engine::Error>),
}

impl SqlError {
    /// Whether the file has no table of the name the query reads (a file of a table spread
    /// over several files may be skipped for it).
    pub fn is_no_such_table(&self) -> bool {
        matches!(self, SqlError::Plan(partitioner::Error::NoSuchTable { .. }))
    }

    /// Whether the error says the database changed while it was read (planning again may
    /// succeed: see `engine::consistent`).
    pub fn is_change(&self) -> bool {
        match self {
            SqlError::Plan(p) => p.is_change(),
            SqlError::Scan(e) => matches!(&**e, engine::Error::Plan(p) if p.is_change()),
            _ => false,
        }
    }
}

/// Shorthand for an unsupported construct.
pub(crate) fn unsupported<T>(what: impl Into<String>) -> Result<T, SqlError> {
    Err(SqlError::Unsupported(what.into()))
}

/// Shorthand for an invalid query.
pub(crate) fn invalid<T>(what: impl Into<String>) -> Result<T, SqlError> {
    Err(SqlError::Invalid(what.into()))
}
