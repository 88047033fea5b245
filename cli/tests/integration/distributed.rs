//! `corescan worker` and `corescan sql --workers` as processes: two workers listening on
//! 127.0.0.1 on ports the system picks, the TPC-H tables split into shards between them (one
//! shard on both: a replica), and queries whose answers must be `corescan sql`'s over the
//! whole file; a worker killed mid-query, a worker that is not there, and the usage errors.
//! Every worker a test starts is killed when the test ends (`WorkerProcess`'s drop).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{corescan, scratch_dir, tiny_db, Run};

/// A running `corescan worker`, killed on drop.
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
    /// Starts a worker serving `dir` on one executor; waits for its first line (the address).
    fn start(dir: &Path) -> WorkerProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_corescan"))
            .args([
                "worker",
                "--listen",
                "127.0.0.1:0",
                "--cores",
                "1",
                "--data",
            ])
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .pre_exec_die_with_parent()
            .spawn()
            .expect("start corescan worker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the worker's first line");
        let addr = line
            .strip_prefix("corescan worker listening on ")
            .and_then(|rest| rest.split(": ").next())
            .map(str::to_string);
        match addr {
            Some(addr) => WorkerProcess { child, addr },
            None => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("the worker's output");
                panic!(
                    "worker did not start: {line:?} {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            }
        }
    }
}

/// The tiny TPC-H file split into three shards, as two workers' directories: A holds shards
/// 0 and 2, B shards 0 (a replica) and 1; in the scratch folder `name`.
fn deployment(name: &str) -> [PathBuf; 2] {
    let base = scratch_dir(name);
    std::fs::create_dir_all(base.join("shards")).unwrap();
    let shards = bench::shards::split(tiny_db(), &base.join("shards/t.db"), 3, 4096, true)
        .expect("split into shards");
    let dirs = [base.join("a"), base.join("b")];
    for (d, mine) in dirs.iter().zip([[0usize, 2], [0, 1]]) {
        std::fs::create_dir_all(d).unwrap();
        for k in mine {
            std::fs::copy(&shards[k], d.join(shards[k].file_name().unwrap())).unwrap();
        }
    }
    dirs
}

