//! One stream per executor: [`scan_partitions`] starts a plain projection (with a `WHERE`,
//! without `ORDER BY`, aggregates or `OFFSET`) and returns a [`PartitionedScan`] whose
//! [`PartitionStream`]s each yield one executor's rows, what a query engine's partitions need
//! (DataFusion's `ExecutionPlan::execute(partition)`).
//!
//! Each executor reads its range of the table in key order, so partition 0's rows, then
//! partition 1's, ... are the table in rowid order. A stream's channel is the executor's own
//! bounded channel: a partition nobody reads holds its executor (memory stays bounded), and a
//! stream can be read from another thread or awaited on any async runtime. With a `LIMIT`, each
//! partition yields at most that many rows (a limit above the partitions takes the rest).
//!
//! A row whose evaluation fails ends its partition with its error; an executor that fails ends
//! its partition with the scan's error (the first partition to see it gets it, the others a
//! cancellation naming their CPU). Dropping every stream (and the [`PartitionedScan`]) cancels
//! the scan. A database read without SQLite's locks cannot stream (a change found at the end
//! means scanning again): its rows are collected, checked, and handed over in partition 0.
//!
//! [`scan_partitions_into`] gives each executor's stream a [`BatchSink`] the embedder made for
//! it: the executor builds the embedder's batches as it decodes (see [`crate::query::sink`]),
//! and the stream yields them as [`Part::Built`].
//!
//! Layering: the top of the engine, beside [`crate::handle`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_channel::{bounded, Receiver};
use futures_lite::Stream;

use crate::coordinator::{run_files, run_scan_with, RangeOrder};
use crate::error::Error;
use crate::handle::{Batch, ScanEnd};
use crate::query::dates;
use crate::query::files::{ExecutorStreams, MissingTable, QueryFiles};
use crate::query::row_stream::{RowStream, StreamMsg, CHANNEL_CHUNKS};
use crate::query::run::test_constant_terms;
use crate::query::sink::BatchSink;
pub use crate::query::sink::FileSinkFactory;
use crate::query::{run_query_until, streams, QueryError, QueryKernel};
use crate::retry::consistent;
use crate::spec::{replan_scan, OpenScan, ScanSpec};

/// What the partitions share: the scan's outcome and whether anyone still wants it.
#[derive(Debug)]
struct Shared {
    /// The coordinator's outcome, once the scan ended (taken by the first partition that
    /// needs its error, or by [`PartitionedScan::finish`]).
    outcome: Mutex<Option<Result<ScanEnd, QueryError>>>,
    /// Closed when the coordinator has stored the outcome.
    done: Receiver<()>,
    /// Rows the partition streams have handed over.
    delivered: AtomicU64,
}

