//! Every fallback's notice survives: when several decisions change what runs (`auto`'s choice,
//! SQPOLL left off, io_uring missing, DMA memory cut), the report keeps each one's notice.
//!
//! The faults are part of the scan settings ([`ScanSettings::faults`]), so each case injects
//! its own and checks that it reached the faulty path: the backend that ran, the notice, and
//! SQLite's answer.

use engine::faults::Faults;
use engine::q6::{run_q6, Q6Params};
use engine::{spread, IoBackend, IoChoice, RunReport, ScanSettings, SqpollMode};
use partitioner::TablePlan;

use crate::fixture::{make_lineitem, sqlite_q6, test_dir};

/// A 5,000-row lineitem table, its plan and SQLite's Q6 answer (revenue text, rows matched).
fn fixture(case: &str) -> (TablePlan, (String, u64)) {
    let dir = test_dir(&format!("notices-{case}"));
    let path = dir.join("li.db");
    make_lineitem(&path, 5_000, 4096);
    let plan = TablePlan::open(&path, "lineitem").unwrap();
    let (revenue, matched) = sqlite_q6(&path);
    (plan, (fmt(revenue), matched))
}

fn notice(r: &RunReport) -> String {
    r.io.notice.clone().unwrap_or_default()
}

#[test]
fn io_uring_missing_keeps_the_auto_and_sqpoll_notices() {
    let (plan, want) = fixture("io_uring");
    // auto chooses a synchronous backend (pread or mmap); dma would fall back to pread. Both must keep
    // auto's notice and the SQPOLL one.
    let settings = ScanSettings {
        io: IoChoice::Auto,
        sqpoll: SqpollMode::Auto,
        faults: Faults {
            io_uring: true,
            ..Faults::NONE
        },
        ..ScanSettings::defaults(4096)
    };
    let r = run_q6(&plan, &spread(1), &Q6Params::default(), &settings).unwrap();
    let n = notice(&r);
    assert!(n.contains("auto: "), "{n}");
    assert!(n.contains("no SQ poll thread"), "{n}");
    assert_eq!((r.revenue.clone(), r.rows_matched), want);
    let dma = ScanSettings {
        io: IoChoice::Fixed(IoBackend::Dma),
        ..settings
    };
    let r = run_q6(&plan, &spread(1), &Q6Params::default(), &dma).unwrap();
    let n = notice(&r);
    assert_eq!(r.io.backend, "pread", "{n}");
    assert!(n.contains("no SQ poll thread"), "{n}");
    assert!(n.contains("io_uring is unavailable"), "{n}");
    assert_eq!((r.revenue.clone(), r.rows_matched), want);
}

#[test]
fn memlock_cut_keeps_the_sqpoll_notice() {
    let (plan, want) = fixture("memlock");
    let settings = ScanSettings {
        io: IoChoice::Fixed(IoBackend::Dma),
        sqpoll: SqpollMode::Auto,
        faults: Faults {
            memlock: true,
            ..Faults::NONE
        },
        ..ScanSettings::defaults(4096)
    };
    let r = run_q6(&plan, &spread(1), &Q6Params::default(), &settings).unwrap();
    let n = notice(&r);
    assert_eq!(r.io.backend, "dma", "{n}");
    assert!(n.contains("no SQ poll thread"), "{n}");
    assert!(n.contains("RLIMIT_MEMLOCK is 64 KiB"), "{n}");
    assert_eq!((r.revenue.clone(), r.rows_matched), want);
}

#[test]
fn faults_are_per_scan_not_per_process() {
    // The same process, one scan after the other: a fault injected into one scan's settings
    // must not leak into the next (they were read once per process from the environment).
    let (plan, want) = fixture("per-scan");
    let faulty = ScanSettings {
        io: IoChoice::Fixed(IoBackend::Uring),
        faults: Faults {
            io_uring: true,
            ..Faults::NONE
        },
        ..ScanSettings::defaults(4096)
    };
    let r = run_q6(&plan, &spread(1), &Q6Params::default(), &faulty).unwrap();
    assert_eq!(r.io.backend, "pread", "{}", notice(&r));
    assert_eq!((r.revenue.clone(), r.rows_matched), want);
    let healthy = ScanSettings {
        faults: Faults::NONE,
        ..faulty
    };
    let r = run_q6(&plan, &spread(1), &Q6Params::default(), &healthy).unwrap();
    assert_eq!(r.io.backend, "uring", "{}", notice(&r));
    assert!(
        !notice(&r).contains("io_uring is unavailable"),
        "{}",
        notice(&r)
    );
    assert_eq!((r.revenue.clone(), r.rows_matched), want);
}

fn fmt(revenue: i128) -> String {
    engine::q6::format_ten_thousandths(revenue)
}
