//! `corescan bench compare`: the same Q6 in the same run, cold and warm, in corescan and its
//! peers, every answer checked against the exact one.
//!
//! | engine | reads | answer |
//! |---|---|---|
//! | corescan | the SQLite file, defaults (`--io auto`, one executor per CPU) | exact |
//! | SQLite (rusqlite) | the same file, in-process, the same Q6 with the oracle's integer sum | exact |
//! | `sqlite3` CLI | the same file, read-only, standard Q6 ([`crate::text::q6_sql`]) | float |
//! | DuckDB (`duckdb`) | its own `.duckdb` copy of the table, `DECIMAL(15,2)` columns | exact decimal |
//! | Turso (`pyturso`) | a private copy of the file (Turso writes to what it opens) | float |
//!
//! Engines that are not installed are skipped with the reason. Times run from opening the
//! database to the answer; the Python engines exclude the interpreter's start and imports, the
//! `sqlite3` shell includes its (about a millisecond). Each peer run is a fresh process, so
//! "warm" means the operating system's page cache, read once right before the run; "cold"
//! empties it first ([`super::drop_page_cache`]). Rounds interleave every engine, cold then warm.

mod markdown;
mod report;

pub use report::{CompareReport, CompareResult, CompareRun, Engine, EngineInfo};

use std::path::{Path, PathBuf};
use std::time::Instant;

use engine::q6::{run_q6, Q6Params};
use engine::{ScanSettings, SqpollMode};
use partitioner::TablePlan;

use super::machine::Machine;
use super::peers::{self, Answer, PeerRun, FLOAT_RULE};
use super::runner::place;
use super::{
    check_answer, create_out_dir, prepare_cache, progress_bar, write_file, write_json, CacheMode,
    ExperimentError, Result, Spread,
};
use crate::oracle::{self, OracleAnswer};
use crate::text::{q6_sql, Q6Select};

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    /// The database file.
    pub db: PathBuf,
    /// The table.
    pub table: String,
    /// Rounds; each runs every engine cold, then every engine warm.
    pub repeat: usize,
    /// The output directory (copies for the peers are cached beside it).
    pub out: PathBuf,
    /// Show a progress bar on stderr (hidden anyway when stderr is not a terminal).
    pub progress: bool,
}

