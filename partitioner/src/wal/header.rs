//! The 32-byte WAL header and SQLite's WAL checksum.
//!
//! The header is eight big-endian `u32`s: magic, format version, page size, checkpoint
//! sequence number, salt-1, salt-2 and a checksum of the first 24 bytes. The magic's low bit
//! says in which byte order the checksums read the data as 32-bit words: `0x377f0682` little
//! endian, `0x377f0683` big endian (SQLite writes its machine's native order, so the log of a
//! little-endian machine uses `0x377f0682`).
//!
//! [`WalHeader::parse`] classifies a header as SQLite's recovery (`walIndexRecover` in
//! `wal.c`) does: a bad magic, a page size that is not a power of two from 512 to 65536, or a
//! header checksum mismatch make SQLite ignore the whole log (the database file alone is the
//! database); a well-formed header with another format version makes SQLite refuse to open
//! the database (`SQLITE_CANTOPEN`).

use crate::format::be_u32;

/// Size of the WAL header in bytes.
pub const WAL_HEADER_SIZE: usize = 32;

/// Size of each frame's header in bytes; the page image follows it.
pub const FRAME_HEADER_SIZE: usize = 24;

/// The magic number of a log whose checksums read little-endian words.
pub const MAGIC_LITTLE_ENDIAN: u32 = 0x377f_0682;

/// The magic number of a log whose checksums read big-endian words.
pub const MAGIC_BIG_ENDIAN: u32 = 0x377f_0683;

/// The only WAL format version SQLite knows (`WAL_MAX_VERSION`).
pub const FORMAT_VERSION: u32 = 3_007_000;

/// The byte order in which the WAL checksum reads data as 32-bit words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumOrder {
    /// Magic `0x377f0682`.
    LittleEndian,
    /// Magic `0x377f0683`.
    BigEndian,
}

impl ChecksumOrder {
    /// The magic number that selects this order.
    pub fn magic(self) -> u32 {
        match self {
            ChecksumOrder::LittleEndian => MAGIC_LITTLE_ENDIAN,
            ChecksumOrder::BigEndian => MAGIC_BIG_ENDIAN,
        }
    }

    fn word(self, b: &[u8]) -> u32 {
        let b = [b[0], b[1], b[2], b[3]];
        match self {
            ChecksumOrder::LittleEndian => u32::from_le_bytes(b),
            ChecksumOrder::BigEndian => u32::from_be_bytes(b),
        }
    }
}

/// Extends the running WAL checksum `seed` over `bytes` (SQLite's `walChecksumBytes`): for each
/// pair of words `x0, x1`, `s0 += x0 + s1; s1 += x1 + s0`, with wrapping arithmetic.
///
/// SQLite only checksums whole 8-byte pairs (headers of 24 and 8 bytes, page images of a power
/// of two of at least 512); a trailing partial pair is ignored.
pub fn checksum(order: ChecksumOrder, bytes: &[u8], seed: [u32; 2]) -> [u32; 2] {
    let [mut s0, mut s1] = seed;
    for pair in bytes.chunks_exact(8) {
        s0 = s0.wrapping_add(order.word(&pair[..4])).wrapping_add(s1);
        s1 = s1.wrapping_add(order.word(&pair[4..])).wrapping_add(s0);
    }
    [s0, s1]
}

/// A WAL header that passed SQLite's checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalHeader {
    /// The checksum byte order chosen by the magic number.
    pub order: ChecksumOrder,
    /// The page size of every frame, 512 to 65536.
    pub page_size: u32,
    /// The checkpoint sequence number, incremented by each checkpoint that resets the log.
    pub checkpoint_seq: u32,
    /// Salt-1 and salt-2: every valid frame repeats them; a new log generation changes them.
    pub salts: [u32; 2],
    /// The header checksum, which seeds the first frame's cumulative checksum.
    pub checksum: [u32; 2],
}

/// Why a WAL header is not usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderProblem {
    /// Fewer than [`WAL_HEADER_SIZE`] bytes (SQLite: no frames).
    TooShort(usize),
    /// Neither magic number (SQLite: the log is ignored).
    BadMagic(u32),
    /// Not a power of two from 512 to 65536 (SQLite: the log is ignored).
    BadPageSize(u32),
    /// The header checksum does not match (SQLite: the log is ignored).
    BadChecksum,
    /// A well-formed header of another format version (SQLite: the database cannot be opened).
    UnknownVersion(u32),
}

impl HeaderProblem {
    /// Whether SQLite refuses the database rather than ignoring the log.
    pub fn is_fatal(self) -> bool {
        matches!(self, HeaderProblem::UnknownVersion(_))
    }
}

impl std::fmt::Display for HeaderProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderProblem::TooShort(n) => {
                write!(
                    f,
                    "{n} bytes, too short for the {WAL_HEADER_SIZE}-byte header"
                )
            }
            HeaderProblem::BadMagic(m) => write!(f, "bad magic number 0x{m:08x}"),
            HeaderProblem::BadPageSize(n) => write!(f, "invalid page size {n} in the header"),
            HeaderProblem::BadChecksum => write!(f, "the header checksum does not match"),
            HeaderProblem::UnknownVersion(v) => write!(
                f,
                "unknown WAL format version {v} (SQLite knows only {FORMAT_VERSION} and \
                 refuses to open the database)"
            ),
        }
    }
}

