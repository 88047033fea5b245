//! The same queries under every backend, core count and readahead window give identical rows
//! (bit for bit, reals included: sums are exact, so they do not depend on the split).

use engine::IoBackend;

use super::{corescan_answer, difference, fixture, settings, sqlite_answer};

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
    let db = fixture();
    for sql in QUERIES {
        let want = sqlite_answer(db, sql);
        let reference = corescan_answer(db, sql, &settings(IoBackend::Pread, 0), 1);
        assert!(
            difference(&want, &reference, true).is_none(),
            "{sql}: reference differs from SQLite: {:?}",
            difference(&want, &reference, true)
        );
        for io in [
            IoBackend::Dma,
            IoBackend::Uring,
            IoBackend::Pread,
            IoBackend::Mmap,
        ] {
            for cores in [1, 2, 3] {
                for readahead in [0, 32] {
                    let got = corescan_answer(db, sql, &settings(io, readahead), cores);
                    if let Some(d) = difference(&reference, &got, false) {
                        panic!("{sql}: {io:?}, {cores} cores, readahead {readahead}: {d}");
                    }
                }
            }
        }
    }
}
