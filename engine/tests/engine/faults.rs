//! Failures during the scan end the run with one error naming the CPU, the file and the page.

use std::io::{Seek, SeekFrom, Write};

use engine::q6::{run_q6, Q6Params};
use engine::{spread, Error, ScanSettings};
use partitioner::TablePlan;

use crate::damaged::{assert_every_backend_names, every_backend, run_with_timeout};
use crate::fixture::{make_lineitem, test_dir};

#[test]
fn a_leaf_damaged_after_planning_names_cpu_and_page() {
    let dir = test_dir("damaged-leaf");
    let path = dir.join("li.db");
    make_lineitem(&path, 5_000, 4096);
    let plan = TablePlan::open(&path, "lineitem").unwrap();
    let victim = plan.leaves[plan.leaves.len() / 2];
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start(u64::from(victim - 1) * 4096))
        .unwrap();
    f.write_all(&[0x42]).unwrap();
    drop(f);
    assert_every_backend_names(&plan, victim, "a page type of 0x42");
    let err = run_q6(
        &plan,
        &spread(2),
        &Q6Params::default(),
        &ScanSettings::defaults(4096),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("CPU "), "{text}");
    assert!(text.contains("li.db"), "{text}");
}

#[test]
fn a_file_truncated_after_planning_is_an_error_not_a_short_answer() {
    let dir = test_dir("truncated");
    let path = dir.join("li.db");
    make_lineitem(&path, 5_000, 4096);
    let plan = TablePlan::open(&path, "lineitem").unwrap();
    let last = *plan.leaves.last().unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(u64::from(last - 1) * 4096).unwrap();
    drop(f);
    for config in every_backend(4096) {
        for readahead in [0, 32] {
            let mut config = config.clone();
            config.settings.readahead = readahead;
            config.settings.coalesce_kib = 128;
            let what = format!("{} readahead {readahead}", config.name);
            match run_with_timeout(&plan, &config).unwrap_or_else(|e| panic!("{e}")) {
                Ok(r) => panic!("{what}: answered {}", r.revenue),
                // SQPOLL on without an idle CPU is refused before any read.
                Err(Error::Config(why)) => assert!(why.contains("idle CPU"), "{what}: {why}"),
                Err(err) => {
                    assert!(
                        err.to_string().contains(&format!("page {last}")),
                        "{what}: {err}"
                    )
                }
            }
        }
    }
}

#[test]
fn unknown_cpus_and_absurd_settings_are_refused() {
    let dir = test_dir("config");
    let path = dir.join("li.db");
    make_lineitem(&path, 100, 4096);
    let plan = TablePlan::open(&path, "lineitem").unwrap();
    let bad_cpu = [engine::ExecutorSpec {
        cpu: 4096,
        weight: 1,
        sqpoll_cpu: None,
    }];
    let err = run_q6(
        &plan,
        &bad_cpu,
        &Q6Params::default(),
        &ScanSettings::defaults(4096),
    );
    assert!(matches!(err, Err(Error::Config(_))), "{err:?}");
    let huge = ScanSettings {
        readahead: 1 << 30,
        ..ScanSettings::defaults(4096)
    };
    assert!(run_q6(&plan, &spread(1), &Q6Params::default(), &huge).is_err());
    assert!(run_q6(
        &plan,
        &[],
        &Q6Params::default(),
        &ScanSettings::defaults(4096)
    )
    .is_err());
}
