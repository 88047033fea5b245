//! The same answer for every core count, readahead window and coalescing size.

use engine::q6::{run_q6, Q6Params};
use engine::{spread, IoBackend, IoChoice, ScanSettings, SqpollMode};

const BACKENDS: [IoBackend; 4] = [
    IoBackend::Dma,
    IoBackend::Uring,
    IoBackend::Pread,
    IoBackend::Mmap,
];
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
        for (io, cores) in BACKENDS.iter().flat_map(|&io| [1, 2, 3].map(|c| (io, c))) {
            for readahead in [0, 1, 4, 32, 256] {
                for coalesce_kib in [0, 128] {
                    let settings = ScanSettings {
                        readahead,
                        coalesce_kib,
                        io: IoChoice::Fixed(io),
                        sqpoll: SqpollMode::Off,
                        faults: engine::faults::Faults::NONE,
                        memory: None,
                    };
                    let what = format!("{page_size} B pages, {cores} cores, {settings:?}");
                    let direct = matches!(io, IoBackend::Dma | IoBackend::Uring);
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
                    assert_eq!(r.io.backend, io.name(), "{what}");
                    assert_eq!(r.io.o_direct, direct, "{what}: disk-backed target dir");
                    assert_eq!(
                        r.io_uring_enters.is_some(),
                        io == IoBackend::Uring,
                        "{what}"
                    );
                    let in_flight = r.executors.iter().map(|e| e.max_in_flight_pages).max();
                    // The window is filled with whole reads: at most one read past its edge.
                    let max_read = (coalesce_kib * 1024 / page_size).max(1);
                    assert!(
                        in_flight.unwrap() < readahead.max(1) + max_read,
                        "{what}: {in_flight:?}"
                    );
                    if coalesce_kib == 0 {
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
    let dma = ScanSettings {
        io: IoChoice::Fixed(IoBackend::Dma),
        ..ScanSettings::defaults(4096)
    };
    let r = run_q6(&plan, &spread(3), &Q6Params::default(), &dma).unwrap();
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

/// Drops the file's pages from the page cache (they are clean: the fixture was synced).
fn evict(path: &std::path::Path) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: advice only.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0);
}

#[test]
fn auto_reads_cached_and_small_tables_through_the_cache_and_large_cold_ones_directly() {
    let dir = test_dir("auto");
    let path = dir.join("li.db");
    make_lineitem(&path, 20_000, 4096);
    let plan = TablePlan::open(&path, "lineitem").unwrap();
    let auto = ScanSettings::defaults(4096);
    assert_eq!(auto.io, IoChoice::Auto);
    // Its leaves fit one readahead window: buffered reads, warm (the file was just written,
    // then read once buffered) and cold (evicted; the reads leave the pages cached for the
    // next query).
    let bytes = plan.leaves.len() as u64 * 4096;
    assert!(bytes <= engine::AUTO_BUFFERED_BYTES, "{bytes}");
    let _ = std::fs::read(&path).unwrap();
    let warm = run_q6(&plan, &spread(2), &Q6Params::default(), &auto).unwrap();
    assert_eq!(warm.io.backend, "pread", "{:?}", warm.io.notice);
    assert!(warm.io.notice.as_deref().unwrap().starts_with("auto: "));
    evict(&path);
    let cold = run_q6(&plan, &spread(2), &Q6Params::default(), &auto).unwrap();
    assert_eq!(cold.io.backend, "pread", "{:?}", cold.io.notice);
    assert_eq!(cold.revenue, warm.revenue);
    // A larger table: mapped when cached, the DMA path when cold.
    let big = dir.join("big.db");
    make_lineitem(&big, 60_000, 4096);
    let plan = TablePlan::open(&big, "lineitem").unwrap();
    assert!(plan.leaves.len() as u64 * 4096 > engine::AUTO_BUFFERED_BYTES);
    let _ = std::fs::read(&big).unwrap();
    let warm = run_q6(&plan, &spread(2), &Q6Params::default(), &auto).unwrap();
    assert_eq!(warm.io.backend, "mmap", "{:?}", warm.io.notice);
    evict(&big);
    let cold = run_q6(&plan, &spread(2), &Q6Params::default(), &auto).unwrap();
    assert_eq!(cold.io.backend, "dma", "{:?}", cold.io.notice);
    assert_eq!(cold.revenue, warm.revenue);
}

#[test]
fn sqpoll_runs_only_where_an_idle_cpu_can_host_it() {
    let dir = test_dir("sqpoll");
    let path = dir.join("li.db");
    make_lineitem(&path, 5_000, 4096);
    let plan = TablePlan::open(&path, "lineitem").unwrap();
    let cpus = engine::available_cpus();
    let uring = |sqpoll| ScanSettings {
        io: IoChoice::Fixed(IoBackend::Uring),
        sqpoll,
        ..ScanSettings::defaults(4096)
    };
    let all = spread(cpus.len());
    // Every CPU runs an executor: auto leaves SQPOLL off and on is refused.
    let r = run_q6(&plan, &all, &Q6Params::default(), &uring(SqpollMode::Auto)).unwrap();
    assert!(!r.io.sqpoll && r.io.sqpoll_cpu.is_none(), "{:?}", r.io);
    let err = run_q6(&plan, &all, &Q6Params::default(), &uring(SqpollMode::On)).unwrap_err();
    assert!(err.to_string().contains("idle CPU"), "{err}");
    // SQPOLL on another backend is a usage error, not silently ignored.
    let dma_sqpoll = ScanSettings {
        io: IoChoice::Fixed(IoBackend::Dma),
        sqpoll: SqpollMode::On,
        ..ScanSettings::defaults(4096)
    };
    assert!(run_q6(&plan, &all, &Q6Params::default(), &dma_sqpoll).is_err());
    // auto means "where it can run": with a backend that has none it runs without, and says so
    // (a topology file with io = "auto" and sqpoll = "auto" must not fail on a cold table).
    let dma_auto = ScanSettings {
        sqpoll: SqpollMode::Auto,
        ..dma_sqpoll
    };
    let r = run_q6(&plan, &spread(1), &Q6Params::default(), &dma_auto).unwrap();
    assert!(!r.io.sqpoll, "{:?}", r.io);
    let notice = r.run.io.notice.unwrap_or_default();
    assert!(notice.contains("no SQ poll thread"), "{notice}");
    let one = spread(1);
    let r = run_q6(&plan, &one, &Q6Params::default(), &uring(SqpollMode::Auto)).unwrap();
    let expected = run_q6(&plan, &one, &Q6Params::default(), &uring(SqpollMode::Off)).unwrap();
    assert_eq!(r.revenue, expected.revenue);
    if cpus.len() < 2 {
        // One CPU: no idle CPU can host a poll thread, so auto runs without one.
        assert!(!r.io.sqpoll, "{:?}", r.io);
        return;
    }
    // One executor leaves a CPU idle: auto gives it the poll thread, unless the kernel refuses
    // SQPOLL, which the backend then says (and runs a plain ring).
    if !r.io.sqpoll {
        let notice = r.run.io.notice.unwrap_or_default();
        assert!(
            notice.contains("refused SQPOLL"),
            "no poll thread and no reason: {notice}"
        );
        return;
    }
    let poll_cpu = r.io.sqpoll_cpu.unwrap();
    assert_ne!(poll_cpu, one[0].cpu, "never on the executor's own CPU");
    assert!(
        r.executors[0].sqpoll_cpu_s.is_some(),
        "poll thread CPU time measured"
    );
}