/// Sets the abandonment mark when the last holder (the scan or a stream) goes away.
#[derive(Debug)]
struct Live(Arc<AtomicBool>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A scan running one stream per executor (see the module docs).
#[derive(Debug)]
pub struct PartitionedScan {
    names: Vec<String>,
    streams: Vec<PartitionStream>,
    shared: Arc<Shared>,
    _live: Arc<Live>,
}

/// One executor's rows, in rowid order.
#[derive(Debug)]
pub struct PartitionStream {
    index: usize,
    cpu: usize,
    path: std::path::PathBuf,
    rx: Receiver<StreamMsg>,
    shared: Arc<Shared>,
    done: bool,
    _live: Arc<Live>,
}

/// Starts `spec` with one stream per executor. Fails at once for a query that is not a plain
/// projection without `ORDER BY` or `OFFSET`, and for errors about the file, the table, the
/// columns or the placement.
pub fn scan_partitions(spec: ScanSpec) -> Result<PartitionedScan, QueryError> {
    start(spec, None)
}

/// Makes partition `i`'s [`BatchSink`].
pub type SinkFactory = dyn Fn(usize) -> Box<dyn BatchSink> + Send + Sync;

/// Starts `spec` as [`scan_partitions`] does, each executor handing its rows to the sink
/// `sinks` makes for its partition (called once per partition, with its index, before the
/// scan starts): its streams yield [`Part::Built`] batches. A database read without SQLite's
/// locks (whose rows are collected and checked before any is handed over) still yields
/// [`Part::Rows`], in partition 0.
pub fn scan_partitions_into(
    spec: ScanSpec,
    sinks: &SinkFactory,
) -> Result<PartitionedScan, QueryError> {
    start(spec, Some(sinks))
}

fn start(spec: ScanSpec, sinks: Option<&SinkFactory>) -> Result<PartitionedScan, QueryError> {
    let open = spec.open()?;
    if !streams(&open.query) || open.query.offset > 0 {
        return Err(QueryError::Scan(Error::Config(
            "a partitioned scan yields rows as each executor reads them: the query must be a \
             plain projection without ORDER BY, aggregates or OFFSET"
                .into(),
        )));
    }
    let n = open.executors.len();
    let sinks: Vec<Option<Box<dyn BatchSink>>> =
        (0..n).map(|i| sinks.map(|make| make(i))).collect();
    let (executors, path, names) = (
        open.executors.clone(),
        open.path.clone(),
        open.query.names.clone(),
    );
    launch(&executors, &path, names, move |senders, abandoned| {
        run(open, senders, sinks, abandoned)
    })
}

/// The partition streams of a scan over `executors` (`path` names the file in their
/// errors), and its coordinator thread running `scan` with one sender per executor and the
/// mark set once nobody wants the rows; the outcome is kept for the streams and
/// [`PartitionedScan::finish`].
fn launch(
    executors: &[crate::ExecutorSpec],
    path: &std::path::Path,
    names: Vec<String>,
    scan: impl FnOnce(
            Vec<async_channel::Sender<StreamMsg>>,
            Arc<AtomicBool>,
        ) -> Result<ScanEnd, QueryError>
        + Send
        + 'static,
) -> Result<PartitionedScan, QueryError> {
    let n = executors.len();
    let abandoned = Arc::new(AtomicBool::new(false));
    let live = Arc::new(Live(Arc::clone(&abandoned)));
    let (done_tx, done_rx) = bounded::<()>(1);
    let shared = Arc::new(Shared {
        outcome: Mutex::new(None),
        done: done_rx,
        delivered: AtomicU64::new(0),
    });
    let mut senders = Vec::with_capacity(n);
    let mut streams = Vec::with_capacity(n);
    for (index, e) in executors.iter().enumerate() {
        let (tx, rx) = bounded(CHANNEL_CHUNKS);
        senders.push(tx);
        streams.push(PartitionStream {
            index,
            cpu: e.cpu,
            path: path.to_path_buf(),
            rx,
            shared: Arc::clone(&shared),
            done: false,
            _live: Arc::clone(&live),
        });
    }
    let coordinator = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("corescan-coordinator".into())
        .spawn(move || {
            let outcome = scan(senders, abandoned);
            *coordinator
                .outcome
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(outcome);
            drop(done_tx);
        })
        .map_err(|e| {
            QueryError::Scan(Error::Config(format!(
                "cannot start the coordinator thread: {e}"
            )))
        })?;
    Ok(PartitionedScan {
        names,
        streams,
        shared,
        _live: live,
    })
}

/// A plain projection of one table over several files, for [`scan_files_partitions_into`].
#[derive(Debug)]
pub struct FilesSpec {
    /// The files, in order.
    pub paths: Vec<std::path::PathBuf>,
    /// A plan of the table in one of them, against whose columns `query` was planned (the
    /// SQL front end's `plan_query_files` makes both); it also chooses the I/O path.
    pub base: partitioner::TablePlan,
    /// The projection (with its `WHERE`), as for [`scan_partitions`].
    pub query: crate::QueryPlan,
    /// Which CPUs run the executors.
    pub placement: crate::Placement,
    /// Settings over the defaults.
    pub options: crate::ScanOptions,
    /// What a file without the table does.
    pub missing: MissingTable,
}

/// [`scan_partitions_into`] over one table held by several files ([`crate::run_files`]): one
/// stream per executor, carrying the rows of the units (files, or shares of a large file) dealt
/// to it, in order; each unit's rows reach a sink `sinks` makes (on the executor's thread, with
/// its partition's index and the unit's file) when given, else the stream yields them as rows. A file is opened
/// only when its executor reaches it, so the streams start at once.
pub fn scan_files_partitions_into(
    spec: FilesSpec,
    sinks: Option<Arc<FileSinkFactory>>,
) -> Result<PartitionedScan, QueryError> {
    if !streams(&spec.query) || spec.query.offset > 0 {
        return Err(QueryError::Scan(Error::Config(
            "a partitioned scan yields rows as each executor reads them: the query must be a \
             plain projection without ORDER BY, aggregates or OFFSET"
                .into(),
        )));
    }
    let (executors, settings) =
        crate::placement::resolve(&spec.placement, &spec.options, spec.base.header.page_size)?;
    let (path, names) = (spec.base.path.clone(), spec.query.names.clone());
    launch(
        &executors.clone(),
        &path,
        names,
        move |senders, abandoned| {
            let FilesSpec {
                paths,
                base,
                mut query,
                missing,
                ..
            } = spec;
            let now = dates::statement_time();
            test_constant_terms(&mut query, now)?;
            let paths = Arc::new(paths);
            let streams = ExecutorStreams::new(senders, sinks, Arc::clone(&paths));
            let scans = QueryFiles::new(&base, missing, Arc::new(query), now, None)
                .partitioned(streams, abandoned);
            let scan = run_files(
                paths,
                &base,
                &settings,
                &executors,
                RangeOrder::Key,
                Arc::new(scans),
                || ((), usize::MAX),
            )?;
            Ok(ScanEnd {
                rows: 0,
                streamed: true,
                report: scan.report,
            })
        },
    )
}

/// The coordinator's work: the scan with a streaming kernel per executor, or, for a database
/// read without SQLite's locks, the collected query handed to partition 0.
fn run(
    open: OpenScan,
    senders: Vec<async_channel::Sender<StreamMsg>>,
    sinks: Vec<Option<Box<dyn BatchSink>>>,
    abandoned: Arc<AtomicBool>,
) -> Result<ScanEnd, QueryError> {
    if open.table.read.needs_verification() {
        return run_collected(open, senders, abandoned);
    }
    let mut query = open.query;
    let now = dates::statement_time();
    test_constant_terms(&mut query, now)?;
    let query = Arc::new(query);
    let usable = open.table.header.usable_size();
    let stop = Arc::new(AtomicBool::new(false));
    let mut kernels: Vec<QueryKernel> = senders
        .into_iter()
        .zip(sinks)
        .map(|(tx, sink)| {
            let mut stream = RowStream::new(
                tx,
                Arc::clone(&stop),
                query.keep(),
                Arc::new(AtomicU64::new(0)),
            );
            if let Some(sink) = sink {
                stream.set_sink(sink);
            }
            QueryKernel::streaming(Arc::clone(&query), usable, stream, now)
                .abandoned_when(Some(Arc::clone(&abandoned)))
        })
        .collect();
    kernels.reverse();
    let n = open.executors.len();
    let (_, report, ()) = run_scan_with(
        &open.table,
        &open.settings,
        &open.executors,
        RangeOrder::Key,
        |_| kernels.pop().expect("one kernel per executor"),
        || ((), n),
    )?;
    Ok(ScanEnd {
        // Counted as the streams hand rows over (see `PartitionedScan::finish`).
        rows: 0,
        streamed: true,
        report,
    })
}

/// A database read without SQLite's locks: the query collected through the retry loop, its
/// rows sent through partition 0 once checked.
fn run_collected(
    open: OpenScan,
    senders: Vec<async_channel::Sender<StreamMsg>>,
    abandoned: Arc<AtomicBool>,
) -> Result<ScanEnd, QueryError> {
    let mut first = Some(open.table);
    let mut done = consistent(
        &open.path,
        || {
            first.take().map_or_else(
                || {
                    replan_scan(
                        &open.path,
                        &open.table_name,
                        &open.query,
                        open.index_scan.as_deref(),
                    )
                },
                Ok,
            )
        },
        |plan| match run_query_until(
            plan,
            open.query.clone(),
            &open.settings,
            &open.executors,
            Some(Arc::clone(&abandoned)),
        ) {
            Ok(out) => Ok(Ok(out)),
            Err(QueryError::Scan(e)) => Err(e),
            Err(e) => Ok(Err(e)),
        },
    )?;
    let mut out = std::mem::replace(&mut done.value, Err(QueryError::Abandoned))?;
    done.report_into(&mut out.report.snapshot, &mut out.report.io.notice);
    let rows = out.rows.len() as u64;
    let mut senders = senders.into_iter();
    if let Some(tx) = senders.next() {
        for chunk in out.rows.chunks(crate::handle::BATCH_ROWS) {
            if tx.send_blocking(StreamMsg::Rows(chunk.to_vec())).is_err() {
                return Err(QueryError::Abandoned);
            }
        }
        let _ = tx.send_blocking(StreamMsg::End);
    }
    for tx in senders {
        let _ = tx.send_blocking(StreamMsg::End);
    }
    Ok(ScanEnd {
        rows,
        streamed: false,
        report: out.report,
    })
}

impl PartitionedScan {
    /// The output column names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// How many partitions (executors) the scan has.
    pub fn partition_count(&self) -> usize {
        self.streams.len()
    }

    /// Takes the streams, in range order (partition 0 holds the table's first rows).
    pub fn take_partitions(&mut self) -> Vec<PartitionStream> {
        std::mem::take(&mut self.streams)
    }

    /// Waits (blocking) for the scan to end and returns its report, or its error if no
    /// partition has taken it. [`ScanEnd::rows`] counts the rows the streams have handed
    /// over so far: all of them once every stream has ended.
    pub fn finish(self) -> Result<ScanEnd, QueryError> {
        self.into_end().wait()
    }

    /// Lets go of the scan, keeping a way to its outcome: the scan runs on while any of its
    /// streams is held (dropping the last one cancels it, as if the scan had been dropped), and
    /// [`PartitionedEnd::wait`] gives its report or error once it ended. A query engine keeps
    /// this beside the plan that handed the streams out, for a report after the query.
    pub fn into_end(self) -> PartitionedEnd {
        PartitionedEnd {
            shared: self.shared,
        }
    }
}

/// The outcome of a [`PartitionedScan`] let go with [`PartitionedScan::into_end`].
#[derive(Debug)]
pub struct PartitionedEnd {
    shared: Arc<Shared>,
}

impl PartitionedEnd {
    /// Waits (blocking) for the scan to end and returns its report, or its error if no
    /// partition has taken it. A scan whose streams were all dropped before its end (a `LIMIT`
    /// above it) stops early: its outcome is then a cancellation or the report of what it
    /// read. [`ScanEnd::rows`] counts the rows the streams handed over.
    pub fn wait(self) -> Result<ScanEnd, QueryError> {
        let _ = self.shared.done.recv_blocking();
        let mut end = self.shared.take_outcome(usize::MAX)?;
        if end.streamed {
            end.rows = self.shared.delivered.load(Ordering::Relaxed);
        }
        Ok(end)
    }
}

impl Shared {
    /// The outcome for a reader: the error once (to the first that asks), then a cancellation
    /// naming `cpu`.
    fn take_outcome(&self, cpu: usize) -> Result<ScanEnd, QueryError> {
        let mut slot = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        match slot.take() {
            Some(Ok(end)) => {
                *slot = Some(Ok(end.clone()));
                Ok(end)
            }
            Some(Err(e)) => Err(e),
            None => Err(QueryError::Scan(Error::Cancelled { cpu })),
        }
    }
}

/// What a partition stream yields: rows of values, or a batch its executor's [`BatchSink`]
/// built.
pub enum Part {
    /// Rows of values, one per output column.
    Rows(Batch),
    /// A sink's batch of `rows` rows (downcast it to the sink's type).
    Built {
        /// Rows in the batch.
        rows: usize,
        /// The batch.
        batch: Box<dyn std::any::Any + Send>,
    },
}

impl std::fmt::Debug for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Part::Rows(batch) => f.debug_tuple("Rows").field(batch).finish(),
            Part::Built { rows, .. } => f.debug_struct("Built").field("rows", rows).finish(),
        }
    }
}

