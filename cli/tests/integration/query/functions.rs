//! The SQLite a user writes beyond the core grammar (issue 26): the math functions, the newer
//! text and blob functions, `iif`, `IS [NOT] TRUE/FALSE`, `NOT GLOB`, `SELECT DISTINCT`, each
//! compared with SQLite 3.54 on the shared fixture (every storage class in every column); and
//! the wording of what corescan refuses.

use super::{check, check_error, fixture, Axis, QueryTester};

fn all(queries: &[&str]) {
    let db = fixture();
    for q in queries {
        check(db, q);
    }
}

#[test]
fn math_functions() {
    all(&[
        "SELECT id, ceil(r), ceiling(s), floor(x), trunc(n), ceil(i), floor(b), CEIL(r), FLOOR(s) FROM t",
        "SELECT id, ln(r), log(x), log10(n), log2(i), log(2, r), log(s, 8), log(x, '8x'), exp(r) FROM t",
        "SELECT id, pow(r, 2), power(i, 0.5), mod(i, 7), mod(r, -2.5), atan2(r, i), sqrt(x) FROM t",
        "SELECT id, sin(r), cos(i), tan(x), asin(r / 100), acos(n), atan(s) FROM t",
        "SELECT id, sinh(r / 50), cosh(i), tanh(x), asinh(r), acosh(n), atanh(r / 200) FROM t",
        "SELECT id, radians(r), degrees(i), pi(), sign(r), sign(s), sign(b), sign(x) FROM t",
        "SELECT sum(ceil(r)), max(ln(i)), count(sign(x)) FROM t GROUP BY sign(i) ORDER BY 1",
    ]);
}

#[test]
fn text_and_blob_functions() {
    all(&[
        "SELECT id, quote(i), quote(r), quote(s), quote(b), quote(x), quote(NULL) FROM t",
        "SELECT id, unicode(s), unicode(b), unicode(i), unicode(''), octet_length(s), octet_length(r), octet_length(b) FROM t",
        "SELECT id, concat(i, s, NULL, r), concat(b), concat_ws(', ', i, s, x), concat_ws(NULL, i), concat_ws(x, s, r) FROM t",
        "SELECT id, unhex(hex(s)), unhex(s), unhex(x, ' -'), unhex('ab cd', ' '), unhex(NULL), unhex('a', NULL) FROM t",
        "SELECT id, length(zeroblob(i % 50)), zeroblob(-1), typeof(zeroblob(2)) FROM t",
        "SELECT unistr('a\\u00e9\\\\b\\+01F600\\0041\\U0001F600'), unistr(NULL) FROM t LIMIT 1",
    ]);
    let db = fixture();
    check_error(db, "SELECT unistr('\\q') FROM t", "invalid Unicode escape");
    check_error(
        db,
        "SELECT zeroblob(2000000000) FROM t",
        "string or blob too big",
    );
}

#[test]
fn iif_truth_tests_and_not_glob() {
    all(&[
        "SELECT id, iif(i, 'yes', 'no'), iif(s > 'm', r), if(x, 1, b, 2, 3), iif(NULL, 1, 2, 3) FROM t",
        "SELECT id, i IS TRUE, r IS NOT TRUE, s IS FALSE, x IS NOT FALSE, (b IS TRUE) + 1 FROM t",
        "SELECT id FROM t WHERE x IS NOT FALSE AND s IS NOT TRUE",
        "SELECT id, s NOT GLOB '*a*', c NOT GLOB 'A*' FROM t WHERE s NOT GLOB '[0-9]*'",
        "SELECT id, s NOT LIKE '%\\%%' ESCAPE '\\' FROM t",
        "SELECT iif(i > 0, 'pos', 'other') AS k, count(*) FROM t GROUP BY k ORDER BY k",
    ]);
    let db = fixture();
    check_error(
        db,
        "SELECT iif(i) FROM t",
        "wrong number of arguments to function iif()",
    );
    check_error(
        db,
        "SELECT ceil(r, 2) FROM t",
        "wrong number of arguments to function ceil()",
    );
    check_error(
        db,
        "SELECT log(1, 2, 3) FROM t",
        "wrong number of arguments to function log()",
    );
}

/// A function SQLite has and corescan does not compute is refused naming corescan, never with
/// SQLite's "no such function" (which reads as a typo); a real typo keeps SQLite's words.
#[test]
fn refusals_of_sqlite_functions_name_corescan() {
    let db = fixture();
    for (sql, needle) in [
        (
            "SELECT random() FROM t",
            "not supported by corescan query: random()",
        ),
        (
            "SELECT group_concat(s) FROM t",
            "not supported by corescan query: group_concat()",
        ),
        (
            "SELECT like('a%', s) FROM t",
            "not supported by corescan query: like()",
        ),
        (
            "SELECT sqlite_version() FROM t",
            "not supported by corescan query: sqlite_version()",
        ),
        ("SELECT pritnf('%d', i) FROM t", "no such function: pritnf"),
    ] {
        check_error(db, sql, needle);
    }
}

/// `SELECT DISTINCT`: each distinct row once, shown as its first row has it (`'a'`/`'A'`
/// under NOCASE, `1`/`1.0` without a type, trailing spaces under RTRIM), in the order of the
/// first rows, or by `ORDER BY` with ties in that order; under every core count and backend.
#[test]
fn select_distinct() {
    let db = fixture();
    for sql in [
        "SELECT DISTINCT s FROM t",
        "SELECT DISTINCT c FROM t",
        "SELECT DISTINCT x FROM t",
        "SELECT DISTINCT rt, i % 3 FROM t WHERE i IS NOT NULL",
        "SELECT DISTINCT * FROM t",
        "SELECT DISTINCT typeof(x), x > 0 AS p FROM t ORDER BY p DESC",
        "SELECT DISTINCT c COLLATE BINARY, lower(s) FROM t ORDER BY 2 LIMIT 7 OFFSET 2",
        "SELECT DISTINCT i % 5 FROM t LIMIT 3",
        "SELECT DISTINCT upper(c) FROM t LIMIT 4 OFFSET 1",
        "SELECT ALL s FROM t LIMIT 5",
    ] {
        QueryTester::new(db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    for (sql, needle) in [
        (
            "SELECT DISTINCT count(*) FROM t",
            "SELECT DISTINCT with GROUP BY or aggregates",
        ),
        (
            "SELECT DISTINCT s FROM t ORDER BY r",
            "not among its columns",
        ),
        (
            "SELECT DISTINCT abs(i) FROM t LIMIT 2",
            "stops at the LIMIT",
        ),
        ("SELECT DISTINCT ON (s) s FROM t", "DISTINCT ON"),
    ] {
        check_error(db, sql, needle);
    }
}
