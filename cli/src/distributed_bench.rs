//! `corescan bench distributed DB`: the 22 TPC-H queries through `corescan sql` on this
//! machine, and through `corescan sql --workers` over `corescan worker` processes serving
//! shards of the same data: one worker of two executors (the same CPUs as the local run: what
//! distribution itself costs), one worker of one executor, and two workers of one executor
//! each on two CPUs (two machines of one core). Writes `distributed.md` (medians, the cost of
//! distribution per query, a model of the time on N machines) and `distributed.json` (every
//! run).
//!
//! The shards: DB split with `bench::shards` (LINEITEM and ORDERS by order key, the other
//! tables in shard 0) into `--shards N` files beside the results, linked into one directory
//! for the single worker and into two for the pair (shard 0, which holds the small tables, in
//! both: a replica). What is timed, warm, in this process: local, registering the file to the
//! last batch; distributed, asking the workers for their catalogs (`connect`), planning, and
//! running to the last batch, each measured.
//!
//! Each worker process is confined to its CPUs as a whole (its DataFusion threads too), so
//! that a worker of one CPU stands for a machine of one core; the coordinator (this process)
//! is not confined and shares the CPUs with them.
//!
//! The model: with one worker of one core (`t1`) and two workers of one core each (`t2`), a
//! query's time is `c + w / N` on N such machines, where `w = 2 (t1 - t2)` is the work the
//! workers share and `c = t1 - w` what does not shrink (planning, the catalog, the
//! coordinator's last stage, the exchanges' fixed costs).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use bench::experiments::machine::Machine;
use bench::experiments::markdown::{num, Table};
use bench::experiments::{default_out_dir, warm_file};
use clap::Args;
use corescan_datafusion::datafusion::physical_plan::collect;
use corescan_datafusion::tpch::TpchQuery;
use corescan_datafusion::TableOptions;
use corescan_distributed::Cluster;
use engine::{Placement, ScanOptions};
use serde::Serialize;

/// Arguments of `corescan bench distributed`.
#[derive(Debug, Args)]
pub struct DistributedArgs {
    /// A TPC-H database (`corescan gen DB --tables all`).
    db: PathBuf,
    /// Timed runs of each query in each setup (interleaved); the median is reported.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// The queries to run, e.g. `1,6,21` (all 22 by default).
    #[arg(long, value_delimiter = ',')]
    queries: Vec<u32>,
    /// Shards the data is split into for the workers (kept beside the results and reused).
    #[arg(long, default_value_t = 4)]
    shards: usize,
    /// Where to write the results and the shards (default: corescan-results/distributed-...).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The setups compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
enum Setup {
    Local,
    OneWorkerTwoCores,
    OneWorkerOneCore,
    TwoWorkers,
}

impl Setup {
    const ALL: [Setup; 4] = [
        Setup::Local,
        Setup::OneWorkerTwoCores,
        Setup::OneWorkerOneCore,
        Setup::TwoWorkers,
    ];

    fn label(self) -> &'static str {
        match self {
            Setup::Local => "sql, local, 2 executors",
            Setup::OneWorkerTwoCores => "1 worker x 2 executors",
            Setup::OneWorkerOneCore => "1 worker x 1 executor",
            Setup::TwoWorkers => "2 workers x 1 executor",
        }
    }
}

/// One timed run.
#[derive(Debug, Serialize)]
struct Run {
    setup: Setup,
    query: u32,
    round: u32,
    /// The whole run, seconds.
    seconds: Option<f64>,
    /// Asking the workers for their catalogs (distributed setups).
    connect: Option<f64>,
    /// Planning.
    plan: Option<f64>,
    rows: Option<u64>,
    error: Option<String>,
}

/// A `corescan worker` process, killed on drop.
struct WorkerProcess {
    child: Child,
    addr: String,
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl WorkerProcess {
    fn start(dir: &Path, cpus: &[usize]) -> anyhow::Result<WorkerProcess> {
        use std::io::BufRead;
        let exe = std::env::current_exe().context("finding this program")?;
        let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
        let mut child = Command::new(exe)
            .args([
                "worker",
                "--listen",
                "127.0.0.1:0",
                "--cpus",
                &list.join(","),
            ])
            .arg("--data")
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .pre_exec_die_with_parent()
            .pre_exec_pinned(cpus)
            .spawn()
            .context("starting corescan worker")?;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().context("the worker's stdout")?)
            .read_line(&mut line)
            .context("reading the worker's first line")?;
        let addr = line
            .strip_prefix("corescan worker listening on ")
            .and_then(|rest| rest.split(": ").next())
            .map(str::to_string);
        match addr {
            Some(addr) => Ok(WorkerProcess { child, addr }),
            None => {
                let _ = child.kill();
                bail!("the worker did not start: {line:?}")
            }
        }
    }
}

