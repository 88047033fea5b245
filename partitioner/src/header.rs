//! The 100-byte database header at the start of page 1.
//!
//! [`DbHeader::parse`] accepts what SQLite itself accepts for reading and refuses the rest with
//! an [`Error::Invalid`] that says which field is wrong. The page count follows SQLite's rule
//! (`lockBtree` in btree.c): the in-header count (offset 28) is trusted only when it is non-zero
//! and its version-valid-for number (offset 92) equals the change counter (offset 24); otherwise
//! it is derived from the file size. Bytes past the counted pages are tolerated, as SQLite
//! tolerates them (a crashed writer or a copy tool can leave them); a file shorter than the
//! counted pages is truncated and refused.

use std::path::Path;

use crate::error::{Error, Result};
use crate::format::{be_u16, be_u32, DB_HEADER_SIZE};

/// The 16 bytes every SQLite 3 database file starts with.
pub const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// The byte offset SQLite locks (`PENDING_BYTE`, 2^30); the page holding it is never used.
pub const PENDING_BYTE: u64 = 1 << 30;

/// The smallest usable page size (page size minus reserved bytes) the format allows.
pub const MIN_USABLE_SIZE: u32 = 480;

/// The facts from the database header that the scan depends on, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbHeader {
    /// Page size in bytes (512..=65536, a power of two; the on-disk value 1 means 65536).
    pub page_size: u32,
    /// Bytes reserved at the end of every page (for extensions such as checksums).
    pub reserved_bytes: u8,
    /// Number of pages in the database: the in-header count when it is valid (its
    /// version-valid-for number equals the change counter), else derived from the file size
    /// (with a write-ahead log holding committed frames: the size its last commit records).
    pub page_count: u32,
    /// The file change counter (offset 24); a scan compares it before and after.
    pub change_counter: u32,
    /// First freelist trunk page (0 when there is none).
    pub freelist_trunk: u32,
    /// Total number of freelist pages.
    pub freelist_pages: u32,
    /// The largest root b-tree page, non-zero in auto-vacuum and incremental-vacuum databases,
    /// which have pointer-map pages.
    pub largest_root_page: u32,
    /// Text encoding: 1 = UTF-8 (the only one accepted), 2 = UTF-16le, 3 = UTF-16be.
    pub text_encoding: u32,
    /// The size of the file in bytes when the header was read.
    pub file_size: u64,
    /// File format write version (offset 18): 1 = rollback journal, 2 = WAL mode.
    pub write_version: u8,
    /// File format read version (offset 19): 1 = rollback journal, 2 = WAL mode.
    pub read_version: u8,
    /// Schema format number (offset 44), 1..=4 (0 in a database that never had a schema).
    pub schema_format: u32,
    /// Whether the in-header page count was used (`false`: derived from the file size).
    pub page_count_from_header: bool,
}

impl DbHeader {
    /// Usable bytes per page: page size minus reserved bytes.
    pub fn usable_size(&self) -> u32 {
        self.page_size - u32::from(self.reserved_bytes)
    }

    /// Byte offset of a 1-based page in the file (page 0 is treated as page 1; callers check
    /// page numbers first).
    pub fn page_offset(&self, page: u32) -> u64 {
        u64::from(page.saturating_sub(1)) * u64::from(self.page_size)
    }

    /// The page number that would hold the lock byte at offset 2^30, whether or not the file
    /// is that large (SQLite's `PENDING_BYTE_PAGE`).
    pub fn pending_byte_page(&self) -> u32 {
        // page_size >= 512, so this is at most 2^21 + 1.
        (PENDING_BYTE / u64::from(self.page_size) + 1) as u32
    }

    /// The lock-byte page (the page holding byte offset 2^30), which is never a b-tree page;
    /// `None` when the database is too small to contain it.
    pub fn lock_byte_page(&self) -> Option<u32> {
        let page = self.pending_byte_page();
        (page <= self.page_count).then_some(page)
    }

    /// Whether the database keeps pointer-map pages (auto-vacuum or incremental vacuum).
    pub fn has_pointer_map(&self) -> bool {
        self.largest_root_page != 0
    }

    /// Whether `page` is a pointer-map page (only in auto-vacuum databases).
    ///
    /// Mirrors SQLite's `PTRMAP_ISPAGE` (btree.c): page 2 and every `J = usable/5 + 1`-th page
    /// after it, except that a slot falling on the lock-byte page moves to the page after it
    /// (the lock-byte page can hold nothing, not even a pointer map).
    pub fn is_pointer_map_page(&self, page: u32) -> bool {
        if !self.has_pointer_map() || page < 2 {
            return false;
        }
        let per_map = self.usable_size() / 5 + 1;
        let mut map_page = (page - 2) / per_map * per_map + 2;
        if map_page == self.pending_byte_page() {
            map_page += 1;
        }
        map_page == page
    }

