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
//! written every row of the ranges before it. Cut into one range per executor, the second
//! executor would wait for most of the first one's range, so a table of enough leaves is cut
//! into many small segments dealt to the executors in turn instead
//! (the coordinator's `run_segments`, `SEGMENT_CHANNEL_CHUNKS` chunks per segment's
//! channel, a segment started only near the one being written): every executor decodes and
//! renders while the order holds. Memory is at most a few segments' output plus the readahead
//! windows; a projection whose output is slower than the scan runs at the speed of its output
//! (as it must), and one whose output keeps up runs as a plain scan.
//!
//! `LIMIT` without `ORDER BY`: each executor stops reading once it has produced `LIMIT +
//! OFFSET` rows, and once the coordinator has written `LIMIT` rows every executor stops at its
//! next read ([`crate::ScanKernel::wants_more`]); errors in ranges after the one that completed
//! the `LIMIT` are not the query's (SQLite never reads those rows either). An error in range
//! `i` (a damaged page) stops the ranges after it; the rows of the ranges before it, and range
//! `i`'s rows before the damaged page, are still written, then the error ends the query.
//!
//! A row whose evaluation fails does not fail its executor: it comes as a marked row
//! ([`StreamMsg::Failed`]) in its place, because only this side knows which rows the `OFFSET`
//! skips. SQLite computes the output columns only of the rows it writes, so a marked row that
//! failed in its output columns is dropped while the `OFFSET` skips rows; any other marked row
//! (an output the result writes, or a failing `WHERE`, evaluated for skipped rows too) ends
//! the query with its error after the rows before it.
//!
//! A grouped query's rows come after the scan, but are not held whole either
//! ([`AfterScan::write`]): in key order they are merged and written slice by slice, in another
//! order they go through a full sort's buffers, as a full sort's rows do ([`write_sorted`]).
//!
//! A database read without SQLite's locks (`verify-retry`) cannot stream: the scan may have to
//! be repeated when the file changed under it, and rows already written cannot be taken back,
//! so there the rows are collected, checked, and then handed over.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use async_channel::{bounded, Receiver};
use partitioner::TablePlan;

use crate::coordinator::{run_files, run_scan_with, run_segments, segment_count, RangeOrder};
use crate::report::RunReport;
use crate::settings::{ExecutorSpec, ScanSettings};
use crate::value::{Value, ValueRef};

use super::dates;
use super::error::QueryError;
use super::files::{run_query_files, scan_query_files, MissingTable, QueryFiles, UnitStreams};
use super::group_merge::GroupQuery;
use super::group_spill::GroupStats;
use super::ir::{QueryPlan, Shape};
use super::kernel::QueryKernel;
use super::marks::sorts_fully;
use super::merge::{group_runs, sorted_merge, Partial};
use super::row_stream::{Renderer, RowFailure, RowStream, StreamMsg, CHANNEL_CHUNKS};
pub use super::row_stream::{RowRender, CHUNK_BYTES, CHUNK_ROWS};
use super::run::{run_query_until, scan_query, test_constant_terms, Scanned};
use super::sink::RenderedRows;
use super::sort::{record_outputs, record_values, MergePart, SortSpace, SortStats, SortedMerge};

/// Whether `plan` streams: a plain projection without `ORDER BY`, in rowid order (a
/// [`QueryPlan::backward`] scan's rows are collected: its ranges would have to be read from
/// the last leaf down).
pub fn streams(plan: &QueryPlan) -> bool {
    matches!(plan.shape, Shape::Rows { .. })
        && plan.order_by.is_empty()
        && !plan.backward
        && plan.windows.is_none()
}

/// Whether `plan`'s rows are written after its scan without being held whole
/// ([`AfterScan::write`]): a full sort, or a grouped query whose groups come in key order
/// ([`GroupQuery::streams`]) or are ordered otherwise without a `LIMIT`
/// ([`GroupQuery::sorts`]).
fn written_after_scan(plan: &QueryPlan) -> bool {
    sorts_fully(plan) || GroupQuery::of(plan).is_some_and(|g| g.streams() || g.sorts())
}

/// How rows written after the scan are written: within the query's budget (`settings`),
/// rendered by `render` (when given) on `threads` threads.
struct AfterScan<'a> {
    settings: &'a ScanSettings,
    render: Option<&'a Renderer>,
    threads: usize,
}

