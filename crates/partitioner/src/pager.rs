//! Bounds-checked reads of whole pages from the database file.
//!
//! [`PageFile`] opens the file read-only (`O_RDONLY`; it never writes, locks or creates
//! anything, so it cannot disturb a database another process has open) and reads pages with
//! positioned reads (`pread`), so one `PageFile` can serve any number of readers without a
//! shared file offset. It refuses a database whose write-ahead log (`DB-wal`) is not empty:
//! committed pages may live only in the log, and the file alone would show stale data. It
//! also refuses a hot rollback journal (`DB-journal` starting with the journal magic): a write
//! was interrupted (or is in progress) and the file may hold half of it until SQLite rolls
//! the journal back. An empty journal (`journal_mode=TRUNCATE`) or one whose header is zeroed
//! (`journal_mode=PERSIST` after a commit) is a finished transaction and fine.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::DB_HEADER_SIZE;
use crate::header::DbHeader;

/// The path of the write-ahead log SQLite keeps beside `db`: the file name plus `-wal`.
pub fn wal_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_os_string();
    name.push("-wal");
    PathBuf::from(name)
}

/// Fails with [`Error::Invalid`] when a non-empty `-wal` file sits beside `db`; an absent or
/// empty log (what a clean close or a `wal_checkpoint(TRUNCATE)` leaves) is fine.
pub fn check_no_wal(db: &Path) -> Result<()> {
    let wal = wal_path(db);
    match std::fs::metadata(&wal) {
        Ok(meta) if meta.len() > 0 => Err(Error::Invalid {
            path: db.to_path_buf(),
            what: format!(
                "a non-empty write-ahead log {} ({} bytes) exists beside the database; reading a \
                 WAL is not supported yet (checkpoint it first: PRAGMA wal_checkpoint(TRUNCATE))",
                wal.display(),
                meta.len()
            ),
        }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Io {
            path: db.to_path_buf(),
            op: format!("stat {}", wal.display()),
            source,
        }),
    }
}

/// The path of the rollback journal SQLite keeps beside `db`: the file name plus `-journal`.
pub fn journal_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_os_string();
    name.push("-journal");
    PathBuf::from(name)
}

/// The 8 bytes a rollback journal's header starts with while it holds a transaction
/// (`aJournalMagic` in SQLite's `pager.c`).
pub const JOURNAL_MAGIC: [u8; 8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7];

/// Fails with [`Error::Invalid`] when a hot rollback journal sits beside `db`: a `-journal`
/// file whose header starts with [`JOURNAL_MAGIC`], left by a write that was interrupted (or
/// is still in progress). An absent or empty journal, or one whose header has been zeroed
/// (`journal_mode=PERSIST` after a commit), is fine; one that is not a regular file is refused.
/// The journal is opened read-only and only its first 8 bytes are read.
pub fn check_no_hot_journal(db: &Path) -> Result<()> {
    let journal = journal_path(db);
    let io = |op: &str, source| Error::Io {
        path: db.to_path_buf(),
        op: format!("{op} {}", journal.display()),
        source,
    };
    match std::fs::metadata(&journal) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("stat", e)),
        // Opening a FIFO would block; SQLite could not use such a journal either.
        Ok(meta) if !meta.is_file() => {
            return Err(Error::Invalid {
                path: db.to_path_buf(),
                what: format!(
                    "{} beside the database is not a regular file",
                    journal.display()
                ),
            })
        }
        // Empty (journal_mode=TRUNCATE) or too short to hold a header: nothing to roll back.
        Ok(meta) if meta.len() < JOURNAL_MAGIC.len() as u64 => return Ok(()),
        Ok(_) => {}
    }
    let file = File::open(&journal).map_err(|e| io("open", e))?;
    let mut magic = [0u8; JOURNAL_MAGIC.len()];
    match file.read_exact_at(&mut magic, 0) {
        Ok(()) if magic == JOURNAL_MAGIC => Err(Error::Invalid {
            path: db.to_path_buf(),
            what: format!(
                "hot rollback journal {} beside the database: a write was interrupted (or is \
                 still in progress); open the database once with sqlite3 to roll it back",
                journal.display()
            ),
        }),
        // A zeroed (or otherwise non-magic) header: SQLite finds nothing to roll back.
        Ok(()) => Ok(()),
        // Truncated since the stat (a writer finished): nothing to roll back.
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => Ok(()),
        Err(e) => Err(io("read", e)),
    }
}