/// Runs `corescan bench distributed`.
pub fn run(args: DistributedArgs) -> anyhow::Result<()> {
    let queries = crate::tpch_bench::selected(&args.queries)?;
    if args.rounds == 0 || args.shards < 2 {
        bail!("--rounds must be at least 1 and --shards at least 2");
    }
    let cpus = engine::placement::resolve(&Placement::AllCpus, &ScanOptions::default(), 4096)?
        .0
        .iter()
        .map(|e| e.cpu)
        .collect::<Vec<_>>();
    if cpus.len() < 2 {
        bail!("the benchmark needs two CPUs (one per worker of the pair)");
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir("distributed"));
    let (all, pair) = lay_out(&args.db, &out.join("shards"), args.shards)?;
    let runtime = corescan_datafusion::runtime(2).context("starting DataFusion's runtime")?;
    let one_two = WorkerProcess::start(&all, &cpus[..2])?;
    let one_one = WorkerProcess::start(&all, &cpus[..1])?;
    let pair_a = WorkerProcess::start(&pair[0], &cpus[..1])?;
    let pair_b = WorkerProcess::start(&pair[1], &cpus[1..2])?;
    let workers = |setup: Setup| -> Vec<String> {
        match setup {
            Setup::Local => Vec::new(),
            Setup::OneWorkerTwoCores => vec![one_two.addr.clone()],
            Setup::OneWorkerOneCore => vec![one_one.addr.clone()],
            Setup::TwoWorkers => vec![pair_a.addr.clone(), pair_b.addr.clone()],
        }
    };
    warm_file(&args.db)?;
    for entry in std::fs::read_dir(out.join("shards"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "db") {
            warm_file(&path)?;
        }
    }
    let mut runs = Vec::new();
    for round in 0..=args.rounds {
        for q in &queries {
            for setup in Setup::ALL {
                let mut run = runtime.block_on(run_one(setup, q, &args.db, &workers(setup)));
                run.round = round;
                eprintln!(
                    "Q{:02} round {round} {:<24} {}",
                    q.number,
                    setup.label(),
                    run.seconds.map_or_else(
                        || run.error.clone().unwrap_or_default(),
                        |s| format!("{s:.3} s")
                    )
                );
                // Round 0 is a warm-up, not reported.
                if round > 0 {
                    runs.push(run);
                }
            }
        }
    }
    let md = markdown(&args, &queries, &runs, &Machine::probe(&args.db));
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("distributed.md"), md.as_bytes())?;
    std::fs::write(
        out.join("distributed.json"),
        serde_json::to_string_pretty(&serde_json::json!({
            "db": args.db, "rounds": args.rounds, "shards": args.shards, "runs": runs,
        }))?,
    )?;
    print!("{md}");
    eprintln!("results in {}", out.display());
    Ok(())
}

/// Splits `db` into `n` shards under `dir` (reusing them when present) and links them into
/// `dir/all` and `dir/a`, `dir/b` (shard 0 in both); returns the three directories.
fn lay_out(db: &Path, dir: &Path, n: usize) -> anyhow::Result<(PathBuf, [PathBuf; 2])> {
    std::fs::create_dir_all(dir)?;
    let out = dir.join("t.db");
    let shards: Vec<PathBuf> = (0..n)
        .map(|k| bench::shards::shard_path(&out, k, n))
        .collect();
    if !shards.iter().all(|s| s.exists()) {
        bench::shards::split(db, &out, n, 4096, true)?;
    }
    let all = dir.join("all");
    let pair = [dir.join("a"), dir.join("b")];
    for d in std::iter::once(&all).chain(&pair) {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d)?;
    }
    for (k, shard) in shards.iter().enumerate() {
        let name = shard.file_name().context("a shard's name")?;
        std::fs::hard_link(shard, all.join(name))?;
        if k == 0 || k % 2 == 1 {
            std::fs::hard_link(shard, pair[0].join(name))?;
        }
        if k == 0 || k % 2 == 0 {
            std::fs::hard_link(shard, pair[1].join(name))?;
        }
    }
    Ok((all, pair))
}

/// One run of `q` in `setup` (`workers` for the distributed ones).
async fn run_one(setup: Setup, q: &TpchQuery, db: &Path, workers: &[String]) -> Run {
    let mut run = Run {
        setup,
        query: q.number,
        round: 0,
        seconds: None,
        connect: None,
        plan: None,
        rows: None,
        error: None,
    };
    let start = Instant::now();
    let outcome: anyhow::Result<u64> = async {
        let (plan, task) = if setup == Setup::Local {
            let ctx = corescan_datafusion::context();
            corescan_datafusion::register_with(
                &ctx,
                db,
                Placement::Cores(2),
                ScanOptions::default(),
                TableOptions::default(),
            )?;
            let planning = Instant::now();
            let frame = ctx.sql(q.datafusion).await?;
            let task = Arc::new(frame.task_ctx());
            let plan = frame.create_physical_plan().await?;
            run.plan = Some(planning.elapsed().as_secs_f64());
            (plan, task)
        } else {
            let cluster = Cluster::connect(workers, TableOptions::default()).await?;
            run.connect = Some(start.elapsed().as_secs_f64());
            let planning = Instant::now();
            let planned = cluster.plan(q.datafusion).await?;
            run.plan = Some(planning.elapsed().as_secs_f64());
            (planned.plan, planned.task)
        };
        let batches = collect(plan, task).await?;
        Ok(batches.iter().map(|b| b.num_rows() as u64).sum())
    }
    .await;
    match outcome {
        Ok(rows) => {
            run.seconds = Some(start.elapsed().as_secs_f64());
            run.rows = Some(rows);
        }
        Err(e) => run.error = Some(format!("{e:#}")),
    }
    run
}

