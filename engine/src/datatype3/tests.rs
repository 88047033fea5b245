//! The rules against SQLite itself: every (column affinity x stored class x literal) and
//! (column x column) comparison, evaluated by rusqlite's bundled SQLite and by [`compare`].

use std::cmp::Ordering;

use rusqlite::types::ValueRef as SqlRef;
use rusqlite::Connection;

use super::*;
use crate::value::ValueRef;

/// Columns of every affinity, in this order.
const COLUMNS: [(&str, &str); 6] = [
    ("c_int", "INTEGER"),
    ("c_real", "REAL"),
    ("c_num", "DECIMAL(15,2)"),
    ("c_text", "VARCHAR(8)"),
    ("c_blob", "BLOB"),
    ("c_none", ""),
];

/// Stored values of every class, including text that looks like a number.
const STORED: [&str; 11] = [
    "NULL", "17", "24", "-3", "2.5", "24.0", "'17'", "'24'", "' 24 '", "'abc'", "x'3234'",
];

/// Literals (no affinity).
const LITERALS: [&str; 10] = [
    "24", "24.0", "2.5", "'24'", "'2.5'", "'abc'", "' 24 '", "x'3234'", "NULL", "-3",
];

fn to_ref(v: SqlRef<'_>) -> ValueRef<'_> {
    match v {
        SqlRef::Null => ValueRef::Null,
        SqlRef::Integer(i) => ValueRef::Integer(i),
        SqlRef::Real(r) => ValueRef::Real(r),
        SqlRef::Text(t) => ValueRef::Text(t),
        SqlRef::Blob(b) => ValueRef::Blob(b),
    }
}

/// A table whose columns keep each stored value's class whatever their declared type: the
/// rows are written into untyped columns, then the schema is rewritten to the typed ones.
fn table() -> Connection {
    let db = Connection::open_in_memory().unwrap();
    let untyped: Vec<String> = COLUMNS.iter().map(|(n, _)| n.to_string()).collect();
    db.execute_batch(&format!(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, {});",
        untyped.join(", ")
    ))
    .unwrap();
    for v in STORED {
        let vals = vec![v; COLUMNS.len()].join(", ");
        db.execute_batch(&format!("INSERT INTO t VALUES (NULL, {vals});"))
            .unwrap();
    }
    let typed: Vec<String> = COLUMNS.iter().map(|(n, t)| format!("{n} {t}")).collect();
    let sql = format!(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, {})",
        typed.join(", ")
    );
    db.execute_batch("PRAGMA writable_schema = ON;").unwrap();
    db.execute("UPDATE sqlite_schema SET sql = ?1 WHERE name = 't'", [&sql])
        .unwrap();
    db.execute_batch("PRAGMA writable_schema = OFF;").unwrap();
    // A new connection would reread the schema; an in-memory one bumps the schema cookie.
    db.execute_batch("PRAGMA schema_version = 100;").unwrap();
    db
}

/// SQLite's answer to `expr` for each row (None = NULL), and the row's raw values.
fn sqlite_outcomes(db: &Connection, expr: &str) -> Vec<Option<bool>> {
    let mut st = db
        .prepare(&format!("SELECT {expr} FROM t ORDER BY id"))
        .unwrap();
    st.query_map([], |r| r.get::<_, Option<i64>>(0))
        .unwrap()
        .map(|v| v.unwrap().map(|i| i != 0))
        .collect()
}

fn literal_value(db: &Connection, lit: &str) -> rusqlite::types::Value {
    db.query_row(&format!("SELECT {lit}"), [], |r| r.get(0))
        .unwrap()
}

fn ours(ord: Option<Ordering>, op: &str) -> Option<bool> {
    ord.map(|o| match op {
        "<" => o == Ordering::Less,
        "<=" => o != Ordering::Greater,
        ">" => o == Ordering::Greater,
        ">=" => o != Ordering::Less,
        "=" => o == Ordering::Equal,
        _ => o != Ordering::Equal,
    })
}

fn column_values(db: &Connection, col: &str) -> Vec<rusqlite::types::Value> {
    let mut st = db
        .prepare(&format!("SELECT {col} FROM t ORDER BY id"))
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .map(|v| v.unwrap())
        .collect()
}

