//! `corescan bench scale|sweep|seed-report|compare` at SF 0.01: the files are written and
//! parse, the numbers are consistent, readahead makes the block layer merge, and every engine
//! that is installed agrees on the answer.
//!
//! The experiments drop the page cache and read device-wide counters, so they run one at a
//! time ([`exclusive`]); the database is generated once ([`sf001_db`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use bench::experiments::peers::Answer;
use bench::experiments::scale::CSV_HEADER;
use bench::gen::{GenOptions, TableSelection};
use bench::oracle;
use engine::q6::Q6Params;
use serde_json::Value;

use crate::{corescan, scratch_dir, Run};

/// `LINEITEM` at SF 0.01 (about 60,000 rows, 7 MiB), generated once.
fn sf001_db() -> &'static Path {
    static DB: OnceLock<PathBuf> = OnceLock::new();
    DB.get_or_init(|| {
        let path = scratch_dir("experiments-db").join("sf001.db");
        let opts = GenOptions {
            out: path.clone(),
            scale_factor: 0.01,
            page_size: 4096,
            tables: TableSelection::Lineitem,
            force: false,
        };
        bench::gen::generate(&opts, false).expect("generate the SF 0.01 database");
        path
    })
}

/// Serializes the experiments: they drop the page cache and read device-wide counters (and
/// other disk-heavy tests, such as the query differential tester, take it too).
pub fn exclusive() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn available_cpus() -> usize {
    engine::available_cpus().len().max(1)
}

fn expected() -> oracle::OracleAnswer {
    oracle::q6(sf001_db(), "lineitem", &Q6Params::default()).unwrap()
}

#[track_caller]
fn run_ok(args: &[&str]) -> Run {
    let run = corescan(args);
    assert_eq!(run.status, 0, "corescan {args:?}: {}", run.stderr);
    run
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Reads `results.csv` as maps from column to cell, checking the header.
fn read_csv(path: &Path) -> Vec<HashMap<String, String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, CSV_HEADER, "{}", path.display());
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            header
                .iter()
                .cloned()
                .zip(rec.iter().map(String::from))
                .collect()
        })
        .collect()
}

#[track_caller]
fn assert_svg(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{}: not XML: {e}", path.display()));
    assert_eq!(
        doc.root_element().tag_name().name(),
        "svg",
        "{}",
        path.display()
    );
}

fn f(row: &HashMap<String, String>, column: &str) -> f64 {
    row[column]
        .parse()
        .unwrap_or_else(|e| panic!("{column} = {:?}: {e}", row[column]))
}

/// Checks the files of a scale or sweep run in `dir`; returns the CSV rows.
fn check_scale_outputs(
    dir: &Path,
    configs: usize,
    repeat: usize,
    cache: &str,
) -> Vec<HashMap<String, String>> {
    let rows = read_csv(&dir.join("results.csv"));
    assert_eq!(rows.len(), configs, "one row per configuration");
    let cpus = available_cpus();
    let mut ran = 0;
    for row in &rows {
        assert_eq!(row["cache"], cache);
        let prep = row["cache_prep"].as_str();
        match cache {
            "warm" => assert!(prep == "warm" || prep.is_empty(), "{row:?}"),
            _ => assert!(
                ["drop_caches", "fadvise_dontneed", ""].contains(&prep),
                "{row:?}"
            ),
        }
        let cores: usize = row["cores"].parse().unwrap();
        assert_eq!(row["oversubscribed"], (cores > cpus).to_string(), "{row:?}");
        if !row["skipped"].is_empty() {
            assert_eq!(row["runs"], "0", "{row:?}");
            continue;
        }
        ran += 1;
        assert_eq!(row["runs"], repeat.to_string(), "{row:?}");
        let (median, min, max) = (
            f(row, "wall_median_s"),
            f(row, "wall_min_s"),
            f(row, "wall_max_s"),
        );
        assert!(min <= median && median <= max && min > 0.0, "{row:?}");
        assert!(
            f(row, "gb_per_s") > 0.0 && f(row, "rows_per_s") > 0.0,
            "{row:?}"
        );
        if !row["speedup"].is_empty() {
            let (speedup, efficiency) = (f(row, "speedup"), f(row, "efficiency"));
            if cores == 1 {
                assert_eq!(speedup, 1.0, "the 1-core run is its own baseline: {row:?}");
            }
            assert!(
                (efficiency - speedup / cores as f64).abs() < 1e-3,
                "efficiency = speedup / cores: {row:?}"
            );
        }
        assert!(
            !row["backend_ran"].is_empty() && !row["o_direct"].is_empty(),
            "{row:?}"
        );
    }
    assert!(ran > 0, "no configuration ran");

    let json = read_json(&dir.join("runs.json"));
    let runs = json["runs"].as_array().expect("runs.json has runs");
    assert_eq!(runs.len(), ran * repeat, "every raw run is kept");
    let want = expected();
    for run in runs {
        for field in [
            "config",
            "config_index",
            "repeat",
            "cache",
            "oversubscribed",
            "report",
        ] {
            assert!(!run[field].is_null(), "runs.json run lacks {field}: {run}");
        }
        assert_eq!(run["report"]["revenue"], want.revenue());
        assert!(
            run["report"]["io"]["backend"].is_string()
                && run["report"]["cpu_time"]["user_s"].is_number()
        );
    }
    assert_eq!(json["configs"].as_array().map(Vec::len), Some(configs));
    assert!(json["machine"]["kernel"].is_string() && json["machine"]["cpus"].is_number());

    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        summary.contains("## Machine") && summary.contains("## Results"),
        "{summary}"
    );
    for svg in [
        "throughput-vs-cores.svg",
        "throughput-vs-readahead.svg",
        "request-size-vs-readahead.svg",
    ] {
        assert_svg(&dir.join(svg));
    }
    rows
}

