//! The coordinator: the tables of the files under every worker's directory, and a DataFusion
//! session that plans with datafusion-distributed and ships each file's scan to a worker that
//! holds it.
//!
//! [`Cluster::connect`] asks each worker for its catalog ([`crate::catalog`]). A file is its
//! path relative to a data directory: the same path on several workers is one file held in
//! replicas (their sizes must agree) and is read once, from one of them. A table is the union
//! of its rows over the files that hold it, in path order, its columns matched by name as for
//! many local files ([`crate::definition`]). Each table is a [`SqliteTable`] whose scans are
//! remote ([`ScanTarget::remote`]): the coordinator never opens a file.
//!
//! Planning: every stage that scans a corescan table runs on one task per worker (a single
//! worker is listed twice, so that the scan is still a stage of its own and never runs here;
//! its second task reads nothing). Task `i` reads the files the balancing gave worker `i`
//! (each file to the least loaded of the workers holding it, by bytes) and is routed to worker
//! `i`; every task has as many partitions as the smallest worker has executors. A stage whose
//! task count DataFusion's planner sets otherwise is refused, as is executing a remote scan
//! here. The joins, aggregations and sorts above the scans run where the distributed planner
//! puts them, across the workers and, for the last stage, here.
//!
//! Layering: above [`crate::codec`] and [`crate::catalog`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use corescan_datafusion::exec::{FilesTarget, ScanTarget};
use corescan_datafusion::{CorescanExec, SqliteTable, TableOptions};
use datafusion::catalog::SchemaProvider;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{plan_err, Result as DfResult};
use datafusion::config::ConfigOptions;
use datafusion::datasource::TableProvider;
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::TaskContext;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use datafusion_distributed::{
    ChannelResolver, DesiredTaskCountEvent, DesiredTaskCountEventResponse, DistributedExt,
    DistributedLeafExec, RouteTasksEvent, RouteTasksEventResponse, ScaleUpLeafNodeEvent,
    ScaleUpLeafNodeEventResponse, SessionStateBuilderExt, WorkerChannel, WorkerResolver,
};
use url::Url;

use crate::catalog::{fetch_catalog, WorkerCatalog};
use crate::channels::Channels;
use crate::codec::CorescanCodec;
use crate::definition::merge_definitions;
use crate::error::Error;

/// One worker as the coordinator knows it.
#[derive(Debug, Clone)]
pub struct WorkerInfo {
    /// Its address, `http://HOST:PORT`.
    pub url: Url,
    /// What it holds.
    pub catalog: WorkerCatalog,
}

/// Where the files are: by relative path, the workers holding it and its size.
#[derive(Debug, Default)]
struct Locations {
    holders: HashMap<String, Vec<usize>>,
    sizes: HashMap<String, u64>,
}

/// The workers and their tables (see the module docs).
#[derive(Debug)]
pub struct Cluster {
    workers: Vec<WorkerInfo>,
    /// The URL of each task slot: the workers in order (a single worker twice).
    slots: Arc<Vec<Url>>,
    locations: Arc<Locations>,
    definitions: Arc<HashMap<String, Arc<Vec<String>>>>,
    tables: HashMap<String, Arc<SqliteTable>>,
    /// The tables' names as the files spell them, in order of first appearance.
    names: Vec<String>,
    /// The channels to the workers ([`Channels`] unless set: [`Cluster::with_channels`]).
    channels: SharedChannels,
}

/// A channel resolver shared by every session of a cluster.
#[derive(Clone)]
struct SharedChannels(Arc<dyn ChannelResolver + Send + Sync>);

impl std::fmt::Debug for SharedChannels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedChannels")
    }
}

#[async_trait]
impl ChannelResolver for SharedChannels {
    async fn get_worker_client_for_url(
        &self,
        url: &Url,
    ) -> Result<Box<dyn WorkerChannel>, DataFusionError> {
        self.0.get_worker_client_for_url(url).await
    }
}

