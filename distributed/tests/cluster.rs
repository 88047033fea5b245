//! The distributed engine on one machine: two workers in this process, each listening on
//! 127.0.0.1 on a free port and serving its own data directory, and a coordinator over them.
//!
//! The data: TPC-H SF 0.01 (all eight tables) generated at test time, split into four shards
//! (`bench::shards`: LINEITEM and ORDERS by order key, the other tables in shard 0), laid out
//! as a sharded deployment would: worker A holds shards 1 and 3, worker B shard 2, and both
//! hold a replica of shard 0 (the same relative path: one file, read once). Every one of the
//! 22 queries must give the single-node answer: `corescan_datafusion` over the whole file.
//!
//! The same queries also run on an in-memory cluster: the two workers' gRPC services served on
//! in-process pipes instead of sockets (datafusion-distributed's in-memory pattern), the
//! catalogs read directly.
//!
//! Also: what a worker refuses (paths out of its directory), replicas that differ, a worker
//! that is not there, and the catalog a worker answers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bench::gen::{GenOptions, TableSelection};
use corescan_datafusion::datafusion;
use corescan_datafusion::datafusion::prelude::SessionContext;
use corescan_datafusion::{batch_rows, TableOptions};
use corescan_distributed::codec::{ScanNode, WorkerScans};
use corescan_distributed::{Cluster, CorescanWorker, DataDir, Error, WorkerConfig};
use engine::value::Value;
use engine::{Placement, ScanOptions};

/// A per-run scratch directory under `CARGO_TARGET_TMPDIR` (`name` is replaced if present).
fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("distributed-integration")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// The runtime the workers and the coordinator run on.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| corescan_datafusion::runtime(4).expect("a tokio runtime"))
}

/// The whole TPC-H file and the two workers' directories (see the module docs).
struct Deployment {
    whole: PathBuf,
    dirs: [PathBuf; 2],
}

fn deployment() -> &'static Deployment {
    static D: OnceLock<Deployment> = OnceLock::new();
    D.get_or_init(|| {
        let base = scratch_dir("tpch");
        let whole = base.join("tpch.db");
        let opts = GenOptions {
            out: whole.clone(),
            scale_factor: 0.01,
            page_size: 4096,
            tables: TableSelection::All,
            force: false,
        };
        bench::gen::generate(&opts, false).expect("generate the TPC-H file");
        std::fs::create_dir_all(base.join("shards")).unwrap();
        let shards = bench::shards::split(&whole, &base.join("shards/t.db"), 4, 4096, true)
            .expect("split into shards");
        let dirs = [base.join("worker-a"), base.join("worker-b")];
        for (d, mine) in dirs.iter().zip([&[0usize, 1, 3][..], &[0, 2][..]]) {
            std::fs::create_dir_all(d.join("tpch")).unwrap();
            for &k in mine {
                let name = shards[k].file_name().unwrap();
                std::fs::copy(&shards[k], d.join("tpch").join(name)).unwrap();
            }
        }
        Deployment { whole, dirs }
    })
}

/// Starts a worker serving `dir` on 127.0.0.1 (a free port), one executor; returns its
/// address and the task serving it (abort it to stop the worker).
fn start_worker(dir: &Path) -> (String, tokio::task::JoinHandle<Result<(), Error>>) {
    let worker = CorescanWorker::new(WorkerConfig {
        dir: DataDir::open(dir).expect("the data directory"),
        placement: Placement::Cores(1),
        options: ScanOptions::default(),
    })
    .expect("a worker");
    runtime().block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        (addr, tokio::spawn(worker.serve(listener)))
    })
}

/// The rows of `sql` over `cluster`, as SQLite values.
fn cluster_rows(cluster: &Cluster, sql: &str) -> Result<Vec<Vec<Value>>, String> {
    runtime().block_on(async {
        let planned = cluster.plan(sql).await.map_err(|e| e.to_string())?;
        if planned.isolated {
            eprintln!("isolated scans: {sql}");
        }
        let batches = datafusion::physical_plan::collect(planned.plan, planned.task)
            .await
            .map_err(|e| e.to_string())?;
        Ok(batches.iter().flat_map(batch_rows).collect())
    })
}

