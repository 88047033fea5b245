//! `summary.md` of `bench scale` and `bench sweep`.

use std::fmt::Write as _;

use super::outcome::{ConfigSummary, ScaleOutcome};
use crate::experiments::markdown::{num, thousands, Table};
use crate::experiments::{cache_words, io_name, sqpoll_name, CachePrep};

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
