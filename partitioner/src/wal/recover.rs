//! Reading a log's frames the way SQLite's recovery does, into the frame map.
//!
//! Each frame is a 24-byte header (page number, database size in pages after the commit — non-zero
//! only on a transaction's last, "commit" frame —, salt-1, salt-2, checksum-1, checksum-2)
//! followed by one page image. A frame is valid when its salts equal the header's, its page
//! number is not 0, and its checksum equals the running checksum seeded by the header's and
//! extended over every earlier frame's first 8 header bytes and page image, then over its own.
//! [`recover`] reads frames in order, stops at the first invalid or incomplete one (a torn
//! write, or a leftover of an earlier log generation, whose salts differ), and keeps only the
//! frames up to the last valid commit frame: the frames of a transaction that never committed
//! are not part of the database.

use std::collections::HashMap;
use std::io::{ErrorKind, Read};

use super::header::{checksum, HeaderProblem, WalHeader, FRAME_HEADER_SIZE, WAL_HEADER_SIZE};
use crate::format::be_u32;

/// What SQLite's recovery makes of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// No committed frame counts: the database file alone is the database. Says why.
    NoCommits(String),
    /// The log's header carries a format version SQLite refuses to open.
    Fatal(HeaderProblem),
    /// The committed frames.
    Committed(CommittedLog),
}

/// The committed content of a log: which pages it holds and the database size it commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedLog {
    /// The validated log header.
    pub header: WalHeader,
    /// For every page with a committed frame, the byte offset in the log of the page image of
    /// its latest committed frame, sorted by page number. Pages past `db_pages` (left by a
    /// transaction that shrank the database) are dropped.
    pub frames: Vec<(u32, u64)>,
    /// The database size in pages, from the last commit frame.
    pub db_pages: u32,
    /// The 1-based index of the last commit frame (the number of frames that count).
    pub last_commit: u32,
    /// The running checksum at the last commit frame.
    pub commit_checksum: [u32; 2],
    /// Valid frames after the last commit: a transaction that has not committed (yet).
    pub uncommitted_frames: u32,
}

/// The byte offset of the start of 1-based frame `index` in a log of `page_size`-byte pages.
pub fn frame_offset(index: u32, page_size: u32) -> u64 {
    WAL_HEADER_SIZE as u64
        + u64::from(index.saturating_sub(1)) * (FRAME_HEADER_SIZE as u64 + u64::from(page_size))
}

/// Reads the log `len` bytes long from `log` (positioned at its start) as SQLite's recovery
/// would. Only I/O errors are errors; anything malformed ends the valid part of the log.
pub fn recover(mut log: impl Read, len: u64) -> std::io::Result<Recovery> {
    let mut head = [0u8; WAL_HEADER_SIZE];
    let have = read_up_to(&mut log, &mut head)?;
    // SQLite looks for frames only in a log longer than its header.
    if len <= WAL_HEADER_SIZE as u64 || have < WAL_HEADER_SIZE {
        return Ok(Recovery::NoCommits(format!(
            "{} bytes: a header and no frames",
            len.min(have as u64)
        )));
    }
    let header = match WalHeader::parse(&head) {
        Ok(h) => h,
        Err(p) if p.is_fatal() => return Ok(Recovery::Fatal(p)),
        Err(p) => return Ok(Recovery::NoCommits(p.to_string())),
    };
    let frame_len = FRAME_HEADER_SIZE + header.page_size as usize;
    // Whole frames only: SQLite computes the last frame from the size alone.
    let whole = (len - WAL_HEADER_SIZE as u64) / frame_len as u64;
    let whole = u32::try_from(whole).unwrap_or(u32::MAX);
    let mut frame = vec![0u8; frame_len];
    let mut running = header.checksum;
    let mut pending: Vec<(u32, u32)> = Vec::new();
    let mut latest: HashMap<u32, u32> = HashMap::new();
    let mut commit = None;
    let mut index = 0u32;
    while index < whole {
        if read_up_to(&mut log, &mut frame)? < frame_len {
            break; // The file shrank while being read: what was read is all there is.
        }
        let field = |off| be_u32(&frame, off).unwrap_or(0);
        let (page, db_pages) = (field(0), field(4));
        if [field(8), field(12)] != header.salts || page == 0 {
            break;
        }
        let sum = checksum(header.order, &frame[..8], running);
        let sum = checksum(header.order, &frame[FRAME_HEADER_SIZE..], sum);
        if sum != [field(16), field(20)] {
            break;
        }
        running = sum;
        index += 1;
        pending.push((page, index));
        if db_pages != 0 {
            latest.extend(pending.drain(..));
            commit = Some((index, db_pages, running));
        }
    }
    let Some((last_commit, db_pages, commit_checksum)) = commit else {
        return Ok(Recovery::NoCommits(format!(
            "no commit frame among its {index} valid frames"
        )));
    };
    let mut frames: Vec<(u32, u64)> = latest
        .into_iter()
        .filter(|&(page, _)| page <= db_pages)
        .map(|(page, i)| {
            let data = frame_offset(i, header.page_size) + FRAME_HEADER_SIZE as u64;
            (page, data)
        })
        .collect();
    frames.sort_unstable();
    Ok(Recovery::Committed(CommittedLog {
        header,
        frames,
        db_pages,
        last_commit,
        commit_checksum,
        uncommitted_frames: pending.len() as u32,
    }))
}

