//! `corescan bench tpch DB`: the 22 TPC-H queries through `corescan sql` (in this process),
//! beside DuckDB on the same SQLite file (its `sqlite` extension, `ATTACH ... (TYPE sqlite)`)
//! and the `sqlite3` shell, warm and cold, in interleaved rounds; writes `tpch.md` (medians,
//! totals, ratios and the I/O path of every corescan figure), `tpch.json` (every run) and
//! `tpch.svg` (medians with their spread).
//!
//! What is timed: corescan from registering the file to the last record batch (planning
//! included); DuckDB from its query to the last row fetched (inside its process, after
//! `ATTACH`; its own text of each query, from its `tpch` extension); `sqlite3` as a whole
//! process (a few milliseconds of start-up). A run over `--timeout` is killed and counted as
//! not answered. The peers are used only when present: DuckDB 1.4 from the Python packages
//! `duckdb==1.4.4`, `duckdb-ext-sqlite` and `duckdb-ext-tpch` (installable offline from PyPI;
//! their extension files are loaded with `allow_unsigned_extensions`), `sqlite3` from
//! `scripts/setup`.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bench::experiments::machine::Machine;
use bench::experiments::markdown::{num, Table};
use bench::experiments::peers::{probe_python_module, probe_sqlite3};
use bench::experiments::plots::{LineChart, Point, Series, XAxis};
use bench::experiments::{default_out_dir, drop_page_cache, warm_file, CacheMode};
use clap::Args;
use corescan_datafusion::datafusion::physical_plan::collect;
use corescan_datafusion::tpch::{TpchQuery, QUERIES};
use corescan_datafusion::{CorescanExec, TableOptions};
use serde::Serialize;

use crate::scan_setup::ScanArgs;
use crate::sql::scans;

/// Arguments of `corescan bench tpch`.
#[derive(Debug, Args)]
pub struct TpchArgs {
    /// A TPC-H database (`corescan gen DB --tables all`).
    db: PathBuf,
    /// Timed runs of each query by each engine (interleaved: round 1 of every query and engine,
    /// then round 2, ...); the median is reported.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Also run cold (the page cache emptied before every run); warm only by default.
    #[arg(long)]
    cold: bool,
    /// Only cold runs.
    #[arg(long, conflicts_with = "cold")]
    cold_only: bool,
    /// The queries to run, e.g. `1,6,21` (all 22 by default).
    #[arg(long, value_delimiter = ',')]
    queries: Vec<u32>,
    /// Seconds before a peer's run is killed and counted as not answered.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Leave the peers out (corescan only).
    #[arg(long, conflicts_with = "peers")]
    no_peers: bool,
    /// The peers to run, of `duckdb` and `sqlite3` (both by default, when installed).
    #[arg(long, value_delimiter = ',', value_parser = ["duckdb", "sqlite3"])]
    peers: Vec<String>,
    /// DuckDB's threads (as many as corescan's executors by default).
    #[arg(long)]
    duckdb_threads: Option<usize>,
    #[command(flatten)]
    scan: ScanArgs,
    /// Where the results go (default: corescan-results/tpch-<UTC time>).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The engines compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
enum Engine {
    Corescan,
    Duckdb,
    Sqlite3,
}

impl Engine {
    fn label(self) -> &'static str {
        match self {
            Engine::Corescan => "corescan sql",
            Engine::Duckdb => "DuckDB on the SQLite file",
            Engine::Sqlite3 => "sqlite3",
        }
    }
}

/// One run.
#[derive(Debug, Clone, Serialize)]
struct Run {
    engine: Engine,
    cache: &'static str,
    query: u32,
    round: u32,
    /// Seconds, or `None` when the run failed or timed out (`error` says which).
    seconds: Option<f64>,
    rows: Option<u64>,
    error: Option<String>,
    /// corescan's I/O backends, as its scans' reports name them.
    io: Option<String>,
}

