//! The placement policy (see the [module docs](super) for the why): which CPU each executor
//! runs on, its weight, and which idle CPU, if any, hosts its SQPOLL thread.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use super::error::{Result, TopologyError};
use super::machine::{Machine, Pu};
use super::settings::SqpollPolicy;

/// The weight of an executor that has a physical core to itself; executors sharing a core
/// split it (two get 50 each, three 33).
pub const FULL_CORE_WEIGHT: u32 = 100;

/// Most executors a plan may have (far beyond any machine; guards against absurd requests).
pub const MAX_EXECUTORS: usize = 1 << 16;

/// Where one executor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutorPlacement {
    /// The CPU the executor is pinned to (kernel CPU number).
    pub cpu: usize,
    /// Its physical core (hwloc logical core index).
    pub core: usize,
    /// Its package (OS index).
    pub package: usize,
    /// Its NUMA node (OS index).
    pub numa_node: usize,
    /// Its relative share of the table's leaf pages ([`FULL_CORE_WEIGHT`] for a core of its
    /// own).
    pub weight: u32,
    /// The idle CPU that hosts its SQPOLL thread, if it has one.
    pub sqpoll_cpu: Option<usize>,
}

/// A plan: one placement per executor, in executor order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The executors, in the order they were placed.
    pub executors: Vec<ExecutorPlacement>,
    /// More executors than allowed CPUs: some CPUs run several executors, which take turns.
    pub oversubscribed: bool,
    /// The allowed CPUs the plan could use, ascending.
    pub allowed_cpus: Vec<usize>,
}

impl Placement {
    /// Allowed CPUs that run no executor, ascending (poll-thread hosts among them).
    pub fn idle_cpus(&self) -> Vec<usize> {
        let busy: BTreeSet<usize> = self.executors.iter().map(|e| e.cpu).collect();
        self.allowed_cpus
            .iter()
            .copied()
            .filter(|c| !busy.contains(c))
            .collect()
    }

    /// The executors' CPUs, in executor order.
    pub fn cpus(&self) -> Vec<usize> {
        self.executors.iter().map(|e| e.cpu).collect()
    }
}

impl Machine {
    /// Physical cores with at least one allowed PU (all PUs when `allowed_cpus` is `None`):
    /// the default executor count, one per core. CPUs not on the machine are ignored here.
    pub fn cores_in(&self, allowed_cpus: Option<&[usize]>) -> usize {
        let allowed: Option<HashSet<usize>> = allowed_cpus.map(|a| a.iter().copied().collect());
        self.pus
            .iter()
            .filter(|p| allowed.as_ref().is_none_or(|a| a.contains(&p.cpu)))
            .map(|p| p.core)
            .collect::<BTreeSet<_>>()
            .len()
    }
}

/// Places `n_executors` executors on `machine`, using only `allowed_cpus` when given, and
/// gives them SQPOLL CPUs under `sqpoll`. See the [module docs](super) for the rules.
///
/// Errors: zero or more than [`MAX_EXECUTORS`] executors, an allowed CPU the machine does not
/// have, an empty allowed set, or [`SqpollPolicy::On`] when some executor finds no idle CPU.
pub fn plan_executors(
    machine: &Machine,
    n_executors: usize,
    allowed_cpus: Option<&[usize]>,
    sqpoll: SqpollPolicy,
) -> Result<Placement> {
    if n_executors == 0 {
        return Err(TopologyError::NoExecutors);
    }
    if n_executors > MAX_EXECUTORS {
        return Err(TopologyError::TooManyExecutors {
            requested: n_executors,
            max: MAX_EXECUTORS,
        });
    }
    let allowed = allowed_pus(machine, allowed_cpus)?;
    let order = placement_order(&allowed);
    let mut executors: Vec<ExecutorPlacement> = order
        .iter()
        .cycle()
        .take(n_executors)
        .map(|pu| ExecutorPlacement {
            cpu: pu.cpu,
            core: pu.core,
            package: pu.package,
            numa_node: pu.numa_node,
            weight: FULL_CORE_WEIGHT,
            sqpoll_cpu: None,
        })
        .collect();
    assign_weights(&mut executors);
    let mut placement = Placement {
        oversubscribed: n_executors > allowed.len(),
        allowed_cpus: allowed.iter().map(|p| p.cpu).collect(),
        executors,
    };
    if sqpoll != SqpollPolicy::Off {
        assign_sqpoll(&mut placement, &allowed, sqpoll)?;
    }
    Ok(placement)
}

