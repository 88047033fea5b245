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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
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

/// Reads the catalog of `dir`, whose scans run on `executors` executors (every file read;
/// a worker answers through a [`CatalogCache`], which reads only the files that changed).
pub fn read_catalog(dir: &DataDir, executors: usize) -> Result<WorkerCatalog, Error> {
    CatalogCache::default()
        .read(dir, executors)
        .map(|(catalog, _)| catalog)
}

/// One file's entry, read from the file: its tables and estimates.
fn read_entry(rel: String, real: &Path) -> Result<FileEntry, Error> {
    let file = PageFile::open(real)?;
    let size = std::fs::metadata(real).map_or(0, |m| m.len());
    let tables = read_schema(&file)?
        .into_iter()
        .filter(|e| e.kind == "table")
        .filter_map(|e| {
            let sql = e.sql?;
            // Virtual and WITHOUT ROWID tables have no estimate: listed, and naming one in
            // a query is the scan's error.
            let rows = corescan_datafusion::table::estimate_rows(real, &file, &e.name).unwrap_or(0);
            Some(TableEntry {
                name: e.name,
                sql,
                rows,
            })
        })
        .collect();
    Ok(FileEntry {
        path: rel,
        size,
        tables,
    })
}

/// What identifies one committed state of a database file, read without SQLite's locks and
/// without parsing anything: the file's identity (device, inode), size and modification time,
/// its header's file change counter and schema cookie (a commit in rollback mode bumps the
/// counter; a schema change bumps the cookie), and its `-wal` log's size, modification time,
/// checkpoint sequence and salts (a commit in WAL mode appends frames, so the size grows, and
/// a log started over gets new salts). Two equal stamps are the same tables, columns and
/// estimates, so the entry read for the first answers for the second; any change at all
/// (a checkpoint, a rewrite) only costs a new read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    file: (u64, u64, u64, i64, i64),
    header: [u8; 20],
    wal: Option<(u64, i64, i64, [u8; 16])>,
}

impl Stamp {
    /// The stamp of the database at `real` (its log beside it), `None` when it cannot be
    /// read (the entry is then read, and its error reported, as without a cache).
    fn of(real: &Path) -> Option<Stamp> {
        use std::io::Read;
        use std::os::unix::fs::MetadataExt;
        let mut f = std::fs::File::open(real).ok()?;
        let meta = f.metadata().ok()?;
        let mut head = [0u8; 44];
        f.read_exact(&mut head).ok()?;
        // Bytes 24..44: change counter, database size, first freelist page, freelist pages,
        // schema cookie.
        let header: [u8; 20] = head[24..44].try_into().ok()?;
        let mut wal_path = real.as_os_str().to_owned();
        wal_path.push("-wal");
        let wal = match std::fs::File::open(&wal_path) {
            Ok(mut w) => {
                let m = w.metadata().ok()?;
                let mut whead = [0u8; 24];
                // A log shorter than its header holds no frame (its size says so): the
                // bytes it lacks stay zero.
                let _ = w.read(&mut whead).ok()?;
                // Bytes 8..24: page size, checkpoint sequence, salt-1, salt-2.
                let tail: [u8; 16] = whead[8..24].try_into().ok()?;
                Some((m.len(), m.mtime(), m.mtime_nsec(), tail))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(_) => return None,
        };
        Some(Stamp {
            file: (
                meta.dev(),
                meta.ino(),
                meta.len(),
                meta.mtime(),
                meta.mtime_nsec(),
            ),
            header,
            wal,
        })
    }
}

/// A worker's catalog kept between requests: each file's entry with the [`Stamp`] it was
/// read at. A request lists the directory again (files come and go) and stamps every file
/// (two opens and two short reads); only a file whose stamp changed, or a new one, is opened
/// as SQLite's readers open it and its schema and estimates read. Files no longer listed
/// are forgotten.
#[derive(Debug, Default)]
pub struct CatalogCache {
    entries: std::sync::Mutex<HashMap<PathBuf, (Stamp, FileEntry)>>,
}

/// How a [`CatalogCache::read`] answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheUse {
    /// Files read (new, or changed since they were last read).
    pub read: usize,
    /// Files answered from the cache (unchanged).
    pub reused: usize,
}

