//! The human report of `q6` and `query` (one printer, `cli/src/report.rs`): the same labelled
//! lines in the same order, each command's own count on the rows line, SQLite's numbers in it.

use crate::{corescan, open, query::fixture, tiny_db};

/// The labels of the run's figures, in order, as both commands print them (`notice` and
/// `start-up` only when there is something to say).
const LABELS: [&str; 11] = [
    "rows",
    "time",
    "executors",
    "io",
    "notice",
    "snapshot",
    "reads",
    "device",
    "cpu",
    "counters",
    "start-up",
];

/// The report's labelled lines (label, text) and its per-executor lines.
fn split(report: &str) -> (Vec<(&str, &str)>, Vec<&str>) {
    let (mut labelled, mut executors) = (Vec::new(), Vec::new());
    for line in report.lines() {
        if let Some(e) = line.strip_prefix("  CPU ") {
            executors.push(e);
        } else {
            assert_eq!(line.as_bytes()[11], b' ', "label column: {line:?}");
            labelled.push((line[..11].trim_end(), &line[12..]));
        }
    }
    (labelled, executors)
}

/// Asserts the figures' labels come in [`LABELS`]' order, each at most once.
#[track_caller]
fn assert_figure_order(labels: &[&str]) {
    let at: Vec<usize> = labels
        .iter()
        .map(|l| {
            LABELS
                .iter()
                .position(|k| k == l)
                .unwrap_or_else(|| panic!("label {l}"))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{labels:?}");
    for required in [
        "rows",
        "time",
        "executors",
        "io",
        "reads",
        "cpu",
        "counters",
    ] {
        assert!(labels.contains(&required), "{required} missing: {labels:?}");
    }
}

#[test]
fn q6_prints_its_answer_then_the_run_figures() {
    let db = tiny_db();
    let want = bench::oracle::q6(db, "lineitem", &engine::q6::Q6Params::default()).unwrap();
    let run = corescan(["q6", db.to_str().unwrap(), "--cores", "2"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let (labelled, executors) = split(&run.stdout);
    assert_eq!(labelled[0], ("revenue", want.revenue().as_str()));
    let rows = format!(
        "{} scanned, {} matched",
        want.rows_scanned, want.rows_matched
    );
    assert_eq!(labelled[1], ("rows", rows.as_str()));
    assert_figure_order(&labelled[1..].iter().map(|l| l.0).collect::<Vec<_>>());
    // Each executor says how many of its rows matched; together, SQLite's count.
    assert_eq!(executors.len(), 2, "{}", run.stdout);
    let matched: u64 = executors
        .iter()
        .map(|e| {
            let (before, _) = e.split_once(" matched, ").expect("a matched count");
            before.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(matched, want.rows_matched);
}

#[test]
fn query_prints_its_result_rows_and_stream_waits_with_the_same_figures() {
    let db = fixture();
    let scanned: i64 = open(db)
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    let report = |sql: &str| {
        let args = [
            "query",
            db.to_str().unwrap(),
            sql,
            "--format",
            "csv",
            "--report",
        ];
        let run = corescan(args.into_iter().chain(["--cores", "2", "--io", "pread"]));
        assert_eq!(run.status, 0, "{}", run.stderr);
        run.stderr
    };
    // Collected (an aggregate): one result row.
    let text = report("SELECT count(*) FROM t");
    let (labelled, executors) = split(&text);
    let rows = format!("{scanned} scanned, 1 result rows");
    assert_eq!(labelled[0], ("rows", rows.as_str()));
    assert_figure_order(&labelled.iter().map(|l| l.0).collect::<Vec<_>>());
    // A query's kernel counts no matches: its executors' lines do not claim any.
    assert_eq!(executors.len(), 2, "{text}");
    assert!(!text.contains("matched"), "{text}");
    // Streamed (a plain projection): every row, then how long each executor waited.
    let text = report("SELECT id FROM t");
    let (labelled, _) = split(&text);
    let rows = format!("{scanned} scanned, {scanned} result rows");
    assert_eq!(labelled[0], ("rows", rows.as_str()));
    let (label, waits) = labelled.last().unwrap();
    assert_eq!(*label, "streamed", "{text}");
    let (_, each) = waits.rsplit_once(": ").expect("the waits");
    assert_eq!(each.split(", ").count(), 2, "{waits}");
}
