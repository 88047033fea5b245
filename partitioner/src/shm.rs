//! The `-shm` wal-index, read-only: its header, checkpoint information and lock bytes.
//!
//! Every SQLite connection to a database in WAL mode maps `DB-shm` and keeps there the
//! shared state of the log (`wal.c`, "WAL-INDEX FORMAT"), in the machine's native byte order:
//!
//! | offset | what |
//! |---|---|
//! | 0..48 | the wal-index header ([`IndexHeader`]): version 3007000, change counter, `isInit`, checksum order, page size, `mxFrame` (the last committed frame), `nPage` (the database size after it), the checksum at `mxFrame`, the log's salts, a checksum of bytes 0..40 |
//! | 48..96 | a second copy of the header (writers write it first, readers read it second) |
//! | 96..136 | checkpoint information ([`CheckpointInfo`]): `nBackfill` (frames already copied into the database file), `aReadMark[0..5]`, 8 unused lock bytes, `nBackfillAttempted` |
//!
//! The lock bytes at 120..128 are never read or written, only locked: [`WRITE_LOCK`],
//! [`CKPT_LOCK`], [`RECOVER_LOCK`], and `READ(i)` at [`read_lock_byte`]; byte 128 doubles as
//! the dead-man switch ([`DMS_LOCK`]) that tells whether any connection has the index open.
//!
//! Policy: the file is opened `O_RDONLY` (never created) and read with `pread`, one copy of the
//! header per call, so the two copies are read in SQLite's order ([0] then [1]) with a system
//! call between them as the barrier; a header whose copies differ, whose `isInit` is 0 or whose
//! checksum fails is *dirty* (a writer is updating it, or nobody has initialised it) and
//! [`read_header`] returns `None`. Nothing is ever written to `-shm`.
//!
//! Layering: above [`crate::lock`] and [`crate::wal`]'s checksum; used by [`crate::snapshot`].

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::wal::{checksum, ChecksumOrder};

/// The `iVersion` of every wal-index SQLite writes (`WALINDEX_MAX_VERSION`).
pub const INDEX_VERSION: u32 = 3_007_000;
/// The `WRITE` lock byte (held exclusively by the one writer).
pub const WRITE_LOCK: u64 = 120;
/// The `CKPT` lock byte (held exclusively by a checkpointer).
pub const CKPT_LOCK: u64 = 121;
/// The `RECOVER` lock byte (held exclusively while the index is rebuilt).
pub const RECOVER_LOCK: u64 = 122;
/// The dead-man switch: every connection with the index open holds a read lock here.
pub const DMS_LOCK: u64 = 128;
/// Read marks in the index (`WAL_NREADER`): `aReadMark[0]` (always 0) and four more.
pub const READERS: usize = 5;
/// An unused read mark (`READMARK_NOT_USED`).
pub const MARK_NOT_USED: u32 = 0xffff_ffff;

/// The lock byte of read mark `i` (`WAL_READ_LOCK(i)`): 123 + i.
pub fn read_lock_byte(i: usize) -> u64 {
    123 + i as u64
}

/// The wal-index header (`WalIndexHdr`), as a reader that found both copies equal and the
/// checksum right sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexHeader {
    /// `iVersion` (must be [`INDEX_VERSION`]).
    pub version: u32,
    /// `iChange`, bumped by every write transaction.
    pub change: u32,
    /// The page size (`szPage`, with 1 meaning 65536).
    pub page_size: u32,
    /// `mxFrame`: the last frame of the last committed transaction; the snapshot's end.
    pub max_frame: u32,
    /// `nPage`: the database size in pages after that transaction (0: the file's size).
    pub db_pages: u32,
    /// `aFrameCksum`: the log's running checksum at frame `max_frame`.
    pub frame_checksum: [u32; 2],
    /// `aSalt`: the salts of the log's current generation, as the log header stores them
    /// (big-endian `u32`s at bytes 16..24 of `DB-wal`).
    pub salts: [u32; 2],
    /// The raw 48 bytes, to tell whether the header changed.
    pub raw: [u8; 48],
}

/// The checkpoint information (`WalCkptInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// `nBackfill`: frames 1..=n have been copied into the database file.
    pub backfilled: u32,
    /// `aReadMark[0..5]` ([`MARK_NOT_USED`] when free).
    pub read_marks: [u32; READERS],
    /// `nBackfillAttempted`.
    pub backfill_attempted: u32,
}

