//! A grouped query's rows streamed in key order, in bounded memory: without `ORDER BY` (and
//! without `DISTINCT` or a window stage) SQLite writes the groups in key order, so the merge
//! need not hold the result. The key space is cut into many small slices (about
//! [`SLICE_GROUPS`] groups each, as [`super::GroupQuery::merge`] cuts it into one per
//! thread); the threads take the slices in order, each merging, finishing and (with a
//! renderer) rendering one slice at a time, and the coordinator writes slice after slice as
//! their rows come. A slice is started only when the coordinator has reached the one
//! `threads - 1` before it, so at most a slice per thread of finished rows is held, however
//! many groups there are: with groups spilled beyond the memory budget
//! ([`super::super::group_spill`]), any group count completes in bounded memory.
//!
//! The answer is [`super::GroupQuery::merge`]'s: the same rows in the same order, the
//! `OFFSET` skipping groups after `HAVING` (a skipped group's failing output column is no
//! error), the first failure before the `LIMIT` is filled ending the query after the rows
//! before it, nothing merged past the `LIMIT`.

use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Mutex;

use crossbeam_channel::Sender;

use crate::value::{Value, ValueRef};

use super::super::dates;
use super::super::error::QueryError;
use super::super::groups::Group;
use super::super::sink::{RenderedRows, Renderer};
use super::super::sort::{SortBuffer, SortSpace, SortedMerge};
use super::super::stream::ResultRow;
use super::{merge_key_order, split_runs, Cursor, GroupError, GroupQuery, Run};

/// About how many groups a slice holds: the rows a thread may have finished ahead of the
/// writer.
pub const SLICE_GROUPS: usize = 32 * 1024;

/// The most slices a merge is cut into (each spilled run is read from a mark per slice).
const MAX_SLICES: usize = 4096;

/// Rows per message from a slice's thread.
const CHUNK_ROWS: usize = 4096;

/// What a slice's thread sends the writer, in order.
enum Item {
    /// Rows as values (no renderer).
    Values(Vec<Vec<Value>>),
    /// Rows rendered.
    Rendered(RenderedRows),
    /// The next group's output columns failed: the query's error unless the `OFFSET` skips
    /// the group.
    RowFailed(GroupError),
    /// The slice is done: the failure that ended it (finishing an aggregate, `HAVING`,
    /// reading a spilled run), and how many groups it merged.
    End {
        failed: Option<GroupError>,
        groups: u64,
    },
}

/// What [`GroupQuery::stream`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamedGroups {
    /// Rows handed to the caller.
    pub rows: u64,
    /// Groups merged (fewer when a `LIMIT` or a failure ended the merge early).
    pub groups: u64,
}

/// A slice's rows as they are gathered for one message.
struct Chunk<'a> {
    render: Option<&'a Renderer>,
    values: Vec<Vec<Value>>,
    rendered: RenderedRows,
}

impl<'a> Chunk<'a> {
    fn new(render: Option<&'a Renderer>) -> Self {
        Chunk {
            render,
            values: Vec::new(),
            rendered: RenderedRows::default(),
        }
    }

    fn len(&self) -> usize {
        match self.render {
            Some(_) => self.rendered.ends.len(),
            None => self.values.len(),
        }
    }

    fn push(&mut self, row: Vec<Value>) {
        match self.render {
            Some(r) => {
                let refs: smallvec::SmallVec<[ValueRef<'_>; 8]> =
                    row.iter().map(Value::as_ref).collect();
                r.0.render(&refs, &mut self.rendered.bytes);
                self.rendered.ends.push(self.rendered.bytes.len());
            }
            None => self.values.push(row),
        }
    }

    /// Sends the rows gathered, if any; false when nobody listens any more.
    fn flush(&mut self, out: &Sender<Item>) -> bool {
        if self.len() == 0 {
            return true;
        }
        let item = match self.render {
            Some(_) => Item::Rendered(std::mem::take(&mut self.rendered)),
            None => Item::Values(std::mem::take(&mut self.values)),
        };
        out.send(item).is_ok()
    }
}

impl GroupQuery<'_> {
    /// Whether [`GroupQuery::stream`] answers this query: groups with keys, written in key
    /// order (no `ORDER BY`, no `DISTINCT`), without a window stage over them.
    pub fn streams(&self) -> bool {
        self.in_order() && !self.collations.is_empty() && self.plan.windows.is_none()
    }

