//! Block-device counters from `/sys/block/<disk>/stat`, diffed over a scan.
//!
//! These show what actually reached the device: how many read requests, how many the block layer
//! merged, the mean request size, and how deep the device's queue was: the mean number of reads
//! in flight (iostat's `aqu-sz`, for reads) and the share of the time it had any (`%util`). A
//! direct-I/O scan that keeps a deep window but shows about one read in flight is losing its
//! window somewhere between the ring and the disk. A file on a partition or a device-mapper volume is resolved
//! to the disk(s) underneath. The counters are device-wide: other I/O on the same disk during the
//! scan is counted too.
//!
//! Layering: a leaf of the crate (imports nothing from it); the coordinator reads the counters
//! around a run.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// The disks a file's blocks live on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDevice {
    /// Disk names under `/sys/block` (one, unless the file sits on a multi-disk volume).
    pub disks: Vec<String>,
}

/// A snapshot of the read counters of the stat file, summed over the disks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCounters {
    /// Read requests completed (field 1).
    pub reads: u64,
    /// Read requests merged into others before reaching the device (field 2).
    pub merged: u64,
    /// 512-byte sectors read (field 3).
    pub sectors: u64,
    /// Milliseconds read requests spent in flight, summed over the requests (field 4).
    pub read_ticks_ms: u64,
    /// Milliseconds the device had any request in flight (field 10), summed over the disks.
    pub io_ticks_ms: u64,
}

/// What reached the device during a scan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceReport {
    /// The disk (or disks, joined with `+`).
    pub disk: String,
    /// Read requests the device completed.
    pub requests: u64,
    /// Read requests merged by the block layer.
    pub merged: u64,
    /// `merged / (requests + merged)`, in percent (iostat's `%rrqm`).
    pub merged_pct: f64,
    /// Mean size of a completed request in KiB (iostat's `rareq-sz`).
    pub mean_request_kib: f64,
    /// Bytes the device read.
    pub bytes: u64,
    /// Mean read requests in flight at the device over the scan: read ticks over wall time
    /// (iostat's `aqu-sz`, reads only).
    pub mean_reads_in_flight: f64,
    /// Mean time a read request spent in flight, in milliseconds (iostat's `r_await`).
    pub mean_read_ms: f64,
    /// Share of the scan's wall time the device had any request in flight, in percent
    /// (iostat's `%util`; averaged over the disks of a multi-disk volume).
    pub busy_pct: f64,
}

impl BlockDevice {
    /// Finds the disk(s) holding `path`, or says why there is none (tmpfs, overlay, ...).
    pub fn for_file(path: &Path) -> Result<Self, String> {
        let meta = fs::metadata(path).map_err(|e| format!("stat {}: {e}", path.display()))?;
        let dev = meta.dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let link = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
        let node = fs::canonicalize(&link).map_err(|_| {
            format!("the file is not on a block device (device {major}:{minor}; tmpfs, overlay or network filesystem)")
        })?;
        let mut disks = Vec::new();
        resolve_disks(&node, &mut disks, 0);
        if disks.is_empty() {
            return Err(format!("no disk found under {}", node.display()));
        }
        disks.sort();
        disks.dedup();
        Ok(BlockDevice { disks })
    }

    /// Reads the current counters.
    pub fn read(&self) -> Result<ReadCounters, String> {
        let mut total = ReadCounters::default();
        for d in &self.disks {
            let path = format!("/sys/block/{d}/stat");
            let text = fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
            let c = parse_stat(&text).ok_or_else(|| format!("{path}: unexpected contents"))?;
            total.reads += c.reads;
            total.merged += c.merged;
            total.sectors += c.sectors;
            total.read_ticks_ms += c.read_ticks_ms;
            total.io_ticks_ms += c.io_ticks_ms;
        }
        Ok(total)
    }

