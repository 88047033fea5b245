//! [`SqlError`]: why `corescan query` cannot run a query. Layering: the bottom of `sql`; it
//! imports nothing from the crate.

/// A query corescan cannot run, with the reason.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The SQL does not parse.
    #[error("SQL syntax: {0}")]
    Syntax(String),
    /// A construct outside single-table scans.
    #[error("not supported by corescan query: {0}")]
    Unsupported(String),
    /// A name or usage error (unknown column or function, wrong argument count, ...).
    #[error("{0}")]
    Invalid(String),
    /// The table could not be opened or planned.
    #[error(transparent)]
    Plan(#[from] partitioner::Error),
}

/// Shorthand for an unsupported construct.
pub(crate) fn unsupported<T>(what: impl Into<String>) -> Result<T, SqlError> {
    Err(SqlError::Unsupported(what.into()))
}

/// Shorthand for an invalid query.
pub(crate) fn invalid<T>(what: impl Into<String>) -> Result<T, SqlError> {
    Err(SqlError::Invalid(what.into()))
}
