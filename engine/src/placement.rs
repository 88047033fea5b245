//! Where the executors run and how they read: a [`Placement`] (one executor per CPU, `N`
//! executors, a CPU list, a topology file, or explicit [`ExecutorSpec`]s) and [`ScanOptions`]
//! (the settings a caller overrides), resolved together into the executors and the
//! [`ScanSettings`] of one scan ([`resolve`]).
//!
//! This is the library form of the command line's `--cores`/`--cpus`/`--topology`, `--io`,
//! `--sqpoll`, `--readahead` and `--coalesce-kib`, so an embedder places a scan exactly as
//! `corescan query` does.
//!
//! Policy: CPUs are placed by the topology planner ([`partitioner::topology::plan_executors`],
//! from hwloc): NUMA nodes and packages first, one executor per physical core before any SMT
//! sibling, an SQ poll CPU per executor where the SQPOLL policy allows one. When hwloc cannot
//! describe the machine, executors go round-robin over the available CPUs ([`spread`]) and
//! SQPOLL is left to the backend policy. A topology file brings its executors and its `[scan]`
//! settings; options given explicitly override the file.
//!
//! Layering: above [`crate::settings`] and [`crate::error`]; used by the scan seam
//! ([`crate::scan`]) and by the binary.

use std::path::PathBuf;

use partitioner::topology::{plan_executors, Machine, SqpollPolicy, Topology};

use crate::error::Result;
use crate::faults::Faults;
use crate::settings::{available_cpus, spread, ExecutorSpec, IoChoice, ScanSettings, SqpollMode};

/// Which CPUs run a scan's executors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Placement {
    /// One executor per CPU this process may use (the default).
    #[default]
    AllCpus,
    /// This many executors, spread over the available CPUs by the planner; more than the
    /// CPUs is allowed (round-robin) and flagged as oversubscribed in the report.
    Cores(usize),
    /// One executor on each of these CPUs (as the kernel numbers them).
    Cpus(Vec<usize>),
    /// The executors and `[scan]` settings of a topology file (`corescan topology detect`),
    /// checked against this machine.
    Topology(PathBuf),
    /// Exactly these executors, as given.
    Executors(Vec<ExecutorSpec>),
}

/// A scan of at most this many leaf pages is small: under the default placement it runs on
/// one executor ([`Placement::for_leaves`]). One executor decodes 64 cached pages in about
/// 0.1-0.2 ms, far less than hwloc's discovery and a second executor's start (3-4 ms here);
/// an index seek whose rows are spread over many leaves (each entry its own leaf) is small up
/// to 64 rows.
pub const SMALL_SCAN_LEAVES: usize = 64;

/// A scan of at most this many leaf pages (4 MiB of 4 KiB pages: a few milliseconds on one
/// executor) takes one executor per available CPU without the machine's topology
/// ([`Placement::for_leaves`]): with every CPU given one, the topology would only order them
/// (and weigh SMT siblings of a core where some cores have one thread and some two), and
/// waiting for hwloc's discovery (2-4 ms here) cost an index seek of 66 rows, spread over as
/// many leaves, a third of its time.
pub const PLAIN_SCAN_LEAVES: usize = 1024;

/// A scan that wants at most this many rows, each named by its rowid (a rowid `IN` list, the
/// rowids an index seek found, a short rowid range), is small when it reads at most
/// [`PLAIN_SCAN_LEAVES`] leaves ([`Placement::for_seek`]): however many leaves hold them, the
/// decoder reads only those rows' records
/// ([`crate::decode::NeededColumns::with_rowid_ranges`]), so a leaf costs one page read and a
/// walk of its cell pointers, and one executor ends such a scan before a second would have
/// started.
pub const SEEK_ROWS: u64 = 4096;

impl Placement {
    /// The placement of a scan that reads `leaves` leaf pages (`None`: not known, many) for at
    /// most `rows` rows named by rowid (`None`: any rows): [`Placement::for_leaves`], where a
    /// seek of at most [`SEEK_ROWS`] rows over at most [`PLAIN_SCAN_LEAVES`] leaves counts as
    /// small.
    pub fn for_seek(self, leaves: Option<usize>, rows: Option<u64>) -> Placement {
        let seek = rows.is_some_and(|r| r <= SEEK_ROWS);
        match leaves {
            Some(n) if seek && n <= PLAIN_SCAN_LEAVES => self.for_leaves(Some(0)),
            leaves => self.for_leaves(leaves),
        }
    }

