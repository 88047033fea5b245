//! Hand-built records exercising the decoder's corner cases.

use super::*;
use crate::q6::params::{Q6Filter, Q6Params};

/// Column positions in the TPC-H order.
const TPCH: Q6Columns = Q6Columns {
    quantity: 4,
    extended_price: 5,
    discount: 6,
    ship_date: 10,
};

#[derive(Clone, Debug)]
enum V {
    Null,
    Int(i64),
    Real(f64),
    Text(&'static str),
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    let mut tmp = Vec::new();
    tmp.push((v & 0x7f) as u8);
    v >>= 7;
    while v > 0 {
        tmp.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.extend(tmp.iter().rev());
}

fn record(values: &[V]) -> Vec<u8> {
    let mut types = Vec::new();
    let mut body = Vec::new();
    for v in values {
        match v {
            V::Null => varint(0, &mut types),
            V::Int(i) => {
                varint(6, &mut types);
                body.extend_from_slice(&i.to_be_bytes());
            }
            V::Real(x) => {
                varint(7, &mut types);
                body.extend_from_slice(&x.to_bits().to_be_bytes());
            }
            V::Text(t) => {
                varint(13 + 2 * t.len() as u64, &mut types);
                body.extend_from_slice(t.as_bytes());
            }
        }
    }
    let mut out = Vec::new();
    varint(types.len() as u64 + 1, &mut out);
    out.extend(types);
    out.extend(body);
    out
}

/// A TPC-H-shaped row with the four Q6 values in place and filler elsewhere.
fn row(qty: V, price: V, disc: V, date: V) -> Vec<u8> {
    let mut vals = vec![V::Int(1); 16];
    vals[4] = qty;
    vals[5] = price;
    vals[6] = disc;
    vals[10] = date;
    vals[15] = V::Text("a comment long enough to be skipped");
    record(&vals)
}

fn decoder() -> LeafDecoder {
    LeafDecoder::new(TPCH, Q6Filter::from(&Q6Params::default()), 4096)
}

fn eval(rec: &[u8]) -> Result<PartialAggregate, String> {
    let mut agg = PartialAggregate::default();
    assert_eq!(
        decoder().eval_record(rec, true, &mut agg)?,
        RecordOutcome::Done
    );
    Ok(agg)
}

#[test]
fn matching_row_adds_exact_revenue() {
    let agg = eval(&row(
        V::Int(10),
        V::Real(1234.56),
        V::Real(0.06),
        V::Text("1994-06-01"),
    ))
    .unwrap();
    assert_eq!(agg.rows_matched, 1);
    assert_eq!(agg.revenue, 123_456 * 6);
}

#[test]
fn boundaries_follow_sqlite() {
    let m = |q: V, d: V, s: &'static str| {
        eval(&row(q, V::Int(100), d, V::Text(s)))
            .unwrap()
            .rows_matched
    };
    // Discount 0.07 and 0.05 are inside; the f64 sum 0.06 + 0.01 would have dropped 0.07.
    assert_eq!(m(V::Int(1), V::Real(0.07), "1994-01-01"), 1);
    assert_eq!(m(V::Int(1), V::Real(0.05), "1994-12-31"), 1);
    assert_eq!(m(V::Int(1), V::Real(0.08), "1994-06-01"), 0);
    assert_eq!(m(V::Int(1), V::Real(0.04), "1994-06-01"), 0);
    // Quantity 24 is excluded, 23.99 included.
    assert_eq!(m(V::Int(24), V::Real(0.06), "1994-06-01"), 0);
    assert_eq!(m(V::Real(23.99), V::Real(0.06), "1994-06-01"), 1);
    // The date window is half open.
    assert_eq!(m(V::Int(1), V::Real(0.06), "1995-01-01"), 0);
    assert_eq!(m(V::Int(1), V::Real(0.06), "1993-12-31"), 0);
    // Integer-stored discount (a whole number) never matches 0.05..0.07.
    assert_eq!(m(V::Int(1), V::Int(0), "1994-06-01"), 0);
}

#[test]
fn nulls_and_non_text_dates_never_match() {
    let agg = eval(&row(
        V::Null,
        V::Int(1),
        V::Real(0.06),
        V::Text("1994-06-01"),
    ))
    .unwrap();
    assert_eq!(agg.rows_matched, 0);
    let agg = eval(&row(V::Int(1), V::Int(1), V::Null, V::Text("1994-06-01"))).unwrap();
    assert_eq!(agg.rows_matched, 0);
    let agg = eval(&row(V::Int(1), V::Int(1), V::Real(0.06), V::Int(19940601))).unwrap();
    assert_eq!(agg.rows_matched, 0);
    // A NULL price still matches the predicate but adds nothing, like SQL's sum().
    let agg = eval(&row(
        V::Int(1),
        V::Null,
        V::Real(0.06),
        V::Text("1994-06-01"),
    ))
    .unwrap();
    assert_eq!((agg.rows_matched, agg.revenue), (1, 0));
}

#[test]
fn short_records_read_missing_columns_as_null() {
    let rec = record(&[V::Int(1), V::Int(2), V::Int(3), V::Int(4), V::Int(5)]);
    let agg = eval(&rec).unwrap();
    assert_eq!(agg.rows_matched, 0);
}

#[test]
fn prefixes_ask_for_more_and_full_records_decode() {
    let rec = row(
        V::Int(10),
        V::Int(200),
        V::Real(0.06),
        V::Text("1994-06-01"),
    );
    let mut d = decoder();
    for cut in 0..rec.len() {
        let mut agg = PartialAggregate::default();
        let out = d.eval_record(&rec[..cut], false, &mut agg).unwrap();
        if out == RecordOutcome::NeedMore {
            assert_eq!(agg, PartialAggregate::default(), "cut {cut}");
        }
    }
    let mut agg = PartialAggregate::default();
    assert_eq!(
        d.eval_record(&rec, false, &mut agg).unwrap(),
        RecordOutcome::Done
    );
    assert_eq!(agg.revenue, 20_000 * 6);
    // Cut inside a needed value (the date) and claimed complete: an error, not a guess.
    assert!(d
        .eval_record(&rec[..rec.len() - 80], true, &mut agg)
        .is_err());
}

#[test]
fn inexact_money_is_an_error_not_a_rounding() {
    let err = eval(&row(
        V::Int(1),
        V::Real(0.125),
        V::Real(0.06),
        V::Text("1994-06-01"),
    ))
    .unwrap_err();
    assert!(err.contains("l_extendedprice"), "{err}");
    // Text that is wholly a number is what SQLite's arithmetic reads; anything else cannot
    // give an exact sum.
    let agg = eval(&row(
        V::Int(1),
        V::Text(" 12.5 "),
        V::Real(0.06),
        V::Text("1994-06-01"),
    ))
    .unwrap();
    assert_eq!(agg.revenue, 1250 * 6);
    let err = eval(&row(
        V::Int(1),
        V::Text("12abc"),
        V::Real(0.06),
        V::Text("1994-06-01"),
    ))
    .unwrap_err();
    assert!(err.contains("\"12abc\", which is not a number"), "{err}");
}

#[test]
fn reserved_serial_types_and_bad_headers_are_errors() {
    let mut rec = row(V::Int(1), V::Int(1), V::Real(0.06), V::Text("1994-06-01"));
    rec[1] = 10;
    assert!(eval(&rec).unwrap_err().contains("reserved serial type"));
    let bad = [0x7f, 1, 1];
    assert!(eval(&bad).is_err());
}

#[test]
fn decode_page_rejects_non_leaf_pages_and_wild_cell_pointers() {
    let mut d = decoder();
    let mut agg = PartialAggregate::default();
    let mut spills = Vec::new();
    let mut page = vec![0u8; 4096];
    page[0] = 0x05;
    assert!(d
        .decode_page(2, &page, &mut agg, &mut spills)
        .unwrap_err()
        .contains("0x05"));
    page[0] = 0x0d;
    page[3..5].copy_from_slice(&1u16.to_be_bytes());
    page[8..10].copy_from_slice(&5000u16.to_be_bytes());
    assert!(d.decode_page(2, &page, &mut agg, &mut spills).is_err());
    // A cell whose payload claims more bytes than the page holds.
    page[8..10].copy_from_slice(&4090u16.to_be_bytes());
    page[4090] = 0x7f;
    page[4091] = 1;
    assert!(d.decode_page(2, &page, &mut agg, &mut spills).is_err());
}

#[test]
fn short_records_read_column_defaults() {
    // Only the first five columns are stored; price, discount and date come from defaults.
    let rec = record(&[V::Int(1), V::Int(2), V::Int(3), V::Int(4), V::Int(5)]);
    let mut d = decoder().with_defaults([
        MissingValue::Null,
        MissingValue::Integer(200),
        MissingValue::Real(0.06),
        MissingValue::Text(b"1994-06-01".to_vec()),
    ]);
    let mut agg = PartialAggregate::default();
    d.eval_record(&rec, true, &mut agg).unwrap();
    assert_eq!((agg.rows_matched, agg.revenue), (1, 20_000 * 6));
    // A default that cannot be evaluated is an error only when a record needs it: here the
    // stored quantity (5) and the discount's default (0.06) pass, so the ship date decides.
    let mut d = decoder().with_defaults([
        MissingValue::Null,
        MissingValue::Null,
        MissingValue::Real(0.06),
        MissingValue::Unavailable("default is an expression".into()),
    ]);
    let full = row(V::Int(1), V::Int(1), V::Real(0.06), V::Text("1994-06-01"));
    assert!(d.eval_record(&full, true, &mut agg).is_ok());
    assert!(d
        .eval_record(&rec, true, &mut agg)
        .unwrap_err()
        .contains("expression"));
    // A row that fails on a value before it needs the default does not.
    let mut d = decoder().with_defaults([
        MissingValue::Null,
        MissingValue::Null,
        MissingValue::Null,
        MissingValue::Unavailable("default is an expression".into()),
    ]);
    assert_eq!(
        d.eval_record(&rec, true, &mut agg).unwrap(),
        RecordOutcome::Done
    );
}

#[test]
fn absurd_header_sizes_in_a_prefix_are_not_arithmetic_overflows() {
    // Found by the record fuzzer: a 9-byte header-size varint of 2^64-1 in a cell that spills.
    let mut rec = vec![0xff; 13];
    rec.extend_from_slice(&[0, 0]);
    let mut d = decoder();
    let mut agg = PartialAggregate::default();
    for complete in [false, true] {
        let _ = d.eval_record(&rec, complete, &mut agg);
    }
    // Serial type 6 (8-byte integers) makes the offsets grow past the absurd header size.
    let mut prefix = vec![0xff; 9];
    prefix.extend_from_slice(&[6; 20]);
    for complete in [false, true] {
        let _ = d.eval_record(&prefix, complete, &mut agg);
    }
    assert_eq!(agg, PartialAggregate::default());
}

#[test]
fn the_quick_double_tests_agree_with_sqlite_on_every_numeric_shape() {
    // Discounts and quantities as SQLite stores numbers (1- and 2-byte integers, the
    // constants 0 and 1, larger integers, REALs on and beside the bounds), every pair judged
    // by the decoder and by SQLite's own comparison of the same values.
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    let near = |x: f64| {
        [
            x,
            f64::from_bits(x.to_bits() - 1),
            f64::from_bits(x.to_bits() + 1),
        ]
    };
    let mut numbers = vec![
        V::Int(0),
        V::Int(1),
        V::Int(-1),
        V::Int(23),
        V::Int(24),
        V::Int(25),
        V::Int(-300),
        V::Int(300),
        V::Int(70_000),
        V::Int(1 << 40),
    ];
    for x in near(0.05)
        .into_iter()
        .chain(near(0.07))
        .chain(near(24.0))
        .chain(near(23.99))
    {
        numbers.push(V::Real(x));
    }
    numbers.extend([V::Real(0.06), V::Real(-0.06), V::Real(1e300), V::Real(0.0)]);
    let param = |v: &V| match v {
        V::Int(i) => rusqlite::types::Value::Integer(*i),
        V::Real(x) => rusqlite::types::Value::Real(*x),
        _ => unreachable!(),
    };
    for q in &numbers {
        for d in &numbers {
            let want: i64 = conn
                .query_row(
                    "SELECT ?2 BETWEEN 0.05 AND 0.07 AND ?1 < 24",
                    [param(q), param(d)],
                    |r| r.get(0),
                )
                .unwrap();
            // A matched discount that is not a two-place decimal is an error (the exact sum
            // cannot be formed), which only a matched row raises.
            let got = match eval(&row(
                q.clone(),
                V::Int(100),
                d.clone(),
                V::Text("1994-06-01"),
            )) {
                Ok(agg) => agg.rows_matched,
                Err(e) if e.contains("is not a decimal") => 1,
                Err(e) => panic!("quantity {q:?}, discount {d:?}: {e}"),
            };
            assert_eq!(got, want as u64, "quantity {q:?}, discount {d:?}");
        }
    }
}