#[test]
fn queries_over_two_worker_processes_equal_the_answers_over_the_whole_file() {
    let dirs = deployment("distributed-queries");
    let (a, b) = (
        WorkerProcess::start(&dirs[0]),
        WorkerProcess::start(&dirs[1]),
    );
    let workers = format!("{},{}", a.addr, b.addr);
    let whole = tiny_db().to_str().unwrap();
    let mut answered = 0;
    for n in 1..=22 {
        let q = corescan_datafusion::tpch::query(n).expect("a TPC-H query");
        let ours = corescan([
            "sql",
            "--workers",
            &workers,
            q.datafusion,
            "--format",
            "csv",
        ]);
        assert_eq!(ours.status, 0, "Q{n}: {}", ours.stderr);
        let local = corescan(["sql", whole, q.datafusion, "--format", "csv"]);
        assert_eq!(local.status, 0, "Q{n}: {}", local.stderr);
        assert_eq!(ours.stdout, local.stdout, "Q{n}");
        answered += usize::from(local.stdout.lines().count() > 1);
    }
    // At this scale a few queries select no rows (Q7's nations, ...); most must have some.
    assert!(answered >= 15, "only {answered} queries have rows");
    // The plan shows the scans on the workers.
    let plan = corescan([
        "sql",
        "--workers",
        &workers,
        "SELECT count(*) FROM lineitem",
        "--explain",
    ]);
    assert_eq!(plan.status, 0, "{}", plan.stderr);
    assert!(plan.stdout.contains("CorescanExec"), "{}", plan.stdout);
    assert!(plan.stdout.contains("on workers"), "{}", plan.stdout);
    // --report: the stages with the metrics the workers sent back, after the rows.
    let run = corescan([
        "sql",
        "--workers",
        &workers,
        "SELECT l_returnflag, count(*) FROM lineitem GROUP BY 1 ORDER BY 1",
        "--format",
        "csv",
        "--report",
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("l_returnflag,count(*)\nA,"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains("Stage 1") && run.stderr.contains("output_rows="),
        "{}",
        run.stderr
    );
}

#[test]
fn a_worker_killed_mid_query_ends_it_with_one_error_line() {
    let dirs = deployment("distributed-kill");
    let a = WorkerProcess::start(&dirs[0]);
    let mut b = WorkerProcess::start(&dirs[1]);
    // A join whose output would take hours: it is still running when the worker dies.
    let sql = "SELECT count(*) FROM lineitem x JOIN lineitem y ON x.l_orderkey % 2 = \
               y.l_orderkey % 2 JOIN lineitem z ON y.l_orderkey % 2 = z.l_orderkey % 2";
    let coordinator = Command::new(env!("CARGO_BIN_EXE_corescan"))
        .args(["sql", "--workers", &format!("{},{}", a.addr, b.addr), sql])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the query");
    std::thread::sleep(Duration::from_secs(3));
    b.child.kill().expect("kill worker B");
    let killed = Instant::now();
    let out = wait_at_most(coordinator, Duration::from_secs(60));
    let waited = killed.elapsed();
    let run = Run {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    run.assert_error(&[]);
    assert!(
        waited < Duration::from_secs(30),
        "ended {waited:?} after the kill"
    );
}

/// Waits for `child`, killing it (and failing) after `limit`.
fn wait_at_most(mut child: Child, limit: Duration) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("the query did not end within {limit:?} of the worker's death");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("the query's output")
}

#[test]
fn a_worker_that_is_not_there_and_bad_usage_are_errors() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    corescan(["sql", "--workers", &addr, "SELECT 1"])
        .assert_error(&[&format!("worker {addr}"), "cannot connect"]);
    // Files and workers do not mix.
    corescan([
        "sql",
        "--workers",
        &addr,
        tiny_db().to_str().unwrap(),
        "SELECT 1",
    ])
    .assert_usage_error();
    let missing = scratch_dir("distributed-missing").join("no-such-dir");
    corescan([
        "worker",
        "--listen",
        "127.0.0.1:0",
        "--data",
        missing.to_str().unwrap(),
    ])
    .assert_error(&["data directory", "no-such-dir"]);
}

#[test]
fn a_scan_failing_on_a_worker_is_corescans_one_error_line() {
    let dir = scratch_dir("distributed-bad-value");
    let conn = rusqlite::Connection::open(dir.join("x.db")).unwrap();
    conn.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER, s TEXT);
         INSERT INTO t(n, s) VALUES (1, 'a'), ('oops', 'b');",
    )
    .unwrap();
    drop(conn);
    let w = WorkerProcess::start(&dir);
    corescan(["sql", "--workers", &w.addr, "SELECT sum(n) FROM t"])
        .assert_error(&["x.db", "column n", "rowid 2", "oops"]);
    // The other column reads.
    let run = corescan([
        "sql",
        "--workers",
        &w.addr,
        "SELECT s FROM t ORDER BY s",
        "--format",
        "csv",
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "s\na\nb\n");
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

#[test]
fn bench_distributed_writes_its_table_and_runs() {
    let out = scratch_dir("bench-distributed");
    let run = corescan([
        "bench",
        "distributed",
        tiny_db().to_str().unwrap(),
        "--queries",
        "1,6",
        "--rounds",
        "1",
        "--shards",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let md = std::fs::read_to_string(out.join("distributed.md")).expect("distributed.md");
    for needle in ["| Q1 | ", "| Q6 | ", "| total | ", "2 workers x 1 executor"] {
        assert!(md.contains(needle), "{needle} in {md}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("distributed.json")).unwrap())
            .unwrap();
    let runs = json["runs"].as_array().expect("runs");
    // Two queries, four setups, one reported round.
    assert_eq!(runs.len(), 8, "{json}");
    for r in runs {
        assert!(r["seconds"].as_f64().is_some_and(|s| s > 0.0), "{r}");
        // Every setup gives Q1's four groups and Q6's one row.
        let want = if r["query"] == 1 { 4 } else { 1 };
        assert_eq!(r["rows"], want, "{r}");
    }
}
