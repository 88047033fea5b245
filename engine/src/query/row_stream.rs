//! The executor's side of a streamed projection ([`super::stream`]): [`RowStream`] takes the
//! rows of each complete page, in rowid order, and sends them to the coordinator in chunks
//! through a bounded channel, rendered to bytes when the caller gave a [`RowRender`], or built
//! into the embedder's batches by its [`BatchSink`] (which the kernel may also feed a page's
//! decoded cells directly: [`RowStream::append_page`]).
//!
//! Layering: below the kernel (which holds a [`RowStream`]) and the coordinator's side in
//! [`super::stream`], which imports both.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

// async-channel rather than crossbeam: the executor side blocks as before, and a consumer can
// also await the same channel from an async runtime (`crate::partitions`).
use async_channel::{Sender, TrySendError};

use crate::error::Error;
use crate::value::Value;

pub(super) use super::sink::Renderer;
pub use super::sink::RowRender;
use super::sink::{BatchSink, RenderSink, RenderedRows, SinkRows};

/// One output row of a plain query before the final ordering.
#[derive(Debug, Clone, PartialEq)]
pub struct OutRow {
    /// The `ORDER BY` key values.
    pub keys: Vec<Value>,
    /// The row's rowid (the tie-breaker).
    pub rowid: i64,
    /// The output values, or, without `ORDER BY`, the row's failure kept in its place (a
    /// marked row): only the coordinator knows which rows an `OFFSET` skips.
    pub values: Result<Vec<Value>, RowFailure>,
}

/// A row of a plain query without `ORDER BY` whose evaluation failed, kept in its place in
/// rowid order as a marked row: SQLite computes the output columns only of the rows the
/// `OFFSET` does not skip (`selectInnerLoop` codes the `OFFSET` test first), but evaluates
/// `WHERE` for every row until the `LIMIT` is reached.
#[derive(Debug, Clone, PartialEq)]
pub struct RowFailure {
    /// The leaf page holding the row.
    pub page: u32,
    /// The row's rowid.
    pub rowid: i64,
    /// SQLite's error message.
    pub what: String,
    /// Whether it failed in its output columns (an `OFFSET` that skips the row drops the
    /// failure) rather than before them (`WHERE`, a column's `DEFAULT`: the query fails
    /// wherever the scan reaches the row).
    pub in_output: bool,
    /// `ORDER BY ... LIMIT`: how many rows before it in its range (rowid order) rank before
    /// or with it; SQLite computes its output columns only if fewer than `LIMIT + OFFSET`
    /// rows before it in the whole table do (see `kernel::resolve_marks`). `None` until its
    /// page is done, and for the other queries.
    pub ahead: Option<u64>,
}

impl RowFailure {
    /// The query's error ([`Error::Eval`]: the row's values fail, the file is sound), as an
    /// executor reports a failing row: `cpu` ran the row's range.
    pub fn into_error(self, cpu: usize, path: &std::path::Path) -> Error {
        Error::Eval {
            cpu,
            path: path.to_path_buf(),
            page: self.page,
            rowid: self.rowid,
            message: self.what,
        }
    }
}

/// Rows per chunk sent from an executor to the coordinator (at most; a chunk is cut only at
/// the end of a page, so it can exceed this by one page's rows).
pub const CHUNK_ROWS: usize = 256;

/// Bytes of values per chunk (approximately: text and blob lengths, 8 per other value).
pub const CHUNK_BYTES: usize = 256 * 1024;

/// Chunks each executor's channel holds before the executor waits.
pub const CHANNEL_CHUNKS: usize = 4;

/// Bytes per chunk of rendered rows (whatever their number: rendered rows cost their bytes).
pub const RENDERED_CHUNK_BYTES: usize = 64 * 1024;

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
    /// A marked row, after the rows before it: the coordinator drops it when the `OFFSET`
    /// skips it (a failure in its output columns), else the query fails with its error.
    Failed(RowFailure),
    /// A batch an embedder's [`BatchSink`] built, of `rows` rows, in rowid order (its failure
    /// last, when the sink could not take a value).
    Built {
        /// Rows in the batch.
        rows: usize,
        /// The sink's batch.
        batch: Box<dyn std::any::Any + Send>,
    },
    /// The executor's range is done (or it has the rows its `LIMIT` needs). A channel that
    /// closes without it belongs to an executor that failed.
    End,
}

