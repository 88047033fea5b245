//! [`QueryTester`]: one query's expected answer checked under every scan configuration, as
//! ripgrep's `SearcherTester` checks a search under every searcher setting (and
//! [`crate::scan::ScanTester`] checks Q6).
//!
//! A configuration ([`Config`]) takes one value of each axis:
//!
//! - [`Io`], the backend: `dma`, `uring`, `pread`, `mmap`, or `auto` (the engine picks `dma` or
//!   `mmap` from the page cache, `pread` for a small cold scan);
//! - [`Cores`]: one executor, two, or three on two CPUs (oversubscribed: two executors share a
//!   CPU, on any machine);
//! - [`Window`], readahead and coalescing: off (one read of one page at a time), small (4 pages
//!   in flight, reads of up to 16 KiB) or the engine's defaults for the file's page size;
//! - [`RowPath`], how the rows reach the caller: streamed (`run_query_streaming`), rendered to
//!   bytes in the executors' threads (`run_query_rendered`, as `corescan query` writes them),
//!   or collected and merged (`run_query`).
//!
//! By default a check runs the full product of the axes' values (the path axis holds the
//! streamed and collected paths unless a test asks for all three). A test whose table or
//! query list is large names the axes its subject needs with [`QueryTester::span`]: their
//! product runs, and every other axis rotates through its values, one per run, starting from a
//! point derived from the SQL text, so each query sees some of them and a test's queries
//! together see all of them, the same ones on every run. A failure names the database, the SQL
//! and the configuration in full.
//!
//! A configuration that could not run as asked says so: when io_uring is unavailable (the
//! engine then reads with `pread` and reports why), the check prints which configurations ran
//! on the fallback and checks their answers there.

mod config;
mod lossless;
mod tests;

use std::path::Path;

pub use config::{Axis, Config, Cores, Io, Observed, RowPath, Window};

use super::{difference, exact, sqlite_answer, Answer};

/// What the answers are checked against.
enum Oracle {
    /// SQLite on the same file.
    Sqlite,
    /// SQLite with exact `sum`, `total` and `avg` ([`exact`]).
    ExactSums,
    /// A given answer.
    Given(Answer),
    /// A failure whose message contains this text (SQLite is not asked).
    Error(String),
}

/// What a passed check compared with.
#[derive(Debug)]
pub struct Checked {
    /// The oracle's answer (SQLite's, the exact sums', the given one).
    pub oracle: Answer,
}

impl Checked {
    /// Whether the oracle failed (and so every configuration did).
    pub fn failed(&self) -> bool {
        self.oracle.is_err()
    }
}

type Inspector<'a> = Box<dyn Fn(&Config, &Observed) + 'a>;

/// Checks one query's answer under every configuration of the chosen axes (see the module
/// docs).
pub struct QueryTester<'a> {
    db: &'a Path,
    sql: String,
    oracle: Oracle,
    loose_reals: bool,
    sqlite_may_fail: bool,
    same_messages: bool,
    io: Vec<Io>,
    cores: Vec<Cores>,
    windows: Vec<Window>,
    paths: Vec<RowPath>,
    spanned: Vec<Axis>,
    agree: bool,
    leaf_parents: Option<usize>,
    memory: Option<u64>,
    inspect: Option<Inspector<'a>>,
}

impl<'a> QueryTester<'a> {
    /// A check of `sql` on `db` against SQLite (reals within two units in the last place, see
    /// [`super::same_value`]), SQLite required to answer, under the full product of every
    /// backend, core count and window, streamed and collected.
    pub fn new(db: &'a Path, sql: impl Into<String>) -> Self {
        QueryTester {
            db,
            sql: sql.into(),
            oracle: Oracle::Sqlite,
            loose_reals: true,
            sqlite_may_fail: false,
            same_messages: false,
            io: Io::ALL.to_vec(),
            cores: Cores::ALL.to_vec(),
            windows: Window::ALL.to_vec(),
            paths: vec![RowPath::Streamed, RowPath::Collected],
            spanned: vec![Axis::Io, Axis::Cores, Axis::Window, Axis::Path],
            agree: false,
            leaf_parents: None,
            memory: None,
            inspect: None,
        }
    }

    /// Expects `answer` instead of SQLite's, reals bit for bit.
    pub fn expect(mut self, answer: Answer) -> Self {
        self.oracle = Oracle::Given(answer);
        self.loose_reals = false;
        self
    }

    /// Expects SQLite's answer with exact `sum`, `total` and `avg` ([`exact`]), reals bit for
    /// bit.
    pub fn exact_sums(mut self) -> Self {
        self.oracle = Oracle::ExactSums;
        self.loose_reals = false;
        self
    }

