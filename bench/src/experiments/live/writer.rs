//! The concurrent writer of the live-database experiment: a SQLite connection (rusqlite) that
//! commits continuously while corescan scans, with transactions that keep the Q6 answer
//! invariant, so every consistent snapshot has the same answer and a torn one shows.
//!
//! Each transaction is one of:
//!
//! - **swap**: two rows that match Q6 with the default parameters (shipped in 1994, discount
//!   exactly 0.06, quantity below 24), one from the first and one from the last tenth of the
//!   table, exchange their `L_EXTENDEDPRICE`: the sum of `price * discount` is unchanged, but a
//!   scan that sees one update and not the other gets another revenue;
//! - **churn** (every fourth): a row that cannot match (quantity 50) with a long comment is
//!   appended at the end of the table and the one appended before it is deleted, so pages split
//!   and the table's tail moves while the answer stays the same.
//!
//! In WAL mode the log is checkpointed aggressively: `wal_autocheckpoint` of a few pages, and
//! every `checkpoint_every` transactions an explicit `wal_checkpoint(RESTART)` or
//! `(TRUNCATE)`, alternately. A busy handler waits 1 ms at a time and counts the time: that
//! is the writer's wait for readers (corescan's `SHARED` lock in rollback mode, up to 30 s per
//! commit; its read mark for RESTART and TRUNCATE, up to 50 ms, after which the checkpoint
//! reports busy, as it would behind any reader, and the writer goes on committing).
//!
//! Layering: the bottom of [`super`]; it knows SQLite, not corescan.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rusqlite::types::Value;
use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};

/// The journal mode the writer puts the database in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Journal {
    /// `journal_mode=WAL`, `synchronous=NORMAL`.
    Wal,
    /// `journal_mode=DELETE` (rollback journal), `synchronous=OFF` (no fsync, so a few
    /// hundred commits a second fit on a virtual disk; locking is the same).
    Delete,
}

impl Journal {
    /// `wal` or `delete`.
    pub fn name(self) -> &'static str {
        match self {
            Journal::Wal => "wal",
            Journal::Delete => "delete",
        }
    }
}

/// How the writer writes.
#[derive(Debug, Clone, Copy)]
pub struct WriterOptions {
    /// The journal mode.
    pub journal: Journal,
    /// Commits per second to aim at (0: as fast as it can).
    pub rate: u32,
    /// `wal_autocheckpoint`, in pages.
    pub autocheckpoint: u32,
    /// Transactions between explicit RESTART / TRUNCATE checkpoints (0: none).
    pub checkpoint_every: u32,
}

/// What the writer did, printed as one JSON line when it stops.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WriterStats {
    /// Transactions committed.
    pub commits: u64,
    /// Explicit checkpoints run, and how many of them reported busy (a reader held them).
    pub checkpoints: u64,
    /// Explicit checkpoints that could not finish because a reader held its snapshot.
    pub checkpoints_busy: u64,
    /// Seconds spent in the busy handler (waiting for readers).
    pub wait_s: f64,
    /// The longest transaction, in milliseconds (its waits included).
    pub max_commit_ms: f64,
    /// Seconds the writer ran.
    pub seconds: f64,
    /// Every error SQLite returned (none expected; never `SQLITE_CORRUPT`).
    pub errors: Vec<String>,
    /// `PRAGMA integrity_check` at the end (`ok`).
    pub integrity: String,
}

static WAITED_NS: AtomicU64 = AtomicU64::new(0);
/// Busy-handler calls (about 1 ms each) before SQLite gives up with `SQLITE_BUSY`.
static BUSY_LIMIT: AtomicI32 = AtomicI32::new(COMMIT_PATIENCE);
/// A commit waits up to 30 s for readers (corescan's `SHARED` lock in rollback mode).
const COMMIT_PATIENCE: i32 = 30_000;
/// An explicit RESTART or TRUNCATE waits up to 50 ms for the readers of the log, then reports
/// busy: back-to-back read transactions (a scan loop, or any busy SQLite reader) would
/// otherwise starve it, and the commits behind it.
const CHECKPOINT_PATIENCE: i32 = 50;

fn busy_handler(attempt: i32) -> bool {
    let t = Instant::now();
    std::thread::sleep(Duration::from_millis(1));
    WAITED_NS.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    attempt < BUSY_LIMIT.load(Ordering::Relaxed)
}

/// The rows the swaps exchange: matching rowids from the first and the last tenth.
fn matching_rows(conn: &Connection) -> rusqlite::Result<(Vec<i64>, Vec<i64>)> {
    let mut stmt = conn.prepare(
        "SELECT rowid FROM LINEITEM WHERE L_SHIPDATE >= '1994-01-01' AND L_SHIPDATE < \
         '1995-01-01' AND L_DISCOUNT = 0.06 AND L_QUANTITY < 24 ORDER BY rowid",
    )?;
    let rows: Vec<i64> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let tenth = (rows.len() / 10).max(1).min(rows.len());
    Ok((rows[..tenth].to_vec(), rows[rows.len() - tenth..].to_vec()))
}