    /// Why `page` cannot be a b-tree or overflow page, or `None` when it can be: page 0, page 1
    /// (always the schema root), pages past the end, the lock-byte page and pointer-map pages.
    pub fn unusable_page_reason(&self, page: u32) -> Option<String> {
        if page == 0 {
            Some("page number 0 is not a valid page".to_string())
        } else if page > self.page_count {
            Some(format!(
                "page {page} lies past the end of the database ({} pages)",
                self.page_count
            ))
        } else if page == 1 {
            Some("page 1 is the schema root and cannot belong to another b-tree".to_string())
        } else if page == self.pending_byte_page() {
            Some(format!("page {page} is the lock-byte page"))
        } else if self.is_pointer_map_page(page) {
            Some(format!("page {page} is a pointer-map page"))
        } else {
            None
        }
    }

    /// Parses and validates the header of the file at `path` (`bytes` are its first 100 bytes,
    /// `file_size` its length).
    pub fn parse(path: &Path, bytes: &[u8], file_size: u64) -> Result<Self> {
        Self::parse_with_wal(path, bytes, file_size, None)
    }

    /// Like [`DbHeader::parse`] for a database whose write-ahead log holds committed frames:
    /// `bytes` are the first 100 bytes of the latest committed copy of page 1 (from the log
    /// when it has page 1), and `wal_pages` is the database size the log's last commit frame
    /// records. That size replaces the file size in the page-count rule, as in SQLite: the
    /// in-header count is used when valid and not larger, else `wal_pages`.
    pub fn parse_with_wal(
        path: &Path,
        bytes: &[u8],
        file_size: u64,
        wal_pages: Option<u32>,
    ) -> Result<Self> {
        let invalid = |what: String| Error::Invalid {
            path: path.to_path_buf(),
            what,
        };
        if file_size == 0 {
            return Err(invalid(
                "the file is empty (an empty SQLite database has no tables)".to_string(),
            ));
        }
        if (wal_pages.is_none() && file_size < DB_HEADER_SIZE as u64)
            || bytes.len() < DB_HEADER_SIZE
        {
            return Err(invalid(format!(
                "the file is {file_size} bytes long, too short for a SQLite database header \
                 (100 bytes)"
            )));
        }
        if bytes.get(..16) != Some(&MAGIC[..]) {
            return Err(invalid(
                "not a SQLite database (the file does not start with \"SQLite format 3\")"
                    .to_string(),
            ));
        }
        let u8_at = |off: usize| bytes.get(off).copied().unwrap_or(0);
        let u32_at = |off: usize| be_u32(bytes, off).unwrap_or(0);

        let raw_page_size = be_u16(bytes, 16).unwrap_or(0);
        let page_size = match raw_page_size {
            1 => 65536,
            n if n >= 512 && n.is_power_of_two() => u32::from(n),
            n => {
                return Err(invalid(format!(
                    "invalid page size {n} in the header (must be a power of two from 512 to \
                     65536)"
                )))
            }
        };
        let write_version = u8_at(18);
        let read_version = u8_at(19);
        if !(1..=2).contains(&read_version) {
            // The format says a reader must not open a file whose read version it does not know.
            return Err(invalid(format!(
                "unsupported file format read version {read_version} (expected 1 or 2)"
            )));
        }
        let reserved_bytes = u8_at(20);
        let usable = page_size - u32::from(reserved_bytes);
        if usable < MIN_USABLE_SIZE {
            return Err(invalid(format!(
                "{reserved_bytes} reserved bytes per page leave {usable} usable bytes of a \
                 {page_size}-byte page (at least {MIN_USABLE_SIZE} required)"
            )));
        }
        // SQLite refuses any other payload fractions (lockBtree), and the local-payload rule
        // in `format` assumes these values.
        if bytes.get(21..24) != Some(&[64, 32, 32][..]) {
            return Err(invalid(format!(
                "invalid payload fractions {}/{}/{} at header offset 21 (must be 64/32/32)",
                u8_at(21),
                u8_at(22),
                u8_at(23)
            )));
        }
        let change_counter = u32_at(24);
        let header_pages = u32_at(28);
        let freelist_trunk = u32_at(32);
        let freelist_pages = u32_at(36);
        let schema_format = u32_at(44);
        if schema_format > 4 {
            return Err(invalid(format!(
                "unsupported schema format {schema_format} (SQLite knows 1 to 4)"
            )));
        }
        let largest_root_page = u32_at(52);
        let text_encoding = u32_at(56);
        match text_encoding {
            // 0: no schema was ever written, so no text exists; SQLite defaults to UTF-8.
            0 | 1 => {}
            2 => return Err(invalid(unsupported_encoding("UTF-16le"))),
            3 => return Err(invalid(unsupported_encoding("UTF-16be"))),
            n => {
                return Err(invalid(format!(
                    "invalid text encoding {n} in the header (1 = UTF-8, 2 = UTF-16le, \
                     3 = UTF-16be)"
                )))
            }
        }
        let version_valid_for = u32_at(92);

        let page_bytes = u64::from(page_size);
        let page_count_from_header = header_pages != 0 && version_valid_for == change_counter;
        let page_count = if let Some(wal_pages) = wal_pages {
            match page_count_from_header {
                true if header_pages > wal_pages => {
                    return Err(invalid(format!(
                        "the header counts {header_pages} pages but the write-ahead log's last \
                         commit leaves the database {wal_pages} pages long"
                    )))
                }
                true => header_pages,
                false => wal_pages,
            }
        } else if page_count_from_header {
            let needed = u64::from(header_pages) * page_bytes;
            if needed > file_size {
                return Err(invalid(format!(
                    "the file is truncated: the header counts {header_pages} pages of \
                     {page_size} bytes ({needed} bytes) but the file has {file_size} bytes"
                )));
            }
            header_pages
        } else {
            // A legacy writer did not maintain offset 28; the file size is all we have, so a
            // partial last page cannot be told from truncation.
            if !file_size.is_multiple_of(page_bytes) {
                return Err(invalid(format!(
                    "the file size {file_size} is not a whole number of {page_size}-byte pages \
                     and the header's page count is not valid: the file looks truncated"
                )));
            }
            match u32::try_from(file_size / page_bytes) {
                Ok(n) if n != u32::MAX => n,
                _ => {
                    return Err(invalid(format!(
                        "the file has {} pages, more than a SQLite database can address",
                        file_size / page_bytes
                    )))
                }
            }
        };
        Ok(Self {
            page_size,
            reserved_bytes,
            page_count,
            change_counter,
            freelist_trunk,
            freelist_pages,
            largest_root_page,
            text_encoding,
            file_size,
            write_version,
            read_version,
            schema_format,
            page_count_from_header,
        })
    }
}

