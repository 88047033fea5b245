//! One committed state of a live database, held the way a SQLite reader holds it.
//!
//! A database another process writes meanwhile has a consistent state only for a reader that
//! takes part in SQLite's locking protocol ([`crate::lock`] has the kernel side). [`acquire`]
//! does what SQLite 3.54's pager and WAL code do at the start of a read transaction of a
//! read-only connection, and the returned [`ReadSnapshot`] keeps the locks until it is dropped
//! (a [`crate::TablePlan`] owns it from planning to the end of the scan):
//!
//! 1. **Database `SHARED`** (`unixLock` in `os_unix.c`): a read lock on the PENDING byte
//!    (`0x40000000`), a read lock on the 510-byte SHARED range after RESERVED, then PENDING
//!    released. A busy PENDING means a writer waits for `EXCLUSIVE`: back off and retry. In
//!    rollback-journal mode this freezes the file (a writer needs `EXCLUSIVE` to write it and
//!    waits at PENDING, as it does for any `sqlite3` reader).
//! 2. **Hot journal** (`hasHotJournal` in `pager.c`): a `-journal` when nobody holds RESERVED
//!    (`F_GETLK`) and whose header holds a transaction (its magic number) is what a crashed
//!    writer left; SQLite's read-only connections refuse it (`SQLITE_READONLY_ROLLBACK`), and
//!    so does corescan after a few tries. A journal while RESERVED is held belongs to a live
//!    writer that has not touched the file yet: it is not hot.
//! 3. **Mode**: WAL when `-wal` exists or the header says WAL (bytes 18 and 19 are 2), else
//!    rollback mode ([`Protocol::RollbackShared`], the file alone).
//! 4. **WAL with a `-shm` index** (`walTryBeginRead` in `wal.c`, for a read-only `-shm`):
//!    `-shm` is opened `O_RDONLY` and never written ([`crate::shm`]). The dead-man switch
//!    (byte 128) is probed: write-locked means a connection is initialising the index (retry);
//!    read-locked means it is live, and a read lock joins it; unlocked means nobody maintains
//!    the index (step 5). The header is read (both copies equal, checksum right, else retry).
//!    When every frame is backfilled (`nBackfill == mxFrame`), a read lock on `READ(0)` and an
//!    unchanged header mean the file alone is the snapshot. Otherwise the largest read mark
//!    `aReadMark[i] <= mxFrame` (i in 1..5) is read-locked; then `minFrame = nBackfill + 1` is
//!    read and the mark and header re-checked (else retry). Holding `READ(i)` caps every
//!    checkpoint at the mark and forbids a log reset, so frames `minFrame..=mxFrame` stay as
//!    they are, and the database file holds everything older: [`WalView::Frames`], with the
//!    database `nPage` pages long and each frame's page number read from the index, as SQLite
//!    does ([`crate::wal::indexed`]). Frames after `mxFrame` are ignored even if they commit.
//! 5. **Unreliable `-shm`** (`walBeginShmUnreliable`): `READ(0)` read-locked (no checkpoint
//!    can copy frames into the file), the log recovered privately, then the dead-man switch
//!    must still be free and a second recovery (when the pages are read) must find the same
//!    salts and last commit, else retry. The dead-man switch is never taken here: a writer
//!    arriving must still find nobody and rebuild the index.
//!
//! Where the protocol cannot be followed — no `-shm` to open (only a writer creates it),
//! locks refused by the file system, or [`MAX_LOCK_ATTEMPTS`] attempts exhausted (SQLite's
//! `WAL_RETRY_PROTOCOL_LIMIT`, with its backoff, under 10 s) — the snapshot is
//! [`Protocol::VerifyRetry`]: no `-shm` locks, the log recovered privately, and
//! [`crate::TablePlan::check_unchanged`] compares the files after the scan (the scanning
//! command re-plans and re-scans when they changed). Nothing here writes, creates or
//! truncates a file.
//!
//! Layering: above [`crate::lock`], [`crate::shm`], [`crate::sidecar`] and [`crate::wal`];
//! below [`crate::pager`], which reads pages through a [`ReadSnapshot`].

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::lock::{holder, read_lock, unlock, Holder, LockOutcome};
use crate::shm::{self, IndexHeader};
use crate::sidecar::{sidecar_metadata, DbFiles};
use crate::wal::WalFingerprint;

