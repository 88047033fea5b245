//! # Single-table scan queries
//!
//! The engine side of `corescan query`: a planned query ([`ir::QueryPlan`], built by the SQL
//! front end in `bench`), its evaluation with SQLite's semantics, and its execution the
//! thread-per-core way.
//!
//! - [`ir`]: the resolved query: slots of decoded columns, expressions with their affinity and
//!   collation fixed, aggregates, `ORDER BY`, `LIMIT`;
//! - the needed columns of each record are decoded by the shared page-batch decoder
//!   ([`crate::decode`]);
//! - [`eval`], [`functions`], [`strings`], [`math`], [`like`], [`dates`]: expressions, scalar
//!   functions (the newer text and blob ones, the math ones), `LIKE`/`GLOB` and the date
//!   functions, every comparison and conversion through [`crate::datatype3`] and
//!   [`crate::value`];
//! - [`json`]: SQLite's JSON functions (`json_extract`, `->`, `json_set`, the `jsonb_` forms,
//!   `json_group_array`...) ported from its `json.c`, JSONB bytes and messages included;
//! - [`printf`]: SQLite's `printf()`/`format()` SQL function, with SQLite's own
//!   floating-point digits;
//! - [`fold`]: constant folding at planning time (constant subexpressions evaluated once,
//!   comparison literals converted by their affinity where that is exact);
//! - [`aggregate`] and [`exact_sum`]: aggregate states with `update`, `merge` and `finish`,
//!   real sums accumulated exactly and rounded once;
//! - [`batch`]: a grouped query's infallible expressions evaluated over a page's rows at once;
//! - [`numeric`]: its aggregate arguments as typed runs (a double and an integer flag per
//!   row) in tight loops, for pages whose values are all plain numbers;
//! - [`program`]: its keys and aggregate arguments as shared nodes (each common subexpression
//!   once per row), and which aggregates share a state;
//! - [`over`]: window functions (`OVER`), a stage on the coordinator over the scan's rows;
//! - [`window`]: the text range the decoder itself applies for such a query's filter;
//! - [`groups`]: the group table, looked up by borrowed key values;
//!   its hash index is `group_index` (entries a page's rows ask for ahead);
//! - [`group_merge`]: the executors' groups merged and finished in slices of the key space,
//!   one thread per executor;
//! - [`group_spill`]: groups beyond the memory budget, written to the scratch directory in
//!   runs sorted by key and read back by the merge;
//! - `run_heap`: the heap of run numbers the k-way merges of sorted runs keep (groups', sorts');
//! - [`page_groups`]: a page's rows' groups, looked up once per distinct packed key;
//! - [`kernel`]: one executor's work ([`kernel::QueryKernel`]: filter, projection, partial
//!   groups or top-k over its range), a [`crate::ScanKernel`] run by [`crate::run_scan`];
//! - [`run`]: [`run_query`] runs the kernels and the coordinator's merge ([`merge::merge`]);
//! - [`error`]: [`QueryError`], why a query failed, and [`QueryOutput`], a collected answer;
//! - [`marks`]: which failing rows a plain query keeps as marked rows, and which a `LIMIT`
//!   sorter drops before their output columns (SQLite fails only on what it evaluates);
//! - [`key_row`]: which row of a group shows its key values (the first, or the one a
//!   `min()`/`max()` chose);
//! - [`row_stream`]: an executor's side of a streamed projection (chunks of rows through a
//!   bounded channel);
//! - [`sink`]: an embedder's batches ([`sink::BatchSink`]) built on the executors from a
//!   streamed projection's rows, straight from the decoded cells where it can;
//! - [`stream`]: a plain projection without `ORDER BY` streamed in rowid order through bounded
//!   channels while the scan runs ([`run_query_streaming`]).

pub mod aggregate;
pub mod batch;
pub mod dates;
pub mod distinct_count;
pub mod error;
pub mod eval;
pub mod exact_sum;
pub mod files;
pub mod fold;
pub mod functions;
mod group_index;
pub mod group_merge;
pub mod group_spill;
pub mod groups;
pub mod in_set;
pub mod ir;
pub mod json;
pub mod kernel;
pub mod key_row;
pub mod like;
pub mod marks;
pub mod math;
pub mod merge;
pub mod numeric;
pub mod over;
pub mod page_groups;
pub mod printf;
pub mod program;
pub mod row_stream;
pub mod run;
mod run_heap;
pub mod sink;
pub mod sort;
pub mod stream;
pub mod strings;
pub mod window;

pub use error::{QueryError, QueryOutput};
pub use files::{bind_to_file, run_query_files, FilesOutput, MissingTable};
pub use ir::QueryPlan;
pub use kernel::{merge, Partial, QueryKernel};
pub use run::{run_query, run_query_until, test_constant_terms};
pub use sink::{BatchSink, SinkRows};
pub use stream::{
    run_query_files_streaming, run_query_rendered, run_query_streaming, run_query_streaming_until,
    streams, FileRow, RowRender, StreamedQuery,
};