/// `addr` (`HOST:PORT`, or a URL) as a worker URL.
fn worker_url(addr: &str) -> Result<Url, Error> {
    let text = if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    };
    let url = Url::parse(&text).map_err(|e| Error::Worker {
        url: addr.to_string(),
        what: format!("not an address (HOST:PORT): {e}"),
    })?;
    if url.host_str().is_none() || url.port_or_known_default().is_none() {
        return Err(Error::Worker {
            url: addr.to_string(),
            what: "not an address (HOST:PORT)".into(),
        });
    }
    Ok(url)
}

impl Cluster {
    /// Asks the workers at `addrs` (`HOST:PORT` each) what they hold, and builds the tables
    /// with `table_options`.
    pub async fn connect(addrs: &[String], table_options: TableOptions) -> Result<Self, Error> {
        if addrs.is_empty() {
            return Err(Error::Cluster("no workers given".into()));
        }
        let urls = addrs
            .iter()
            .map(|a| worker_url(a.trim()))
            .collect::<Result<Vec<Url>, Error>>()?;
        let catalogs = futures::future::join_all(urls.iter().map(|u| async move {
            fetch_catalog(u.as_str().trim_end_matches('/'))
                .await
                .map_err(|e| match e {
                    Error::Worker { what, .. } => Error::Worker {
                        url: crate::channels::shown(u),
                        what,
                    },
                    other => other,
                })
        }))
        .await;
        let mut workers = Vec::new();
        for (url, catalog) in urls.into_iter().zip(catalogs) {
            workers.push(WorkerInfo {
                url,
                catalog: catalog?,
            });
        }
        Self::from_workers(workers, table_options)
    }

    /// The cluster of `workers`, whose catalogs are known.
    pub fn from_workers(
        workers: Vec<WorkerInfo>,
        table_options: TableOptions,
    ) -> Result<Self, Error> {
        let mut locations = Locations::default();
        // Each file once (its first holder's entry), in path order.
        let mut files: Vec<(&str, &crate::catalog::FileEntry)> = Vec::new();
        for (w, worker) in workers.iter().enumerate() {
            for f in &worker.catalog.files {
                match locations.sizes.get(&f.path) {
                    Some(&size) if size != f.size => {
                        let first = locations.holders[&f.path][0];
                        return Err(Error::Cluster(format!(
                            "{}: the copy on worker {} has {} bytes, the one on worker {} {}: \
                             replicas of one path must be the same file",
                            f.path,
                            crate::channels::shown(&workers[first].url),
                            size,
                            crate::channels::shown(&worker.url),
                            f.size
                        )));
                    }
                    Some(_) => {}
                    None => {
                        locations.sizes.insert(f.path.clone(), f.size);
                        files.push((&f.path, f));
                    }
                }
                locations.holders.entry(f.path.clone()).or_default().push(w);
            }
        }
        files.sort_by(|a, b| a.0.cmp(b.0));
        if files.is_empty() {
            return Err(Error::Cluster(
                "the workers hold no SQLite files under their data directories".into(),
            ));
        }
        // The tables: their files, definitions and rows, by lower-cased name.
        struct Gathered {
            name: String,
            paths: Vec<PathBuf>,
            sqls: Vec<String>,
            rows: usize,
        }
        let mut gathered: HashMap<String, Gathered> = HashMap::new();
        let mut names = Vec::new();
        for (path, f) in &files {
            for t in &f.tables {
                let key = t.name.to_ascii_lowercase();
                let g = gathered.entry(key).or_insert_with(|| {
                    names.push(t.name.clone());
                    Gathered {
                        name: t.name.clone(),
                        paths: Vec::new(),
                        sqls: Vec::new(),
                        rows: 0,
                    }
                });
                g.paths.push(PathBuf::from(path));
                if !g.sqls.contains(&t.sql) {
                    g.sqls.push(t.sql.clone());
                }
                g.rows = g.rows.saturating_add(t.rows);
            }
        }
        let partitions = workers
            .iter()
            .map(|w| w.catalog.executors)
            .min()
            .unwrap_or(1)
            .max(1);
        let mut tables = HashMap::new();
        let mut definitions = HashMap::new();
        for (key, g) in gathered {
            let definition = merge_definitions(&g.name, &g.sqls)?;
            let target = ScanTarget {
                path: g.paths[0].clone(),
                table: g.name.clone(),
                placement: engine::Placement::default(),
                options: engine::ScanOptions::default(),
                cpus: (0..partitions).collect(),
                backend: "the worker's".into(),
                file: None,
                files: Some(FilesTarget {
                    paths: Arc::new(g.paths),
                    definition: Arc::new(definition.clone()),
                }),
                remote: true,
            };
            let table =
                SqliteTable::from_definition(target, &definition, g.rows, table_options.clone())?;
            tables.insert(key.clone(), Arc::new(table));
            definitions.insert(key, Arc::new(g.sqls));
        }
        let mut slots: Vec<Url> = workers.iter().map(|w| w.url.clone()).collect();
        if slots.len() == 1 {
            slots.push(slots[0].clone());
        }
        Ok(Cluster {
            workers,
            slots: Arc::new(slots),
            locations: Arc::new(locations),
            definitions: Arc::new(definitions),
            tables,
            names,
            channels: SharedChannels(Arc::new(Channels::default())),
        })
    }

