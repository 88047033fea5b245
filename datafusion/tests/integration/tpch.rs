//! The 22 TPC-H queries (the standard texts with the default substitution parameters) through
//! DataFusion over corescan's scans, on a TPC-H SF 0.01 file generated at test time with
//! `bench::gen` (all eight tables), each compared with SQLite's answer on the same file; and,
//! opt-in (`cargo test -p corescan-datafusion --test integration -- --ignored tpch_sf01`, about
//! a minute in a test build), the same on SF 0.1, where SQLite answers from a copy of the file with indexes on
//! the join keys (the same rows; without them SQLite's nested loops take minutes per query).
//!
//! The queries are `corescan_datafusion::tpch::QUERIES` (`datafusion/tpch/`), in DataFusion's
//! dialect and in SQLite's.
//!
//! How values compare (DataFusion's typed answer against SQLite's storage classes):
//!
//! - integers and text (dates included, `YYYY-MM-DD` on both sides) exactly;
//! - a decimal (exact in DataFusion, printed with all its scale's digits) against SQLite's
//!   double within one unit of the decimal's last digit plus 1e-9 of the value: SQLite sums
//!   and multiplies the stored doubles in floating point, so its answer is the exact one
//!   rounded, and DataFusion rounds averages and quotients to their decimal scale;
//! - a double (a decimal mixed with a float literal, as `0.2 * avg(l_quantity)`) within 1e-9 of
//!   the value (both sides compute in floating point, in different orders);
//! - rows in order: every query's `ORDER BY` is total except Q11's (`value desc`, which ties),
//!   whose rows are compared sorted.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bench::gen::{GenOptions, TableSelection};
use engine::value::Value;

use crate::{datafusion, scratch_dir, sqlite};

/// The scale factor of the generated file: 60,175 line items, 15,000 orders.
const SF: f64 = 0.01;

/// The TPC-H file, generated once per run.
fn tpch_db() -> &'static Path {
    static DB: OnceLock<PathBuf> = OnceLock::new();
    DB.get_or_init(|| generate(SF, "tpch"))
}

/// A TPC-H file of scale factor `sf` (all eight tables) in the scratch folder `name`.
fn generate(sf: f64, name: &str) -> PathBuf {
    let path = scratch_dir(name).join("tpch.db");
    let opts = GenOptions {
        out: path.clone(),
        scale_factor: sf,
        page_size: 4096,
        tables: TableSelection::All,
        force: false,
    };
    bench::gen::generate(&opts, false).expect("generate the TPC-H file");
    path
}

/// Whether `a` and `b` are the same value under the module docs' rules.
fn same(df: &Value, sq: &Value) -> bool {
    match (df, sq) {
        (Value::Null, Value::Null) => true,
        (Value::Integer(a), Value::Integer(b)) => a == b,
        (Value::Real(a), Value::Real(b)) => close(*a, *b, 0.0),
        (Value::Real(a), Value::Integer(b)) => close(*a, *b as f64, 0.0),
        (Value::Integer(a), Value::Real(b)) => close(*a as f64, *b, 0.0),
        (Value::Text(a), Value::Real(_) | Value::Integer(_)) => {
            let text = std::str::from_utf8(a).expect("UTF-8");
            let Ok(decimal) = text.parse::<f64>() else {
                return false;
            };
            let scale = text.split_once('.').map_or(0, |(_, f)| f.len());
            let unit = 10f64.powi(-(scale as i32));
            let b = match sq {
                Value::Real(r) => *r,
                Value::Integer(i) => *i as f64,
                _ => unreachable!(),
            };
            close(decimal, b, unit)
        }
        (a, b) => a == b,
    }
}

/// `a` and `b` within `unit` plus 1e-9 of their size.
fn close(a: f64, b: f64, unit: f64) -> bool {
    (a - b).abs() <= unit + 1e-9 * a.abs().max(b.abs())
}

/// A total order on rows of SQLite values, for comparing results without a total `ORDER BY`.
fn sort_key(row: &[Value]) -> Vec<String> {
    row.iter()
        .map(|v| match v {
            Value::Null => String::new(),
            Value::Integer(i) => format!("{i:020}"),
            Value::Real(r) => format!("{r:030.6}"),
            Value::Text(t) => {
                let text = String::from_utf8_lossy(t).into_owned();
                // A decimal sorts as the number it is, as SQLite's double does.
                text.parse::<f64>().map_or(text, |n| format!("{n:030.6}"))
            }
            Value::Blob(b) => format!("{b:?}"),
        })
        .collect()
}

/// Runs query `n` both ways on the SF 0.01 file and compares the answers.
fn check(n: u32, datafusion_sql: &str, sqlite_sql: &str, ordered: bool) {
    let db = tpch_db();
    compare(db, db, n, datafusion_sql, sqlite_sql, ordered);
}

/// Runs query `n` through DataFusion on `db` and through SQLite on `oracle` (the same rows),
/// and compares the answers.
fn compare(
    db: &Path,
    oracle: &Path,
    n: u32,
    datafusion_sql: &str,
    sqlite_sql: &str,
    ordered: bool,
) {
    let answer = datafusion(db, datafusion_sql).unwrap_or_else(|e| panic!("Q{n}: {e}"));
    compare_answer(answer, oracle, n, sqlite_sql, ordered);
}

