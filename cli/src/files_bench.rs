//! `corescan bench files DIR`: one table over many files against the same rows in one file.
//! TPC-H `LINEITEM` at `--scale-factor` is generated once into `DIR/whole.db` and split by
//! order key into `--files` shards (`DIR/shard-*.db`, [`bench::shards`]; both kept for the
//! next run), then a grouped aggregate over all of it is timed, warm and (with `--cold`) cold,
//! in interleaved rounds:
//!
//! - `corescan query` over the shards (a glob) and over the one file: whole processes; the
//!   shards' run reports the planning of each file on its executor (open, header, schema, read
//!   locks, the top of the b-tree), mean and maximum;
//! - `sqlite3` over the one file, a loop of one `sqlite3` process per shard, and `sqlite3`
//!   processes each attaching as many shards as its build allows (its `MAX_ATTACHED`: SQLite's
//!   ceiling is 125, Debian's shell is built with 10) and reading their union.
//!
//! The two corescan answers must be the same text, or the benchmark fails. Writes `files.md`
//! (medians, ratios to corescan over the one file, the per-file figures and which I/O path
//! ran) and `files.json` (every run).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context};
use bench::experiments::machine::Machine;
use bench::experiments::markdown::{num, Table};
use bench::experiments::peers::probe_sqlite3;
use bench::experiments::{default_out_dir, drop_page_cache, warm_file, CacheMode};
use bench::gen::{GenOptions, TableSelection};
use clap::Args;
use serde::Serialize;

/// The query every engine runs: TPC-H Q1's grouping with counts and sums.
const SQL: &str = "SELECT l_returnflag, l_linestatus, count(*), sum(l_quantity), \
                   sum(l_extendedprice), max(l_shipdate) FROM lineitem \
                   WHERE l_shipdate <= '1998-09-02' GROUP BY l_returnflag, l_linestatus \
                   ORDER BY l_returnflag, l_linestatus";

/// Arguments of `corescan bench files`.
#[derive(Debug, Args)]
pub struct FilesArgs {
    /// Where the files are generated (and found again by later runs).
    dir: PathBuf,
    /// How many shard files.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(2..=100_000))]
    files: u32,
    /// TPC-H scale factor of the rows (1: about 6 million line items, 1 MB per shard of 1,000).
    #[arg(long, short = 's', default_value_t = 1.0)]
    scale_factor: f64,
    /// Timed runs of each engine (interleaved); the median is reported.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Also run cold (the page cache emptied before every run).
    #[arg(long)]
    cold: bool,
    /// Leave sqlite3 out.
    #[arg(long)]
    no_peers: bool,
    /// Options passed to every `corescan query` run (e.g. "--cores 1").
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    corescan_args: Option<String>,
    /// Where the results go (default: corescan-results/files-<UTC time>).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// What ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Engine {
    CorescanFiles,
    CorescanOne,
    Sqlite3One,
    Sqlite3Loop,
    Sqlite3Attach,
}

impl Engine {
    fn label(self, attach: usize) -> String {
        match self {
            Engine::CorescanFiles => "corescan query, the shards (a glob)".into(),
            Engine::CorescanOne => "corescan query, the one file".into(),
            Engine::Sqlite3One => "sqlite3, the one file".into(),
            Engine::Sqlite3Loop => "sqlite3, one process per shard".into(),
            Engine::Sqlite3Attach => format!("sqlite3, {attach} shards attached per process"),
        }
    }
}

/// One timed run.
#[derive(Debug, Clone, Serialize)]
struct Run {
    engine: Engine,
    cache: &'static str,
    round: u32,
    seconds: f64,
    /// corescan's planning per file, mean and maximum (µs), and its I/O path.
    plan_us_mean: Option<f64>,
    plan_us_max: Option<f64>,
    io: Option<String>,
    /// Processes started.
    processes: usize,
}