    /// The placement of a scan that reads `leaves` leaf pages (`None`: not known, many). Under
    /// the default
    /// ([`Placement::AllCpus`]) a small scan ([`SMALL_SCAN_LEAVES`]: a rowid or short index
    /// seek, a tiny table) runs on one executor, on the CPU the caller runs on: more executors
    /// would find no pages to read, and placing them needs the machine's topology, whose
    /// discovery (hwloc reading sysfs, milliseconds) takes longer than such a scan. A scan of
    /// at most [`PLAIN_SCAN_LEAVES`] takes one executor on each available CPU, placed without
    /// the topology. Any other placement, and any larger scan, is kept as asked.
    pub fn for_leaves(self, leaves: Option<usize>) -> Placement {
        match self {
            Placement::AllCpus if leaves.is_some_and(|n| n <= SMALL_SCAN_LEAVES) => {
                Placement::Executors(vec![ExecutorSpec {
                    cpu: current_cpu(),
                    weight: 1,
                    sqpoll_cpu: None,
                }])
            }
            Placement::AllCpus if leaves.is_some_and(|n| n <= PLAIN_SCAN_LEAVES) => {
                Placement::Executors(spread(available_cpus().len().max(1)))
            }
            other => other,
        }
    }
}

/// The CPU the calling thread runs on (one this process may use), or the first available CPU
/// when the kernel does not say.
fn current_cpu() -> usize {
    // SAFETY: sched_getcpu takes no arguments and only returns a number or -1.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu)
        .ok()
        .or_else(|| available_cpus().first().copied())
        .unwrap_or(0)
}

/// Scan settings a caller sets; each `None` takes the topology file's value (with
/// [`Placement::Topology`]) or the engine's default for the file's page size
/// ([`ScanSettings::defaults`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanOptions {
    /// The I/O backend, or `auto` (default: [`crate::DEFAULT_IO`]).
    pub io: Option<IoChoice>,
    /// Whether the `uring` backend uses SQ poll threads (default: off). Setting it replans a
    /// topology file's poll CPUs.
    pub sqpoll: Option<SqpollMode>,
    /// Pages in flight ahead of each executor's decoder (default: 4 MiB worth of pages).
    pub readahead: Option<u32>,
    /// Reads coalesced up to this many KiB (default: [`crate::DEFAULT_COALESCE_KIB`]).
    pub coalesce_kib: Option<u32>,
    /// Failures to pretend, to reach each fallback on a machine where nothing fails (see
    /// [`crate::faults`]; default: none).
    pub faults: Option<Faults>,
    /// The memory budget of a query's full sort (default: [`ScanSettings::memory`]'s).
    pub memory: Option<u64>,
}

/// The executors and settings for a file with `page_size`-byte pages: `placement`'s executors
/// with `options` over the base settings (the topology file's, or the defaults). Fails with
/// the topology planner's or file's error naming the problem.
pub fn resolve(
    placement: &Placement,
    options: &ScanOptions,
    page_size: u32,
) -> Result<(Vec<ExecutorSpec>, ScanSettings)> {
    let defaults = ScanSettings::defaults(page_size);
    let sqpoll = options.sqpoll;
    let (executors, base) = match placement {
        Placement::Topology(path) => {
            let machine = Machine::detect()?;
            let topo = Topology::load_checked(path, Some(&machine))?;
            let executors = topo
                .executors
                .iter()
                .map(|e| ExecutorSpec {
                    // An explicit SQPOLL policy replans the poll threads; otherwise the
                    // file's stand.
                    sqpoll_cpu: if sqpoll.is_some() { None } else { e.sqpoll_cpu },
                    ..ExecutorSpec::from(e)
                })
                .collect();
            let scan = &topo.scan;
            let mut base = defaults;
            base.readahead = scan.readahead;
            base.coalesce_kib = scan.coalesce_kib;
            base.io = scan.io.into();
            base.sqpoll = scan.sqpoll;
            (executors, base)
        }
        Placement::Executors(list) => (list.clone(), defaults),
        Placement::AllCpus => (
            planned(None, None, sqpoll.unwrap_or(defaults.sqpoll))?,
            defaults,
        ),
        Placement::Cores(n) => (
            planned(Some(*n), None, sqpoll.unwrap_or(defaults.sqpoll))?,
            defaults,
        ),
        Placement::Cpus(cpus) => (
            planned(None, Some(cpus), sqpoll.unwrap_or(defaults.sqpoll))?,
            defaults,
        ),
    };
    let mut settings = base;
    settings.readahead = options.readahead.unwrap_or(base.readahead);
    settings.coalesce_kib = options.coalesce_kib.unwrap_or(base.coalesce_kib);
    settings.io = options.io.unwrap_or(base.io);
    settings.sqpoll = sqpoll.unwrap_or(base.sqpoll);
    settings.faults = options.faults.unwrap_or(base.faults);
    settings.memory = options.memory.or(base.memory);
    Ok((executors, settings))
}

