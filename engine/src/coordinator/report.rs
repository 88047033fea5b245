//! What a run measured: the device's and the process's counters around the executors
//! ([`Measure`]), and the [`RunReport`] built from them and the executors' own reports.

use std::path::Path;
use std::time::Instant;

use partitioner::TablePlan;

use crate::counters::HwCounters;
use crate::cputime::{peak_rss_mib, process_start, CpuTime};
use crate::device::{BlockDevice, DeviceReport, ReadCounters};
use crate::report::{IoReport, RunReport, SnapshotReport};
use crate::scan::ExecutorReport;
use crate::settings::ScanSettings;

use super::launch::Launch;
use super::validate::Checked;

/// The counters read right before the executors start.
pub(super) struct Measure {
    device: Result<(BlockDevice, ReadCounters, Instant), String>,
    cpu_before: CpuTime,
    started: Instant,
}

/// The counters over the run.
pub(super) struct Measured {
    /// Seconds from the start to the last executor's outcome.
    pub wall: f64,
    /// When the executors were started.
    pub started: Instant,
    device: Option<DeviceReport>,
    device_note: Option<String>,
    cpu_time: CpuTime,
}

impl Measure {
    /// Reads the device's counters (for the disk holding `path`) and the process's CPU time.
    pub fn start(path: &Path) -> Measure {
        let device = BlockDevice::for_file(path).and_then(|d| {
            let before = d.read()?;
            Ok((d, before, Instant::now()))
        });
        Measure {
            device,
            cpu_before: CpuTime::process(),
            started: Instant::now(),
        }
    }

    /// Reads them again: the run's figures, `wall` measured up to now.
    pub fn finish(self) -> Measured {
        let wall = self.started.elapsed().as_secs_f64();
        let cpu_time = CpuTime::process().since(self.cpu_before);
        let (device, device_note) = match self
            .device
            .and_then(|(d, before, at)| Ok(d.report(before, d.read()?, at.elapsed())))
        {
            Ok(report) => (Some(report), None),
            Err(reason) => (None, Some(reason)),
        };
        Measured {
            wall,
            started: self.started,
            device,
            device_note,
            cpu_time,
        }
    }
}

/// The run's report from the executors' `reports` (in range order) and what was measured
/// around them.
pub(super) fn build(
    plan: &TablePlan,
    settings: &ScanSettings,
    launch: &Launch,
    checked: &Checked,
    measured: Measured,
    reports: Vec<ExecutorReport>,
) -> RunReport {
    let wall = measured.wall;
    let sum = |f: fn(&ExecutorReport) -> u64| reports.iter().map(f).sum::<u64>();
    let bytes_read = sum(|r| r.bytes_read);
    let leaf_pages = sum(|r| r.pages);
    let overflow = sum(|r| r.overflow_pages);
    let rows = sum(|r| r.rows);
    let o_direct = reports.iter().all(|r| r.o_direct);
    let mut notices = launch.io.notices.clone();
    notices.extend(plan.read.notice.clone());
    // A fallback inside an executor (O_DIRECT or SQPOLL refused) changes what ran.
    notices.extend(reports.iter().find_map(|r| r.notice.clone()));
    let ran = reports
        .first()
        .map_or(launch.io.backend.name().to_string(), |r| r.backend.clone());
    let enters: Option<u64> = reports.iter().map(|r| r.io_uring_enters).sum();
    let sqpoll_cpu = reports.iter().find_map(|r| r.sqpoll_cpu);
    let first_page = reports.iter().filter_map(|r| r.first_page_at).min();
    RunReport {
        path: plan.path.display().to_string(),
        table: plan.table.name.clone(),
        rows_scanned: rows,
        wall_s: wall,
        gb_per_s: bytes_read as f64 / wall.max(1e-9) / 1e9,
        rows_per_s: rows as f64 / wall.max(1e-9),
        pages_read: leaf_pages + overflow,
        overflow_pages_read: overflow,
        wal_pages_read: sum(|r| r.wal_pages),
        bytes_read,
        reads_submitted: sum(|r| r.reads_submitted),
        submit_batches: sum(|r| r.submit_batches),
        io_uring_enters: enters,
        wasted_pages: sum(|r| r.wasted_bytes).div_ceil(u64::from(plan.header.page_size)),
        io: IoReport {
            backend: ran,
            o_direct,
            huge_page_buffers: reports
                .iter()
                .map(|r| r.huge_page_buffers)
                .collect::<Option<Vec<bool>>>()
                .map(|all| all.iter().all(|&h| h)),
            sqpoll: sqpoll_cpu.is_some(),
            sqpoll_cpu,
            sqpoll_cpu_s: reports
                .iter()
                .filter_map(|r| r.sqpoll_cpu_s)
                .reduce(|a, b| a + b),
            readahead: settings.readahead,
            coalesce_kib: settings.coalesce_kib,
            max_read_pages: launch.max_read,
            notice: (!notices.is_empty()).then(|| notices.join("; ")),
        },
        counters: HwCounters::sum(reports.iter().map(|r| &r.counters)),
        first_page_s: first_page.map(|t| t.duration_since(measured.started).as_secs_f64()),
        first_page_since_process_start_s: first_page
            .zip(process_start())
            .map(|(t, p)| t.checked_duration_since(p).map_or(0.0, |d| d.as_secs_f64())),
        executors: reports,
        device: measured.device,
        device_note: measured.device_note,
        cpu_time: measured.cpu_time,
        peak_rss_mib: peak_rss_mib(),
        available_cpus: checked.available.len(),
        oversubscribed: checked.oversubscribed,
        snapshot: SnapshotReport::of(&plan.read),
        files: None,
    }
}