/// Runs `corescan bench files`.
pub fn run(args: FilesArgs) -> anyhow::Result<()> {
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let n = args.files as usize;
    let (whole, shards) = prepare(&args.dir, n, args.scale_factor)?;
    let out = args.out.clone().unwrap_or_else(|| default_out_dir("files"));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let pattern = format!("{}/shard-*.db", args.dir.display());
    let extra: Vec<String> = args
        .corescan_args
        .as_deref()
        .map(|a| a.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let sqlite3 = if args.no_peers {
        None
    } else {
        probe_sqlite3().ok()
    };
    let attach = sqlite3.as_ref().map_or(0, |_| max_attached());
    let mut engines = vec![Engine::CorescanFiles, Engine::CorescanOne];
    if sqlite3.is_some() {
        engines.extend([
            Engine::Sqlite3One,
            Engine::Sqlite3Loop,
            Engine::Sqlite3Attach,
        ]);
    }
    // The two corescan answers agree, or nothing is timed.
    let files_answer = corescan(&pattern, &extra)?.0;
    let one_answer = corescan(&whole.display().to_string(), &extra)?.0;
    if files_answer != one_answer {
        bail!(
            "corescan over the shards answered\n{files_answer}\nbut over the one file\n{one_answer}"
        );
    }
    let modes = if args.cold {
        vec![CacheMode::Warm, CacheMode::Cold]
    } else {
        vec![CacheMode::Warm]
    };
    let mut all: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    all.push(&whole);
    let mut runs = Vec::new();
    for &mode in &modes {
        if mode == CacheMode::Warm {
            for f in &all {
                warm_file(f)?;
            }
        }
        for round in 1..=args.rounds {
            for &engine in &engines {
                if mode == CacheMode::Cold {
                    drop_page_cache(&all)?;
                }
                let started = Instant::now();
                let (mut plan_us_mean, mut plan_us_max, mut io) = (None, None, None);
                let processes = match engine {
                    Engine::CorescanFiles | Engine::CorescanOne => {
                        let target = if engine == Engine::CorescanFiles {
                            pattern.clone()
                        } else {
                            whole.display().to_string()
                        };
                        let (_, report) = corescan(&target, &extra)?;
                        let files = &report["files"];
                        plan_us_mean = files["plan_s_mean"].as_f64().map(|s| s * 1e6);
                        plan_us_max = files["plan_s_max"].as_f64().map(|s| s * 1e6);
                        io = report["io"]["backend"].as_str().map(str::to_string);
                        1
                    }
                    Engine::Sqlite3One => {
                        sqlite3_run(&[&whole], SQL)?;
                        1
                    }
                    Engine::Sqlite3Loop => {
                        for s in &shards {
                            sqlite3_run(&[s], SQL)?;
                        }
                        shards.len()
                    }
                    Engine::Sqlite3Attach => {
                        for batch in shards.chunks(attach.max(1)) {
                            let refs: Vec<&PathBuf> = batch.iter().collect();
                            sqlite3_attached(&refs)?;
                        }
                        shards.len().div_ceil(attach.max(1))
                    }
                };
                let seconds = started.elapsed().as_secs_f64();
                eprintln!(
                    "{} round {round} {:<44} {seconds:.3} s",
                    mode.name(),
                    engine.label(attach)
                );
                runs.push(Run {
                    engine,
                    cache: mode.name(),
                    round,
                    seconds,
                    plan_us_mean,
                    plan_us_max,
                    io,
                    processes,
                });
            }
        }
    }
    let machine = Machine::probe(&whole);
    let md = markdown(
        &args,
        &runs,
        &engines,
        attach,
        &machine,
        sqlite3.as_deref(),
        &one_answer,
    );
    std::fs::write(out.join("files.md"), md).context("writing files.md")?;
    let json = serde_json::json!({ "machine": machine, "files": n, "sql": SQL, "runs": runs });
    std::fs::write(out.join("files.json"), serde_json::to_string_pretty(&json)?)
        .context("writing files.json")?;
    println!("wrote {}", out.join("files.md").display());
    Ok(())
}

/// The whole file and the shards in `dir`, generated when missing (or when the shard count
/// differs).
fn prepare(dir: &Path, n: usize, sf: f64) -> anyhow::Result<(PathBuf, Vec<PathBuf>)> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let whole = dir.join("whole.db");
    if !whole.exists() {
        eprintln!("generating {} (SF {sf}, LINEITEM)", whole.display());
        let opts = GenOptions {
            out: whole.clone(),
            scale_factor: sf,
            page_size: 4096,
            tables: TableSelection::Lineitem,
            force: false,
        };
        bench::gen::generate(&opts, true)?;
    }
    let out = dir.join("shard.db");
    let shards: Vec<PathBuf> = (0..n)
        .map(|k| bench::shards::shard_path(&out, k, n))
        .collect();
    let present = partitioner::sources::expand(&[format!("{}/shard-*.db", dir.display())])
        .unwrap_or_default();
    if present != shards {
        for p in present {
            std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
        }
        eprintln!("splitting it into {n} shards");
        bench::shards::split(&whole, &out, n, 4096, true)?;
    }
    Ok((whole, shards))
}