    /// Merges the runs (sorted by key, in range order) on up to `threads` threads, in
    /// slices, and hands every result row to `on_row` in key order as the slices are done:
    /// rendered by `render` on the merging threads when it is given. Only for a query that
    /// [`GroupQuery::streams`]. See the module docs.
    pub(in crate::query) fn stream(
        &self,
        runs: Vec<Run>,
        threads: usize,
        render: Option<&Renderer>,
        on_row: &mut dyn FnMut(ResultRow<'_>) -> std::io::Result<()>,
    ) -> Result<StreamedGroups, QueryError> {
        debug_assert!(self.streams());
        let threads = threads.max(1);
        let mut runs = runs;
        let total: usize = runs.iter().map(Run::len).sum();
        let wanted = (total / SLICE_GROUPS).clamp(threads, MAX_SLICES);
        let slices: Vec<Mutex<Option<Vec<Cursor<'_>>>>> =
            split_runs(&mut runs, &self.collations, wanted)
                .into_iter()
                .map(|s| Mutex::new(Some(s)))
                .collect();
        let outputs: Vec<_> = slices
            .iter()
            .map(|_| crossbeam_channel::unbounded::<Item>())
            .collect();
        let (tickets, taken) = crossbeam_channel::unbounded::<usize>();
        let stop = AtomicBool::new(false);
        let now = dates::this_thread_statement_time();
        std::thread::scope(|scope| {
            for t in 0..threads.min(slices.len()) {
                let (taken, outputs, slices, stop) = (taken.clone(), &outputs, &slices, &stop);
                let spawned = std::thread::Builder::new()
                    .name(format!("corescan-groups{t}"))
                    .spawn_scoped(scope, move || {
                        if let Some(now) = now {
                            dates::set_statement_time(now);
                        }
                        for index in taken {
                            let out = &outputs[index].0;
                            let _failing = Failing(out);
                            let cursors = slices[index]
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .take()
                                .expect("each slice is taken once");
                            self.stream_slice(cursors, render, out, stop);
                        }
                    });
                if let Err(e) = spawned {
                    // The threads started take every slice; with none, the writer says why.
                    if t == 0 {
                        let _ = outputs[0].0.send(Item::End {
                            failed: Some(format!("could not start a thread to merge groups: {e}")),
                            groups: 0,
                        });
                    }
                    break;
                }
            }
            drop(taken);
            let written = self.write_slices(&outputs, &tickets, threads, on_row);
            // The merging threads stop at their next group, and take no new slice.
            stop.store(true, AtomicOrdering::Relaxed);
            drop(tickets);
            written
        })
    }

    /// The writer's side of [`GroupQuery::stream`]: issues the slices to the threads, at
    /// most `threads` ahead of the one being written, and writes their rows in order with
    /// the `OFFSET`, `LIMIT` and failures applied as the serial merge applies them.
    fn write_slices(
        &self,
        outputs: &[(Sender<Item>, crossbeam_channel::Receiver<Item>)],
        tickets: &Sender<usize>,
        threads: usize,
        on_row: &mut dyn FnMut(ResultRow<'_>) -> std::io::Result<()>,
    ) -> Result<StreamedGroups, QueryError> {
        let (offset, limit) = (self.offset(), self.limit());
        let mut done = StreamedGroups { rows: 0, groups: 0 };
        let mut skipped = 0usize;
        let mut issued = 0usize;
        let full =
            |done: &StreamedGroups| usize::try_from(done.rows).unwrap_or(usize::MAX) >= limit;
        for (index, (_, received)) in outputs.iter().enumerate() {
            while issued < outputs.len() && issued < index + threads {
                if tickets.send(issued).is_err() {
                    break;
                }
                issued += 1;
            }
            loop {
                let item = received
                    .recv()
                    .expect("the writer holds every slice's sender");
                match item {
                    Item::Values(rows) => {
                        for row in rows {
                            if full(&done) {
                                return Ok(done);
                            }
                            if skipped < offset {
                                skipped += 1;
                                continue;
                            }
                            on_row(ResultRow::Values(&row)).map_err(QueryError::Output)?;
                            done.rows += 1;
                        }
                    }
                    Item::Rendered(chunk) => {
                        let mut from = 0;
                        for &to in &chunk.ends {
                            if full(&done) {
                                return Ok(done);
                            }
                            if skipped < offset {
                                skipped += 1;
                            } else {
                                on_row(ResultRow::Rendered(&chunk.bytes[from..to]))
                                    .map_err(QueryError::Output)?;
                                done.rows += 1;
                            }
                            from = to;
                        }
                    }
                    Item::RowFailed(e) => {
                        if full(&done) {
                            return Ok(done);
                        }
                        if skipped < offset {
                            skipped += 1;
                            continue;
                        }
                        return Err(QueryError::Eval(e));
                    }
                    Item::End { failed, groups } => {
                        done.groups += groups;
                        match failed {
                            Some(e) if !full(&done) => return Err(QueryError::Eval(e)),
                            _ => break,
                        }
                    }
                }
            }
        }
        Ok(done)
    }

    /// Merges, finishes and sends one slice to `out`, as [`GroupQuery::merge`]'s slices are
    /// merged without `ORDER BY`.
    fn stream_slice(
        &self,
        cursors: Vec<Cursor<'_>>,
        render: Option<&Renderer>,
        out: &Sender<Item>,
        stop: &AtomicBool,
    ) {
        // No slice needs more than OFFSET + LIMIT groups past HAVING: the slices before it
        // can only take some of those places.
        let enough = self.offset().saturating_add(self.limit());
        let mut passed = 0usize;
        let mut chunk = Chunk::new(render);
        let mut listening = true;
        // A group's key values, then its aggregates' results: one buffer for every group.
        let mut slots: Vec<Value> = Vec::new();
        let each = |_: usize, g: Group| -> Result<bool, GroupError> {
            if passed >= enough || !listening || stop.load(AtomicOrdering::Relaxed) {
                return Ok(false);
            }
            // Left out by HAVING: the merge goes on.
            let Some(refs) = self.finish_group(g, &mut slots)? else {
                return Ok(true);
            };
            passed += 1;
            match self.output_values(&refs) {
                Ok(row) => {
                    chunk.push(row);
                    if chunk.len() >= CHUNK_ROWS {
                        listening = chunk.flush(out);
                    }
                }
                Err(e) => {
                    listening = chunk.flush(out) && out.send(Item::RowFailed(e)).is_ok();
                }
            }
            Ok(true)
        };
        let merged = merge_key_order(
            cursors,
            &self.collations,
            |into, later| self.combine(into, later),
            each,
            |e| e.to_string(),
        );
        let (failed, groups) = match merged {
            Ok(n) => (None, n as u64),
            Err(e) => (Some(e), 0),
        };
        if chunk.flush(out) {
            let _ = out.send(Item::End { failed, groups });
        }
    }
}

/// Ends a slice with a failure when its thread panics, so that the writer does not wait for
/// it (the panic is raised again at the scope's end).
struct Failing<'a>(&'a Sender<Item>);

impl Drop for Failing<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.send(Item::End {
                failed: Some("a thread merging groups panicked".into()),
                groups: 0,
            });
        }
    }
}