fn native(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses one copy of the header; `None` when it is not initialised or its checksum fails.
fn parse_header(b: &[u8; 48]) -> Option<IndexHeader> {
    if b[12] == 0 {
        return None; // isInit
    }
    // The checksum reads native words (`walChecksumBytes(1, ...)`).
    let order = if cfg!(target_endian = "little") {
        ChecksumOrder::LittleEndian
    } else {
        ChecksumOrder::BigEndian
    };
    if checksum(order, &b[..40], [0, 0]) != [native(b, 40), native(b, 44)] {
        return None;
    }
    let raw_size = u32::from(u16::from_ne_bytes([b[14], b[15]]));
    Some(IndexHeader {
        version: native(b, 0),
        change: native(b, 8),
        page_size: (raw_size & 0xfe00) + ((raw_size & 1) << 16),
        max_frame: native(b, 16),
        db_pages: native(b, 20),
        frame_checksum: [native(b, 24), native(b, 28)],
        salts: [
            u32::from_be_bytes([b[32], b[33], b[34], b[35]]),
            u32::from_be_bytes([b[36], b[37], b[38], b[39]]),
        ],
        raw: *b,
    })
}

/// Reads the header as `walIndexTryHdr` does: copy [0], then copy [1]; `None` when they
/// differ, when `isInit` is 0, when the checksum fails or when the file is too short (a
/// connection has just truncated it to start afresh).
pub fn read_header(shm: &File) -> io::Result<Option<IndexHeader>> {
    let (mut first, mut second) = ([0u8; 48], [0u8; 48]);
    if read_full(shm, &mut first, 0)? < 48 || read_full(shm, &mut second, 48)? < 48 {
        return Ok(None);
    }
    if first != second {
        return Ok(None);
    }
    Ok(parse_header(&first))
}

/// Reads the checkpoint information; `None` when the file is too short to hold it.
pub fn read_checkpoint_info(shm: &File) -> io::Result<Option<CheckpointInfo>> {
    let mut b = [0u8; 40];
    if read_full(shm, &mut b, 96)? < 40 {
        return Ok(None);
    }
    let mut read_marks = [0u32; READERS];
    for (i, m) in read_marks.iter_mut().enumerate() {
        *m = native(&b, 4 + 4 * i);
    }
    Ok(Some(CheckpointInfo {
        backfilled: native(&b, 0),
        read_marks,
        backfill_attempted: native(&b, 32),
    }))
}

/// Frames whose page numbers the first 32 KiB block of the index holds (after the 136-byte
/// header: `HASHTABLE_NPAGE_ONE`).
const FIRST_BLOCK_FRAMES: u32 = 4096 - 136 / 4;
/// Frames per later block (`HASHTABLE_NPAGE`); each block is 32 KiB (`WALINDEX_PGSZ`).
const BLOCK_FRAMES: u32 = 4096;

/// The byte offset in `-shm` of the page number of 1-based frame `frame` (`aPgno` of the hash
/// block `walFramePage` names).
fn page_number_offset(frame: u32) -> u64 {
    let block = (frame + BLOCK_FRAMES - FIRST_BLOCK_FRAMES - 1) / BLOCK_FRAMES;
    if block == 0 {
        136 + 4 * u64::from(frame - 1)
    } else {
        let zero = FIRST_BLOCK_FRAMES + (block - 1) * BLOCK_FRAMES;
        u64::from(block) * 32768 + 4 * u64::from(frame - zero - 1)
    }
}

/// The page number of every frame `first..=last` from the index's page-number arrays, as
/// SQLite's readers look frames up (it never reads frame headers from `-wal` for that).
/// `None` when the file is too short to hold them.
pub fn frame_pages(shm: &File, first: u32, last: u32) -> io::Result<Option<Vec<u32>>> {
    let mut out = Vec::with_capacity(last.saturating_sub(first) as usize + 1);
    let mut frame = first;
    while frame <= last {
        // The frames up to the end of this frame's block are contiguous in the file.
        let block = (frame + BLOCK_FRAMES - FIRST_BLOCK_FRAMES - 1) / BLOCK_FRAMES;
        let block_last = FIRST_BLOCK_FRAMES + block * BLOCK_FRAMES;
        let upto = last.min(block_last);
        let n = (upto - frame + 1) as usize;
        let mut buf = vec![0u8; 4 * n];
        if read_full(shm, &mut buf, page_number_offset(frame))? < buf.len() {
            return Ok(None);
        }
        out.extend(buf.chunks_exact(4).map(|c| native(c, 0)));
        frame = upto + 1;
    }
    Ok(Some(out))
}

fn read_full(f: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], at + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_numbers_sit_in_sqlites_hash_blocks() {
        assert_eq!(page_number_offset(1), 136);
        assert_eq!(page_number_offset(4062), 136 + 4 * 4061);
        assert_eq!(page_number_offset(4063), 32768);
        assert_eq!(page_number_offset(4062 + 4096), 32768 + 4 * 4095);
        assert_eq!(page_number_offset(4062 + 4097), 2 * 32768);
    }

    #[test]
    fn a_header_with_a_bad_checksum_or_no_init_is_dirty() {
        let mut h = [0u8; 48];
        h[0..4].copy_from_slice(&INDEX_VERSION.to_ne_bytes());
        h[12] = 1;
        h[14..16].copy_from_slice(&4096u16.to_ne_bytes());
        h[16..20].copy_from_slice(&7u32.to_ne_bytes());
        h[32..40].copy_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
        let order = if cfg!(target_endian = "little") {
            ChecksumOrder::LittleEndian
        } else {
            ChecksumOrder::BigEndian
        };
        let sum = checksum(order, &h[..40], [0, 0]);
        h[40..44].copy_from_slice(&sum[0].to_ne_bytes());
        h[44..48].copy_from_slice(&sum[1].to_ne_bytes());
        let parsed = parse_header(&h).unwrap();
        assert_eq!((parsed.max_frame, parsed.page_size), (7, 4096));
        assert_eq!(parsed.salts, [1, 2]);
        let mut bad = h;
        bad[20] ^= 1;
        assert!(parse_header(&bad).is_none());
        let mut uninit = h;
        uninit[12] = 0;
        assert!(parse_header(&uninit).is_none());
    }
}
