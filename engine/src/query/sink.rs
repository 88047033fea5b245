//! Batches an embedder builds on the executors: a [`BatchSink`] takes a streamed projection's
//! rows where they are decoded, column by column, and hands its own batches (Arrow record
//! batches, for the DataFusion provider) through the executor's channel.
//!
//! A plain projection of plain columns whose filter cannot fail ([`super::batch::batchable`])
//! reaches the sink a page at a time straight from the decoded cells ([`SinkRows`] over the
//! page's selected rows): no row is built and no value is copied before the sink copies it
//! into its own arrays. Other projections (computed columns, fallible filters, pages with
//! records completed from overflow pages) reach it as the rows the kernel evaluated, in the
//! same rowid order. Either way, building the batches runs in the executors' threads, in
//! parallel, and the consumer only receives them.
//!
//! A caller's [`RowRender`] (the command line's output formats) runs as a sink too
//! ([`RenderSink`]): the rows of a streamed projection are rendered to bytes from the values
//! borrowed from the page, with no row built, on the executors.
//!
//! Layering: below [`super::row_stream`], which holds an executor's sink, and
//! [`super::kernel`], which feeds it; above [`super::batch`].

use std::any::Any;
use std::sync::Arc;

use crate::value::{Value, ValueRef};

use super::batch::{Batch, Selection};

/// One executor's batch builder (see the module docs), made by the embedder for each
/// partition and run on that executor's thread.
pub trait BatchSink: Send {
    /// Appends `rows`, in order. `false` when the sink cannot take a value (one that does
    /// not fit its column, say): the executor then sends what the sink holds (its failure
    /// included, in the sink's own batch) and stops, as at a `LIMIT`.
    fn append(&mut self, rows: &SinkRows<'_>) -> bool;

    /// Rows held, not yet taken.
    fn len(&self) -> usize;

    /// Whether no row is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the held rows make a batch to send now (a row count or a byte size).
    fn is_full(&self) -> bool;

    /// The held rows as the embedder's batch (with the failure, after an `append` that
    /// returned `false`), leaving the sink empty. The consumer receives it as
    /// [`crate::Part::Built`].
    fn take(&mut self) -> Box<dyn Any + Send>;
}

/// Makes the sink of one unit of a scan of several files
/// ([`crate::scan_files_partitions_into`]): called on the executor's thread with its
/// partition's index and the unit's file as listed.
pub type FileSinkFactory = dyn Fn(usize, &std::path::Path) -> Box<dyn BatchSink> + Send + Sync;

/// Rows handed to a [`BatchSink`]: some of a page's decoded cells, or evaluated rows.
pub struct SinkRows<'a> {
    inner: Inner<'a>,
}

enum Inner<'a> {
    /// The selected rows of a decoded page; output column `j` is plan slot `outputs[j]`.
    Page {
        batch: &'a Batch<'a, 'a>,
        sel: &'a Selection,
        outputs: &'a [usize],
        rowids: &'a [i64],
    },
    /// Rows of values, one per output column, and their rowids.
    Values {
        rows: &'a [Vec<Value>],
        rowids: &'a [i64],
    },
}

impl<'a> SinkRows<'a> {
    /// The selected rows `sel` of a decoded page whose rows have the rowids `rowids`, output
    /// column `j` being slot `outputs[j]`.
    pub(super) fn page(
        batch: &'a Batch<'a, 'a>,
        sel: &'a Selection,
        outputs: &'a [usize],
        rowids: &'a [i64],
    ) -> Self {
        SinkRows {
            inner: Inner::Page {
                batch,
                sel,
                outputs,
                rowids,
            },
        }
    }

