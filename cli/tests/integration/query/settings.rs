//! The same queries under every backend, core count and readahead window give identical rows
//! (bit for bit, reals included: sums are exact, so they do not depend on the split), and
//! SQLite's.

use super::{Axis, QueryTester, RowPath};

const QUERIES: &[&str] = &[
    "SELECT * FROM t",
    "SELECT id, s FROM t WHERE i > 0 ORDER BY s, id LIMIT 17",
    "SELECT c, count(*), sum(r), avg(r), total(n), min(x), max(x) FROM t GROUP BY c",
    "SELECT count(DISTINCT x), sum(r), avg(CAST(s AS REAL)) FROM t",
    "SELECT c, rt, sum(i * (1 - r)), sum(i * (1 - r) * (1 + r)), avg(r), sum(r), total(x), \
     count(*) FROM t WHERE i > -90 GROUP BY c, rt",
    // Ten-byte text bounds: the decoder's window (bytewise under TEXT, rejecting numbers
    // under NUMERIC).
    "SELECT count(*), sum(r), avg(i % 7) FROM t WHERE s >= '1993-01-01' AND s < '1996-01-01'",
    "SELECT c, count(*), total(r) FROM t WHERE n >= '1993-01-01' AND n < '1996-01-01' \
     AND i > -50 GROUP BY c",
];

#[test]
fn every_backend_core_count_and_window_agree() {
    let db = super::fixture();
    // The first query (a plain projection, which streams) under the full product, rendered
    // path included; the others under every backend, core count and window, each with one of
    // the paths.
    QueryTester::new(db, QUERIES[0])
        .paths(&RowPath::ALL)
        .agree()
        .check();
    for sql in &QUERIES[1..] {
        QueryTester::new(db, *sql)
            .paths(&RowPath::ALL)
            .span(&[Axis::Io, Axis::Cores, Axis::Window])
            .agree()
            .check();
    }
}
