//! The 22 TPC-H queries, each in DataFusion's dialect and in SQLite's, for the TPC-H tests and
//! `corescan bench tpch`.
//!
//! The texts are TPC-H's with the default substitution parameters (the validation run's),
//! in `datafusion/tpch/datafusion/` (`date '1998-12-01' - interval '90' day`,
//! `extract(year from x)`, `substring(x from 1 for 2)`) and `datafusion/tpch/sqlite/`
//! (`date('1998-12-01', '-90 day')`, `strftime('%Y', x)`, `substr(x, 1, 2)`; Q4, Q19 and Q21
//! in equivalent forms SQLite answers without indexes in well under a second at SF 0.01, and
//! Q6's discount bounds written out as the decimals TPC-H means, as their comments say).
//!
//! Layering: on its own; imports nothing from the crate.

/// One TPC-H query in both dialects.
#[derive(Debug, Clone, Copy)]
pub struct TpchQuery {
    /// Its number, 1 to 22.
    pub number: u32,
    /// TPC-H's name for it.
    pub name: &'static str,
    /// The text in DataFusion's dialect (`corescan sql`).
    pub datafusion: &'static str,
    /// The text in SQLite's dialect (`sqlite3`, rusqlite).
    pub sqlite: &'static str,
    /// Whether its `ORDER BY` orders every row (Q11's `value desc` ties).
    pub totally_ordered: bool,
}

macro_rules! queries {
    ($($n:literal $file:literal $name:literal $ordered:literal;)*) => {
        /// The 22 queries, in order.
        pub const QUERIES: [TpchQuery; 22] = [$(
            TpchQuery {
                number: $n,
                name: $name,
                datafusion: include_str!(concat!("../tpch/datafusion/", $file)),
                sqlite: include_str!(concat!("../tpch/sqlite/", $file)),
                totally_ordered: $ordered,
            },
        )*];
    };
}

queries! {
    1 "q01.sql" "pricing summary report" true;
    2 "q02.sql" "minimum cost supplier" true;
    3 "q03.sql" "shipping priority" true;
    4 "q04.sql" "order priority checking" true;
    5 "q05.sql" "local supplier volume" true;
    6 "q06.sql" "forecasting revenue change" true;
    7 "q07.sql" "volume shipping" true;
    8 "q08.sql" "national market share" true;
    9 "q09.sql" "product type profit measure" true;
    10 "q10.sql" "returned item reporting" true;
    11 "q11.sql" "important stock identification" false;
    12 "q12.sql" "shipping modes and order priority" true;
    13 "q13.sql" "customer distribution" true;
    14 "q14.sql" "promotion effect" true;
    15 "q15.sql" "top supplier" true;
    16 "q16.sql" "parts/supplier relationship" true;
    17 "q17.sql" "small-quantity-order revenue" true;
    18 "q18.sql" "large volume customer" true;
    19 "q19.sql" "discounted revenue" true;
    20 "q20.sql" "potential part promotion" true;
    21 "q21.sql" "suppliers who kept orders waiting" true;
    22 "q22.sql" "global sales opportunity" true;
}

/// Query `n` (1 to 22).
pub fn query(n: u32) -> Option<&'static TpchQuery> {
    QUERIES.iter().find(|q| q.number == n)
}
