//! The live-database experiment (`corescan bench live`): Q6 scans while another process
//! commits continuously, in each journal mode and with each backend.
//!
//! For each journal mode the database is switched to it, the oracle computes the Q6 answer
//! once, and a writer *process* ([`WriterProcess`], running [`writer::run_writer`]: byte-range
//! locks never conflict inside one process, so the writer must be another one) starts
//! committing transactions that keep the answer invariant, with aggressive checkpoints. Then,
//! for each backend, `scans` consecutive scans run in this process through
//! [`engine::consistent`] (what `corescan q6` runs) and are tallied: answered, answered after a
//! retry, refused (an error), and wrong (an answer other than the invariant's: a torn read).
//! The writer then stops and reports its commits, its wait for readers, any SQLite error and
//! `PRAGMA integrity_check`.
//!
//! Layering: on top of [`writer`] and [`crate::oracle`]; it uses the engine like `corescan q6`.

pub mod writer;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use engine::q6::{run_q6, Q6Params};
use engine::{ExecutorSpec, IoChoice, ScanSettings};
use partitioner::TablePlan;
use serde::Serialize;

pub use writer::{Journal, WriterOptions, WriterStats};

use super::{io_name, ExperimentError, Result};
use crate::oracle;

/// What `corescan bench live` runs.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// The database (a generated TPC-H database; its journal mode is changed).
    pub db: PathBuf,
    /// The `corescan` binary that runs the writer (`corescan bench live-writer`).
    pub exe: PathBuf,
    /// The journal modes, in order.
    pub journals: Vec<Journal>,
    /// The backends, in order.
    pub backends: Vec<IoChoice>,
    /// Consecutive scans per journal mode and backend.
    pub scans: u32,
    /// The executors of every scan.
    pub executors: Vec<ExecutorSpec>,
    /// How the writer writes (its `journal` is replaced by each mode in turn).
    pub writer: WriterOptions,
}

/// The tally of one journal mode and backend.
#[derive(Debug, Clone, Serialize)]
pub struct LiveTally {
    /// `wal` or `delete`.
    pub journal: String,
    /// The backend asked for.
    pub backend: String,
    /// Scans run.
    pub scans: u32,
    /// Scans that answered (with the invariant's answer or not).
    pub answered: u32,
    /// Scans that answered after at least one retry.
    pub retried: u32,
    /// Scans that ended with an error.
    pub refused: u32,
    /// Answers other than the invariant's (torn reads; must be 0).
    pub wrong: u32,
    /// How many scans held their snapshot by each protocol.
    pub protocols: BTreeMap<String, u32>,
    /// Lock retries (busy locks) summed over the scans.
    pub lock_retries: u64,
    /// The slowest scan (plan, scan and retries), in seconds.
    pub max_scan_s: f64,
    /// The mean scan, in seconds.
    pub mean_scan_s: f64,
    /// The first few errors.
    pub errors: Vec<String>,
}

/// One journal mode's results.
#[derive(Debug, Clone, Serialize)]
pub struct LiveJournal {
    /// `wal` or `delete`.
    pub journal: String,
    /// The invariant Q6 revenue (the oracle's, before the writer started).
    pub expected_revenue: String,
    /// One tally per backend.
    pub tallies: Vec<LiveTally>,
    /// What the writer did meanwhile.
    pub writer: WriterStats,
}

/// A running writer process.
pub struct WriterProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl WriterProcess {
    /// Starts `exe bench live-writer DB ...` and waits until it is ready to commit.
    pub fn start(exe: &Path, db: &Path, opts: &WriterOptions) -> std::io::Result<Self> {
        let mut child = Command::new(exe)
            .args(["bench", "live-writer"])
            .arg(db)
            .args(["--journal", opts.journal.name()])
            .args(["--rate", &opts.rate.to_string()])
            .args(["--autocheckpoint", &opts.autocheckpoint.to_string()])
            .args(["--checkpoint-every", &opts.checkpoint_every.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        if line.trim() != "ready" {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(format!(
                "the writer did not start (said {:?})",
                line.trim()
            )));
        }
        Ok(Self {
            child,
            stdin,
            stdout,
        })
    }

    /// Stops the writer (closing its standard input) and returns what it reports.
    pub fn stop(mut self) -> std::io::Result<WriterStats> {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.flush();
        }
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let status = self.child.wait()?;
        if !status.success() {
            return Err(std::io::Error::other(format!(
                "the writer failed ({status}): {}",
                line.trim()
            )));
        }
        serde_json::from_str(line.trim()).map_err(std::io::Error::other)
    }
}

