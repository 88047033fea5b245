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
        // As a condition, IS TRUE/FALSE is the jump code of its operand: an AND or OR inside
        // stops at the operand that decides, and the bad ESCAPE is never reached (tester
        // table seed 661617571179855438); NULL decides as the test takes it.
        "SELECT count(*) FROM t WHERE ('apple' AND (s LIKE '%' ESCAPE 'ab')) IS FALSE",
        "SELECT id FROM t WHERE (NULL AND s LIKE '%' ESCAPE 'ab') IS NOT TRUE AND (NULL OR s GLOB '*' OR s LIKE 'a' ESCAPE 'ab') IS NOT FALSE",
        "SELECT id, CASE WHEN (0 AND s LIKE '%' ESCAPE 'ab') IS NOT TRUE THEN 'y' END FROM t WHERE NOT ((1 OR s LIKE '%' ESCAPE 'ab') IS FALSE)",
        "SELECT i IS TRUE, i IS NOT TRUE, r IS FALSE, r IS NOT FALSE, count(*) FROM t GROUP BY 1, 2, 3, 4",
        "SELECT id, s NOT GLOB '*a*', c NOT GLOB 'A*' FROM t WHERE s NOT GLOB '[0-9]*'",
        "SELECT id, s NOT LIKE '%\\%%' ESCAPE '\\' FROM t",
        "SELECT iif(i > 0, 'pos', 'other') AS k, count(*) FROM t GROUP BY k ORDER BY k",
    ]);
    let db = fixture();
    // As a value, both operands of the AND are computed (OP_And), as in SQLite.
    check_error(
        db,
        "SELECT ('apple' AND (s LIKE '%' ESCAPE 'ab')) IS FALSE FROM t",
        "ESCAPE expression must be a single character",
    );
    check_error(
        db,
        "SELECT id FROM t WHERE (i AND s LIKE '%' ESCAPE 'ab') IS NOT FALSE",
        "ESCAPE expression must be a single character",
    );
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
            "SELECT json_group_array(s) OVER () FROM t",
            "not supported by corescan query: json_group_array() as a window function",
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
        // Ordered by a column it does not show: that column of each value's first row.
        "SELECT DISTINCT s FROM t ORDER BY r",
        "SELECT DISTINCT c FROM t ORDER BY i DESC, id",
        // The rowid through likely() orders a backward scan whose rows are all distinct
        // (the differential tester's table seed 18323576647953244486).
        "SELECT DISTINCT unlikely(rowid) FROM t ORDER BY 1 DESC LIMIT 3",
        "SELECT DISTINCT likely(id), s FROM t ORDER BY 1 DESC LIMIT 5",
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
            "SELECT DISTINCT abs(i) FROM t LIMIT 2",
            "stops at the LIMIT",
        ),
        ("SELECT DISTINCT ON (s) s FROM t", "DISTINCT ON"),
    ] {
        check_error(db, sql, needle);
    }
}

/// A table of JSON documents as an application writes them: objects with nested arrays,
/// JSON5 forms, huge numbers, strings with escapes and non-ASCII, malformed text, JSONB blobs
/// (`jsonb(...)`), numbers and NULLs in the document column.
fn json_table() -> &'static std::path::Path {
    static DB: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DB.get_or_init(|| {
        let path = crate::scratch_dir("query-json").join("json.db");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA page_size = 1024;
             CREATE TABLE ev(id INTEGER PRIMARY KEY, doc, meta TEXT, n INTEGER);",
        )
        .unwrap();
        let docs = [
            r#"{"user":{"id":7,"name":"ann"},"tags":["a","b"],"amount":2.5,"ok":true}"#,
            r#"{"user":{"id":12,"name":"Zoë"},"tags":[],"amount":"3","ok":false,"x":null}"#,
            r#"{user:{id:0x1F,name:'bob'},tags:['c',],amount:+1.5e3,ok:true,}"#,
            r#"{"user":{"id":99999999999999999999,"name":"big"},"amount":1e400}"#,
            r#"[1, 2.0, "three", [4, {"five": 5}], null, true]"#,
            r#"{"a\"b":{"c.d":[10,20,30]},"e":"line\nbreak \u00e9"}"#,
            r#"{"dup":1,"dup":2}"#,
            "{bad json",
            "  [ ]  ",
            "42",
            "\"just a string\"",
        ];
        let tx = conn.unchecked_transaction().unwrap();
        for i in 0..600i64 {
            let doc = docs[(i as usize * 7) % docs.len()];
            let meta = ["[1,2]", r#"{"k":"v"}"#, "not json", "null"][(i % 4) as usize];
            let sql = match i % 9 {
                // JSONB blobs of valid documents, numbers and NULLs among the text.
                0 => "INSERT INTO ev(doc, meta, n) VALUES (CASE WHEN json_valid(?1) THEN jsonb(?1) ELSE ?1 END, ?2, ?3)",
                1 => "INSERT INTO ev(doc, meta, n) VALUES (NULL, ?2, ?3)",
                _ => "INSERT INTO ev(doc, meta, n) VALUES (?1, ?2, ?3)",
            };
            tx.execute(sql, rusqlite::params![doc, meta, i % 13]).unwrap();
        }
        tx.execute("INSERT INTO ev(doc, meta, n) VALUES (17, '3.5', 1), (2.5, 'x', 2)", [])
            .unwrap();
        tx.commit().unwrap();
        path
    })
}