/// `corescan query` over `target` (a path or a glob): its CSV answer and its report.
fn corescan(target: &str, extra: &[String]) -> anyhow::Result<(String, serde_json::Value)> {
    let exe = std::env::current_exe().context("finding the corescan binary")?;
    let out = Command::new(exe)
        .arg("query")
        .args(extra)
        .args(["--format", "jsonl", "--report", target, SQL])
        .output()
        .context("running corescan query")?;
    if !out.status.success() {
        bail!(
            "corescan query {target}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let report = serde_json::from_slice(&out.stderr)
        .with_context(|| format!("corescan query {target}: reading its report"))?;
    Ok((String::from_utf8_lossy(&out.stdout).into_owned(), report))
}

/// One `sqlite3` process running `sql` over `files` (more than one: attached, the query
/// over their union).
fn sqlite3_run(files: &[&Path], sql: &str) -> anyhow::Result<()> {
    let out = Command::new("sqlite3")
        .arg("-readonly")
        .arg(files[0])
        .arg(sql)
        .output()
        .context("running sqlite3")?;
    if !out.status.success() {
        bail!(
            "sqlite3 {}: {}",
            files[0].display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// One `sqlite3` process attaching `files` and grouping their union.
fn sqlite3_attached(files: &[&PathBuf]) -> anyhow::Result<()> {
    let mut script = String::new();
    let mut parts = Vec::new();
    for (i, f) in files.iter().enumerate() {
        script.push_str(&format!(
            "ATTACH '{}' AS s{i};\n",
            f.display().to_string().replace('\'', "''")
        ));
        parts.push(format!("SELECT * FROM s{i}.lineitem"));
    }
    script.push_str(&SQL.replace(
        "FROM lineitem",
        &format!("FROM ({})", parts.join(" UNION ALL ")),
    ));
    script.push_str(";\n");
    let out = Command::new("sqlite3")
        .args([":memory:", &script])
        .output()
        .context("running sqlite3")?;
    if !out.status.success() {
        bail!(
            "sqlite3 with {} attached: {}",
            files.len(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// How many databases the `sqlite3` shell can attach (its build's `MAX_ATTACHED`, 10 unless
/// set at compile time; at most 125).
fn max_attached() -> usize {
    Command::new("sqlite3")
        .args([":memory:", "PRAGMA compile_options"])
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("MAX_ATTACHED=")?.trim().parse().ok())
        })
        .unwrap_or(10)
}

/// The median of the `engine`'s runs in `cache` mode.
fn median(
    runs: &[Run],
    engine: Engine,
    cache: &str,
    f: impl Fn(&Run) -> Option<f64>,
) -> Option<f64> {
    let mut v: Vec<f64> = runs
        .iter()
        .filter(|r| r.engine == engine && r.cache == cache)
        .filter_map(f)
        .collect();
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| v[v.len() / 2])
}

fn markdown(
    args: &FilesArgs,
    runs: &[Run],
    engines: &[Engine],
    attach: usize,
    machine: &Machine,
    sqlite3: Option<&str>,
    answer: &str,
) -> String {
    let mut s = format!(
        "# One table over {} files against one file\n\n{}\n\nTPC-H `LINEITEM` at SF {} in `{}`: \
         `whole.db`, and the same rows split by order key into {} shards. The query (every \
         engine, whole processes, median of {} rounds; ratios to corescan over the one file in \
         the same run):\n\n```sql\n{SQL}\n```\n\n",
        args.files,
        machine.markdown(),
        args.scale_factor,
        args.dir.display(),
        args.files,
        args.rounds
    );
    for cache in ["warm", "cold"] {
        if !runs.iter().any(|r| r.cache == cache) {
            continue;
        }
        let base = median(runs, Engine::CorescanOne, cache, |r| Some(r.seconds));
        let mut t = Table::new(&["engine", "processes", "median s", "ratio", "I/O path"]);
        for &e in engines {
            let m = median(runs, e, cache, |r| Some(r.seconds));
            let processes = runs
                .iter()
                .find(|r| r.engine == e)
                .map_or(0, |r| r.processes);
            let io = runs
                .iter()
                .find(|r| r.engine == e && r.cache == cache)
                .and_then(|r| r.io.clone())
                .unwrap_or_else(|| "SQLite's pager (buffered reads)".into());
            t.row(vec![
                e.label(attach),
                processes.to_string(),
                num(m, 3),
                num(m.zip(base).map(|(m, b)| m / b), 2),
                io,
            ]);
        }
        s.push_str(&format!("## {cache}\n\n{}\n", t.render()));
        let mean = median(runs, Engine::CorescanFiles, cache, |r| r.plan_us_mean);
        let max = median(runs, Engine::CorescanFiles, cache, |r| r.plan_us_max);
        s.push_str(&format!(
            "Planning each file on its executor (open, header, schema, read locks, the top of \
             the b-tree), {cache}: {} µs mean, {} µs at most (medians over the rounds).\n\n",
            num(mean, 1),
            num(max, 1)
        ));
    }
    s.push_str(&format!(
        "sqlite3: {}. The answer (the same from both corescan runs):\n\n```\n{answer}```\n",
        sqlite3.unwrap_or("not run")
    ));
    s
}
