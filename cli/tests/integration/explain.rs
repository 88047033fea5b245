//! `corescan explain` against SQLite's own page accounting (the `dbstat` virtual table).

use std::path::Path;

use serde_json::Value;

use crate::{corescan, layouts, open, tiny_db};

/// `explain --json --census` (the counts `dbstat` is compared with need the census).
fn explain_json(path: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "explain".as_ref(),
        path.as_os_str(),
        "--json".as_ref(),
        "--census".as_ref(),
    ];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    let run = corescan(args);
    assert_eq!(run.status, 0, "{}: {}", path.display(), run.stderr);
    assert_eq!(
        run.stdout.lines().count(),
        1,
        "one JSON line: {}",
        run.stdout
    );
    serde_json::from_str(&run.stdout).expect("explain --json prints JSON")
}

fn u64_of(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

/// Page numbers `dbstat` lists for `table` with `pagetype` (`leaf`, `internal`, `overflow`).
fn dbstat_pages(path: &Path, table: &str, pagetype: &str) -> Vec<u64> {
    open(path)
        .prepare("SELECT pageno FROM dbstat WHERE name = ?1 AND pagetype = ?2 ORDER BY pageno")
        .unwrap()
        .query_map([table, pagetype], |r| r.get::<_, i64>(0).map(|p| p as u64))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The CPUs `--cores n` assigns: the available CPUs, round-robin.
fn spread_cpus(n: usize) -> Vec<u64> {
    engine::spread(n).iter().map(|e| e.cpu as u64).collect()
}

/// Checks one `explain --json` report of `table` in `path` against SQLite.
#[track_caller]
fn check_against_dbstat(path: &Path, table: &str, report: &Value, cpus: &[u64]) {
    let name = path.display();
    let conn = open(path);
    let pragma = |p: &str| -> u64 {
        conn.query_row(&format!("PRAGMA {p}"), [], |r| r.get::<_, i64>(0))
            .unwrap() as u64
    };
    assert_eq!(u64_of(report, "page_size"), pragma("page_size"), "{name}");
    assert_eq!(u64_of(report, "page_count"), pragma("page_count"), "{name}");
    assert_eq!(
        u64_of(report, "freelist_pages"),
        pragma("freelist_count"),
        "{name}"
    );
    let root: i64 = conn
        .query_row(
            "SELECT rootpage FROM sqlite_schema WHERE name = ?1",
            [table],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(u64_of(report, "root_page"), root as u64, "{name}");
    assert_eq!(report["table"], table, "{name}");
    let reserved = std::fs::read(path).unwrap()[20];
    assert_eq!(
        u64_of(report, "reserved_bytes"),
        u64::from(reserved),
        "{name}"
    );

    let leaves = dbstat_pages(path, table, "leaf");
    assert_eq!(
        u64_of(report, "leaf_pages"),
        leaves.len() as u64,
        "{name} leaves"
    );
    let interior = dbstat_pages(path, table, "internal").len() as u64;
    assert_eq!(
        u64_of(report, "interior_pages"),
        interior,
        "{name} interior"
    );
    let overflow = dbstat_pages(path, table, "overflow").len() as u64;
    assert_eq!(
        u64_of(report, "overflow_pages"),
        overflow,
        "{name} overflow"
    );

    // Extents: maximal runs of consecutive leaf pages.
    let runs = 1 + leaves.windows(2).filter(|w| w[1] != w[0] + 1).count() as u64;
    assert_eq!(u64_of(report, "extents"), runs, "{name} extents");
    let mean = report["mean_extent_pages"].as_f64().unwrap();
    assert!(
        (mean - leaves.len() as f64 / runs as f64).abs() < 1e-9,
        "{name} mean {mean}"
    );

    // Ranges: one per CPU, in order, disjoint, together exactly the leaves.
    let ranges = report["ranges"].as_array().unwrap();
    let got_cpus: Vec<u64> = ranges.iter().map(|r| u64_of(r, "cpu")).collect();
    assert_eq!(got_cpus, cpus, "{name}");
    let mut covered = 0u64;
    let mut previous_last = 0u64;
    for r in ranges {
        let pages = u64_of(r, "pages");
        if pages == 0 {
            assert!(
                r["first_page"].is_null() && r["last_page"].is_null(),
                "{name} {r}"
            );
            continue;
        }
        let (first, last) = (u64_of(r, "first_page"), u64_of(r, "last_page"));
        assert!(
            previous_last < first && first <= last,
            "{name} ranges overlap or unordered: {r}"
        );
        let inside = leaves
            .iter()
            .filter(|&&p| (first..=last).contains(&p))
            .count() as u64;
        assert_eq!(inside, pages, "{name} range {r}");
        assert!(
            leaves.contains(&first) && leaves.contains(&last),
            "{name} {r}"
        );
        covered += pages;
        previous_last = last;
    }
    assert_eq!(
        covered,
        leaves.len() as u64,
        "{name}: ranges must cover every leaf"
    );
    // Executors with equal weights (all of them, unless CPUs are oversubscribed) get page
    // counts that differ by at most one.
    let heaviest = ranges.iter().map(|r| u64_of(r, "weight")).max().unwrap();
    let full: Vec<&Value> = ranges
        .iter()
        .filter(|r| u64_of(r, "weight") == heaviest)
        .collect();
    let max = full.iter().map(|r| u64_of(r, "pages")).max().unwrap();
    let min = full.iter().map(|r| u64_of(r, "pages")).min().unwrap();
    assert!(
        max - min <= 1,
        "{name}: equal weights differ by at most one page"
    );
}

#[test]
fn explain_matches_dbstat_on_every_layout() {
    for layout in layouts() {
        let report = explain_json(&layout.path, &["--table", &layout.table, "--cores", "3"]);
        check_against_dbstat(&layout.path, &layout.table, &report, &spread_cpus(3));
    }
}

#[test]
fn layouts_have_the_properties_they_exist_for() {
    let by_name = |n: &str| layouts().iter().find(|l| l.name == n).unwrap();
    let report = |n: &str| {
        let l = by_name(n);
        explain_json(&l.path, &["--table", &l.table, "--cores", "1"])
    };
    assert!(u64_of(&report("interleaved"), "extents") > 20);
    assert!(u64_of(&report("freelist"), "freelist_pages") > 0);
    assert!(u64_of(&report("overflow_comment"), "overflow_pages") > 100);
    assert!(u64_of(&report("overflow_leading_text"), "overflow_pages") > 1000);
    assert_eq!(report("auto_vacuum_full")["auto_vacuum"], true);
    assert_eq!(u64_of(&report("reserved_bytes"), "reserved_bytes"), 40);
    assert_eq!(u64_of(&report("page_512"), "page_size"), 512);
    assert_eq!(u64_of(&report("page_65536"), "page_size"), 65536);
    assert_eq!(report("lowercase_reordered")["table"], "lineitem");
    assert!(u64_of(&report("page_512"), "interior_pages") > 1);
}

#[test]
fn table_name_is_case_insensitive_and_defaults_to_lineitem() {
    let mut default = explain_json(tiny_db(), &["--cores", "2"]);
    let mut upper = explain_json(tiny_db(), &["--table", "LineItem", "--cores", "2"]);
    // How the census read the table (its time, and the backend `auto` picked from what the
    // page cache held at that moment) differs from run to run; its counts and everything
    // else must not.
    for v in [&mut default, &mut upper] {
        let census = v["census"].take();
        assert!(census["payload_bytes"].as_u64().unwrap() > 0, "{census}");
        v["census"] = census["payload_bytes"].clone();
    }
    assert_eq!(default, upper);
    check_against_dbstat(tiny_db(), "LINEITEM", &default, &spread_cpus(2));
    let orders = explain_json(tiny_db(), &["--table", "orders", "--cores", "1"]);
    check_against_dbstat(tiny_db(), "ORDERS", &orders, &[0]);
}

#[test]
fn cpu_lists_name_the_executors() {
    let cpus = engine::available_cpus();
    let last = cpus.last().unwrap().to_string();
    let report = explain_json(tiny_db(), &["--cpus", &last]);
    check_against_dbstat(
        tiny_db(),
        "LINEITEM",
        &report,
        &[*cpus.last().unwrap() as u64],
    );
    // A CPU this machine does not have is refused, as q6 would refuse it.
    let run = corescan([
        "explain".as_ref(),
        tiny_db().as_os_str(),
        "--cpus".as_ref(),
        "4000".as_ref(),
    ]);
    run.assert_error(&["4000"]);
    let n = std::thread::available_parallelism().unwrap().get() as u64;
    let report = explain_json(tiny_db(), &[]);
    check_against_dbstat(tiny_db(), "LINEITEM", &report, &(0..n).collect::<Vec<_>>());
}

#[test]
fn more_cpus_than_leaves_gives_empty_ranges() {
    let l = layouts().iter().find(|l| l.name == "page_65536").unwrap();
    let report = explain_json(&l.path, &["--cores", "200"]);
    check_against_dbstat(&l.path, "LINEITEM", &report, &spread_cpus(200));
}

#[test]
fn text_output_names_the_facts() {
    let run = corescan([
        "explain".as_ref(),
        tiny_db().as_os_str(),
        "--cores=2".as_ref(),
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    for needle in [
        "page size",
        "4096",
        "LINEITEM",
        "root page",
        "leaf",
        "interior",
        "overflow",
        "extents",
        "first_page",
    ] {
        assert!(
            run.stdout.contains(needle),
            "{needle} missing from:\n{}",
            run.stdout
        );
    }
}

#[test]
fn conflicting_or_bad_cpu_options_are_usage_errors() {
    let db = tiny_db().as_os_str();
    corescan([
        "explain".as_ref(),
        db,
        "--cores=2".as_ref(),
        "--cpus=0".as_ref(),
    ])
    .assert_usage_error();
    corescan(["explain".as_ref(), db, "--cores=0".as_ref()]).assert_usage_error();
    corescan(["explain".as_ref(), db, "--cpus=3-1".as_ref()]).assert_usage_error();
    corescan(["explain".as_ref(), db, "--cpus=x".as_ref()]).assert_usage_error();
}

#[test]
fn without_census_explain_reads_no_leaf_and_leaves_the_counts_null() {
    let db = tiny_db();
    let run = corescan(["explain".as_ref(), db.as_os_str(), "--json".as_ref()]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(v["rows"].is_null() && v["overflow_pages"].is_null() && v["census"].is_null());
    let with = explain_json(db, &[]);
    assert_eq!(v["leaf_pages"], with["leaf_pages"]);
    assert_eq!(v["ranges"], with["ranges"]);
    // The census read every leaf once, through a scan backend that says what ran.
    let census = &with["census"];
    assert!(census["io"]["backend"].is_string(), "{census}");
    let text = corescan(["explain".as_ref(), db.as_os_str()]);
    assert!(text.stdout.contains("--census counts"), "{}", text.stdout);
}

#[test]
fn explain_over_several_files_lists_each_files_leaves_and_how_they_are_dealt() {
    let dir = crate::scratch_dir("explain-files");
    let mut paths = Vec::new();
    for (name, rows) in [("a", 2_000i64), ("b", 10), ("c", 3_000)] {
        let path = dir.join(format!("{name}.db"));
        let _ = std::fs::remove_file(&path);
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE lineitem(id INTEGER PRIMARY KEY, pad TEXT)")
            .unwrap();
        c.execute(
            "WITH RECURSIVE s(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM s WHERE v < ?1) \
             INSERT INTO lineitem(pad) SELECT printf('%.50d', v) FROM s",
            [rows],
        )
        .unwrap();
        paths.push(path);
    }
    let pattern = format!("{}/*.db", dir.display());
    let run = corescan(["explain", "--json", "--cores", "2", &pattern]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 3);
    for (f, p) in files.iter().zip(&paths) {
        assert_eq!(f["path"], p.display().to_string());
        let want = dbstat_pages(p, "lineitem", "leaf").len() as u64;
        assert_eq!(u64_of(f, "leaf_pages"), want, "{f}");
        assert_eq!(f["shares"], 1);
        assert_eq!(f["cpus"].as_array().unwrap().len(), 1, "{f}");
    }
    let executors = v["executors"].as_array().unwrap();
    assert_eq!(executors.len(), 2);
    let units: u64 = executors.iter().map(|e| u64_of(e, "units")).sum();
    assert_eq!(units, 3);
    // The census reads one file.
    corescan(["explain", "--census", &pattern]).assert_error(&["--census", "one file"]);
}
