//! Integration tests of the `corescan` binary and the `bench` library, one module per topic:
//!
//! - [`gen`]: `corescan gen` and `bench::gen::generate` (row counts, column types, values,
//!   page sizes, overwrite protection, argument errors);
//! - [`oracle`]: `bench::oracle::q6` against an independent Q6 computation in Rust, on a
//!   generated database and on every `bench::layouts` layout;
//! - [`explain`]: `corescan explain --json` against SQLite's own `dbstat` page accounting;
//! - [`scan`]: the engine's Q6 answer against the oracle under every core count, readahead
//!   window and coalescing size ([`scan::ScanTester`]), on every layout;
//! - [`wal`]: live WAL databases (committed, torn and uncommitted log tails) against SQLite;
//! - [`live`]: scans while a writer process commits and checkpoints, in both journal modes
//!   and with every backend (one committed state per answer, the writer unharmed);
//! - [`symlinks`]: database paths that are symbolic links (the log and journal beside the
//!   target count, as in SQLite) for `q6`, `explain` and `bench`;
//! - [`faults`]: each I/O fallback forced through `CORESCAN_FAULTS`;
//! - [`affinity`]: Q6 on columns of every declared affinity and collation holding values of
//!   every storage class (and NaN), against SQLite;
//! - [`report`]: the human report `q6` and `query` share (labels, order, each one's counts);
//! - [`query`]: `corescan query` against SQLite, each answer checked under the backends, core
//!   counts, readahead windows and row paths a test asks for ([`query::QueryTester`]);
//! - [`sql`]: `corescan sql` (DataFusion over corescan's scans) against SQLite: a join, exact
//!   decimals, `--explain`, and its errors (built with the default `sql` feature only);
//! - [`cli`]: the error contract (one `error:` line naming the file, exit status 1; usage
//!   errors 2) and `--version`.
//!
//! Shared fixtures (a tiny generated database, the layouts) are built once per run under
//! `CARGO_TARGET_TMPDIR`.

mod affinity;
mod cli;
#[cfg(feature = "distributed")]
mod distributed;
mod experiments;
mod explain;
mod faults;
mod gen;
mod live;
mod oracle;
mod query;
mod report;
mod scan;
#[cfg(feature = "sql")]
mod sql;
mod symlinks;
mod wal;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use bench::gen::{GenOptions, TableSelection};
use bench::layouts::Layout;

/// The scale factor of the shared tiny database: 3,000 orders, about 12,000 line items.
pub const TINY_SF: f64 = 0.002;

/// The result of one `corescan` run.
#[derive(Debug)]
pub struct Run {
    /// The exit status (-1 when killed by a signal).
    pub status: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Asserts the error contract: exit status 1 and exactly one stderr line, starting with
    /// `error:` and containing every string of `needles`; no panic message.
    #[track_caller]
    pub fn assert_error(&self, needles: &[&str]) {
        assert_eq!(self.status, 1, "exit status; stderr: {}", self.stderr);
        self.assert_error_line(needles);
    }

    /// Asserts a usage error: exit status 2 and exactly one stderr line, starting with
    /// `error:`; no panic message.
    #[track_caller]
    pub fn assert_usage_error(&self) {
        assert_eq!(self.status, 2, "exit status; stderr: {}", self.stderr);
        self.assert_error_line(&[]);
    }

    #[track_caller]
    fn assert_error_line(&self, needles: &[&str]) {
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "expected one stderr line, got: {:?}",
            self.stderr
        );
        assert!(lines[0].starts_with("error: "), "stderr: {}", self.stderr);
        assert!(!self.stderr.contains("panicked"), "stderr: {}", self.stderr);
        for n in needles {
            assert!(lines[0].contains(n), "stderr {:?} lacks {n:?}", lines[0]);
        }
    }
}

/// Runs `corescan` with `args`.
pub fn corescan<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    corescan_with_env(args, &[])
}

/// Runs `corescan` with `args` and extra environment variables.
pub fn corescan_with_env<I, S>(args: I, env: &[(&str, &str)]) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    corescan_in(None, args, env)
}

/// Runs `corescan` with `args` and extra environment variables, in directory `cwd` when
/// given.
pub fn corescan_in<I, S>(cwd: Option<&Path>, args: I, env: &[(&str, &str)]) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut command = Command::new(env!("CARGO_BIN_EXE_corescan"));
    if let Some(dir) = cwd {
        command.current_dir(dir);
    }
    let out = command
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run corescan");
    Run {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A per-run scratch directory under `CARGO_TARGET_TMPDIR` (`name` is replaced if present).
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("bench-integration")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// All eight TPC-H tables at [`TINY_SF`], generated once.
pub fn tiny_db() -> &'static Path {
    static DB: OnceLock<PathBuf> = OnceLock::new();
    DB.get_or_init(|| {
        let path = scratch_dir("tiny").join("tiny.db");
        let opts = GenOptions {
            out: path.clone(),
            scale_factor: TINY_SF,
            page_size: 4096,
            tables: TableSelection::All,
            force: false,
        };
        bench::gen::generate(&opts, false).expect("generate the tiny database");
        path
    })
}

/// Every layout of `bench::layouts::all`, built once.
pub fn layouts() -> &'static [Layout] {
    static LAYOUTS: OnceLock<Vec<Layout>> = OnceLock::new();
    LAYOUTS.get_or_init(|| {
        let dir = scratch_dir("layouts");
        bench::layouts::all(&dir).expect("build the layouts")
    })
}

/// A read-only connection to `path`.
pub fn open(path: &Path) -> rusqlite::Connection {
    bench::oracle::open_read_only(path).expect("open read-only")
}
