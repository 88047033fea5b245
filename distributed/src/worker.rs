//! A worker: the distributed engine's worker service and the catalog endpoint on one port,
//! serving scans of the SQLite files under one directory, thread-per-core on its machine.
//!
//! Each query fragment the coordinator sends is decoded with corescan's codec (a scan's
//! paths resolved under the data directory, [`crate::data_dir`]) and checked before it runs:
//! its leaves may be corescan scans, empty plans, rows the plan carries itself (a `VALUES`
//! list) and the engine's network boundaries (the data other workers send), never another
//! data source (no file scan of DataFusion's own), so a plan cannot make a worker read
//! anything outside its directory. The
//! server binds the address it is given, nothing else.
//!
//! Layering: above [`crate::catalog`] and [`crate::codec`].

use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{plan_err, Result as DfResult};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion_distributed::{
    ChannelResolver, DistributedExt, Worker, WorkerPlanRewriteEvent,
    WorkerPlanRewriteEventResponse, WorkerQueryContext,
};
use engine::{Placement, ScanOptions};
use tokio::net::TcpListener;

use crate::catalog::{CatalogCache, CatalogService, WorkerCatalog};
use crate::channels::Channels;
use crate::codec::{CorescanCodec, WorkerScans};
use crate::data_dir::DataDir;
use crate::error::Error;

/// What a worker serves and how it scans.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The data directory.
    pub dir: DataDir,
    /// Where its executors run.
    pub placement: Placement,
    /// Its scan settings.
    pub options: ScanOptions,
}

/// A worker ready to serve: its scans' executors placed.
#[derive(Debug, Clone)]
pub struct CorescanWorker {
    scans: Arc<WorkerScans>,
    /// The catalog between requests: only changed files are read again.
    catalog: Arc<CatalogCache>,
}

impl CorescanWorker {
    /// Places `config`'s executors (as a scan would) and checks its directory.
    pub fn new(config: WorkerConfig) -> Result<Self, Error> {
        // The executors of a scan; the page size only sets defaults this does not use.
        let (executors, _) = engine::placement::resolve(&config.placement, &config.options, 4096)
            .map_err(|e| Error::DataDir {
            path: config.dir.path().to_path_buf(),
            what: format!("placing the executors: {e}"),
        })?;
        Ok(CorescanWorker {
            scans: Arc::new(WorkerScans {
                dir: Arc::new(config.dir),
                executors,
                options: config.options,
            }),
            catalog: Arc::default(),
        })
    }

    /// The executors one scan runs on.
    pub fn executors(&self) -> usize {
        self.scans.executors.len()
    }

    /// The data directory.
    pub fn dir(&self) -> &DataDir {
        &self.scans.dir
    }

    /// What the worker holds, as its catalog endpoint answers (from its [`CatalogCache`]:
    /// only files new or changed since the last answer are read).
    pub fn catalog(&self) -> Result<WorkerCatalog, Error> {
        self.catalog
            .read(&self.scans.dir, self.executors())
            .map(|(catalog, _)| catalog)
    }

    /// The worker's gRPC services (the engine's worker service and the catalog endpoint), its
    /// fragments reaching other workers (a shuffle's inputs) through `channels`: to serve on
    /// connections of one's own (an in-memory cluster); [`CorescanWorker::serve`] serves them
    /// on a TCP listener.
    pub fn routes<C>(&self, channels: C) -> tonic::service::Routes
    where
        C: ChannelResolver + Clone + Send + Sync + 'static,
    {
        let codec = CorescanCodec::worker(Arc::clone(&self.scans));
        let worker = Worker::from_session_builder(move |ctx: WorkerQueryContext| {
            let (codec, channels) = (codec.clone(), channels.clone());
            async move {
                Ok(ctx
                    .builder
                    .with_distributed_user_codec(codec)
                    .with_distributed_channel_resolver(channels)
                    .with_distributed_worker_plan_rewrite_handler(check_plan)
                    .build())
            }
        });
        let catalog = CatalogService::new(
            Arc::clone(&self.scans.dir),
            self.executors(),
            Arc::clone(&self.catalog),
        );
        tonic::service::Routes::new(worker.into_worker_server()).add_service(catalog.into_server())
    }

