//! Markdown for the experiments' reports: a small [`Table`] builder, number formatting, and
//! `summary.md` of `bench scale` / `bench sweep` ([`scale_markdown`]) and `compare.md` of
//! `bench compare` ([`compare_markdown`]).

use std::fmt::Write as _;

use super::compare::{CompareReport, Engine, EngineInfo};
use super::peers::FLOAT_RULE;
use super::scale::{ConfigSummary, ScaleOutcome};
use super::{io_name, sqpoll_name, CacheMode, CachePrep};

/// A markdown table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headings.
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells render empty, extra ones are dropped).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether the table has no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as markdown, with `|` in cells escaped.
    pub fn render(&self) -> String {
        let line = |cells: &[String]| {
            let cells: Vec<String> = (0..self.header.len())
                .map(|i| {
                    cells
                        .get(i)
                        .map_or(String::new(), |c| c.replace('|', "\\|"))
                })
                .collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut s = line(&self.header);
        s.push_str(&format!("|{}\n", "---|".repeat(self.header.len())));
        for r in &self.rows {
            s.push_str(&line(r));
        }
        s
    }
}

/// `x` with `decimals` decimals, or `–` when unknown.
pub fn num(x: Option<f64>, decimals: usize) -> String {
    x.map_or_else(|| "–".to_string(), |v| format!("{v:.decimals$}"))
}

