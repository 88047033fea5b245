//! [`Machine`]: what a set of results was measured on (CPUs, kernel, memory, the disk under the
//! database file), recorded with every experiment because timings mean nothing without it.
//!
//! Every field is best effort: a value that cannot be read says `unknown` rather than failing
//! the experiment.

use std::fs;
use std::path::Path;

use engine::BlockDevice;
use serde::Serialize;

use super::UtcTime;

/// The machine an experiment ran on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// When the experiment started (UTC).
    pub date: String,
    /// CPUs this process may run on (executors beyond this are oversubscribed).
    pub cpus: usize,
    /// CPUs online in the machine (`/sys/devices/system/cpu/online`).
    pub online_cpus: String,
    /// The CPU model (`/proc/cpuinfo`).
    pub cpu_model: String,
    /// The kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: String,
    /// Physical memory in GiB.
    pub memory_gib: f64,
    /// The disk(s) under the database file, with size, scheduler and request-size limit, or
    /// why unknown.
    pub disk: String,
    /// Whether the process runs as root (only root can drop the whole page cache).
    pub root: bool,
}

impl Machine {
    /// Describes this machine and the disk holding `db`.
    pub fn probe(db: &Path) -> Machine {
        let read = |p: &str| fs::read_to_string(p).map(|s| s.trim().to_string()).ok();
        let cpu_model = read("/proc/cpuinfo")
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let memory_gib = read("/proc/meminfo")
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_ascii_whitespace().nth(1))
                    .and_then(|kib| kib.parse::<f64>().ok())
            })
            .map_or(0.0, |kib| kib / (1024.0 * 1024.0));
        Machine {
            date: UtcTime::now().readable(),
            cpus: engine::available_cpus().len().max(1),
            online_cpus: read("/sys/devices/system/cpu/online").unwrap_or_else(|| "unknown".into()),
            cpu_model,
            kernel: read("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
            memory_gib,
            disk: describe_disk(db),
            // SAFETY: geteuid has no preconditions.
            root: unsafe { libc::geteuid() } == 0,
        }
    }

    /// One markdown bullet list describing the machine.
    pub fn markdown(&self) -> String {
        format!(
            "- date: {}\n- CPUs: {} available to corescan (online: {}), {}\n- kernel: {}\n\
             - memory: {:.1} GiB\n- disk: {}\n- root: {} ({})\n",
            self.date,
            self.cpus,
            self.online_cpus,
            self.cpu_model,
            self.kernel,
            self.memory_gib,
            self.disk,
            if self.root { "yes" } else { "no" },
            if self.root {
                "cold runs drop the whole page cache"
            } else {
                "cold runs can only fadvise(DONTNEED) the files read"
            }
        )
    }
}

/// `vda (virtio 0x1af4, 256.0 GiB, rotational, scheduler mq-deadline, max request 4096 KiB)`.
fn describe_disk(db: &Path) -> String {
    let device = match BlockDevice::for_file(db) {
        Ok(d) => d,
        Err(reason) => return format!("unknown: {reason}"),
    };
    device
        .disks
        .iter()
        .map(|disk| {
            let read = |f: &str| {
                fs::read_to_string(format!("/sys/block/{disk}/{f}"))
                    .map(|s| s.trim().to_string())
                    .ok()
            };
            let mut parts = Vec::new();
            match (read("device/model"), read("device/vendor")) {
                (Some(m), _) if !m.is_empty() => parts.push(m),
                (_, Some(v)) if v == "0x1af4" => parts.push("virtio 0x1af4".into()),
                (_, Some(v)) if !v.is_empty() => parts.push(format!("vendor {v}")),
                _ => {}
            }
            if let Some(sectors) = read("size").and_then(|s| s.parse::<u64>().ok()) {
                parts.push(format!(
                    "{:.1} GiB",
                    sectors as f64 * 512.0 / (1u64 << 30) as f64
                ));
            }
            match read("queue/rotational").as_deref() {
                Some("1") => parts.push("rotational (as the kernel sees it)".into()),
                Some("0") => parts.push("non-rotational".into()),
                _ => {}
            }
            if let Some(s) = read("queue/scheduler") {
                // The active scheduler is the bracketed one.
                let active = s
                    .split_ascii_whitespace()
                    .find(|w| w.starts_with('['))
                    .map(|w| w.trim_matches(['[', ']']).to_string())
                    .unwrap_or(s);
                parts.push(format!("scheduler {active}"));
            }
            if let Some(kb) = read("queue/max_sectors_kb") {
                parts.push(format!("max request {kb} KiB"));
            }
            format!("{disk} ({})", parts.join(", "))
        })
        .collect::<Vec<_>>()
        .join(" + ")
}
