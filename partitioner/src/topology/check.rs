//! Validation of a `topology.toml` ([`Topology::check`]): one [`Problem`] per thing wrong, and
//! [`Topology::load_checked`], loading that refuses a file with problems. The top of
//! `topology`, beside [`render`](super::render).

use std::collections::BTreeMap;
use std::path::Path;

use super::error::{Result, TopologyError};
use super::file::Topology;
use super::machine::Machine;
use super::problem::Problem;
use super::settings::{IoMode, SqpollPolicy, MAX_COALESCE_KIB, MAX_READAHEAD};

impl Topology {
    /// Loads `path` and refuses it, with every problem, unless [`check`](Self::check) finds
    /// none (against `machine` when given). This is what a run should use.
    pub fn load_checked(path: &Path, machine: Option<&Machine>) -> Result<Topology> {
        let topology = Topology::load(path)?;
        let problems = topology.check(machine);
        if problems.is_empty() {
            Ok(topology)
        } else {
            Err(TopologyError::Invalid {
                path: path.to_path_buf(),
                problems,
            })
        }
    }

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
