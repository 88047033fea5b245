//! The frame map of a snapshot held by a `-shm` read mark, built from the wal-index's page
//! numbers instead of a recovery of the whole log.
//!
//! Under `READ(i)` the frames `minFrame..=mxFrame` cannot change (no checkpoint passes the
//! mark, no reset happens), so SQLite's readers take their page numbers from the index
//! (`walFindFrame`) and read nothing else of the log but the pages they need. The same here:
//! [`open_indexed`] takes the page number of each of those frames from `-shm`
//! ([`crate::shm::frame_pages`]), keeps each page's latest frame, and checks the log against
//! the index cheaply: its header's salts and page size, and the header of frame `mxFrame`
//! (the commit that ends the snapshot: its page number, the database size, the salts and the
//! running checksum the index records). A log that disagrees is [`crate::Error::Changed`].
//!
//! Layering: part of [`crate::wal`], used by [`crate::pager`] for [`crate::snapshot::WalView::Frames`].

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use super::{frame_offset, WalFingerprint, WalFrame, WalHeader, WalIndex, WalState};
use super::{FRAME_HEADER_SIZE, WAL_HEADER_SIZE};
use crate::error::{Error, Result};
use crate::format::be_u32;
use crate::sidecar::DbFiles;

/// What the index says the snapshot is.
#[derive(Debug, Clone, Copy)]
pub struct IndexedSnapshot {
    /// The first frame not yet in the database file (`nBackfill + 1`).
    pub min_frame: u32,
    /// The snapshot's last commit frame (`mxFrame`).
    pub max_frame: u32,
    /// The log generation's salts.
    pub salts: [u32; 2],
    /// The running checksum at `max_frame`.
    pub frame_checksum: [u32; 2],
    /// The database size in pages at `max_frame`.
    pub db_pages: u32,
    /// The page size.
    pub page_size: u32,
}

/// Opens the log of `files` for the snapshot `snap`, with `pages[k]` the page number of frame
/// `snap.min_frame + k` (see the module docs).
pub fn open_indexed(files: &DbFiles, snap: &IndexedSnapshot, pages: &[u32]) -> Result<WalState> {
    let db = files.given.as_path();
    let path = files.wal.clone();
    let changed = |what: String| Error::Changed {
        path: db.to_path_buf(),
        what: format!("write-ahead log {}: {what}", path.display()),
    };
    let io = |op: &str, source| Error::Io {
        path: db.to_path_buf(),
        op: format!("{op} {}", path.display()),
        source,
    };
    let log = File::open(&path).map_err(|e| io("open", e))?;
    let mut head = [0u8; WAL_HEADER_SIZE];
    log.read_exact_at(&mut head, 0)
        .map_err(|_| changed("its header is not the one the -shm index describes".into()))?;
    let header = WalHeader::parse(&head)
        .map_err(|p| changed(format!("its header does not match the -shm index: {p}")))?;
    if header.salts != snap.salts || header.page_size != snap.page_size {
        return Err(changed("its salts differ from the -shm index's".into()));
    }
    let mut last = [0u8; FRAME_HEADER_SIZE];
    log.read_exact_at(&mut last, frame_offset(snap.max_frame, snap.page_size))
        .map_err(|_| changed(format!("it ends before frame {}", snap.max_frame)))?;
    let field = |off| be_u32(&last, off).unwrap_or(0);
    let last_page = pages.last().copied();
    if [field(8), field(12)] != snap.salts
        || [field(16), field(20)] != snap.frame_checksum
        || field(4) == 0
        || (snap.db_pages != 0 && field(4) != snap.db_pages)
        || (last_page.is_some() && last_page != Some(field(0)))
    {
        return Err(changed(format!(
            "frame {} is not the commit the -shm index's snapshot ends at",
            snap.max_frame
        )));
    }
    let db_pages = field(4);
    let mut latest: HashMap<u32, u32> = HashMap::with_capacity(pages.len());
    for (k, &page) in pages.iter().enumerate() {
        latest.insert(page, snap.min_frame + k as u32);
    }
    let mut frames: Vec<WalFrame> = latest
        .into_iter()
        .filter(|&(page, _)| page != 0 && page <= db_pages)
        .map(|(page, i)| WalFrame {
            page,
            offset: frame_offset(i, snap.page_size) + FRAME_HEADER_SIZE as u64,
        })
        .collect();
    frames.sort_unstable();
    let index = WalIndex {
        path,
        page_size: snap.page_size,
        frames,
        db_pages,
        uncommitted_frames: 0,
        fingerprint: WalFingerprint {
            checkpoint_seq: header.checkpoint_seq,
            salts: header.salts,
            last_commit_frame: snap.max_frame,
            commit_checksum: snap.frame_checksum,
            db_pages,
        },
    };
    Ok(WalState::Active(index, log))
}