/// The planner's executors: `cores` of them (default: one per allowed CPU) over `cpus`
/// (default: the available CPUs), with poll CPUs as `sqpoll` allows.
fn planned(
    cores: Option<usize>,
    cpus: Option<&[usize]>,
    sqpoll: SqpollPolicy,
) -> Result<Vec<ExecutorSpec>> {
    let available = available_cpus();
    let allowed = cpus.map_or_else(|| available.clone(), <[usize]>::to_vec);
    let n = match (cpus, cores) {
        (Some(list), _) => list.len(),
        (None, Some(n)) => n,
        (None, None) => available.len().max(1),
    };
    let Ok(machine) = Machine::detect() else {
        return Ok(match cpus {
            Some(list) => list
                .iter()
                .map(|&cpu| ExecutorSpec {
                    cpu,
                    weight: 1,
                    sqpoll_cpu: None,
                })
                .collect(),
            None => spread(n),
        });
    };
    let plan = plan_executors(&machine, n, Some(&allowed), sqpoll)?;
    Ok(plan.executors.iter().map(ExecutorSpec::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_scans_take_one_executor_on_an_allowed_cpu_unless_placed() {
        let Placement::Executors(one) = Placement::AllCpus.for_leaves(Some(SMALL_SCAN_LEAVES))
        else {
            panic!("a small scan keeps the default placement");
        };
        assert_eq!(one.len(), 1);
        let available = available_cpus();
        assert!(
            available.is_empty() || available.contains(&one[0].cpu),
            "{one:?} not in {available:?}"
        );
        // A scan of a few more leaves: one executor on every available CPU, each once.
        let Placement::Executors(every) =
            Placement::AllCpus.for_leaves(Some(SMALL_SCAN_LEAVES + 1))
        else {
            panic!("a scan of a few leaves keeps the default placement");
        };
        let mut cpus: Vec<usize> = every.iter().map(|e| e.cpu).collect();
        cpus.sort_unstable();
        cpus.dedup();
        assert_eq!(cpus.len(), every.len(), "{every:?}");
        if !available.is_empty() {
            assert_eq!(cpus, available);
        }
        assert_eq!(
            Placement::AllCpus.for_leaves(Some(PLAIN_SCAN_LEAVES + 1)),
            Placement::AllCpus
        );
        assert_eq!(Placement::AllCpus.for_leaves(None), Placement::AllCpus);
        for given in [Placement::Cores(2), Placement::Cpus(vec![0])] {
            assert_eq!(given.clone().for_leaves(Some(0)), given);
            assert_eq!(given.clone().for_seek(Some(1), Some(1)), given);
        }
    }

    #[test]
    fn a_seek_of_few_rows_over_many_leaves_takes_one_executor() {
        let one = |p: Placement| matches!(p, Placement::Executors(e) if e.len() == 1);
        // The most rows of a seek, on the most leaves: one executor.
        assert!(one(
            Placement::AllCpus.for_seek(Some(PLAIN_SCAN_LEAVES), Some(SEEK_ROWS))
        ));
        // More rows, or more leaves, or rows not named by rowid: as for any scan.
        assert_eq!(
            Placement::AllCpus.for_seek(Some(SMALL_SCAN_LEAVES + 1), Some(SEEK_ROWS + 1)),
            Placement::AllCpus.for_leaves(Some(SMALL_SCAN_LEAVES + 1))
        );
        assert_eq!(
            Placement::AllCpus.for_seek(Some(PLAIN_SCAN_LEAVES + 1), Some(1)),
            Placement::AllCpus
        );
        assert_eq!(
            Placement::AllCpus.for_seek(Some(SMALL_SCAN_LEAVES + 1), None),
            Placement::AllCpus.for_leaves(Some(SMALL_SCAN_LEAVES + 1))
        );
    }

    #[test]
    fn explicit_options_override_the_defaults_and_explicit_executors_are_kept() {
        let mine = vec![ExecutorSpec {
            cpu: 0,
            weight: 3,
            sqpoll_cpu: None,
        }];
        let options = ScanOptions {
            readahead: Some(7),
            coalesce_kib: Some(0),
            ..ScanOptions::default()
        };
        let (executors, settings) =
            resolve(&Placement::Executors(mine.clone()), &options, 4096).unwrap();
        assert_eq!(executors, mine);
        assert_eq!(settings.readahead, 7);
        assert_eq!(settings.coalesce_kib, 0);
        assert_eq!(settings.io, ScanSettings::defaults(4096).io);
    }

    #[test]
    fn a_core_count_gives_that_many_executors_on_available_cpus() {
        let available = available_cpus();
        let (executors, _) = resolve(&Placement::Cores(3), &ScanOptions::default(), 4096).unwrap();
        assert_eq!(executors.len(), 3);
        assert!(executors.iter().all(|e| available.contains(&e.cpu)));
    }
}
