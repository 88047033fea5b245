//! What a worker holds, and how the coordinator asks: the catalog.
//!
//! At planning time the coordinator asks every worker for its [`WorkerCatalog`]: the SQLite
//! files under its data directory (by relative path, with their sizes), each file's tables
//! (name, `CREATE TABLE` statement, estimated rows) and how many executors a scan runs on the
//! worker. The question is an Arrow Flight `DoAction` (type [`CATALOG_ACTION`]) on the
//! worker's own port, beside the distributed engine's worker service (gRPC serves both on one
//! connection); the answer is one JSON document. Nothing of a table's rows is read to answer
//! it: the header, the schema and the tables' interior pages.
//!
//! Layering: above [`crate::data_dir`].

use std::pin::Pin;
use std::sync::Arc;

use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::Stream;
use partitioner::schema::read_schema;
use partitioner::PageFile;
use serde::{Deserialize, Serialize};
use tonic::{Request, Response, Status, Streaming};

use crate::data_dir::DataDir;
use crate::error::{source_chain, Error};

/// The Flight action type that asks a worker for its catalog.
pub const CATALOG_ACTION: &str = "corescan.catalog";

/// What one worker holds (see the module docs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkerCatalog {
    /// The executors one scan runs on the worker (one partition each).
    pub executors: usize,
    /// The SQLite files under its data directory, in path order.
    pub files: Vec<FileEntry>,
}

/// One file of a [`WorkerCatalog`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileEntry {
    /// The path relative to the data directory, `/` between components.
    pub path: String,
    /// Its size in bytes (replicas of one path must agree).
    pub size: u64,
    /// Its tables, in the schema's order.
    pub tables: Vec<TableEntry>,
}

/// One table of a [`FileEntry`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TableEntry {
    /// The name as the schema spells it.
    pub name: String,
    /// Its `CREATE TABLE` statement.
    pub sql: String,
    /// Its estimated rows (`sqlite_stat1`'s, or from its pages; 0 when it cannot be scanned).
    pub rows: usize,
}

/// Reads the catalog of `dir`, whose scans run on `executors` executors.
pub fn read_catalog(dir: &DataDir, executors: usize) -> Result<WorkerCatalog, Error> {
    let mut files = Vec::new();
    for (rel, real) in dir.list()? {
        let file = PageFile::open(&real)?;
        let size = std::fs::metadata(&real).map_or(0, |m| m.len());
        let tables = read_schema(&file)?
            .into_iter()
            .filter(|e| e.kind == "table")
            .filter_map(|e| {
                let sql = e.sql?;
                // Virtual and WITHOUT ROWID tables have no estimate: listed, and naming one in
                // a query is the scan's error.
                let rows =
                    corescan_datafusion::table::estimate_rows(&real, &file, &e.name).unwrap_or(0);
                Some(TableEntry {
                    name: e.name,
                    sql,
                    rows,
                })
            })
            .collect();
        files.push(FileEntry {
            path: rel,
            size,
            tables,
        });
    }
    Ok(WorkerCatalog { executors, files })
}

/// Asks the worker at `url` (`http://HOST:PORT`) for its catalog.
pub async fn fetch_catalog(url: &str) -> Result<WorkerCatalog, Error> {
    let fail = |what: String| Error::Worker {
        url: url.to_string(),
        what,
    };
    let channel = crate::channels::endpoint(url)
        .map_err(|e| fail(e.to_string()))?
        .connect()
        .await
        .map_err(|e| fail(format!("cannot connect: {}", source_chain(&e))))?;
    let mut client = arrow_flight::FlightClient::new(channel);
    let mut answers = client
        .do_action(Action::new(CATALOG_ACTION, ""))
        .await
        .map_err(|e| fail(flight_message(&e)))?;
    use futures::StreamExt;
    let body = match answers.next().await {
        Some(Ok(body)) => body,
        Some(Err(e)) => return Err(fail(flight_message(&e))),
        None => return Err(fail("answered no catalog".into())),
    };
    serde_json::from_slice(&body).map_err(|e| fail(format!("answered an unreadable catalog: {e}")))
}

/// A Flight error's message: the worker's status message when it sent one.
fn flight_message(e: &arrow_flight::error::FlightError) -> String {
    match e {
        arrow_flight::error::FlightError::Tonic(status) => status.message().to_string(),
        other => other.to_string(),
    }
}

/// The catalog endpoint of a worker (a Flight service answering [`CATALOG_ACTION`] only).
#[derive(Debug, Clone)]
pub struct CatalogService {
    dir: Arc<DataDir>,
    executors: usize,
}

impl CatalogService {
    /// The endpoint for `dir`, whose scans run on `executors` executors.
    pub fn new(dir: Arc<DataDir>, executors: usize) -> Self {
        CatalogService { dir, executors }
    }

    /// As a gRPC service to add to a server.
    pub fn into_server(self) -> FlightServiceServer<Self> {
        FlightServiceServer::new(self)
    }
}

type Answers<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

fn unimplemented<T>(what: &str) -> Result<T, Status> {
    Err(Status::unimplemented(format!(
        "a corescan worker answers only the {CATALOG_ACTION:?} action, not {what}"
    )))
}

#[tonic::async_trait]
impl FlightService for CatalogService {
    type HandshakeStream = Answers<HandshakeResponse>;
    type ListFlightsStream = Answers<FlightInfo>;
    type DoGetStream = Answers<FlightData>;
    type DoPutStream = Answers<PutResult>;
    type DoActionStream = Answers<arrow_flight::Result>;
    type ListActionsStream = Answers<ActionType>;
    type DoExchangeStream = Answers<FlightData>;

    async fn handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        unimplemented("Handshake")
    }

    async fn list_flights(
        &self,
        _request: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        unimplemented("ListFlights")
    }

    async fn get_flight_info(
        &self,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        unimplemented("GetFlightInfo")
    }

    async fn poll_flight_info(
        &self,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        unimplemented("PollFlightInfo")
    }

    async fn get_schema(
        &self,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        unimplemented("GetSchema")
    }

    async fn do_get(
        &self,
        _request: Request<Ticket>,
    ) -> Result<Response<Self::DoGetStream>, Status> {
        unimplemented("DoGet")
    }

    async fn do_put(
        &self,
        _request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        unimplemented("DoPut")
    }

    async fn do_exchange(
        &self,
        _request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        unimplemented("DoExchange")
    }

    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        let kind = &request.get_ref().r#type;
        if kind != CATALOG_ACTION {
            return unimplemented(&format!("action {kind:?}"));
        }
        let (dir, executors) = (Arc::clone(&self.dir), self.executors);
        let catalog = tokio::task::spawn_blocking(move || read_catalog(&dir, executors))
            .await
            .map_err(|e| Status::internal(format!("reading the catalog: {e}")))?
            .map_err(|e| Status::failed_precondition(e.to_string()))?;
        let body = serde_json::to_vec(&catalog)
            .map_err(|e| Status::internal(format!("writing the catalog: {e}")))?;
        let answer = arrow_flight::Result { body: body.into() };
        Ok(Response::new(Box::pin(futures::stream::once(async move {
            Ok(answer)
        }))))
    }

    async fn list_actions(
        &self,
        _request: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        let action = ActionType {
            r#type: CATALOG_ACTION.into(),
            description: "the SQLite files under the worker's data directory, their tables \
                          and the worker's executors, as JSON"
                .into(),
        };
        Ok(Response::new(Box::pin(futures::stream::once(async move {
            Ok(action)
        }))))
    }
}
