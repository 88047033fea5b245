//! Table-leaf cells and their overflow chains.
//!
//! A table-leaf cell is: payload size (varint), rowid (varint), the first
//! [`table_leaf_local_payload`] bytes of the payload, and, when the payload did not fit, the
//! 4-byte number of the first overflow page. Each overflow page starts with the number of the
//! next one (0 on the last) and carries `usable - 4` payload bytes.
//!
//! [`OverflowChain`] is the one walk of such a chain, with no I/O of its own: it checks every
//! link (a usable page, not yet seen, the chain ending exactly when the payload is complete)
//! and says how many payload bytes each page carries, so a corrupt chain cannot loop or run
//! long. [`follow_overflow_chain`] drives it over a [`PageFile`]; a scan that reads pages its
//! own way (and stops as soon as it has the columns it needs) drives it directly.

use std::collections::HashSet;

use crate::btree::PageSet;
use crate::error::Result;
use crate::format::{be_u32, overflow_page_capacity, read_varint, table_leaf_local_payload};
use crate::header::DbHeader;
use crate::pager::PageFile;

/// One table-leaf cell, located within its page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableLeafCell {
    /// The row's key.
    pub rowid: i64,
    /// Size of the whole record (local part plus overflow).
    pub payload_len: u64,
    /// Offset of the local part of the payload in the page.
    pub local_start: usize,
    /// Length of the local part.
    pub local_len: usize,
    /// The first overflow page, when the payload spills.
    pub first_overflow: Option<u32>,
}

impl TableLeafCell {
    /// Parses the cell at offset `cell` of a table-leaf page, whose usable size is `usable`.
    /// Returns a description of the problem when the cell runs past the usable part.
    pub fn parse(page: &[u8], cell: usize, usable: u32) -> Result<Self, String> {
        let area = page
            .get(cell..(usable as usize).min(page.len()))
            .ok_or_else(|| format!("cell offset {cell} lies outside the page"))?;
        let (payload_len, n1) =
            read_varint(area).ok_or("cell payload size runs past the page".to_string())?;
        let (rowid, n2) = area
            .get(n1..)
            .and_then(read_varint)
            .ok_or("cell rowid runs past the page".to_string())?;
        let local = table_leaf_local_payload(usable, payload_len);
        // local <= usable - 35 here, so it fits a usize.
        let local_len = local as usize;
        let local_start = cell + n1 + n2;
        let spills = payload_len > local;
        let end = local_start + local_len + if spills { 4 } else { 0 };
        if end > usable as usize || end > page.len() {
            return Err(format!(
                "cell at offset {cell} with a {payload_len}-byte payload runs past the usable \
                 page"
            ));
        }
        let first_overflow = if spills {
            be_u32(page, local_start + local_len)
        } else {
            None
        };
        Ok(Self {
            rowid: rowid as i64,
            payload_len,
            local_start,
            local_len,
            first_overflow,
        })
    }

    /// The local part of the payload.
    pub fn local<'p>(&self, page: &'p [u8]) -> &'p [u8] {
        page.get(self.local_start..self.local_start + self.local_len)
            .unwrap_or(&[])
    }

    /// How many overflow pages the payload needs on pages of `usable` bytes.
    pub fn overflow_pages(&self, usable: u32) -> u64 {
        let spilled = self.payload_len - self.local_len as u64;
        spilled.div_ceil(u64::from(overflow_page_capacity(usable)))
    }
}

/// Pages already visited, for the cycle check of [`OverflowChain`].
pub trait SeenPages {
    /// Records `page`; returns `false` when it was already there.
    fn first_visit(&mut self, page: u32) -> bool;
}

impl SeenPages for PageSet {
    fn first_visit(&mut self, page: u32) -> bool {
        self.insert(page)
    }
}

impl SeenPages for HashSet<u32> {
    fn first_visit(&mut self, page: u32) -> bool {
        self.insert(page)
    }
}

/// A broken overflow chain: the page whose pointer (or cell) is at fault, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainError {
    /// The leaf page of the cell, or the overflow page whose next pointer is wrong.
    pub page: u32,
    /// What is wrong, naming the rowid, the payload size and the page pointed to.
    pub what: String,
}

