//! Window functions (issue 26, item 4), compared with SQLite 3.54 on the shared fixture (every
//! storage class in every column, NOCASE and RTRIM columns, a generated column): the ranking
//! functions, `lag`/`lead`, the value functions and the aggregates over `ROWS`, `RANGE` and
//! `GROUPS` frames, named windows, several windows in one query (SQLite computes the last
//! written first, so the rows come in the first one's order, ties in the others'), and the
//! errors SQLite gives, under every core count and I/O backend.

use super::{check_error, check_exact, fixture, Axis, QueryTester};

#[test]
fn ranking_functions_and_lag_lead() {
    let db = fixture();
    for sql in [
        "SELECT id, row_number() OVER (ORDER BY i), rank() OVER (ORDER BY i), dense_rank() OVER (ORDER BY i) FROM t",
        "SELECT id, s, percent_rank() OVER (PARTITION BY i % 3 ORDER BY s), cume_dist() OVER (PARTITION BY i % 3 ORDER BY s) FROM t",
        "SELECT id, ntile(7) OVER (ORDER BY r DESC), ntile(1000) OVER (PARTITION BY c ORDER BY id) FROM t",
        "SELECT id, lag(s) OVER (ORDER BY id), lead(r, 2) OVER (ORDER BY id), lag(x, 3, 'none') OVER (PARTITION BY c ORDER BY id) FROM t",
        "SELECT id, lag(i, -1) OVER (ORDER BY id), lead(i, '2') OVER (ORDER BY id), lag(i, 1.5, s) OVER (ORDER BY id), lag(i, 'abc') OVER (ORDER BY id) FROM t",
        "SELECT id, row_number() OVER () FROM t WHERE i > 0",
        "SELECT id, rank() OVER (ORDER BY c), rank() OVER (ORDER BY rt), dense_rank() OVER (ORDER BY s COLLATE NOCASE DESC NULLS FIRST) FROM t",
    ] {
        QueryTester::new(db, sql)
            .exact_sums()
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
}

#[test]
fn aggregates_over_frames() {
    let db = fixture();
    for sql in [
        "SELECT id, sum(i) OVER (ORDER BY id), count(*) OVER (PARTITION BY c), avg(r) OVER (PARTITION BY i % 4 ORDER BY s) FROM t",
        "SELECT id, total(r) OVER (ORDER BY id ROWS BETWEEN 3 PRECEDING AND 1 FOLLOWING), min(s) OVER (ORDER BY id ROWS 2 PRECEDING) FROM t",
        "SELECT id, max(x) OVER (ORDER BY i ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING), count(x) OVER (ORDER BY i RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM t",
        "SELECT id, sum(i % 1000) OVER (ORDER BY i % 1000 RANGE BETWEEN 10 PRECEDING AND 5 FOLLOWING), count(*) OVER (ORDER BY r DESC RANGE BETWEEN 2.5 PRECEDING AND 2.5 FOLLOWING) FROM t",
        "SELECT id, count(*) OVER (ORDER BY substr(s, 1, 3) RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING), count(*) OVER (ORDER BY CAST(x AS REAL) RANGE 3 PRECEDING), count(*) OVER (ORDER BY nullif(i % 100, 7) DESC RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING) FROM t",
        "SELECT id, group_concat(s, '|') OVER (PARTITION BY i % 5 ORDER BY id GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW), sum(i) OVER (ORDER BY c GROUPS 2 PRECEDING) FROM t",
        // An infinity that left a sliding sum leaves SQLite's real NaN, a NULL, for good
        // (run seed 1796321325862801701).
        "SELECT id, sum(CASE WHEN id % 7 = 0 THEN 1e400 ELSE i % 100 END) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING), total(CASE WHEN id % 5 = 0 THEN -1e400 WHEN id % 11 = 0 THEN 1e400 ELSE 1 END) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING), avg(CASE WHEN id = 30 THEN 1e400 ELSE 2 END) OVER (ORDER BY id ROWS 3 PRECEDING) FROM t",
        "SELECT id, total(CASE WHEN id = 3 THEN -1e400 ELSE 1 END) OVER (ORDER BY id ROWS BETWEEN 3 FOLLOWING AND 5 FOLLOWING) FROM t",
        // A sliding frame's min()/max() keeps the last of equal values (0 and 0.0, 'a' and
        // 'A' under NOCASE), a running one the first (run seed 1796321082883087637).
        "SELECT id, min(x) OVER (ORDER BY id ROWS BETWEEN 3 PRECEDING AND 2 FOLLOWING), max(c) OVER (ORDER BY id ROWS BETWEEN 1 FOLLOWING AND 4 FOLLOWING), typeof(min(n) OVER (PARTITION BY i % 3 ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)), max(c) OVER (ORDER BY id) FROM t",
        "SELECT id, count(*) FILTER (WHERE i > 0) OVER (ORDER BY id), sum(r) FILTER (WHERE s LIKE '%a%') OVER (PARTITION BY c) FROM t",
        "SELECT id, first_value(s) OVER (ORDER BY id ROWS BETWEEN 2 FOLLOWING AND 5 FOLLOWING), last_value(s) OVER (PARTITION BY c ORDER BY i), nth_value(r, 3) OVER (ORDER BY id) FROM t",
        "SELECT id, sum(i) OVER (ORDER BY id ROWS BETWEEN 5 PRECEDING AND 2 PRECEDING), max(c) OVER (ORDER BY c RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM t",
    ] {
        // Sums of reals are exact in corescan (docs/queries.md, "Sums are exact"): the
        // reference is SQLite's windows with exact sums, also as frames slide.
        QueryTester::new(db, sql)
            .exact_sums()
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
}

/// `RANGE` offsets where NULLs sort against the direction's default (`ASC NULLS LAST`,
/// `DESC NULLS FIRST`): a NULL's frame is its NULL peers, and no other frame holds a NULL
/// (differential tester, run seed 1796320722165158954); text and blobs are not moved by the
/// offset, and compare under the order's collation (`c` is NOCASE: run seed
/// 1796321239003486562).
#[test]
fn range_offsets_with_nulls_either_side() {
    let db = fixture();
    for order in ["ASC NULLS LAST", "DESC NULLS FIRST", "ASC", "DESC"] {
        for frame in [
            "RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING",
            "RANGE BETWEEN 1 FOLLOWING AND 30 FOLLOWING",
            "RANGE BETWEEN 20 PRECEDING AND 1 PRECEDING",
        ] {
            let sql = format!(
                "SELECT id, count(*) OVER (ORDER BY nullif(i % 100, 7) {order} {frame}), \
                 group_concat(id) OVER (ORDER BY CASE WHEN i > 0 THEN s ELSE r END {order} {frame}), \
                 count(*) OVER (ORDER BY c {order} {frame}) FROM t"
            );
            QueryTester::new(db, &sql).span(&[Axis::Cores]).check();
        }
    }
}

/// Several windows: the last written is computed first, so the rows come in the first one's
/// order and its ties in the order the others left them; named windows and a base window
/// extended; window results in expressions, `ORDER BY` and under `LIMIT`/`OFFSET`.
#[test]
fn several_windows_named_windows_and_outer_clauses() {
    let db = fixture();
    for sql in [
        "SELECT id, i, s, row_number() OVER (ORDER BY i), row_number() OVER (ORDER BY s) FROM t",
        "SELECT id, row_number() OVER (ORDER BY c), row_number() OVER (ORDER BY i % 3), row_number() OVER (ORDER BY c) FROM t",
        "SELECT id, sum(i % 1000) OVER w, rank() OVER w FROM t WINDOW w AS (PARTITION BY c ORDER BY r)",
        "SELECT id, sum(i) OVER (w ORDER BY id ROWS 1 PRECEDING) FROM t WINDOW w AS (PARTITION BY i % 2)",
        "SELECT id, i - lag(i) OVER (ORDER BY id) AS delta, i + 1 FROM t ORDER BY delta DESC, id LIMIT 20",
        "SELECT id, abs(i) + lag(i) OVER (ORDER BY id) FROM t LIMIT 20 OFFSET 3",
        "SELECT id, row_number() OVER (ORDER BY r) AS rn FROM t ORDER BY rn DESC LIMIT 5 OFFSET 3",
        "SELECT s, rank() OVER (ORDER BY s) FROM t LIMIT 10 OFFSET 5",
        "SELECT id FROM t ORDER BY row_number() OVER (ORDER BY x DESC), id LIMIT 10",
        "SELECT id, count(*) OVER () FROM t WHERE i > 1000000",
        "SELECT id, g, rank() OVER (ORDER BY g) FROM t LIMIT 0",
        // An ORDER BY alias or position copies the result column, whose windows are then
        // windows of their own, computed before the others (differential tester, run seed
        // 1796319933463168079); windows equal but for their frames are distinct windows.
        "SELECT id, typeof(rank() OVER (PARTITION BY CAST(n AS DATE))), row_number() OVER (ORDER BY (x <> n) DESC NULLS FIRST) FROM t WHERE n ORDER BY 2 DESC, id",
        "SELECT id, rank() OVER (PARTITION BY c) AS rk, row_number() OVER (ORDER BY i) FROM t ORDER BY rk, id",
        "SELECT id, count(*) OVER (ORDER BY c ROWS 1 PRECEDING), row_number() OVER (ORDER BY s), count(*) OVER (ORDER BY c) FROM t",
        // An ORDER BY term naming a result column (alias, position or the same expression)
        // is a copy SQLite's sorter shows in place of the column (run seed
        // 1796320841025619827): here the copy's row numbers follow the scan, the column's
        // would follow rank()'s order.
        "SELECT id, row_number() OVER (ORDER BY 100), rank() OVER (ORDER BY i) FROM t ORDER BY 2",
        "SELECT id, row_number() OVER (ORDER BY 100) AS rn, rank() OVER (ORDER BY i), rank() OVER (ORDER BY s) FROM t ORDER BY rn DESC",
        "SELECT id, row_number() OVER (ORDER BY 100), rank() OVER (ORDER BY i) FROM t ORDER BY row_number() OVER (ORDER BY 100)",
        "SELECT id, row_number() OVER (ORDER BY 100) AS rn, rank() OVER (ORDER BY i) FROM t ORDER BY rn + 0, id",
        // A window function's result carries its argument's COLLATE (run seed
        // 1796320172499275171: 'apple' and 'Apple' tie under NOCASE).
        "SELECT id, max(s COLLATE NOCASE) OVER (PARTITION BY i % 7) FROM t ORDER BY 2, id",
    ] {
        QueryTester::new(db, sql)
            .exact_sums()
            .span(&[Axis::Cores, Axis::Io])
            .check();
    }
}

/// SQLite's own errors for misused windows, and corescan's refusals naming what it does not
/// compute.
#[test]
fn window_errors_and_refusals() {
    let db = fixture();
    // A sliding integer sum beside the largest integers: SQLite's state turns real for good
    // once a real, text or blob value was in the frame, and does not overflow.
    let answer = check_exact(
        db,
        "SELECT id, sum(i) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM t WHERE r > 0",
    );
    assert!(answer.is_ok(), "SQLite answers: {answer:?}");
    for (sql, needle) in [
        (
            "SELECT row_number() FROM t",
            "misuse of window function row_number()",
        ),
        (
            "SELECT id FROM t WHERE row_number() OVER () > 1",
            "misuse of window function row_number()",
        ),
        (
            "SELECT sum(i) OVER (ORDER BY i ROWS BETWEEN 1 FOLLOWING AND CURRENT ROW) FROM t",
            "unsupported frame specification",
        ),
        (
            "SELECT sum(i) OVER (ORDER BY i, r RANGE 1 PRECEDING) FROM t",
            "RANGE with offset PRECEDING/FOLLOWING requires one ORDER BY expression",
        ),
        (
            "SELECT sum(i) OVER (ROWS -1 PRECEDING) FROM t",
            "frame starting offset must be a non-negative integer",
        ),
        (
            "SELECT sum(i) OVER (ORDER BY i RANGE BETWEEN 'x' PRECEDING AND CURRENT ROW) FROM t",
            "frame starting offset must be a non-negative number",
        ),
        (
            "SELECT sum(DISTINCT i) OVER () FROM t",
            "DISTINCT is not supported for window functions",
        ),
        (
            "SELECT row_number() FILTER (WHERE i > 1) OVER () FROM t",
            "FILTER clause may only be used with aggregate window functions",
        ),
        (
            "SELECT ntile(0) OVER () FROM t",
            "argument of ntile must be a positive integer",
        ),
        (
            "SELECT nth_value(i, 0) OVER () FROM t",
            "second argument to nth_value must be a positive integer",
        ),
        ("SELECT sum(i) OVER w FROM t", "no such window: w"),
        (
            "SELECT sum(i) OVER (w ORDER BY i) FROM t WINDOW w AS (ORDER BY r)",
            "cannot override ORDER BY clause of window: w",
        ),
        (
            "SELECT json_group_array(i) OVER () FROM t",
            "json_group_array() as a window function",
        ),
        // SQLite's RANGE cursors step differently where the offset's sum rounds: refused.
        (
            "SELECT sum(i) OVER (ORDER BY i RANGE BETWEEN 10 PRECEDING AND 5 FOLLOWING) FROM t",
            "a RANGE frame with an offset over integers",
        ),
        (
            "SELECT DISTINCT i, row_number() OVER () FROM t",
            "window functions with SELECT DISTINCT",
        ),
        (
            "SELECT sum(i) OVER (ORDER BY id ROWS 2 PRECEDING EXCLUDE CURRENT ROW) FROM t",
            "EXCLUDE in a window frame",
        ),
        (
            "SELECT abs(i), row_number() OVER () AS n FROM t ORDER BY n LIMIT 3",
            "SQLite's sorter never computes",
        ),
    ] {
        check_error(db, sql, needle);
    }
}

/// `group_concat` over frames that start after the row, on a table of empty strings, NULLs
/// and short texts: SQLite's `groupConcatInverse` removes a value and one separator's length
/// from the front, so empty strings can empty the text before the frame is, and the next
/// value then starts it without a separator. Which values that touches depends on the order
/// in which SQLite steps, removes and returns rows (`sqlite3WindowCodeStep`), followed unit
/// by unit for `ROWS` and `GROUPS` (the differential tester's table seed
/// 16448406271645900388: `'8'` where removing the rows before the frame in one go gave
/// `'|8'`).
#[test]
fn group_concat_over_frames_after_the_row_with_empty_strings() {
    let dir = crate::scratch_dir("query-over-concat");
    let path = dir.join("empty.db");
    let _ = std::fs::remove_file(&path);
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch("CREATE TABLE e(id INTEGER PRIMARY KEY, v TEXT, k INT)")
        .unwrap();
    let pool = [
        Some(""),
        Some(""),
        Some("a"),
        Some("bc"),
        None,
        Some("xyz"),
        Some(""),
    ];
    // A fixed pseudo-random sequence (no seed to carry): every value after every other.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for id in 0..120 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = pool[(x % pool.len() as u64) as usize];
        db.execute(
            "INSERT INTO e(id, v, k) VALUES (?1, ?2, ?3)",
            rusqlite::params![id, v, ((x >> 8) % 4) as i64],
        )
        .unwrap();
    }
    drop(db);
    for units in ["ROWS", "GROUPS"] {
        for (a, b) in [(1, 2), (3, 5), (1, 1), (0, 2), (2, 1), (1, 4)] {
            let sql = format!(
                "SELECT id, group_concat(v, '|') OVER (PARTITION BY k ORDER BY id / 3 \
                 {units} BETWEEN {a} FOLLOWING AND {b} FOLLOWING), \
                 group_concat(v) OVER (ORDER BY id {units} BETWEEN {a} FOLLOWING AND {b} FOLLOWING) \
                 FROM e"
            );
            QueryTester::new(&path, &sql).span(&[Axis::Cores]).check();
        }
    }
}
