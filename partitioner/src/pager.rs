//! Bounds-checked reads of whole pages from the database file.
//!
//! [`PageFile`] opens the file read-only (`O_RDONLY`; it never writes, locks or creates
//! anything, so it cannot disturb a database another process has open) and reads pages with
//! positioned reads (`pread`), so one `PageFile` can serve any number of readers without a
//! shared file offset. When a write-ahead log (`DB-wal`) holds committed frames, every page
//! is read from its latest committed copy: the log's frame when it has one, else the file (see
//! [`crate::wal`]); the header then comes from the latest page 1 and the page count from the
//! log's last commit. It refuses a hot rollback journal (`DB-journal` starting with the journal
//! magic): a write is in progress or was interrupted, and the file may hold half of it until
//! the writer commits or SQLite rolls the journal back. Both sidecar files are looked for
//! beside the resolved path, as SQLite does ([`crate::sidecar`]: through a symbolic link,
//! beside its target). An empty journal (`journal_mode=TRUNCATE`) or one whose header is zeroed
//! (`journal_mode=PERSIST` after a commit) is a finished transaction and fine.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::{be_u32, DB_HEADER_SIZE};
use crate::header::DbHeader;
use crate::sidecar::DbFiles;
use crate::snapshot::{self, ReadSnapshot, WalView};
use crate::wal::{self, PageLocation, WalFingerprint, WalIndex, WalState};
use std::sync::Arc;
use std::time::SystemTime;

pub use crate::snapshot::{check_no_hot_journal, JOURNAL_MAGIC};

/// What the database file and its log looked like when opened, to detect a change (a
/// transaction committed, a checkpoint ran) between planning a scan and its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSnapshot {
    /// The database file's size in bytes.
    pub db_size: u64,
    /// The change counter in the database *file's* own header (bytes 24..28 on disk; the
    /// validated header's counter comes from the log's copy of page 1 when it has one).
    pub db_change_counter: u32,
    /// The log's committed state; `None` when no committed frame counts (no log, an empty
    /// one, or one SQLite ignores).
    pub wal: Option<WalFingerprint>,
    /// The database file's modification time (a checkpoint writes the file without changing
    /// its size or its change counter).
    pub db_modified: Option<SystemTime>,
}

impl FileSnapshot {
    /// How `now` differs from `self` (taken earlier), or `None` when they are equal.
    pub fn difference(&self, now: &FileSnapshot) -> Option<String> {
        if self.db_size != now.db_size {
            return Some(format!(
                "the file size {} became {}",
                self.db_size, now.db_size
            ));
        }
        if self.db_change_counter != now.db_change_counter {
            return Some(format!(
                "the change counter {} became {}",
                self.db_change_counter, now.db_change_counter
            ));
        }
        if self.db_modified != now.db_modified {
            return Some("the file was written".into());
        }
        match (self.wal, now.wal) {
            (None, None) => None,
            (Some(a), Some(b)) if a == b => None,
            (None, Some(_)) => Some("a transaction committed to the write-ahead log".into()),
            (Some(_), None) => Some("the write-ahead log was checkpointed or removed".into()),
            (Some(a), Some(b)) if a.salts != b.salts => {
                Some("the write-ahead log was reset by a checkpoint".into())
            }
            (Some(a), Some(b)) => Some(format!(
                "the write-ahead log's last commit moved from frame {} to frame {}",
                a.last_commit_frame, b.last_commit_frame
            )),
        }
    }
}

/// A database file opened read-only, with its validated header and, when its write-ahead log
/// holds committed frames, that log's frame map.
#[derive(Debug)]
pub struct PageFile {
    path: PathBuf,
    real_path: PathBuf,
    file: File,
    header: DbHeader,
    wal: Option<(WalIndex, File)>,
    wal_ignored: Option<String>,
    snapshot: FileSnapshot,
    read: Arc<ReadSnapshot>,
}

