//! `bench::oracle::q6` against an independent computation: every row read through SQLite as
//! text, parsed into hundredths and filtered and summed in Rust with integers.

use std::path::Path;

use bench::oracle::{q6, Q6Params};

use crate::{layouts, open, tiny_db};

/// The parameter sets every database is checked with: the TPC-H default, other windows,
/// discount 0 (low bound -0.01) and 1, a fractional quantity, and a window with no rows.
fn param_sets() -> Vec<Q6Params> {
    [
        ("1994-01-01", "0.06", "24"),
        ("1995-01-01", "0.05", "25"),
        ("1993-06-15", "0.00", "50"),
        ("1997-02-28", "0.10", "1"),
        ("1992-01-01", "0.07", "24.5"),
        ("1996-03-01", "0.02", "10.01"),
        ("1998-01-01", "0.09", "49.99"),
        ("2005-01-01", "0.06", "24"),
        ("1994-01-01", "1", "100"),
    ]
    .iter()
    .map(|(d, disc, q)| Q6Params::parse(d, disc, q).unwrap())
    .collect()
}

/// Hundredths from SQLite's text form of a stored number (`24`, `0.07`, `17954.55`, `24.0`).
fn hundredths(text: &str) -> i64 {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let frac = frac.trim_end_matches('0');
    assert!(frac.len() <= 2, "{text} has more than two decimals");
    let v = int.parse::<i64>().unwrap() * 100 + format!("{frac:0<2}").parse::<i64>().unwrap();
    if neg {
        -v
    } else {
        v
    }
}

/// (revenue in 1/10000, rows matched, rows scanned), computed without SQL arithmetic.
fn independent_q6(path: &Path, table: &str, p: &Q6Params) -> (i128, u64, u64) {
    let conn = open(path);
    let (y, m, d) = p.date.ymd();
    assert!(!(m == 2 && d == 29), "keep test dates off February 29");
    let lo = format!("{y:04}-{m:02}-{d:02}");
    let hi = format!("{:04}-{m:02}-{d:02}", y + 1);
    let sql = format!(
        "SELECT CAST(L_SHIPDATE AS TEXT), CAST(L_DISCOUNT AS TEXT), CAST(L_QUANTITY AS TEXT),
                CAST(L_EXTENDEDPRICE AS TEXT) FROM \"{table}\""
    );
    let mut stmt = conn.prepare(&sql).unwrap();
    let mut rows = stmt.query([]).unwrap();
    let (mut revenue, mut matched, mut scanned) = (0i128, 0u64, 0u64);
    while let Some(r) = rows.next().unwrap() {
        scanned += 1;
        let get = |i| r.get::<_, Option<String>>(i).unwrap();
        // A NULL in a predicate column fails the predicate.
        let (Some(ship), Some(disc), Some(qty)) = (get(0), get(1), get(2)) else {
            continue;
        };
        let (disc, qty) = (hundredths(&disc), hundredths(&qty));
        if ship.as_str() >= lo.as_str()
            && ship.as_str() < hi.as_str()
            && (p.discount_hundredths - 1..=p.discount_hundredths + 1).contains(&disc)
            && qty < p.quantity_hundredths
        {
            matched += 1;
            // A matching row with a NULL price adds nothing: sum() skips NULL products.
            if let Some(price) = get(3) {
                revenue += i128::from(hundredths(&price)) * i128::from(disc);
            }
        }
    }
    (revenue, matched, scanned)
}

#[track_caller]
fn check(path: &Path, table: &str) {
    for p in param_sets() {
        let a = q6(path, table, &p).unwrap();
        let expected = independent_q6(path, table, &p);
        assert_eq!(
            (a.revenue_ten_thousandths, a.rows_matched, a.rows_scanned),
            expected,
            "{} table {table} params {p:?}",
            path.display()
        );
    }
}

#[test]
fn oracle_equals_independent_computation_on_generated_data() {
    check(tiny_db(), "LINEITEM");
    let default = q6(tiny_db(), "lineitem", &Q6Params::default()).unwrap();
    assert!(default.rows_matched > 100, "{default:?}");
    assert!(default.rows_scanned > 10_000, "{default:?}");
    assert!(default.revenue_ten_thousandths > 0);
    let never = Q6Params::parse("2005-01-01", "0.06", "24").unwrap();
    let none = q6(tiny_db(), "LINEITEM", &never).unwrap();
    assert_eq!((none.revenue_ten_thousandths, none.rows_matched), (0, 0));
    assert_eq!(none.revenue(), "0.0000");
}

#[test]
fn oracle_equals_independent_computation_on_every_layout() {
    for layout in layouts() {
        check(&layout.path, &layout.table);
    }
}

#[test]
fn discount_bounds_are_inclusive_and_exact() {
    // 0.06 +- 0.01 in f64 would exclude 0.07; the oracle must count rows with exactly 0.07.
    let conn = open(tiny_db());
    let at_bounds: i64 = conn
        .query_row(
            "SELECT count(*) FROM LINEITEM WHERE L_SHIPDATE >= '1994-01-01'
             AND L_SHIPDATE < '1995-01-01' AND L_QUANTITY < 24
             AND (L_DISCOUNT = 0.05 OR L_DISCOUNT = 0.06 OR L_DISCOUNT = 0.07)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let a = q6(tiny_db(), "LINEITEM", &Q6Params::default()).unwrap();
    assert_eq!(a.rows_matched, at_bounds as u64);
}

#[test]
fn oracle_never_writes() {
    let layout = &layouts()[0];
    let before = std::fs::read(&layout.path).unwrap();
    q6(&layout.path, &layout.table, &Q6Params::default()).unwrap();
    assert_eq!(std::fs::read(&layout.path).unwrap(), before);
    for suffix in ["-journal", "-wal", "-shm"] {
        let mut side = layout.path.clone().into_os_string();
        side.push(suffix);
        assert!(!Path::new(&side).exists(), "{suffix} created");
    }
}

#[test]
fn oracle_errors_name_the_file() {
    let e = q6(tiny_db(), "NO_SUCH_TABLE", &Q6Params::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("tiny.db") && e.contains("NO_SUCH_TABLE"), "{e}");
    let missing = Path::new("/nonexistent/dir/x.db");
    let e = q6(missing, "LINEITEM", &Q6Params::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/dir/x.db"), "{e}");
}
