//! Streaming a plain projection: rows go from the executors to the output while the scan runs,
//! in rowid order, with memory bounded by the channels, never by the table.
//!
//! A query without `ORDER BY` and without aggregates ([`streams`]) runs as an ordered scan
//! ([`RangeOrder::Key`]): the partitioner cuts the leaves in b-tree order into one range per
//! executor, and each executor reads and decodes its range in that order, so range 0's rows,
//! then range 1's, ... are the table in rowid order, also when the leaf pages are not in
//! page-number order (a fragmented or interleaved table). Each executor's kernel hands its rows
//! in chunks ([`CHUNK_ROWS`] rows or [`CHUNK_BYTES`] bytes, whichever comes first, cut only at
//! page ends) to a bounded channel of its own ([`CHANNEL_CHUNKS`] chunks); the coordinator's
//! thread drains the channels in range order and hands every row to the caller as it arrives.
//!
//! The cost of the order: an executor whose channel is full waits until the coordinator has
//! written every row of the ranges before it. Memory is then at most `executors x
//! (CHANNEL_CHUNKS + 2)` chunks plus the readahead windows; the later executors' reads wait
//! with them, so a projection whose output is slower than the scan runs at the speed of its
//! output (as it must), and one whose output keeps up runs as a plain scan.
//!
//! `LIMIT` without `ORDER BY`: each executor stops reading once it has produced `LIMIT +
//! OFFSET` rows, and once the coordinator has written `LIMIT` rows every executor stops at its
//! next read ([`crate::ScanKernel::wants_more`]); errors in ranges after the one that completed
//! the `LIMIT` are not the query's (SQLite never reads those rows either). An error in range
//! `i` (a damaged page) stops the ranges after it; the rows of the ranges before it, and range
//! `i`'s rows before the damaged page, are still written, then the error ends the query.
//!
//! A database read without SQLite's locks (`verify-retry`) cannot stream: the scan may have to
//! be repeated when the file changed under it, and rows already written cannot be taken back,
//! so there the rows are collected, checked, and then handed over.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use partitioner::TablePlan;

use crate::coordinator::{run_scan_with, RangeOrder};
use crate::report::RunReport;
use crate::settings::{ExecutorSpec, ScanSettings};
use crate::value::Value;

use super::dates;
use super::ir::{QueryPlan, Shape};
use super::kernel::{run_query, OutRow, QueryError, QueryKernel};

/// Rows per chunk sent from an executor to the coordinator (at most; a chunk is cut only at
/// the end of a page, so it can exceed this by one page's rows).
pub const CHUNK_ROWS: usize = 256;

/// Bytes of values per chunk (approximately: text and blob lengths, 8 per other value).
pub const CHUNK_BYTES: usize = 256 * 1024;

/// Chunks each executor's channel holds before the executor waits.
pub const CHANNEL_CHUNKS: usize = 4;

/// Whether `plan` streams: a plain projection without `ORDER BY`.
pub fn streams(plan: &QueryPlan) -> bool {
    matches!(plan.shape, Shape::Rows { .. }) && plan.order_by.is_empty()
}

/// Renders a result row as output bytes. Given to [`run_query_rendered`], it runs in the
/// executors' threads as they stream, so the rows are formatted in parallel and the
/// coordinator only writes bytes in order.
pub trait RowRender: Send + Sync {
    /// Appends the bytes of `row` to `out`.
    fn render(&self, row: &[Value], out: &mut Vec<u8>);
}

/// A shared [`RowRender`].
#[derive(Clone)]
struct Renderer(Arc<dyn RowRender>);

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Renderer")
    }
}

