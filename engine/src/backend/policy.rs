//! Backend policy: which backend and runtime a scan gets, where SQ poll threads go, and how much
//! DMA memory glommio may lock. The coordinator asks [`resolve`] once; it returns one
//! [`ResolvedIo`] that carries every decision and every notice explaining one (`auto`'s choice,
//! SQPOLL left off, io_uring missing, DMA memory cut), in the order they were made.
//!
//! Layering: the policy reads the settings ([`crate::settings`]), the plan and the machine; it
//! imports neither the scan loops nor the coordinator. SQ poll CPUs are placed by the topology
//! planner's own rule ([`partitioner::topology::assign_sqpoll`]: the executor's SMT sibling
//! first, then its NUMA node, its package, any idle CPU), on the machine hwloc describes.

use partitioner::topology::{self, ExecutorPlacement, Machine, Pu};
use partitioner::TablePlan;

use crate::backend::residency;
use crate::backend::{IoBackend, SqpollMode};
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::hugepages::HUGE_PAGE;
use crate::settings::{
    ExecutorSpec, IoChoice, ScanSettings, AUTO_BUFFERED_BYTES, AUTO_CACHED_FRACTION,
};

/// Where executors run: glommio executors, or plain pinned threads when io_uring is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runtime {
    /// One glommio `LocalExecutor` per executor.
    Glommio,
    /// Plain pinned threads (`pread` or `mmap` only).
    Threads,
}

/// Everything the policy decided for one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResolvedIo {
    /// The backend every executor starts with (an executor may still fall back, and says so).
    pub backend: IoBackend,
    /// glommio executors or plain threads.
    pub runtime: Runtime,
    /// Each executor's SQ poll CPU, in executor order.
    pub sqpoll_cpus: Vec<Option<usize>>,
    /// glommio I/O memory per executor, in bytes (0 without glommio).
    pub io_memory: usize,
    /// Why the run differs from what was asked, one entry per decision, in order.
    pub notices: Vec<String>,
    /// Whether `auto` found the table in the page cache: readahead hints (`MADV_WILLNEED`,
    /// `POSIX_FADV_WILLNEED`) then only cost system calls, so the executors give none.
    pub cached: bool,
}

/// Decides the backend, runtime, SQ poll CPUs and glommio I/O memory of a run of `executors`
/// (all among `available`) over `plan` with `settings`; `window_bytes` is a full readahead
/// window of the largest reads.
pub(crate) fn resolve(
    plan: &TablePlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    available: &[usize],
    window_bytes: u64,
    faults: &Faults,
) -> Result<ResolvedIo> {
    let mut notices = Vec::new();
    let (mut backend, auto_notice) = choose_backend(plan, settings)?;
    let cached = settings.io == IoChoice::Auto && backend == IoBackend::Mmap;
    notices.extend(auto_notice);
    let (sqpoll_cpus, sqpoll_notice) =
        sqpoll_placement(executors, available, backend, settings.sqpoll)?;
    notices.extend(sqpoll_notice);
    // Without io_uring (kernel.io_uring_disabled, seccomp in containers) neither glommio nor
    // the uring backend can run: plain pinned threads read with pread instead.
    //
    // The synchronous backends (`pread`, `mmap`) use no ring at all, so they run on plain
    // pinned threads from the start: a glommio executor would set up three rings and
    // register its I/O memory for nothing, a fixed cost the warm path feels most.
    let mut runtime = Runtime::Glommio;
    if matches!(backend, IoBackend::Pread | IoBackend::Mmap) {
        runtime = Runtime::Threads;
    } else if let Err(why) = io_uring_available(faults) {
        runtime = Runtime::Threads;
        if matches!(backend, IoBackend::Dma | IoBackend::Uring) {
            notices.push(format!(
                "io_uring is unavailable ({why}): pread instead of {backend}"
            ));
            backend = IoBackend::Pread;
        }
    }
    // Enough registered I/O memory for a full window of the largest reads plus overflow pages.
    let wanted_io_memory = if backend == IoBackend::Dma {
        (window_bytes * 2).clamp(1 << 20, 1 << 30) as usize
    } else {
        MIN_IO_MEMORY
    };
    let io_memory = if runtime == Runtime::Glommio {
        let (bytes, memlock_notice) = io_memory_budget(wanted_io_memory, executors.len(), faults)?;
        notices.extend(memlock_notice);
        bytes
    } else {
        0
    };
    Ok(ResolvedIo {
        backend,
        runtime,
        sqpoll_cpus,
        io_memory,
        notices,
        cached,
    })
}