    /// The cluster reaching its workers through `channels` instead of TCP connections to
    /// their URLs (an in-memory cluster in tests).
    pub fn with_channels<C>(mut self, channels: C) -> Self
    where
        C: ChannelResolver + Send + Sync + 'static,
    {
        self.channels = SharedChannels(Arc::new(channels));
        self
    }

    /// The workers, in the order given.
    pub fn workers(&self) -> &[WorkerInfo] {
        &self.workers
    }

    /// The tables' names, as the first file holding each spells them.
    pub fn table_names(&self) -> &[String] {
        &self.names
    }

    /// A DataFusion session over the cluster's tables (see the module docs). Plan with
    /// [`Cluster::plan`], which falls back to scan-only distribution where the planner would
    /// put a scan in a stage of another task count.
    pub fn session(&self) -> Result<SessionContext, Error> {
        self.session_with(false)
    }

    /// `sql` planned over the cluster: first as datafusion-distributed distributes it (joins
    /// and aggregations across the workers), and where that leaves a scan in a stage that
    /// does not run one task per worker (a `NOT IN` subquery's build side, a single-partition
    /// plan the planner keeps here), again with every scan in a stage of its own whose
    /// batches the rest of the plan gathers (the scans still run on the workers holding the
    /// files; the operators above them run in one task).
    pub async fn plan(&self, sql: &str) -> DfResult<Planned> {
        for isolate in [false, true] {
            let ctx = self.session_with(isolate).map_err(Error::into_datafusion)?;
            let frame = ctx.sql(sql).await?;
            let names = frame
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            let task = Arc::new(frame.task_ctx());
            match frame.create_physical_plan().await {
                Ok(plan) if isolate || every_scan_distributed(&plan) => {
                    return Ok(Planned {
                        ctx,
                        plan,
                        task,
                        names,
                        isolated: isolate,
                    })
                }
                Ok(_) => continue,
                Err(e) if !isolate && e.to_string().contains(NOT_ONE_TASK_PER_WORKER) => continue,
                Err(e) => return Err(e),
            }
        }
        unreachable!("the second plan is returned")
    }