/// Runs `corescan bench tpch`.
pub fn run(args: TpchArgs) -> anyhow::Result<()> {
    let queries = selected(&args.queries)?;
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let out = args.out.clone().unwrap_or_else(|| default_out_dir("tpch"));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let runtime = corescan_datafusion::runtime(2).context("starting DataFusion's runtime")?;
    // The file opens (and its tables are listed) before any run, or the command stops here.
    corescan_datafusion::SqliteSchema::open(&args.db, args.scan.placement(), args.scan.options())?;

    let mut engines = vec![Engine::Corescan];
    let mut peers_note = Vec::new();
    let wanted =
        |p: &str| !args.no_peers && (args.peers.is_empty() || args.peers.iter().any(|x| x == p));
    if wanted("duckdb") {
        match probe_python_module("duckdb", "duckdb") {
            Ok(v) => match duckdb_extensions() {
                Ok(_) => {
                    engines.push(Engine::Duckdb);
                    peers_note.push(format!("DuckDB {v} (Python package)"));
                }
                Err(e) => peers_note.push(format!("DuckDB skipped: {e}")),
            },
            Err(e) => peers_note.push(format!("DuckDB skipped: {e}")),
        }
    }
    if wanted("sqlite3") {
        match probe_sqlite3() {
            Ok(v) => {
                engines.push(Engine::Sqlite3);
                peers_note.push(format!("sqlite3 {v}"));
            }
            Err(e) => peers_note.push(format!("sqlite3 skipped: {e}")),
        }
    }
    let threads = args
        .duckdb_threads
        .unwrap_or_else(|| corescan_threads(&args).max(1));
    let modes: Vec<CacheMode> = match (args.cold, args.cold_only) {
        (_, true) => vec![CacheMode::Cold],
        (true, false) => vec![CacheMode::Warm, CacheMode::Cold],
        (false, false) => vec![CacheMode::Warm],
    };

    let mut runs = Vec::new();
    for &mode in &modes {
        if mode == CacheMode::Warm {
            warm_file(&args.db)?;
            // One untimed run of each query in this process (the peers run in processes of
            // their own each time: the page cache is what they share).
            for q in &queries {
                let _ = run_one(Engine::Corescan, q, &args, &runtime, threads);
            }
        }
        for round in 1..=args.rounds {
            for q in &queries {
                for &engine in &engines {
                    if mode == CacheMode::Cold {
                        drop_page_cache(&[args.db.as_path()])?;
                    }
                    let mut run = run_one(engine, q, &args, &runtime, threads);
                    run.cache = mode.name();
                    run.round = round;
                    eprintln!(
                        "{} Q{:02} round {round} {:<26} {}",
                        mode.name(),
                        q.number,
                        engine.label(),
                        run.seconds.map_or_else(
                            || run.error.clone().unwrap_or_default(),
                            |s| format!("{s:.3} s")
                        )
                    );
                    runs.push(run);
                }
            }
        }
    }

    let machine = Machine::probe(&args.db);
    let md = markdown(
        &args,
        &queries,
        &engines,
        &modes,
        &runs,
        &machine,
        &peers_note,
    );
    write(&out.join("tpch.md"), md.as_bytes())?;
    let json = serde_json::json!({
        "db": args.db,
        "rounds": args.rounds,
        "duckdb_threads": threads,
        "peers": peers_note,
        "runs": runs,
    });
    write(
        &out.join("tpch.json"),
        serde_json::to_string_pretty(&json)?.as_bytes(),
    )?;
    for &mode in &modes {
        chart(&queries, &engines, mode, &runs)
            .draw_svg(&out.join(format!("tpch-{}.svg", mode.name())))?;
    }
    print!("{md}");
    eprintln!("results in {}", out.display());
    Ok(())
}

/// The TPC-H queries numbered `numbers` (all 22 when none are given).
pub(crate) fn selected(numbers: &[u32]) -> anyhow::Result<Vec<&'static TpchQuery>> {
    if numbers.is_empty() {
        return Ok(QUERIES.iter().collect());
    }
    numbers
        .iter()
        .map(|&n| {
            corescan_datafusion::tpch::query(n)
                .with_context(|| format!("no TPC-H query {n} (1 to 22)"))
        })
        .collect()
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// The executors corescan places for one scan (DuckDB gets as many threads).
fn corescan_threads(args: &TpchArgs) -> usize {
    engine::placement::resolve(&args.scan.placement(), &args.scan.options(), 4096)
        .map_or(1, |(executors, _)| executors.len())
}

/// One run of `q` by `engine`.
fn run_one(
    engine: Engine,
    q: &TpchQuery,
    args: &TpchArgs,
    runtime: &tokio::runtime::Runtime,
    threads: usize,
) -> Run {
    let mut run = Run {
        engine,
        cache: "",
        query: q.number,
        round: 0,
        seconds: None,
        rows: None,
        error: None,
        io: None,
    };
    let outcome = match engine {
        Engine::Corescan => corescan_run(q, args, runtime).map(|(s, rows, io)| {
            run.io = Some(io);
            (s, rows)
        }),
        Engine::Duckdb => duckdb_run(q, args, threads),
        Engine::Sqlite3 => sqlite3_run(q, args),
    };
    match outcome {
        Ok((seconds, rows)) => {
            run.seconds = Some(seconds);
            run.rows = Some(rows);
        }
        Err(e) => run.error = Some(format!("{e:#}")),
    }
    run
}

