//! Backend policy: which backend and runtime a scan gets, where SQ poll threads go, and how much
//! DMA memory glommio may lock. The coordinator asks; these functions decide.

use crate::backend::residency;
use crate::backend::{IoBackend, SqpollMode};
use crate::coordinator::{list_cpus, ExecutorSpec, IoChoice, ScanSettings, AUTO_CACHED_FRACTION};
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::hugepages::HUGE_PAGE;
use partitioner::TablePlan;

/// glommio's smallest useful I/O memory, and what the non-DMA backends get.
pub(crate) const MIN_IO_MEMORY: usize = 64 << 10;

/// Whether io_uring can be used here: a ring is set up and torn down once.
pub(crate) fn io_uring_available(faults: &Faults) -> std::result::Result<(), String> {
    if faults.io_uring {
        return Err("disabled by fault injection".into());
    }
    io_uring::IoUring::new(8)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// glommio registers (locks) its I/O memory. Without CAP_IPC_LOCK that memory, for all
/// executors together, must fit under RLIMIT_MEMLOCK: shrink it to fit (reads beyond it then
/// use ordinary memory), or fail naming the limit when not even glommio's minimum fits.
pub(crate) fn io_memory_budget(
    wanted: usize,
    executors: usize,
    faults: &Faults,
) -> Result<(usize, Option<String>)> {
    let (limit, privileged) = if faults.memlock {
        (Some(64u64 << 10), false)
    } else {
        (memlock_limit(), has_ipc_lock())
    };
    let Some(limit) = limit.filter(|_| !privileged) else {
        return Ok((wanted, None));
    };
    fit_io_memory(wanted, executors, limit)
}

/// Locked bytes for `bytes` of I/O memory: io_uring accounts a buffer on huge pages (see
/// [`crate::hugepages`]) in whole huge pages, and [`crate::hugepages::HugePageAlloc`] puts
/// every allocation of a huge page or more on them.
fn locked_size(bytes: usize) -> usize {
    if bytes >= HUGE_PAGE {
        bytes.next_multiple_of(HUGE_PAGE)
    } else {
        bytes
    }
}

/// [`io_memory_budget`] under a limit of `limit` locked bytes for all executors.
fn fit_io_memory(wanted: usize, executors: usize, limit: u64) -> Result<(usize, Option<String>)> {
    let share = (limit / executors.max(1) as u64) as usize;
    if locked_size(wanted) <= share {
        return Ok((wanted, None));
    }
    // Cut to whole huge pages when the share holds at least one, so that what io_uring
    // accounts still fits.
    let share = if share >= HUGE_PAGE {
        share - share % HUGE_PAGE
    } else {
        share
    };
    if share < MIN_IO_MEMORY {
        return Err(Error::Config(format!(
            "RLIMIT_MEMLOCK is {} KiB, too low for {executors} executors' DMA memory (at least {} KiB): \
             raise it (ulimit -l {}) or use --io pread",
            limit >> 10,
            (MIN_IO_MEMORY * executors) >> 10,
            (wanted * executors) >> 10
        )));
    }
    Ok((
        share,
        Some(format!(
            "RLIMIT_MEMLOCK is {} KiB: DMA memory cut to {} KiB per executor (reads beyond it use ordinary memory)",
            limit >> 10,
            share >> 10
        )),
    ))
}

/// The soft RLIMIT_MEMLOCK in bytes, or `None` when unlimited.
fn memlock_limit() -> Option<u64> {
    // SAFETY: getrlimit only writes the struct we pass.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0
        || r.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    Some(r.rlim_cur)
}

/// Whether the process has CAP_IPC_LOCK (bit 14 of CapEff), which lifts RLIMIT_MEMLOCK.
fn has_ipc_lock() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 14) != 0)
}