    /// The session, its scans isolated in stages of their own when `isolate`.
    fn session_with(&self, isolate: bool) -> Result<SessionContext, Error> {
        let slots = Arc::clone(&self.slots);
        let (scale_slots, route_slots) = (Arc::clone(&slots), Arc::clone(&slots));
        let locations = Arc::clone(&self.locations);
        let state = SessionStateBuilder::new()
            .with_config(corescan_datafusion::session::config())
            .with_default_features()
            .with_distributed_worker_resolver(Slots(Arc::clone(&slots)))
            .with_distributed_channel_resolver(self.channels.clone())
            .with_distributed_planner()
            .with_distributed_user_codec(CorescanCodec::coordinator(Arc::clone(&self.definitions)))
            .with_distributed_desired_task_count_handler(move |ev: DesiredTaskCountEvent| {
                remote_scan(ev.plan)?;
                Some(Ok(DesiredTaskCountEventResponse::desired(slots.len())))
            })
            .with_distributed_scale_up_leaf_node_handler(move |ev: ScaleUpLeafNodeEvent| {
                let exec = remote_scan(ev.plan)?;
                Some(scale_up(
                    ev.plan,
                    exec,
                    ev.task_count,
                    &scale_slots,
                    &locations,
                ))
            })
            .with_distributed_route_tasks_handler(move |ev: RouteTasksEvent| {
                route(&ev, &route_slots)
            });
        let state = if isolate {
            state.with_physical_optimizer_rule(Arc::new(IsolateScans))
        } else {
            state
        }
        .build();
        let ctx = SessionContext::from(state);
        let names = &ctx.state().config_options().catalog.clone();
        let catalog = ctx
            .catalog(&names.default_catalog)
            .ok_or_else(|| Error::Cluster(format!("no catalog {:?}", names.default_catalog)))?;
        catalog
            .register_schema(
                &names.default_schema,
                Arc::new(RemoteSchema {
                    tables: self.tables.clone(),
                    names: self.names.clone(),
                }),
            )
            .map_err(|e| Error::Cluster(e.to_string()))?;
        Ok(ctx)
    }
}

/// A query planned over the cluster ([`Cluster::plan`]).
pub struct Planned {
    /// The session it was planned in (keep it while the plan runs).
    pub ctx: SessionContext,
    /// The distributed plan.
    pub plan: Arc<dyn ExecutionPlan>,
    /// The context to execute it in.
    pub task: Arc<TaskContext>,
    /// The result's column names.
    pub names: Vec<String>,
    /// Whether the scans were put in stages of their own (the operators above them in one
    /// task), because the planner's own distribution left a scan elsewhere.
    pub isolated: bool,
}

/// The words of the planning error that makes [`Cluster::plan`] plan again with every scan
/// in a stage of its own.
const NOT_ONE_TASK_PER_WORKER: &str = "not one task per worker";

/// Whether every remote scan of `plan` is split across the workers (under a
/// [`DistributedLeafExec`]): none would run in this process.
fn every_scan_distributed(plan: &Arc<dyn ExecutionPlan>) -> bool {
    if plan.is::<DistributedLeafExec>() {
        return true;
    }
    if remote_scan(plan).is_some() {
        return false;
    }
    plan.children().into_iter().all(every_scan_distributed)
}

/// Puts each remote scan under a `CoalescePartitionsExec`, so that the distributed planner
/// makes it a stage of its own (a network boundary below every coalesce), of one task per
/// worker.
#[derive(Debug)]
struct IsolateScans;

