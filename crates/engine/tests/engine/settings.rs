//! The same answer for every core count, readahead window and coalescing size.

use engine::{run_q6, spread, Q6Params, ScanSettings};
use partitioner::TablePlan;

use crate::fixture::{make_lineitem, sqlite_q6, test_dir};

#[test]
fn every_setting_gives_sqlites_answer() {
    let dir = test_dir("settings");
    for page_size in [1024, 4096] {
        let path = dir.join(format!("li-{page_size}.db"));
        make_lineitem(&path, 20_000, page_size);
        let (revenue, matched) = sqlite_q6(&path);
        assert!(matched > 100, "the fixture must exercise the filter");
        let plan = TablePlan::open(&path, "lineitem").unwrap();
        for cores in [1, 2, 3] {
            for readahead in [0, 1, 4, 32, 256] {
                for coalesce_kib in [0, 128] {
                    let settings = ScanSettings {
                        readahead,
                        coalesce_kib,
                    };
                    let what = format!("{page_size} B pages, {cores} cores, {settings:?}");
                    let r = run_q6(&plan, &spread(cores), &Q6Params::default(), &settings)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(
                        r.revenue,
                        engine::q6::format_ten_thousandths(revenue),
                        "{what}"
                    );
                    assert_eq!(r.rows_matched, matched, "{what}");
                    assert_eq!(r.rows_scanned, 20_000, "{what}");
                    assert_eq!(r.pages_read, plan.leaves.len() as u64, "{what}");
                    assert_eq!(r.executors.len(), cores, "{what}");
                    let in_flight = r.executors.iter().map(|e| e.max_in_flight_pages).max();
                    if readahead > 0 {
                        assert!(
                            in_flight.unwrap() <= readahead.max(1),
                            "{what}: {in_flight:?}"
                        );
                    }
                    // A read never exceeds a non-zero window, so a 1-page window reads pages.
                    if coalesce_kib == 0 || readahead == 1 {
                        assert_eq!(r.reads_submitted, r.pages_read, "{what}");
                    } else {
                        assert!(r.reads_submitted < r.pages_read, "{what}");
                    }
                }
            }
        }
    }
}

#[test]
fn reports_say_which_path_ran() {
    let dir = test_dir("path");
    let path = dir.join("li.db");
    make_lineitem(&path, 5_000, 4096);
    let plan = TablePlan::open(&path, "LINEITEM").unwrap();
    let r = run_q6(
        &plan,
        &spread(3),
        &Q6Params::default(),
        &ScanSettings::defaults(4096),
    )
    .unwrap();
    assert_eq!(r.io.backend, "dma");
    // The target directory is on a disk here; O_DIRECT must really have been used.
    assert!(r.io.o_direct, "{:?}", r.io);
    assert!(!r.io.sqpoll);
    assert!(r.oversubscribed || r.available_cpus >= 3);
    assert!(r.device.is_some() || r.device_note.is_some());
    let json = serde_json::to_value(&r).unwrap();
    for field in [
        "revenue",
        "rows_scanned",
        "rows_matched",
        "wall_s",
        "pages_read",
        "bytes_read",
        "reads_submitted",
        "io",
        "executors",
        "device",
        "cpu_time",
    ] {
        assert!(json.get(field).is_some(), "missing {field}");
    }
}
