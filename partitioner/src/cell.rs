//! Table-leaf cells and their overflow chains.
//!
//! A table-leaf cell is: payload size (varint), rowid (varint), the first
//! [`table_leaf_local_payload`] bytes of the payload, and, when the payload did not fit, the
//! 4-byte number of the first overflow page. Each overflow page starts with the number of the
//! next one (0 on the last) and carries `usable - 4` payload bytes. [`follow_overflow_chain`]
//! checks every link against the payload size, so a corrupt chain cannot loop or run long.

use crate::btree::PageSet;
use crate::error::Result;
use crate::format::{be_u32, overflow_page_capacity, read_varint, table_leaf_local_payload};
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
    let Some(first) = cell.first_overflow else {
        return Ok(0);
    };
    let db = file.header();
    let capacity = overflow_page_capacity(db.usable_size()) as usize;
    let expected = cell.overflow_pages(db.usable_size());
    let describe = || {
        format!(
            "rowid {}: a {}-byte payload needs {expected} overflow pages",
            cell.rowid, cell.payload_len
        )
    };
    if expected > u64::from(db.page_count) {
        return Err(file.corrupt(leaf, format!("{}, more than the file holds", describe())));
    }
    let mut left = cell.payload_len - cell.local_len as u64;
    let (mut from, mut next) = (leaf, first);
    for k in 0..expected {
        if next == 0 {
            return Err(file.corrupt(
                from,
                format!("{}, but the chain ends after {k}", describe()),
            ));
        }
        if let Some(reason) = db.unusable_page_reason(next) {
            return Err(file.corrupt(from, format!("overflow pointer: {reason}")));
        }
        if !seen.insert(next) {
            return Err(file.corrupt(
                from,
                format!(
                    "overflow pointer to page {next}, which is already in use (a cycle or a \
                     page shared with another chain or b-tree)"
                ),
            ));
        }
        let take = left.min(capacity as u64) as usize;
        let after = match content.as_deref_mut() {
            Some(out) => {
                scratch.resize(file.page_size(), 0);
                file.read_page(next, scratch)?;
                out.extend_from_slice(scratch.get(4..4 + take).unwrap_or(&[]));
                be_u32(scratch, 0).unwrap_or(0)
            }
            None => {
                let mut ptr = [0u8; 4];
                file.read_in_page(next, 0, &mut ptr)?;
                u32::from_be_bytes(ptr)
            }
        };
        left -= take as u64;
        from = next;
        next = after;
    }
    if next != 0 {
        return Err(file.corrupt(
            from,
            format!("{}, but the chain continues to page {next}", describe()),
        ));
    }
    Ok(expected)
}