#[test]
fn schema_rewrite_keeps_stored_classes() {
    let db = table();
    let classes: Vec<String> = db
        .prepare("SELECT typeof(c_text) FROM t ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|v| v.unwrap())
        .collect();
    assert_eq!(classes[1], "integer", "{classes:?}");
    assert_eq!(classes[6], "text");
    assert_eq!(classes[10], "blob");
}

#[test]
fn column_against_literal_matches_sqlite() {
    let db = table();
    let mut checked = 0;
    for (col, decl) in COLUMNS {
        let affinity = Affinity::of_declared_type(decl);
        let values = column_values(&db, col);
        for lit in LITERALS {
            let lit_value = literal_value(&db, lit);
            for op in ["<", "<=", ">", ">=", "=", "<>"] {
                for (expr, flipped) in [
                    (format!("{col} {op} {lit}"), false),
                    (format!("{lit} {op} {col}"), true),
                ] {
                    let expect = sqlite_outcomes(&db, &expr);
                    for (row, v) in values.iter().enumerate() {
                        let a = to_ref(SqlRef::from(v));
                        let b = to_ref(SqlRef::from(&lit_value));
                        let got = if flipped {
                            let aff = comparison_affinity(None, Some(affinity));
                            ours(compare(b, a, aff, Collation::Binary), op)
                        } else {
                            let aff = comparison_affinity(Some(affinity), None);
                            ours(compare(a, b, aff, Collation::Binary), op)
                        };
                        assert_eq!(got, expect[row], "{expr} with {col} = {}", STORED[row]);
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 6 * 10 * 6 * 2 * STORED.len());
}

#[test]
fn column_against_column_matches_sqlite() {
    let db = table();
    for (left, ldecl) in COLUMNS {
        for (right, rdecl) in COLUMNS {
            let aff = comparison_affinity(
                Some(Affinity::of_declared_type(ldecl)),
                Some(Affinity::of_declared_type(rdecl)),
            );
            // Pair every stored value of `left` with every stored value of `right`.
            let expr = format!("a.{left} < b.{right}");
            let mut st = db
                .prepare(&format!(
                    "SELECT a.{left}, b.{right}, {expr} FROM t a, t b ORDER BY a.id, b.id"
                ))
                .unwrap();
            let mut rows = st.query([]).unwrap();
            while let Some(r) = rows.next().unwrap() {
                let (x, y) = (r.get_ref(0).unwrap(), r.get_ref(1).unwrap());
                let expect: Option<i64> = r.get(2).unwrap();
                let got = ours(compare(to_ref(x), to_ref(y), aff, Collation::Binary), "<");
                assert_eq!(got, expect.map(|i| i != 0), "{expr}: {x:?} < {y:?}");
            }
        }
    }
}

#[test]
fn expressions_without_affinity_compare_as_stored() {
    // `+col` strips the column's affinity: '17' (text) < 24 (integer) is false.
    let db = table();
    let expect = sqlite_outcomes(&db, "+c_text < 24");
    let values = column_values(&db, "c_text");
    for (row, v) in values.iter().enumerate() {
        let got = ours(
            compare(
                to_ref(SqlRef::from(v)),
                ValueRef::Integer(24),
                None,
                Collation::Binary,
            ),
            "<",
        );
        assert_eq!(got, expect[row], "+c_text < 24 with {}", STORED[row]);
    }
}

#[test]
fn collations_match_sqlite() {
    let db = Connection::open_in_memory().unwrap();
    let texts = [
        "abc", "ABC", "abc  ", "ab", "abd", "ABD ", "", " ", "aBc ", "é", "É",
    ];
    for name in ["BINARY", "NOCASE", "RTRIM"] {
        let coll = Collation::from_name(&name.to_lowercase()).unwrap();
        assert_eq!(coll.name(), name);
        for a in texts {
            for b in texts {
                let expect: i64 = db
                    .query_row(
                        &format!("SELECT (?1 COLLATE {name} > ?2) - (?1 COLLATE {name} < ?2)"),
                        [a, b],
                        |r| r.get(0),
                    )
                    .unwrap();
                let got = match coll.compare(a.as_bytes(), b.as_bytes()) {
                    Ordering::Less => -1,
                    Ordering::Equal => 0,
                    Ordering::Greater => 1,
                };
                assert_eq!(got, expect, "{a:?} vs {b:?} under {name}");
            }
        }
    }
    assert_eq!(Collation::from_name("rev"), None);
}

#[test]
fn documentation_examples() {
    // https://www.sqlite.org/datatype3.html section 4.3: t1(a TEXT, b NUMERIC, c BLOB, d)
    // with the row ('500', '500', '500', 500).
    let (a, b, c, d) = (
        ValueRef::Text(b"500"),
        ValueRef::Integer(500),
        ValueRef::Text(b"500"),
        ValueRef::Integer(500),
    );
    let (ta, tb, tc) = (
        Some(Affinity::Text),
        Some(Affinity::Numeric),
        Some(Affinity::Blob),
    );
    let lt = |x, y, ax, ay| compare(x, y, comparison_affinity(ax, ay), Collation::Binary);
    // a < 40, a < 60, a < 600: text comparison ('500' vs '40' ...): 0, 1, 1.
    let forty = ValueRef::Integer(40);
    let sixty = ValueRef::Integer(60);
    let six_hundred = ValueRef::Integer(600);
    assert_eq!(lt(a, forty, ta, None), Some(Ordering::Greater));
    assert_eq!(lt(a, sixty, ta, None), Some(Ordering::Less));
    assert_eq!(lt(a, six_hundred, ta, None), Some(Ordering::Less));
    // b < 40, b < 60, b < 600: numeric: 0, 0, 1.
    assert_eq!(lt(b, forty, tb, None), Some(Ordering::Greater));
    assert_eq!(lt(b, sixty, tb, None), Some(Ordering::Greater));
    assert_eq!(lt(b, six_hundred, tb, None), Some(Ordering::Less));
    // c < 40, c < 60, c < 600: no conversion, text > integer: 0, 0, 0.
    for n in [forty, sixty, six_hundred] {
        assert_eq!(lt(c, n, tc, None), Some(Ordering::Greater));
    }
    // d < '40', d < '60', d < '600': no affinity, integer < text: 1, 1, 1.
    for t in [b"40".as_slice(), b"60", b"600"] {
        assert_eq!(lt(d, ValueRef::Text(t), None, None), Some(Ordering::Less));
    }
}

#[test]
fn integers_and_reals_compare_exactly() {
    let big = 9_007_199_254_740_993i64; // 2^53 + 1, not a double
    assert_eq!(
        int_real_cmp(big, 9_007_199_254_740_992.0),
        Ordering::Greater
    );
    assert_eq!(
        int_real_cmp(i64::MAX, 9_223_372_036_854_775_808.0),
        Ordering::Less
    );
    assert_eq!(int_real_cmp(-1, -0.5), Ordering::Less);
    assert_eq!(int_real_cmp(0, -0.0), Ordering::Equal);
    assert_eq!(int_real_cmp(3, 3.0), Ordering::Equal);
}

#[test]
fn column_affinity_on_store_matches_sqlite() {
    let db = Connection::open_in_memory().unwrap();
    for (_, decl) in COLUMNS {
        let affinity = Affinity::of_declared_type(decl);
        db.execute_batch(&format!(
            "DROP TABLE IF EXISTS s; CREATE TABLE s(x {decl});"
        ))
        .unwrap();
        for lit in LITERALS
            .iter()
            .chain(&["1e3", "'1e3'", "3.0", "'0x10'", "'-0'"])
        {
            db.execute_batch(&format!("DELETE FROM s; INSERT INTO s VALUES ({lit});"))
                .unwrap();
            let stored: rusqlite::types::Value =
                db.query_row("SELECT x FROM s", [], |r| r.get(0)).unwrap();
            let raw = literal_value(&db, lit);
            let got = apply_column_affinity(to_ref(SqlRef::from(&raw)), affinity);
            let expect = to_ref(SqlRef::from(&stored)).to_owned();
            assert_eq!(got, expect, "{lit} into {decl:?}");
        }
    }
}

#[test]
fn reals_render_as_sqlite_renders_them() {
    let db = Connection::open_in_memory().unwrap();
    let mut rng = testkit::Rng::xorshift64(0x9E37_79B9_7F4A_7C15);
    let mut reals = vec![
        0.1,
        1.0 / 3.0,
        2.0 / 3.0,
        1e15,
        1e-5,
        123.456,
        5e-324,
        f64::MAX,
    ];
    for _ in 0..3000 {
        let seed = rng.next_u64();
        let r = f64::from_bits(seed);
        if r.is_finite() {
            reals.push(r);
        }
        // Short decimals, the common case in real tables.
        reals.push((seed % 10_000_000) as f64 / 100.0);
    }
    for r in reals {
        let expect: String = db
            .query_row("SELECT CAST(?1 AS TEXT)", [r], |row| row.get(0))
            .unwrap();
        assert_eq!(crate::value::real_to_text(r), expect, "{r:e}");
    }
}

#[test]
fn text_to_integer_casts_match_sqlite() {
    let db = Connection::open_in_memory().unwrap();
    for t in [
        "12",
        "12abc",
        "1e3",
        " 7 ",
        "-0",
        "abc",
        "",
        "9999999999999999999",
        "1.9",
        "0x10",
    ] {
        let expect: i64 = db
            .query_row("SELECT CAST(?1 AS INTEGER)", [t], |row| row.get(0))
            .unwrap();
        assert_eq!(ValueRef::Text(t.as_bytes()).to_i64(), Some(expect), "{t:?}");
        let (a, b): (rusqlite::types::Value, String) = db
            .query_row("SELECT ?1 + 0, typeof(?1 + 0)", [t], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .unwrap();
        let got = ValueRef::Text(t.as_bytes()).to_number().map(Value::from);
        let expect = to_ref(SqlRef::from(&a)).to_owned();
        assert_eq!(got, Some(expect), "{t:?} + 0 ({b})");
    }
}
