//! The human-readable report of a scan, shared by `q6` and `query`: [`human`] prints a
//! [`RunReport`]'s figures (rows, time, executors, I/O, snapshot, reads, device, CPU, counters,
//! start-up, one line per executor); each command adds its own lines around them (`q6` its
//! revenue and rows matched, `query` its result rows and how long the stream waited) with
//! [`line`], so every line is labelled and aligned alike.

use std::fmt::Write;

use engine::RunReport;

/// One report line: `label` padded to the report's column, then `text`.
pub fn line(label: &str, text: &str) -> String {
    format!("{label:<11} {text}\n")
}

/// The run's figures, one labelled line each (as [`line`] writes them), then one line per
/// executor. `produced` is what the rows line says after the rows scanned: the command's
/// own count (`12 matched`, `3 result rows`).
pub fn human(r: &RunReport, produced: &str) -> String {
    let mut s = String::new();
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let io = &r.io;
    let _ = writeln!(s, "rows        {} scanned, {produced}", r.rows_scanned);
    let _ = writeln!(
        s,
        "time        {:.3} s wall, {:.2} GB/s, {:.1} M rows/s",
        r.wall_s,
        r.gb_per_s,
        r.rows_per_s / 1e6
    );
    let cpus: Vec<String> = r.executors.iter().map(|e| e.cpu.to_string()).collect();
    let _ = writeln!(
        s,
        "executors   {} on CPUs {}{}",
        r.executors.len(),
        cpus.join(","),
        if r.oversubscribed {
            format!(
                " (OVERSUBSCRIBED: {} CPUs available; times measure time-sharing)",
                r.available_cpus
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "io          {}, {}{}, {}, readahead {} pages, reads up to {} pages (coalesce {} KiB)",
        io.backend,
        if io.o_direct {
            "O_DIRECT"
        } else {
            "buffered (no O_DIRECT)"
        },
        match io.huge_page_buffers {
            Some(true) => " into huge-page buffers",
            Some(false) => " into small-page buffers",
            None => "",
        },
        match (io.sqpoll_cpu, io.sqpoll_cpu_s) {
            (Some(c), Some(t)) if io.sqpoll => format!("SQPOLL on CPU {c} ({t:.3} s CPU)"),
            (Some(c), None) if io.sqpoll => format!("SQPOLL on CPU {c}"),
            _ if io.sqpoll => "SQPOLL".to_string(),
            _ => "no SQPOLL".to_string(),
        },
        io.readahead,
        io.max_read_pages,
        io.coalesce_kib
    );
    if let Some(n) = &io.notice {
        let _ = writeln!(s, "notice      {n}");
    }
    if let Some(f) = &r.files {
        let _ = writeln!(
            s,
            "files       {} listed, {} read, {} skipped (excluded by _file, or without the table \
             under --skip-missing); planning {:.1} µs per \
             file on average, {:.1} µs at most; at most {} open at once (one per executor)",
            f.files,
            f.opened,
            f.skipped,
            f.plan_s_mean * 1e6,
            f.plan_s_max * 1e6,
            f.open_files_bound
        );
    }
    let snap = &r.snapshot;
    let _ = writeln!(
        s,
        "snapshot    {}{}, {} attempt{}, {} lock retr{}",
        snap.protocol,
        snap.read_mark
            .map_or(String::new(), |i| format!(" (READ({i}))")),
        snap.attempts,
        if snap.attempts == 1 { "" } else { "s" },
        snap.lock_retries,
        if snap.lock_retries == 1 { "y" } else { "ies" }
    );
    let _ = writeln!(
        s,
        "reads       {} submitted in {} batches (io_uring_enter: {}); {} pages, {:.1} MiB; {} overflow, {} from the WAL, {} wasted",
        r.reads_submitted,
        r.submit_batches,
        r.io_uring_enters.map_or_else(
            || match io.backend.as_str() {
                "dma" => "not counted by glommio".to_string(),
                _ => "none".to_string(),
            },
            |n| n.to_string()
        ),
        r.pages_read,
        mib(r.bytes_read),
        r.overflow_pages_read,
        r.wal_pages_read,
        r.wasted_pages
    );
    match (&r.device, &r.device_note) {
        (Some(d), _) => {
            let _ = writeln!(
                s,
                "device      {}: {} requests, {:.1}% merged, mean request {:.1} KiB, {:.1} MiB read; \
                 busy {:.0}%, {:.1} reads in flight on average, {:.2} ms each",
                d.disk,
                d.requests,
                d.merged_pct,
                d.mean_request_kib,
                mib(d.bytes),
                d.busy_pct,
                d.mean_reads_in_flight,
                d.mean_read_ms
            );
        }
        (None, note) => {
            let _ = writeln!(
                s,
                "device      unknown: {}",
                note.as_deref().unwrap_or("no counters")
            );
        }
    }
    let _ = writeln!(
        s,
        "cpu         user {:.3} s, system {:.3} s; peak memory {:.1} MiB{}",
        r.cpu_time.user_s,
        r.cpu_time.sys_s,
        r.peak_rss_mib,
        if io.backend == "mmap" {
            " (resident set: includes the mapped file's cached pages)"
        } else {
            ""
        }
    );
    let c = &r.counters;
    let _ = match (&c.unavailable, c.cycles, c.instructions, c.llc_misses) {
        (None, Some(cy), Some(ins), Some(llc)) => writeln!(
            s,
            "counters    {:.3} B cycles, {:.3} B instructions ({:.2} per cycle), {:.3} M LLC misses",
            cy as f64 / 1e9,
            ins as f64 / 1e9,
            ins as f64 / (cy as f64).max(1.0),
            llc as f64 / 1e6
        ),
        (why, ..) => writeln!(
            s,
            "counters    unavailable: {}",
            why.as_deref().unwrap_or("unknown")
        ),
    };
    if let Some(first) = r.first_page_s {
        let _ = writeln!(
            s,
            "start-up    first page decoded {}{:.3} s after the executors started",
            r.first_page_since_process_start_s
                .map_or(String::new(), |p| format!(
                    "{p:.3} s after the process started, "
                )),
            first
        );
    }
    for e in &r.executors {
        let _ = writeln!(
            s,
            "  CPU {:<3} {}{}{} pages, {} rows{}, {} reads, {:.3} s wall, user {:.3} s, sys {:.3} s{}{}",
            e.cpu,
            e.files.as_ref().map_or(String::new(), |f| format!(
                "{} file{} ({} read), ",
                f.files,
                if f.files == 1 { "" } else { "s" },
                f.opened
            )),
            if e.parent_pages > 0 {
                format!(
                    "{} leaf-parent pages read in {:.3} s, then ",
                    e.parent_pages, e.parents_s
                )
            } else {
                String::new()
            },
            e.pages,
            e.rows,
            // Only a kernel whose runner counts the rows it kept says how many (Q6's matches).
            e.rows_kept.map_or(String::new(), |k| format!(", {k} matched")),
            e.reads_submitted,
            e.wall_s,
            e.user_s,
            e.sys_s,
            match (e.rows_per_s, e.gb_per_s) {
                (Some(r), Some(g)) => format!("; decoded {:.1} M rows/s, {g:.2} GB/s", r / 1e6),
                _ => String::new(),
            },
            match (e.sqpoll_cpu, e.sqpoll_cpu_s) {
                (Some(c), Some(t)) => format!(", SQ poll thread on CPU {c}: {t:.3} s"),
                (Some(c), None) => format!(", SQ poll thread on CPU {c}"),
                _ => String::new(),
            }
        );
    }
    s
}