impl AfterScan<'_> {
    /// Hands the rows of a query [`written_after_scan`] to `on_row` in the result's order,
    /// from its scan's `partials` (partial `i` from file `file_of[i]` of several): a full
    /// sort's runs merged as the rows are written ([`write_sorted`]); groups in key order
    /// merged in slices and written as each slice is done (`group_merge`'s `streamed`
    /// module); groups ordered otherwise finished into a full sort's buffers within the
    /// budget and written as their merge goes. Returns the rows written, the sort's figures
    /// and the groups'.
    fn write(
        &self,
        plan: &QueryPlan,
        partials: Vec<Partial>,
        file_of: Option<&[usize]>,
        on_row: &mut dyn FnMut(ResultRow<'_>) -> std::io::Result<()>,
    ) -> Result<(u64, Option<SortStats>, Option<GroupStats>), QueryError> {
        let (render, threads) = (self.render, self.threads);
        let Some(grouped) = GroupQuery::of(plan) else {
            let merge = sorted_merge(plan, partials, file_of)?;
            let (rows, sort) = write_sorted(plan, merge, render, threads, on_row)?;
            return Ok((rows, Some(sort), None));
        };
        let (runs, mut stats) = group_runs(partials, &grouped.collations)?;
        if grouped.streams() {
            let done = grouped.stream(runs, threads, render, on_row)?;
            stats.groups = done.groups;
            return Ok((done.rows, None, Some(stats)));
        }
        let space = SortSpace::for_query(self.settings, threads);
        let (merge, groups) = grouped.sorted(runs, threads, &space)?;
        stats.groups = groups;
        let (rows, sort) = write_sorted(plan, merge, render, threads, on_row)?;
        Ok((rows, Some(sort), Some(stats)))
    }
}