#[test]
fn scale_writes_consistent_results() {
    let _guard = exclusive();
    let db = sf001_db().to_str().unwrap();
    let out = scratch_dir("experiments-scale");
    let over = (available_cpus() + 1).to_string();
    let cores = format!("1,2,{over}");
    let run = run_ok(&[
        "bench",
        "scale",
        db,
        "--cores",
        &cores,
        "--readahead",
        "0,32",
        "--io",
        "dma,uring",
        "--sqpoll",
        "off,on",
        "--repeat",
        "2",
        "--warm",
        "--out",
        out.to_str().unwrap(),
    ]);
    // 3 core counts x 2 windows x 2 backends x 2 SQPOLL modes.
    let rows = check_scale_outputs(&out, 24, 2, "warm");
    for row in &rows {
        if row["io"] == "dma" && row["sqpoll"] == "on" {
            assert!(row["skipped"].contains("--io uring"), "{row:?}");
        }
        if row["io"] == "uring"
            && row["sqpoll"] == "on"
            && f(row, "cores") * 2.0 > available_cpus() as f64
        {
            assert!(row["skipped"].contains("idle CPU"), "{row:?}");
        }
    }
    assert!(
        run.stderr.contains("skipped"),
        "skips are reported: {}",
        run.stderr
    );
    assert!(run.stdout.contains("OVERSUBSCRIBED"), "{}", run.stdout);
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("OVERSUBSCRIBED") && summary.contains("## Skipped configurations"));
}

#[test]
fn cold_scale_records_how_the_cache_was_dropped() {
    let _guard = exclusive();
    let db = sf001_db().to_str().unwrap();
    let out = scratch_dir("experiments-scale-cold");
    run_ok(&[
        "bench",
        "scale",
        db,
        "--cores",
        "1",
        "--readahead",
        "32",
        "--repeat",
        "2",
        "--cold",
        "--out",
        out.to_str().unwrap(),
    ]);
    check_scale_outputs(&out, 1, 2, "cold");
    let json = read_json(&out.join("runs.json"));
    for run in json["runs"].as_array().unwrap() {
        let cache = run["cache"].as_str().unwrap();
        assert!(
            cache == "drop_caches" || cache == "fadvise_dontneed",
            "{cache}"
        );
    }
}

#[test]
fn sweep_is_readahead_by_coalescing_at_one_core_count() {
    let _guard = exclusive();
    let db = sf001_db().to_str().unwrap();
    let out = scratch_dir("experiments-sweep");
    run_ok(&[
        "bench",
        "sweep",
        db,
        "--readahead",
        "0,8,64",
        "--coalesce-kib",
        "0,64",
        "--repeat",
        "1",
        "--warm",
        "--out",
        out.to_str().unwrap(),
    ]);
    let rows = check_scale_outputs(&out, 6, 1, "warm");
    let cpus = available_cpus().to_string();
    assert!(
        rows.iter().all(|r| r["cores"] == cpus),
        "one core count: all CPUs"
    );
}