impl GroupQuery<'_> {
    /// Whether [`GroupQuery::sorted`] answers this query: groups with keys whose rows are
    /// ordered by something other than their keys (`ORDER BY`, or `DISTINCT`'s first rows)
    /// without a `LIMIT` (with one, the merge keeps its best rows), without a window stage.
    pub fn sorts(&self) -> bool {
        !self.in_order()
            && self.plan.limit.is_none()
            && !self.collations.is_empty()
            && self.plan.windows.is_none()
    }

    /// Merges and finishes the runs (sorted by key, in range order) on up to `threads`
    /// threads, one slice of the key space each, into the buffers of a full sort within
    /// `space` (spilled to its scratch directory beyond its budget): their merge hands the
    /// rows over in the result's order (`ORDER BY`, ties in key order; `DISTINCT`, each
    /// distinct row where its first row came), as [`super::super::sort`]'s full sorts do.
    /// Only for a query that [`GroupQuery::sorts`]. As [`GroupQuery::merge`]: every group is
    /// finished, and the first failure in key order is the query's (before any row).
    pub(in crate::query) fn sorted(
        &self,
        runs: Vec<Run>,
        threads: usize,
        space: &SortSpace,
    ) -> Result<(SortedMerge<'_>, u64), QueryError> {
        debug_assert!(self.sorts());
        let mut runs = runs;
        let slices = split_runs(&mut runs, &self.collations, threads.max(1));
        let now = dates::this_thread_statement_time();
        let done: Vec<Result<(SortBuffer, u64), QueryError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = slices
                .into_iter()
                .enumerate()
                .map(|(i, cursors)| {
                    std::thread::Builder::new()
                        .name(format!("corescan-groups{i}"))
                        .spawn_scoped(scope, move || {
                            if let Some(now) = now {
                                dates::set_statement_time(now);
                            }
                            self.sort_slice(i, cursors, space.clone())
                        })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                    Err(e) => Err(QueryError::Eval(format!(
                        "could not start a thread to merge groups: {e}"
                    ))),
                })
                .collect()
        });
        let mut buffers = Vec::with_capacity(done.len());
        let mut groups = 0;
        // The slices are in key order: the first failing one fails first.
        for slice in done {
            let (buffer, n) = slice?;
            groups += n;
            buffers.push((0, buffer));
        }
        let merge = SortedMerge::new(&self.plan.order_by, false, buffers)?;
        Ok((merge, groups))
    }

    /// Merges and finishes one slice (number `index`) into a sort buffer: each group that
    /// passes `HAVING` with its `ORDER BY` values, its place for ties (its place in key
    /// order, or for `DISTINCT` its first row's rowid) and its output values.
    fn sort_slice(
        &self,
        index: usize,
        cursors: Vec<Cursor<'_>>,
        space: SortSpace,
    ) -> Result<(SortBuffer, u64), QueryError> {
        let mut buffer = SortBuffer::new(space);
        let order = &self.plan.order_by;
        let base = (index as i64) << 40;
        let mut slots: Vec<Value> = Vec::new();
        let mut sort: Vec<Value> = Vec::with_capacity(order.len());
        let each = |seq: usize, g: Group| -> Result<bool, GroupError> {
            let place = if self.plan.distinct {
                g.keys_rowid
            } else {
                base + seq as i64
            };
            // Left out by HAVING: the merge goes on.
            let Some(refs) = self.finish_group(g, &mut slots)? else {
                return Ok(true);
            };
            self.sort_values_into(&refs, &mut sort)?;
            let row = self.output_values(&refs)?;
            let keys: smallvec::SmallVec<[ValueRef<'_>; 4]> =
                sort.iter().map(Value::as_ref).collect();
            let outputs: smallvec::SmallVec<[ValueRef<'_>; 8]> =
                row.iter().map(Value::as_ref).collect();
            buffer.push(order, false, &keys, place, &outputs);
            Ok(true)
        };
        let groups = merge_key_order(
            cursors,
            &self.collations,
            |into, later| self.combine(into, later),
            each,
            |e| e.to_string(),
        )
        .map_err(QueryError::Eval)?;
        buffer.finish(order, false);
        if let Some(e) = buffer.failed() {
            return Err(QueryError::Spill(e.clone()));
        }
        Ok((buffer, groups as u64))
    }
}