impl PhysicalOptimizerRule for IsolateScans {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            if remote_scan(&node).is_none() {
                return Ok(Transformed::no(node));
            }
            Ok(Transformed::yes(
                Arc::new(CoalescePartitionsExec::new(node)) as Arc<dyn ExecutionPlan>,
            ))
        })
        .data()
    }

    fn name(&self) -> &str {
        "corescan_isolate_scans"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` as a scan of a remote table, if it is one.
fn remote_scan(plan: &Arc<dyn ExecutionPlan>) -> Option<&CorescanExec> {
    plan.downcast_ref::<CorescanExec>()
        .filter(|e| e.target().remote)
}

/// The per-task variants of `exec` (see the module docs).
fn scale_up(
    plan: &Arc<dyn ExecutionPlan>,
    exec: &CorescanExec,
    task_count: usize,
    slots: &[Url],
    locations: &Locations,
) -> DfResult<ScaleUpLeafNodeEventResponse> {
    let t = exec.target();
    if task_count != slots.len() {
        return plan_err!(
            "the stage scanning table {:?} would run on {task_count} tasks, {NOT_ONE_TASK_PER_WORKER} \
             ({})",
            t.table,
            slots.len()
        );
    }
    let paths = t.files.as_ref().map_or(&[][..], |f| f.paths.as_slice());
    let mut shares: Vec<Vec<PathBuf>> = vec![Vec::new(); slots.len()];
    let mut loads = vec![0u64; slots.len()];
    for path in paths {
        let key = path.to_string_lossy();
        let Some(holders) = locations.holders.get(key.as_ref()) else {
            return plan_err!("no worker holds {key}");
        };
        let w = holders
            .iter()
            .copied()
            .min_by_key(|&w| (loads[w], w))
            .unwrap_or(0);
        loads[w] += locations
            .sizes
            .get(key.as_ref())
            .copied()
            .unwrap_or(0)
            .max(1);
        shares[w].push(path.clone());
    }
    let variants = shares.into_iter().map(|share| {
        let mut target = t.clone();
        target.path = share.first().cloned().unwrap_or_default();
        if let Some(files) = &mut target.files {
            files.paths = Arc::new(share);
        }
        Arc::new(exec.with_target(Arc::new(target))) as Arc<dyn ExecutionPlan>
    });
    let leaf = DistributedLeafExec::try_new(Arc::clone(plan), variants)?;
    Ok(ScaleUpLeafNodeEventResponse::new(Arc::new(leaf)))
}

/// Task `i` of a stage that scans a corescan table goes to slot `i`'s worker.
fn route(ev: &RouteTasksEvent, slots: &[Url]) -> Option<DfResult<RouteTasksEventResponse>> {
    let mut scans = false;
    let walked = ev.plan.apply(|node| {
        if let Some(leaf) = node.downcast_ref::<DistributedLeafExec>() {
            if remote_scan(leaf.original()).is_some() {
                scans = true;
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    if let Err(e) = walked {
        return Some(Err(e));
    }
    if !scans {
        return None;
    }
    if ev.task_count != slots.len() {
        return Some(plan_err!(
            "a stage scanning corescan tables runs on {} tasks, {NOT_ONE_TASK_PER_WORKER} ({})",
            ev.task_count,
            slots.len()
        ));
    }
    Some(Ok(RouteTasksEventResponse::new(slots.to_vec())))
}

/// The worker resolver: the task slots' URLs.
struct Slots(Arc<Vec<Url>>);

impl WorkerResolver for Slots {
    fn get_urls(&self) -> Result<Vec<Url>, DataFusionError> {
        Ok(self.0.to_vec())
    }
}

/// The cluster's tables as a DataFusion schema, names matched ASCII case-insensitively.
#[derive(Debug)]
struct RemoteSchema {
    tables: HashMap<String, Arc<SqliteTable>>,
    names: Vec<String>,
}

#[async_trait]
impl SchemaProvider for RemoteSchema {
    fn table_names(&self) -> Vec<String> {
        self.names.iter().map(|n| n.to_ascii_lowercase()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        Ok(self
            .tables
            .get(&name.to_ascii_lowercase())
            .map(|t| Arc::clone(t) as Arc<dyn TableProvider>))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.tables.contains_key(&name.to_ascii_lowercase())
    }
}

/// `plan` as text: the distributed plan's stages and tasks, with the corescan scans in them.
pub fn display(plan: &Arc<dyn ExecutionPlan>) -> String {
    datafusion_distributed::display_plan_ascii(plan.as_ref(), false)
}

/// [`display`] with each node's metrics (rows, times), summed over the tasks, as the workers
/// reported them: for a plan that has run to its end (waits for the workers' metrics).
pub async fn display_with_metrics(plan: &Arc<dyn ExecutionPlan>) -> DfResult<String> {
    let plan = datafusion_distributed::rewrite_distributed_plan_with_metrics(
        Arc::clone(plan),
        datafusion_distributed::DistributedMetricsFormat::Aggregated,
    )
    .await?;
    Ok(datafusion_distributed::display_plan_ascii(
        plan.as_ref(),
        true,
    ))
}