impl PageFile {
    /// Opens `path` read-only and takes a consistent snapshot of it ([`crate::snapshot`]:
    /// the locks a SQLite reader takes, held until the `PageFile` and every clone of its
    /// [`PageFile::read_snapshot`] are dropped), refuses a hot `-journal`, reads the `-wal`
    /// log's frames that belong to the snapshot (see [`crate::wal`]), and reads and validates
    /// the header (from the log's copy of page 1 when it has one). The path is resolved first
    /// as SQLite resolves it ([`crate::sidecar`]): through a symbolic link, the file, log and
    /// journal read are the ones beside the link's target; errors still name `path` as given.
    pub fn open(path: &Path) -> Result<Self> {
        let files = DbFiles::resolve(path)?;
        let read = Arc::new(snapshot::acquire(&files)?);
        Self::open_in(&files, read)
    }

    /// Opens the database of `files` within an already held snapshot `read` (a second reader
    /// of the same state: [`crate::TablePlan::census`]).
    pub fn open_in(files: &DbFiles, read: Arc<ReadSnapshot>) -> Result<Self> {
        let path = files.given.as_path();
        let io = |op: &str, source| Error::Io {
            path: path.to_path_buf(),
            op: op.to_string(),
            source,
        };
        // std opens with O_RDONLY | O_CLOEXEC: nothing here can modify the database.
        let file = File::open(&files.real).map_err(|e| io("open", e))?;
        let meta = file.metadata().map_err(|e| io("stat", e))?;
        if !meta.is_file() {
            return Err(Error::Invalid {
                path: path.to_path_buf(),
                what: "not a regular file".to_string(),
            });
        }
        let file_size = meta.len();
        let mut main_head = [0u8; DB_HEADER_SIZE];
        let have = usize::try_from(file_size).map_or(DB_HEADER_SIZE, |n| n.min(DB_HEADER_SIZE));
        file.read_exact_at(&mut main_head[..have], 0)
            .map_err(|e| io("read header", e))?;
        let state = wal_state(files, &read, file_size)?;
        let (wal, wal_ignored) = match state {
            WalState::Absent => (None, None),
            WalState::Ignored(reason) => (None, Some(reason)),
            WalState::Active(index, log) => (Some((index, log)), None),
        };
        let header = match &wal {
            None => DbHeader::parse(path, &main_head[..have], file_size)?,
            Some((index, log)) => {
                let mut head = [0u8; DB_HEADER_SIZE];
                let have = match index.frame_offset(1) {
                    Some(at) => {
                        log.read_exact_at(&mut head, at).map_err(|e| {
                            io(&format!("read page 1 from {}", index.path.display()), e)
                        })?;
                        DB_HEADER_SIZE
                    }
                    None => {
                        head = main_head;
                        have
                    }
                };
                if have == DB_HEADER_SIZE && head.starts_with(crate::header::MAGIC) {
                    index.check_page_size(path, &head)?;
                }
                let header =
                    DbHeader::parse_with_wal(path, &head[..have], file_size, Some(index.db_pages))?;
                index.check_against(path, &header)?;
                header
            }
        };
        let snapshot = FileSnapshot {
            db_size: file_size,
            db_change_counter: be_u32(&main_head[..have], 24).unwrap_or(0),
            wal: wal.as_ref().map(|(index, _)| index.fingerprint),
            db_modified: meta.modified().ok(),
        };
        Ok(Self {
            path: path.to_path_buf(),
            real_path: files.real.clone(),
            file,
            header,
            wal,
            wal_ignored,
            snapshot,
            read,
        })
    }

    /// A second handle on the same file in the same snapshot, with the same frame map (the
    /// log is not read again, so what a writer appended since is not seen either): for
    /// planning several tables of one committed state ([`crate::TablePlan::open_for_scan_from`]).
    pub fn try_clone(&self) -> Result<Self> {
        let io = |what: &Path, source| Error::Io {
            path: self.path.clone(),
            op: format!("duplicate the descriptor of {}", what.display()),
            source,
        };
        let wal = match &self.wal {
            Some((index, file)) => Some((
                index.clone(),
                file.try_clone().map_err(|e| io(&self.real_path, e))?,
            )),
            None => None,
        };
        Ok(PageFile {
            path: self.path.clone(),
            real_path: self.real_path.clone(),
            file: self.file.try_clone().map_err(|e| io(&self.real_path, e))?,
            header: self.header.clone(),
            wal,
            wal_ignored: self.wal_ignored.clone(),
            snapshot: self.snapshot,
            read: Arc::clone(&self.read),
        })
    }