fn unsupported_encoding(name: &str) -> String {
    format!("the database text encoding is {name}; only UTF-8 databases are supported")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid header for `pages` pages of `page_size` bytes (`raw_size` is the on-disk value).
    fn header_bytes(raw_size: u16, pages: u32) -> Vec<u8> {
        let mut b = vec![0u8; 100];
        b[..16].copy_from_slice(MAGIC);
        b[16..18].copy_from_slice(&raw_size.to_be_bytes());
        b[18] = 1;
        b[19] = 1;
        b[21..24].copy_from_slice(&[64, 32, 32]);
        b[24..28].copy_from_slice(&7u32.to_be_bytes());
        b[28..32].copy_from_slice(&pages.to_be_bytes());
        b[44..48].copy_from_slice(&4u32.to_be_bytes());
        b[56..60].copy_from_slice(&1u32.to_be_bytes());
        b[92..96].copy_from_slice(&7u32.to_be_bytes());
        b
    }

    fn parse(b: &[u8], size: u64) -> Result<DbHeader> {
        DbHeader::parse(Path::new("t.db"), b, size)
    }

    fn err(b: &[u8], size: u64) -> String {
        parse(b, size).unwrap_err().to_string()
    }

    #[test]
    fn valid_header_uses_the_in_header_page_count() {
        let h = parse(&header_bytes(4096, 3), 3 * 4096).unwrap();
        assert_eq!(
            (h.page_size, h.page_count, h.usable_size()),
            (4096, 3, 4096)
        );
        assert!(h.page_count_from_header);
        assert_eq!(h.page_offset(3), 8192);
    }

    #[test]
    fn page_size_one_means_65536() {
        let h = parse(&header_bytes(1, 2), 2 * 65536).unwrap();
        assert_eq!(h.page_size, 65536);
    }

    #[test]
    fn bad_page_sizes_are_refused() {
        for raw in [0u16, 256, 1000, 4095, 2] {
            let e = err(&header_bytes(raw, 1), 65536);
            assert!(e.contains("invalid page size"), "{e}");
            assert!(e.starts_with("t.db: "), "{e}");
        }
    }

    #[test]
    fn stale_page_count_is_derived_from_the_file_size() {
        let mut b = header_bytes(1024, 99);
        b[92..96].copy_from_slice(&6u32.to_be_bytes());
        let h = parse(&b, 5 * 1024).unwrap();
        assert_eq!(h.page_count, 5);
        assert!(!h.page_count_from_header);
        // Without a trusted count a partial page looks like truncation.
        assert!(err(&b, 5 * 1024 + 10).contains("not a whole number"));
    }

    #[test]
    fn truncation_is_refused_and_trailing_bytes_tolerated() {
        let b = header_bytes(4096, 4);
        let e = err(&b, 3 * 4096 + 100);
        assert!(e.contains("truncated"), "{e}");
        assert_eq!(parse(&b, 4 * 4096 + 777).unwrap().page_count, 4);
    }

    #[test]
    fn short_empty_and_foreign_files_are_refused() {
        assert!(err(&[], 0).contains("empty"));
        assert!(err(&header_bytes(4096, 1)[..50], 50).contains("too short"));
        let mut b = header_bytes(4096, 1);
        b[0] = b'X';
        assert!(err(&b, 4096).contains("not a SQLite database"));
    }

    #[test]
    fn encodings_other_than_utf8_are_named() {
        let mut b = header_bytes(4096, 1);
        b[56..60].copy_from_slice(&2u32.to_be_bytes());
        assert!(err(&b, 4096).contains("UTF-16le"));
        b[56..60].copy_from_slice(&3u32.to_be_bytes());
        assert!(err(&b, 4096).contains("UTF-16be"));
        b[56..60].copy_from_slice(&9u32.to_be_bytes());
        assert!(err(&b, 4096).contains("invalid text encoding 9"));
    }

    #[test]
    fn reserved_bytes_must_leave_480_usable() {
        let mut b = header_bytes(512, 1);
        b[20] = 33;
        assert!(err(&b, 512).contains("479 usable"));
        b[20] = 32;
        assert_eq!(parse(&b, 512).unwrap().usable_size(), 480);
    }

    #[test]
    fn other_fields_are_checked() {
        let mut b = header_bytes(4096, 1);
        b[19] = 3;
        assert!(err(&b, 4096).contains("read version 3"));
        let mut b = header_bytes(4096, 1);
        b[21] = 60;
        assert!(err(&b, 4096).contains("payload fractions"));
        let mut b = header_bytes(4096, 1);
        b[44..48].copy_from_slice(&5u32.to_be_bytes());
        assert!(err(&b, 4096).contains("schema format 5"));
    }

    fn big_header(page_size: u32, reserved: u8, auto_vacuum: bool) -> DbHeader {
        DbHeader {
            page_size,
            reserved_bytes: reserved,
            page_count: 3_000_000,
            change_counter: 1,
            freelist_trunk: 0,
            freelist_pages: 0,
            largest_root_page: u32::from(auto_vacuum) * 5,
            text_encoding: 1,
            file_size: 3_000_000 * u64::from(page_size),
            write_version: 1,
            read_version: 1,
            schema_format: 4,
            page_count_from_header: true,
        }
    }

    #[test]
    fn lock_byte_page_holds_offset_2_pow_30() {
        let h = big_header(4096, 0, false);
        assert_eq!(h.lock_byte_page(), Some(262_145));
        assert_eq!(h.page_offset(262_145), 1 << 30);
        assert!(h
            .unusable_page_reason(262_145)
            .unwrap()
            .contains("lock-byte"));
        let small = DbHeader {
            page_count: 262_144,
            ..h
        };
        assert_eq!(small.lock_byte_page(), None);
        assert_eq!(big_header(65536, 0, false).lock_byte_page(), Some(16_385));
        assert_eq!(big_header(512, 0, false).lock_byte_page(), Some(2_097_153));
    }

    #[test]
    fn pointer_map_pages_follow_ptrmap_pageno() {
        let h = big_header(4096, 0, true);
        // J = 4096/5 + 1 = 820: pages 2, 822, 1642, ...
        assert!(h.is_pointer_map_page(2));
        assert!(h.is_pointer_map_page(822));
        assert!(h.is_pointer_map_page(1642));
        assert!(!h.is_pointer_map_page(1));
        assert!(!h.is_pointer_map_page(3));
        assert!(!h.is_pointer_map_page(821));
        assert!(!big_header(4096, 0, false).is_pointer_map_page(2));
    }

    #[test]
    fn pointer_map_slot_on_the_lock_byte_page_moves_to_the_next_page() {
        // 1024-byte pages with 200 reserved bytes: usable 824, J = 165, and the lock-byte page
        // 1_048_577 = 2 + 6355 * 165 falls exactly on a pointer-map slot.
        let h = big_header(1024, 200, true);
        let lock = h.pending_byte_page();
        assert_eq!(lock, 1_048_577);
        assert_eq!((lock - 2) % 165, 0);
        assert!(!h.is_pointer_map_page(lock));
        assert!(h.is_pointer_map_page(lock + 1));
        assert!(h.is_pointer_map_page(lock - 165));
        assert!(h.is_pointer_map_page(lock + 165));
        assert!(!h.is_pointer_map_page(lock + 166));
        assert!(h.unusable_page_reason(lock).unwrap().contains("lock-byte"));
        assert!(h
            .unusable_page_reason(lock + 1)
            .unwrap()
            .contains("pointer-map"));
        assert_eq!(h.unusable_page_reason(lock + 2), None);
    }
}