#[test]
fn seed_report_merges_more_with_readahead() {
    let _guard = exclusive();
    let db = sf001_db();
    let out = scratch_dir("experiments-seed");
    run_ok(&[
        "bench",
        "seed-report",
        db.to_str().unwrap(),
        "--repeat",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    let md = std::fs::read_to_string(out.join("seed-report.md")).unwrap();
    assert!(md.contains("195,207") && md.contains("## SQPOLL"), "{md}");
    let json = read_json(&out.join("seed-report.json"));
    let runs = json["runs"].as_array().expect("runs");
    assert!(!runs.is_empty());
    for r in runs {
        for field in [
            "label",
            "readahead",
            "io",
            "reads_submitted",
            "wall_s",
            "user_s",
            "sys_s",
        ] {
            assert!(
                !r[field].is_null(),
                "seed-report.json run lacks {field}: {r}"
            );
        }
        assert!(
            r.get("device").is_some(),
            "device is present (maybe null): {r}"
        );
        assert!(r["io"]["backend"].is_string() && r["io"]["o_direct"].is_boolean());
    }
    let labels: Vec<&str> = runs.iter().filter_map(|r| r["label"].as_str()).collect();
    for label in [
        "readahead-off",
        "window-32",
        "uring-plain",
        "pread-window-32",
        "dma-defaults",
    ] {
        assert_eq!(
            labels.iter().filter(|l| **l == label).count(),
            3,
            "{label} ran 3 times"
        );
    }
    if let Some(reason) = json["skipped"].as_array().and_then(|s| s.first()) {
        println!("seed report: skipped {reason}");
    }

    // The merge check needs what the project's machines have: the disk's counters in
    // /sys/block and O_DIRECT on the filesystem under the test data (target/).
    if let Some(note) = runs.iter().find_map(|r| r["device_note"].as_str()) {
        panic!(
            "the merge check needs the disk's /sys/block counters for {}: {note}",
            db.display()
        );
    }
    assert!(
        !runs
            .iter()
            .any(|r| r["io"]["o_direct"] == false && r["io"]["backend"] == "dma"),
        "the merge check needs O_DIRECT on the filesystem under {}",
        db.display()
    );
    let median_of = |label: &str, field: &str| {
        let v: Vec<f64> = runs
            .iter()
            .filter(|r| r["label"] == label)
            .filter_map(|r| r["device"][field].as_f64())
            .collect();
        bench::experiments::Spread::of(&v).unwrap().median
    };
    let (off, window) = (
        median_of("readahead-off", "merged_pct"),
        median_of("window-32", "merged_pct"),
    );
    assert!(
        window > off,
        "merged % with a 32-page window ({window:.1}) must exceed readahead off ({off:.1})"
    );
    // (The device's mean reads in flight is not asserted: on a file this small the run is
    // mostly start-up, and the counters are the whole disk's, so other tests' I/O moves it.
    // The one-at-a-time order is checked without the disk by the engine's read-schedule unit
    // tests; the merge effect above is what the device shows.)
    for r in runs {
        let busy = r["device"]["busy_pct"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&busy), "busy {busy}");
    }
}

#[test]
fn compare_agrees_with_every_available_engine() {
    let _guard = exclusive();
    let db = sf001_db();
    let base = scratch_dir("experiments-compare");
    let out = base.join("run");
    let run = run_ok(&[
        "bench",
        "compare",
        db.to_str().unwrap(),
        "--repeat",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(run.stdout.contains("every engine agreed"), "{}", run.stdout);
    let json = read_json(&out.join("compare.json"));
    assert!(out.join("compare.md").exists());
    let want = expected();
    let engines = json["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 5);
    let mut ran = Vec::new();
    for e in engines {
        let name = e["engine"].as_str().unwrap();
        match e["skipped"].as_str() {
            Some(reason) => {
                println!("compare: {name} skipped: {reason}");
                assert!(
                    run.stderr.contains(reason),
                    "the skip is printed: {}",
                    run.stderr
                );
            }
            None => ran.push(name),
        }
    }
    assert!(
        ran.contains(&"corescan") && ran.contains(&"sqlite"),
        "{ran:?}"
    );
    let runs = json["runs"].as_array().unwrap();
    for name in &ran {
        for mode in ["cold", "warm"] {
            let r = runs
                .iter()
                .find(|r| r["engine"] == *name && r["mode"] == mode)
                .unwrap_or_else(|| panic!("{name} has no {mode} run"));
            let answer: Answer = match r["answer"]["kind"].as_str().unwrap() {
                "exact" => Answer::Exact(r["answer"]["value"].as_i64().unwrap() as i128),
                "float" => Answer::Float(r["answer"]["value"].as_f64().unwrap()),
                other => panic!("{name}: answer kind {other}"),
            };
            if *name == "corescan" || *name == "sqlite" || *name == "duckdb" {
                assert_eq!(
                    answer,
                    Answer::Exact(want.revenue_ten_thousandths),
                    "{name} {mode}"
                );
            } else {
                assert!(
                    answer.agrees_with(want.revenue_ten_thousandths),
                    "{name} {mode}: {answer:?}"
                );
            }
        }
    }
    let results = json["results"].as_array().unwrap();
    let corescan_cold = results
        .iter()
        .find(|r| r["engine"] == "corescan" && r["mode"] == "cold")
        .unwrap();
    assert_eq!(corescan_cold["vs_corescan"].as_f64(), Some(1.0));
    // Copies for the peers live beside --out, never beside the database.
    assert!(!db.parent().unwrap().join("corescan-cache").exists());
    if ran.contains(&"duckdb") || ran.contains(&"turso") {
        assert!(base.join("corescan-cache").is_dir());
    }
}

#[test]
fn experiment_errors_follow_the_contract() {
    let missing = "/nonexistent/corescan/missing.db";
    corescan(["bench", "scale", missing, "--out", "/nonexistent/out"]).assert_error(&[missing]);
    corescan(["bench", "compare", missing, "--out", "/nonexistent/out"]).assert_error(&[missing]);
    corescan(["bench", "scale", "x.db", "--repeat", "0"]).assert_usage_error();
    corescan(["bench", "scale", "x.db", "--cores", "0"]).assert_usage_error();
    corescan(["bench", "scale", "x.db", "--io", "floppy"]).assert_usage_error();
    corescan(["bench", "scale", "x.db", "--cold", "--warm"]).assert_usage_error();
}

/// `bench floor` reads exactly the table's leaf pages, split as the executors' ranges are, and
/// reports a time and a throughput that agree with its byte count.
#[test]
fn floor_reads_the_leaf_pages_a_scan_reads() {
    let db = sf001_db();
    let plan = partitioner::TablePlan::open(db, "lineitem").unwrap();
    let _ = std::fs::read(db).unwrap();
    for cores in ["1", "2"] {
        let floor = || {
            let run = run_ok(&[
                "bench",
                "floor",
                db.to_str().unwrap(),
                "--cores",
                cores,
                "--repeat",
                "3",
                "--json",
            ]);
            serde_json::from_str::<Value>(&run.stdout).unwrap()
        };
        // Another test's cold run may drop the page cache (all of it, with drop_caches)
        // between the read and the floor's residency check: read and measure again then.
        let mut v = floor();
        for _ in 0..3 {
            if v["resident_pct"].as_f64().unwrap() > 99.0 {
                break;
            }
            let _ = std::fs::read(db).unwrap();
            v = floor();
        }
        assert_eq!(v["pages"], plan.leaves.len() as u64, "{v}");
        assert_eq!(
            v["bytes"].as_u64().unwrap(),
            plan.leaves.len() as u64 * u64::from(plan.header.page_size)
        );
        assert_eq!(
            v["cpus"].as_array().unwrap().len(),
            cores.parse::<usize>().unwrap()
        );
        assert_eq!(v["table"], "LINEITEM");
        // Just read, so resident (the file is on a disk-backed file system or tmpfs alike).
        assert!(v["resident_pct"].as_f64().unwrap() > 99.0, "{v}");
        let (min, med, max) = (
            v["wall_s"]["min"].as_f64().unwrap(),
            v["wall_s"]["median"].as_f64().unwrap(),
            v["wall_s"]["max"].as_f64().unwrap(),
        );
        assert!(0.0 < min && min <= med && med <= max, "{v}");
        let gb = v["bytes"].as_f64().unwrap() / med / 1e9;
        assert!(
            (v["gb_per_s"].as_f64().unwrap() - gb).abs() < 1e-9 * gb.max(1.0),
            "{v}"
        );
    }
    let text = run_ok(&[
        "bench",
        "floor",
        db.to_str().unwrap(),
        "--cores",
        "1",
        "--repeat",
        "1",
    ]);
    assert!(
        text.stdout
            .contains(&format!("{} leaf pages", plan.leaves.len()))
            && text.stdout.contains("GB/s"),
        "{}",
        text.stdout
    );
    let bad = crate::corescan(["bench", "floor", db.to_str().unwrap(), "--table", "nosuch"]);
    assert_ne!(bad.status, 0);
    assert!(
        bad.stderr.starts_with("error:") && bad.stderr.contains("nosuch"),
        "{}",
        bad.stderr
    );
}