/// The kernel's side of a stream: the rows of complete pages not yet sent, and the channel.
/// Dropped without [`RowStream::finish`] (the executor failed), it still sends the rows of the
/// pages before the failure, then closes the channel without [`StreamMsg::End`].
#[derive(Debug)]
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
    /// Whether [`RowStream::finish`] sends [`StreamMsg::End`] (not for a stream that is one
    /// of several an executor sends through its channel: the units of a scan of several files).
    sends_end: bool,
    /// Nanoseconds spent waiting for room in the channel (the cost of the order).
    waited_ns: Arc<AtomicU64>,
    /// Builds the embedder's batches, when it gave a sink: rows then go to it as each page is
    /// done, and its batches are sent when it is full.
    sink: Option<SinkSlot>,
}

/// An executor's [`BatchSink`], whether it failed, and whether its failure was sent (nothing
/// is sent after it).
struct SinkSlot {
    sink: Box<dyn BatchSink>,
    failed: bool,
    closed: bool,
    /// The sink is a [`RenderSink`]: its chunks go as [`StreamMsg::Rendered`].
    rendered: bool,
}

impl std::fmt::Debug for SinkSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkSlot")
            .field("held", &self.sink.len())
            .field("failed", &self.failed)
            .finish()
    }
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
            sink: None,
            tx,
            stop,
            keep: keep.unwrap_or(u64::MAX),
            sent: 0,
            sealed: Vec::new(),
            sealed_bytes: 0,
            gone: false,
            ended: false,
            sends_end: true,
        }
    }

    /// The stream, its [`RowStream::finish`] sending no [`StreamMsg::End`]: the executor's
    /// channel carries more streams after it, and whoever sends the last ends it.
    pub(crate) fn without_end(mut self) -> Self {
        self.sends_end = false;
        self
    }

    /// Renders the rows before they are sent (`None`: sends their values): the renderer runs
    /// as the stream's sink ([`RenderSink`]), and its chunks go as [`StreamMsg::Rendered`].
    pub(super) fn set_render(&mut self, render: Option<Renderer>) {
        if let Some(render) = render {
            self.sink = Some(SinkSlot {
                sink: Box::new(RenderSink::new(render, usize::MAX, RENDERED_CHUNK_BYTES)),
                failed: false,
                closed: false,
                rendered: true,
            });
        }
    }

    /// Hands the rows to `sink` rather than sending them as values (see [`BatchSink`]).
    pub fn set_sink(&mut self, sink: Box<dyn BatchSink>) {
        self.sink = Some(SinkSlot {
            sink,
            failed: false,
            closed: false,
            rendered: false,
        });
    }

    /// Whether rows go to an embedder's [`BatchSink`].
    pub fn has_sink(&self) -> bool {
        self.sink.is_some()
    }

    /// How many more rows this executor may produce (`LIMIT + OFFSET` less those produced),
    /// given `pending` rows of the page being decoded.
    pub fn room(&self, pending: usize) -> u64 {
        self.keep.saturating_sub(self.produced(pending))
    }

    /// Rows produced so far: sent, sealed, and `pending` rows of the page being decoded.
    pub fn produced(&self, pending: usize) -> u64 {
        self.sent
            .saturating_add(self.sealed.len() as u64)
            .saturating_add(pending as u64)
    }

    /// Whether the executor should keep reading, given `pending` rows of the page being
    /// decoded.
    pub fn wants_more(&self, pending: usize) -> bool {
        !self.gone
            && !self.stop.load(Ordering::Relaxed)
            && !self.sink.as_ref().is_some_and(|s| s.failed)
            && self.produced(pending) < self.keep
    }

    /// A page's selected rows straight from its decoded cells, in rowid order, to the sink
    /// (the kernel keeps them within [`RowStream::room`]); sends its batch when it is full.
    pub(super) fn append_page(&mut self, rows: &SinkRows<'_>) {
        let Some(slot) = self.sink.as_mut() else {
            unreachable!("pages go straight to a sink only when there is one");
        };
        if slot.failed || rows.is_empty() {
            return;
        }
        self.sent += rows.len() as u64;
        if !slot.sink.append(rows) {
            slot.failed = true;
        }
        if slot.failed || slot.sink.is_full() {
            self.flush_sink();
        }
    }

    /// Sends the sink's batch, if it holds rows or its failure.
    fn flush_sink(&mut self) {
        let Some(slot) = self.sink.as_mut() else {
            return;
        };
        if slot.closed || (slot.sink.is_empty() && !slot.failed) {
            return;
        }
        slot.closed = slot.failed;
        let rows = slot.sink.len();
        let batch = slot.sink.take();
        let msg = if slot.rendered {
            let Ok(chunk) = batch.downcast::<RenderedRows>() else {
                unreachable!("a render sink takes rendered rows");
            };
            let RenderedRows { bytes, ends } = *chunk;
            StreamMsg::Rendered { bytes, ends }
        } else {
            StreamMsg::Built { rows, batch }
        };
        self.push(msg);
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
        if self.sink.is_some()
            || self.sealed.len() >= CHUNK_ROWS.min(room)
            || self.sealed_bytes >= CHUNK_BYTES
        {
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
        if self.sink.is_some() {
            self.send_to_sink();
            return;
        }
        // The rows in runs between the marked rows, each marked row in its place.
        let mut rows = std::mem::take(&mut self.sealed);
        let mut run = Vec::with_capacity(rows.len());
        for r in rows.drain(..) {
            match r.values {
                Ok(values) => run.push(values),
                Err(failure) => {
                    if !run.is_empty() {
                        self.push(StreamMsg::Rows(std::mem::take(&mut run)));
                    }
                    self.push(StreamMsg::Failed(failure));
                }
            }
        }
        if !run.is_empty() {
            self.push(StreamMsg::Rows(run));
        }
        // The allocation is reused for the next rows.
        self.sealed = rows;
    }

    /// The sealed rows to the sink, in runs between the marked rows (each marked row sent in
    /// its place, after the sink's batch of the rows before it); the sink's batch is sent
    /// when it is full.
    fn send_to_sink(&mut self) {
        let mut rows = std::mem::take(&mut self.sealed);
        let mut values = Vec::with_capacity(rows.len());
        let mut rowids = Vec::with_capacity(rows.len());
        for r in rows.drain(..) {
            match r.values {
                Ok(v) => {
                    values.push(v);
                    rowids.push(r.rowid);
                }
                Err(failure) => {
                    self.sink_values(&mut values, &mut rowids);
                    self.flush_sink();
                    self.push(StreamMsg::Failed(failure));
                }
            }
        }
        self.sink_values(&mut values, &mut rowids);
        if let Some(slot) = &self.sink {
            if slot.failed || slot.sink.is_full() {
                self.flush_sink();
            }
        }
        self.sealed = rows;
    }

    /// Appends evaluated rows to the sink (emptying `values` and `rowids`).
    fn sink_values(&mut self, values: &mut Vec<Vec<Value>>, rowids: &mut Vec<i64>) {
        if let Some(slot) = self.sink.as_mut() {
            if !values.is_empty()
                && !slot.failed
                && !slot.sink.append(&SinkRows::values(values, rowids))
            {
                slot.failed = true;
            }
        }
        values.clear();
        rowids.clear();
    }

    /// Sends one message, waiting for room in the channel if need be.
    fn push(&mut self, msg: StreamMsg) {
        if self.gone {
            return;
        }
        match self.tx.try_send(msg) {
            Ok(()) => {}
            Err(TrySendError::Full(msg)) => {
                let waiting = Instant::now();
                self.gone = self.tx.send_blocking(msg).is_err();
                let ns = u64::try_from(waiting.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.waited_ns.fetch_add(ns, Ordering::Relaxed);
            }
            Err(TrySendError::Closed(_)) => self.gone = true,
        }
    }

    /// Ends the executor's stream: the last rows, then [`StreamMsg::End`].
    pub fn finish(&mut self) {
        self.send();
        self.flush_sink();
        if !self.gone && self.sends_end {
            let _ = self.tx.send_blocking(StreamMsg::End);
        }
        self.ended = true;
    }
}

/// A copy with the same channel and counters. Streaming kernels are made one per executor and
/// never cloned; a stream with a sink (which cannot be copied) is not clonable.
impl Clone for RowStream {
    fn clone(&self) -> Self {
        assert!(
            self.sink.is_none(),
            "a row stream with a batch sink is made once per executor, never cloned"
        );
        RowStream {
            tx: self.tx.clone(),
            stop: Arc::clone(&self.stop),
            keep: self.keep,
            sent: self.sent,
            sealed: self.sealed.clone(),
            sealed_bytes: self.sealed_bytes,
            gone: self.gone,
            ended: self.ended,
            sends_end: self.sends_end,
            waited_ns: Arc::clone(&self.waited_ns),
            sink: None,
        }
    }
}

impl Drop for RowStream {
    fn drop(&mut self) {
        if !self.ended {
            self.send();
            self.flush_sink();
        }
    }
}

fn row_bytes(r: &OutRow) -> usize {
    r.values.as_ref().map_or(64, |values| {
        values
            .iter()
            .map(|v| match v {
                Value::Text(b) | Value::Blob(b) => b.len() + 8,
                _ => 8,
            })
            .sum()
    })
}