    /// Fails with [`Error::Changed`] naming the file when the snapshot is held without locks
    /// ([`crate::snapshot::Protocol::VerifyRetry`]) and the file or its log changed since it
    /// was opened (a commit, a checkpoint, the file replaced): what was read from it may then
    /// mix versions. Under SQLite's locks nothing read can change, and this returns `Ok` at
    /// once. Reopens both files and rereads the log.
    pub fn check_unchanged(&self) -> Result<()> {
        if !self.read.needs_verification() {
            return Ok(());
        }
        let now = PageFile::open_in(&DbFiles::resolve(&self.path)?, Arc::clone(&self.read))?;
        let changed = |what: &str| Error::Changed {
            path: self.path.clone(),
            what: format!("the file changed since it was opened: {what}"),
        };
        match self.snapshot.difference(&now.snapshot) {
            Some(what) => Err(changed(&what)),
            None if now.header != self.header => Err(changed("its header differs")),
            None => Ok(()),
        }
    }

    /// The snapshot this file is read in (its locks last as long as any clone of it).
    pub fn read_snapshot(&self) -> &Arc<ReadSnapshot> {
        &self.read
    }

    /// The file's path as given to [`PageFile::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The full path the file was opened by, with every symbolic link resolved (see
    /// [`crate::sidecar`]); its log and journal are the ones beside it.
    pub fn real_path(&self) -> &Path {
        &self.real_path
    }

    /// The validated header (of the latest committed page 1).
    pub fn header(&self) -> &DbHeader {
        &self.header
    }

    /// The write-ahead log's frame map, when the log holds committed frames.
    pub fn wal(&self) -> Option<&WalIndex> {
        self.wal.as_ref().map(|(index, _)| index)
    }

    /// Why a non-empty write-ahead log beside the file was ignored (SQLite finds no committed
    /// frame in it), if one was.
    pub fn wal_ignored(&self) -> Option<&str> {
        self.wal_ignored.as_deref()
    }

    /// The state of the file and its log when opened.
    pub fn snapshot(&self) -> FileSnapshot {
        self.snapshot
    }

    /// Where the latest committed copy of `page` lies (not checked against the page count).
    pub fn location(&self, page: u32) -> PageLocation {
        match self.wal() {
            Some(index) => index.location(page),
            None => PageLocation::Main(self.header.page_offset(page)),
        }
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

    /// Reads the latest committed copy of page `page` (1-based) into `buf`, which must be
    /// exactly one page long.
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

    /// Tells the kernel that `pages` will be read soon (`POSIX_FADV_WILLNEED` on their bytes in
    /// the database file or the log), so that it reads them in the background, together,
    /// instead of one synchronous read at a time when they are not cached. A hint only:
    /// failures are ignored, and pages already cached cost one system call per run of
    /// adjacent pages.
    pub fn will_need(&self, pages: &[u32]) {
        let size = self.header.page_size as u64;
        let mut run: Option<(bool, u64, u64)> = None; // (in the log, start, end)
        let advise = |(in_log, start, end): (bool, u64, u64)| {
            let file = match (&self.wal, in_log) {
                (Some((_, log)), true) => log,
                _ => &self.file,
            };
            let _ = advise_will_need(file, start, end - start);
        };
        for &page in pages {
            if page == 0 || page > self.header.page_count {
                continue;
            }
            let (in_log, at) = match self.location(page) {
                PageLocation::Wal(at) => (true, at),
                PageLocation::Main(at) => (false, at),
            };
            run = match run {
                Some((l, start, end)) if l == in_log && end == at => Some((l, start, at + size)),
                Some(done) => {
                    advise(done);
                    Some((in_log, at, at + size))
                }
                None => Some((in_log, at, at + size)),
            };
        }
        if let Some(done) = run {
            advise(done);
        }
    }

    /// Whether the latest committed copy of `page` is in the page cache, asked without
    /// waiting for the disk (`preadv2` of one byte with `RWF_NOWAIT`, which fails with
    /// `EAGAIN` instead of reading). `None` when the kernel cannot tell (an old kernel, a file
    /// system without non-blocking reads).
    #[cfg(target_env = "gnu")]
    pub fn is_cached(&self, page: u32) -> Option<bool> {
        if page == 0 || page > self.header.page_count {
            return None;
        }
        let (file, at) = match (self.location(page), &self.wal) {
            (PageLocation::Wal(at), Some((_, log))) => (log, at),
            (PageLocation::Wal(at) | PageLocation::Main(at), _) => (&self.file, at),
        };
        use std::os::fd::AsRawFd;
        let mut byte = [0u8; 1];
        let iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        // SAFETY: one iovec over a live one-byte buffer; the descriptor is open for `file`'s
        // life.
        let n = unsafe {
            libc::preadv2(
                file.as_raw_fd(),
                &iov,
                1,
                i64::try_from(at).ok()?,
                libc::RWF_NOWAIT,
            )
        };
        if n >= 0 {
            return Some(true);
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) => Some(false),
            _ => None,
        }
    }