impl WalHeader {
    /// Checks the header at the start of `bytes` in SQLite's order: magic and page size, then
    /// the checksum, then the version.
    pub fn parse(bytes: &[u8]) -> Result<Self, HeaderProblem> {
        let Some(head) = bytes.get(..WAL_HEADER_SIZE) else {
            return Err(HeaderProblem::TooShort(bytes.len()));
        };
        let u32_at = |off| be_u32(head, off).unwrap_or(0);
        let magic = u32_at(0);
        let order = match magic {
            MAGIC_LITTLE_ENDIAN => ChecksumOrder::LittleEndian,
            MAGIC_BIG_ENDIAN => ChecksumOrder::BigEndian,
            other => return Err(HeaderProblem::BadMagic(other)),
        };
        let page_size = u32_at(8);
        if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(HeaderProblem::BadPageSize(page_size));
        }
        let stored = [u32_at(24), u32_at(28)];
        if checksum(order, &head[..24], [0, 0]) != stored {
            return Err(HeaderProblem::BadChecksum);
        }
        let version = u32_at(4);
        if version != FORMAT_VERSION {
            return Err(HeaderProblem::UnknownVersion(version));
        }
        Ok(Self {
            order,
            page_size,
            checkpoint_seq: u32_at(12),
            salts: [u32_at(16), u32_at(20)],
            checksum: stored,
        })
    }

    /// The header's 32 bytes (with its checksum recomputed), as SQLite writes them.
    pub fn to_bytes(&self) -> [u8; WAL_HEADER_SIZE] {
        let mut b = [0u8; WAL_HEADER_SIZE];
        for (i, v) in [
            self.order.magic(),
            FORMAT_VERSION,
            self.page_size,
            self.checkpoint_seq,
            self.salts[0],
            self.salts[1],
        ]
        .into_iter()
        .enumerate()
        {
            b[4 * i..4 * i + 4].copy_from_slice(&v.to_be_bytes());
        }
        let sum = checksum(self.order, &b[..24], [0, 0]);
        b[24..28].copy_from_slice(&sum[0].to_be_bytes());
        b[28..32].copy_from_slice(&sum[1].to_be_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(order: ChecksumOrder) -> WalHeader {
        WalHeader {
            order,
            page_size: 4096,
            checkpoint_seq: 3,
            salts: [0x1234_5678, 0x9abc_def0],
            checksum: [0, 0],
        }
    }

    #[test]
    fn a_written_header_parses_back_in_both_orders() {
        for order in [ChecksumOrder::LittleEndian, ChecksumOrder::BigEndian] {
            let bytes = header(order).to_bytes();
            let parsed = WalHeader::parse(&bytes).unwrap();
            assert_eq!((parsed.order, parsed.page_size), (order, 4096));
            assert_eq!(parsed.salts, [0x1234_5678, 0x9abc_def0]);
            assert_eq!(parsed.to_bytes(), bytes);
        }
    }

    #[test]
    fn the_checksum_reads_words_in_the_chosen_order() {
        let bytes = [1, 0, 0, 0, 2, 0, 0, 0];
        assert_eq!(
            checksum(ChecksumOrder::LittleEndian, &bytes, [0, 0]),
            [1, 3]
        );
        assert_eq!(
            checksum(ChecksumOrder::BigEndian, &bytes, [0, 0]),
            [1 << 24, (2 << 24) + (1 << 24)]
        );
        // Wrapping, seeded, and a trailing partial pair ignored.
        let big = [0xff; 12];
        let s = checksum(ChecksumOrder::BigEndian, &big, [u32::MAX, 1]);
        assert_eq!(
            s,
            checksum(ChecksumOrder::BigEndian, &big[..8], [u32::MAX, 1])
        );
    }

    #[test]
    fn problems_are_classified_like_sqlite() {
        let good = header(ChecksumOrder::LittleEndian).to_bytes();
        assert_eq!(
            WalHeader::parse(&good[..31]),
            Err(HeaderProblem::TooShort(31))
        );
        let mut b = good;
        b[3] = 0x84;
        assert_eq!(
            WalHeader::parse(&b),
            Err(HeaderProblem::BadMagic(0x377f_0684))
        );
        for size in [0u32, 256, 1000, 131_072] {
            let mut b = good;
            b[8..12].copy_from_slice(&size.to_be_bytes());
            assert_eq!(WalHeader::parse(&b), Err(HeaderProblem::BadPageSize(size)));
        }
        let mut b = good;
        b[20] ^= 1;
        assert_eq!(WalHeader::parse(&b), Err(HeaderProblem::BadChecksum));
        // Another version with a correct checksum is fatal; with a wrong one, ignored.
        let mut b = good;
        b[4..8].copy_from_slice(&3_007_001u32.to_be_bytes());
        assert_eq!(WalHeader::parse(&b), Err(HeaderProblem::BadChecksum));
        let sum = checksum(ChecksumOrder::LittleEndian, &b[..24], [0, 0]);
        b[24..28].copy_from_slice(&sum[0].to_be_bytes());
        b[28..32].copy_from_slice(&sum[1].to_be_bytes());
        let problem = WalHeader::parse(&b).unwrap_err();
        assert_eq!(problem, HeaderProblem::UnknownVersion(3_007_001));
        assert!(problem.is_fatal() && !HeaderProblem::BadChecksum.is_fatal());
    }
}
