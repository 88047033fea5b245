//! # Single-table scan queries
//!
//! The engine side of `corescan query`: a planned query ([`ir::QueryPlan`], built by the SQL
//! front end in `bench`), its evaluation with SQLite's semantics, and its execution the
//! thread-per-core way.
//!
//! - [`ir`]: the resolved query: slots of decoded columns, expressions with their affinity and
//!   collation fixed, aggregates, `ORDER BY`, `LIMIT`;
//! - [`record`]: decodes only the needed columns of a table-leaf record;
//! - [`eval`], [`functions`], [`like`], [`dates`]: expressions, scalar functions, `LIKE`/`GLOB`
//!   and the date functions, every comparison and conversion through [`crate::datatype3`] and
//!   [`crate::value`];
//! - [`aggregate`] and [`exact_sum`]: aggregate states with `update`, `merge` and `finish`,
//!   real sums accumulated exactly and rounded once;
//! - [`kernel`]: one executor's work ([`kernel::QueryKernel`]: filter, projection, partial
//!   groups or top-k over its range), a [`crate::ScanKernel`] run by [`crate::run_scan`], and
//!   the coordinator's merge ([`kernel::merge`]); [`run_query`] runs both;
//! - [`key_row`]: which row of a group shows its key values (the first, or the one a
//!   `min()`/`max()` chose);
//! - [`stream`]: a plain projection without `ORDER BY` streamed in rowid order through bounded
//!   channels while the scan runs ([`run_query_streaming`]).

pub mod aggregate;
pub mod dates;
pub mod eval;
pub mod exact_sum;
pub mod functions;
pub mod ir;
pub mod kernel;
pub mod key_row;
pub mod like;
pub mod record;
pub mod stream;

pub use ir::QueryPlan;
pub use kernel::{merge, run_query, Partial, QueryError, QueryKernel, QueryOutput};
pub use stream::{run_query_rendered, run_query_streaming, streams, RowRender, StreamedQuery};
