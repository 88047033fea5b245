//! The SQL text this crate sends to SQLite and its peers, written once: the TPC-H Q6 query
//! ([`q6_sql`]) and identifier quoting ([`quote_identifier`]).
//!
//! Every user of Q6's text runs what [`q6_sql`] renders: the oracle ([`crate::oracle`]),
//! SQLite in-process in `bench compare`, the `sqlite3` shell, DuckDB and Turso
//! ([`crate::experiments::peers`]), and scripts through `corescan q6 --print-sql`. The query is
//! TPC-H's, with the substitution parameters written as literals:
//!
//! ```sql
//! SELECT sum(l_extendedprice * l_discount) AS revenue FROM "lineitem"
//! WHERE l_shipdate >= '1994-01-01' AND l_shipdate < '1995-01-01'
//!   AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24
//! ```
//!
//! - the ship-date window as `'YYYY-MM-DD'` text, its end computed on the calendar
//!   ([`engine::q6::Date::plus_one_year`]);
//! - the discount bounds as computed decimals (`0.05`, `0.07`), not `0.06 - 0.01` and
//!   `0.06 + 0.01`: in binary floating point `0.06 + 0.01` is `0.06999999999999999`, which
//!   would drop every row with discount 0.07; SQLite reads `0.07` as the double nearest to it,
//!   the value a file stores for 0.07;
//! - the quantity as TPC-H writes it: an integer literal when it has no fraction (`24`), else a
//!   decimal with two places (`24.50`). Literals have no affinity, so against a column with TEXT
//!   affinity SQLite compares them as text (`'24'`), exactly as it does for this query typed
//!   into the `sqlite3` shell.
//!
//! Nothing here imports another module of this crate.

use engine::q6::format_hundredths;
use engine::q6::Q6Params;

/// What a Q6 query selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Q6Select {
    /// TPC-H's `sum(l_extendedprice * l_discount) AS revenue` (a float in SQLite).
    Revenue,
    /// `count(*)` and the exact revenue in 1/10000 units, summed in integers:
    /// `coalesce(sum(CAST(round(l_extendedprice * 100) AS INTEGER) * CAST(round(l_discount *
    /// 100) AS INTEGER)), 0)`. Prices and discounts have two decimals, so this is exact.
    CountAndExactRevenue,
}

/// TPC-H Q6 over `table` (quoted) with `params` written as literals (see the module docs).
pub fn q6_sql(table: &str, params: &Q6Params, select: Q6Select) -> String {
    let columns = match select {
        Q6Select::Revenue => "sum(l_extendedprice * l_discount) AS revenue",
        Q6Select::CountAndExactRevenue => {
            "count(*), coalesce(sum(CAST(round(l_extendedprice * 100) AS INTEGER) \
             * CAST(round(l_discount * 100) AS INTEGER)), 0)"
        }
    };
    let (lo, hi) = params.discount_bounds();
    format!(
        "SELECT {columns} FROM {} \
         WHERE l_shipdate >= '{}' AND l_shipdate < '{}' \
         AND l_discount BETWEEN {} AND {} AND l_quantity < {}",
        quote_identifier(table),
        params.date,
        params.date_end(),
        format_hundredths(lo),
        format_hundredths(hi),
        quantity_literal(params.quantity_hundredths)
    )
}

/// `24` for 24.00, `24.50` for 24.5: TPC-H's integer when there is no fraction.
fn quantity_literal(hundredths: i64) -> String {
    if hundredths % 100 == 0 {
        (hundredths / 100).to_string()
    } else {
        format_hundredths(hundredths)
    }
}

/// `name` as a quoted SQL identifier: `"name"`, with embedded quotes doubled.
pub fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_query_is_tpch_q6() {
        assert_eq!(
            q6_sql("lineitem", &Q6Params::default(), Q6Select::Revenue),
            "SELECT sum(l_extendedprice * l_discount) AS revenue FROM \"lineitem\" \
             WHERE l_shipdate >= '1994-01-01' AND l_shipdate < '1995-01-01' \
             AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"
        );
    }

    #[test]
    fn parameters_and_names_are_substituted() {
        let p = Q6Params::parse("1996-02-29", "0.00", "24.5").unwrap();
        let sql = q6_sql("my \"items\"", &p, Q6Select::CountAndExactRevenue);
        assert!(
            sql.starts_with("SELECT count(*), coalesce(sum(CAST("),
            "{sql}"
        );
        assert!(sql.contains("FROM \"my \"\"items\"\"\""), "{sql}");
        assert!(
            sql.contains("l_shipdate >= '1996-02-29' AND l_shipdate < '1997-03-01'"),
            "{sql}"
        );
        assert!(sql.contains("BETWEEN -0.01 AND 0.01"), "{sql}");
        assert!(sql.ends_with("l_quantity < 24.50"), "{sql}");
        assert_eq!(quote_identifier("line\"item"), "\"line\"\"item\"");
    }
}