/// One overflow chain being walked, one page at a time. The caller reads each page that
/// [`Self::next_page`] names (its own way: a [`PageFile`], a write-ahead log, `pread`) and hands
/// its next pointer to [`Self::took`], which says how many payload bytes the page carries
/// (from offset 4). It may stop at any point once it has the bytes it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverflowChain {
    rowid: i64,
    payload_len: u64,
    capacity: u64,
    expected: u64,
    walked: u64,
    left: u64,
    from: u32,
    next: u32,
}

impl OverflowChain {
    /// The chain of the cell with `rowid` on leaf page `leaf`, whose `payload_len`-byte payload
    /// keeps `local_len` bytes on the leaf and continues on page `first`. Fails when the payload
    /// needs more overflow pages than the file holds.
    pub fn new(
        db: &DbHeader,
        leaf: u32,
        rowid: i64,
        payload_len: u64,
        local_len: usize,
        first: u32,
    ) -> Result<Self, ChainError> {
        let capacity = u64::from(overflow_page_capacity(db.usable_size()));
        let left = payload_len.saturating_sub(local_len as u64);
        let chain = OverflowChain {
            rowid,
            payload_len,
            capacity,
            expected: left.div_ceil(capacity.max(1)),
            walked: 0,
            left,
            from: leaf,
            next: first,
        };
        if chain.expected > u64::from(db.page_count) {
            return Err(ChainError {
                page: leaf,
                what: format!("{}, more than the file holds", chain.describe()),
            });
        }
        Ok(chain)
    }

    /// The chain of a parsed cell (see [`Self::new`]); `None` when it does not spill.
    pub fn of_cell(
        db: &DbHeader,
        leaf: u32,
        cell: &TableLeafCell,
    ) -> Option<Result<Self, ChainError>> {
        let first = cell.first_overflow?;
        Some(Self::new(
            db,
            leaf,
            cell.rowid,
            cell.payload_len,
            cell.local_len,
            first,
        ))
    }

    /// Overflow pages the payload needs.
    pub fn expected_pages(&self) -> u64 {
        self.expected
    }

    fn describe(&self) -> String {
        format!(
            "rowid {}: a {}-byte payload needs {} overflow pages",
            self.rowid, self.payload_len, self.expected
        )
    }

    fn broken(&self, what: String) -> ChainError {
        ChainError {
            page: self.from,
            what,
        }
    }

    /// The next page to read, after checking the pointer to it: a usable page (not page 0 or
    /// 1, the lock-byte page, a pointer-map page or past the end) not yet in `seen` (which it
    /// joins). `None` once the payload is complete, when the chain must end there.
    pub fn next_page(
        &mut self,
        db: &DbHeader,
        seen: &mut impl SeenPages,
    ) -> Result<Option<u32>, ChainError> {
        let next = self.next;
        if self.walked == self.expected {
            return if next == 0 {
                Ok(None)
            } else {
                Err(self.broken(format!(
                    "{}, but the chain continues to page {next}",
                    self.describe()
                )))
            };
        }
        if next == 0 {
            return Err(self.broken(format!(
                "{}, but the chain ends after {}",
                self.describe(),
                self.walked
            )));
        }
        if let Some(reason) = db.unusable_page_reason(next) {
            return Err(self.broken(format!("overflow pointer: {reason}")));
        }
        if !seen.first_visit(next) {
            return Err(self.broken(format!(
                "overflow pointer to page {next}, which is already in use (a cycle or a page \
                 shared with another chain or b-tree)"
            )));
        }
        Ok(Some(next))
    }

    /// Records that the page [`Self::next_page`] named was read and that its first four bytes
    /// hold `next_pointer`; returns how many payload bytes it carries from offset 4.
    pub fn took(&mut self, next_pointer: u32) -> usize {
        let take = self.left.min(self.capacity);
        self.left -= take;
        self.walked += 1;
        self.from = self.next;
        self.next = next_pointer;
        take as usize
    }
}