    /// Whether `page` is in the page cache: this C library has no `preadv2`, so unknown.
    #[cfg(not(target_env = "gnu"))]
    pub fn is_cached(&self, _page: u32) -> Option<bool> {
        None
    }

    /// Reads `buf.len()` bytes starting `offset` bytes into the latest committed copy of page
    /// `page` (for example the 4-byte next-page pointer of an overflow page), without reading
    /// the whole page.
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
        let (source, at, from) = match (self.location(page), &self.wal) {
            (PageLocation::Wal(at), Some((index, log))) => (log, at, Some(&index.path)),
            (PageLocation::Wal(at) | PageLocation::Main(at), _) => (&self.file, at, None),
        };
        source
            .read_exact_at(buf, at + offset as u64)
            .map_err(|e| match (e.kind(), from) {
                // Both files were checked at open, so one shrank while we held it.
                (ErrorKind::UnexpectedEof, None) => self.corrupt(
                    page,
                    "the file ended inside this page (truncated while open?)",
                ),
                (ErrorKind::UnexpectedEof, Some(log)) => self.corrupt(
                    page,
                    format!(
                        "the write-ahead log {} ended inside this page's frame (truncated \
                         while open?)",
                        log.display()
                    ),
                ),
                (_, None) => Error::Io {
                    path: self.path.clone(),
                    op: format!("read page {page}"),
                    source: e,
                },
                (_, Some(log)) => Error::Io {
                    path: self.path.clone(),
                    op: format!("read page {page} from {}", log.display()),
                    source: e,
                },
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

/// The log as the snapshot sees it. With every frame backfilled the file alone is the
/// database, its own header included.
fn wal_state(files: &DbFiles, read: &ReadSnapshot, file_size: u64) -> Result<WalState> {
    let changed = |what: String| Error::Changed {
        path: files.given.clone(),
        what: format!("write-ahead log {}: {what}", files.wal.display()),
    };
    // SQLite deletes the log of an empty database file; reading, we ignore it.
    if file_size == 0 {
        return Ok(WalState::Absent);
    }
    match read.view {
        WalView::FileOnly | WalView::Backfilled { .. } => Ok(WalState::Absent),
        WalView::Recovered { expect } => {
            let state = wal::open(files)?;
            if let Some(expect) = expect {
                let now = match &state {
                    WalState::Active(index, _) => Some(index.fingerprint),
                    _ => None,
                };
                if now != Some(expect) {
                    return Err(changed("it changed while its frames were recovered".into()));
                }
            }
            Ok(state)
        }
        WalView::Frames {
            min_frame,
            max_frame,
            salts,
            frame_checksum,
            db_pages,
            page_size,
        } => {
            let pages = if min_frame > max_frame {
                Vec::new()
            } else {
                read.frame_pages(min_frame, max_frame)
                    .map_err(|e| Error::Io {
                        path: files.given.clone(),
                        op: format!("read {}", files.shm.display()),
                        source: e,
                    })?
                    .ok_or_else(|| changed("the -shm index is shorter than its snapshot".into()))?
            };
            let snap = wal::indexed::IndexedSnapshot {
                min_frame,
                max_frame,
                salts,
                frame_checksum,
                db_pages,
                page_size,
            };
            wal::indexed::open_indexed(files, &snap, &pages)
        }
    }
}

/// `posix_fadvise(WILLNEED)` on `len` bytes of `file` from `offset`.
fn advise_will_need(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Ok(());
    };
    // SAFETY: posix_fadvise reads no memory of ours; the descriptor is open for `file`'s life.
    let rc =
        unsafe { libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_WILLNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}