impl Drop for WriterProcess {
    fn drop(&mut self) {
        // Only when stop() was not called (an error path): do not leave the writer running.
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn io_err(path: &Path, op: &str, source: std::io::Error) -> ExperimentError {
    ExperimentError::Io {
        path: path.to_path_buf(),
        op: op.to_string(),
        source,
    }
}

/// Runs the experiment (see the module docs).
pub fn run_live(opts: &LiveOptions) -> Result<Vec<LiveJournal>> {
    let params = Q6Params::default();
    let mut out = Vec::new();
    for &journal in &opts.journals {
        writer::set_journal_mode(&opts.db, journal).map_err(|source| {
            ExperimentError::Oracle(oracle::OracleError {
                path: opts.db.clone(),
                source,
            })
        })?;
        let expected = oracle::q6(&opts.db, "lineitem", &params)?.revenue();
        let wopts = WriterOptions {
            journal,
            ..opts.writer
        };
        let process = WriterProcess::start(&opts.exe, &opts.db, &wopts)
            .map_err(|e| io_err(&opts.exe, "start the writer", e))?;
        let mut tallies = Vec::new();
        for &backend in &opts.backends {
            tallies.push(scan_repeatedly(opts, journal, backend, &params, &expected));
        }
        let writer = process
            .stop()
            .map_err(|e| io_err(&opts.exe, "stop the writer", e))?;
        out.push(LiveJournal {
            journal: journal.name().to_string(),
            expected_revenue: expected,
            tallies,
            writer,
        });
    }
    Ok(out)
}

fn scan_repeatedly(
    opts: &LiveOptions,
    journal: Journal,
    backend: IoChoice,
    params: &Q6Params,
    expected: &str,
) -> LiveTally {
    let mut t = LiveTally {
        journal: journal.name().to_string(),
        backend: io_name(backend).to_string(),
        scans: opts.scans,
        answered: 0,
        retried: 0,
        refused: 0,
        wrong: 0,
        protocols: BTreeMap::new(),
        lock_retries: 0,
        max_scan_s: 0.0,
        mean_scan_s: 0.0,
        errors: Vec::new(),
    };
    let mut total = 0.0;
    for _ in 0..opts.scans {
        let started = Instant::now();
        let outcome = engine::consistent(
            &opts.db,
            || TablePlan::open(&opts.db, "lineitem"),
            |plan| {
                let settings = ScanSettings {
                    io: backend,
                    ..ScanSettings::defaults(plan.header.page_size)
                };
                run_q6(plan, &opts.executors, params, &settings)
            },
        );
        let took = started.elapsed().as_secs_f64();
        total += took;
        t.max_scan_s = t.max_scan_s.max(took);
        match outcome {
            Ok(done) => {
                t.answered += 1;
                t.retried += u32::from(done.attempts > 1);
                t.wrong += u32::from(done.value.revenue != expected);
                let snap = &done.value.snapshot;
                *t.protocols.entry(snap.protocol.clone()).or_default() += 1;
                t.lock_retries += u64::from(snap.lock_retries);
            }
            Err(e) => {
                t.refused += 1;
                if t.errors.len() < 5 {
                    t.errors.push(e.to_string());
                }
            }
        }
    }
    t.mean_scan_s = total / f64::from(opts.scans.max(1));
    t
}

/// The results as a markdown table.
pub fn markdown(results: &[LiveJournal]) -> String {
    use std::fmt::Write;
    let mut s = String::from(
        "| journal | backend | scans | answered | retried | refused | wrong | protocols | lock retries | mean / max scan (s) |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for j in results {
        for t in &j.tallies {
            let protocols: Vec<String> = t
                .protocols
                .iter()
                .map(|(p, n)| format!("{p} {n}"))
                .collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.3} / {:.3} |",
                t.journal,
                t.backend,
                t.scans,
                t.answered,
                t.retried,
                t.refused,
                t.wrong,
                protocols.join(", "),
                t.lock_retries,
                t.mean_scan_s,
                t.max_scan_s
            );
        }
    }
    s.push('\n');
    for j in results {
        let w = &j.writer;
        let _ = writeln!(
            s,
            "- writer ({}): {} commits in {:.1} s ({:.0}/s), {} explicit checkpoints ({} busy), \
             waited {:.2} s for readers, longest transaction {:.1} ms, {} errors, integrity_check: {}",
            j.journal,
            w.commits,
            w.seconds,
            w.commits as f64 / w.seconds.max(1e-9),
            w.checkpoints,
            w.checkpoints_busy,
            w.wait_s,
            w.max_commit_ms,
            w.errors.len(),
            w.integrity
        );
    }
    s
}
