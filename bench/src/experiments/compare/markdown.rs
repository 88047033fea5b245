//! `compare.md` of `bench compare`.

use std::fmt::Write as _;

use super::report::{CompareReport, Engine, EngineInfo};
use crate::experiments::markdown::{thousands, Table};
use crate::experiments::peers::FLOAT_RULE;
use crate::experiments::{cache_words, CacheMode, CachePrep};

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
