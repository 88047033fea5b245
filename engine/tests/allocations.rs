//! The scan loop allocates nothing per page or per row in the steady state, under every
//! backend: a counting global allocator measures a scan of a table and of a table ten times
//! its size, and the difference (what the extra pages cost) must stay far below one
//! allocation per page.
//!
//! This is its own test binary with one test, so no other test's allocations are counted.

#[path = "engine/fixture.rs"]
#[allow(dead_code)]
mod fixture;

use engine::q6::{run_q6, Q6Params};
use engine::{spread, IoBackend, IoChoice, ScanSettings, SqpollMode};
use partitioner::TablePlan;

#[path = "engine/counting.rs"]
mod counting;

/// Allocations made by one Q6 scan of `plan`.
fn allocations_of_a_scan(plan: &TablePlan, io: IoBackend, readahead: u32) -> (u64, u64, u64) {
    let settings = ScanSettings {
        readahead,
        coalesce_kib: 128,
        io: IoChoice::Fixed(io),
        sqpoll: SqpollMode::Off,
        faults: engine::faults::Faults::NONE,
        memory: None,
    };
    let before = counting::allocations();
    let report = run_q6(plan, &spread(2), &Q6Params::default(), &settings).unwrap();
    let used = counting::allocations() - before;
    assert_eq!(report.io.backend, io.name());
    (used, report.pages_read, report.reads_submitted)
}

#[test]
fn no_allocation_per_page_or_row() {
    let dir = fixture::test_dir("allocations");
    let (small, large) = (dir.join("small.db"), dir.join("large.db"));
    fixture::make_lineitem(&small, 4_000, 4096);
    fixture::make_lineitem(&large, 120_000, 4096);
    let small = TablePlan::open(&small, "lineitem").unwrap();
    let large = TablePlan::open(&large, "lineitem").unwrap();
    let rows = 116_000.0;
    let mut failures = Vec::new();
    for io in [
        IoBackend::Dma,
        IoBackend::Uring,
        IoBackend::Pread,
        IoBackend::Mmap,
    ] {
        for readahead in [0, 32, 1024] {
            // Warm up once (first-use costs such as glommio's per-thread setup are not the
            // steady state), then take the smallest of five measurements of each size.
            let _ = allocations_of_a_scan(&small, io, readahead);
            let measure = |plan: &TablePlan| {
                (0..5)
                    .map(|_| allocations_of_a_scan(plan, io, readahead))
                    .min()
                    .unwrap()
            };
            let (a, pages_a, reads_a) = measure(&small);
            let (b, pages_b, reads_b) = measure(&large);
            let extra_pages = (pages_b - pages_a) as f64;
            let per_page = b.saturating_sub(a) as f64 / extra_pages;
            let per_read = b.saturating_sub(a) as f64 / (reads_b - reads_a).max(1) as f64;
            println!(
                "{io:?} readahead {readahead}: {a} allocations for {pages_a} pages, {b} for \
                 {pages_b}: {per_page:.4} per extra page, {:.5} per extra row, {per_read:.3} \
                 per extra read",
                b.saturating_sub(a) as f64 / rows
            );
            // The loops allocate nothing per page or row: with the sync backends the whole scan
            // costs the same few hundred allocations whatever the table's size. glommio
            // allocates inside each read it tracks (its request source, wakers, the reactor
            // pass's timer: measured 9-25 per read, noisy from run to run), well under one per
            // page with reads of up to 32 pages; one allocation of ours per page would show as
            // at least one more per page on top of that.
            let over = if io == IoBackend::Dma {
                per_page >= 1.0
            } else {
                per_page >= 0.01
            };
            if over {
                failures.push(format!(
                    "{io:?} readahead {readahead}: {per_page:.3} allocations per extra page, \
                     {per_read:.3} per extra read ({a} -> {b})"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