/// Compares DataFusion's `answer` to query `n` with SQLite's on `oracle`.
fn compare_answer(answer: crate::Answer, oracle: &Path, n: u32, sqlite_sql: &str, ordered: bool) {
    let mut ours = answer.rows;
    let mut theirs = sqlite(oracle, sqlite_sql);
    if !ordered {
        ours.sort_by_key(|r| sort_key(r));
        theirs.sort_by_key(|r| sort_key(r));
    }
    assert_eq!(
        ours.len(),
        theirs.len(),
        "Q{n}: {} rows, SQLite {}",
        ours.len(),
        theirs.len()
    );
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a.len(), b.len(), "Q{n} row {i}: widths");
        let equal = a.iter().zip(b).all(|(x, y)| same(x, y));
        assert!(
            equal,
            "Q{n} row {i} ({}):\n  DataFusion {a:?}\n  SQLite     {b:?}",
            answer.names.join(", ")
        );
    }
}

macro_rules! tpch {
    ($($name:ident $n:literal;)*) => {$(
        #[test]
        fn $name() {
            let q = corescan_datafusion::tpch::query($n).expect("a TPC-H query");
            check($n, q.datafusion, q.sqlite, q.totally_ordered);
        }
    )*};
}

tpch! {
    q01_pricing_summary 1;
    q02_minimum_cost_supplier 2;
    q03_shipping_priority 3;
    q04_order_priority_checking 4;
    q05_local_supplier_volume 5;
    q06_forecasting_revenue_change 6;
    q07_volume_shipping 7;
    q08_national_market_share 8;
    q09_product_type_profit 9;
    q10_returned_item_reporting 10;
    q11_important_stock 11;
    q12_shipping_modes 12;
    q13_customer_distribution 13;
    q14_promotion_effect 14;
    q15_top_supplier 15;
    q16_parts_supplier_relationship 16;
    q17_small_quantity_order_revenue 17;
    q18_large_volume_customer 18;
    q19_discounted_revenue 19;
    q20_potential_part_promotion 20;
    q21_suppliers_who_kept_orders_waiting 21;
    q22_global_sales_opportunity 22;
}

/// The SF 0.01 file split into three shards (`corescan gen --shards`: LINEITEM and ORDERS by
/// order key, the other tables in the first shard), each table the union of its rows over
/// the shards that hold it: every query's answer is SQLite's on the whole file.
#[test]
fn all_22_queries_over_three_shards_equal_sqlites_answers_on_the_whole_file() {
    let whole = tpch_db();
    let dir = scratch_dir("tpch-shards");
    let shards = bench::shards::split(whole, &dir.join("t.db"), 3, 4096, true).expect("split");
    for q in corescan_datafusion::tpch::QUERIES {
        let answer = crate::datafusion_files(&shards, q.datafusion)
            .unwrap_or_else(|e| panic!("Q{} over the shards: {e}", q.number));
        compare_answer(answer, whole, q.number, q.sqlite, q.totally_ordered);
    }
}

#[test]
fn the_answers_are_not_empty_where_tpch_has_rows_at_this_scale() {
    // A guard against a comparison of two empty answers passing for the wrong reason: at SF
    // 0.01 every query but Q17 (no part of brand 23 in a medium box qualifies) has rows.
    let db = tpch_db();
    let q1 = corescan_datafusion::tpch::query(1).expect("Q1");
    let answer = datafusion(db, q1.datafusion).expect("Q1");
    assert_eq!(answer.rows.len(), 4);
    assert_eq!(
        answer.names,
        [
            "l_returnflag",
            "l_linestatus",
            "sum_qty",
            "sum_base_price",
            "sum_disc_price",
            "sum_charge",
            "avg_qty",
            "avg_price",
            "avg_disc",
            "count_order"
        ]
    );
    let rows: u64 = answer
        .rows
        .iter()
        .map(|r| match r[9] {
            Value::Integer(n) => n as u64,
            _ => panic!("count_order is an integer"),
        })
        .sum();
    assert!(rows > 50_000, "{rows}");
}

/// The opt-in run on SF 0.1 (600,572 line items): all 22 queries against SQLite, which reads a
/// copy of the file with indexes on the join keys (made with `VACUUM INTO`, then `CREATE INDEX`
/// and `ANALYZE` on the copy; the tested file is left as generated, without indexes).
#[test]
#[ignore = "opt-in, about a minute: cargo test -p corescan-datafusion --test integration -- --ignored tpch_sf01"]
fn tpch_sf01_all_22_queries_equal_sqlites_answers() {
    let db = generate(0.1, "tpch-sf01");
    let oracle = db.with_file_name("oracle.db");
    let conn = rusqlite::Connection::open(&db).expect("open the generated file");
    conn.execute("VACUUM INTO ?1", [oracle.to_str().expect("a UTF-8 path")])
        .expect("copy the file");
    drop(conn);
    rusqlite::Connection::open(&oracle)
        .expect("open the copy")
        .execute_batch(
            "CREATE INDEX l_order ON lineitem(l_orderkey);
             CREATE INDEX l_part_supp ON lineitem(l_partkey, l_suppkey);
             CREATE INDEX o_key ON orders(o_orderkey);
             CREATE INDEX o_cust ON orders(o_custkey);
             CREATE INDEX c_key ON customer(c_custkey);
             CREATE INDEX ps_key ON partsupp(ps_partkey, ps_suppkey);
             CREATE INDEX p_key ON part(p_partkey);
             CREATE INDEX s_key ON supplier(s_suppkey);
             CREATE INDEX n_key ON nation(n_nationkey);
             ANALYZE;",
        )
        .expect("index the copy");
    for q in &corescan_datafusion::tpch::QUERIES {
        let started = std::time::Instant::now();
        compare(
            &db,
            &oracle,
            q.number,
            q.datafusion,
            q.sqlite,
            q.totally_ordered,
        );
        eprintln!(
            "Q{}: equal ({:.1} s both ways)",
            q.number,
            started.elapsed().as_secs_f64()
        );
    }
}