    /// Evaluated rows and their rowids.
    pub(super) fn values(rows: &'a [Vec<Value>], rowids: &'a [i64]) -> Self {
        debug_assert_eq!(rows.len(), rowids.len());
        SinkRows {
            inner: Inner::Values { rows, rowids },
        }
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        match &self.inner {
            Inner::Page { sel, .. } => sel.len(),
            Inner::Values { rows, .. } => rows.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many output columns each row has.
    pub fn width(&self) -> usize {
        match &self.inner {
            Inner::Page { outputs, .. } => outputs.len(),
            Inner::Values { rows, .. } => rows.first().map_or(0, Vec::len),
        }
    }

    /// Row `k`'s rowid (for messages).
    pub fn rowid(&self, k: usize) -> i64 {
        match &self.inner {
            Inner::Page { sel, rowids, .. } => rowids[sel[k] as usize],
            Inner::Values { rowids, .. } => rowids[k],
        }
    }

    /// Output column `j` of every row, into `out` (cleared first): values borrowed from the
    /// page or the rows, with the column's affinity applied as SQLite reads it (an integer
    /// stored in a REAL column reads as a real).
    pub fn column(&self, j: usize, out: &mut Vec<ValueRef<'a>>) {
        out.clear();
        match &self.inner {
            Inner::Page {
                batch,
                sel,
                outputs,
                ..
            } => {
                out.resize(sel.len(), ValueRef::Null);
                batch.column(outputs[j], sel, out);
            }
            Inner::Values { rows, .. } => out.extend(rows.iter().map(|r| r[j].as_ref())),
        }
    }
}

/// Renders a result row as output bytes. Given to `stream::run_query_rendered`, it runs in the
/// executors' threads as they stream, so the rows are formatted in parallel and the
/// coordinator only writes bytes in order.
pub trait RowRender: Send + Sync {
    /// Appends the bytes of `row` to `out`.
    fn render(&self, row: &[ValueRef<'_>], out: &mut Vec<u8>);
}

/// A shared [`RowRender`].
#[derive(Clone)]
pub(super) struct Renderer(pub(super) Arc<dyn RowRender>);

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Renderer")
    }
}

/// Rendered rows: row `i` is `bytes[ends[i - 1]..ends[i]]` (what a [`RenderSink`] takes).
#[derive(Debug, Default)]
pub(super) struct RenderedRows {
    pub bytes: Vec<u8>,
    pub ends: Vec<usize>,
}

/// A [`BatchSink`] that renders its rows with a [`RowRender`] as they come (see the module
/// docs); full at `max_rows` rows or `max_bytes` bytes.
pub(super) struct RenderSink {
    render: Renderer,
    held: RenderedRows,
    max_rows: usize,
    max_bytes: usize,
}

impl RenderSink {
    /// A sink rendering with `render`, full at `max_rows` rows or `max_bytes` bytes.
    pub(super) fn new(render: Renderer, max_rows: usize, max_bytes: usize) -> Self {
        RenderSink {
            render,
            held: RenderedRows::default(),
            max_rows,
            max_bytes,
        }
    }
}

impl BatchSink for RenderSink {
    fn append(&mut self, rows: &SinkRows<'_>) -> bool {
        let width = rows.width();
        let RenderedRows { bytes, ends } = &mut self.held;
        match &rows.inner {
            Inner::Values { rows, .. } => {
                let mut row: Vec<ValueRef<'_>> = Vec::with_capacity(width);
                for values in rows.iter() {
                    row.clear();
                    row.extend(values.iter().map(Value::as_ref));
                    self.render.0.render(&row, bytes);
                    ends.push(bytes.len());
                }
            }
            Inner::Page { .. } => {
                let mut columns: Vec<Vec<ValueRef<'_>>> = vec![Vec::new(); width];
                for (j, c) in columns.iter_mut().enumerate() {
                    rows.column(j, c);
                }
                let mut row: Vec<ValueRef<'_>> = Vec::with_capacity(width);
                for k in 0..rows.len() {
                    row.clear();
                    row.extend(columns.iter().map(|c| c[k]));
                    self.render.0.render(&row, bytes);
                    ends.push(bytes.len());
                }
            }
        }
        true
    }

    fn len(&self) -> usize {
        self.held.ends.len()
    }

    fn is_full(&self) -> bool {
        self.held.ends.len() >= self.max_rows || self.held.bytes.len() >= self.max_bytes
    }

    fn take(&mut self) -> Box<dyn Any + Send> {
        let cap = self.held.bytes.len();
        let rows = self.held.ends.len();
        let taken = std::mem::take(&mut self.held);
        self.held.bytes.reserve(cap);
        self.held.ends.reserve(rows);
        Box::new(taken)
    }
}
