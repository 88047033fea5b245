//! What `bench compare` measured ([`CompareReport`]) and the engines it compares
//! ([`Engine`]): what `compare.json` and `compare.md` are made from. Below the rest of
//! `compare/`: it imports none of it.

use serde::Serialize;

use crate::experiments::machine::Machine;
use crate::experiments::peers::Answer;
use crate::experiments::{CacheMode, CachePrep, Spread};

/// The engines, in run order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// corescan with its defaults, in-process.
    Corescan,
    /// SQLite through rusqlite, in-process.
    Sqlite,
    /// The `sqlite3` shell.
    Sqlite3Cli,
    /// DuckDB through Python.
    Duckdb,
    /// Turso through Python.
    Turso,
}

impl Engine {
    /// Every engine.
    pub const ALL: [Engine; 5] = [
        Engine::Corescan,
        Engine::Sqlite,
        Engine::Sqlite3Cli,
        Engine::Duckdb,
        Engine::Turso,
    ];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Corescan => "corescan",
            Engine::Sqlite => "sqlite (rusqlite)",
            Engine::Sqlite3Cli => "sqlite3 CLI",
            Engine::Duckdb => "duckdb (python)",
            Engine::Turso => "turso (python pyturso)",
        }
    }
}

/// One engine as the comparison used it.
#[derive(Debug, Clone, Serialize)]
pub struct EngineInfo {
    /// Which engine.
    pub engine: Engine,
    /// Its version, when known.
    pub version: Option<String>,
    /// Why it was skipped, when it was.
    pub skipped: Option<String>,
    /// The files it reads (dropped or warmed before each run).
    pub files: Vec<String>,
    /// How it reads the data.
    pub reads: String,
    /// The total size of `files`, in bytes (DuckDB's columnar copy is much smaller than the
    /// SQLite file: it reads different bytes, not just fewer).
    pub bytes: u64,
    /// How its answer is checked: `exact` or `float`.
    pub check: &'static str,
}

/// One timed run.
#[derive(Debug, Clone, Serialize)]
pub struct CompareRun {
    /// The engine.
    pub engine: Engine,
    /// Cold or warm.
    pub mode: CacheMode,
    /// The round, 0-based.
    pub repeat: usize,
    /// How the page cache was prepared.
    pub cache: CachePrep,
    /// Seconds from opening the database to the answer.
    pub wall_s: f64,
    /// The answer as printed by the engine.
    pub printed: String,
    /// The parsed answer.
    pub answer: Answer,
    /// For corescan: the I/O path that ran.
    pub detail: Option<String>,
}

/// The medians of one engine in one cache mode.
#[derive(Debug, Clone, Serialize)]
pub struct CompareResult {
    /// The engine.
    pub engine: Engine,
    /// Cold or warm.
    pub mode: CacheMode,
    /// Wall time, seconds.
    pub wall_s: Spread,
    /// This engine's median over corescan's in the same mode (above 1: corescan is faster).
    pub vs_corescan: Option<f64>,
}

/// Everything the comparison measured.
#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    /// The database file.
    pub db: String,
    /// The table.
    pub table: String,
    /// The machine.
    pub machine: Machine,
    /// The exact revenue.
    pub revenue: String,
    /// Rows matched.
    pub rows_matched: u64,
    /// Rows in the table.
    pub rows_scanned: u64,
    /// The SQL the peers ran.
    pub sql: String,
    /// How float answers were compared.
    pub float_rule: &'static str,
    /// Every engine, run or skipped.
    pub engines: Vec<EngineInfo>,
    /// Every run.
    pub runs: Vec<CompareRun>,
    /// Medians per engine and mode.
    pub results: Vec<CompareResult>,
    /// What was prepared (copies made or reused).
    pub notes: Vec<String>,
}
