//! Walking a table b-tree's interior pages to list its leaves.
//!
//! [`walk_table`] goes level by level from the root. Every interior page is read and every
//! child pointer checked (not 0, not past the end, not page 1, the lock-byte page or a
//! pointer-map page, and not a page already in the tree, which catches cycles and shared
//! pages). A SQLite b-tree keeps all leaves at the same depth, so the walk reads only the first
//! page of each new level to learn whether the level is interior or leaf: listing the 194,670
//! leaves of TPC-H SF1's `lineitem` costs about 530 page reads, not 195,000 (the last page of
//! the leaf level is read too, as a second sample). [`LeafCheck::All`] reads
//! every leaf as well, checking its type, when the caller wants the full check (the
//! [`census`](crate::plan::TablePlan::census) reads every leaf anyway).
//!
//! The walk is iterative and bounded: at most [`MAX_DEPTH`] levels and each page at most once.

use crate::error::Result;
use crate::format::{
    be_u32, read_varint, BtreePageHeader, DB_HEADER_SIZE, PAGE_INTERIOR_INDEX, PAGE_LEAF_INDEX,
};
use crate::pager::PageFile;

/// The deepest b-tree accepted, in levels. SQLite's own cursor gives up beyond 20
/// (`BTCURSOR_MAX_DEPTH`), so a deeper tree is corrupt even by SQLite's measure.
pub const MAX_DEPTH: u32 = 20;

/// Which leaf pages [`walk_table`] reads to check their page type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafCheck {
    /// Only the first and the last leaf (the first is needed to learn the tree's depth); the
    /// engine checks the rest as it decodes them.
    First,
    /// Every leaf.
    All,
}

/// The pages of one table b-tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableTree {
    /// The root page.
    pub root_page: u32,
    /// Every leaf page, in key (rowid) order.
    pub leaves: Vec<u32>,
    /// Every interior page, level by level from the root.
    pub interior_pages: Vec<u32>,
    /// Number of levels: 1 when the root is itself a leaf.
    pub depth: u32,
}

/// A set of page numbers `1..=page_count` as a bitmap (one bit per page: 35 KiB for a 1 GiB
/// file of 4 KiB pages).
#[derive(Debug, Clone)]
pub struct PageSet {
    bits: Vec<u64>,
}

impl PageSet {
    /// An empty set able to hold pages `1..=page_count`.
    pub fn new(page_count: u32) -> Self {
        Self {
            bits: vec![0; (page_count as usize).div_ceil(64) + 1],
        }
    }

    /// Adds `page`; returns `false` when it was already present (or cannot be held).
    pub fn insert(&mut self, page: u32) -> bool {
        let (word, bit) = (page as usize / 64, page % 64);
        match self.bits.get_mut(word) {
            Some(w) if *w & (1 << bit) == 0 => {
                *w |= 1 << bit;
                true
            }
            _ => false,
        }
    }

    /// Whether `page` is present.
    pub fn contains(&self, page: u32) -> bool {
        self.bits
            .get(page as usize / 64)
            .is_some_and(|w| w & (1 << (page % 64)) != 0)
    }
}

/// Where a page's b-tree header starts: after the database header on page 1.
pub fn btree_header_offset(page: u32) -> usize {
    if page == 1 {
        DB_HEADER_SIZE
    } else {
        0
    }
}

/// Parses the b-tree header of `page` (its bytes in `buf`) and requires a table b-tree page.
pub fn table_page_header(file: &PageFile, page: u32, buf: &[u8]) -> Result<BtreePageHeader> {
    let offset = btree_header_offset(page);
    let header = BtreePageHeader::parse(buf, offset).map_err(|what| file.corrupt(page, what))?;
    match header.page_type {
        PAGE_INTERIOR_INDEX | PAGE_LEAF_INDEX => Err(file.corrupt(
            page,
            format!(
                "index b-tree page (type 0x{:02x}) where a table b-tree page was expected",
                header.page_type
            ),
        )),
        _ => {
            let usable = file.header().usable_size() as usize;
            if header.cell_pointers_end(offset) > usable {
                return Err(file.corrupt(
                    page,
                    format!(
                        "cell pointer array of {} cells runs into the reserved bytes",
                        header.cell_count
                    ),
                ));
            }
            Ok(header)
        }
    }
}

