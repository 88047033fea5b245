//! Machine topology: where executors run, who hosts their SQPOLL threads, and `topology.toml`.
//!
//! # Policy
//!
//! A scan executor is CPU-bound when its pages are in memory and latency-bound when they are
//! not, so the placement gives every executor as much of a core to itself as the machine allows,
//! and keeps memory traffic local:
//!
//! - **Spread before packing.** Executors go round-robin over the NUMA nodes, with the nodes
//!   ordered so that consecutive executors land on different packages (sockets) first: on two
//!   packages of two nodes each (nodes 0,1 on package 0; 2,3 on package 1) the node order is
//!   0, 2, 1, 3. Within a node, cores are taken in hwloc's order.
//! - **Cores before SMT siblings.** Every allowed physical core gets one executor (its
//!   lowest-numbered allowed PU) before any core gets a second one on a sibling hardware thread:
//!   siblings share one core's execution units, so a second executor on a core adds little.
//! - **The CPU set is a hard limit.** With `--cpus` only those PUs are used; a core whose allowed
//!   PUs are all excluded does not exist for the plan.
//! - **Oversubscription is allowed but flagged.** More executors than allowed PUs wrap around the
//!   same order again; the plan says so ([`Placement::oversubscribed`]) and
//!   [`Topology::check`] reports every shared CPU.
//! - **Weights follow core shares.** An executor's weight is its share of its physical core, in
//!   hundredths: 100 for an executor alone on its core, 50 for each of two executors on one core
//!   (SMT siblings, or one PU shared), 33 for three. The table's leaf pages are cut in proportion
//!   to the weights, so each NUMA node reads a share proportional to the compute placed on it
//!   (the sum of its executors' weights), split among its executors by their core shares. With
//!   one executor per core, or every core used equally, all weights are equal. SMT siblings
//!   together usually do a little more than one core's work; counting them as exactly one core
//!   errs on the side of those executors finishing early rather than late.
//! - **SQPOLL only on idle CPUs.** A kernel SQPOLL thread spins on its CPU; on a CPU that also
//!   runs an executor it steals the scan's time (the seed measured more system time than the
//!   whole run). An *idle* CPU is an allowed PU that runs no executor. [`SqpollPolicy::Auto`]
//!   gives an executor a poll thread only when an idle CPU is left for it, preferring the
//!   executor's SMT sibling (shares its caches), then a CPU on its NUMA node, then on its
//!   package, then any idle CPU; each idle CPU hosts at most one poll thread, so one busy poller
//!   never delays another ring. [`SqpollPolicy::On`] refuses a plan in which some executor gets
//!   none, and [`SqpollPolicy::Off`] (the default) assigns none. SQPOLL applies only to the
//!   `uring` I/O path (glommio has no SQPOLL).
//!
//! # Numbering
//!
//! `cpu` is the kernel's CPU number (hwloc's PU OS index, what `taskset` and
//! `sched_setaffinity` take). `package` and `numa_node` are OS indexes too (as `/sys` and
//! `numactl` number them). `core` is hwloc's logical core index, unique across the machine (the
//! kernel's `core_id` repeats in every package).
//!
//! # API
//!
//! - [`Machine`] holds the facts (packages, NUMA nodes, cores, and every [`Pu`] with its core,
//!   package and node), read by hwloc from this machine ([`Machine::detect`]), from a synthetic
//!   description such as `"pack:2 numa:2 core:4 pu:2"` ([`Machine::from_synthetic`]) or from an
//!   `lstopo --of xml` file ([`Machine::from_xml_file`]); [`MachineSource`] names where they
//!   came from.
//! - [`plan_executors`] applies the policy and returns a [`Placement`]: one
//!   [`ExecutorPlacement`] per executor.
//! - [`Topology`] is a `topology.toml` file: the machine summary, the executors and the
//!   [`ScanSettings`]. [`Topology::render`] writes it with a comment above every field,
//!   [`Topology::load`] reads it back, and [`Topology::check`] lists every [`Problem`] in it.
//! - Errors are [`TopologyError`]s; those about a file name it.
//!
//! # Layering
//!
//! The modules import each other one way only, each from the ones listed before it:
//!
//! 1. `settings` ([`ScanSettings`], [`IoMode`], [`SqpollPolicy`] and the limits): nothing;
//! 2. `problem` ([`Problem`]): settings;
//! 3. `error` ([`TopologyError`], CPU-list formatting): problem;
//! 4. `machine` ([`Machine`], hwloc): error;
//! 5. `placement` ([`plan_executors`]): error, machine, settings;
//! 6. `file` ([`Topology`], parsing `topology.toml`): error, machine, placement, problem,
//!    settings;
//! 7. `check` ([`Topology::check`], [`Topology::load_checked`]) and `render`
//!    ([`Topology::render`], [`Topology::write`]): the ones below, never each other.
//!
//! Methods follow the same rule: a lower module never calls a method defined higher up (so
//! loading with a check lives in `check`, writing the rendered text in `render`).

mod check;
mod error;
mod file;
mod machine;
mod placement;
mod problem;
mod render;
mod settings;

pub use error::{cpu_list, Result, TopologyError};
pub use file::{MachineSummary, Topology};
pub use machine::{Machine, MachineSource, Pu};
pub use placement::{
    assign_sqpoll, plan_executors, ExecutorPlacement, Placement, FULL_CORE_WEIGHT, MAX_EXECUTORS,
};
pub use problem::Problem;
pub use settings::{IoMode, ScanSettings, SqpollPolicy, MAX_COALESCE_KIB, MAX_READAHEAD};