/// One result row as the coordinator hands it over.
enum ResultRow<'a> {
    /// Its values.
    Values(&'a [Value]),
    /// Its bytes, from the query's [`RowRender`].
    Rendered(&'a [u8]),
}

/// What an executor sends the coordinator.
#[derive(Debug)]
pub enum StreamMsg {
    /// Rows, in rowid order.
    Rows(Vec<Vec<Value>>),
    /// Rendered rows, in rowid order: row `i` is `bytes[ends[i - 1]..ends[i]]`.
    Rendered {
        /// The rows' bytes, one after the other.
        bytes: Vec<u8>,
        /// Where each row ends in `bytes`.
        ends: Vec<usize>,
    },
    /// The executor's range is done (or it has the rows its `LIMIT` needs). A channel that
    /// closes without it belongs to an executor that failed.
    End,
}

/// The kernel's side of a stream: the rows of complete pages not yet sent, and the channel.
/// Dropped without [`RowStream::finish`] (the executor failed), it still sends the rows of the
/// pages before the failure, then closes the channel without [`StreamMsg::End`].
#[derive(Debug, Clone)]
pub struct RowStream {
    tx: Sender<StreamMsg>,
    /// Set by the coordinator once it has every row it needs.
    stop: Arc<AtomicBool>,
    /// Rows this executor may produce at most (`LIMIT + OFFSET`).
    keep: u64,
    /// Rows sent so far.
    sent: u64,
    /// Rows of complete pages, in rowid order, not yet sent.
    sealed: Vec<OutRow>,
    /// Their approximate size in bytes.
    sealed_bytes: usize,
    /// The coordinator dropped the channel (it has what it needs, or it failed writing).
    gone: bool,
    /// [`StreamMsg::End`] was sent.
    ended: bool,
    /// Nanoseconds spent waiting for room in the channel (the cost of the order).
    waited_ns: Arc<AtomicU64>,
    /// Renders the rows before they are sent, when the caller gave a renderer.
    render: Option<Renderer>,
}

impl RowStream {
    /// A stream over `tx`, producing at most `keep` rows, stopped early by `stop`; the time
    /// it waits for room in the channel is added to `waited_ns`.
    pub fn new(
        tx: Sender<StreamMsg>,
        stop: Arc<AtomicBool>,
        keep: Option<u64>,
        waited_ns: Arc<AtomicU64>,
    ) -> Self {
        RowStream {
            waited_ns,
            render: None,
            tx,
            stop,
            keep: keep.unwrap_or(u64::MAX),
            sent: 0,
            sealed: Vec::new(),
            sealed_bytes: 0,
            gone: false,
            ended: false,
        }
    }

    fn produced(&self, pending: usize) -> u64 {
        self.sent
            .saturating_add(self.sealed.len() as u64)
            .saturating_add(pending as u64)
    }

    /// Whether the executor should keep reading, given `pending` rows of the page being
    /// decoded.
    pub fn wants_more(&self, pending: usize) -> bool {
        !self.gone && !self.stop.load(Ordering::Relaxed) && self.produced(pending) < self.keep
    }

    /// At a page end: takes the page's rows (`page`) in rowid order (records completed from
    /// overflow pages were accepted after the page's other cells) and sends a chunk when
    /// there are enough rows.
    pub fn page_done(&mut self, page: &mut Vec<OutRow>) {
        if !page.is_sorted_by_key(|r| r.rowid) {
            page.sort_unstable_by_key(|r| r.rowid);
        }
        self.sealed_bytes += page.iter().map(row_bytes).sum::<usize>();
        self.sealed.append(page);
        let room = usize::try_from(self.keep - self.sent).unwrap_or(usize::MAX);
        if self.sealed.len() >= CHUNK_ROWS.min(room) || self.sealed_bytes >= CHUNK_BYTES {
            self.send();
        }
    }

    fn send(&mut self) {
        let room = usize::try_from(self.keep - self.sent).unwrap_or(usize::MAX);
        self.sealed.truncate(room);
        self.sealed_bytes = 0;
        if self.sealed.is_empty() {
            return;
        }
        self.sent += self.sealed.len() as u64;
        if self.gone {
            self.sealed.clear();
            return;
        }
        let msg = match &self.render {
            Some(Renderer(render)) => {
                let mut bytes = Vec::with_capacity(64 * self.sealed.len());
                let mut ends = Vec::with_capacity(self.sealed.len());
                for r in self.sealed.drain(..) {
                    render.render(&r.values, &mut bytes);
                    ends.push(bytes.len());
                }
                StreamMsg::Rendered { bytes, ends }
            }
            None => StreamMsg::Rows(self.sealed.drain(..).map(|r| r.values).collect()),
        };
        match self.tx.try_send(msg) {
            Ok(()) => {}
            Err(TrySendError::Full(msg)) => {
                let waiting = Instant::now();
                self.gone = self.tx.send(msg).is_err();
                let ns = u64::try_from(waiting.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.waited_ns.fetch_add(ns, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => self.gone = true,
        }
    }

    /// Ends the executor's stream: the last rows, then [`StreamMsg::End`].
    pub fn finish(&mut self) {
        self.send();
        if !self.gone {
            let _ = self.tx.send(StreamMsg::End);
        }
        self.ended = true;
    }
}

impl Drop for RowStream {
    fn drop(&mut self) {
        if !self.ended {
            self.send();
        }
    }
}

fn row_bytes(r: &OutRow) -> usize {
    r.values
        .iter()
        .map(|v| match v {
            Value::Text(b) | Value::Blob(b) => b.len() + 8,
            _ => 8,
        })
        .sum()
}

/// What [`run_query_streaming`] did.
#[derive(Debug)]
pub struct StreamedQuery {
    /// The output column names.
    pub names: Vec<String>,
    /// Rows handed to the caller.
    pub rows: u64,
    /// Whether they were streamed during the scan (else collected and handed over after it).
    pub streamed: bool,
    /// Per executor, in range order, the seconds it waited for room in its channel (for the
    /// coordinator to write the rows of the ranges before it); empty when not streamed.
    pub waited_s: Vec<f64>,
    /// The scan's report.
    pub report: RunReport,
}

/// Runs `query` over `table` and hands every result row, in the result's order, to `on_row`:
/// during the scan for a query that [`streams`] (see the module docs), after it for the
/// others (which need every row or group before the first is known). An error from `on_row`
/// stops the scan and is returned as [`QueryError::Output`].
pub fn run_query_streaming(
    table: &TablePlan,
    query: QueryPlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    mut on_row: impl FnMut(&[Value]) -> std::io::Result<()>,
) -> Result<StreamedQuery, QueryError> {
    run(
        table,
        query,
        settings,
        executors,
        None,
        &mut |row| match row {
            ResultRow::Values(v) => on_row(v),
            ResultRow::Rendered(_) => unreachable!("no renderer was given"),
        },
    )
}

/// [`run_query_streaming`] with every row rendered by `render`, in the executors' threads for
/// a query that [`streams`] (on the calling thread for the others), and handed to `on_row` as
/// bytes, in the result's order.
pub fn run_query_rendered(
    table: &TablePlan,
    query: QueryPlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    render: Arc<dyn RowRender>,
    mut on_row: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<StreamedQuery, QueryError> {
    let mut buf = Vec::new();
    let here = Arc::clone(&render);
    run(
        table,
        query,
        settings,
        executors,
        Some(Renderer(render)),
        &mut |row| match row {
            ResultRow::Rendered(b) => on_row(b),
            ResultRow::Values(v) => {
                buf.clear();
                here.render(v, &mut buf);
                on_row(&buf)
            }
        },
    )
}

fn run(
    table: &TablePlan,
    query: QueryPlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    render: Option<Renderer>,
    on_row: &mut dyn FnMut(ResultRow<'_>) -> std::io::Result<()>,
) -> Result<StreamedQuery, QueryError> {
    if !streams(&query) || table.read.needs_verification() {
        let out = run_query(table, query, settings, executors)?;
        for row in &out.rows {
            on_row(ResultRow::Values(row)).map_err(QueryError::Output)?;
        }
        return Ok(StreamedQuery {
            names: out.names,
            rows: out.rows.len() as u64,
            streamed: false,
            waited_s: Vec::new(),
            report: out.report,
        });
    }
    let query = Arc::new(query);
    let usable = table.header.usable_size();
    let stop = Arc::new(AtomicBool::new(false));
    // One 'now' for the whole statement, whichever executor evaluates it.
    let now = dates::statement_time();
    let mut receivers = Vec::with_capacity(executors.len());
    let waited: Vec<Arc<AtomicU64>> = (0..executors.len()).map(|_| Arc::default()).collect();
    let kernel_for = |index: usize| {
        let (tx, rx) = bounded(CHANNEL_CHUNKS);
        receivers.push(rx);
        let mut stream = RowStream::new(
            tx,
            Arc::clone(&stop),
            query.keep(),
            Arc::clone(&waited[index]),
        );
        stream.render = render.clone();
        QueryKernel::streaming(Arc::clone(&query), usable, stream, now)
    };
    // The kernels are all made before `consume` runs (one per executor, as they start).
    let mut kernels: Vec<QueryKernel> = (0..executors.len()).map(kernel_for).collect();
    kernels.reverse();
    let offset = query.offset;
    let limit = query.limit.unwrap_or(u64::MAX);
    let (_, report, written) = run_scan_with(
        table,
        settings,
        executors,
        RangeOrder::Key,
        |_| kernels.pop().expect("one kernel per executor"),
        || drain(receivers, offset, limit, &stop, on_row),
    )?;
    let rows = written.map_err(QueryError::Output)?;
    Ok(StreamedQuery {
        names: query.names.clone(),
        rows,
        streamed: true,
        waited_s: waited
            .iter()
            .map(|w| w.load(Ordering::Relaxed) as f64 / 1e9)
            .collect(),
        report,
    })
}

/// The coordinator's side: the executors' channels in range order, `offset` rows skipped and
/// at most `limit` written. Returns the rows written (or the error writing) and how many
/// executors, from range 0, the result depends on.
fn drain(
    receivers: Vec<Receiver<StreamMsg>>,
    offset: u64,
    limit: u64,
    stop: &AtomicBool,
    on_row: &mut dyn FnMut(ResultRow<'_>) -> std::io::Result<()>,
) -> (std::io::Result<u64>, usize) {
    let n = receivers.len();
    let (mut skipped, written) = (0u64, std::cell::Cell::new(0u64));
    if limit == 0 {
        // SQLite computes nothing for LIMIT 0: no row, and no error can come.
        stop.store(true, Ordering::Relaxed);
        return (Ok(0), 0);
    }
    // Hands one row over; `Some` when the drain ends here.
    let mut take = |row: ResultRow<'_>, i: usize| -> Option<(std::io::Result<u64>, usize)> {
        if skipped < offset {
            skipped += 1;
            return None;
        }
        if let Err(e) = on_row(row) {
            stop.store(true, Ordering::Relaxed);
            return Some((Err(e), 0));
        }
        written.set(written.get() + 1);
        // Ranges before this one are complete; nothing after matters.
        (written.get() == limit).then(|| {
            stop.store(true, Ordering::Relaxed);
            (Ok(written.get()), i)
        })
    };
    for (i, rx) in receivers.into_iter().enumerate() {
        loop {
            match rx.recv() {
                Ok(StreamMsg::Rows(chunk)) => {
                    for row in &chunk {
                        if let Some(end) = take(ResultRow::Values(row), i) {
                            return end;
                        }
                    }
                }
                Ok(StreamMsg::Rendered { bytes, ends }) => {
                    let mut from = 0;
                    for &to in &ends {
                        if let Some(end) = take(ResultRow::Rendered(&bytes[from..to]), i) {
                            return end;
                        }
                        from = to;
                    }
                }
                Ok(StreamMsg::End) => break,
                // The executor failed: its error ends the query, after the rows before it.
                Err(_) => return (Ok(written.get()), i + 1),
            }
        }
    }
    (Ok(written.get()), n)
}