/// The PENDING byte of the database file's lock-byte page.
pub const PENDING_BYTE: u64 = 0x4000_0000;
/// The RESERVED byte (held by a writer with an open write transaction).
pub const RESERVED_BYTE: u64 = PENDING_BYTE + 1;
/// The first byte of the SHARED range.
pub const SHARED_FIRST: u64 = PENDING_BYTE + 2;
/// The SHARED range's length.
pub const SHARED_SIZE: u64 = 510;
/// Attempts at taking the locks before falling back to [`Protocol::VerifyRetry`]
/// (`WAL_RETRY_PROTOCOL_LIMIT`).
pub const MAX_LOCK_ATTEMPTS: u32 = 100;
/// Attempts that find a hot journal before refusing the database.
const HOT_JOURNAL_ATTEMPTS: u32 = 5;

/// The 8 bytes a rollback journal's header starts with while it holds a transaction
/// (`aJournalMagic` in SQLite's `pager.c`).
pub const JOURNAL_MAGIC: [u8; 8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7];

/// How a scan's snapshot is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// WAL mode: the database `SHARED` lock, the `-shm` dead-man switch and one `READ(i)`.
    WalReadMark,
    /// WAL mode with nobody maintaining `-shm`: `SHARED`, `READ(0)`, a private log recovery.
    WalUnreliableShm,
    /// Rollback-journal mode: the database `SHARED` lock.
    RollbackShared,
    /// No locks on `-shm` (or none at all): the files are compared after the scan.
    VerifyRetry,
}

impl Protocol {
    /// The name reports use: `wal-read-mark`, `wal-unreliable-shm`, `rollback-shared`,
    /// `verify-retry`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::WalReadMark => "wal-read-mark",
            Protocol::WalUnreliableShm => "wal-unreliable-shm",
            Protocol::RollbackShared => "rollback-shared",
            Protocol::VerifyRetry => "verify-retry",
        }
    }
}

/// Which part of the write-ahead log the snapshot reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalView {
    /// Rollback mode: the database file alone.
    FileOnly,
    /// Every frame is in the database file (`READ(0)`): the log is not read. `db_pages` is
    /// the wal-index's `nPage` (0: the file's own size).
    Backfilled {
        /// The database size in pages.
        db_pages: u32,
    },
    /// Frames `min_frame..=max_frame` of the log generation with `salts`.
    Frames {
        /// The first frame not yet in the database file.
        min_frame: u32,
        /// The snapshot's last commit frame.
        max_frame: u32,
        /// The generation's salts.
        salts: [u32; 2],
        /// The running checksum at `max_frame`.
        frame_checksum: [u32; 2],
        /// The database size in pages at `max_frame`.
        db_pages: u32,
        /// The page size the index records.
        page_size: u32,
    },
    /// The whole log recovered privately; when `expect` is set, the recovery must find that
    /// committed state (else the log changed: retry).
    Recovered {
        /// The committed state found while the locks were taken.
        expect: Option<WalFingerprint>,
    },
}

/// The locks of one snapshot; dropping closes the files, which releases them.
#[derive(Debug)]
struct Locks {
    // Field order is drop order: READ(i) and the dead-man switch go before SHARED.
    shm: Option<File>,
    _db: File,
}

/// A snapshot of the database, held from planning to the end of the scan.
#[derive(Debug)]
pub struct ReadSnapshot {
    /// How it is held.
    pub protocol: Protocol,
    /// The `READ(i)` held, in WAL mode.
    pub read_mark: Option<usize>,
    /// What of the log to read.
    pub view: WalView,
    /// Attempts that found the locks busy or the index changing before this one succeeded.
    pub lock_retries: u32,
    /// Why the locking protocol could not be followed ([`Protocol::VerifyRetry`]).
    pub notice: Option<String>,
    _locks: Option<Locks>,
}

impl ReadSnapshot {
    /// Whether the scan must compare the files afterwards (nothing stops a writer).
    pub fn needs_verification(&self) -> bool {
        self.protocol == Protocol::VerifyRetry
    }

    /// The page numbers of frames `first..=last` from the locked `-shm` index
    /// ([`shm::frame_pages`]); `None` without an index or when it is too short.
    pub fn frame_pages(&self, first: u32, last: u32) -> std::io::Result<Option<Vec<u32>>> {
        match self._locks.as_ref().and_then(|l| l.shm.as_ref()) {
            Some(shm) => shm::frame_pages(shm, first, last),
            None => Ok(None),
        }
    }
}