/// The rows of `sql` on `ctx`, as SQLite values.
fn rows(ctx: &SessionContext, sql: &str) -> Result<Vec<Vec<Value>>, String> {
    runtime().block_on(async {
        let batches = ctx
            .sql(sql)
            .await
            .map_err(|e| e.to_string())?
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok(batches.iter().flat_map(batch_rows).collect())
    })
}

/// Whether two answers' values agree: exactly, except doubles (summed in another order over
/// the network's partitions) within 1e-9 of their size.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Real(x), Value::Real(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
        _ => a == b,
    }
}

/// Rows sorted by their printed form (for Q11, whose ORDER BY ties).
fn sorted(mut rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    rows.sort_by_key(|r| format!("{r:?}"));
    rows
}

/// A single-node session over the whole TPC-H file: the answers to compare with.
fn one_node(whole: &Path) -> SessionContext {
    let local = corescan_datafusion::context();
    corescan_datafusion::register(&local, whole, Placement::Cores(2), ScanOptions::default())
        .expect("the whole file");
    local
}

/// Asserts that every TPC-H query over `cluster` gives `local`'s answer (`how` names the
/// cluster in messages).
fn assert_tpch_answers_equal(cluster: &Cluster, local: &SessionContext, how: &str) {
    for q in corescan_datafusion::tpch::QUERIES {
        let ours = cluster_rows(cluster, q.datafusion)
            .unwrap_or_else(|e| panic!("Q{} {how}: {e}", q.number));
        let theirs =
            rows(local, q.datafusion).unwrap_or_else(|e| panic!("Q{} local: {e}", q.number));
        let (ours, theirs) = if q.totally_ordered {
            (ours, theirs)
        } else {
            (sorted(ours), sorted(theirs))
        };
        assert_eq!(ours.len(), theirs.len(), "Q{} {how}: row counts", q.number);
        assert!(
            !ours.is_empty() || q.number == 20 || q.number == 21,
            "Q{}: no rows",
            q.number
        );
        for (i, (x, y)) in ours.iter().zip(&theirs).enumerate() {
            let equal = x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q));
            assert!(
                equal,
                "Q{} row {i} {how}:\n  distributed {x:?}\n  one node    {y:?}",
                q.number
            );
        }
    }
}

#[test]
fn all_22_tpch_queries_over_two_workers_give_the_single_node_answers() {
    let d = deployment();
    let (a, worker_a) = start_worker(&d.dirs[0]);
    let (b, worker_b) = start_worker(&d.dirs[1]);
    let cluster = runtime()
        .block_on(Cluster::connect(&[a, b], TableOptions::default()))
        .expect("connect to the workers");
    let mut names: Vec<String> = cluster
        .table_names()
        .iter()
        .map(|n| n.to_ascii_lowercase())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"]
    );
    let local = one_node(&d.whole);
    // The replicated shard is read once: the counts are the whole file's.
    assert_eq!(
        cluster_rows(&cluster, "SELECT count(*) FROM lineitem").unwrap(),
        rows(&local, "SELECT count(*) FROM lineitem").unwrap()
    );
    assert_eq!(
        cluster_rows(&cluster, "SELECT count(*), sum(n_nationkey) FROM nation").unwrap(),
        vec![vec![Value::Integer(25), Value::Integer(300)]]
    );
    assert_tpch_answers_equal(&cluster, &local, "over two workers");
    // The plan names the scans and their workers' stages.
    let plan = runtime()
        .block_on(cluster.plan("SELECT l_returnflag, count(*) FROM lineitem GROUP BY l_returnflag"))
        .unwrap()
        .plan;
    let text = corescan_distributed::cluster::display(&plan);
    assert!(text.contains("CorescanExec"), "{text}");
    assert!(text.contains("on workers"), "{text}");
    worker_a.abort();
    worker_b.abort();
}

