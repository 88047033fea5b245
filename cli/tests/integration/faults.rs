//! I/O fallbacks, each forced with `CORESCAN_FAULTS`: the run still gives SQLite's answer, and
//! its `io` report says which path actually ran and why.

use serde_json::Value;

use std::path::Path;

use crate::{corescan, corescan_with_env, layouts, Run};

/// Runs `corescan q6 --json` on the plain layout with the given faults injected.
fn q6_with_faults(faults: &str, args: &[&str]) -> Run {
    let plain = &layouts()[0];
    let path = plain.path.to_str().expect("a UTF-8 path");
    let mut all = vec!["q6", path, "--table", &plain.table, "--json"];
    all.extend_from_slice(args);
    corescan_with_env(all, &[("CORESCAN_FAULTS", faults)])
}

/// The run's report, checked to hold the oracle's answer.
#[track_caller]
fn answer(run: &Run) -> Value {
    assert_eq!(run.status, 0, "stderr: {}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).expect("json");
    let plain = &layouts()[0];
    let want =
        bench::oracle::q6(&plain.path, &plain.table, &engine::q6::Q6Params::default()).unwrap();
    assert_eq!(v["revenue"], want.revenue());
    v
}

fn notice(v: &Value) -> &str {
    v["io"]["notice"].as_str().unwrap_or("")
}

#[test]
fn o_direct_refused_falls_back_to_buffered_reads() {
    let v = answer(&q6_with_faults("odirect", &["--io", "dma"]));
    assert_eq!(v["io"]["backend"], "pread");
    assert_eq!(v["io"]["o_direct"], false);
    assert!(notice(&v).contains("O_DIRECT refused"), "{}", notice(&v));
    let v = answer(&q6_with_faults("odirect", &["--io", "uring"]));
    assert_eq!(v["io"]["backend"], "uring");
    assert_eq!(v["io"]["o_direct"], false);
    assert!(notice(&v).contains("O_DIRECT refused"), "{}", notice(&v));
}

#[test]
fn tmpfs_files_are_read_through_the_page_cache_when_o_direct_is_off() {
    // No fault injected: what tmpfs and glommio really do.
    let shm = Path::new("/dev/shm");
    assert!(
        shm.is_dir(),
        "this test needs /dev/shm (a tmpfs), which Linux always mounts"
    );
    let plain = &layouts()[0];
    let dir = tempfile::tempdir_in(shm).unwrap();
    let copy = dir.path().join("plain.db");
    std::fs::copy(&plain.path, &copy).unwrap();
    for io in ["dma", "uring"] {
        let run = corescan([
            "q6",
            copy.to_str().unwrap(),
            "--table",
            &plain.table,
            "--io",
            io,
            "--json",
        ]);
        let v = answer(&run);
        assert_eq!(v["io"]["backend"], io);
        // glommio never opens tmpfs files with O_DIRECT; kernels before 6.6 refuse it on tmpfs
        // altogether, later ones accept it. Whichever happened, the report says so.
        let direct = v["io"]["o_direct"].as_bool().unwrap();
        assert_eq!(direct, io == "uring" && tmpfs_takes_o_direct(&copy), "{io}");
        assert_eq!(
            notice(&v).contains("O_DIRECT refused"),
            !direct,
            "{io}: {}",
            notice(&v)
        );
        assert!(!notice(&v).contains("injected"), "{}", notice(&v));
    }
}

/// Whether this kernel's tmpfs accepts O_DIRECT (Linux 6.6 and later).
fn tmpfs_takes_o_direct(path: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .is_ok()
}

#[test]
fn io_uring_unavailable_falls_back_to_pread_threads() {
    for io in ["dma", "uring", "auto"] {
        let v = answer(&q6_with_faults("io_uring", &["--io", io]));
        let backend = v["io"]["backend"].as_str().unwrap();
        assert!(
            backend == "pread" || (io == "auto" && backend == "mmap"),
            "{io}: {backend}"
        );
        if backend == "pread" {
            assert!(
                notice(&v).contains("io_uring is unavailable"),
                "{}",
                notice(&v)
            );
        }
    }
}

#[test]
fn sqpoll_refused_falls_back_to_the_plain_ring() {
    let v = answer(&q6_with_faults(
        "sqpoll",
        &["--io", "uring", "--cores", "1", "--sqpoll", "auto"],
    ));
    assert_eq!(v["io"]["backend"], "uring");
    // The poll thread is only tried with an idle CPU to host it, so the fault is reached only
    // with a second CPU: the project's machines have two or more.
    assert!(
        engine::available_cpus().len() > 1,
        "this test needs 2 CPUs (one for the executor, one idle for its poll thread)"
    );
    assert_eq!(v["io"]["sqpoll"], false);
    assert!(notice(&v).contains("refused SQPOLL"), "{}", notice(&v));
}

#[test]
fn a_low_memlock_limit_shrinks_dma_memory_or_names_the_limit() {
    let v = answer(&q6_with_faults("memlock", &["--io", "dma", "--cores", "1"]));
    assert_eq!(v["io"]["backend"], "dma");
    assert!(
        notice(&v).contains("RLIMIT_MEMLOCK is 64 KiB"),
        "{}",
        notice(&v)
    );
    let run = q6_with_faults("memlock", &["--io", "dma", "--cores", "2"]);
    run.assert_error(&["RLIMIT_MEMLOCK", "ulimit -l"]);
}

#[test]
fn unknown_faults_are_refused() {
    q6_with_faults("gremlins", &[]).assert_error(&["CORESCAN_FAULTS", "gremlins"]);
}

/// Whether transparent huge pages may back a `MADV_HUGEPAGE` region on this kernel.
fn thp_enabled() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|mode| !mode.contains("[never]"))
}