/// The median of `field` over `setup`'s runs of query `n`.
fn median(runs: &[Run], setup: Setup, n: u32, field: fn(&Run) -> Option<f64>) -> Option<f64> {
    let mut s: Vec<f64> = runs
        .iter()
        .filter(|r| r.setup == setup && r.query == n)
        .map(field)
        .collect::<Option<Vec<f64>>>()?;
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    Some(s[s.len() / 2])
}

fn markdown(
    args: &DistributedArgs,
    queries: &[&TpchQuery],
    runs: &[Run],
    machine: &Machine,
) -> String {
    let mut md = format!(
        "# TPC-H through `corescan sql` and through `corescan sql --workers`\n\n{}\n\n\
         File: `{}`, split into {} shards for the workers (shard 0, with the small tables, on \
         both workers of the pair). Warm, medians of {} interleaved rounds after a warm-up \
         round, seconds, the whole query in this process (workers on 127.0.0.1). I/O: `auto` \
         on every scan (the files are in the page cache: `mmap`).\n\n",
        machine.markdown(),
        args.db.display(),
        args.shards,
        args.rounds,
    );
    let mut table = Table::new(&[
        "query",
        Setup::Local.label(),
        Setup::OneWorkerTwoCores.label(),
        "cost of distribution (s)",
        "of which catalog + planning (s)",
        Setup::OneWorkerOneCore.label(),
        Setup::TwoWorkers.label(),
        "1 -> 2 workers",
        "model: N = 4",
        "model: N = 16",
    ]);
    let seconds = |r: &Run| r.seconds;
    let overhead = |r: &Run| Some(r.connect? + r.plan?);
    let mut totals = [0.0f64; 4];
    for q in queries {
        let m: Vec<Option<f64>> = Setup::ALL
            .iter()
            .map(|&s| median(runs, s, q.number, seconds))
            .collect();
        for (t, v) in totals.iter_mut().zip(&m) {
            *t += v.unwrap_or(f64::NAN);
        }
        let (c, w) = match (m[2], m[3]) {
            (Some(t1), Some(t2)) => {
                let w = 2.0 * (t1 - t2);
                (Some(t1 - w), Some(w))
            }
            _ => (None, None),
        };
        let model = |n: f64| c.zip(w).map(|(c, w)| c + w / n);
        table.row(vec![
            format!("Q{}", q.number),
            num(m[0], 3),
            num(m[1], 3),
            num(m[1].zip(m[0]).map(|(d, l)| d - l), 3),
            num(
                median(runs, Setup::OneWorkerTwoCores, q.number, overhead),
                3,
            ),
            num(m[2], 3),
            num(m[3], 3),
            num(m[2].zip(m[3]).map(|(a, b)| a / b), 2),
            num(model(4.0), 3),
            num(model(16.0), 3),
        ]);
    }
    table.row(vec![
        "total".into(),
        num(Some(totals[0]), 2),
        num(Some(totals[1]), 2),
        num(Some(totals[1] - totals[0]), 2),
        String::new(),
        num(Some(totals[2]), 2),
        num(Some(totals[3]), 2),
        num(Some(totals[2] / totals[3]), 2),
        String::new(),
        String::new(),
    ]);
    md.push_str(&table.render());
    md.push_str(
        "\nThe cost of distribution is the one-worker run (the same two CPUs as the local \
         run) minus the local run: the catalog request, planning with the distributed \
         planner, serializing and shipping each stage's plan, and the Arrow batches crossing \
         the loopback network between the stages. The model (`c + w / N`, from the one-core \
         runs on one and two workers) assumes machines like these, files spread evenly, and \
         the coordinator's last stage and the exchanges not growing with N.\n",
    );
    md
}

/// A child process confined to `cpus` as a whole (its DataFusion threads too, not only its
/// pinned executors), so that a worker of one CPU stands for a machine of one core.
trait Pinned {
    fn pre_exec_pinned(&mut self, cpus: &[usize]) -> &mut Self;
}

impl Pinned for Command {
    fn pre_exec_pinned(&mut self, cpus: &[usize]) -> &mut Self {
        use std::os::unix::process::CommandExt;
        // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it; the closure
        // calls only sched_setaffinity, which is async-signal-safe.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &cpu in cpus {
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
        unsafe {
            self.pre_exec(move || {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        }
    }
}

/// A child process that the kernel kills when this process dies (`PR_SET_PDEATHSIG`), so a
/// worker never outlives a run stopped by a signal.
trait DieWithParent {
    fn pre_exec_die_with_parent(&mut self) -> &mut Self;
}

impl DieWithParent for Command {
    fn pre_exec_die_with_parent(&mut self) -> &mut Self {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            self.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        }
    }
}
