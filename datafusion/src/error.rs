//! [`Error`]: why a corescan table could not be opened or scanned under DataFusion, and how it
//! travels through DataFusion ([`Error::into_datafusion`], [`find`]).
//!
//! DataFusion carries a provider's errors as `DataFusionError::External`; on the way up they
//! may be wrapped (a `RepartitionExec` shares one error among its outputs, a context adds a
//! line). [`find`] digs corescan's error out again so that a command line prints corescan's own
//! one line (file, table, column, rowid) rather than DataFusion's wrapping.
//!
//! Layering: the bottom of the crate; imports nothing from it.

use std::path::PathBuf;

use datafusion::error::DataFusionError;
use engine::value::StorageClass;

/// An error of a corescan table under DataFusion.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file, its schema or the table could not be opened.
    #[error(transparent)]
    Open(#[from] partitioner::Error),
    /// The scan could not be started, or failed (I/O, a malformed page), naming the CPU and
    /// page.
    #[error(transparent)]
    Scan(#[from] engine::QueryError),
    /// The executors could not be placed, or the scan settings are unusable.
    #[error(transparent)]
    Engine(#[from] engine::Error),
    /// A stored value does not fit its column's Arrow type.
    #[error(transparent)]
    Conversion(Box<ConversionError>),
    /// A column corescan cannot read yet.
    #[error("{}: table {table}, column {column}: {reason}", path.display())]
    Unsupported {
        /// The database file.
        path: PathBuf,
        /// The table, as the schema spells it.
        table: String,
        /// The column, as the schema spells it.
        column: String,
        /// What is missing.
        reason: String,
    },
    /// The engine refused a filter the pushdown wrote (a defect of the pushdown: the filter
    /// should have been left to DataFusion).
    #[error(
        "{}: table {table}: the scan refused the pushed filter ({source}) in: {sql}",
        path.display()
    )]
    Filter {
        /// The database file.
        path: PathBuf,
        /// The table.
        table: String,
        /// The scan's SQL.
        sql: String,
        /// The planner's reason.
        source: Box<corescan_sql::SqlError>,
    },
    /// The DataFusion session refused the tables (no default catalog).
    #[error("DataFusion session: {0}")]
    Session(String),
    /// The scan started with another number of executors than the plan was made for (the
    /// machine's CPUs or the topology file changed in between).
    #[error(
        "{}: table {table}: the scan has {got} executors, the plan was made for {planned}; \
         run the query again",
        path.display()
    )]
    Partitions {
        /// The database file.
        path: PathBuf,
        /// The table.
        table: String,
        /// Executors the plan was made for.
        planned: usize,
        /// Executors the scan has.
        got: usize,
    },
}

/// A stored value that does not fit its column's Arrow type, with where it is.
#[derive(Debug, thiserror::Error)]
#[error(
    "{}: table {table}, column {column}, rowid {}: {} value {value} does not fit {expected}: {reason}",
    path.display(),
    rowid.map_or_else(|| "unknown".to_string(), |r| r.to_string()),
    class.name()
)]
pub struct ConversionError {
    /// The database file.
    pub path: PathBuf,
    /// The table, as the schema spells it.
    pub table: String,
    /// The column, as the schema spells it.
    pub column: String,
    /// The row's rowid (unknown only in a table whose columns shadow all three of the rowid's
    /// names and that has no `INTEGER PRIMARY KEY`).
    pub rowid: Option<i64>,
    /// The value's storage class.
    pub class: StorageClass,
    /// The value, shortened for the message.
    pub value: String,
    /// The column's Arrow type.
    pub expected: String,
    /// Why it does not fit.
    pub reason: String,
}

impl Error {
    /// The error as DataFusion carries it.
    pub fn into_datafusion(self) -> DataFusionError {
        DataFusionError::External(Box::new(self))
    }
}

/// Corescan's error inside a DataFusion error, however DataFusion wrapped it (context lines,
/// an error shared between partitions, Arrow's external errors: each wrapper is the next
/// error's `source`); `None` for DataFusion's own errors (a SQL syntax error, an unknown
/// column).
pub fn find(e: &DataFusionError) -> Option<&Error> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = next {
        if let Some(found) = cause.downcast_ref::<Error>() {
            return Some(found);
        }
        next = cause.source();
    }
    None
}