/// Follows the overflow chain of `cell`, found on leaf page `leaf`, and returns the number of
/// overflow pages. Each page must be usable and not yet in `seen` (which it joins), and the
/// chain must end (next pointer 0) exactly when the payload is complete. With `content`, the
/// spilled payload bytes are appended to it (`scratch` is a reusable page buffer).
pub fn follow_overflow_chain(
    file: &PageFile,
    leaf: u32,
    cell: &TableLeafCell,
    seen: &mut PageSet,
    mut content: Option<&mut Vec<u8>>,
    scratch: &mut Vec<u8>,
) -> Result<u64> {
    let db = file.header();
    let broken = |e: ChainError| file.corrupt(e.page, e.what);
    let Some(chain) = OverflowChain::of_cell(db, leaf, cell) else {
        return Ok(0);
    };
    let mut chain = chain.map_err(broken)?;
    while let Some(page) = chain.next_page(db, seen).map_err(broken)? {
        match content.as_deref_mut() {
            Some(out) => {
                scratch.resize(file.page_size(), 0);
                file.read_page(page, scratch)?;
                let take = chain.took(be_u32(scratch, 0).unwrap_or(0));
                out.extend_from_slice(scratch.get(4..4 + take).unwrap_or(&[]));
            }
            None => {
                let mut ptr = [0u8; 4];
                file.read_in_page(page, 0, &mut ptr)?;
                chain.took(u32::from_be_bytes(ptr));
            }
        }
    }
    Ok(chain.expected_pages())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(page_count: u32, auto_vacuum: bool) -> DbHeader {
        DbHeader {
            page_size: 1024,
            reserved_bytes: 0,
            page_count,
            change_counter: 1,
            freelist_trunk: 0,
            freelist_pages: 0,
            largest_root_page: u32::from(auto_vacuum) * 3,
            text_encoding: 1,
            file_size: u64::from(page_count) * 1024,
            write_version: 1,
            read_version: 1,
            schema_format: 4,
            page_count_from_header: true,
        }
    }

    /// Walks a chain whose pages point on as `links` says (page -> next); returns the pages
    /// read and the payload bytes each carried, or the error.
    fn walk(
        db: &DbHeader,
        payload_len: u64,
        first: u32,
        links: &[(u32, u32)],
    ) -> Result<Vec<(u32, usize)>, ChainError> {
        let mut chain = OverflowChain::new(db, 7, 42, payload_len, 100, first)?;
        let mut seen = HashSet::new();
        let mut read = Vec::new();
        while let Some(page) = chain.next_page(db, &mut seen)? {
            let next = links.iter().find(|l| l.0 == page).map_or(0, |l| l.1);
            read.push((page, chain.took(next)));
        }
        Ok(read)
    }

    #[test]
    fn a_sound_chain_carries_the_whole_payload() {
        let db = header(100, false);
        // 100 bytes local, 2 * 1020 + 60 spilled: three pages.
        let read = walk(&db, 100 + 2100, 10, &[(10, 11), (11, 20)]).unwrap();
        assert_eq!(read, [(10, 1020), (11, 1020), (20, 60)]);
    }

    #[test]
    fn broken_chains_name_the_page_whose_pointer_is_wrong() {
        let db = header(100, true);
        let len = 100 + 2100;
        let e = walk(&db, len, 10, &[(10, 11), (11, 10)]).unwrap_err();
        assert_eq!(e.page, 11);
        assert!(
            e.what.contains("page 10, which is already in use"),
            "{}",
            e.what
        );
        let e = walk(&db, len, 10, &[(10, 1)]).unwrap_err();
        assert_eq!(e.page, 10);
        assert!(e.what.contains("page 1 is the schema root"), "{}", e.what);
        let e = walk(&db, len, 10, &[(10, 2)]).unwrap_err();
        assert!(e.what.contains("pointer-map page"), "{}", e.what);
        let e = walk(&db, len, 10, &[(10, 500)]).unwrap_err();
        assert!(e.what.contains("past the end"), "{}", e.what);
        let e = walk(&db, len, 10, &[(10, 11)]).unwrap_err();
        assert_eq!(e.page, 11);
        assert!(
            e.what.contains("rowid 42") && e.what.contains("ends after 2"),
            "{}",
            e.what
        );
        let e = walk(&db, len, 10, &[(10, 11), (11, 20), (20, 21)]).unwrap_err();
        assert_eq!(e.page, 20);
        assert!(e.what.contains("continues to page 21"), "{}", e.what);
        // More pages than the file holds: the leaf is at fault, before any read.
        let e = walk(&db, 100 + 1020 * 200, 10, &[]).unwrap_err();
        assert_eq!(e.page, 7);
        assert!(e.what.contains("more than the file holds"), "{}", e.what);
    }
}
