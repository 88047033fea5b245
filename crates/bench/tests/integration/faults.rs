//! I/O fallbacks, each forced with `CORESCAN_FAULTS`: the run still gives SQLite's answer, and
//! its `io` report says which path actually ran and why.

use serde_json::Value;

use crate::{corescan_with_env, layouts, Run};

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
    let want = bench::oracle::q6(&plain.path, &plain.table, &engine::Q6Params::default()).unwrap();
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
    if engine::coordinator::available_cpus().len() > 1 {
        assert_eq!(v["io"]["sqpoll"], false);
        assert!(notice(&v).contains("refused SQPOLL"), "{}", notice(&v));
    }
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
