//! The write-ahead log (`DB-wal`): which pages' latest committed copies live in it.
//!
//! A database in WAL mode (the normal state of a live SQLite or Turso database) writes each
//! transaction as frames appended to `DB-wal`; the database file only catches up at a
//! checkpoint. Until then the database is the file *plus* the log's committed frames: a page's
//! latest committed frame replaces its copy in the file, pages past the end of the file exist
//! only in the log, and the last commit frame says how many pages the database has (fewer than
//! the file holds when a transaction shrank it).
//!
//! Policy, following SQLite's own recovery (`walIndexRecover` in `wal.c`), which is what any
//! SQLite reader runs when it opens a log without a valid `-shm` index:
//!
//! - a log that is absent, empty, no longer than its header, or whose header has a bad magic
//!   number, page size or checksum holds nothing: the file alone is the database
//!   ([`WalState::Ignored`]);
//! - a header with an unknown format version is an error (SQLite refuses to open it);
//! - frames are read in order up to the first invalid one (wrong salts, page 0, checksum
//!   mismatch, or cut short), and only those up to the last valid commit frame count
//!   (see [`recover`]): uncommitted tails and torn frames are ignored;
//! - the log's page size must equal the database's, and every page of the committed database
//!   must exist in the file or the log (otherwise the log is not this database's, or the file
//!   lost pages): both are errors, as no answer read from such a pair could be trusted.
//!
//! The log is the one beside the database's resolved path ([`crate::sidecar`]), as in SQLite:
//! beside a symbolic link's target, not the link.
//!
//! Nothing is written: the log is opened read-only; which frames count while a writer works is
//! decided by [`crate::snapshot`]: under a `-shm` read mark the frame map is built from the
//! index's page numbers ([`indexed`]), and recovery ([`open`]) serves the snapshots without a
//! live index. [`WalIndex`] is the result, held by [`crate::PageFile`] (which reads
//! every page through it) and [`crate::TablePlan`] (so the engine can read pages itself:
//! [`WalIndex::location`]). Its [`WalFingerprint`] lets a scan check at the end that no
//! transaction committed and no checkpoint reset the log meanwhile.

mod header;
pub mod indexed;
mod recover;

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

pub use header::{
    checksum, ChecksumOrder, HeaderProblem, WalHeader, FORMAT_VERSION, FRAME_HEADER_SIZE,
    MAGIC_BIG_ENDIAN, MAGIC_LITTLE_ENDIAN, WAL_HEADER_SIZE,
};
pub use recover::{frame_offset, recover, CommittedLog, Recovery};

use crate::error::{Error, Result};
use crate::header::DbHeader;
use crate::sidecar::{sidecar_metadata, DbFiles};

pub use crate::sidecar::wal_path;

/// Where the latest committed copy of a page is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageLocation {
    /// At this byte offset of the database file.
    Main(u64),
    /// At this byte offset of the write-ahead log (the page image of its frame).
    Wal(u64),
}

/// One page's latest committed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct WalFrame {
    /// The page number.
    pub page: u32,
    /// The byte offset of the page image in the log (just after the frame's header).
    pub offset: u64,
}

/// What identifies the committed state of a log: equal fingerprints taken before and after a
/// scan mean no transaction committed and no checkpoint reset the log in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalFingerprint {
    /// The checkpoint sequence number from the header.
    pub checkpoint_seq: u32,
    /// Salt-1 and salt-2 from the header (a reset log gets new salts).
    pub salts: [u32; 2],
    /// The 1-based index of the last commit frame.
    pub last_commit_frame: u32,
    /// The cumulative checksum at that frame (covering every frame before it).
    pub commit_checksum: [u32; 2],
    /// The database size in pages committed by that frame.
    pub db_pages: u32,
}

/// The committed frames of a database's write-ahead log: the frame map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalIndex {
    /// The log file (`DB-wal`).
    pub path: PathBuf,
    /// The page size, equal to the database's.
    pub page_size: u32,
    /// Every page with a committed frame and where its latest committed image lies in the
    /// log, sorted by page number; pages past [`WalIndex::db_pages`] are left out.
    pub frames: Vec<WalFrame>,
    /// The database size in pages after the last commit (pages past the end of the database
    /// file exist only in the log; fewer pages than the file holds means the database shrank).
    pub db_pages: u32,
    /// Valid frames after the last commit, which do not count (a transaction in progress or
    /// never committed).
    pub uncommitted_frames: u32,
    /// The log's committed state, to detect a change during a scan.
    pub fingerprint: WalFingerprint,
}

impl WalIndex {
    /// The offset in the log of the latest committed image of `page`, when the log has one.
    pub fn frame_offset(&self, page: u32) -> Option<u64> {
        self.frames
            .binary_search_by_key(&page, |f| f.page)
            .ok()
            .map(|i| self.frames[i].offset)
    }