    /// Serves on `listener` until the future is dropped (or the server fails).
    pub async fn serve(self, listener: TcpListener) -> Result<(), Error> {
        let addr = listener
            .local_addr()
            .map_or_else(|_| "?".to_string(), |a| a.to_string());
        let incoming = tokio_stream_of(listener);
        tonic::transport::Server::builder()
            .add_routes(self.routes(Channels::default()))
            .serve_with_incoming(incoming)
            .await
            .map_err(|e| Error::Serve {
                addr,
                what: crate::error::source_chain(&e),
            })
    }
}

/// The connections `listener` accepts, as tonic takes them.
fn tokio_stream_of(
    listener: TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures::stream::unfold(listener, |listener| async move {
        let next = listener.accept().await.map(|(stream, _)| {
            let _ = stream.set_nodelay(true);
            stream
        });
        Some((next, listener))
    })
}

/// Refuses a fragment whose leaves are not corescan scans, empty plans or network boundaries
/// (see the module docs).
fn check_plan(ev: WorkerPlanRewriteEvent) -> DfResult<WorkerPlanRewriteEventResponse> {
    let mut refused = None;
    let walked = ev.plan.apply(|node| {
        if node.children().is_empty() {
            // Rows the plan itself carries (a VALUES list) read nothing of the worker's.
            let rows_in_plan = node.downcast_ref::<DataSourceExec>().is_some_and(|d| {
                d.data_source()
                    .downcast_ref::<MemorySourceConfig>()
                    .is_some()
            });
            let allowed = rows_in_plan
                || matches!(
                    node.name(),
                    "CorescanExec"
                        | "EmptyExec"
                        | "PlaceholderRowExec"
                        | "NetworkShuffleExec"
                        | "NetworkCoalesceExec"
                        | "NetworkBroadcastExec"
                );
            if !allowed {
                refused = Some(node.name().to_string());
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    walked?;
    match refused {
        Some(name) => plan_err!(
            "a corescan worker runs plans that read only its corescan scans; this one reads {name}"
        ),
        None => Ok(WorkerPlanRewriteEventResponse::new(ev.plan)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::execution::config::SessionConfig;
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    use datafusion::physical_plan::empty::EmptyExec;
    use datafusion::physical_plan::ExecutionPlan;

    fn check(plan: Arc<dyn ExecutionPlan>) -> DfResult<WorkerPlanRewriteEventResponse> {
        let config = SessionConfig::new();
        check_plan(WorkerPlanRewriteEvent {
            plan,
            session_config: &config,
        })
    }

    #[test]
    fn fragments_may_read_only_corescan_scans_and_their_own_rows() {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
        let empty: Arc<dyn ExecutionPlan> = Arc::new(EmptyExec::new(Arc::clone(&schema)));
        assert!(check(Arc::new(CoalescePartitionsExec::new(empty))).is_ok());
        let memory: Arc<dyn ExecutionPlan> =
            MemorySourceConfig::try_new_exec(&[vec![]], Arc::clone(&schema), None).unwrap();
        assert!(check(Arc::new(CoalescePartitionsExec::new(memory))).is_ok());
        // A file scan of DataFusion's own (here a CSV file anywhere) is refused.
        let csv = datafusion::datasource::physical_plan::FileScanConfigBuilder::new(
            datafusion::execution::object_store::ObjectStoreUrl::local_filesystem(),
            Arc::new(datafusion::datasource::physical_plan::CsvSource::new(
                schema,
            )),
        )
        .with_file(datafusion::datasource::listing::PartitionedFile::new(
            "/etc/passwd",
            10,
        ))
        .build();
        let file: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(csv);
        let e = check(Arc::new(CoalescePartitionsExec::new(file)))
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("DataSourceExec"), "{e}");
    }
}