    /// Expects every configuration to fail with a message containing `needle`.
    pub fn fails_with(mut self, needle: impl Into<String>) -> Self {
        self.oracle = Oracle::Error(needle.into());
        self
    }

    /// Compares reals bit for bit (sums included: corescan's are exact).
    pub fn exact_reals(mut self) -> Self {
        self.loose_reals = false;
        self
    }

    /// Lets SQLite fail, and then requires corescan to fail too.
    pub fn sqlite_may_fail(mut self) -> Self {
        self.sqlite_may_fail = true;
        self
    }

    /// When both fail, requires corescan's message to end with SQLite's (after the page and
    /// row corescan names).
    pub fn same_error_messages(mut self) -> Self {
        self.same_messages = true;
        self
    }

    /// Only these backends.
    pub fn io(mut self, io: &[Io]) -> Self {
        self.io = io.to_vec();
        self
    }

    /// Only these core counts.
    pub fn cores(mut self, cores: &[Cores]) -> Self {
        self.cores = cores.to_vec();
        self
    }

    /// Only these windows.
    pub fn windows(mut self, windows: &[Window]) -> Self {
        self.windows = windows.to_vec();
        self
    }

    /// These paths ([`RowPath::ALL`] adds the rendered one).
    pub fn paths(mut self, paths: &[RowPath]) -> Self {
        self.paths = paths.to_vec();
        self
    }

    /// Runs the product of these axes only; every other axis rotates (see the module docs).
    /// `span(&[])` runs one configuration.
    pub fn span(mut self, axes: &[Axis]) -> Self {
        self.spanned = axes.to_vec();
        self
    }

    /// Also requires every configuration's answer to be the first one's, bit for bit (reals
    /// included: corescan's sums are exact, so they do not depend on the split).
    pub fn agree(mut self) -> Self {
        self.agree = true;
        self
    }

    /// Leaves the leaf-parent level to the executors with at least `n` parents per share (the
    /// table must be deep enough to defer it), and requires every collected run to read every
    /// parent once (a streamed one stops reading at a `LIMIT`).
    pub fn leaf_parents_per_share(mut self, n: usize) -> Self {
        self.leaf_parents = Some(n);
        self
    }

    /// Also calls `f` with every configuration and what it produced (for assertions on the
    /// report).
    pub fn inspect(mut self, f: impl Fn(&Config, &Observed) + 'a) -> Self {
        self.inspect = Some(Box::new(f));
        self
    }

    /// Runs every configuration with a full sort's memory budget of `bytes` (`--memory`): a
    /// tiny one makes every executor spill its rows to sorted runs on disk.
    pub fn memory(mut self, bytes: u64) -> Self {
        self.memory = Some(bytes);
        self
    }

    /// The configurations a check runs, in order.
    pub fn configurations(&self) -> Vec<Config> {
        // The product of the spanned axes, the first axis slowest.
        let lens = [
            self.io.len(),
            self.cores.len(),
            self.windows.len(),
            self.paths.len(),
        ];
        assert!(lens.iter().all(|&n| n > 0), "an axis without values");
        let axes = [Axis::Io, Axis::Cores, Axis::Window, Axis::Path];
        let spans: Vec<bool> = axes.iter().map(|a| self.spanned.contains(a)).collect();
        let count: usize = (0..4).filter(|&i| spans[i]).map(|i| lens[i]).product();
        let start = fnv1a(self.sql.as_bytes());
        (0..count)
            .map(|k| {
                let mut rest = k;
                let mut pick = [0usize; 4];
                for i in (0..4).rev() {
                    if spans[i] {
                        pick[i] = rest % lens[i];
                        rest /= lens[i];
                    } else {
                        // Rotated: each axis starts at another byte of the SQL text's hash,
                        // so that different queries pair the values differently.
                        pick[i] = ((start >> (8 * i)) as u8 as usize + k) % lens[i];
                    }
                }
                Config {
                    io: self.io[pick[0]],
                    cores: self.cores[pick[1]],
                    window: self.windows[pick[2]],
                    path: self.paths[pick[3]],
                    memory: self.memory,
                }
            })
            .collect()
    }