/// One result row as the coordinator hands it over.
pub(in crate::query) enum ResultRow<'a> {
    /// Its values.
    Values(&'a [Value]),
    /// Its bytes, from the query's [`RowRender`].
    Rendered(&'a [u8]),
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
    /// Into how many segments the table was cut, dealt to the executors in turn (see
    /// the coordinator's segmented scans); 0 when each executor read one range.
    pub segments: usize,
    /// A full sort's figures (rows, what spilled); `None` for other queries.
    pub sort: Option<SortStats>,
    /// A grouped query's figures (groups, their tables' memory, what spilled); `None` for
    /// other queries.
    pub groups: Option<super::group_spill::GroupStats>,
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
    on_row: impl FnMut(&[Value]) -> std::io::Result<()>,
) -> Result<StreamedQuery, QueryError> {
    run_query_streaming_until(table, query, settings, executors, None, on_row)
}

/// [`run_query_streaming`] that gives up once `abandoned` is set (nobody wants the rows any
/// more): the executors stop at their next read and the query ends with
/// [`QueryError::Abandoned`].
pub fn run_query_streaming_until(
    table: &TablePlan,
    query: QueryPlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    abandoned: Option<Arc<AtomicBool>>,
    mut on_row: impl FnMut(&[Value]) -> std::io::Result<()>,
) -> Result<StreamedQuery, QueryError> {
    run(
        table,
        query,
        settings,
        executors,
        None,
        abandoned,
        &mut |row| match row {
            ResultRow::Values(v) => on_row(v),
            ResultRow::Rendered(_) => unreachable!("no renderer was given"),
        },
    )
}

/// [`run_query_streaming`] with every row rendered by `render`, in the executors' threads for
/// a query that [`streams`] (for the others, once the rows are collected, on every core in
/// waves), and handed to `on_row` as bytes, in the result's order.
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
        None,
        &mut |row| match row {
            ResultRow::Rendered(b) => on_row(b),
            ResultRow::Values(v) => {
                buf.clear();
                let refs: Vec<ValueRef<'_>> = v.iter().map(Value::as_ref).collect();
                here.render(&refs, &mut buf);
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
    abandoned: Option<Arc<AtomicBool>>,
    on_row: &mut dyn FnMut(ResultRow<'_>) -> std::io::Result<()>,
) -> Result<StreamedQuery, QueryError> {
    if written_after_scan(&query) {
        let Scanned {
            query,
            partials,
            report,
        } = scan_query(table, query, settings, executors, abandoned)?;
        let after = AfterScan {
            settings,
            render: render.as_ref(),
            threads: executors.len(),
        };
        let (rows, sort, groups) = after.write(&query, partials, None, on_row)?;
        return Ok(StreamedQuery {
            names: query.names.clone(),
            rows,
            streamed: false,
            waited_s: Vec::new(),
            segments: 0,
            sort,
            groups,
            report,
        });
    }
    if !streams(&query) || table.read.needs_verification() {
        let mut out = run_query_until(table, query, settings, executors, abandoned)?;
        let rows = out.rows.len() as u64;
        match &render {
            Some(r) => render_collected(
                std::mem::take(&mut out.rows),
                r,
                executors.len(),
                &mut |b| on_row(ResultRow::Rendered(b)),
            ),
            None => out
                .rows
                .iter()
                .try_for_each(|row| on_row(ResultRow::Values(row))),
        }
        .map_err(QueryError::Output)?;
        return Ok(StreamedQuery {
            names: out.names,
            rows,
            streamed: false,
            waited_s: Vec::new(),
            segments: 0,
            sort: None,
            groups: out.groups,
            report: out.report,
        });
    }
    let mut query = query;
    // One 'now' for the whole statement, whichever executor evaluates it.
    let now = dates::statement_time();
    test_constant_terms(&mut query, now)?;
    let query = Arc::new(query);
    if let Some(segments) = segment_count(table, executors.len()) {
        let run = Segmented {
            table,
            settings,
            executors,
            segments,
            abandoned,
        };
        return run_segmented(run, query, now, render, on_row);
    }
    let usable = table.header.usable_size();
    let stop = Arc::new(AtomicBool::new(false));
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
        stream.set_render(render.clone());
        QueryKernel::streaming(Arc::clone(&query), usable, stream, now)
            .abandoned_when(abandoned.clone())
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
        || drain(receivers, offset, limit, &stop, on_row, &mut |_| {}),
    )?;
    let rows = match written {
        Drained::Written(rows) | Drained::Broken { written: rows, .. } => rows,
        Drained::Output(e) => return Err(QueryError::Output(e)),
        Drained::Row(range, failure) => {
            return Err(QueryError::Scan(
                failure.into_error(executors[range].cpu, &table.path),
            ))
        }
    };
    Ok(StreamedQuery {
        names: query.names.clone(),
        rows,
        streamed: true,
        waited_s: waited
            .iter()
            .map(|w| w.load(Ordering::Relaxed) as f64 / 1e9)
            .collect(),
        segments: 0,
        sort: None,
        groups: None,
        report,
    })
}

/// Chunks each segment's channel holds ([`run_segmented`]): about a segment's output
/// (`SEGMENT_BYTES` (`crate::coordinator`) of leaves rendered as CSV or JSON, in chunks of
/// [`super::row_stream::RENDERED_CHUNK_BYTES`]), so that an executor can finish its segment
/// while the ones before it are written.
const SEGMENT_CHANNEL_CHUNKS: usize = 64;

/// Where and how a segmented scan runs ([`run_segmented`]).
struct Segmented<'a> {
    table: &'a TablePlan,
    settings: &'a ScanSettings,
    executors: &'a [ExecutorSpec],
    segments: usize,
    abandoned: Option<Arc<AtomicBool>>,
}

/// [`run`] for a table cut into segments dealt to the executors in turn
/// ([`run_segments`]): a channel per segment, drained in order.
fn run_segmented(
    run: Segmented<'_>,
    query: Arc<QueryPlan>,
    now: i64,
    render: Option<Renderer>,
    on_row: &mut dyn FnMut(ResultRow<'_>) -> std::io::Result<()>,
) -> Result<StreamedQuery, QueryError> {
    let Segmented {
        table,
        settings,
        executors,
        segments,
        abandoned,
    } = run;
    let streams = UnitStreams::new(executors.len(), render)
        .with_capacity(SEGMENT_CHANNEL_CHUNKS)
        .with_window(2 * executors.len());
    let scans = Arc::new(
        QueryFiles::new(
            table,
            MissingTable::Fail,
            Arc::clone(&query),
            now,
            Some(streams),
        )
        .abandoned_when(abandoned),
    );
    let (offset, limit) = (query.offset, query.limit.unwrap_or(u64::MAX));
    let consumer = Arc::clone(&scans);
    let scan = run_segments(
        table,
        settings,
        executors,
        segments,
        scans,
        Arc::clone(&query),
        |_| {
            let streams = consumer.streams().expect("a streamed query's scans stream");
            let receivers = streams.take_receivers();
            let (drained, _) = drain(receivers, offset, limit, &streams.stop, on_row, &mut |u| {
                streams.draining(u)
            });
            // Whatever ended the drain, no later segment is wanted.
            streams.stop.store(true, Ordering::Relaxed);
            streams.draining(usize::MAX);
            let failed = match &drained {
                Drained::Broken { unit, .. } => Some(*unit),
                _ => None,
            };
            (drained, failed)
        },
    )?;
    let rows = match scan.consumed {
        Drained::Written(rows) | Drained::Broken { written: rows, .. } => rows,
        Drained::Output(e) => return Err(QueryError::Output(e)),
        Drained::Row(unit, failure) => {
            let cpu = executors[scan.executor_of[unit]].cpu;
            return Err(QueryError::Scan(failure.into_error(cpu, &table.path)));
        }
    };
    let waited = consumer
        .streams()
        .map(|s| {
            s.waited
                .iter()
                .map(|w| w.load(Ordering::Relaxed) as f64 / 1e9)
                .collect()
        })
        .unwrap_or_default();
    Ok(StreamedQuery {
        names: query.names.clone(),
        rows,
        streamed: true,
        waited_s: waited,
        segments: scan.executor_of.len(),
        sort: None,
        groups: None,
        report: scan.report,
    })
}

/// [`run_query_streaming`] over the table in several files ([`super::files`]): a plain
/// projection streams file by file in the listed order, each file in rowid order, with one
/// channel per file drained in that order (an executor reads its files in the same order, so
/// the file being drained is always being read or done); other queries are collected and
/// merged ([`run_query_files`]). `render`, when given, renders each row as
/// [`run_query_rendered`] does.
#[allow(clippy::too_many_arguments)]
pub fn run_query_files_streaming(
    paths: Vec<std::path::PathBuf>,
    base: &TablePlan,
    query: QueryPlan,
    settings: &ScanSettings,
    executors: &[ExecutorSpec],
    missing: MissingTable,
    render: Option<Arc<dyn RowRender>>,
    on_row: &mut dyn FnMut(FileRow<'_>) -> std::io::Result<()>,
) -> Result<StreamedQuery, QueryError> {
    if written_after_scan(&query) {
        // Rows of several files tie file by file (the partials' files).
        let scanned = scan_query_files(paths, base, query, settings, executors, missing)?;
        let render = render.map(Renderer);
        let after = AfterScan {
            settings,
            render: render.as_ref(),
            threads: executors.len(),
        };
        let (rows, sort, groups) = after.write(
            &scanned.query,
            scanned.partials,
            Some(&scanned.files),
            &mut |row| match row {
                ResultRow::Values(v) => on_row(FileRow::Values(v)),
                ResultRow::Rendered(b) => on_row(FileRow::Rendered(b)),
            },
        )?;
        return Ok(StreamedQuery {
            names: scanned.query.names.clone(),
            rows,
            streamed: false,
            waited_s: Vec::new(),
            segments: 0,
            sort,
            groups,
            report: scanned.report,
        });
    }
    if !streams(&query) {
        let mut out = run_query_files(paths, base, query, settings, executors, missing)?;
        let rows = out.rows.len() as u64;
        match render {
            Some(r) => render_collected(
                std::mem::take(&mut out.rows),
                &Renderer(r),
                executors.len(),
                &mut |b| on_row(FileRow::Rendered(b)),
            ),
            None => out
                .rows
                .iter()
                .try_for_each(|row| on_row(FileRow::Values(row))),
        }
        .map_err(QueryError::Output)?;
        return Ok(StreamedQuery {
            names: out.names,
            rows,
            streamed: false,
            waited_s: Vec::new(),
            segments: 0,
            sort: None,
            groups: out.groups,
            report: out.report,
        });
    }
    let mut query = query;
    let now = dates::statement_time();
    test_constant_terms(&mut query, now)?;
    let query = Arc::new(query);
    let streams = UnitStreams::new(executors.len(), render.map(Renderer));
    let scans = Arc::new(QueryFiles::new(
        base,
        missing,
        Arc::clone(&query),
        now,
        Some(streams),
    ));
    let (offset, limit) = (query.offset, query.limit.unwrap_or(u64::MAX));
    let paths = Arc::new(paths);
    let mut take = |row: ResultRow<'_>| match row {
        ResultRow::Values(v) => on_row(FileRow::Values(v)),
        ResultRow::Rendered(b) => on_row(FileRow::Rendered(b)),
    };
    let consumer = Arc::clone(&scans);
    let scan = run_files(
        Arc::clone(&paths),
        base,
        settings,
        executors,
        RangeOrder::Key,
        scans,
        || {
            let streams = consumer.streams().expect("a streamed query's scans stream");
            let receivers = streams.take_receivers();
            drain(
                receivers,
                offset,
                limit,
                &streams.stop,
                &mut take,
                &mut |_| {},
            )
        },
    )?;
    let rows = match scan.consumed {
        Drained::Written(rows) | Drained::Broken { written: rows, .. } => rows,
        Drained::Output(e) => return Err(QueryError::Output(e)),
        Drained::Row(unit, failure) => {
            let cpu = executors[scan.executor_of[unit]].cpu;
            return Err(QueryError::Scan(
                failure.into_error(cpu, &paths[scan.file_of[unit]]),
            ));
        }
    };
    let waited = consumer
        .streams()
        .map(|s| {
            s.waited
                .iter()
                .map(|w| w.load(Ordering::Relaxed) as f64 / 1e9)
                .collect()
        })
        .unwrap_or_default();
    Ok(StreamedQuery {
        names: query.names.clone(),
        rows,
        streamed: true,
        waited_s: waited,
        segments: 0,
        sort: None,
        groups: None,
        report: scan.report,
    })
}

/// Collected rows per thread in each wave of [`render_collected`].
const RENDER_WAVE_ROWS: usize = 16 * 1024;

/// Renders collected `rows` (a sort's, a window's, groups') on `threads` threads (one per
/// executor: `--cores 1` renders on one) and hands each row's bytes to `on_rendered`, in
/// order: in waves of [`RENDER_WAVE_ROWS`] rows per thread, each thread dropping the rows it
/// rendered (freeing millions of rows is a cost of its own).
fn render_collected(
    rows: Vec<Vec<Value>>,
    render: &Renderer,
    threads: usize,
    on_rendered: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let threads = threads.max(1);
    let mut rows = rows.into_iter();
    loop {
        let wave: Vec<Vec<Vec<Value>>> = (0..threads)
            .map(|_| rows.by_ref().take(RENDER_WAVE_ROWS).collect::<Vec<_>>())
            .filter(|chunk| !chunk.is_empty())
            .collect();
        if wave.is_empty() {
            return Ok(());
        }
        let rendered: Vec<RenderedRows> = std::thread::scope(|scope| {
            let handles: Vec<_> = wave
                .into_iter()
                .map(|chunk| scope.spawn(move || render_rows(chunk, render)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        for RenderedRows { bytes, ends } in rendered {
            let mut from = 0;
            for to in ends {
                on_rendered(&bytes[from..to])?;
                from = to;
            }
        }
    }
}

/// Hands the rows of a full sort's `merge` to `on_row` in order, after the `OFFSET`: as
/// values, or rendered by `render` on `threads` threads (one per executor) in chunks of
/// [`RENDER_WAVE_ROWS`] records while this thread merges the next. Returns the rows written
/// and the sort's figures.
fn write_sorted(
    plan: &QueryPlan,
    mut merge: SortedMerge<'_>,
    render: Option<&Renderer>,
    threads: usize,
    on_row: &mut dyn FnMut(ResultRow<'_>) -> std::io::Result<()>,
) -> Result<(u64, SortStats), QueryError> {
    let keys = plan.order_by.len();
    for _ in 0..plan.offset {
        if merge.next_record()?.is_none() {
            break;
        }
    }
    let mut rows = 0u64;
    let Some(render) = render else {
        while let Some(record) = merge.next_record()? {
            let values = record_values(record, keys);
            on_row(ResultRow::Values(&values)).map_err(QueryError::Output)?;
            rows += 1;
        }
        return Ok((rows, merge.stats()));
    };
    let threads = threads.max(1);
    if plan.offset == 0 && threads >= PARALLEL_MERGE_THREADS {
        // The merge is cut into parts that the threads merge and render side by side: one
        // merging thread caps a sort at its pace however many executors scanned.
        let total = merge.stats().rows;
        let parts = (total / PART_ROWS).clamp(4 * threads as u64, 256) as usize;
        if let Some(cut) = merge.split(parts, MIN_PART_ROWS)? {
            let stats = merge.stats();
            drop(merge);
            let rows = write_parts(&cut, keys, render, threads, on_row)?;
            return Ok((rows, stats));
        }
    }
    // The merge fills chunks of records here while render threads turn the chunks before
    // into bytes; this thread writes them in order. A chunk's buffers come back with its
    // bytes and are reused (fresh buffers would be fresh pages, zeroed by the kernel).
    type Reply = crossbeam_channel::Sender<(RenderedRows, RenderedRows)>;
    let (work, jobs) = crossbeam_channel::bounded::<(RenderedRows, RenderedRows, Reply)>(threads);
    let empty = || RenderedRows {
        bytes: Vec::new(),
        ends: Vec::new(),
    };
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let jobs = jobs.clone();
            scope.spawn(move || {
                for (chunk, mut out, reply) in jobs {
                    render_records(&chunk, keys, render, &mut out);
                    // The writer may have failed and gone: nothing to do then.
                    let _ = reply.send((chunk, out));
                }
            });
        }
        drop(jobs);
        let mut pending = std::collections::VecDeque::new();
        let mut spare: Vec<(RenderedRows, RenderedRows)> = Vec::new();
        let written = (|| -> Result<(), QueryError> {
            loop {
                let (mut chunk, out) = spare.pop().unwrap_or_else(|| (empty(), empty()));
                let last = fill_chunk(&mut merge, &mut chunk)?;
                if !chunk.ends.is_empty() {
                    let (reply, rendered) = crossbeam_channel::bounded(1);
                    work.send((chunk, out, reply))
                        .expect("render threads run until the work channel closes");
                    pending.push_back(rendered);
                }
                while pending.len() > 2 * threads || (last && !pending.is_empty()) {
                    let front = pending.pop_front().expect("pending is not empty");
                    let (chunk, out) = front.recv().expect("a render thread replies");
                    rows += write_rendered(&out, on_row)?;
                    spare.push((chunk, out));
                }
                if last {
                    return Ok(());
                }
            }
        })();
        // The render threads end once the work channel is closed.
        drop(work);
        written
    })?;
    Ok((rows, merge.stats()))
}

/// Threads from which a full sort's merge is cut into parts merged side by side
/// ([`write_parts`]): from two. When each executor handed one run, one thread merging while
/// two rendered kept both CPUs busy and the cut merge measured 10-20 % slower on the 2-vCPU
/// reference machine; since executors hand their sorted segments (a merge of dozens of runs
/// for the one thread), the cut merge measured about 5 % faster there (SF 1's full sort,
/// min of 4 paired runs: 3.97 s against 4.25 s).
const PARALLEL_MERGE_THREADS: usize = 2;

/// Rows of a full sort's part ([`write_parts`]), about: a part's rendered output waits whole
/// for the parts before it to be written, and at most one part per thread is under way.
const PART_ROWS: u64 = 128 * 1024;

/// The fewest rows of a part: a smaller sort is cut into fewer parts, or none.
const MIN_PART_ROWS: u64 = 1024;

/// What a thread merging a part sends: a chunk of its rendered rows, the part's end, or
/// the merge's failure.
type PartChunk = Result<Option<RenderedRows>, super::sort::SpillError>;

/// Writes the parts of a cut merge ([`SortedMerge::split`]) in order, each merged and
/// rendered by one of `threads` threads: a thread takes the next part once the part
/// `threads` before it is written, so the rows held ahead are a few parts' at most.
fn write_parts(
    parts: &[MergePart<'_>],
    keys: usize,
    render: &Renderer,
    threads: usize,
    on_row: &mut dyn FnMut(ResultRow<'_>) -> std::io::Result<()>,
) -> Result<u64, QueryError> {
    let (tickets, taken) = crossbeam_channel::unbounded::<usize>();
    let outputs: Vec<_> = parts
        .iter()
        .map(|_| crossbeam_channel::unbounded::<PartChunk>())
        .collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..threads.min(parts.len()) {
            let (taken, outputs, stop) = (taken.clone(), &outputs, &stop);
            scope.spawn(move || {
                /// Ends a part with a failure when its thread panics, so that the writer
                /// does not wait for it (the panic is raised at the scope's end).
                struct Failing<'a>(&'a crossbeam_channel::Sender<PartChunk>);
                impl Drop for Failing<'_> {
                    fn drop(&mut self) {
                        if std::thread::panicking() {
                            let _ = self.0.send(Err(super::sort::SpillError {
                                dir: std::env::temp_dir(),
                                what: "a thread merging sorted runs panicked".into(),
                            }));
                        }
                    }
                }
                for part in taken {
                    let out = &outputs[part].0;
                    let _failing = Failing(out);
                    let mut merge = match parts[part].open() {
                        Ok(m) => m,
                        Err(e) => {
                            let _ = out.send(Err(e));
                            continue;
                        }
                    };
                    let mut chunk = RenderedRows {
                        bytes: Vec::new(),
                        ends: Vec::new(),
                    };
                    loop {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let last = match fill_chunk(&mut merge, &mut chunk) {
                            Ok(last) => last,
                            Err(e) => {
                                let _ = out.send(Err(e));
                                break;
                            }
                        };
                        if !chunk.ends.is_empty() {
                            let mut rendered = RenderedRows {
                                bytes: Vec::with_capacity(chunk.bytes.len() * 2),
                                ends: Vec::with_capacity(chunk.ends.len()),
                            };
                            render_records(&chunk, keys, render, &mut rendered);
                            let _ = out.send(Ok(Some(rendered)));
                        }
                        if last {
                            let _ = out.send(Ok(None));
                            break;
                        }
                    }
                }
            });
        }
        drop(taken);
        let mut issued = 0;
        let written = (|| -> Result<u64, QueryError> {
            let mut rows = 0u64;
            for (part, (_, received)) in outputs.iter().enumerate() {
                while issued < parts.len() && issued < part + threads {
                    tickets
                        .send(issued)
                        .expect("the merging threads hold the tickets");
                    issued += 1;
                }
                loop {
                    match received.recv().expect("a part's thread ends it or fails") {
                        Ok(Some(chunk)) => rows += write_rendered(&chunk, on_row)?,
                        Ok(None) => break,
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            Ok(rows)
        })();
        // The merging threads stop at their next chunk, and take no new part.
        stop.store(true, Ordering::Relaxed);
        drop(tickets);
        written
    })
}

/// Fills `chunk` (emptied first) with up to [`RENDER_WAVE_ROWS`] records of `merge`; true
/// when the merge has no more.
fn fill_chunk(
    merge: &mut SortedMerge<'_>,
    chunk: &mut RenderedRows,
) -> Result<bool, super::sort::SpillError> {
    chunk.bytes.clear();
    chunk.ends.clear();
    while chunk.ends.len() < RENDER_WAVE_ROWS {
        let Some(record) = merge.next_record()? else {
            return Ok(true);
        };
        chunk.bytes.extend_from_slice(record);
        chunk.ends.push(chunk.bytes.len());
    }
    Ok(false)
}

/// Hands each rendered row of `chunk` to `on_row`; returns how many.
fn write_rendered(
    chunk: &RenderedRows,
    on_row: &mut dyn FnMut(ResultRow<'_>) -> std::io::Result<()>,
) -> Result<u64, QueryError> {
    let mut from = 0;
    for &to in &chunk.ends {
        on_row(ResultRow::Rendered(&chunk.bytes[from..to])).map_err(QueryError::Output)?;
        from = to;
    }
    Ok(chunk.ends.len() as u64)
}

/// A chunk of sort records (their bytes one after the other, and where each ends) rendered
/// into `out`.
fn render_records(chunk: &RenderedRows, keys: usize, render: &Renderer, out: &mut RenderedRows) {
    out.bytes.clear();
    out.ends.clear();
    let mut values: Vec<ValueRef<'_>> = Vec::new();
    let mut from = 0;
    for &to in &chunk.ends {
        values.clear();
        record_outputs(&chunk.bytes[from..to], keys, &mut values);
        render.0.render(&values, &mut out.bytes);
        out.ends.push(out.bytes.len());
        from = to;
    }
}

/// `rows` rendered one after the other (and dropped).
fn render_rows(rows: Vec<Vec<Value>>, render: &Renderer) -> RenderedRows {
    let mut out = RenderedRows {
        bytes: Vec::with_capacity(rows.len() * 64),
        ends: Vec::with_capacity(rows.len()),
    };
    let mut refs: Vec<ValueRef<'_>> = Vec::new();
    for row in &rows {
        refs.clear();
        refs.extend(row.iter().map(Value::as_ref));
        render.0.render(&refs, &mut out.bytes);
        out.ends.push(out.bytes.len());
    }
    out
}

/// A result row of [`run_query_files_streaming`]: its values, or its rendered bytes.
pub enum FileRow<'a> {
    /// Its values (no renderer was given, or the row was computed on the coordinator).
    Values(&'a [Value]),
    /// Its bytes, from the renderer.
    Rendered(&'a [u8]),
}

/// How the coordinator's drain ended.
enum Drained {
    /// This many rows were written.
    Written(u64),
    /// Writing a row failed.
    Output(std::io::Error),
    /// The result reached a marked row (from range `.0`) that the `OFFSET` does not skip.
    Row(usize, RowFailure),
    /// Range `unit`'s channel closed without its end (its executor failed) after `written`
    /// rows: the executor's error is the query's.
    Broken {
        /// Rows written before it.
        written: u64,
        /// The range (or unit, or segment).
        unit: usize,
    },
}

/// The coordinator's side: the executors' channels in range order, `offset` rows skipped and
/// at most `limit` written; `entering(i)` is told when it turns to range `i`. Returns how it
/// ended and how many executors, from range 0, the result depends on.
fn drain(
    receivers: Vec<Receiver<StreamMsg>>,
    offset: u64,
    limit: u64,
    stop: &AtomicBool,
    on_row: &mut dyn FnMut(ResultRow<'_>) -> std::io::Result<()>,
    entering: &mut dyn FnMut(usize),
) -> (Drained, usize) {
    let n = receivers.len();
    let (skipped, written) = (std::cell::Cell::new(0u64), std::cell::Cell::new(0u64));
    if limit == 0 {
        // SQLite computes nothing for LIMIT 0: no row, and no error can come.
        stop.store(true, Ordering::Relaxed);
        return (Drained::Written(0), 0);
    }
    // Hands one row over; `Some` when the drain ends here.
    let mut take = |row: ResultRow<'_>, i: usize| -> Option<(Drained, usize)> {
        if skipped.get() < offset {
            skipped.set(skipped.get() + 1);
            return None;
        }
        if let Err(e) = on_row(row) {
            stop.store(true, Ordering::Relaxed);
            return Some((Drained::Output(e), 0));
        }
        written.set(written.get() + 1);
        // Ranges before this one are complete; nothing after matters.
        (written.get() == limit).then(|| {
            stop.store(true, Ordering::Relaxed);
            (Drained::Written(written.get()), i)
        })
    };
    for (i, rx) in receivers.into_iter().enumerate() {
        entering(i);
        loop {
            match rx.recv_blocking() {
                // Its output columns are never computed in SQLite: the OFFSET skips it.
                Ok(StreamMsg::Failed(RowFailure {
                    in_output: true, ..
                })) if skipped.get() < offset => skipped.set(skipped.get() + 1),
                Ok(StreamMsg::Failed(failure)) => {
                    // The rows before it are written; the ranges before this one are
                    // complete, and nothing from this one or after it matters.
                    stop.store(true, Ordering::Relaxed);
                    return (Drained::Row(i, failure), i);
                }
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
                Ok(StreamMsg::Built { .. }) => {
                    unreachable!("a query's own streams have no sink")
                }
                Ok(StreamMsg::End) => break,
                // The executor failed: its error ends the query, after the rows before it.
                Err(_) => {
                    return (
                        Drained::Broken {
                            written: written.get(),
                            unit: i,
                        },
                        i + 1,
                    )
                }
            }
        }
    }
    (Drained::Written(written.get()), n)
}
