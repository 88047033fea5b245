//! The axes of a configuration ([`Io`], [`Cores`], [`Window`], [`RowPath`]), one
//! configuration ([`Config`]) and what running a query under it produced ([`Observed`]).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use engine::query::{run_query, run_query_rendered, run_query_streaming, QueryPlan};
use engine::{spread, ExecutorSpec, IoBackend, IoChoice, RunReport, ScanSettings, SqpollMode};
use partitioner::TablePlan;

use super::lossless::Lossless;
use crate::query::Answer;

/// The I/O backend of a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    /// glommio's `O_DIRECT` reads.
    Dma,
    /// The private io_uring with `O_DIRECT`.
    Uring,
    /// Buffered `pread`.
    Pread,
    /// A memory map.
    Mmap,
    /// `auto`: `dma` or `mmap`, as much of the table as is in the page cache decides, or
    /// `pread` for a cold scan whose leaves fit one readahead window.
    Auto,
}

impl Io {
    /// Every backend.
    pub const ALL: [Io; 5] = [Io::Dma, Io::Uring, Io::Pread, Io::Mmap, Io::Auto];

    fn choice(self) -> IoChoice {
        match self {
            Io::Dma => IoChoice::Fixed(IoBackend::Dma),
            Io::Uring => IoChoice::Fixed(IoBackend::Uring),
            Io::Pread => IoChoice::Fixed(IoBackend::Pread),
            Io::Mmap => IoChoice::Fixed(IoBackend::Mmap),
            Io::Auto => IoChoice::Auto,
        }
    }

    /// The backends the report may name for a run that went as asked.
    pub(super) fn ran_as_asked(self, backend: &str) -> bool {
        match self {
            Io::Auto => ["dma", "mmap", "pread"].contains(&backend),
            Io::Dma => backend == "dma",
            Io::Uring => backend == "uring",
            Io::Pread => backend == "pread",
            Io::Mmap => backend == "mmap",
        }
    }
}

/// How many executors, on which CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cores {
    /// One executor.
    One,
    /// Two executors (on two CPUs when the machine has them).
    Two,
    /// Three executors on (at most) two CPUs: two of them share one, whatever the machine.
    Oversubscribed,
}

impl Cores {
    /// Every core count.
    pub const ALL: [Cores; 3] = [Cores::One, Cores::Two, Cores::Oversubscribed];

    /// The executors of a run: on the first available CPUs, as `--cores N` places them.
    pub fn executors(self) -> Vec<ExecutorSpec> {
        match self {
            Cores::One => spread(1),
            Cores::Two => spread(2),
            Cores::Oversubscribed => {
                let two = spread(2);
                vec![two[0], two[1], two[0]]
            }
        }
    }
}

/// The readahead window and coalescing of a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// One read of one page at a time.
    Off,
    /// 4 pages in flight, reads coalesced up to 16 KiB.
    Small,
    /// The engine's defaults for the file's page size (`ScanSettings::defaults`).
    Default,
}

impl Window {
    /// Every window.
    pub const ALL: [Window; 3] = [Window::Off, Window::Small, Window::Default];

    fn settings(self, io: Io, page_size: u32) -> ScanSettings {
        let (readahead, coalesce_kib) = match self {
            Window::Off => (0, 0),
            Window::Small => (4, 16),
            Window::Default => {
                let d = ScanSettings::defaults(page_size);
                (d.readahead, d.coalesce_kib)
            }
        };
        ScanSettings {
            readahead,
            coalesce_kib,
            io: io.choice(),
            sqpoll: SqpollMode::Off,
            faults: engine::faults::Faults::NONE,
            memory: None,
        }
    }
}

/// How the result rows reach the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowPath {
    /// `run_query_streaming`: rows handed over during the scan when the query streams.
    Streamed,
    /// `run_query_rendered`: rows rendered to bytes in the executors' threads, as the command
    /// line writes them (here in a lossless encoding, decoded again).
    Rendered,
    /// `run_query`: every executor's rows collected and merged at the end.
    Collected,
}

impl RowPath {
    /// Every path.
    pub const ALL: [RowPath; 3] = [RowPath::Streamed, RowPath::Rendered, RowPath::Collected];
}

/// An axis of the configurations, for [`QueryTester::span`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// [`Io`].
    Io,
    /// [`Cores`].
    Cores,
    /// [`Window`].
    Window,
    /// [`RowPath`].
    Path,
}

