//! Low-level pieces of the SQLite file format shared by the partitioner and the engine's decoder:
//! varints, serial types, b-tree page headers and the local-payload rule for cells.
//!
//! Every function here takes a byte slice and returns `None` (or an error) instead of reading past
//! its end, so callers can turn a malformed page into an error that names the page.
//! Reference: <https://www.sqlite.org/fileformat2.html>.

/// The page type byte of an interior index b-tree page.
pub const PAGE_INTERIOR_INDEX: u8 = 0x02;
/// The page type byte of an interior table b-tree page.
pub const PAGE_INTERIOR_TABLE: u8 = 0x05;
/// The page type byte of a leaf index b-tree page.
pub const PAGE_LEAF_INDEX: u8 = 0x0a;
/// The page type byte of a leaf table b-tree page.
pub const PAGE_LEAF_TABLE: u8 = 0x0d;

/// Size of the database header that precedes page 1's b-tree header.
pub const DB_HEADER_SIZE: usize = 100;

/// Reads a SQLite varint (1-9 bytes, big-endian, high bit = continuation; the ninth byte
/// contributes all 8 bits) from the start of `buf`.
///
/// Returns the value and the number of bytes it occupied, or `None` when `buf` ends first.
#[inline(always)]
pub fn read_varint(buf: &[u8]) -> Option<(u64, usize)> {
    // Fast path: one byte (record header serial types and small sizes).
    let b0 = *buf.first()?;
    if b0 < 0x80 {
        return Some((u64::from(b0), 1));
    }
    read_long_varint(buf)
}

#[inline]
fn read_long_varint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for i in 0..8 {
        let b = *buf.get(i)?;
        value = (value << 7) | u64::from(b & 0x7f);
        if b < 0x80 {
            return Some((value, i + 1));
        }
    }
    let b = *buf.get(8)?;
    Some(((value << 8) | u64::from(b), 9))
}

/// The length in bytes of the varint at the start of `buf` (for skipping one whose value is not
/// needed, such as a rowid), or `None` when `buf` ends first.
#[inline(always)]
pub fn varint_len(buf: &[u8]) -> Option<usize> {
    for (i, &b) in buf.iter().take(8).enumerate() {
        if b < 0x80 {
            return Some(i + 1);
        }
    }
    (buf.len() >= 9).then_some(9)
}

/// The number of bytes a value of serial type `serial` occupies in a record body, or `None` for
/// the reserved serial types 10 and 11.
#[inline]
pub const fn serial_type_size(serial: u64) -> Option<u64> {
    Some(match serial {
        0 | 8 | 9 => 0,
        1 => 1,
        2 => 2,
        3 => 3,
        4 => 4,
        5 => 6,
        6 | 7 => 8,
        10 | 11 => return None,
        n => (n - 12) / 2,
    })
}

/// Decodes a big-endian two's-complement integer of `bytes.len()` bytes (1, 2, 3, 4, 6 or 8).
#[inline]
pub fn read_be_int(bytes: &[u8]) -> i64 {
    let mut v: i64 = if bytes.first().is_some_and(|b| b & 0x80 != 0) {
        -1
    } else {
        0
    };
    for &b in bytes {
        v = (v << 8) | i64::from(b);
    }
    v
}