/// `q` through `corescan sql`'s path: seconds, rows and the backends its scans used.
fn corescan_run(
    q: &TpchQuery,
    args: &TpchArgs,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<(f64, u64, String)> {
    runtime.block_on(async {
        let start = Instant::now();
        let ctx = corescan_datafusion::context();
        corescan_datafusion::register_with(
            &ctx,
            &args.db,
            args.scan.placement(),
            args.scan.options(),
            TableOptions::default(),
        )?;
        let frame = ctx.sql(q.datafusion).await?;
        let task = Arc::new(frame.task_ctx());
        let plan = frame.create_physical_plan().await?;
        let batches = collect(Arc::clone(&plan), task).await?;
        let seconds = start.elapsed().as_secs_f64();
        let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
        let mut found = Vec::new();
        scans(&plan, &mut found);
        let mut io = BTreeSet::new();
        for node in &found {
            if let Some(exec) = node.downcast_ref::<CorescanExec>() {
                for end in exec.scan_ends().into_iter().flatten() {
                    io.insert(end.report.io.backend.clone());
                }
            }
        }
        Ok((seconds, rows, io.into_iter().collect::<Vec<_>>().join("+")))
    })
}

/// The `sqlite3` shell on `q`'s SQLite text: the whole process, killed after the timeout.
fn sqlite3_run(q: &TpchQuery, args: &TpchArgs) -> anyhow::Result<(f64, u64)> {
    let start = Instant::now();
    let mut child = Command::new("sqlite3")
        .arg("-readonly")
        .arg(&args.db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting sqlite3")?;
    let mut stdin = child.stdin.take().context("sqlite3's stdin")?;
    stdin.write_all(q.sqlite.as_bytes())?;
    drop(stdin);
    let output = wait_with_timeout(child, Duration::from_secs(args.timeout))?;
    let seconds = start.elapsed().as_secs_f64();
    let rows = output.lines().count() as u64;
    Ok((seconds, rows))
}

/// The DuckDB helper: attaches the SQLite file read-only, runs TPC-H query `n` of DuckDB's
/// `tpch` extension on it and prints the seconds from the query to its last row, and the rows.
const DUCKDB_HELPER: &str = r#"
import json, sys, time, duckdb
db, n, threads, sqlite_ext, tpch_ext = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
con = duckdb.connect(config={"allow_unsigned_extensions": "true", "threads": threads})
con.execute("SET enable_progress_bar = false")
con.execute("LOAD '%s'" % sqlite_ext.replace("'", "''"))
con.execute("LOAD '%s'" % tpch_ext.replace("'", "''"))
text = con.execute("SELECT query FROM tpch_queries() WHERE query_nr = ?", [n]).fetchone()[0]
con.execute("ATTACH '%s' AS s (TYPE sqlite, READ_ONLY)" % db.replace("'", "''"))
con.execute("USE s")
start = time.perf_counter()
rows = con.execute(text).fetchall()
print(json.dumps({"seconds": time.perf_counter() - start, "rows": len(rows)}))
"#;

/// The extension files the Python packages `duckdb-ext-sqlite` and `duckdb-ext-tpch` ship.
fn duckdb_extensions() -> anyhow::Result<(String, String)> {
    let script = r#"
import json
from importlib.metadata import files
def find(dist, name):
    for f in files(dist) or []:
        if str(f).endswith(name):
            return str(f.locate())
    raise SystemExit("%s has no %s" % (dist, name))
print(json.dumps([find("duckdb-ext-sqlite", "sqlite_scanner.duckdb_extension"),
                  find("duckdb-ext-tpch", "tpch.duckdb_extension")]))
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .output()
        .context("running python3")?;
    if !out.status.success() {
        bail!(
            "the packages duckdb-ext-sqlite and duckdb-ext-tpch are not installed ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let (a, b): (String, String) = serde_json::from_slice(&out.stdout)?;
    Ok((a, b))
}

/// DuckDB on `q`, in a process of its own.
fn duckdb_run(q: &TpchQuery, args: &TpchArgs, threads: usize) -> anyhow::Result<(f64, u64)> {
    #[derive(serde::Deserialize)]
    struct Out {
        seconds: f64,
        rows: u64,
    }
    let (sqlite_ext, tpch_ext) = duckdb_extensions()?;
    let child = Command::new("python3")
        .args(["-c", DUCKDB_HELPER])
        .arg(&args.db)
        .arg(q.number.to_string())
        .arg(threads.to_string())
        .arg(sqlite_ext)
        .arg(tpch_ext)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting python3")?;
    let output = wait_with_timeout(child, Duration::from_secs(args.timeout))?;
    // The timing is the helper's last line (nothing else should print, but a progress bar
    // of DuckDB's own once did).
    let last = output.lines().last().unwrap_or("");
    let out: Out = serde_json::from_str(last.trim()).context("reading DuckDB's timing")?;
    Ok((out.seconds, out.rows))
}

/// Waits for `child` at most `timeout`, then kills it; its standard output, or why it failed.
fn wait_with_timeout(mut child: std::process::Child, timeout: Duration) -> anyhow::Result<String> {
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut s) = stdout {
            let _ = std::io::Read::read_to_string(&mut s, &mut text);
        }
        text
    });
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            let text = reader.join().unwrap_or_default();
            if !status.success() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                let last = err.lines().last().unwrap_or("").to_string();
                bail!("exited with {status}: {last}");
            }
            return Ok(text);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let _ = reader.join();
            bail!("timeout ({} s)", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The median of the answered runs of `engine` on query `n` in `cache` mode.
fn median(runs: &[Run], engine: Engine, n: u32, cache: &str) -> Option<Point> {
    let mut s: Vec<f64> = runs
        .iter()
        .filter(|r| r.engine == engine && r.query == n && r.cache == cache)
        .map(|r| r.seconds)
        .collect::<Option<Vec<f64>>>()?;
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    Some(Point {
        x: n as i32,
        median: s[s.len() / 2],
        min: s[0],
        max: s[s.len() - 1],
    })
}

fn markdown(
    args: &TpchArgs,
    queries: &[&TpchQuery],
    engines: &[Engine],
    modes: &[CacheMode],
    runs: &[Run],
    machine: &Machine,
    peers: &[String],
) -> String {
    let mut md =
        format!(
        "# TPC-H through `corescan sql`, beside DuckDB on the same SQLite file and `sqlite3`\n\n\
         {}\n\nFile: `{}`. Medians of {} interleaved rounds, seconds. Peers: {}.\n\
         corescan: registering the file to the last batch, in process; DuckDB: its query to \
         the last row, in its own process after `ATTACH ... (TYPE sqlite)`; sqlite3: the whole \
         process. A dash: not answered within {} s (or failed; see tpch.json).\n",
        machine.markdown(),
        args.db.display(),
        args.rounds,
        if peers.is_empty() { "none".to_string() } else { peers.join(", ") },
        args.timeout
    );
    for &mode in modes {
        let cache = mode.name();
        let mut header = vec!["query".to_string()];
        for &e in engines {
            header.push(format!("{} (s)", e.label()));
            if e == Engine::Corescan {
                header.push("corescan I/O".into());
            }
        }
        if engines.contains(&Engine::Duckdb) {
            header.push("corescan / DuckDB".into());
        }
        let refs: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut table = Table::new(&refs);
        let mut totals = vec![Some(0.0f64); engines.len()];
        for q in queries {
            let mut row = vec![format!("Q{}", q.number)];
            let mut by_engine = Vec::new();
            for (i, &e) in engines.iter().enumerate() {
                let m = median(runs, e, q.number, cache).map(|p| p.median);
                totals[i] = totals[i].zip(m).map(|(t, m)| t + m);
                row.push(num(m, 3));
                by_engine.push(m);
                if e == Engine::Corescan {
                    let io: BTreeSet<&str> = runs
                        .iter()
                        .filter(|r| r.engine == e && r.query == q.number && r.cache == cache)
                        .filter_map(|r| r.io.as_deref())
                        .collect();
                    row.push(io.into_iter().collect::<Vec<_>>().join(", "));
                }
            }
            if let Some(d) = engines.iter().position(|&e| e == Engine::Duckdb) {
                row.push(num(by_engine[0].zip(by_engine[d]).map(|(c, d)| c / d), 2));
            }
            table.row(row);
        }
        let mut row = vec!["total".to_string()];
        for (i, &e) in engines.iter().enumerate() {
            row.push(num(totals[i], 2));
            if e == Engine::Corescan {
                row.push(String::new());
            }
        }
        if let Some(d) = engines.iter().position(|&e| e == Engine::Duckdb) {
            row.push(num(totals[0].zip(totals[d]).map(|(c, d)| c / d), 2));
        }
        table.row(row);
        md.push_str(&format!("\n## {cache}\n\n{}", table.render()));
    }
    md
}

fn chart(queries: &[&TpchQuery], engines: &[Engine], mode: CacheMode, runs: &[Run]) -> LineChart {
    let labels: Vec<String> = queries.iter().map(|q| format!("Q{}", q.number)).collect();
    let series = engines
        .iter()
        .map(|&e| Series {
            label: e.label().to_string(),
            points: queries
                .iter()
                .enumerate()
                .filter_map(|(i, q)| {
                    median(runs, e, q.number, mode.name()).map(|p| Point { x: i as i32, ..p })
                })
                .collect(),
        })
        .collect();
    LineChart {
        title: format!(
            "TPC-H, {}: seconds per query (median, min-max)",
            mode.name()
        ),
        x_desc: "query".into(),
        y_desc: "seconds".into(),
        x_axis: XAxis::Categories(labels),
        series,
        note: Some("corescan sql: its scans' I/O path is in tpch.md next to every figure".into()),
    }
}