impl PartitionStream {
    /// The partition's index (its range's place in rowid order).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The CPU of the executor behind it.
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// The next part (rows, or a sink's batch), awaited without blocking the thread; `None`
    /// after the last one (or after an error).
    pub async fn next_part(&mut self) -> Option<Result<Part, QueryError>> {
        if self.done {
            return None;
        }
        let msg = self.rx.recv().await;
        if msg.is_err() {
            let _ = self.shared.done.recv().await;
        }
        self.take(msg)
    }

    /// The next batch of rows, awaited without blocking the thread; `None` after the last one
    /// (or after an error). For a scan without sinks ([`scan_partitions`]); a sink's batch
    /// ([`scan_partitions_into`]: read those with [`PartitionStream::next_part`]) is an error
    /// here.
    pub async fn next_batch(&mut self) -> Option<Result<Batch, QueryError>> {
        self.next_part().await.map(rows_only)
    }

    /// The next batch of rows, blocking the calling thread (as [`PartitionStream::next_batch`]).
    pub fn next_blocking(&mut self) -> Option<Result<Batch, QueryError>> {
        if self.done {
            return None;
        }
        let msg = self.rx.recv_blocking();
        if msg.is_err() {
            let _ = self.shared.done.recv_blocking();
        }
        self.take(msg).map(rows_only)
    }

