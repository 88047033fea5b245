//! [`Problem`]: one thing wrong with a `topology.toml`, a sentence that names the table and
//! field at fault. Above [`settings`](super::settings), below everything that reports problems.

use std::fmt;

use super::settings::{IoMode, MAX_COALESCE_KIB, MAX_READAHEAD};

/// One thing wrong with a topology file. Executors are numbered from 0 in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The file has no `[[executor]]` table.
    NoExecutors,
    /// An executor's `cpu` is not a CPU of the machine.
    UnknownCpu {
        /// The executor.
        executor: usize,
        /// Its CPU.
        cpu: usize,
        /// The machine, described (source and CPU list).
        machine: String,
    },
    /// Several executors are pinned to one CPU.
    SharedCpu {
        /// The CPU.
        cpu: usize,
        /// The executors on it.
        executors: Vec<usize>,
    },
    /// An executor's `core`, `package` or `numa_node` disagrees with where its CPU sits.
    WrongPlace {
        /// The executor.
        executor: usize,
        /// Its CPU.
        cpu: usize,
        /// `core`, `package` or `numa_node`.
        field: &'static str,
        /// The value in the file.
        file: usize,
        /// The machine's value.
        machine: usize,
    },
    /// A `[machine]` count disagrees with the machine checked against.
    MachineMismatch {
        /// `packages`, `numa_nodes`, `cores` or `pus`.
        field: &'static str,
        /// The value in the file.
        file: usize,
        /// The machine's value.
        machine: usize,
        /// The machine's source.
        source: String,
    },
    /// An executor's `sqpoll_cpu` is not a CPU of the machine.
    UnknownSqpollCpu {
        /// The executor.
        executor: usize,
        /// The poll thread's CPU.
        sqpoll_cpu: usize,
        /// The machine, described.
        machine: String,
    },
    /// An executor's `sqpoll_cpu` runs an executor, so the poll thread would steal its time.
    SqpollCpuRunsExecutor {
        /// The executor whose poll thread it is.
        executor: usize,
        /// The poll thread's CPU.
        sqpoll_cpu: usize,
        /// The executor that runs there.
        runs: usize,
    },
    /// Several executors put their poll threads on one CPU.
    SharedSqpollCpu {
        /// The CPU.
        sqpoll_cpu: usize,
        /// The executors whose poll threads would share it.
        executors: Vec<usize>,
    },
    /// `sqpoll = "off"` but executors name an `sqpoll_cpu`.
    SqpollCpuWhileOff {
        /// Those executors.
        executors: Vec<usize>,
    },
    /// `sqpoll = "on"` but executors have no `sqpoll_cpu`.
    SqpollCpuMissing {
        /// Those executors.
        executors: Vec<usize>,
    },
    /// `sqpoll = "on"` with an I/O path that has no SQPOLL.
    SqpollNeedsUring {
        /// The file's I/O mode.
        io: IoMode,
    },
    /// `[scan] io` is not a known I/O mode.
    UnknownIo(String),
    /// `[scan] sqpoll` is not a known policy.
    UnknownSqpoll(String),
    /// `[scan] readahead` exceeds [`MAX_READAHEAD`].
    ReadaheadTooLarge(u32),
    /// `[scan] coalesce_kib` exceeds [`MAX_COALESCE_KIB`].
    CoalesceTooLarge(u32),
    /// Every executor has weight 0, so none would be given pages.
    AllWeightsZero,
}

fn list(items: &[usize]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!(
            "{} and {last}",
            init.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn executors(items: &[usize]) -> String {
    let s = if items.len() == 1 { "" } else { "s" };
    format!("executor{s} {}", list(items))
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::NoExecutors => write!(
                f,
                "no [[executor]] table: the file places no executor (at least one is needed)"
            ),
            Problem::UnknownCpu { executor, cpu, machine } => write!(
                f,
                "executor {executor}: cpu {cpu} is not a CPU of the machine ({machine})"
            ),
            Problem::SharedCpu { cpu, executors: e } => write!(
                f,
                "{} share cpu {cpu} (one executor per CPU: executors sharing one take turns)",
                executors(e)
            ),
            Problem::WrongPlace { executor, cpu, field, file, machine } => write!(
                f,
                "executor {executor}: {field} = {file}, but cpu {cpu} is on {field} {machine}"
            ),
            Problem::MachineMismatch { field, file, machine, source } => write!(
                f,
                "[machine] {field} = {file}, but the machine checked against ({source}) has {machine}"
            ),
            Problem::UnknownSqpollCpu { executor, sqpoll_cpu, machine } => write!(
                f,
                "executor {executor}: sqpoll_cpu {sqpoll_cpu} is not a CPU of the machine ({machine})"
            ),
            Problem::SqpollCpuRunsExecutor { executor, sqpoll_cpu, runs } => write!(
                f,
                "executor {executor}: sqpoll_cpu {sqpoll_cpu} runs executor {runs} (a poll thread \
                 needs an idle CPU, or it steals the scan's time)"
            ),
            Problem::SharedSqpollCpu { sqpoll_cpu, executors: e } => write!(
                f,
                "{} put their SQPOLL threads on the same cpu {sqpoll_cpu} (one poll thread per idle CPU)",
                executors(e)
            ),
            Problem::SqpollCpuWhileOff { executors: e } => write!(
                f,
                "[scan] sqpoll = \"off\", but {} name an sqpoll_cpu (remove it, or use \"auto\" or \"on\")",
                executors(e)
            ),
            Problem::SqpollCpuMissing { executors: e } => write!(
                f,
                "[scan] sqpoll = \"on\", but {} have no sqpoll_cpu",
                executors(e)
            ),
            Problem::SqpollNeedsUring { io } => write!(
                f,
                "[scan] sqpoll = \"on\" needs io = \"uring\" (io = \"{io}\" has no SQPOLL)"
            ),
            Problem::UnknownIo(s) => write!(
                f,
                "[scan] io = {s:?} is not an I/O mode (dma, uring, pread, mmap or auto)"
            ),
            Problem::UnknownSqpoll(s) => write!(
                f,
                "[scan] sqpoll = {s:?} is not an SQPOLL policy (off, auto or on)"
            ),
            Problem::ReadaheadTooLarge(n) => write!(
                f,
                "[scan] readahead = {n} pages exceeds the maximum of {MAX_READAHEAD}"
            ),
            Problem::CoalesceTooLarge(n) => write!(
                f,
                "[scan] coalesce_kib = {n} exceeds the maximum of {MAX_COALESCE_KIB} (0 to {MAX_COALESCE_KIB})"
            ),
            Problem::AllWeightsZero => write!(
                f,
                "every executor has weight 0, so none would be given any pages"
            ),
        }
    }
}