/// An integer with thousands separators: `195,207`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What the cache preparation of a set of runs was, in words.
pub fn cache_words(mode: CacheMode, preps: &[CachePrep]) -> String {
    let mut kinds: Vec<&str> = preps.iter().map(|p| p.name()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    match mode {
        CacheMode::Warm => "warm: the file was read once before the runs and never dropped".into(),
        CacheMode::Cold if kinds == ["drop_caches"] => {
            "cold: `sync; echo 3 > /proc/sys/vm/drop_caches` before every run (root)".into()
        }
        CacheMode::Cold if kinds == ["fadvise_dontneed"] => {
            "cold: `posix_fadvise(POSIX_FADV_DONTNEED)` on the file before every run (not root, \
             or drop_caches refused; only the file's clean pages are dropped)"
                .into()
        }
        CacheMode::Cold => format!("cold, dropped with: {}", kinds.join(", ")),
    }
}

/// `summary.md` of a scale or sweep experiment.
pub fn scale_markdown(o: &ScaleOutcome) -> String {
    let mut s = String::new();
    let preps: Vec<CachePrep> = o.runs.iter().map(|r| r.cache).collect();
    let _ = writeln!(
        s,
        "# corescan bench {}: TPC-H Q6 over {} ({})\n",
        o.experiment,
        o.table,
        o.cache.name()
    );
    let _ = writeln!(
        s,
        "- database: `{}` ({:.1} MiB)\n- answer: revenue {}, {} of {} rows matched; every run \
         was checked against SQLite's exact answer\n- rounds: {} (round r runs every \
         configuration once, in the same order, so drift hits all alike)\n- cache: {}\n",
        o.db,
        o.file_bytes as f64 / (1u64 << 20) as f64,
        o.revenue,
        thousands(o.rows_matched),
        thousands(o.rows_scanned),
        o.repeat,
        cache_words(o.cache, &preps)
    );
    let _ = writeln!(s, "## Machine\n\n{}", o.machine.markdown());

    let _ = writeln!(s, "## Results\n");
    let mut t = Table::new(&[
        "#",
        "io",
        "sqpoll",
        "cores",
        "readahead",
        "coalesce KiB",
        "wall s: median (min–max)",
        "GB/s",
        "M rows/s",
        "speedup",
        "efficiency",
        "merged %",
        "mean request KiB",
        "reads in flight",
        "user s",
        "sys s",
        "I/O path that ran",
        "notes",
    ]);
    for c in o.configs.iter().filter(|c| c.skipped.is_none()) {
        t.row(config_row(c, o.machine.cpus));
    }
    s.push_str(&t.render());
    let _ = writeln!(
        s,
        "\nspeedup = median wall of the 1-core run with the same other settings / this median \
         (empty without a 1-core run); efficiency = speedup / cores. GB/s and rows/s use the \
         median wall time. merged %, mean request size and reads in flight (the device's mean read \
         queue depth, iostat's aqu-sz) come from `/sys/block/<disk>/stat` over each run \
         (device-wide: other I/O on the disk is counted too); user and system \
         are the whole process's CPU time, medians.\n"
    );

    let oversub: Vec<&ConfigSummary> = o
        .configs
        .iter()
        .filter(|c| c.oversubscribed && c.skipped.is_none())
        .collect();
    let _ = writeln!(s, "## Oversubscribed runs\n");
    if oversub.is_empty() {
        let _ = writeln!(
            s,
            "None: no configuration had more executors than the {} CPUs.\n",
            o.machine.cpus
        );
    } else {
        let _ = writeln!(
            s,
            "These configurations ran more executors than the {} CPUs, so their times measure \
             time-sharing, not parallel scaling (marked OVERSUBSCRIBED above and `*` in the plots):\n",
            o.machine.cpus
        );
        for c in oversub {
            let _ = writeln!(s, "- #{}: {}", c.index, c.config.label());
        }
        s.push('\n');
    }

    let skipped: Vec<&ConfigSummary> = o.configs.iter().filter(|c| c.skipped.is_some()).collect();
    if !skipped.is_empty() {
        let _ = writeln!(s, "## Skipped configurations\n");
        for c in skipped {
            let _ = writeln!(
                s,
                "- #{}: {}: {}",
                c.index,
                c.config.label(),
                c.skipped.as_deref().unwrap_or("")
            );
        }
        s.push('\n');
    }

    let notices: Vec<String> = o
        .configs
        .iter()
        .flat_map(|c| c.notices.iter().map(move |n| format!("#{}: {n}", c.index)))
        .collect();
    if !notices.is_empty() {
        let _ = writeln!(s, "## Engine notices\n");
        for n in notices {
            let _ = writeln!(s, "- {n}");
        }
        s.push('\n');
    }

    let _ = writeln!(
        s,
        "## Plots\n\n![throughput vs cores](throughput-vs-cores.svg)\n\n\
         ![throughput vs readahead window](throughput-vs-readahead.svg)\n\n\
         ![device request size vs readahead window](request-size-vs-readahead.svg)\n\n\
         Raw runs, with every engine report: `runs.json`; one row per configuration: `results.csv`."
    );
    s
}

fn config_row(c: &ConfigSummary, cpus: usize) -> Vec<String> {
    let k = &c.config;
    let wall = c.wall_s.map_or_else(
        || "–".to_string(),
        |w| format!("{:.3} ({:.3}–{:.3})", w.median, w.min, w.max),
    );
    let mut path = c.backend_ran.clone();
    path.push_str(match c.o_direct {
        Some(true) => ", O_DIRECT",
        Some(false) => ", buffered",
        None => "",
    });
    if c.sqpoll_ran == Some(true) {
        path.push_str(&format!(
            ", SQPOLL (poll threads {} s CPU)",
            num(c.sqpoll_cpu_s, 3)
        ));
    }
    let mut notes = Vec::new();
    if c.oversubscribed {
        notes.push(format!(
            "OVERSUBSCRIBED ({} executors on {cpus} CPUs)",
            k.cores
        ));
    }
    if c.runs > 0 && c.device_merged_pct.is_none() {
        notes.push("no device counters".to_string());
    }
    vec![
        c.index.to_string(),
        io_name(k.io).into(),
        sqpoll_name(k.sqpoll).into(),
        k.cores.to_string(),
        k.readahead.to_string(),
        k.coalesce_kib.to_string(),
        wall,
        num(c.gb_per_s, 3),
        num(c.rows_per_s.map(|r| r / 1e6), 2),
        num(c.speedup, 2),
        num(c.efficiency, 2),
        num(c.device_merged_pct, 1),
        num(c.device_mean_request_kib, 1),
        num(c.device_reads_in_flight, 1),
        num(c.user_s, 3),
        num(c.sys_s, 3),
        path,
        notes.join("; "),
    ]
}

/// `compare.md` of a comparison.
pub fn compare_markdown(r: &CompareReport, repeat: usize) -> String {
    let mut s = String::new();
    let preps: Vec<CachePrep> = r
        .runs
        .iter()
        .filter(|x| x.mode == CacheMode::Cold)
        .map(|x| x.cache)
        .collect();
    let _ = writeln!(
        s,
        "# TPC-H Q6: corescan and its peers, cold and warm\n\n- database: `{}`, table {}\n- \
         exact answer: revenue {}, {} of {} rows matched\n- rounds: {repeat}, each running every \
         engine cold, then every engine warm\n- {}\n- warm: each engine's files read once right \
         before its warm run\n\n## Machine\n\n{}",
        r.db,
        r.table,
        r.revenue,
        thousands(r.rows_matched),
        thousands(r.rows_scanned),
        cache_words(CacheMode::Cold, &preps),
        r.machine.markdown()
    );
    let _ = writeln!(s, "## Results\n");
    let mut t = Table::new(&[
        "engine",
        "version",
        "cold: wall s, median (min–max)",
        "cold: × corescan",
        "warm: wall s, median (min–max)",
        "warm: × corescan",
        "answer",
        "check",
    ]);
    for e in r.engines.iter().filter(|e| e.skipped.is_none()) {
        let cell = |mode: CacheMode| {
            r.results
                .iter()
                .find(|x| x.engine == e.engine && x.mode == mode)
                .map_or(("–".to_string(), "–".to_string()), |x| {
                    (
                        format!(
                            "{:.3} ({:.3}–{:.3})",
                            x.wall_s.median, x.wall_s.min, x.wall_s.max
                        ),
                        x.vs_corescan.map_or("–".into(), |v| format!("{v:.2}")),
                    )
                })
        };
        let (cold, cold_ratio) = cell(CacheMode::Cold);
        let (warm, warm_ratio) = cell(CacheMode::Warm);
        let printed = r
            .runs
            .iter()
            .find(|x| x.engine == e.engine)
            .map_or(String::new(), |x| x.printed.clone());
        t.row(vec![
            e.engine.name().into(),
            e.version.clone().unwrap_or_default(),
            cold,
            cold_ratio,
            warm,
            warm_ratio,
            printed,
            if e.check == "float" {
                "agrees (float rule)".into()
            } else {
                "equal (exact)".into()
            },
        ]);
    }
    s.push_str(&t.render());
    let _ = writeln!(
        s,
        "\n× corescan = the engine's median wall time over corescan's in the same cache mode \
         (above 1: corescan is faster). Times run from opening the database to the answer.\n"
    );
    let corescan_paths: Vec<String> = r
        .runs
        .iter()
        .filter(|x| x.engine == Engine::Corescan)
        .filter_map(|x| x.detail.clone().map(|d| format!("{}: {d}", x.mode.name())))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !corescan_paths.is_empty() {
        let _ = writeln!(s, "corescan's I/O path: {}.\n", corescan_paths.join("; "));
    }
    let skipped: Vec<&EngineInfo> = r.engines.iter().filter(|e| e.skipped.is_some()).collect();
    if !skipped.is_empty() {
        let _ = writeln!(s, "## Skipped engines\n");
        for e in skipped {
            let _ = writeln!(
                s,
                "- {}: {}",
                e.engine.name(),
                e.skipped.as_deref().unwrap_or("")
            );
        }
        s.push('\n');
    }
    let _ = writeln!(s, "## What each engine reads\n");
    for e in r.engines.iter().filter(|e| e.skipped.is_none()) {
        let _ = writeln!(
            s,
            "- {}: {} (`{}`, {:.1} MiB)",
            e.engine.name(),
            e.reads,
            e.files.join("`, `"),
            e.bytes as f64 / (1u64 << 20) as f64
        );
    }
    for n in &r.notes {
        let _ = writeln!(s, "- {n}");
    }
    let _ = writeln!(
        s,
        "\n## How answers were checked\n\n- corescan and SQLite (rusqlite) must return the exact \
         revenue and row count; DuckDB's copy has DECIMAL(15,2) columns, so its sum is exact and \
         must be equal.\n- The sqlite3 CLI and Turso sum binary floating-point numbers: {FLOAT_RULE}.\n\
         - The peers ran this SQL (the discount bounds are computed decimals: `0.06 + 0.01` in \
         floating point is 0.06999999999999999 and would drop every row with discount 0.07):\n\n\
         ```sql\n{}\n```\n",
        r.sql
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_and_numbers() {
        let mut t = Table::new(&["a", "b"]);
        t.row(vec!["1".into(), "x|y".into()]);
        t.row(vec!["2".into()]);
        assert_eq!(
            t.render(),
            "| a | b |\n|---|---|\n| 1 | x\\|y |\n| 2 |  |\n"
        );
        assert_eq!(thousands(195_207), "195,207");
        assert_eq!(thousands(7), "7");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(num(None, 2), "–");
        assert_eq!(num(Some(1.234), 2), "1.23");
    }
}
