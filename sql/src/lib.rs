//! # corescan-sql: SQL text to a query plan
//!
//! The SQL front end of `corescan query`: parses one `SELECT` with `sqlparser` (SQLite
//! dialect), refuses what a single-table scan cannot answer with one message naming the
//! construct, and plans the rest against the table's schema into the engine's
//! [`engine::query::QueryPlan`] ([`plan`]). Uncorrelated subqueries, over any table of the
//! file, run while the statement is planned, each as its own scan through a
//! [`SubqueryRunner`] ([`plan_query_running`]; [`plan_query`] runs them with the default
//! placement), and the statement is planned over their results. A subquery in `FROM` that
//! SQLite does not flatten runs first as its own scan, and the query around it over its
//! rows ([`answer_materialized`]).
//!
//! Names resolve as SQLite resolves them: columns case-insensitively, `rowid`, `_rowid_` and
//! `oid` for the rowid unless a column has that name, an `INTEGER PRIMARY KEY` column as the
//! rowid, a double-quoted name that is no column as a string literal, `ORDER BY` and `GROUP BY`
//! terms by output alias or position (`position.rs`: an `ORDER BY` name is an alias before it is
//! a column, any other name a column first). Output column names are SQLite's: the alias, a
//! column's declared name, or the expression's text as written.
#![deny(missing_docs)]

mod aggregate;
mod covering;
mod dialect;
mod error;
mod expr;
mod flatten;
mod index_order;
mod init_constants;
mod materialize;
mod order;
mod plan;
mod position;
mod source;
mod sqlite_plan;
mod subquery;
mod views;

pub use error::SqlError;
pub use materialize::{answer_materialized, is_materializable, Materialized};

pub use plan::{
    plan_files_unordered_with, plan_query, plan_query_files, plan_query_running, plan_query_with,
    plan_table, plan_unordered_with, scan_spec, union_table, IndexPlan, PlannedQuery,
};
pub use subquery::{DefaultScans, FileScans, SubqueryRunner};
pub use views::expand_views;