#[test]
fn direct_reads_land_in_huge_page_buffers_when_the_kernel_allows() {
    for io in ["dma", "uring"] {
        let v = answer(&q6_with_faults("", &["--io", io]));
        assert_eq!(v["io"]["backend"], io);
        // The corescan binary's allocator puts glommio's I/O memory on huge pages; the uring
        // backend maps its own.
        assert_eq!(v["io"]["huge_page_buffers"], thp_enabled(), "{io}");
        for e in v["executors"].as_array().unwrap() {
            assert_eq!(e["huge_page_buffers"], thp_enabled(), "{io}: {e}");
        }
    }
    // Paths without buffers of their own say nothing.
    let v = answer(&q6_with_faults("", &["--io", "pread"]));
    assert!(v["io"]["huge_page_buffers"].is_null());
}

#[test]
fn a_file_truncated_during_an_mmap_scan_ends_in_an_error_not_sigbus() {
    // A LINEITEM big enough that a warm mmap scan takes a few tens of milliseconds.
    let dir = crate::scratch_dir("truncated-during-scan");
    let original = dir.join("li.db");
    let opts = bench::gen::GenOptions {
        out: original.clone(),
        scale_factor: 0.05,
        page_size: 4096,
        tables: bench::gen::TableSelection::Lineitem,
        force: false,
    };
    bench::gen::generate(&opts, false).unwrap();
    let want = bench::oracle::q6(&original, "lineitem", &engine::q6::Q6Params::default()).unwrap();
    let size = std::fs::metadata(&original).unwrap().len();
    // `mmap` as asked for (readahead hints), and as `auto` picks it for a cached table (its
    // reads are populated ahead instead).
    for io in ["mmap", "auto"] {
        truncate_during_a_scan(&dir, &original, io, &want.revenue(), size);
    }
}

