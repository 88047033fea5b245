//! Every fallback's notice survives: when several decisions change what runs (`auto`'s choice,
//! SQPOLL left off, io_uring missing, DMA memory cut), the report keeps each one's notice.
//!
//! Faults are read once per process from `CORESCAN_FAULTS`, so each case runs this test binary
//! again as a child with the fault set, and the child's test checks that it reached the faulty
//! path: the backend that ran, the notice, and SQLite's answer.

use std::process::Command;

use engine::{run_q6, spread, IoBackend, IoChoice, Q6Params, ScanSettings, SqpollMode};
use partitioner::TablePlan;

use crate::fixture::{make_lineitem, sqlite_q6, test_dir};

/// Set in the child to the case it runs.
const CASE_ENV: &str = "CORESCAN_NOTICE_CASE";

/// Runs `case` in a child process with `faults` injected; the child's test must pass.
fn run_child(case: &str, faults: &str) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "notices::fallback_case",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CASE_ENV, case)
        .env(engine::faults::FAULTS_ENV, faults)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "case {case} with {faults}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&format!("checked case {case}")), "{stdout}");
}

#[test]
fn io_uring_missing_keeps_the_auto_and_sqpoll_notices() {
    run_child("io_uring", "io_uring");
}

#[test]
fn memlock_cut_keeps_the_sqpoll_notice() {
    run_child("memlock", "memlock");
}

/// The child's side, started by [`run_child`] with a fault injected.
#[test]
#[ignore = "runs as a child process of the notices tests, with CORESCAN_FAULTS set"]
fn fallback_case() {
    let case = std::env::var(CASE_ENV).expect("started by run_child, which names the case");
    let dir = test_dir(&format!("notices-{case}"));
    let path = dir.join("li.db");
    make_lineitem(&path, 5_000, 4096);
    let plan = TablePlan::open(&path, "lineitem").unwrap();
    let (revenue, matched) = sqlite_q6(&path);
    let notice = |r: &engine::ScanReport| r.io.notice.clone().unwrap_or_default();
    match case.as_str() {
        "io_uring" => {
            // auto on a cached table chooses mmap; on dma it would fall back to pread. Both
            // must keep auto's notice and the SQPOLL one.
            let settings = ScanSettings {
                io: IoChoice::Auto,
                sqpoll: SqpollMode::Auto,
                ..ScanSettings::defaults(4096)
            };
            let r = run_q6(&plan, &spread(1), &Q6Params::default(), &settings).unwrap();
            let n = notice(&r);
            assert!(n.contains("auto: "), "{n}");
            assert!(n.contains("no SQ poll thread"), "{n}");
            assert_eq!((r.revenue.clone(), r.rows_matched), (fmt(revenue), matched));
            let dma = ScanSettings {
                io: IoChoice::Fixed(IoBackend::Dma),
                ..settings
            };
            let r = run_q6(&plan, &spread(1), &Q6Params::default(), &dma).unwrap();
            let n = notice(&r);
            assert_eq!(r.io.backend, "pread", "{n}");
            assert!(n.contains("no SQ poll thread"), "{n}");
            assert!(n.contains("io_uring is unavailable"), "{n}");
            assert_eq!((r.revenue.clone(), r.rows_matched), (fmt(revenue), matched));
        }
        "memlock" => {
            let settings = ScanSettings {
                io: IoChoice::Fixed(IoBackend::Dma),
                sqpoll: SqpollMode::Auto,
                ..ScanSettings::defaults(4096)
            };
            let r = run_q6(&plan, &spread(1), &Q6Params::default(), &settings).unwrap();
            let n = notice(&r);
            assert_eq!(r.io.backend, "dma", "{n}");
            assert!(n.contains("no SQ poll thread"), "{n}");
            assert!(n.contains("RLIMIT_MEMLOCK is 64 KiB"), "{n}");
            assert_eq!((r.revenue.clone(), r.rows_matched), (fmt(revenue), matched));
        }
        other => panic!("unknown case {other}"),
    }
    println!("checked case {case}");
}

fn fmt(revenue: i128) -> String {
    engine::q6::format_ten_thousandths(revenue)
}
