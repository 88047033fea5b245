//! The merged scan handle: [`scan`] starts a [`ScanSpec`] and returns a [`Scan`] that yields
//! the result in [`Batch`]es of rows, in the result's order: as an iterator (blocking), or
//! awaited from any async runtime ([`Scan::next_batch`], or [`Scan::into_stream`]) without blocking its threads. The run's report ([`ScanEnd`]) comes when the stream
//! ends.
//!
//! The scan runs on a coordinator thread of its own, which drives the pinned executors exactly
//! as `corescan query` does (a plain projection streams in rowid order while the scan runs;
//! an aggregate, sort or a database read without SQLite's locks hands its rows over once they
//! are all known and checked). Between it and the caller is a bounded channel of
//! [`BATCHES_IN_FLIGHT`] batches, so a slow caller slows the scan instead of growing memory.
//!
//! Dropping a [`Scan`] before its end cancels it: the executors stop at their next read and
//! return their CPUs ([`crate::running_executors`] counts those still running).
//!
//! Layering: the top of the engine, beside [`crate::partitions`]; it uses the spec, the
//! query runner and the retry loop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_channel::{bounded, Receiver};
use futures_lite::Stream;

use crate::error::Error;
use crate::query::{run_query_streaming_until, QueryError};
use crate::report::RunReport;
use crate::retry::consistent;
use crate::spec::{replan_scan, ScanSpec};
use crate::value::Value;

/// Rows per batch handed to the caller (at most).
pub const BATCH_ROWS: usize = 1024;

/// Batches the coordinator may have ready before the caller takes them.
pub const BATCHES_IN_FLIGHT: usize = 4;

/// Result rows, in the result's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// The rows; each has one value per output column.
    pub rows: Vec<Vec<Value>>,
}

/// How a scan ended: what it measured.
#[derive(Debug, Clone)]
pub struct ScanEnd {
    /// Rows handed over.
    pub rows: u64,
    /// Whether they were streamed during the scan (else collected, then handed over).
    pub streamed: bool,
    /// The run's report (snapshot attempts included).
    pub report: RunReport,
}

/// What the coordinator sends the handle.
enum Msg {
    Batch(Batch),
    End(Box<Result<ScanEnd, QueryError>>),
}

/// A running scan (see the module docs). Dropping it cancels the scan.
#[derive(Debug)]
pub struct Scan {
    names: Vec<String>,
    rx: Receiver<Msg>,
    abandoned: Arc<AtomicBool>,
    end: Option<ScanEnd>,
    done: bool,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Msg::Batch(b) => write!(f, "Batch({} rows)", b.rows.len()),
            Msg::End(_) => f.write_str("End"),
        }
    }
}