/// One scan configuration: a value of each axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The backend.
    pub io: Io,
    /// The executors.
    pub cores: Cores,
    /// Readahead and coalescing.
    pub window: Window,
    /// How the rows come back.
    pub path: RowPath,
    /// The memory budget of a full sort (`--memory`; `None`: the default).
    pub memory: Option<u64>,
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let io = match self.io {
            Io::Dma => "io dma (glommio, O_DIRECT)",
            Io::Uring => "io uring (private ring, O_DIRECT)",
            Io::Pread => "io pread",
            Io::Mmap => "io mmap",
            Io::Auto => "io auto",
        };
        let cpus: Vec<String> = self
            .cores
            .executors()
            .iter()
            .map(|e| e.cpu.to_string())
            .collect();
        let cores = format!(
            "{} executor(s) on CPUs {}{}",
            cpus.len(),
            cpus.join(","),
            if self.cores == Cores::Oversubscribed {
                " (oversubscribed)"
            } else {
                ""
            }
        );
        let window = match self.window {
            Window::Off => "readahead 0, no coalescing",
            Window::Small => "readahead 4 pages, coalescing 16 KiB",
            Window::Default => "the default readahead and coalescing",
        };
        let path = match self.path {
            RowPath::Streamed => "streamed (run_query_streaming)",
            RowPath::Rendered => "rendered in the executors (run_query_rendered)",
            RowPath::Collected => "collected (run_query)",
        };
        write!(f, "{io}, {cores}, {window}, {path}")?;
        match self.memory {
            Some(m) => write!(f, ", sort memory {m} bytes"),
            None => Ok(()),
        }
    }
}

/// What one configuration produced.
#[derive(Debug)]
pub struct Observed {
    /// The column names and rows, or the error message.
    pub answer: Answer,
    /// The run's report, when it answered.
    pub report: Option<RunReport>,
    /// Whether the rows were handed over during the scan (the streamed and rendered paths).
    pub streamed: Option<bool>,
}

impl Config {
    /// Runs the planned query under this configuration.
    pub fn run(&self, table: &TablePlan, query: &QueryPlan) -> Observed {
        let settings = ScanSettings {
            memory: self.memory,
            ..self.window.settings(self.io, table.header.page_size)
        };
        let executors = self.cores.executors();
        let query = query.clone();
        match self.path {
            RowPath::Streamed => {
                let mut rows = Vec::new();
                match run_query_streaming(table, query, &settings, &executors, |row| {
                    rows.push(row.to_vec());
                    Ok(())
                }) {
                    Ok(out) => Observed {
                        answer: Ok((out.names, rows)),
                        report: Some(out.report),
                        streamed: Some(out.streamed),
                    },
                    Err(e) => Observed::failed(e),
                }
            }
            RowPath::Rendered => {
                let mut rows = Vec::new();
                let render = Arc::new(Lossless);
                match run_query_rendered(table, query, &settings, &executors, render, |bytes| {
                    rows.push(Lossless::decode(bytes));
                    Ok(())
                }) {
                    Ok(out) => Observed {
                        answer: Ok((out.names, rows)),
                        report: Some(out.report),
                        streamed: Some(out.streamed),
                    },
                    Err(e) => Observed::failed(e),
                }
            }
            RowPath::Collected => match run_query(table, query, &settings, &executors) {
                Ok(out) => Observed {
                    answer: Ok((out.names, out.rows)),
                    report: Some(out.report),
                    streamed: None,
                },
                Err(e) => Observed::failed(e),
            },
        }
    }

    /// Plans `sql` on `db` and runs it under this configuration (a planning error is the
    /// answer).
    pub fn answer(&self, db: &Path, sql: &str) -> Answer {
        match self.plan(db, sql) {
            Ok(planned) => self.run(&planned.table, &planned.query).answer,
            // As `corescan query`: a subquery in FROM that SQLite does not flatten.
            Err(corescan_sql::SqlError::Unsupported(_)) if corescan_sql::is_materializable(sql) => {
                self.materialized(db, sql).answer
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Answers `sql` over its subquery in `FROM`, run under this configuration
    /// ([`corescan_sql::answer_materialized`], as `corescan query` does where planning the
    /// statement as one scan is refused).
    pub fn materialized(&self, db: &Path, sql: &str) -> Observed {
        match self.with_scans(db, |scans| corescan_sql::answer_materialized(sql, scans)) {
            Ok(Some(m)) => Observed {
                answer: Ok((m.names, m.rows)),
                report: None,
                streamed: None,
            },
            Ok(None) => Observed::failed("the statement is no query over a subquery"),
            Err(e) => Observed::failed(e),
        }
    }

    /// Plans `sql` on `db`, its subqueries run under this configuration.
    pub fn plan(
        &self,
        db: &Path,
        sql: &str,
    ) -> Result<corescan_sql::PlannedQuery, corescan_sql::SqlError> {
        self.with_scans(db, |scans| corescan_sql::plan_query_running(sql, scans))
    }

    /// Calls `f` with the statement's scans of `db` under this configuration (one snapshot).
    fn with_scans<T>(
        &self,
        db: &Path,
        f: impl FnOnce(&corescan_sql::FileScans<'_>) -> Result<T, corescan_sql::SqlError>,
    ) -> Result<T, corescan_sql::SqlError> {
        let file = partitioner::PageFile::open(db)?;
        let settings = self.window.settings(self.io, file.header().page_size);
        let executors = self.cores.executors();
        f(&corescan_sql::FileScans {
            file: &file,
            settings: &settings,
            executors: &executors,
        })
    }
}

impl Observed {
    pub(super) fn failed(e: impl fmt::Display) -> Observed {
        Observed {
            answer: Err(e.to_string()),
            report: None,
            streamed: None,
        }
    }
}