enum Attempt {
    Done(ReadSnapshot),
    Retry(String),
    Hot(String),
    Unsupported(String),
}

/// Takes the snapshot of `files` (see the module docs). Errors name the database as given.
pub fn acquire(files: &DbFiles) -> Result<ReadSnapshot> {
    let (mut tries, mut hot) = (0u32, 0u32);
    loop {
        let why = match attempt(files)? {
            Attempt::Done(mut s) => {
                s.lock_retries = tries;
                return Ok(s);
            }
            Attempt::Unsupported(why) => return verify_only(files, why, tries),
            Attempt::Hot(what) => {
                hot += 1;
                if hot >= HOT_JOURNAL_ATTEMPTS {
                    return Err(Error::Invalid {
                        path: files.given.clone(),
                        what,
                    });
                }
                what
            }
            Attempt::Retry(why) => why,
        };
        tries += 1;
        if tries >= MAX_LOCK_ATTEMPTS {
            let why = format!("the locks stayed busy for {tries} attempts (last: {why})");
            return verify_only(files, why, tries);
        }
        backoff(tries);
    }
}

/// `walTryBeginRead`'s schedule: no pause for 5 tries, then 1 us, then (n-9)^2 * 39 us.
fn backoff(tries: u32) {
    if tries > 5 {
        let us = if tries >= 10 {
            u64::from((tries - 9) * (tries - 9)) * 39
        } else {
            1
        };
        std::thread::sleep(Duration::from_micros(us));
    }
}

fn verify_only(files: &DbFiles, why: String, tries: u32) -> Result<ReadSnapshot> {
    // Without locks the journal test is the old one: a journal holding a transaction.
    if let Some(what) = journal_hot(files, None)? {
        return Err(Error::Invalid {
            path: files.given.clone(),
            what,
        });
    }
    Ok(ReadSnapshot {
        protocol: Protocol::VerifyRetry,
        read_mark: None,
        view: WalView::Recovered { expect: None },
        lock_retries: tries,
        notice: Some(format!(
            "snapshot: {why}; the scan is verified afterwards and retried if the database \
             changed"
        )),
        _locks: None,
    })
}

fn io_error(files: &DbFiles, op: String, source: std::io::Error) -> Error {
    Error::Io {
        path: files.given.clone(),
        op,
        source,
    }
}

fn attempt(files: &DbFiles) -> Result<Attempt> {
    // Name the resolved file only when it is not the path given (a symbolic link).
    let db_io = |op: &str, e| {
        let op = if files.real == files.given {
            op.to_string()
        } else {
            format!("{op} {}", files.real.display())
        };
        io_error(files, op, e)
    };
    let db = File::open(&files.real).map_err(|e| db_io("open", e))?;
    let locked = |r: std::io::Result<LockOutcome>| r.map_err(|e| db_io("lock", e));
    match locked(read_lock(&db, PENDING_BYTE, 1))? {
        LockOutcome::Done => {}
        LockOutcome::Busy => return Ok(Attempt::Retry("a writer holds PENDING".into())),
        LockOutcome::Unsupported => return Ok(unsupported(files)),
    }
    let shared = locked(read_lock(&db, SHARED_FIRST, SHARED_SIZE))?;
    locked(unlock(&db, PENDING_BYTE, 1))?;
    match shared {
        LockOutcome::Done => {}
        LockOutcome::Busy => return Ok(Attempt::Retry("a writer holds EXCLUSIVE".into())),
        LockOutcome::Unsupported => return Ok(unsupported(files)),
    }
    if let Some(what) = journal_hot(files, Some(&db))? {
        return Ok(Attempt::Hot(what));
    }
    let mut head = [0u8; 20];
    let have = db.read_at(&mut head, 0).map_err(|e| db_io("read", e))?;
    let wal_header = have >= 20 && head[18] == 2 && head[19] == 2;
    if sidecar_metadata(&files.given, &files.wal)?.is_none() && !wal_header {
        return Ok(Attempt::Done(ReadSnapshot {
            protocol: Protocol::RollbackShared,
            read_mark: None,
            view: WalView::FileOnly,
            lock_retries: 0,
            notice: None,
            _locks: Some(Locks { shm: None, _db: db }),
        }));
    }
    let shm = match File::open(&files.shm) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Ok(Attempt::Unsupported(format!(
                "no {} index to lock (no SQLite connection has the database open in WAL mode)",
                files.shm.display()
            )))
        }
        Err(e) => {
            return Ok(Attempt::Unsupported(format!(
                "cannot open {}: {e}",
                files.shm.display()
            )))
        }
    };
    wal_attempt(files, db, shm)
}