/// The machine's PUs restricted to `allowed_cpus`, sorted by CPU number.
fn allowed_pus(machine: &Machine, allowed_cpus: Option<&[usize]>) -> Result<Vec<Pu>> {
    let Some(allowed) = allowed_cpus else {
        return if machine.pus.is_empty() {
            Err(TopologyError::NoAllowedCpus)
        } else {
            Ok(machine.pus.clone())
        };
    };
    let unknown: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|&c| machine.pu(c).is_none())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !unknown.is_empty() {
        return Err(TopologyError::UnknownCpus {
            cpus: unknown,
            machine: machine.source.clone(),
            known: machine.cpus(),
        });
    }
    let allowed: HashSet<usize> = allowed.iter().copied().collect();
    let pus: Vec<Pu> = machine
        .pus
        .iter()
        .filter(|p| allowed.contains(&p.cpu))
        .copied()
        .collect();
    if pus.is_empty() {
        return Err(TopologyError::NoAllowedCpus);
    }
    Ok(pus)
}

/// The order in which PUs receive executors: rank 0 (each core's first allowed PU) for every
/// core, round-robin over the NUMA nodes in package-interleaved order; then rank 1 (the first
/// SMT siblings) the same way; and so on.
fn placement_order(pus: &[Pu]) -> Vec<Pu> {
    // Each core's allowed PUs, ascending by CPU number (pus is sorted).
    let mut cores: BTreeMap<usize, Vec<Pu>> = BTreeMap::new();
    for pu in pus {
        cores.entry(pu.core).or_default().push(*pu);
    }
    // A core's node is its first PU's (package, NUMA node); nodes grouped by package.
    let mut packages: BTreeMap<usize, BTreeMap<usize, Vec<usize>>> = BTreeMap::new();
    for (core, core_pus) in &cores {
        if let Some(first) = core_pus.first() {
            packages
                .entry(first.package)
                .or_default()
                .entry(first.numa_node)
                .or_default()
                .push(*core);
        }
    }
    // Package-interleaved node order: the first node of every package, then the second, ...
    let per_package: Vec<Vec<Vec<usize>>> = packages
        .into_values()
        .map(|nodes| nodes.into_values().collect())
        .collect();
    let most_nodes = per_package.iter().map(Vec::len).max().unwrap_or(0);
    let nodes: Vec<&Vec<usize>> = (0..most_nodes)
        .flat_map(|i| per_package.iter().filter_map(move |p| p.get(i)))
        .collect();
    let most_pus = cores.values().map(Vec::len).max().unwrap_or(0);
    let mut order = Vec::with_capacity(pus.len());
    for rank in 0..most_pus {
        let mut queues: Vec<VecDeque<Pu>> = nodes
            .iter()
            .map(|node_cores| {
                node_cores
                    .iter()
                    .filter_map(|c| cores.get(c).and_then(|p| p.get(rank)).copied())
                    .collect()
            })
            .collect();
        while queues.iter().any(|q| !q.is_empty()) {
            for q in &mut queues {
                if let Some(pu) = q.pop_front() {
                    order.push(pu);
                }
            }
        }
    }
    order
}

/// Each executor's weight is its share of its physical core.
fn assign_weights(executors: &mut [ExecutorPlacement]) {
    let mut per_core: HashMap<usize, u32> = HashMap::new();
    for e in executors.iter() {
        *per_core.entry(e.core).or_default() += 1;
    }
    for e in executors.iter_mut() {
        let sharing = per_core.get(&e.core).copied().unwrap_or(1).max(1);
        e.weight = (FULL_CORE_WEIGHT / sharing).max(1);
    }
}