/// Reads a big-endian `u16` at `off`, or `None` when it would run past `buf`.
#[inline]
pub fn be_u16(buf: &[u8], off: usize) -> Option<u16> {
    let b = buf.get(off..off.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// Reads a big-endian `u32` at `off`, or `None` when it would run past `buf`.
#[inline]
pub fn be_u32(buf: &[u8], off: usize) -> Option<u32> {
    let b = buf.get(off..off.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The b-tree page header found at the start of a page (or at byte 100 of page 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BtreePageHeader {
    /// One of the `PAGE_*` type bytes.
    pub page_type: u8,
    /// Number of cells on the page.
    pub cell_count: u16,
    /// Start of the cell content area (0 means 65536).
    pub content_start: u32,
    /// The right-most child pointer; only set on interior pages.
    pub right_child: Option<u32>,
    /// Size of this header in bytes (8 for leaves, 12 for interior pages); the cell pointer array
    /// follows it.
    pub header_len: usize,
}

impl BtreePageHeader {
    /// Parses the b-tree page header at `offset` in `page` (0, or 100 on page 1).
    ///
    /// Returns a description of the problem when the type byte is unknown or the header or its
    /// cell pointer array does not fit in the page.
    pub fn parse(page: &[u8], offset: usize) -> Result<Self, String> {
        let page_type = *page
            .get(offset)
            .ok_or_else(|| "page too short for a b-tree header".to_string())?;
        let header_len = match page_type {
            PAGE_LEAF_TABLE | PAGE_LEAF_INDEX => 8,
            PAGE_INTERIOR_TABLE | PAGE_INTERIOR_INDEX => 12,
            other => return Err(format!("invalid b-tree page type 0x{other:02x}")),
        };
        if offset + header_len > page.len() {
            return Err("page too short for a b-tree header".to_string());
        }
        let cell_count = be_u16(page, offset + 3).unwrap_or(0);
        let raw_start = be_u16(page, offset + 5).unwrap_or(0);
        let content_start = if raw_start == 0 {
            65536
        } else {
            u32::from(raw_start)
        };
        let right_child = (header_len == 12).then(|| be_u32(page, offset + 8).unwrap_or(0));
        let header = Self {
            page_type,
            cell_count,
            content_start,
            right_child,
            header_len,
        };
        if header.cell_pointers_end(offset) > page.len() {
            return Err(format!(
                "cell pointer array of {cell_count} cells runs past the end of the page"
            ));
        }
        Ok(header)
    }

    /// Whether this is a table b-tree leaf page.
    pub fn is_table_leaf(&self) -> bool {
        self.page_type == PAGE_LEAF_TABLE
    }

    /// Whether this is a table b-tree interior page.
    pub fn is_table_interior(&self) -> bool {
        self.page_type == PAGE_INTERIOR_TABLE
    }

    /// Offset one past the cell pointer array, for a header parsed at `offset`.
    pub fn cell_pointers_end(&self, offset: usize) -> usize {
        offset + self.header_len + 2 * usize::from(self.cell_count)
    }

    /// The `i`-th cell pointer (an offset into the page) for a header parsed at `offset`,
    /// checked to lie inside the usable part of the page (after the pointer array).
    pub fn cell_offset(
        &self,
        page: &[u8],
        offset: usize,
        i: usize,
        usable: usize,
    ) -> Result<usize, String> {
        let ptr = be_u16(page, offset + self.header_len + 2 * i)
            .ok_or_else(|| format!("cell pointer {i} runs past the end of the page"))?;
        let ptr = usize::from(ptr);
        if ptr < self.cell_pointers_end(offset) || ptr >= usable {
            return Err(format!(
                "cell {i} pointer {ptr} lies outside the cell content area"
            ));
        }
        Ok(ptr)
    }
}

/// How many bytes of a table-leaf cell's payload of `payload_len` bytes are stored on the page
/// itself, for a page whose usable size is `usable` (page size minus reserved bytes). The rest
/// lives on overflow pages, whose chain starts at the 4-byte page number after the local part.
#[inline]
pub fn table_leaf_local_payload(usable: u32, payload_len: u64) -> u64 {
    local_payload(usable, payload_len, u64::from(usable) - 35)
}

/// How many bytes of a `payload_len`-byte payload stay on a page of `usable` bytes whose
/// largest local payload is `max_local` (btree.c's `btreeParseCellAdjustSizeForOverflow`):
/// all of it when it fits, else the surplus past `minLocal` modulo an overflow page's
/// capacity when that fits under `max_local`, else `minLocal`.
pub fn local_payload(usable: u32, payload_len: u64, max_local: u64) -> u64 {
    let u = u64::from(usable);
    if payload_len <= max_local {
        return payload_len;
    }
    let min_local = ((u - 12) * 32 / 255) - 23;
    let k = min_local + (payload_len - min_local) % (u - 4);
    if k <= max_local {
        k
    } else {
        min_local
    }
}

/// How many payload bytes an overflow page holds (its first 4 bytes are the next page number).
#[inline]
pub fn overflow_page_capacity(usable: u32) -> u32 {
    usable - 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_known_encodings() {
        assert_eq!(read_varint(&[0x05]), Some((5, 1)));
        assert_eq!(read_varint(&[0x81, 0x00]), Some((128, 2)));
        assert_eq!(read_varint(&[0xff; 9]), Some((u64::MAX, 9)));
        assert_eq!(read_varint(&[0x81]), None);
        assert_eq!(read_varint(&[]), None);
        assert_eq!(varint_len(&[0x81, 0x80, 0x01]), Some(3));
        assert_eq!(varint_len(&[0xff; 9]), Some(9));
        assert_eq!(varint_len(&[0xff; 8]), None);
        assert_eq!(varint_len(&[0x05]), Some(1));
    }

    #[test]
    fn serial_type_sizes() {
        assert_eq!(serial_type_size(7), Some(8));
        assert_eq!(serial_type_size(5), Some(6));
        assert_eq!(serial_type_size(13), Some(0));
        assert_eq!(serial_type_size(33), Some(10));
        assert_eq!(serial_type_size(10), None);
    }

    #[test]
    fn be_ints_sign_extend() {
        assert_eq!(read_be_int(&[0xff]), -1);
        assert_eq!(read_be_int(&[0x00, 0x80]), 128);
        assert_eq!(read_be_int(&[0xff, 0xff, 0xfe]), -2);
    }

    #[test]
    fn local_payload_matches_the_format_rules() {
        // 4096-byte pages: everything up to 4061 bytes stays local.
        assert_eq!(table_leaf_local_payload(4096, 4061), 4061);
        let spilled = table_leaf_local_payload(4096, 10_000);
        assert!(spilled < 4061);
        let min_local = ((4096 - 12) * 32 / 255) - 23;
        assert_eq!(spilled, min_local + (10_000 - min_local) % 4092);
    }
}