/// Puts `db` into the journal mode of `journal` (run before the writer and the scans start).
pub fn set_journal_mode(db: &Path, journal: Journal) -> rusqlite::Result<()> {
    let conn = Connection::open(db)?;
    let mode = match journal {
        Journal::Wal => "WAL",
        Journal::Delete => "DELETE",
    };
    let _: String = conn.query_row(&format!("PRAGMA journal_mode = {mode}"), [], |r| r.get(0))?;
    Ok(())
}

/// Writes to `db` until `stop` is set; `ready` is called once the writer is set up.
pub fn run_writer(
    db: &Path,
    opts: &WriterOptions,
    stop: &AtomicBool,
    ready: impl FnOnce(),
) -> rusqlite::Result<WriterStats> {
    let mut conn = Connection::open(db)?;
    conn.busy_handler(Some(busy_handler))?;
    match opts.journal {
        Journal::Wal => conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
             PRAGMA wal_autocheckpoint = {};",
            opts.autocheckpoint
        ))?,
        Journal::Delete => {
            conn.execute_batch("PRAGMA journal_mode = DELETE; PRAGMA synchronous = OFF;")?
        }
    }
    let (early, late) = matching_rows(&conn)?;
    if early.is_empty() {
        return Err(rusqlite::Error::QueryReturnedNoRows);
    }
    ready();
    let mut stats = WriterStats::default();
    let started = Instant::now();
    let mut appended: Option<i64> = None;
    let mut n: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let outcome = if n % 4 == 3 {
            churn(&conn, early[n as usize % early.len()], &mut appended)
        } else {
            swap(
                &conn,
                early[n as usize % early.len()],
                late[(n as usize * 7) % late.len()],
            )
        };
        match outcome {
            Ok(()) => stats.commits += 1,
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                stats.errors.push(e.to_string());
                if stats.errors.len() > 20 {
                    break;
                }
            }
        }
        stats.max_commit_ms = stats.max_commit_ms.max(t.elapsed().as_secs_f64() * 1e3);
        n += 1;
        let every = u64::from(opts.checkpoint_every);
        if opts.journal == Journal::Wal && every > 0 && n.is_multiple_of(every) {
            let mode = if (n / every).is_multiple_of(2) {
                "TRUNCATE"
            } else {
                "RESTART"
            };
            let sql = format!("PRAGMA wal_checkpoint({mode})");
            BUSY_LIMIT.store(CHECKPOINT_PATIENCE, Ordering::Relaxed);
            let done = conn.query_row(&sql, [], |r| r.get::<_, i64>(0));
            BUSY_LIMIT.store(COMMIT_PATIENCE, Ordering::Relaxed);
            match done {
                Ok(busy) => {
                    stats.checkpoints += 1;
                    stats.checkpoints_busy += u64::from(busy != 0);
                }
                Err(e) => stats.errors.push(format!("checkpoint({mode}): {e}")),
            }
        }
        if opts.rate > 0 {
            let due = Duration::from_secs_f64(n as f64 / f64::from(opts.rate));
            if let Some(ahead) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(ahead);
            }
        }
    }
    stats.seconds = started.elapsed().as_secs_f64();
    stats.wait_s = WAITED_NS.load(Ordering::Relaxed) as f64 / 1e9;
    stats.integrity = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    Ok(stats)
}

fn swap(conn: &Connection, a: i64, b: i64) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let price = |row: i64| {
        conn.query_row(
            "SELECT L_EXTENDEDPRICE FROM LINEITEM WHERE rowid = ?1",
            [row],
            |r| r.get::<_, Value>(0),
        )
    };
    let (pa, pb) = (price(a)?, price(b)?);
    let set = "UPDATE LINEITEM SET L_EXTENDEDPRICE = ?1 WHERE rowid = ?2";
    conn.execute(set, params![pb, a])?;
    conn.execute(set, params![pa, b])?;
    conn.execute_batch("COMMIT")
}

fn churn(conn: &Connection, model: i64, appended: &mut Option<i64>) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    conn.execute(
        "INSERT INTO LINEITEM SELECT * FROM LINEITEM WHERE rowid = ?1",
        [model],
    )?;
    let new = conn.last_insert_rowid();
    conn.execute(
        "UPDATE LINEITEM SET L_QUANTITY = 50, L_COMMENT = hex(zeroblob(300 + ?1 % 450)) \
         WHERE rowid = ?2",
        params![new, new],
    )?;
    if let Some(old) = appended.replace(new) {
        conn.execute("DELETE FROM LINEITEM WHERE rowid = ?1", [old])?;
    }
    conn.execute_batch("COMMIT")
}