/// Runs the comparison and writes `compare.md` and `compare.json`.
pub fn run_compare(opts: &CompareOptions) -> Result<CompareReport> {
    if opts.repeat == 0 {
        return Err(ExperimentError::Invalid(
            "--repeat must be at least 1".into(),
        ));
    }
    let params = Q6Params::default();
    let machine = Machine::probe(&opts.db);
    let plan = TablePlan::open(&opts.db, &opts.table)?;
    let topology = partitioner::topology::Machine::detect().ok();
    let table = plan.table.name.clone();
    let expected = oracle::q6(&opts.db, &table, &params)?;
    let sql = q6_sql(&table, &params, Q6Select::Revenue);
    let cache = peers::cache_dir(&opts.out, &opts.db)?;
    let db = opts.db.display().to_string();
    let mut notes = Vec::new();

    let mut engines: Vec<EngineInfo> = Vec::new();
    for engine in Engine::ALL {
        let mut info = EngineInfo {
            engine,
            version: None,
            skipped: None,
            files: vec![db.clone()],
            reads: String::new(),
            check: "exact",
            bytes: 0,
        };
        match engine {
            Engine::Corescan => {
                info.version = Some(env!("CARGO_PKG_VERSION").into());
                info.reads = "the SQLite file; defaults: --io auto, one executor per CPU, default window and coalescing".into();
            }
            Engine::Sqlite => {
                info.version = Some(rusqlite::version().into());
                info.reads = "the SQLite file, read-only, in-process; integer sum of cents (the oracle's SQL)".into();
            }
            Engine::Sqlite3Cli => {
                info.check = "float";
                info.reads = "the SQLite file, `sqlite3 -readonly`, standard Q6".into();
                match peers::probe_sqlite3() {
                    Ok(v) => info.version = Some(v),
                    Err(why) => info.skipped = Some(why),
                }
            }
            Engine::Duckdb => {
                info.reads =
                    "its own .duckdb copy of the table (DECIMAL(15,2), DATE columns), read-only"
                        .into();
                match peers::probe_python_module("duckdb", "duckdb") {
                    Ok(v) => match peers::duckdb_copy(&opts.db, &table, &cache) {
                        Ok((path, made)) => {
                            notes.push(format!(
                                "DuckDB copy {} {}",
                                path.display(),
                                if made {
                                    "made now (CSV export, then read_csv into DuckDB)"
                                } else {
                                    "reused"
                                }
                            ));
                            info.version = Some(v);
                            info.files = vec![path.display().to_string()];
                        }
                        Err(e) => return Err(e),
                    },
                    Err(why) => info.skipped = Some(why),
                }
            }
            Engine::Turso => {
                info.check = "float";
                info.reads = "a private copy of the SQLite file (Turso opens read-write and switches it to WAL)".into();
                match peers::probe_python_module("turso", "pyturso") {
                    Ok(v) => {
                        let (path, made) = peers::turso_copy(&opts.db, &cache)?;
                        notes.push(format!(
                            "Turso copy {} {}",
                            path.display(),
                            if made { "made now" } else { "reused" }
                        ));
                        info.version = Some(v);
                        info.files = vec![path.display().to_string()];
                    }
                    Err(why) => info.skipped = Some(why),
                }
            }
        }
        info.bytes = info
            .files
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum();
        engines.push(info);
    }

    let active: Vec<&EngineInfo> = engines.iter().filter(|e| e.skipped.is_none()).collect();
    let bar = progress_bar(opts.progress, (opts.repeat * 2 * active.len()) as u64);
    let mut runs = Vec::new();
    for round in 0..opts.repeat {
        for mode in [CacheMode::Cold, CacheMode::Warm] {
            for info in &active {
                bar.set_message(format!(
                    "round {}/{}: {} {}",
                    round + 1,
                    opts.repeat,
                    info.engine.name(),
                    mode.name()
                ));
                let files: Vec<PathBuf> = info.files.iter().map(PathBuf::from).collect();
                let file_refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
                let prep = prepare_cache(mode, &file_refs)?;
                let (run, detail) = run_engine(
                    info.engine,
                    topology.as_ref(),
                    &files[0],
                    &table,
                    &params,
                    &sql,
                    &expected,
                )?;
                if !run.answer.agrees_with(expected.revenue_ten_thousandths) {
                    return Err(ExperimentError::WrongAnswer {
                        what: format!(
                            "{} ({}, round {})",
                            info.engine.name(),
                            mode.name(),
                            round + 1
                        ),
                        got: run.printed,
                        want: format!(
                            "revenue {} ({})",
                            expected.revenue(),
                            if info.check == "float" {
                                FLOAT_RULE
                            } else {
                                "exactly"
                            }
                        ),
                    });
                }
                runs.push(CompareRun {
                    engine: info.engine,
                    mode,
                    repeat: round,
                    cache: prep,
                    wall_s: run.seconds,
                    printed: run.printed,
                    answer: run.answer,
                    detail,
                });
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();

    let mut results = Vec::new();
    for mode in [CacheMode::Cold, CacheMode::Warm] {
        let spread_of = |engine: Engine| {
            let v: Vec<f64> = runs
                .iter()
                .filter(|r| r.engine == engine && r.mode == mode)
                .map(|r| r.wall_s)
                .collect();
            Spread::of(&v)
        };
        let base = spread_of(Engine::Corescan).map(|s| s.median);
        for info in &active {
            if let Some(wall_s) = spread_of(info.engine) {
                let vs_corescan = base.filter(|b| *b > 0.0).map(|b| wall_s.median / b);
                results.push(CompareResult {
                    engine: info.engine,
                    mode,
                    wall_s,
                    vs_corescan,
                });
            }
        }
    }
    let report = CompareReport {
        db,
        table,
        machine,
        revenue: expected.revenue(),
        rows_matched: expected.rows_matched,
        rows_scanned: expected.rows_scanned,
        sql,
        float_rule: FLOAT_RULE,
        engines,
        runs,
        results,
        notes,
    };
    create_out_dir(&opts.out)?;
    write_json(&opts.out.join("compare.json"), &report)?;
    write_file(
        &opts.out.join("compare.md"),
        markdown::compare_markdown(&report, opts.repeat),
    )?;
    Ok(report)
}

/// Runs Q6 once in `engine` over `file`; for corescan and SQLite the row counts are checked too.
#[allow(clippy::too_many_arguments)]
fn run_engine(
    engine: Engine,
    topology: Option<&partitioner::topology::Machine>,
    file: &Path,
    table: &str,
    params: &Q6Params,
    sql: &str,
    expected: &OracleAnswer,
) -> Result<(PeerRun, Option<String>)> {
    match engine {
        Engine::Corescan => {
            let started = Instant::now();
            let plan = TablePlan::open(file, table)?;
            let n = engine::available_cpus().len().max(1);
            let executors = place(topology, n, SqpollMode::Off)
                .map_err(|e| ExperimentError::Invalid(format!("placing {n} executors: {e}")))?;
            let report = run_q6(
                &plan,
                &executors,
                params,
                &ScanSettings::defaults(plan.header.page_size),
            )
            .map_err(|source| ExperimentError::Scan {
                what: "corescan (defaults)".into(),
                source,
            })?;
            let seconds = started.elapsed().as_secs_f64();
            check_answer("corescan (defaults)", &report, expected)?;
            let detail = format!(
                "{}, {}, {} executors, window {}, reads up to {} pages{}",
                report.io.backend,
                if report.io.o_direct {
                    "O_DIRECT"
                } else {
                    "buffered"
                },
                report.executors.len(),
                report.io.readahead,
                report.io.max_read_pages,
                if report.oversubscribed {
                    ", OVERSUBSCRIBED"
                } else {
                    ""
                }
            );
            let answer = Answer::parse_decimal(&report.revenue).unwrap_or(Answer::Float(f64::NAN));
            Ok((
                PeerRun {
                    seconds,
                    printed: report.revenue,
                    answer,
                },
                Some(detail),
            ))
        }
        Engine::Sqlite => {
            let started = Instant::now();
            let (matched, revenue) = sqlite_q6(file, table, params)?;
            let seconds = started.elapsed().as_secs_f64();
            let printed = oracle::format_revenue(revenue);
            if matched != expected.rows_matched {
                return Err(ExperimentError::WrongAnswer {
                    what: "sqlite (rusqlite)".into(),
                    got: format!("{matched} rows matched"),
                    want: format!("{} rows matched", expected.rows_matched),
                });
            }
            Ok((
                PeerRun {
                    seconds,
                    printed,
                    answer: Answer::Exact(revenue),
                },
                None,
            ))
        }
        Engine::Sqlite3Cli => Ok((peers::run_sqlite3(file, sql)?, None)),
        Engine::Duckdb => {
            // DuckDB's copy names the table in lower case.
            let duck_sql = q6_sql(&table.to_ascii_lowercase(), params, Q6Select::Revenue);
            Ok((
                peers::run_python("duckdb", "duckdb-q6", file, &duck_sql)?.0,
                None,
            ))
        }
        Engine::Turso => Ok((peers::run_python("turso", "turso-q6", file, sql)?.0, None)),
    }
}

/// The oracle's Q6 (the same text, selecting the integer sum of cents) without its second pass
/// counting every row, so that SQLite is timed on the query alone.
fn sqlite_q6(db: &Path, table: &str, params: &Q6Params) -> Result<(u64, i128)> {
    let fail = |source| ExperimentError::Sqlite {
        path: db.to_path_buf(),
        what: "Q6".into(),
        source,
    };
    let conn = oracle::open_read_only(db)?;
    let sql = q6_sql(table, params, Q6Select::CountAndExactRevenue);
    let (matched, revenue): (i64, i64) = conn
        .query_row(&sql, [], |row| Ok((row.get(0)?, row.get(1)?)))
        .map_err(fail)?;
    Ok((matched as u64, i128::from(revenue)))
}