/// Resolves `auto` by asking the kernel whether the table's pages are cached; returns the
/// backend and, for `auto`, a notice saying why it was chosen.
pub(crate) fn choose_backend(
    plan: &TablePlan,
    settings: &ScanSettings,
) -> Result<(IoBackend, Option<String>)> {
    match settings.io {
        IoChoice::Fixed(b) => Ok((b, None)),
        IoChoice::Auto => {
            match residency::sample(&plan.path, plan.header.page_size, &plan.leaves, 1024) {
                Ok(r) => {
                    let cached = r.fraction() >= AUTO_CACHED_FRACTION;
                    let backend = if cached {
                        IoBackend::Mmap
                    } else {
                        IoBackend::Dma
                    };
                    Ok((
                        backend,
                        Some(format!(
                            "auto: {:.0}% of {} sampled table pages are in the page cache, so {backend}",
                            100.0 * r.fraction(),
                            r.sampled
                        )),
                    ))
                }
                Err(e) => Ok((
                    IoBackend::Dma,
                    Some(format!("auto: page-cache residency unknown ({e}), so dma")),
                )),
            }
        }
    }
}

/// The SQ poll CPU of each executor: from its spec when a topology names one, else by policy.
/// `auto` gives an executor a CPU that runs no executor (each such CPU hosts one poll thread);
/// `on` refuses to run when some executor cannot get one. Only the `uring` backend has poll
/// threads: with another one (`--io auto` choosing `dma` or `mmap`, say), `auto` runs without
/// them and says so in the returned notice, while `on` is an error.
pub(crate) fn sqpoll_placement(
    executors: &[ExecutorSpec],
    available: &[usize],
    backend: IoBackend,
    mode: SqpollMode,
) -> Result<(Vec<Option<usize>>, Option<String>)> {
    let named = executors.iter().any(|e| e.sqpoll_cpu.is_some());
    let none = vec![None; executors.len()];
    if mode == SqpollMode::Off && !named {
        return Ok((none, None));
    }
    if backend != IoBackend::Uring {
        if mode == SqpollMode::On {
            return Err(Error::Config(format!(
                "SQPOLL needs --io uring (the {backend} backend has no SQ poll thread)"
            )));
        }
        return Ok((
            none,
            Some(format!(
                "no SQPOLL: the {backend} backend has no SQ poll thread (--io uring has)"
            )),
        ));
    }
    if named {
        return Ok((executors.iter().map(|e| e.sqpoll_cpu).collect(), None));
    }
    let busy: std::collections::HashSet<usize> = executors.iter().map(|e| e.cpu).collect();
    let mut idle = available.iter().copied().filter(|c| !busy.contains(c));
    let placement: Vec<Option<usize>> = executors.iter().map(|_| idle.next()).collect();
    if mode == SqpollMode::On && placement.iter().any(Option::is_none) {
        let idle: Vec<usize> = available
            .iter()
            .copied()
            .filter(|c| !busy.contains(c))
            .collect();
        return Err(Error::Config(format!(
            "--sqpoll on needs an idle CPU for each of the {} executors' poll threads, but only {} \
             CPU(s) run no executor ({}); use fewer executors or --sqpoll auto",
            executors.len(),
            idle.len(),
            if idle.is_empty() { "none".to_string() } else { list_cpus(&idle) }
        )));
    }
    Ok((placement, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_memory_fits_the_memlock_limit_in_whole_huge_pages() {
        let mib = 1usize << 20;
        // Room for everything, counted in huge pages: 9 MiB wanted locks 10 MiB.
        assert_eq!(
            fit_io_memory(9 * mib, 2, 20 * mib as u64).unwrap(),
            (9 * mib, None)
        );
        let (cut, notice) = fit_io_memory(9 * mib, 2, 19 * mib as u64).unwrap();
        assert_eq!(cut, 8 * mib, "9.5 MiB each, cut to whole huge pages");
        assert!(notice.unwrap().contains("RLIMIT_MEMLOCK"));
        // Below a huge page, small pages: exact.
        assert_eq!(
            fit_io_memory(9 * mib, 4, 6 * mib as u64).unwrap().0,
            3 * mib / 2
        );
        assert_eq!(fit_io_memory(mib, 1, mib as u64).unwrap(), (mib, None));
        // Not even glommio's minimum.
        let e = fit_io_memory(9 * mib, 2, 64 << 10).unwrap_err().to_string();
        assert!(e.contains("RLIMIT_MEMLOCK is 64 KiB"), "{e}");
    }
}
