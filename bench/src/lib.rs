//! # bench: test data, the SQLite oracle and the experiments behind the `corescan` binary
//!
//! `bench` is what the `corescan` command line (the `corescan` package) measures and checks
//! with. It owns everything that talks to SQLite itself (the scan engine never does):
//!
//! - [`gen`] writes TPC-H databases in the common TPC-H SQLite layout from the `tpchgen` crate
//!   ([`gen::generate`] behind `corescan gen`): upper-case names, `DECIMAL(15,2)` money columns
//!   stored as an integer when the value has no fraction and as a REAL otherwise, dates as
//!   `'YYYY-MM-DD'` text;
//! - [`text`] renders the TPC-H Q6 text once, for every engine that runs it (the oracle,
//!   SQLite, the `sqlite3` shell, DuckDB, Turso);
//! - [`oracle`] answers TPC-H Q6 exactly through SQLite ([`oracle::q6`]), the reference every
//!   engine answer is compared with;
//! - [`experiments`] runs the measurements behind `corescan bench` (core-count scaling,
//!   readahead sweeps, the seed report, the comparison with SQLite, DuckDB and Turso) and
//!   writes their CSV, JSON, markdown and SVG results;
//! - [`layouts`] builds small databases in the shapes real files take (page sizes, interleaved
//!   tables, freelist pages, overflow chains, auto-vacuum, reserved bytes, renamed and reordered
//!   columns, NULLs, records shorter than the schema) for the engine's correctness tests.
//!
//! Every fallible function returns a small typed error ([`gen::GenError`],
//! [`oracle::OracleError`], [`layouts::LayoutError`]) that
//! displays as one line naming the file at fault; only the binary turns them into `anyhow`
//! messages and exit codes.
#![deny(missing_docs)]

pub mod experiments;
pub mod gen;
pub mod layouts;
pub mod oracle;
pub mod shards;
pub mod text;
