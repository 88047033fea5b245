//! The engine's answer equals SQLite's under every scan setting, on every layout.
//!
//! [`ScanTester`] holds one expectation (the oracle's answer) and checks it under the cross
//! product of I/O backends, core counts, readahead windows and coalescing sizes, like
//! ripgrep's `SearcherTester` checks a search under every searcher configuration.

use std::path::Path;

use bench::oracle;
use engine::q6::{run_q6, Q6Params};
use engine::{spread, IoBackend, IoChoice, ScanSettings, SqpollMode};
use partitioner::TablePlan;

use crate::layouts;

/// Runs Q6 under every combination of its settings and compares with SQLite's answer.
pub struct ScanTester {
    pub(crate) io: Vec<IoBackend>,
    pub(crate) cores: Vec<usize>,
    pub(crate) readahead: Vec<u32>,
    pub(crate) coalesce_kib: Vec<u32>,
    pub(crate) params: Vec<Q6Params>,
}

impl Default for ScanTester {
    fn default() -> Self {
        ScanTester {
            io: vec![
                IoBackend::Dma,
                IoBackend::Uring,
                IoBackend::Pread,
                IoBackend::Mmap,
            ],
            cores: vec![1, 2, 3],
            readahead: vec![0, 1, 4, 32, 256],
            coalesce_kib: vec![0, 128],
            params: vec![Q6Params::default()],
        }
    }
}

impl ScanTester {
    /// Also checks these substitution parameter sets (each under every setting).
    pub fn params(mut self, params: Vec<Q6Params>) -> Self {
        self.params = params;
        self
    }

    /// Asserts the answer for table `table` of `path`; returns how many scans ran.
    #[track_caller]
    pub fn check(&self, path: &Path, table: &str) -> usize {
        self.check_with(path, table, |params| {
            oracle::q6(path, table, params).unwrap()
        })
    }

    /// Like [`Self::check`] with the expected answers from `oracle` (for files the plain
    /// oracle cannot read as they are, such as a copy of a live WAL database).
    #[track_caller]
    pub fn check_with(
        &self,
        path: &Path,
        table: &str,
        oracle: impl Fn(&Q6Params) -> oracle::OracleAnswer,
    ) -> usize {
        let plan = TablePlan::open(path, table)
            .unwrap_or_else(|e| panic!("{}: plan: {e}", path.display()));
        // The plan `corescan` itself makes: on a deep enough table, the leaf-parent level is
        // read by the executors (here with one parent per executor enough to split by parents,
        // so that these small tables take that path); checked under every backend and core
        // count, with fewer windows than the full walk's plan.
        let mut deferred = TablePlan::open_for_scan(path, table)
            .unwrap_or_else(|e| panic!("{}: plan for a scan: {e}", path.display()));
        let parents = deferred.leaf_parents.as_mut().map(|p| {
            p.set_min_parents_per_share(1);
            p.pages().len() as u64
        });
        let mut plans = vec![(&plan, self.readahead.clone(), self.coalesce_kib.clone())];
        if parents.is_some() {
            let readahead = self
                .readahead
                .iter()
                .copied()
                .filter(|&r| r == 0 || r == 32);
            plans.push((&deferred, readahead.collect(), vec![0, 128]));
        }
        let mut runs = 0;
        for params in &self.params {
            let want = oracle(params);
            for (scanned, readaheads, coalesces) in &plans {
                for (&io, &cores) in self
                    .io
                    .iter()
                    .flat_map(|io| self.cores.iter().map(move |c| (io, c)))
                {
                    for &readahead in readaheads {
                        for &coalesce_kib in coalesces {
                            let settings = ScanSettings {
                                readahead,
                                coalesce_kib,
                                io: IoChoice::Fixed(io),
                                sqpoll: SqpollMode::Off,
                                faults: engine::faults::Faults::NONE,
                                memory: None,
                            };
                            let what = format!(
                                "{} ({table}), {params:?}, {cores} cores, {settings:?}, {}",
                                path.display(),
                                if scanned.leaf_parents.is_some() {
                                    "leaf parents read by the executors"
                                } else {
                                    "leaves listed by the plan"
                                }
                            );
                            let got = run_q6(scanned, &spread(cores), params, &settings)
                                .unwrap_or_else(|e| panic!("{what}: {e}"));
                            assert_eq!(got.io.backend, io.name(), "{what}");
                            assert_eq!(got.revenue, want.revenue(), "{what}");
                            assert_eq!(got.rows_matched, want.rows_matched, "{what}");
                            assert_eq!(got.rows_scanned, want.rows_scanned, "{what}");
                            assert_eq!(
                                got.pages_read - got.overflow_pages_read,
                                plan.leaves.len() as u64,
                                "{what}: every leaf read exactly once"
                            );
                            let read: u64 = got.executors.iter().map(|e| e.parent_pages).sum();
                            let expected = if scanned.leaf_parents.is_some() {
                                parents
                            } else {
                                Some(0)
                            };
                            assert_eq!(Some(read), expected, "{what}: parents read");
                            if scanned.leaf_parents.is_none() {
                                runs += 1;
                            }
                        }
                    }
                }
            }
        }
        runs
    }
}

/// Parameter sets that move every bound: other years, the edges of the discount range, a
/// fractional quantity, and a leap day.
fn param_sets() -> Vec<Q6Params> {
    [
        ("1994-01-01", "0.06", "24"),
        ("1993-01-01", "0.02", "25"),
        ("1997-01-01", "0.09", "24.5"),
        ("1996-02-29", "0.05", "50"),
        ("1992-03-15", "0.00", "1"),
        ("2010-01-01", "0.06", "24"),
    ]
    .into_iter()
    .map(|(d, x, q)| Q6Params::parse(d, x, q).unwrap())
    .collect()
}

#[test]
fn every_layout_every_setting_matches_sqlite() {
    let tester = ScanTester::default();
    let mut runs = 0;
    for layout in layouts() {
        runs += tester.check(&layout.path, &layout.table);
    }
    assert_eq!(runs, layouts().len() * 4 * 30);
    // The layouts deep enough for the executors to read the leaf-parent level (512- and
    // 1024-byte pages), where the checks above also ran that plan.
    let deferred = layouts()
        .iter()
        .filter(|l| {
            TablePlan::open_for_scan(&l.path, &l.table)
                .unwrap()
                .leaf_parents
                .is_some()
        })
        .count();
    assert!(
        deferred >= 3,
        "only {deferred} layouts with a deferred leaf-parent level"
    );
}

#[test]
fn every_parameter_set_matches_sqlite() {
    // The full settings matrix on the plain layout; one setting per parameter set elsewhere
    // (the settings do not interact with the parameters beyond what this covers).
    let plain = &layouts()[0];
    ScanTester::default()
        .params(param_sets())
        .check(&plain.path, &plain.table);
    let one = ScanTester {
        io: vec![IoBackend::Uring],
        cores: vec![2],
        readahead: vec![32],
        coalesce_kib: vec![128],
        params: param_sets(),
    };
    for layout in layouts() {
        one.check(&layout.path, &layout.table);
    }
}

#[test]
fn the_generated_tpch_database_matches_sqlite() {
    let n = ScanTester::default()
        .params(param_sets())
        .check(crate::tiny_db(), "lineitem");
    assert_eq!(n, 4 * 30 * param_sets().len());
}