#[test]
fn one_worker_runs_every_scan_and_the_coordinator_none() {
    let d = deployment();
    let (a, worker) = start_worker(&d.dirs[0]);
    let cluster = runtime()
        .block_on(Cluster::connect(&[a], TableOptions::default()))
        .expect("connect");
    // Worker A holds shards 0, 1 and 3: ORDERS without shard 2's orders.
    let local = corescan_datafusion::context();
    let whole: Vec<PathBuf> = ["t-0.db", "t-1.db", "t-3.db"]
        .iter()
        .map(|f| d.dirs[0].join("tpch").join(f))
        .collect();
    corescan_datafusion::register_files(
        &local,
        &whole,
        Placement::Cores(1),
        ScanOptions::default(),
        TableOptions::default(),
    )
    .unwrap();
    for sql in [
        "SELECT count(*), sum(o_totalprice) FROM orders",
        "SELECT o_orderpriority, count(*) FROM orders GROUP BY 1 ORDER BY 1",
        "SELECT o_orderkey FROM orders ORDER BY o_totalprice DESC, o_orderkey LIMIT 3",
        // Rows the query carries itself (a VALUES list) join the scans on the workers.
        "SELECT v.w, count(*) FROM orders JOIN (VALUES ('1-URGENT', 1), ('5-LOW', 5)) AS v(p, w) \
         ON o_orderpriority = v.p GROUP BY v.w ORDER BY v.w",
    ] {
        assert_eq!(
            cluster_rows(&cluster, sql).unwrap(),
            rows(&local, sql).unwrap(),
            "{sql}"
        );
    }
    worker.abort();
}

#[test]
fn a_worker_that_is_not_there_is_a_clear_error_at_once() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
        // Closed here: nothing listens on it.
    };
    let start = Instant::now();
    let e = runtime()
        .block_on(Cluster::connect(
            &[format!("127.0.0.1:{port}")],
            TableOptions::default(),
        ))
        .unwrap_err()
        .to_string();
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(e.contains(&format!("worker 127.0.0.1:{port}")), "{e}");
    assert!(e.contains("cannot connect"), "{e}");
}

