//! # bench: test data, the SQLite oracle and the experiments behind the `corescan` binary
//!
//! `bench` is the library half of the `corescan` command line. It owns everything that talks to
//! SQLite itself (the scan engine never does):
//!
//! - [`gen`] writes TPC-H databases in the common TPC-H SQLite layout from the `tpchgen` crate
//!   ([`gen::generate`] behind `corescan gen`): upper-case names, `DECIMAL(15,2)` money columns
//!   stored as an integer when the value has no fraction and as a REAL otherwise, dates as
//!   `'YYYY-MM-DD'` text;
//! - [`oracle`] answers TPC-H Q6 exactly through SQLite ([`oracle::q6`]), the reference every
//!   engine answer is compared with;
//! - [`decimal_params`] holds the exact parameter types and formatting that both share: the
//!   [`decimal_params::Date`] of Q6, decimals parsed into hundredths without floating point, and
//!   [`decimal_params::format_revenue`], which prints a count of 1/10000 units;
//! - [`layouts`] builds small databases in the shapes real files take (page sizes, interleaved
//!   tables, freelist pages, overflow chains, auto-vacuum, reserved bytes, renamed and reordered
//!   columns, NULLs, records shorter than the schema) for the engine's correctness tests.
//!
//! Every fallible function returns a small typed error ([`gen::GenError`],
//! [`oracle::OracleError`], [`decimal_params::ParamError`], [`layouts::LayoutError`]) that
//! displays as one line naming the file at fault; only the binary turns them into `anyhow`
//! messages and exit codes.
#![deny(missing_docs)]

pub mod decimal_params;
pub mod gen;
pub mod layouts;
pub mod oracle;