/// Appends the child pointers of an interior table page to `children`, left to right (the
/// right child last), each checked: a usable page number (see
/// [`crate::header::DbHeader::unusable_page_reason`]) that is not yet in the tree (`seen`).
fn push_interior_children(
    file: &PageFile,
    page: u32,
    buf: &[u8],
    header: &BtreePageHeader,
    seen: &mut PageSet,
    children: &mut Vec<u32>,
) -> Result<()> {
    let db = file.header();
    let offset = btree_header_offset(page);
    let usable = db.usable_size() as usize;
    // Children most pages can be without a closer look: not 0 or 1, not past the end, not the
    // lock-byte page, and no pointer-map pages in the file.
    let (last, pending, ptrmap) = (db.page_count, db.pending_byte_page(), db.has_pointer_map());
    let plain = |child: u32| child >= 2 && child <= last && child != pending && !ptrmap;
    let cells = usize::from(header.cell_count);
    for i in 0..=cells {
        let child = if i < cells {
            let cell = header
                .cell_offset(buf, offset, i, usable)
                .map_err(|what| file.corrupt(page, what))?;
            // An interior table cell is a 4-byte child pointer followed by the rowid key varint.
            let child = be_u32(buf, cell)
                .filter(|_| cell + 4 <= usable)
                .ok_or_else(|| file.corrupt(page, format!("cell {i} runs past the usable page")))?;
            buf.get(cell + 4..usable)
                .and_then(read_varint)
                .ok_or_else(|| file.corrupt(page, format!("cell {i}: key runs past the page")))?;
            child
        } else {
            header.right_child.unwrap_or(0)
        };
        // Named only when something is wrong: 200,000 children per GB of table.
        let which = || {
            if i == cells {
                "right child".to_string()
            } else {
                format!("cell {i} child")
            }
        };
        if !plain(child) {
            if let Some(reason) = db.unusable_page_reason(child) {
                let which = which();
                return Err(file.corrupt(page, format!("{which} pointer: {reason}")));
            }
        }
        if !seen.insert(child) {
            let which = which();
            return Err(file.corrupt(
                page,
                format!(
                    "{which} pointer to page {child}, which is already in the tree \
                     (a cycle or a page with two parents)"
                ),
            ));
        }
        children.push(child);
    }
    Ok(())
}

/// Lists the pages of the table b-tree rooted at `root` (page 1 is the schema table).
pub fn walk_table(file: &PageFile, root: u32, check: LeafCheck) -> Result<TableTree> {
    let db = file.header();
    file.check_page_number(root)?;
    if root != 1 {
        if let Some(reason) = db.unusable_page_reason(root) {
            return Err(file.corrupt(root, format!("invalid root page: {reason}")));
        }
    }
    let mut seen = PageSet::new(db.page_count);
    seen.insert(root);
    let mut buf = file.page_buffer();
    let mut interior_pages = Vec::new();
    let mut level = vec![root];
    let mut depth = 1;
    loop {
        let first = level.first().copied().unwrap_or(root);
        file.read_page(first, &mut buf)?;
        let first_header = table_page_header(file, first, &buf)?;
        if first_header.is_table_leaf() {
            // The last page of the level too: a cheap second sample of the depth.
            let sampled = match check {
                LeafCheck::First => level.len().saturating_sub(1).max(1),
                LeafCheck::All => 1,
            };
            for &page in level.iter().skip(sampled) {
                file.read_page(page, &mut buf)?;
                if !table_page_header(file, page, &buf)?.is_table_leaf() {
                    return Err(uneven(file, page, depth, "an interior", "leaves"));
                }
            }
            return Ok(TableTree {
                root_page: root,
                leaves: level,
                interior_pages,
                depth,
            });
        }
        if depth >= MAX_DEPTH {
            return Err(file.corrupt(
                first,
                format!("interior page at depth {depth}: the b-tree is deeper than {MAX_DEPTH}"),
            ));
        }
        // The whole level is asked for at once, so a cold walk waits for the disk once per
        // level rather than once per page (5,520 interior pages at SF 10); a warm one (its
        // last page already cached) skips the advice, one system call per page.
        if level.len() > 1 && file.is_cached(level[level.len() - 1]) != Some(true) {
            file.will_need(&level[1..]);
        }
        // About as many children per page as the first one has (they are filled alike), and
        // never more than the file has pages (a damaged first page must not size this).
        let mut next = Vec::with_capacity(
            (level.len() * (usize::from(first_header.cell_count) + 1)).min(db.page_count as usize),
        );
        for (k, &page) in level.iter().enumerate() {
            let header = if k == 0 {
                first_header
            } else {
                file.read_page(page, &mut buf)?;
                table_page_header(file, page, &buf)?
            };
            if !header.is_table_interior() {
                return Err(uneven(file, page, depth, "a leaf", "interior pages"));
            }
            push_interior_children(file, page, &buf, &header, &mut seen, &mut next)?;
            interior_pages.push(page);
        }
        level = next;
        depth += 1;
    }
}

fn uneven(file: &PageFile, page: u32, depth: u32, is: &str, rest: &str) -> crate::Error {
    file.corrupt(
        page,
        format!(
            "{is} page at depth {depth} where the rest of the level holds {rest} (a table \
             b-tree keeps every leaf at the same depth)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_set_inserts_once_and_refuses_out_of_range() {
        let mut s = PageSet::new(100);
        assert!(s.insert(1));
        assert!(!s.insert(1));
        assert!(s.insert(100));
        assert!(s.contains(100));
        assert!(!s.contains(99));
        assert!(!s.insert(1_000_000));
        assert!(!s.contains(1_000_000));
    }

    #[test]
    fn only_page_one_has_its_btree_header_after_the_database_header() {
        assert_eq!(btree_header_offset(1), 100);
        assert_eq!(btree_header_offset(2), 0);
    }
}