    /// The stream as a [`futures_lite::Stream`] (for an async runtime).
    pub fn into_stream(self) -> impl Stream<Item = Result<Batch, QueryError>> + Send {
        futures_lite::stream::unfold(
            self,
            |mut s| async move { s.next_batch().await.map(|b| (b, s)) },
        )
    }

    fn take(
        &mut self,
        msg: Result<StreamMsg, async_channel::RecvError>,
    ) -> Option<Result<Part, QueryError>> {
        match msg {
            Ok(StreamMsg::Rows(rows)) => {
                let n = rows.len() as u64;
                self.shared.delivered.fetch_add(n, Ordering::Relaxed);
                Some(Ok(Part::Rows(Batch { rows })))
            }
            Ok(StreamMsg::Built { rows, batch }) => {
                self.shared
                    .delivered
                    .fetch_add(rows as u64, Ordering::Relaxed);
                Some(Ok(Part::Built { rows, batch }))
            }
            Ok(StreamMsg::Rendered { .. }) => unreachable!("partitions are never rendered"),
            Ok(StreamMsg::Failed(failure)) => {
                self.done = true;
                Some(Err(QueryError::Scan(
                    failure.into_error(self.cpu, &self.path),
                )))
            }
            Ok(StreamMsg::End) => {
                self.done = true;
                None
            }
            // The executor ended without its end mark: the scan failed.
            Err(_) => {
                self.done = true;
                self.shared.take_outcome(self.cpu).err().map(Err)
            }
        }
    }
}

/// A part as rows; a sink's batch is an error (it belongs to [`PartitionStream::next_part`]).
fn rows_only(part: Result<Part, QueryError>) -> Result<Batch, QueryError> {
    match part? {
        Part::Rows(batch) => Ok(batch),
        Part::Built { .. } => Err(QueryError::Scan(Error::Config(
            "this partition's executor builds its sink's batches: read them with next_part".into(),
        ))),
    }
}

impl Iterator for PartitionStream {
    type Item = Result<Batch, QueryError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_blocking()
    }
}