/// Gives the executors of `placement` poll-thread CPUs from the `allowed` PUs that run no
/// executor, in preference passes (SMT sibling, then NUMA node, then package, then any) so that
/// an executor's sibling is not taken by another executor's looser match first. Executors that
/// already have one keep it. Errors under [`SqpollPolicy::On`] when some executor gets none.
pub fn assign_sqpoll(
    placement: &mut Placement,
    allowed: &[Pu],
    policy: SqpollPolicy,
) -> Result<()> {
    let mut idle: Vec<Pu> = {
        let busy: BTreeSet<usize> = placement.executors.iter().map(|e| e.cpu).collect();
        allowed
            .iter()
            .filter(|p| !busy.contains(&p.cpu))
            .copied()
            .collect()
    };
    let idle_count = idle.len();
    type Prefer = fn(&ExecutorPlacement, &Pu) -> bool;
    let passes: [Prefer; 4] = [
        |e, p| p.core == e.core,
        |e, p| p.numa_node == e.numa_node && p.package == e.package,
        |e, p| p.package == e.package,
        |_, _| true,
    ];
    for prefer in passes {
        for e in placement.executors.iter_mut() {
            if e.sqpoll_cpu.is_some() {
                continue;
            }
            if let Some(i) = idle.iter().position(|p| prefer(e, p)) {
                e.sqpoll_cpu = Some(idle.remove(i).cpu);
            }
        }
    }
    let without: Vec<(usize, usize)> = placement
        .executors
        .iter()
        .enumerate()
        .filter(|(_, e)| e.sqpoll_cpu.is_none())
        .map(|(i, e)| (i, e.cpu))
        .collect();
    if policy == SqpollPolicy::On && !without.is_empty() {
        return Err(TopologyError::SqpollRefused {
            executors: without,
            planned: placement.executors.len(),
            allowed: allowed.len(),
            idle: idle_count,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pu(cpu: usize, core: usize, package: usize, numa_node: usize) -> Pu {
        Pu {
            cpu,
            core,
            package,
            numa_node,
        }
    }

    #[test]
    fn sibling_preferred_over_looser_matches() {
        // Two cores of two PUs; executors on cpus 0 and 2; each gets its own sibling even
        // though cpu 1 would also suit executor 1 by NUMA node.
        let m = Machine::from_pus(
            "test",
            [
                pu(0, 0, 0, 0),
                pu(1, 0, 0, 0),
                pu(2, 1, 0, 0),
                pu(3, 1, 0, 0),
            ],
        );
        let p = plan_executors(&m, 2, None, SqpollPolicy::On).unwrap();
        assert_eq!(p.cpus(), [0, 2]);
        let polls: Vec<_> = p.executors.iter().map(|e| e.sqpoll_cpu).collect();
        assert_eq!(polls, [Some(1), Some(3)]);
    }

    #[test]
    fn policies_parse() {
        for p in [SqpollPolicy::Off, SqpollPolicy::Auto, SqpollPolicy::On] {
            assert_eq!(p.as_str().parse::<SqpollPolicy>(), Ok(p));
        }
        assert!("yes".parse::<SqpollPolicy>().is_err());
    }

    #[test]
    fn absurd_requests_are_errors() {
        let m = Machine::from_pus("test", [pu(0, 0, 0, 0)]);
        assert!(plan_executors(&m, 0, None, SqpollPolicy::Off).is_err());
        assert!(plan_executors(&m, MAX_EXECUTORS + 1, None, SqpollPolicy::Off).is_err());
        assert!(plan_executors(&m, 1, Some(&[]), SqpollPolicy::Off).is_err());
        assert!(plan_executors(&m, 1, Some(&[1]), SqpollPolicy::Off).is_err());
        let empty = Machine::from_pus("empty", []);
        assert!(plan_executors(&empty, 1, None, SqpollPolicy::Off).is_err());
    }
}