#[test]
fn replicas_that_differ_are_refused() {
    let base = scratch_dir("replicas");
    for (d, rows) in [("a", 1), ("b", 500)] {
        let dir = base.join(d);
        std::fs::create_dir_all(&dir).unwrap();
        let c = rusqlite::Connection::open(dir.join("same.db")).unwrap();
        c.execute_batch("CREATE TABLE t(x)").unwrap();
        for i in 0..rows {
            c.execute("INSERT INTO t VALUES (?1)", [format!("{i:0100}")])
                .unwrap();
        }
    }
    let (a, wa) = start_worker(&base.join("a"));
    let (b, wb) = start_worker(&base.join("b"));
    let e = runtime()
        .block_on(Cluster::connect(&[a, b], TableOptions::default()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("same.db") && e.contains("replicas"), "{e}");
    wa.abort();
    wb.abort();
}

#[test]
fn a_worker_refuses_paths_outside_its_directory() {
    let base = scratch_dir("refuse");
    let dir = base.join("data");
    std::fs::create_dir_all(&dir).unwrap();
    for p in [dir.join("in.db"), base.join("out.db")] {
        rusqlite::Connection::open(&p)
            .unwrap()
            .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
    }
    std::os::unix::fs::symlink(base.join("out.db"), dir.join("link.db")).unwrap();
    let scans = WorkerScans {
        dir: Arc::new(DataDir::open(&dir).unwrap()),
        executors: engine::placement::resolve(&Placement::Cores(1), &ScanOptions::default(), 4096)
            .unwrap()
            .0,
        options: ScanOptions::default(),
    };
    let node = |file: &str| ScanNode {
        table: "t".into(),
        files: vec![file.to_string()],
        definition: vec!["CREATE TABLE t(x)".into()],
        scan_columns: vec!["rowid".into(), "x".into()],
        columns: vec![("x".into(), corescan_datafusion::ColumnType::Int64)],
        rowid_first: true,
        filter: None,
        limit: None,
        rows: 1,
        row_bytes: 8,
        partitions: 1,
    };
    assert!(scans.plan(node("in.db")).is_ok());
    let outside = base.join("out.db").to_string_lossy().into_owned();
    for bad in [
        "../out.db",
        outside.as_str(),
        "link.db",
        "./in.db",
        "nothere.db",
    ] {
        let e = scans.plan(node(bad)).unwrap_err();
        assert!(matches!(e, Error::Refused { .. }), "{bad}: {e}");
    }
    // Only the files under the directory are in its catalog.
    let catalog = corescan_distributed::catalog::read_catalog(&scans.dir, 1).unwrap();
    let files: Vec<&str> = catalog.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(files, ["in.db"]);
    assert_eq!(catalog.files[0].tables[0].name, "t");
}

/// Channels to workers served on in-process pipes, one pipe per worker, shared by the
/// coordinator and the workers (a shuffle's inputs come from the other worker).
#[derive(Clone, Default)]
struct InMemory {
    routes: Arc<OnceLock<std::collections::HashMap<String, tonic::service::Routes>>>,
    open: Arc<std::sync::Mutex<std::collections::HashMap<String, tonic::transport::Channel>>>,
}

#[async_trait::async_trait]
impl datafusion_distributed::ChannelResolver for InMemory {
    async fn get_worker_client_for_url(
        &self,
        url: &url::Url,
    ) -> Result<Box<dyn datafusion_distributed::WorkerChannel>, datafusion::error::DataFusionError>
    {
        use datafusion_distributed::grpc::{create_worker_client, BoxCloneSyncChannel};
        let host = url.host_str().unwrap_or_default().to_string();
        let known = self.open.lock().unwrap().get(&host).cloned();
        if let Some(channel) = known {
            return Ok(create_worker_client(BoxCloneSyncChannel::new(channel)));
        }
        let routes = self
            .routes
            .get()
            .and_then(|r| r.get(&host))
            .cloned()
            .ok_or_else(|| {
                datafusion::error::DataFusionError::Execution(format!("no worker {host}"))
            })?;
        let (client, server) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_routes(routes)
                .serve_with_incoming(futures::stream::once(async move {
                    Ok::<_, std::io::Error>(server)
                }))
                .await
        });
        let mut client = Some(client);
        let channel = tonic::transport::Endpoint::try_from(url.to_string())
            .map_err(|e| datafusion::error::DataFusionError::Execution(e.to_string()))?
            .connect_with_connector_lazy(tower::service_fn(move |_| {
                let pipe = client.take();
                async move {
                    pipe.map(hyper_util::rt::TokioIo::new)
                        .ok_or_else(|| std::io::Error::other("the pipe is taken"))
                }
            }));
        self.open.lock().unwrap().insert(host, channel.clone());
        Ok(create_worker_client(BoxCloneSyncChannel::new(channel)))
    }
}

#[test]
fn an_in_memory_cluster_answers_the_22_queries_as_one_node() {
    let d = deployment();
    let pipes = InMemory::default();
    let mut routes = std::collections::HashMap::new();
    let mut workers = Vec::new();
    for (name, dir) in ["worker-a", "worker-b"].into_iter().zip(&d.dirs) {
        let worker = CorescanWorker::new(WorkerConfig {
            dir: DataDir::open(dir).unwrap(),
            placement: Placement::Cores(1),
            options: ScanOptions::default(),
        })
        .unwrap();
        routes.insert(name.to_string(), worker.routes(pipes.clone()));
        workers.push(corescan_distributed::WorkerInfo {
            url: url::Url::parse(&format!("http://{name}:50051")).unwrap(),
            catalog: worker.catalog().unwrap(),
        });
    }
    assert!(pipes.routes.set(routes).is_ok());
    let cluster = Cluster::from_workers(workers, TableOptions::default())
        .unwrap()
        .with_channels(pipes);
    assert_tpch_answers_equal(&cluster, &one_node(&d.whole), "in memory");
}
