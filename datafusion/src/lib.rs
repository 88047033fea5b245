//! # corescan-datafusion: corescan's scans under Apache DataFusion
//!
//! SQL that `corescan query` does not answer (joins, subqueries, CTEs, window functions over
//! several tables: all of TPC-H) runs on DataFusion, with corescan's thread-per-core scans as
//! its table sources:
//!
//! - [`SqliteTable`] is one table of a SQLite file as a DataFusion `TableProvider`: an Arrow
//!   schema from the declared column types ([`types`]), and a scan that reads nothing until it
//!   is executed;
//! - [`CorescanExec`] is that scan as an `ExecutionPlan`: one partition per pinned executor
//!   ([`engine::scan_partitions`]), each a stream of record batches converted strictly from
//!   SQLite's values ([`convert`]: a value that does not fit its column's type is an
//!   [`ConversionError`] naming the file, table, column, rowid and storage class, never a
//!   NULL or a guess);
//! - [`SqliteSchema`] is every table of a file, matched case-insensitively as SQLite matches
//!   names, and [`register`] makes it a session's default schema;
//! - [`arrow_value`] turns an Arrow value back into an [`engine::value::Value`] for printing
//!   (decimals exactly, as text; dates as `YYYY-MM-DD`).
//!
//! ```no_run
//! # fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use engine::{Placement, ScanOptions};
//!
//! let ctx = corescan_datafusion::context(); // SQLite's NULL order
//! corescan_datafusion::register(&ctx, "tpch.db", Placement::default(), ScanOptions::default())?;
//! let batches = corescan_datafusion::runtime(2)?.block_on(async {
//!     ctx.sql("SELECT l_returnflag, sum(l_quantity) FROM lineitem GROUP BY l_returnflag")
//!         .await?
//!         .collect()
//!         .await
//! })?;
//! for row in batches.iter().flat_map(corescan_datafusion::batch_rows) {
//!     println!("{row:?}");
//! }
//! # Ok(()) }
//! ```
//!
//! The query must run inside a tokio runtime (DataFusion spawns its operators' tasks there;
//! [`runtime`] makes one); the corescan executors are threads of their own, pinned to their
//! CPUs, and hand their rows over through channels that any runtime can await. The crate
//! re-exports the [`datafusion`] it is built with.
//!
//! What is pushed down, and what is not yet: see [`table`].
//!
//! ## Layout, bottom to top
//!
//! [`error`], [`runtime`], [`session`], [`types`] and [`temporal`] (dates and timestamps as text and as Arrow
//! numbers);
//! [`tpch`] (the 22 TPC-H queries in both dialects, for tests and benchmarks);
//! [`convert`] (rows into record batches) and [`output`] (Arrow values back into SQLite
//! values); [`exec`] ([`CorescanExec`]); [`table`] ([`SqliteTable`]); [`catalog`]
//! ([`SqliteSchema`], [`register`]).
#![deny(missing_docs)]

pub mod catalog;
pub mod convert;
pub mod error;
pub mod exec;
pub mod output;
pub mod pushdown;
pub mod runtime;
pub mod session;
pub mod table;
pub mod temporal;
pub mod tpch;
pub mod types;

pub use datafusion;

pub use catalog::{register, register_files, register_with, SqliteSchema};
pub use error::{find, ConversionError, Error};
pub use exec::CorescanExec;
pub use output::{arrow_value, batch_rows};
pub use runtime::runtime;
pub use session::context;
pub use table::{SqliteTable, TableOptions, TypeOverride, FILE_COLUMN};
pub use types::ColumnType;