impl CatalogCache {
    /// The catalog of `dir` (scans on `executors` executors), reading only the files that
    /// are new or changed since the last call, and how many were read.
    pub fn read(
        &self,
        dir: &DataDir,
        executors: usize,
    ) -> Result<(WorkerCatalog, CacheUse), Error> {
        let listed = dir.list()?;
        // Held throughout: concurrent requests wait for one read instead of each reading.
        let mut cached = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let mut kept = HashMap::with_capacity(listed.len());
        let mut files = Vec::with_capacity(listed.len());
        let mut used = CacheUse::default();
        for (rel, real) in listed {
            let stamp = Stamp::of(&real);
            let entry = match (cached.remove(&real), stamp) {
                (Some((was, entry)), Some(now)) if was == now && entry.path == rel => {
                    used.reused += 1;
                    entry
                }
                _ => {
                    used.read += 1;
                    match read_entry(rel, &real) {
                        Ok(entry) => entry,
                        Err(e) => {
                            // What was read stays cached; the failing file is read again.
                            cached.extend(kept);
                            return Err(e);
                        }
                    }
                }
            };
            // Stamped again after the read: a commit during it is seen next time.
            if let Some(stamp) = stamp.filter(|s| Stamp::of(&real) == Some(*s)) {
                kept.insert(real, (stamp, entry.clone()));
            }
            files.push(entry);
        }
        *cached = kept;
        Ok((WorkerCatalog { executors, files }, used))
    }
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
    cache: Arc<CatalogCache>,
}

impl CatalogService {
    /// The endpoint for `dir`, whose scans run on `executors` executors, answering through
    /// `cache`.
    pub fn new(dir: Arc<DataDir>, executors: usize, cache: Arc<CatalogCache>) -> Self {
        CatalogService {
            dir,
            executors,
            cache,
        }
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
        let (dir, executors, cache) = (
            Arc::clone(&self.dir),
            self.executors,
            Arc::clone(&self.cache),
        );
        let catalog = tokio::task::spawn_blocking(move || cache.read(&dir, executors))
            .await
            .map_err(|e| Status::internal(format!("reading the catalog: {e}")))?
            .map_err(|e| Status::failed_precondition(e.to_string()))?
            .0;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(catalog: &WorkerCatalog, path: &str) -> Vec<String> {
        let file = catalog.files.iter().find(|f| f.path == path).expect(path);
        file.tables.iter().map(|t| t.name.clone()).collect()
    }

    /// Unchanged files are answered from the cache; a commit in rollback mode, a commit in
    /// WAL mode (the log not checkpointed), a schema change, a replaced file and a removed
    /// file are each seen by the next request.
    #[test]
    fn the_cache_reads_only_what_changed() {
        let base =
            std::env::temp_dir().join(format!("corescan-catalog-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let rollback = rusqlite::Connection::open(base.join("a.db")).unwrap();
        rollback
            .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);")
            .unwrap();
        let wal = rusqlite::Connection::open(base.join("b.db")).unwrap();
        wal.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE m(x);",
        )
        .unwrap();
        let dir = DataDir::open(&base).unwrap();
        let cache = CatalogCache::default();
        let read = |want: CacheUse| {
            let (catalog, used) = cache.read(&dir, 2).unwrap();
            assert_eq!(used, want);
            // Always what a fresh read gives.
            assert_eq!(catalog, read_catalog(&dir, 2).unwrap());
            catalog
        };
        read(CacheUse { read: 2, reused: 0 });
        read(CacheUse { read: 0, reused: 2 });

        // A row committed in rollback mode (the file's size unchanged): read again.
        rollback.execute("INSERT INTO t VALUES (3)", []).unwrap();
        read(CacheUse { read: 1, reused: 1 });
        rollback.execute("CREATE TABLE u(y)", []).unwrap();
        let catalog = read(CacheUse { read: 1, reused: 1 });
        assert_eq!(tables(&catalog, "a.db"), ["t", "u"]);

        // Commits in WAL mode stay in the log.
        wal.execute("INSERT INTO m VALUES (1)", []).unwrap();
        read(CacheUse { read: 1, reused: 1 });
        wal.execute("CREATE TABLE w(z)", []).unwrap();
        let catalog = read(CacheUse { read: 1, reused: 1 });
        assert_eq!(tables(&catalog, "b.db"), ["m", "w"]);
        read(CacheUse { read: 0, reused: 2 });

        // Replaced by another file under the same name; then removed.
        drop(rollback);
        let other = base.join("other.tmp");
        rusqlite::Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE v(x);")
            .unwrap();
        std::fs::rename(&other, base.join("a.db")).unwrap();
        let catalog = read(CacheUse { read: 1, reused: 1 });
        assert_eq!(tables(&catalog, "a.db"), ["v"]);
        std::fs::remove_file(base.join("a.db")).unwrap();
        let catalog = read(CacheUse { read: 0, reused: 1 });
        assert_eq!(catalog.files.len(), 1);
        drop(wal);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
