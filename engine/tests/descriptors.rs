//! A process that scans again and again keeps a bounded number of descriptors open: glommio
//! 0.9 leaks an eventfd for every executor it builds (DataDog/glommio#448), so the engine
//! reuses its executors rather than building new ones for every scan.
//!
//! A test binary of its own: no other test's executors open or leak descriptors meanwhile.

use engine::q6::{run_q6, Q6Params};
use engine::{spread, IoBackend, IoChoice, ScanSettings, SqpollMode};
use partitioner::TablePlan;

#[path = "engine/fixture.rs"]
#[allow(dead_code)]
mod fixture;

use fixture::{make_lineitem, test_dir};

/// The eventfds this process holds.
fn eventfds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().contains("eventfd"))
        .count()
}

#[test]
fn repeated_scans_do_not_accumulate_eventfds() {
    let dir = test_dir("descriptors");
    let path = dir.join("li.db");
    make_lineitem(&path, 3_000, 4096);
    let plan = TablePlan::open(&path, "lineitem").unwrap();
    let settings = ScanSettings {
        readahead: 8,
        coalesce_kib: 64,
        io: IoChoice::Fixed(IoBackend::Dma),
        sqpoll: SqpollMode::Off,
        faults: engine::faults::Faults::NONE,
        memory: None,
    };
    let scan = || run_q6(&plan, &spread(2), &Q6Params::default(), &settings).unwrap();
    let first = scan();
    let before = eventfds();
    for _ in 0..40 {
        assert_eq!(scan().revenue, first.revenue);
    }
    let grown = eventfds().saturating_sub(before);
    // 40 scans of 2 executors each leaked 80 before.
    assert!(
        grown == 0,
        "40 scans left {grown} more eventfds open ({before} before)"
    );
}