    /// Where to read `page` (1-based): its frame in the log, else its place in the database
    /// file. The page number is not checked against [`WalIndex::db_pages`]; callers check it.
    pub fn location(&self, page: u32) -> PageLocation {
        match self.frame_offset(page) {
            Some(offset) => PageLocation::Wal(offset),
            None => {
                PageLocation::Main(u64::from(page.saturating_sub(1)) * u64::from(self.page_size))
            }
        }
    }

    fn invalid(&self, db: &Path, what: String) -> Error {
        Error::Invalid {
            path: db.to_path_buf(),
            what: format!("write-ahead log {}: {what}", self.path.display()),
        }
    }

    /// Checks that the log's page size is the one recorded in `header_bytes`, the start of
    /// the latest committed page 1 (checked before the rest of the header, whose page count
    /// would not make sense with a foreign log). SQLite finds such a pair corrupt.
    pub fn check_page_size(&self, db: &Path, header_bytes: &[u8]) -> Result<()> {
        let raw = crate::format::be_u16(header_bytes, 16).unwrap_or(0);
        let db_page_size = if raw == 1 { 65536 } else { u32::from(raw) };
        if db_page_size != self.page_size {
            return Err(self.invalid(
                db,
                format!(
                    "its page size {} differs from the database's {db_page_size}",
                    self.page_size
                ),
            ));
        }
        Ok(())
    }

    /// Checks the log against the database it belongs to (`header` is the database's, read
    /// through the log): the same page size, and every page of the committed database present
    /// in the file or in the log.
    pub fn check_against(&self, db: &Path, header: &DbHeader) -> Result<()> {
        let invalid = |what: String| self.invalid(db, what);
        if header.page_size != self.page_size {
            return Err(invalid(format!(
                "its page size {} differs from the database's {}",
                self.page_size, header.page_size
            )));
        }
        let in_file =
            u32::try_from(header.file_size / u64::from(header.page_size)).unwrap_or(u32::MAX);
        // Every page past the file's end must be in the log, except the lock-byte page, which
        // SQLite never writes.
        // One pass over the sorted frames (the committed size may be forged to 2^32 - 1).
        let lock = u64::from(header.pending_byte_page());
        let skip_lock = |p: u64| if p == lock { p + 1 } else { p };
        let mut next = skip_lock(u64::from(in_file) + 1);
        for frame in &self.frames {
            let page = u64::from(frame.page);
            if page > next {
                break;
            }
            if page == next {
                next = skip_lock(next + 1);
            }
        }
        if next <= u64::from(self.db_pages) {
            return Err(invalid(format!(
                "its last commit makes the database {} pages long, but page {next} is neither \
                 in the database file ({in_file} pages) nor in the log",
                self.db_pages
            )));
        }
        Ok(())
    }
}

/// What the log beside a database holds.
#[derive(Debug)]
pub enum WalState {
    /// No log file, or an empty one.
    Absent,
    /// A log SQLite would find no committed frame in (the reason says why): the database
    /// file alone is the database.
    Ignored(String),
    /// Committed frames, with the log opened read-only for reading them.
    Active(WalIndex, File),
}

/// Opens and reads the log SQLite uses for `files` ([`DbFiles::wal`], beside the resolved
/// path; see the module docs for what counts). Errors name the database as given; I/O errors
/// and an unknown log format version are errors, anything else malformed in the log makes
/// SQLite (and so this reader) ignore the frames concerned.
pub fn open(files: &DbFiles) -> Result<WalState> {
    let db = files.given.as_path();
    let path = files.wal.clone();
    let io = |op: &str, source| Error::Io {
        path: db.to_path_buf(),
        op: format!("{op} {}", path.display()),
        source,
    };
    match sidecar_metadata(db, &path)? {
        None => return Ok(WalState::Absent),
        Some(meta) if meta.len() == 0 => return Ok(WalState::Absent),
        Some(_) => {}
    }
    let file = File::open(&path).map_err(|e| io("open", e))?;
    // The length of the file as opened: a writer appending meanwhile adds frames we ignore.
    let len = file.metadata().map_err(|e| io("stat", e))?.len();
    let reader = BufReader::with_capacity(1 << 20, &file);
    let log = match recover(reader, len).map_err(|e| io("read", e))? {
        Recovery::NoCommits(reason) => return Ok(WalState::Ignored(reason)),
        Recovery::Fatal(problem) => {
            return Err(Error::Invalid {
                path: db.to_path_buf(),
                what: format!("write-ahead log {}: {problem}", path.display()),
            })
        }
        Recovery::Committed(log) => log,
    };
    let fingerprint = WalFingerprint {
        checkpoint_seq: log.header.checkpoint_seq,
        salts: log.header.salts,
        last_commit_frame: log.last_commit,
        commit_checksum: log.commit_checksum,
        db_pages: log.db_pages,
    };
    let index = WalIndex {
        path,
        page_size: log.header.page_size,
        frames: log
            .frames
            .into_iter()
            .map(|(page, offset)| WalFrame { page, offset })
            .collect(),
        db_pages: log.db_pages,
        uncommitted_frames: log.uncommitted_frames,
        fingerprint,
    };
    Ok(WalState::Active(index, file))
}