fn unsupported(files: &DbFiles) -> Attempt {
    Attempt::Unsupported(format!(
        "the file system of {} refuses byte-range locks",
        files.real.display()
    ))
}

fn wal_attempt(files: &DbFiles, db: File, shm: File) -> Result<Attempt> {
    let shm_io = |op: &str, e| io_error(files, format!("{op} {}", files.shm.display()), e);
    let locked = |r: std::io::Result<LockOutcome>| r.map_err(|e| shm_io("lock", e));
    let Some(dms) = holder(&shm, shm::DMS_LOCK, 1).map_err(|e| shm_io("probe locks of", e))? else {
        return Ok(unsupported(files));
    };
    match dms {
        Holder::Writer => {
            return Ok(Attempt::Retry(
                "a connection is initialising the -shm index".into(),
            ))
        }
        Holder::Nobody => return unreliable(files, db, shm),
        Holder::Reader => match locked(read_lock(&shm, shm::DMS_LOCK, 1))? {
            LockOutcome::Done => {}
            LockOutcome::Busy => return Ok(Attempt::Retry("the dead-man switch is busy".into())),
            LockOutcome::Unsupported => return Ok(unsupported(files)),
        },
    }
    let header = |shm: &File| shm::read_header(shm).map_err(|e| shm_io("read", e));
    let info = |shm: &File| shm::read_checkpoint_info(shm).map_err(|e| shm_io("read", e));
    let Some(hdr) = header(&shm)? else {
        return Ok(Attempt::Retry("the -shm header is being written".into()));
    };
    if hdr.version != shm::INDEX_VERSION {
        return Err(Error::Invalid {
            path: files.given.clone(),
            what: format!(
                "{}: unknown wal-index version {} (SQLite writes {})",
                files.shm.display(),
                hdr.version,
                shm::INDEX_VERSION
            ),
        });
    }
    let Some(ckpt) = info(&shm)? else {
        return Ok(Attempt::Retry("the -shm index is being rebuilt".into()));
    };
    if ckpt.backfilled == hdr.max_frame {
        match locked(read_lock(&shm, shm::read_lock_byte(0), 1))? {
            LockOutcome::Done => {
                if header(&shm)?.as_ref() != Some(&hdr) {
                    return Ok(Attempt::Retry(
                        "a transaction committed while READ(0) was locked".into(),
                    ));
                }
                let db_pages = hdr.db_pages;
                return Ok(held(db, shm, 0, WalView::Backfilled { db_pages }));
            }
            // A checkpointer holds READ(0) exclusively: use a mark as SQLite does.
            LockOutcome::Busy => {}
            LockOutcome::Unsupported => return Ok(unsupported(files)),
        }
    }
    let (mut mark, mut slot) = (0u32, 0usize);
    for i in 1..shm::READERS {
        let m = ckpt.read_marks[i];
        if mark <= m && m <= hdr.max_frame {
            (mark, slot) = (m, i);
        }
    }
    if slot == 0 {
        return Ok(Attempt::Retry(format!(
            "no read mark at or below frame {} (a read-only reader cannot set one)",
            hdr.max_frame
        )));
    }
    match locked(read_lock(&shm, shm::read_lock_byte(slot), 1))? {
        LockOutcome::Done => {}
        LockOutcome::Busy => return Ok(Attempt::Retry(format!("READ({slot}) is being moved"))),
        LockOutcome::Unsupported => return Ok(unsupported(files)),
    }
    let Some(now) = info(&shm)? else {
        return Ok(Attempt::Retry("the -shm index is being rebuilt".into()));
    };
    let min_frame = now.backfilled.saturating_add(1);
    if now.read_marks[slot] != mark || header(&shm)?.as_ref() != Some(&hdr) {
        return Ok(Attempt::Retry(format!(
            "the log moved while READ({slot}) was locked"
        )));
    }
    let view = frames_view(&hdr, min_frame);
    Ok(held(db, shm, slot, view))
}