    /// The report for counters read `elapsed` apart, before and after a scan.
    pub fn report(
        &self,
        before: ReadCounters,
        after: ReadCounters,
        elapsed: std::time::Duration,
    ) -> DeviceReport {
        let requests = after.reads.saturating_sub(before.reads);
        let merged = after.merged.saturating_sub(before.merged);
        let bytes = after.sectors.saturating_sub(before.sectors) * 512;
        let read_ticks = after.read_ticks_ms.saturating_sub(before.read_ticks_ms) as f64;
        let io_ticks = after.io_ticks_ms.saturating_sub(before.io_ticks_ms) as f64;
        let wall_ms = elapsed.as_secs_f64() * 1e3;
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        DeviceReport {
            disk: self.disks.join("+"),
            requests,
            merged,
            merged_pct: 100.0 * ratio(merged as f64, (requests + merged) as f64),
            mean_request_kib: ratio(bytes as f64 / 1024.0, requests as f64),
            bytes,
            mean_reads_in_flight: ratio(read_ticks, wall_ms),
            mean_read_ms: ratio(read_ticks, requests as f64),
            busy_pct: (100.0 * ratio(io_ticks / self.disks.len().max(1) as f64, wall_ms))
                .min(100.0),
        }
    }
}

/// Walks from a `/sys/devices/.../block/...` node to whole disks: a partition resolves to its
/// parent, a device-mapper or md volume to the disks in its `slaves/`.
fn resolve_disks(node: &Path, out: &mut Vec<String>, depth: u32) {
    if depth > 8 {
        return;
    }
    let node = if node.join("partition").exists() {
        match node.parent() {
            Some(p) => p.to_path_buf(),
            None => return,
        }
    } else {
        node.to_path_buf()
    };
    let slaves: Vec<PathBuf> = fs::read_dir(node.join("slaves"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| fs::canonicalize(e.path()).ok())
                .collect()
        })
        .unwrap_or_default();
    if slaves.is_empty() {
        if let Some(name) = node.file_name().and_then(|n| n.to_str()) {
            if Path::new("/sys/block").join(name).join("stat").exists() {
                out.push(name.to_string());
            }
        }
    } else {
        for s in slaves {
            resolve_disks(&s, out, depth + 1);
        }
    }
}

/// Parses the read fields (1-4) and the busy time (field 10) of a `/sys/block/*/stat` line.
fn parse_stat(text: &str) -> Option<ReadCounters> {
    let f: Vec<u64> = text
        .split_ascii_whitespace()
        .map(|x| x.parse::<u64>())
        .collect::<Result<_, _>>()
        .ok()?;
    if f.len() < 11 {
        return None;
    }
    Some(ReadCounters {
        reads: f[0],
        merged: f[1],
        sectors: f[2],
        read_ticks_ms: f[3],
        io_ticks_ms: f[9],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_diffs_counters() {
        let a = parse_stat("  100 900 8000 5 0 0 0 0 0 40 50").unwrap();
        let b = parse_stat("  200 1800 16000 1605 0 0 0 0 3 440 1700").unwrap();
        let dev = BlockDevice {
            disks: vec!["vda".into()],
        };
        let r = dev.report(a, b, std::time::Duration::from_millis(500));
        assert_eq!(r.requests, 100);
        assert_eq!(r.merged, 900);
        assert!((r.merged_pct - 90.0).abs() < 1e-9);
        assert!((r.mean_request_kib - 40.0).abs() < 1e-9);
        // 1600 ms of read time over 500 ms of wall: 3.2 reads in flight on average, 16 ms each;
        // busy 400 of 500 ms.
        assert!((r.mean_reads_in_flight - 3.2).abs() < 1e-9);
        assert!((r.mean_read_ms - 16.0).abs() < 1e-9);
        assert!((r.busy_pct - 80.0).abs() < 1e-9);
        assert!(parse_stat("garbage").is_none());
        // Kernels since 4.18 print 15 or 17 fields; fewer than 11 is not a stat file.
        assert!(parse_stat("1 2 3 4").is_none());
        assert!(parse_stat("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17").is_some());
    }

    #[test]
    fn files_on_tmpfs_have_no_block_device() {
        // Linux systems (and containers) mount a tmpfs there; without it this test cannot check
        // anything, so it fails rather than passing silently.
        let dir = Path::new("/dev/shm");
        assert!(
            dir.is_dir(),
            "no /dev/shm: this test needs a tmpfs mount there"
        );
        let f = tempfile_in(dir);
        let found = BlockDevice::for_file(&f);
        let _ = fs::remove_file(&f);
        assert!(found.is_err(), "a tmpfs file has no block device");
    }

    fn tempfile_in(dir: &Path) -> PathBuf {
        let p = dir.join(format!("corescan-device-test-{}", std::process::id()));
        fs::write(&p, b"x").unwrap();
        p
    }
}