    /// Runs every configuration and panics at the first that does not give the expected
    /// answer, naming it.
    #[track_caller]
    pub fn check(&self) -> Checked {
        let sql = &self.sql;
        let db = self.db.display();
        let want = match &self.oracle {
            Oracle::Sqlite => sqlite_answer(self.db, sql),
            Oracle::ExactSums => exact::exact_answer(self.db, sql),
            Oracle::Given(a) => a.clone(),
            Oracle::Error(needle) => Err(needle.clone()),
        };
        if !matches!(self.oracle, Oracle::Error(_)) && !self.sqlite_may_fail {
            assert!(want.is_ok(), "{sql}\non {db}: the oracle fails: {want:?}");
        }
        let planned = corescan_sql::plan_query(self.db, sql);
        let mut planned = match planned {
            Ok(p) => p,
            // A subquery in FROM that SQLite does not flatten: its rows, then the query
            // around it over them, under every configuration (as `corescan query`).
            Err(corescan_sql::SqlError::Unsupported(_)) if corescan_sql::is_materializable(sql) => {
                let mut first = None;
                for config in self.configurations() {
                    let observed = config.materialized(self.db, sql);
                    self.judge(&want, &config.to_string(), &observed, &mut first);
                }
                return Checked { oracle: want };
            }
            Err(e) => {
                // Every configuration would give this answer: no scan runs.
                let failed = Observed::failed(e);
                self.judge(&want, "planning (no scan ran)", &failed, &mut None);
                return Checked { oracle: want };
            }
        };
        let parents = self.leaf_parents.map(|n| {
            planned
                .table
                .leaf_parents
                .as_mut()
                .map(|p| {
                    p.set_min_parents_per_share(n);
                    p.pages().len() as u64
                })
                .unwrap_or_else(|| panic!("{sql}\non {db}: no deferred leaf-parent level"))
        });
        let mut first = None;
        let mut fallbacks = Vec::new();
        // A statement with subqueries runs them while it is planned: under each
        // configuration, planned again.
        let subqueries = planned.ran_subqueries;
        for config in self.configurations() {
            let observed = if subqueries {
                match config.plan(self.db, sql) {
                    Ok(p) => config.run(&p.table, &p.query),
                    Err(e) => Observed::failed(e),
                }
            } else {
                config.run(&planned.table, &planned.query)
            };
            let what = config.to_string();
            if let Some(report) = &observed.report {
                if !config.io.ran_as_asked(&report.io.backend) {
                    let notice = report.io.notice.clone().unwrap_or_default();
                    assert!(
                        notice.contains("io_uring is unavailable"),
                        "{sql}\non {db}, {what}: ran on {} ({notice:?})",
                        report.io.backend
                    );
                    fallbacks.push(format!("{what}: {notice}"));
                }
                if let (Some(parents), RowPath::Collected) = (parents, config.path) {
                    let read: u64 = report.executors.iter().map(|e| e.parent_pages).sum();
                    assert_eq!(
                        read, parents,
                        "{sql}\non {db}, {what}: the executors read every parent once"
                    );
                }
            }
            self.judge(&want, &what, &observed, &mut first);
            if let Some(f) = &self.inspect {
                f(&config, &observed);
            }
        }
        if !fallbacks.is_empty() {
            println!(
                "query tester: {} configuration(s) of {sql:?} could not run as asked (skipped), \
                 their answers checked on the fallback:\n  {}",
                fallbacks.len(),
                fallbacks.join("\n  ")
            );
        }
        Checked { oracle: want }
    }

    /// Checks one configuration's answer against the oracle and, with [`Self::agree`], the
    /// first configuration's (`first` keeps it).
    #[track_caller]
    fn judge(
        &self,
        want: &Answer,
        what: &str,
        observed: &Observed,
        first: &mut Option<(String, Answer)>,
    ) {
        let (sql, db) = (&self.sql, self.db.display());
        let got = &observed.answer;
        if let Oracle::Error(needle) = &self.oracle {
            match got {
                Ok(rows) => panic!("{sql}\non {db}, {what}: answered {rows:?}"),
                Err(e) => assert!(
                    e.contains(needle.as_str()),
                    "{sql}\non {db}, {what}: {e:?} lacks {needle:?}"
                ),
            }
            return;
        }
        if let Some(d) = difference(want, got, self.loose_reals) {
            let against = match self.oracle {
                Oracle::ExactSums => " (against the exact sums)",
                Oracle::Given(_) => " (against the given answer)",
                _ => "",
            };
            panic!("{sql}\non {db}, {what}{against}:\n{d}");
        }
        if let (true, Err(w), Err(g)) = (self.same_messages, want, got) {
            // SQLite's message, after corescan's page and row.
            assert!(
                g.ends_with(w.as_str()),
                "{sql}\non {db}, {what}: {g:?} is not SQLite's {w:?}"
            );
        }
        if self.agree {
            match first {
                None => *first = Some((what.to_string(), got.clone())),
                Some((there, answer)) => {
                    if let Some(d) = difference(answer, got, false) {
                        panic!("{sql}\non {db}: {what} differs from {there}:\n{d}");
                    }
                }
            }
        }
    }
}

/// FNV-1a: a stable hash of the SQL text, where the rotation of a query's axes starts.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