fn held(db: File, shm: File, mark: usize, view: WalView) -> Attempt {
    Attempt::Done(ReadSnapshot {
        protocol: Protocol::WalReadMark,
        read_mark: Some(mark),
        view,
        lock_retries: 0,
        notice: None,
        _locks: Some(Locks {
            shm: Some(shm),
            _db: db,
        }),
    })
}

fn frames_view(hdr: &IndexHeader, min_frame: u32) -> WalView {
    if hdr.max_frame == 0 {
        return WalView::Backfilled {
            db_pages: hdr.db_pages,
        };
    }
    WalView::Frames {
        min_frame,
        max_frame: hdr.max_frame,
        salts: hdr.salts,
        frame_checksum: hdr.frame_checksum,
        db_pages: hdr.db_pages,
        page_size: hdr.page_size,
    }
}

fn unreliable(files: &DbFiles, db: File, shm: File) -> Result<Attempt> {
    let shm_io = |op: &str, e| io_error(files, format!("{op} {}", files.shm.display()), e);
    match read_lock(&shm, shm::read_lock_byte(0), 1).map_err(|e| shm_io("lock", e))? {
        LockOutcome::Done => {}
        LockOutcome::Busy => return Ok(Attempt::Retry("READ(0) is busy".into())),
        LockOutcome::Unsupported => return Ok(unsupported(files)),
    }
    let expect = match crate::wal::open(files)? {
        crate::wal::WalState::Active(index, _) => Some(index.fingerprint),
        _ => None,
    };
    if holder(&shm, shm::DMS_LOCK, 1).map_err(|e| shm_io("probe locks of", e))?
        != Some(Holder::Nobody)
    {
        return Ok(Attempt::Retry("a writer attached to the -shm index".into()));
    }
    Ok(Attempt::Done(ReadSnapshot {
        protocol: Protocol::WalUnreliableShm,
        read_mark: Some(0),
        view: WalView::Recovered { expect },
        lock_retries: 0,
        notice: None,
        _locks: Some(Locks {
            shm: Some(shm),
            _db: db,
        }),
    }))
}

/// Why the `-journal` beside the database is hot, or `None` when it is not: absent, empty,
/// without a transaction in its header (zeroed by `journal_mode=PERSIST`), or — when `db` holds
/// the `SHARED` lock and the probe works — accompanied by a RESERVED lock (a live writer's).
fn journal_hot(files: &DbFiles, db: Option<&File>) -> Result<Option<String>> {
    let given = files.given.as_path();
    let journal = &files.journal;
    let io = |op: &str, source| Error::Io {
        path: given.to_path_buf(),
        op: format!("{op} {}", journal.display()),
        source,
    };
    let Some(meta) = sidecar_metadata(given, journal)? else {
        return Ok(None);
    };
    if let Some(db) = db {
        let reserved = holder(db, RESERVED_BYTE, 1).map_err(|e| io("probe locks of", e))?;
        if matches!(reserved, Some(Holder::Reader | Holder::Writer)) {
            return Ok(None);
        }
    }
    if meta.len() < JOURNAL_MAGIC.len() as u64 {
        return Ok(None);
    }
    let hot = || {
        Some(format!(
            "hot rollback journal {} beside the database: a writer may be active (or a \
             write was interrupted); if none is, opening the database once with sqlite3 \
             rolls it back",
            journal.display()
        ))
    };
    let file = match File::open(journal) {
        Ok(f) => f,
        // Deleted since the stat: the writer finished.
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("open", e)),
    };
    let mut magic = [0u8; JOURNAL_MAGIC.len()];
    match file.read_exact_at(&mut magic, 0) {
        Ok(()) if magic == JOURNAL_MAGIC => Ok(hot()),
        Ok(()) => Ok(None),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(io("read", e)),
    }
}

/// Fails when a hot rollback journal sits beside `db` (see [`acquire`], step 2), judged
/// without locks: a `-journal` whose header holds a transaction.
pub fn check_no_hot_journal(db: &Path) -> Result<()> {
    match journal_hot(&DbFiles::resolve(db)?, None)? {
        None => Ok(()),
        Some(what) => Err(Error::Invalid {
            path: db.to_path_buf(),
            what,
        }),
    }
}
