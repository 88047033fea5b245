//! CPU time and peak memory from `getrusage`, for the process and for the calling thread.
//!
//! Layering: a leaf of the crate (imports nothing from it); the scan loops and the coordinator
//! measure with it.

use serde::Serialize;

/// User and system CPU time, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuTime {
    /// Time spent in user mode.
    pub user_s: f64,
    /// Time spent in the kernel.
    pub sys_s: f64,
}

impl CpuTime {
    /// CPU time used by the whole process so far.
    pub fn process() -> Self {
        usage(libc::RUSAGE_SELF).0
    }

    /// CPU time used by the calling thread so far.
    pub fn thread() -> Self {
        usage(libc::RUSAGE_THREAD).0
    }

    /// The time used between `earlier` and `self`.
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
        }
    }
}

/// The process's peak resident set size so far, in MiB: `VmHWM` of `/proc/self/status`, the
/// high-water mark of this program's own memory. (`getrusage`'s `ru_maxrss`, the fallback,
/// keeps the peak of the process image before `execve`: a corescan started by a large
/// parent would report the parent's peak.)
pub fn peak_rss_mib() -> f64 {
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        });
    hwm.unwrap_or_else(|| usage(libc::RUSAGE_SELF).1 as f64) / 1024.0
}

fn usage(who: libc::c_int) -> (CpuTime, i64) {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return (CpuTime::default(), 0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        CpuTime {
            user_s: secs(ru.ru_utime),
            sys_s: secs(ru.ru_stime),
        },
        ru.ru_maxrss,
    )
}

static PROCESS_START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Marks now as the process's start, for the reports' start-up figure
/// ([`crate::RunReport::first_page_since_process_start_s`]): a binary calls this first thing
/// in `main`. Later calls change nothing.
pub fn mark_process_start() {
    PROCESS_START.get_or_init(std::time::Instant::now);
}

/// The instant [`mark_process_start`] recorded, if it was called.
pub fn process_start() -> Option<std::time::Instant> {
    PROCESS_START.get().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_shows_up_as_user_time() {
        let before = CpuTime::thread();
        let mut x = 0u64;
        let t0 = std::time::Instant::now();
        while t0.elapsed().as_millis() < 50 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let used = CpuTime::thread().since(before);
        assert!(used.user_s + used.sys_s > 0.01, "{used:?}");
        assert!(peak_rss_mib() > 0.0);
    }
}
