//! `corescan query`'s scan loop allocates nothing per page or per row in the steady state,
//! as `q6`'s does (the engine's own test of that covers `q6`): a counting global allocator
//! measures each query over a table and over one ten times its size, and the difference
//! (what the extra pages cost) must stay far below one allocation per page. The queries are
//! TPC-H Q6 and Q1 as SQL (the batched path: a text window, typed runs, packed group keys)
//! and aggregates the batch cannot take (`LIKE`, `GLOB`, `length`, `CASE`: the row-at-a-time
//! path). Functions that make a new text (`lower`, `substr`, `||`, ...) allocate it per row:
//! their results are owned values.
//!
//! Its own test binary with one test, so no other test's allocations are counted.

use std::path::Path;

use engine::query::run_query;
use engine::{spread, IoBackend, IoChoice, ScanSettings, SqpollMode};

#[path = "../../engine/tests/engine/counting.rs"]
mod counting;

const QUERIES: &[&str] = &[
    // TPC-H Q6.
    "SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
     WHERE l_shipdate >= '1994-01-01' AND l_shipdate < '1995-01-01'
       AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    // TPC-H Q1.
    "SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice),
            sum(l_extendedprice * (1 - l_discount)),
            sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)), avg(l_quantity),
            avg(l_extendedprice), avg(l_discount), count(*)
     FROM lineitem WHERE l_shipdate <= date('1998-12-01', '-90 day')
     GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus",
    // The row-at-a-time path: LIKE, GLOB and length() of a text column borrow it.
    "SELECT l_shipmode, count(*), max(l_quantity),
            sum(CASE WHEN l_comment LIKE '%regular%' THEN 1 ELSE 0 END)
     FROM lineitem GROUP BY l_shipmode",
    "SELECT count(*), sum(length(l_comment)) FROM lineitem
     WHERE l_shipinstruct GLOB '*[DN]*' AND l_comment NOT LIKE 'a%' ESCAPE '!'",
];

/// Allocations made by one run of `sql` over `db` (planning included: the same for both
/// sizes), and the pages it read.
fn allocations_of(db: &Path, sql: &str, io: IoBackend) -> (u64, u64) {
    let settings = ScanSettings {
        readahead: 32,
        coalesce_kib: 128,
        io: IoChoice::Fixed(io),
        sqpoll: SqpollMode::Off,
        faults: engine::faults::Faults::NONE,
        memory: None,
    };
    let before = counting::allocations();
    let planned = corescan_sql::plan_query(db, sql).unwrap();
    let out = run_query(&planned.table, planned.query, &settings, &spread(2)).unwrap();
    let used = counting::allocations() - before;
    let report = out.report;
    assert_eq!(report.io.backend, io.name());
    assert!(!out.rows.is_empty());
    (used, report.pages_read)
}

fn lineitem(path: &Path, scale_factor: f64) {
    let opts = bench::gen::GenOptions {
        out: path.to_path_buf(),
        scale_factor,
        page_size: 4096,
        tables: bench::gen::TableSelection::Lineitem,
        force: true,
    };
    bench::gen::generate(&opts, false).unwrap();
}

#[test]
fn no_allocation_per_page_or_row_in_a_query() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("query-allocations");
    std::fs::create_dir_all(&dir).unwrap();
    let (small, large) = (dir.join("small.db"), dir.join("large.db"));
    lineitem(&small, 0.002);
    lineitem(&large, 0.02);
    let mut failures = Vec::new();
    for io in [IoBackend::Pread, IoBackend::Mmap] {
        for sql in QUERIES {
            // Warm up once, then the smallest of three measurements of each size.
            let _ = allocations_of(&small, sql, io);
            let measure = |db: &Path| (0..3).map(|_| allocations_of(db, sql, io)).min().unwrap();
            let (a, pages_a) = measure(&small);
            let (b, pages_b) = measure(&large);
            let per_page = b.saturating_sub(a) as f64 / (pages_b - pages_a) as f64;
            let head = sql.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
            println!(
                "{io:?} {head}...: {a} allocations for {pages_a} pages, {b} for {pages_b}: \
                 {per_page:.4} per extra page"
            );
            // A few hundred allocations whatever the size (plans, groups, the answer); one per
            // page would show as 1.0 here.
            if per_page >= 0.01 {
                failures.push(format!(
                    "{io:?} {head}...: {per_page:.3} allocations per extra page ({a} -> {b})"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
