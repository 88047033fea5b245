//! [`session`]: DataFusion sessions that order as SQLite orders.
//!
//! DataFusion follows PostgreSQL where the SQL standard leaves a choice; SQLite users expect
//! SQLite's. The one such choice a result shows is where NULLs sort: SQLite treats NULL as
//! smaller than every value (first for `ORDER BY x`, last for `ORDER BY x DESC`), DataFusion's
//! default the reverse. [`config`] sets `datafusion.sql_parser.default_null_ordering` to
//! `nulls_min`, which is SQLite's rule, for every `ORDER BY` the SQL planner sees (queries,
//! window definitions, aggregates' `ORDER BY`); an explicit `NULLS FIRST`/`NULLS LAST` still
//! wins. Every session corescan builds (the `sql` command, its benchmarks, the distributed
//! coordinator) starts from [`config`].
//!
//! Layering: imports nothing from the crate.

use datafusion::execution::config::SessionConfig;
use datafusion::prelude::SessionContext;

/// DataFusion's name of the option [`config`] sets.
pub const NULL_ORDERING: &str = "datafusion.sql_parser.default_null_ordering";

/// DataFusion's default configuration with SQLite's NULL order (NULLs smallest).
pub fn config() -> SessionConfig {
    let mut config = SessionConfig::new();
    config.options_mut().sql_parser.default_null_ordering = "nulls_min".to_string();
    config
}

/// A session with [`config`] and DataFusion's default features.
pub fn context() -> SessionContext {
    SessionContext::new_with_config(config())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option is set under the name DataFusion documents, and to a value it accepts.
    #[test]
    fn null_ordering_is_sqlites() {
        let ctx = context();
        let state = ctx.state();
        let options = state.config().options();
        let entry = options
            .entries()
            .into_iter()
            .find(|e| e.key == NULL_ORDERING)
            .expect("DataFusion has the option");
        assert_eq!(entry.value.as_deref(), Some("nulls_min"));
    }

    /// NULL first ascending, last descending, as SQLite; explicit NULLS LAST still wins.
    #[test]
    fn nulls_sort_as_in_sqlite() {
        let rt = crate::runtime(1).unwrap();
        let rows = |sql: &str| {
            rt.block_on(async {
                let batches = context().sql(sql).await?.collect().await?;
                Ok::<_, datafusion::error::DataFusionError>(
                    batches
                        .iter()
                        .flat_map(crate::batch_rows)
                        .map(|r| format!("{:?}", r[0]))
                        .collect::<Vec<_>>(),
                )
            })
            .unwrap()
        };
        let values = "(VALUES (2), (NULL), (1)) AS t(x)";
        assert_eq!(
            rows(&format!("SELECT x FROM {values} ORDER BY x")),
            ["Null", "Integer(1)", "Integer(2)"]
        );
        assert_eq!(
            rows(&format!("SELECT x FROM {values} ORDER BY x DESC")),
            ["Integer(2)", "Integer(1)", "Null"]
        );
        assert_eq!(
            rows(&format!("SELECT x FROM {values} ORDER BY x NULLS LAST")),
            ["Integer(1)", "Integer(2)", "Null"]
        );
        // Window ORDER BY goes through the same planner rule.
        assert_eq!(
            rows(&format!(
                "SELECT row_number() OVER (ORDER BY x) FROM {values} ORDER BY x DESC"
            )),
            ["Integer(3)", "Integer(2)", "Integer(1)"]
        );
    }
}