/// Starts `spec`: opens the table, places the executors and starts the scan on a coordinator
/// thread. Errors about the file, the table, the columns or the placement come back here;
/// errors during the scan come through the stream.
pub fn scan(spec: ScanSpec) -> Result<Scan, QueryError> {
    let open = spec.open()?;
    let names = open.query.names.clone();
    let (tx, rx) = bounded::<Msg>(BATCHES_IN_FLIGHT);
    let abandoned = Arc::new(AtomicBool::new(false));
    let stop = Arc::clone(&abandoned);
    std::thread::Builder::new()
        .name("corescan-coordinator".into())
        .spawn(move || {
            let mut first = Some(open.table);
            let mut batch = Vec::with_capacity(BATCH_ROWS);
            let mut sent = 0u64;
            let result = consistent(
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
                |plan| {
                    let out = run_query_streaming_until(
                        plan,
                        open.query.clone(),
                        &open.settings,
                        &open.executors,
                        Some(Arc::clone(&stop)),
                        |row| {
                            batch.push(row.to_vec());
                            if batch.len() == BATCH_ROWS {
                                let full =
                                    std::mem::replace(&mut batch, Vec::with_capacity(BATCH_ROWS));
                                sent += full.len() as u64;
                                tx.send_blocking(Msg::Batch(Batch { rows: full }))
                                    .map_err(|_| std::io::Error::other("the handle was dropped"))?;
                            }
                            Ok(())
                        },
                    );
                    // Scan errors go through the retry loop (a change is retried); the others
                    // are the answer.
                    match out {
                        Ok(out) => Ok(Ok(out)),
                        Err(QueryError::Scan(e)) => Err(e),
                        Err(e) => Ok(Err(e)),
                    }
                },
            );
            // The rows before an error are the caller's too, as `corescan query` writes them.
            let last = std::mem::take(&mut batch);
            let rows = sent + last.len() as u64;
            if !last.is_empty() && tx.send_blocking(Msg::Batch(Batch { rows: last })).is_err() {
                return;
            }
            let end = match result {
                Err(e) => Err(QueryError::Scan(e)),
                Ok(mut done) => {
                    match std::mem::replace(&mut done.value, Err(QueryError::Abandoned)) {
                        Err(e) => Err(e),
                        Ok(mut out) => {
                            done.report_into(&mut out.report.snapshot, &mut out.report.io.notice);
                            Ok(ScanEnd {
                                rows,
                                streamed: out.streamed,
                                report: out.report,
                            })
                        }
                    }
                }
            };
            let end = match end {
                // The caller went away: nobody reads this.
                Err(QueryError::Output(_)) => return,
                other => other,
            };
            let _ = tx.send_blocking(Msg::End(Box::new(end)));
        })
        .map_err(|e| {
            QueryError::Scan(Error::Config(format!(
                "cannot start the coordinator thread: {e}"
            )))
        })?;
    Ok(Scan {
        names,
        rx,
        abandoned,
        end: None,
        done: false,
    })
}

impl Scan {
    /// The output column names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The next batch, waiting for it without blocking the thread (for async callers);
    /// `None` after the last one (or after an error).
    pub async fn next_batch(&mut self) -> Option<Result<Batch, QueryError>> {
        if self.done {
            return None;
        }
        let msg = self.rx.recv().await;
        self.accept(msg)
    }

    /// The scan as a [`futures_lite::Stream`] of batches (for an async runtime).
    pub fn into_stream(self) -> impl Stream<Item = Result<Batch, QueryError>> + Send {
        futures_lite::stream::unfold(
            self,
            |mut s| async move { s.next_batch().await.map(|b| (b, s)) },
        )
    }

    /// How the scan ended, once the stream has ended without an error.
    pub fn end(&self) -> Option<&ScanEnd> {
        self.end.as_ref()
    }

    /// The report, once the stream has ended without an error.
    pub fn report(&self) -> Option<&RunReport> {
        self.end.as_ref().map(|e| &e.report)
    }

    fn accept(
        &mut self,
        msg: Result<Msg, async_channel::RecvError>,
    ) -> Option<Result<Batch, QueryError>> {
        match msg {
            Ok(Msg::Batch(b)) => Some(Ok(b)),
            Ok(Msg::End(end)) => {
                self.done = true;
                match *end {
                    Ok(end) => {
                        self.end = Some(end);
                        None
                    }
                    Err(e) => Some(Err(e)),
                }
            }
            Err(_) => {
                self.done = true;
                Some(Err(QueryError::Scan(Error::Config(
                    "the scan's coordinator thread ended without an answer".into(),
                ))))
            }
        }
    }
}

impl Iterator for Scan {
    type Item = Result<Batch, QueryError>;

    /// The next batch, blocking the calling thread until it is there.
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let msg = self.rx.recv_blocking();
        self.accept(msg)
    }
}

impl Drop for Scan {
    fn drop(&mut self) {
        // The executors see it at their next read; the coordinator's next send fails.
        self.abandoned.store(true, Ordering::Relaxed);
        self.rx.close();
    }
}