/// SQLite's JSON functions on application documents, every core count and backend: paths,
/// `->`/`->>`, types, validity, lengths, construction with nested JSON values (their subtype
/// passed on), edits, and grouping by extracted values.
#[test]
fn json_functions() {
    let db = json_table();
    let valid = "json_valid(doc) OR typeof(doc) = 'blob'";
    for sql in [
        format!("SELECT id, json_extract(doc, '$.user.name'), doc ->> '$.amount', doc -> '$.tags', json_type(doc, '$.ok') FROM ev WHERE {valid}"),
        format!("SELECT id, doc ->> 'user', doc -> 0, doc ->> '$[3][1].five', json_extract(doc, '$.user.id', '$.tags[#-1]') FROM ev WHERE {valid}"),
        "SELECT id, json_valid(doc), json_valid(doc, 6), json_valid(doc, 8), json_error_position(doc), json_valid(meta) FROM ev".to_string(),
        format!("SELECT id, json(doc), json_array_length(doc), json_array_length(doc, '$.tags'), json_quote(meta), json_quote(n) FROM ev WHERE {valid}"),
        format!("SELECT id, json_object('id', id, 'user', doc -> '$.user', 'meta', meta, 'm', json(CASE WHEN json_valid(meta) THEN meta END)) FROM ev WHERE {valid}"),
        "SELECT id, json_array(n, meta, json_array(n, n * 1.5), json_quote(meta)) FROM ev".to_string(),
        format!("SELECT id, json_set(doc, '$.x', json('[1,2]'), '$.user.id', n), json_remove(doc, '$.tags', '$.user.name'), json_insert(doc, '$.tags[#]', 'z') FROM ev WHERE {valid}"),
        format!("SELECT id, json_replace(doc, '$.amount', 0), json_patch(doc, '{{\"ok\":null,\"new\":1}}'), json_pretty(doc) FROM ev WHERE {valid}"),
        format!("SELECT id, hex(jsonb(doc)), hex(jsonb_extract(doc, '$.user')), doc -> '$.user' FROM ev WHERE {valid}"),
        format!("SELECT id, json_extract(json_set(doc, '$.y', 2), '$.y'), json_type(json_remove(doc, '$.user'), '$.amount') FROM ev WHERE {valid}"),
        format!("SELECT doc ->> '$.user.name' AS who, count(*), sum(doc ->> '$.user.id'), max(doc ->> '$.amount') FROM ev WHERE {valid} GROUP BY who ORDER BY 2 DESC, 1"),
        format!("SELECT id FROM ev WHERE ({valid}) AND doc ->> '$.ok' = 1 AND json_array_length(doc, '$.tags') > 0"),
        format!("SELECT DISTINCT json_type(doc) FROM ev WHERE {valid}"),
    ] {
        QueryTester::new(db, &sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    // Malformed JSON fails the query as SQLite's does, naming the file, page and rowid.
    check_error(
        db,
        "SELECT json_extract(doc, '$.a') FROM ev",
        "malformed JSON",
    );
    check_error(
        db,
        "SELECT json_extract('{}', 'a') FROM ev",
        "bad JSON path",
    );
    check_error(
        db,
        "SELECT json_type(doc, '$', 1) FROM ev",
        "wrong number of arguments to function json_type()",
    );
    // The JSON subtype kept through CASE, iif, coalesce, nullif and CAST AS TEXT, as SQLite
    // keeps it; through min()/max() refused; an edit beside a reader of another document too.
    for sql in [
        "SELECT json_array(CASE WHEN n THEN json(meta) END, iif(n > 5, json_object('n', n), meta)) FROM ev WHERE json_valid(meta)",
        "SELECT json_object('a', coalesce(json(meta), 1), 'b', nullif(json_array(n), '[3]'), 'c', CAST(json_array(n, n) AS TEXT)) FROM ev WHERE json_valid(meta)",
        "SELECT json_array(CASE n WHEN 1 THEN json('[1]') WHEN 2 THEN json_quote(n) ELSE 'x' END, likely(json('{}'))) FROM ev",
    ] {
        QueryTester::new(db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    check_error(
        db,
        "SELECT json_array(min(json(meta), 'z')) FROM ev WHERE json_valid(meta)",
        "passed through min()",
    );
    check_error(
        db,
        &format!("SELECT json_set(doc, '$.x', 1), json_extract(meta, '$.k') FROM ev WHERE {valid}"),
        "parse cache",
    );
}

/// The JSON aggregates (`json_group_array`, `json_group_object`, their `jsonb_` forms) on
/// application documents, every core count and backend: rows in rowid order, NULLs as `null`,
/// JSON arguments (their subtype) embedded, JSONB documents rendered, duplicate and NULL
/// labels, `DISTINCT`, `FILTER` (a filtered-out row adds nothing, not a `null`), the result's
/// own subtype in the JSON functions around it, and groups spilled under a 1-byte budget.
#[test]
fn json_aggregates() {
    let db = json_table();
    let valid = "json_valid(doc) OR typeof(doc) = 'blob'";
    for sql in [
        format!("SELECT n, json_group_array(doc ->> '$.amount'), json_group_object(id, meta) FROM ev WHERE {valid} GROUP BY n ORDER BY n"),
        "SELECT json_group_array(json(meta)), json_group_object(meta, json_array(n, id)), json_group_array(DISTINCT CASE WHEN id % 2 THEN json(meta) ELSE meta END) FROM ev WHERE json_valid(meta)".to_string(),
        "SELECT json_group_array(DISTINCT meta), json_group_array(n) FILTER (WHERE n > 10), json_group_array(DISTINCT n % 4) FILTER (WHERE id % 2) FROM ev".to_string(),
        "SELECT json_group_object(CASE WHEN id % 5 THEN meta END, n), json_group_object(meta, n) FILTER (WHERE id % 3 = 0) FROM ev".to_string(),
        "SELECT json_object('all', json_group_array(n), 'len', json_array_length(json_group_array(id))), json_group_array(id) -> '$[#-1]', json_array(CASE WHEN count(*) THEN json_group_object(id, n) END) FROM ev WHERE id < 40".to_string(),
        format!("SELECT n % 3, hex(jsonb_group_array(n)), json(jsonb_group_object(id, doc -> '$.user')), json_group_array(doc) FROM ev WHERE {valid} GROUP BY 1 ORDER BY 1"),
        "SELECT n, json_group_array(id) FROM ev GROUP BY n HAVING json_array_length(json_group_array(id)) > 40 ORDER BY 2 DESC LIMIT 3".to_string(),
        "SELECT json_group_array(id) FROM ev WHERE id < 0".to_string(),
    ] {
        QueryTester::new(db, &sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    QueryTester::new(
        db,
        "SELECT id % 97, json_group_array(meta), json_group_object(n, id) FROM ev GROUP BY 1 ORDER BY 1",
    )
    .memory(1)
    .span(&[Axis::Cores])
    .check();
    // A blob that is not JSONB fails the query, as SQLite's does.
    check_error(
        db,
        "SELECT json_group_array(CAST(n AS BLOB)) FROM ev",
        "JSON cannot hold BLOB values",
    );
    check_error(
        db,
        "SELECT json_group_object(DISTINCT meta, n) FROM ev",
        "DISTINCT aggregates must have exactly one argument",
    );
    check_error(
        db,
        "SELECT json_group_object(meta) FROM ev",
        "wrong number of arguments to function json_group_object()",
    );
}

/// `group_concat` and `string_agg`: the non-NULL inputs' text joined in rowid order (the
/// fixture's leaves are out of rowid order in the file), with the default, a given, an empty
/// and a NULL separator, `DISTINCT`, per group and over the whole table.
#[test]
fn group_concat_and_string_agg() {
    let db = fixture();
    for sql in [
        "SELECT group_concat(s), group_concat(i, ' | '), string_agg(r, ''), group_concat(b, NULL) FROM t",
        "SELECT i % 4, group_concat(s), group_concat(DISTINCT c), count(*) FROM t GROUP BY 1 ORDER BY 1",
        "SELECT group_concat(x, 1), group_concat(n, 2.5), length(group_concat(rt)) FROM t WHERE i > 0",
        "SELECT c, group_concat(id, ';') FROM t GROUP BY c ORDER BY 2 DESC LIMIT 5",
        "SELECT group_concat(s) FROM t WHERE 0",
    ] {
        QueryTester::new(db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    check_error(
        db,
        "SELECT group_concat(DISTINCT s, '-') FROM t",
        "DISTINCT aggregates must have exactly one argument",
    );
    check_error(
        db,
        "SELECT group_concat(s, s) FROM t",
        "separator that is not a constant",
    );
    check_error(
        db,
        "SELECT string_agg(s) FROM t",
        "wrong number of arguments to function string_agg()",
    );
}

/// `ORDER BY` inside an aggregate (SQLite 3.44+): rows added in that order, ties in scan
/// order (the fixture's leaves are out of rowid order in the file), `DESC`, `NULLS`,
/// collations and mixed storage classes as keys, `DISTINCT` (the first row of each value in
/// scan order, then sorted), `FILTER`, the JSON aggregates, and `sum`'s overflow in that
/// order; `min`/`max` ignore it, as SQLite does. Spilled groups too.
#[test]
fn aggregate_order_by() {
    let db = fixture();
    for sql in [
        "SELECT group_concat(id ORDER BY x), group_concat(id, ';' ORDER BY s COLLATE NOCASE DESC, r), string_agg(s, '|' ORDER BY i % 3 DESC NULLS FIRST) FROM t",
        "SELECT i % 4, group_concat(DISTINCT c ORDER BY r DESC), count(DISTINCT x ORDER BY id), group_concat(b ORDER BY rt) FROM t GROUP BY 1 ORDER BY 1",
        "SELECT json_group_array(quote(x) ORDER BY n, id DESC), json_group_object(id, quote(s) ORDER BY c), json_group_array(DISTINCT i % 5 ORDER BY r) FROM t",
        "SELECT group_concat(id ORDER BY r) FILTER (WHERE i > 0), sum(i ORDER BY x), total(r ORDER BY s), avg(i ORDER BY 1), min(s ORDER BY id DESC), max(c ORDER BY r) FROM t",
        "SELECT c, group_concat(id ORDER BY x DESC) FROM t GROUP BY c ORDER BY group_concat(id ORDER BY x) LIMIT 7",
    ] {
        QueryTester::new(db, sql)
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
    QueryTester::new(
        db,
        "SELECT id % 53, group_concat(s ORDER BY r DESC), json_group_array(quote(s) ORDER BY x) FROM t GROUP BY 1",
    )
    .memory(1)
    .span(&[Axis::Cores])
    .check();
    check_error(
        db,
        "SELECT abs(i ORDER BY id) FROM t",
        "ORDER BY may not be used with non-aggregate abs()",
    );
    check_error(
        db,
        "SELECT group_concat(s ORDER BY id) OVER () FROM t",
        "ORDER BY may not be used with non-aggregate group_concat()",
    );
    check_error(
        db,
        "SELECT group_concat(s ORDER BY max(id)) FROM t",
        "misuse of aggregate function max()",
    );
}

/// `printf`/`format` over every storage class: conversions, flags, widths and precisions
/// (also from arguments), SQL quoting, thousands separators, missing arguments.
#[test]
fn printf_and_format() {
    all(&[
        "SELECT id, printf('%d|%5.2f|%-8s|%x|%o|%e|%g|%c', i, r, s, i, i, r, r, s) FROM t",
        "SELECT id, printf('%q|%Q|%w|%z', s, s, c, rt), format('%s=%!.15g', s, r), printf('%,d', i * 1000) FROM t",
        "SELECT id, printf('%*.*f|%-*d|%05d|%+d|% d', 8, 3, r, 6, i, i, i, i), printf('%s %s', x), printf(s) FROM t",
        "SELECT id, printf('%.3s|%10.4s|%!.20f|%#x|%lld|%%', b, c, r, i, i), printf(NULL, i), printf('%d') FROM t",
    ]);
}

/// Aggregates with `FILTER (WHERE ...)`: only the rows where the condition holds count, each
/// aggregate under its argument's own collation, grouped and not, with DISTINCT.
#[test]
fn aggregate_filter() {
    all(&[
        "SELECT count(*) FILTER (WHERE i > 0), sum(r) FILTER (WHERE s IS NOT NULL), min(c) FILTER (WHERE r > 0), max(c) FILTER (WHERE i < 0) FROM t",
        "SELECT i % 3, count(DISTINCT c) FILTER (WHERE r > 1), group_concat(s, '/') FILTER (WHERE length(s) < 5), avg(i) FILTER (WHERE x IS NULL) FROM t GROUP BY 1 ORDER BY 1",
        "SELECT count(*) FILTER (WHERE 0), total(i) FILTER (WHERE NULL) FROM t",
    ]);
    check_error(
        fixture(),
        "SELECT abs(i) FILTER (WHERE i > 0) FROM t",
        "FILTER may not be used with non-aggregate abs()",
    );
}