/// Fills as much of `buf` as `r` provides; returns how many bytes were read.
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::super::header::ChecksumOrder;
    use super::*;

    /// Builds a log of 512-byte pages from `(page, db_pages)` frames, page images filled with
    /// the page number.
    fn log(order: ChecksumOrder, frames: &[(u32, u32)]) -> Vec<u8> {
        let header = WalHeader {
            order,
            page_size: 512,
            checkpoint_seq: 0,
            salts: [7, 9],
            checksum: [0, 0],
        };
        let mut out = header.to_bytes().to_vec();
        let mut running = WalHeader::parse(&out).unwrap().checksum;
        for &(page, db) in frames {
            let mut f = vec![0u8; FRAME_HEADER_SIZE + 512];
            f[0..4].copy_from_slice(&page.to_be_bytes());
            f[4..8].copy_from_slice(&db.to_be_bytes());
            f[8..12].copy_from_slice(&7u32.to_be_bytes());
            f[12..16].copy_from_slice(&9u32.to_be_bytes());
            f[FRAME_HEADER_SIZE..].fill(page as u8);
            running = checksum(order, &f[..8], running);
            running = checksum(order, &f[FRAME_HEADER_SIZE..], running);
            f[16..20].copy_from_slice(&running[0].to_be_bytes());
            f[20..24].copy_from_slice(&running[1].to_be_bytes());
            out.extend_from_slice(&f);
        }
        out
    }

    fn run(bytes: &[u8]) -> Recovery {
        recover(bytes, bytes.len() as u64).unwrap()
    }

    fn committed(bytes: &[u8]) -> CommittedLog {
        match run(bytes) {
            Recovery::Committed(c) => c,
            other => panic!("{other:?}"),
        }
    }

    const F: u64 = (FRAME_HEADER_SIZE + 512) as u64;
    const DATA: u64 = (WAL_HEADER_SIZE + FRAME_HEADER_SIZE) as u64;

    #[test]
    fn the_latest_committed_frame_of_each_page_wins() {
        for order in [ChecksumOrder::LittleEndian, ChecksumOrder::BigEndian] {
            let bytes = log(order, &[(2, 0), (3, 3), (2, 3), (4, 0), (4, 4), (3, 0)]);
            let c = committed(&bytes);
            assert_eq!(
                c.frames,
                [(2, DATA + 2 * F), (3, DATA + F), (4, DATA + 4 * F)]
            );
            assert_eq!((c.db_pages, c.last_commit, c.uncommitted_frames), (4, 5, 1));
        }
    }

    #[test]
    fn uncommitted_and_torn_tails_are_ignored() {
        let bytes = log(ChecksumOrder::LittleEndian, &[(2, 2), (3, 0), (4, 4)]);
        // Torn last frame: the second transaction is lost.
        let torn = &bytes[..bytes.len() - 100];
        let c = committed(torn);
        assert_eq!((c.frames.len(), c.db_pages, c.last_commit), (1, 2, 1));
        // A flipped byte in the last frame's page image breaks its checksum.
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(committed(&bad).last_commit, 1);
        // Wrong salts: a leftover of an older generation.
        let mut stale = bytes.clone();
        stale[WAL_HEADER_SIZE + F as usize + 8] ^= 1;
        assert_eq!(committed(&stale).last_commit, 1);
        // Nothing committed at all.
        let open = log(ChecksumOrder::LittleEndian, &[(2, 0), (3, 0)]);
        assert!(matches!(run(&open), Recovery::NoCommits(w) if w.contains("no commit frame")));
    }

    #[test]
    fn a_shrinking_commit_drops_pages_past_the_end() {
        let bytes = log(ChecksumOrder::LittleEndian, &[(5, 5), (2, 3)]);
        let c = committed(&bytes);
        assert_eq!((c.frames.clone(), c.db_pages), (vec![(2, DATA + F)], 3));
    }

    #[test]
    fn bad_headers_are_ignored_or_fatal() {
        let good = log(ChecksumOrder::LittleEndian, &[(2, 2)]);
        assert!(matches!(run(&good[..32]), Recovery::NoCommits(_)));
        assert!(matches!(run(&good[..10]), Recovery::NoCommits(_)));
        let mut b = good.clone();
        b[27] ^= 1;
        assert!(matches!(run(&b), Recovery::NoCommits(w) if w.contains("checksum")));
        let mut b = good.clone();
        b[4..8].copy_from_slice(&1u32.to_be_bytes());
        let sum = checksum(ChecksumOrder::LittleEndian, &b[..24], [0, 0]);
        b[24..28].copy_from_slice(&sum[0].to_be_bytes());
        b[28..32].copy_from_slice(&sum[1].to_be_bytes());
        assert_eq!(run(&b), Recovery::Fatal(HeaderProblem::UnknownVersion(1)));
        // A page number 0 frame is invalid.
        let zero = log(ChecksumOrder::LittleEndian, &[(0, 2)]);
        assert!(matches!(run(&zero), Recovery::NoCommits(_)));
    }

    #[test]
    fn a_length_shorter_than_the_bytes_limits_the_frames() {
        let bytes = log(ChecksumOrder::LittleEndian, &[(2, 2), (3, 3)]);
        let c = recover(&bytes[..], bytes.len() as u64 - F).unwrap();
        assert!(matches!(c, Recovery::Committed(c) if c.last_commit == 1));
    }
}