/// A database file opened read-only, with its validated header.
#[derive(Debug)]
pub struct PageFile {
    path: PathBuf,
    file: File,
    header: DbHeader,
}

impl PageFile {
    /// Opens `path` read-only, refuses a live `-wal` file or a hot `-journal` (see
    /// [`check_no_wal`] and [`check_no_hot_journal`]), and reads and validates the header.
    pub fn open(path: &Path) -> Result<Self> {
        let io = |op: &str, source| Error::Io {
            path: path.to_path_buf(),
            op: op.to_string(),
            source,
        };
        // std opens with O_RDONLY | O_CLOEXEC: nothing here can modify the database.
        let file = File::open(path).map_err(|e| io("open", e))?;
        let meta = file.metadata().map_err(|e| io("stat", e))?;
        if !meta.is_file() {
            return Err(Error::Invalid {
                path: path.to_path_buf(),
                what: "not a regular file".to_string(),
            });
        }
        check_no_wal(path)?;
        check_no_hot_journal(path)?;
        let file_size = meta.len();
        let mut bytes = [0u8; DB_HEADER_SIZE];
        let have = usize::try_from(file_size).map_or(DB_HEADER_SIZE, |n| n.min(DB_HEADER_SIZE));
        file.read_exact_at(&mut bytes[..have], 0)
            .map_err(|e| io("read header", e))?;
        let header = DbHeader::parse(path, &bytes[..have], file_size)?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            header,
        })
    }

    /// The file's path as given to [`PageFile::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The validated header.
    pub fn header(&self) -> &DbHeader {
        &self.header
    }

    /// The page size in bytes, as a buffer length.
    pub fn page_size(&self) -> usize {
        self.header.page_size as usize
    }

    /// A zeroed buffer of one page, to pass to [`PageFile::read_page`] again and again.
    pub fn page_buffer(&self) -> Vec<u8> {
        vec![0; self.page_size()]
    }

    /// Fails with [`Error::Corrupt`] naming `page` when it is 0 or past the last page.
    pub fn check_page_number(&self, page: u32) -> Result<()> {
        if page == 0 || page > self.header.page_count {
            return Err(self.corrupt(
                page,
                format!(
                    "page number out of range (the database has {} pages)",
                    self.header.page_count
                ),
            ));
        }
        Ok(())
    }

    /// Reads page `page` (1-based) into `buf`, which must be exactly one page long.
    pub fn read_page(&self, page: u32, buf: &mut [u8]) -> Result<()> {
        if buf.len() != self.page_size() {
            return Err(Error::Invalid {
                path: self.path.clone(),
                what: format!(
                    "page buffer of {} bytes for {}-byte pages",
                    buf.len(),
                    self.page_size()
                ),
            });
        }
        self.read_in_page(page, 0, buf)
    }

    /// Reads `buf.len()` bytes starting `offset` bytes into page `page` (for example the
    /// 4-byte next-page pointer of an overflow page), without reading the whole page.
    pub fn read_in_page(&self, page: u32, offset: usize, buf: &mut [u8]) -> Result<()> {
        self.check_page_number(page)?;
        if offset.saturating_add(buf.len()) > self.page_size() {
            return Err(self.corrupt(
                page,
                format!(
                    "read of {} bytes at offset {offset} runs past the page",
                    buf.len()
                ),
            ));
        }
        let at = self.header.page_offset(page) + offset as u64;
        self.file.read_exact_at(buf, at).map_err(|e| {
            if e.kind() == ErrorKind::UnexpectedEof {
                // The header check passed at open, so the file shrank while we held it.
                self.corrupt(
                    page,
                    "the file ended inside this page (truncated while open?)",
                )
            } else {
                Error::Io {
                    path: self.path.clone(),
                    op: format!("read page {page}"),
                    source: e,
                }
            }
        })
    }

    /// An [`Error::Corrupt`] for this file.
    pub fn corrupt(&self, page: u32, what: impl Into<String>) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            page,
            what: what.into(),
        }
    }

    /// An [`Error::Invalid`] for this file.
    pub fn invalid(&self, what: impl Into<String>) -> Error {
        Error::Invalid {
            path: self.path.clone(),
            what: what.into(),
        }
    }
}