/// glommio's smallest useful I/O memory, and what the non-DMA backends get.
const MIN_IO_MEMORY: usize = 64 << 10;

/// Whether io_uring can be used here: a ring is set up and torn down once.
fn io_uring_available(faults: &Faults) -> std::result::Result<(), String> {
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
fn io_memory_budget(
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

/// The leaves `plan` lists, when they fit [`AUTO_BUFFERED_BYTES`].
fn small_scan(plan: &TablePlan) -> Option<usize> {
    plan.listed_leaves()
        .filter(|&n| n as u64 * u64::from(plan.header.page_size) <= AUTO_BUFFERED_BYTES)
}

/// Resolves `auto` by asking the kernel whether the table's pages are cached; returns the
/// backend and, for `auto`, a notice saying why it was chosen.
fn choose_backend(
    plan: &TablePlan,
    settings: &ScanSettings,
) -> Result<(IoBackend, Option<String>)> {
    match settings.io {
        IoChoice::Fixed(b) => Ok((b, None)),
        // A small scan: buffered pread, cached or not. Cached, its pages are copied without
        // a fault, a page-table entry and an unmapping each: an index seek of 596 rows on
        // 593 scattered leaves decoded in 0.004 s with pread against 0.011 s mapped (a
        // contiguous range of 800 leaves within noise of each other). Not cached, see
        // AUTO_BUFFERED_BYTES. No residency to sample either (a mincore call per page).
        IoChoice::Auto => match small_scan(plan) {
            // A seek that found no row, a count from an index's pages.
            Some(0) => Ok((
                IoBackend::Pread,
                Some("auto: the scan reads no table page, so pread".to_string()),
            )),
            Some(n) => Ok((
                IoBackend::Pread,
                Some(format!(
                    "auto: the scan reads {n} leaf pages, so pread (buffered: they stay cached)"
                )),
            )),
            None => {
                match residency::sample(&plan.path, plan.header.page_size, plan.leaf_sample(), 1024)
                {
                    Ok(r) => {
                        // `mmap` and `pread` measured within noise of each other warm
                        // (`scripts/bench-warm`, SF 1, 2 executors: 0.12-0.15 s for Q6 each, the
                        // one ahead changing from run to run, once the decoder prefetches each
                        // page's cells); `mmap` copies nothing and leaves the CPU to the decoder.
                        let backend = if r.fraction() >= AUTO_CACHED_FRACTION {
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
        },
    }
}

/// The SQ poll CPU of each executor: from its spec when a topology names one, else by the
/// topology planner's policy. `auto` gives an executor a CPU that runs no executor (each such
/// CPU hosts one poll thread), its SMT sibling first; `on` refuses to run when some executor
/// cannot get one. Only the `uring` backend has poll
/// threads: with another one (`--io auto` choosing `dma` or `mmap`, say), `auto` runs without
/// them and says so in the returned notice, while `on` is an error.
fn sqpoll_placement(
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
    let machine = Machine::detect().unwrap_or_else(|_| flat_machine(executors, available));
    sqpoll_on_machine(&machine, executors, available, mode)
}

/// A machine where every CPU is a core of its own on one node: what the policy assumes when
/// hwloc cannot describe this one (the planner then takes the first idle CPUs).
fn flat_machine(executors: &[ExecutorSpec], available: &[usize]) -> Machine {
    let mut cpus: Vec<usize> = available
        .iter()
        .chain(executors.iter().map(|e| &e.cpu))
        .copied()
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    Machine::from_pus(
        "CPUs this process may use (no hwloc topology)",
        cpus.into_iter().map(|cpu| Pu {
            cpu,
            core: cpu,
            package: 0,
            numa_node: 0,
        }),
    )
}

/// The topology planner's SQ poll placement for executors already pinned to their CPUs, with
/// the poll threads on `available` CPUs of `machine` that run no executor.
fn sqpoll_on_machine(
    machine: &Machine,
    executors: &[ExecutorSpec],
    available: &[usize],
    mode: SqpollMode,
) -> Result<(Vec<Option<usize>>, Option<String>)> {
    let pu_of = |cpu: usize| {
        machine.pu(cpu).copied().unwrap_or(Pu {
            cpu,
            core: usize::MAX - cpu,
            package: usize::MAX,
            numa_node: usize::MAX,
        })
    };
    let allowed: Vec<Pu> = if available.is_empty() {
        machine.pus.clone()
    } else {
        available.iter().map(|&c| pu_of(c)).collect()
    };
    let mut placement = topology::Placement {
        executors: executors
            .iter()
            .map(|e| {
                let pu = pu_of(e.cpu);
                ExecutorPlacement {
                    cpu: e.cpu,
                    core: pu.core,
                    package: pu.package,
                    numa_node: pu.numa_node,
                    weight: e.weight,
                    sqpoll_cpu: None,
                }
            })
            .collect(),
        oversubscribed: false,
        allowed_cpus: allowed.iter().map(|p| p.cpu).collect(),
    };
    topology::assign_sqpoll(&mut placement, &allowed, mode)
        .map_err(|e| Error::Config(e.to_string()))?;
    Ok((
        placement.executors.iter().map(|e| e.sqpoll_cpu).collect(),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cpu: usize) -> ExecutorSpec {
        ExecutorSpec {
            cpu,
            weight: 1,
            sqpoll_cpu: None,
        }
    }

    #[test]
    fn sqpoll_goes_to_the_smt_sibling_first() {
        // Linux often numbers SMT siblings apart: core 0 = CPUs 0 and 3, core 1 = CPUs 1, 2.
        let pu = |cpu, core| Pu {
            cpu,
            core,
            package: 0,
            numa_node: 0,
        };
        let m = Machine::from_pus("test", [pu(0, 0), pu(1, 1), pu(2, 1), pu(3, 0)]);
        let all = [0, 1, 2, 3];
        let (cpus, notice) = sqpoll_on_machine(&m, &[spec(0)], &all, SqpollMode::Auto).unwrap();
        assert_eq!(cpus, [Some(3)], "the sibling, not the lowest idle CPU");
        assert_eq!(notice, None);
        let (cpus, _) = sqpoll_on_machine(&m, &[spec(0), spec(1)], &all, SqpollMode::On).unwrap();
        assert_eq!(cpus, [Some(3), Some(2)]);
        // Every CPU busy: auto runs without, on names the executors left without.
        let busy: Vec<ExecutorSpec> = all.iter().map(|&c| spec(c)).collect();
        let (cpus, _) = sqpoll_on_machine(&m, &busy, &all, SqpollMode::Auto).unwrap();
        assert!(cpus.iter().all(Option::is_none));
        let e = sqpoll_on_machine(&m, &busy, &all, SqpollMode::On).unwrap_err();
        assert!(e.to_string().contains("idle CPU"), "{e}");
    }

    #[test]
    fn sqpoll_auto_without_poll_threads_says_so() {
        let (cpus, notice) =
            sqpoll_placement(&[spec(0)], &[0, 1], IoBackend::Dma, SqpollMode::Auto).unwrap();
        assert_eq!(cpus, [None]);
        assert!(notice.unwrap().contains("no SQ poll thread"));
    }

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
