//! TPC-H Q6, the engine's first query, as a user of the generic scan:
//!
//! - [`params`]: the substitution parameters ([`Q6Params`]), the compiled filter
//!   ([`Q6Filter`]) and the exact partial aggregate ([`PartialAggregate`]);
//! - [`decoder`]: the record decoder ([`LeafDecoder`]) that reads the four Q6 columns out of
//!   table-leaf cells and applies the filter, with its fast path;
//! - [`run`]: [`Q6Kernel`], the decoder as a [`crate::scan::ScanKernel`], and [`run_q6`], a
//!   thin user of [`crate::coordinator::run_scan`];
//! - [`report`]: [`Q6Report`], the answer (revenue, rows matched) beside the generic
//!   [`crate::report::RunReport`].
//!
//! Layering: `params` <- `decoder` <- `run`, and `report` <- `run`; the module sits above the
//! coordinator and nothing in the generic engine imports it (the crate root does not re-export
//! it either: users write `engine::q6::...`).

pub mod decoder;
pub mod params;
pub mod report;
pub mod run;

pub use decoder::{LeafDecoder, MissingValue, Q6ColumnTypes, Q6Columns};
pub use params::*;
pub use report::Q6Report;
pub use run::{q6_column_types, q6_columns, run_q6, run_q6_files, Q6Kernel, Q6_COLUMNS};
