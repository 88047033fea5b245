//! Validation of a `topology.toml`: one [`Problem`] per thing wrong, each a sentence that names
//! the table and field at fault.

use std::collections::BTreeMap;
use std::fmt;

use super::file::{IoMode, Topology, MAX_COALESCE_KIB, MAX_READAHEAD};
use super::machine::Machine;
use super::placement::SqpollPolicy;

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

impl Topology {
    /// Every problem in the file, in a stable order: values [`load`](Self::load) could not
    /// interpret, then the executors, then the SQPOLL assignments, then the scan settings.
    /// With `machine`, CPUs must exist on it and sit where the file says, and the `[machine]`
    /// counts must match it; without, only the file's own consistency is checked.
    pub fn check(&self, machine: Option<&Machine>) -> Vec<Problem> {
        let mut problems = self.load_problems.clone();
        if self.executors.is_empty() {
            problems.push(Problem::NoExecutors);
        }
        if let Some(m) = machine {
            self.check_against(m, &mut problems);
        }
        // CPU -> executors pinned there, ascending by CPU.
        let mut by_cpu: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, e) in self.executors.iter().enumerate() {
            by_cpu.entry(e.cpu).or_default().push(i);
        }
        for (&cpu, on) in &by_cpu {
            if on.len() > 1 {
                problems.push(Problem::SharedCpu {
                    cpu,
                    executors: on.clone(),
                });
            }
        }
        self.check_sqpoll(&by_cpu, machine, &mut problems);
        if self.scan.readahead > MAX_READAHEAD {
            problems.push(Problem::ReadaheadTooLarge(self.scan.readahead));
        }
        if self.scan.coalesce_kib > MAX_COALESCE_KIB {
            problems.push(Problem::CoalesceTooLarge(self.scan.coalesce_kib));
        }
        if !self.executors.is_empty() && self.executors.iter().all(|e| e.weight == 0) {
            problems.push(Problem::AllWeightsZero);
        }
        problems
    }

    fn check_against(&self, m: &Machine, problems: &mut Vec<Problem>) {
        let counts = [
            ("packages", self.machine.packages, m.packages),
            ("numa_nodes", self.machine.numa_nodes, m.numa_nodes),
            ("cores", self.machine.cores, m.cores),
            ("pus", self.machine.pus, m.pus.len()),
        ];
        for (field, file, machine) in counts {
            if file != machine {
                problems.push(Problem::MachineMismatch {
                    field,
                    file,
                    machine,
                    source: m.source.clone(),
                });
            }
        }
        for (i, e) in self.executors.iter().enumerate() {
            let Some(pu) = m.pu(e.cpu) else {
                problems.push(Problem::UnknownCpu {
                    executor: i,
                    cpu: e.cpu,
                    machine: m.describe(),
                });
                continue;
            };
            for (field, file, machine) in [
                ("core", e.core, pu.core),
                ("package", e.package, pu.package),
                ("numa_node", e.numa_node, pu.numa_node),
            ] {
                if file != machine {
                    problems.push(Problem::WrongPlace {
                        executor: i,
                        cpu: e.cpu,
                        field,
                        file,
                        machine,
                    });
                }
            }
        }
    }

    fn check_sqpoll(
        &self,
        by_cpu: &BTreeMap<usize, Vec<usize>>,
        machine: Option<&Machine>,
        problems: &mut Vec<Problem>,
    ) {
        let mut by_poll_cpu: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, e) in self.executors.iter().enumerate() {
            let Some(poll) = e.sqpoll_cpu else { continue };
            by_poll_cpu.entry(poll).or_default().push(i);
            if let Some(m) = machine.filter(|m| m.pu(poll).is_none()) {
                problems.push(Problem::UnknownSqpollCpu {
                    executor: i,
                    sqpoll_cpu: poll,
                    machine: m.describe(),
                });
            }
            if let Some(&runs) = by_cpu.get(&poll).and_then(|on| on.first()) {
                problems.push(Problem::SqpollCpuRunsExecutor {
                    executor: i,
                    sqpoll_cpu: poll,
                    runs,
                });
            }
        }
        for (&sqpoll_cpu, on) in &by_poll_cpu {
            if on.len() > 1 {
                problems.push(Problem::SharedSqpollCpu {
                    sqpoll_cpu,
                    executors: on.clone(),
                });
            }
        }
        // An unknown policy or I/O string is already a problem; judging the SQPOLL fields
        // against the stand-in default would only add a misleading second one.
        let unknown = |p: &Problem| matches!(p, Problem::UnknownSqpoll(_) | Problem::UnknownIo(_));
        if self.load_problems.iter().any(unknown) {
            return;
        }
        let with: Vec<usize> = by_poll_cpu.values().flatten().copied().collect();
        match self.scan.sqpoll {
            SqpollPolicy::Off if !with.is_empty() => {
                let mut with = with;
                with.sort_unstable();
                problems.push(Problem::SqpollCpuWhileOff { executors: with });
            }
            SqpollPolicy::On => {
                if self.scan.io != IoMode::Uring {
                    problems.push(Problem::SqpollNeedsUring { io: self.scan.io });
                }
                let missing: Vec<usize> = self
                    .executors
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.sqpoll_cpu.is_none())
                    .map(|(i, _)| i)
                    .collect();
                if !missing.is_empty() {
                    problems.push(Problem::SqpollCpuMissing { executors: missing });
                }
            }
            _ => {}
        }
    }
}