/// [`a_file_truncated_during_an_mmap_scan_ends_in_an_error_not_sigbus`] with one `--io`.
fn truncate_during_a_scan(dir: &Path, original: &Path, io: &str, revenue: &str, size: u64) {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    let mut outcomes = Vec::new();
    // Truncate at several moments: before the map, during the scan, after it; until one run
    // has proved the fault path: the file shrinking under the map. The warm scan itself takes
    // only a few milliseconds, so the first 30 ms are tried a millisecond apart.
    let mut under_the_map = false;
    let delays = (0u64..30).chain([40, 60, 80, 120, 160, 240, 320, 480]);
    for delay_ms in delays {
        if under_the_map && delay_ms > 40 {
            break;
        }
        let copy = dir.join(format!("copy-{io}-{delay_ms}.db"));
        std::fs::copy(original, &copy).unwrap();
        let _ = std::fs::read(&copy).unwrap(); // warm, as mmap is for
        let child = Command::new(env!("CARGO_BIN_EXE_corescan"))
            .args(["q6", copy.to_str().unwrap(), "--io", io, "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&copy)
            .unwrap()
            .set_len(size / 4)
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            None,
            "{io}: truncated after {delay_ms} ms: killed by a signal; stderr: {stderr}"
        );
        if out.status.success() {
            // The scan finished before the file shrank: SQLite's answer.
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["revenue"], revenue, "{io}: after {delay_ms} ms");
            assert_eq!(v["io"]["backend"], "mmap", "{io}: after {delay_ms} ms");
            outcomes.push(format!("{delay_ms} ms: finished first"));
        } else {
            // Otherwise one error line naming the file.
            assert_eq!(out.status.code(), Some(1), "after {delay_ms} ms: {stderr}");
            assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
            assert!(stderr.starts_with("error: "), "{stderr}");
            assert!(stderr.contains(copy.to_str().unwrap()), "{stderr}");
            // And it says what happened: the file is shorter than it was (a truncation
            // inside a mapped page zeroes its tail without a fault: not "a corrupt page").
            assert!(
                [
                    "shrank while mapped",
                    "is truncated",
                    "short read",
                    "truncated while open"
                ]
                .iter()
                .any(|s| stderr.contains(s)),
                "{io}: after {delay_ms} ms: {stderr}"
            );
            under_the_map |= stderr.contains("shrank while mapped");
            outcomes.push(format!("{delay_ms} ms: {}", stderr.trim()));
        }
    }
    println!("{}", outcomes.join("\n"));
    assert!(
        under_the_map,
        "{io}: no run was truncated while its pages were mapped:\n{}",
        outcomes.join("\n")
    );
}

#[test]
fn hardware_counters_are_numbers_or_null_with_the_reason() {
    // Forced absent: every backend reports null counters and says why.
    for io in ["dma", "uring", "pread", "mmap"] {
        let v = answer(&q6_with_faults("pmu", &["--io", io]));
        let c = &v["counters"];
        assert!(
            c["cycles"].is_null() && c["llc_misses"].is_null(),
            "{io}: {c}"
        );
        assert_eq!(c["unavailable"], "injected: no PMU", "{io}");
        assert_eq!(
            v["executors"][0]["counters"]["unavailable"],
            "injected: no PMU"
        );
    }
    // As the machine has them: either all three counts, or null with a reason (this VM has no
    // PMU: perf stat -e cycles says <not supported>).
    let v = answer(&q6_with_faults("", &[]));
    let c = &v["counters"];
    match c["unavailable"].as_str() {
        Some(why) => {
            assert!(c["cycles"].is_null() && c["instructions"].is_null(), "{c}");
            assert!(why.contains("perf_event_open"), "{why}");
        }
        None => {
            assert!(c["instructions"].as_u64().unwrap() > 0, "{c}");
            assert!(c["cycles"].as_u64().unwrap() > 0, "{c}");
            assert!(c["llc_misses"].is_u64(), "{c}");
        }
    }
    // The start-up figures: the binary marks its start, so both are there, in order.
    let first = v["first_page_s"].as_f64().unwrap();
    let since_start = v["first_page_since_process_start_s"].as_f64().unwrap();
    assert!(
        first >= 0.0 && since_start >= first,
        "{first} {since_start}"
    );
    // Each executor counts from its own start, which comes after the process's; the process's
    // figure is the earliest executor's first page, so the earliest executor's own figure (not
    // necessarily executor 0's: under load another one may decode first) is at most it.
    let earliest = v["executors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["first_page_s"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert!(earliest <= since_start, "{earliest} {since_start}");
    // The text report says the same.
    let plain = &layouts()[0];
    let text = corescan_with_env(
        ["q6", plain.path.to_str().unwrap(), "--table", &plain.table],
        &[("CORESCAN_FAULTS", "pmu")],
    );
    assert!(
        text.stdout
            .contains("counters    unavailable: injected: no PMU"),
        "{}",
        text.stdout
    );
}
