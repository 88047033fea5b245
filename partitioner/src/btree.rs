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
//!
//! [`walk_upper`] stops one level earlier on a tree of three or more levels: it lists the
//! leaf-parent level (the interior pages whose children are leaves: 5,500 of the 5,520
//! interior pages of SF 10's `lineitem`) without reading it, so that a scan's executors can
//! read those pages each on its own CPU ([`read_parent`], with an [`AtomicPageSet`] carrying
//! the check that no page is in the tree twice) instead of the planner reading them all
//! before any executor starts.

use std::sync::atomic::{AtomicU64, Ordering};

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

    /// Adds the pages of `other` (a set of the same size) unless the two share a page: then
    /// that page, and `self` is left partly merged.
    pub fn add_disjoint(&mut self, other: &PageSet) -> Option<u32> {
        for (word, (a, &b)) in self.bits.iter_mut().zip(&other.bits).enumerate() {
            let common = *a & b;
            if common != 0 {
                return Some(word as u32 * 64 + common.trailing_zeros());
            }
            *a |= b;
        }
        None
    }

    /// Whether `page` is present.
    pub fn contains(&self, page: u32) -> bool {
        self.bits
            .get(page as usize / 64)
            .is_some_and(|w| w & (1 << (page % 64)) != 0)
    }
}

/// A [`PageSet`] that threads add to at once: the two-parents check of a leaf-parent level
/// read by several executors.
#[derive(Debug)]
pub struct AtomicPageSet {
    bits: Vec<AtomicU64>,
}

impl AtomicPageSet {
    /// A set holding the pages of `set`.
    pub fn from_set(set: &PageSet) -> Self {
        Self {
            bits: set.bits.iter().map(|&w| AtomicU64::new(w)).collect(),
        }
    }

    /// Adds `page`; returns `false` when it was already present, added by any thread (or
    /// cannot be held).
    pub fn insert(&self, page: u32) -> bool {
        let (word, bit) = (page as usize / 64, page % 64);
        self.bits
            .get(word)
            .is_some_and(|w| w.fetch_or(1 << bit, Ordering::Relaxed) & (1 << bit) == 0)
    }

    /// Adds every page of `pages`, one atomic operation per run of pages that share a word
    /// of the bitmap (a parent's children are mostly consecutive pages); `Err(i)` when
    /// `pages[i]` was already present (added by any thread, or earlier in `pages`) or cannot
    /// be held. Pages before `i` are added; some after it may be.
    pub fn insert_all(&self, pages: &[u32]) -> std::result::Result<(), usize> {
        let mut i = 0;
        while i < pages.len() {
            let (start, word) = (i, pages[i] as usize / 64);
            let mut mask = 0u64;
            while i < pages.len() && pages[i] as usize / 64 == word {
                let bit = 1u64 << (pages[i] % 64);
                if mask & bit != 0 {
                    return Err(i);
                }
                mask |= bit;
                i += 1;
            }
            let Some(w) = self.bits.get(word) else {
                return Err(start);
            };
            let old = w.fetch_or(mask, Ordering::Relaxed);
            if old & mask != 0 {
                let first = (start..i).find(|&j| old & (1 << (pages[j] % 64)) != 0);
                return Err(first.unwrap_or(start));
            }
        }
        Ok(())
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
/// [`crate::header::DbHeader::unusable_page_reason`]) that is not yet in the tree (`claim`
/// adds it to the tree's pages and returns `false` when it was there already).
fn push_interior_children(
    file: &PageFile,
    page: u32,
    buf: &[u8],
    header: &BtreePageHeader,
    claim: impl FnMut(u32) -> bool,
    children: &mut Vec<u32>,
) -> Result<()> {
    push_children_in(file, page, buf, header, None, claim, children)
}

/// [`push_interior_children`] keeping only the children whose rowids can lie in one of
/// `rowids` (inclusive ranges, ascending and disjoint; every child when `None`): child `i` of
/// a table interior page holds the rowids above cell `i - 1`'s key up to cell `i`'s key, the
/// right child those above the last key (btree.c's `sqlite3BtreeTableMoveto` goes left on an
/// equal key).
///
/// With `rowids`, the cells between the children kept are not read: the next child a range
/// reaches is found by binary search over the cells' keys, as SQLite's cursor finds it
/// (`sqlite3BtreeTableMoveto`), so a seek of a few rowids reads about `log2(cells)` cells of
/// each page it passes, not all of them (and, like SQLite's, does not see damage in the
/// others).
fn push_children_in(
    file: &PageFile,
    page: u32,
    buf: &[u8],
    header: &BtreePageHeader,
    mut rowids: Option<RowidFilter<'_>>,
    mut claim: impl FnMut(u32) -> bool,
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
    // Cell `i`'s child pointer and key.
    let cell_at = |i: usize| -> Result<(u32, i64)> {
        let cell = header
            .cell_offset(buf, offset, i, usable)
            .map_err(|what| file.corrupt(page, what))?;
        // An interior table cell is a 4-byte child pointer followed by the rowid key varint.
        let child = be_u32(buf, cell)
            .filter(|_| cell + 4 <= usable)
            .ok_or_else(|| file.corrupt(page, format!("cell {i} runs past the usable page")))?;
        let (key, _) = buf
            .get(cell + 4..usable)
            .and_then(read_varint)
            .ok_or_else(|| file.corrupt(page, format!("cell {i}: key runs past the page")))?;
        // A rowid is a signed 64-bit integer, stored as its two's complement.
        Ok((child, key as i64))
    };
    // The key of the cell before child `i`: its rowids are above it (the first child's, above
    // the page's own lower bound).
    let mut below: Option<i64> = rowids.as_ref().and_then(|r| r.page.0);
    let mut i = 0;
    while i <= cells {
        let (child, upto) = if i < cells {
            let (child, key) = cell_at(i)?;
            (child, Some(key))
        } else {
            (
                header.right_child.unwrap_or(0),
                rowids.as_ref().and_then(|r| r.page.1),
            )
        };
        if let Some(r) = &mut rowids {
            if !r.admit(below, upto) {
                // No range meets this child: skip to the first child whose keys reach the
                // next range's start (none: the page holds no more of them).
                let Some(lo) = r.next_start(below) else { break };
                let (mut low, mut high) = (i + 1, cells);
                while low < high {
                    let mid = low + (high - low) / 2;
                    if cell_at(mid)?.1 < lo {
                        low = mid + 1;
                    } else {
                        high = mid;
                    }
                }
                below = match low {
                    j if j == i + 1 => upto,
                    j => Some(cell_at(j - 1)?.1),
                };
                i = low;
                continue;
            }
        }
        below = upto;
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
        if !claim(child) {
            return Err(already_in_tree(file, page, &which(), child));
        }
        children.push(child);
        i += 1;
    }
    Ok(())
}

/// The key interval of a table b-tree page: the rowids above the first (exclusive) up to the
/// second (inclusive), unbounded where `None`.
type KeyInterval = (Option<i64>, Option<i64>);

/// The rowid ranges a walk keeps ([`walk_rowid_ranges`]), for one interior page.
struct RowidFilter<'a> {
    /// Inclusive ranges, ascending and disjoint.
    ranges: &'a [(i64, i64)],
    /// The page's key interval, from its parent.
    page: KeyInterval,
    /// The key intervals of the children kept, in the order they are kept.
    children: &'a mut Vec<KeyInterval>,
}

impl RowidFilter<'_> {
    /// Whether one of the ranges meets the rowids above `above` up to `upto`; if so the
    /// child's interval is noted.
    fn admit(&mut self, above: Option<i64>, upto: Option<i64>) -> bool {
        // The first range that reaches above `above`; the later ones start later still.
        let meets = self
            .next_start(above)
            .is_some_and(|lo| upto.is_none_or(|k| lo <= k));
        if meets {
            self.children.push((above, upto));
        }
        meets
    }

    /// The start of the first range that reaches above `above` (`None`: no range does).
    fn next_start(&self, above: Option<i64>) -> Option<i64> {
        let first = above.map_or(0, |a| self.ranges.partition_point(|&(_, hi)| hi <= a));
        self.ranges.get(first).map(|&(lo, _)| lo)
    }
}

/// Lists the pages of the table b-tree rooted at `root` (page 1 is the schema table).
pub fn walk_table(file: &PageFile, root: u32, check: LeafCheck) -> Result<TableTree> {
    let mut walk = Walker::new(file, root)?;
    while let Some(first) = walk.probe()? {
        walk.descend(first)?;
    }
    walk.finish(check)
}

/// [`walk_table`] keeping only the subtrees that can hold a rowid in `lo..=hi`: the pages a
/// SQLite cursor seeking that range visits (with [`LeafCheck::First`], the first and last of
/// the leaves found are read). Pages outside the range are not read, so damage there goes
/// unnoticed, as it does for SQLite. No leaf when no subtree can hold the range.
pub fn walk_rowids(file: &PageFile, root: u32, lo: i64, hi: i64) -> Result<TableTree> {
    walk_rowid_ranges(file, root, &[(lo, hi)])
}

/// [`walk_rowids`] for several inclusive ranges, ascending and disjoint (`WHERE rowid IN
/// (...)`): the subtrees that can hold a rowid of one of them, each page once, the leaves in
/// key order.
pub fn walk_rowid_ranges(file: &PageFile, root: u32, ranges: &[(i64, i64)]) -> Result<TableTree> {
    let mut walk = Walker::new(file, root)?;
    walk.rowids = Some(ranges.to_vec());
    while let Some(first) = walk.probe()? {
        walk.descend(first)?;
        if walk.level.is_empty() {
            return Ok(TableTree {
                root_page: root,
                leaves: Vec::new(),
                interior_pages: walk.interior_pages,
                depth: walk.depth,
            });
        }
    }
    walk.finish(LeafCheck::First)
}

/// The pages of a table b-tree down to its leaf-parent level, which is listed but not read
/// (see [`walk_upper`]).
#[derive(Debug, Clone)]
pub struct UpperTree {
    /// The root page.
    pub root_page: u32,
    /// The leaf-parent level, left to right (key order): interior pages whose children are
    /// leaves. Only the first has been read; [`read_parent`] reads the rest.
    pub parents: Vec<u32>,
    /// The interior pages above the leaf-parent level, level by level from the root.
    pub interior_pages: Vec<u32>,
    /// Levels in the whole tree, the leaves included (at least 3).
    pub depth: u32,
    /// Every page listed so far (the upper levels and `parents`): the leaves join it as the
    /// parents are read.
    pub seen: PageSet,
}

/// What [`walk_upper`] found.
#[derive(Debug, Clone)]
pub enum Walk {
    /// A tree of one or two levels (a root leaf, or a root whose children are the leaves),
    /// walked whole as [`walk_table`] walks it with [`LeafCheck::First`]: its leaf-parent
    /// level is the root, already read.
    Whole(TableTree),
    /// A deeper tree, walked down to its leaf-parent level.
    Upper(UpperTree),
}

/// Walks the table b-tree rooted at `root` as [`walk_table`] does, but stops at the
/// leaf-parent level of a tree of three or more levels: that level is known to be it when
/// its first page's first child is a leaf (the rest of the level is checked as it is read).
/// Any doubt (a first child that is not a readable table page) walks on, so that the error
/// is the one [`walk_table`] reports.
pub fn walk_upper(file: &PageFile, root: u32) -> Result<Walk> {
    let mut walk = Walker::new(file, root)?;
    let mut child = file.page_buffer();
    while let Some(first) = walk.probe()? {
        if walk.depth >= 2 && walk.first_child_is_leaf(&first, &mut child)? {
            return Ok(Walk::Upper(UpperTree {
                root_page: root,
                parents: walk.level,
                interior_pages: walk.interior_pages,
                depth: walk.depth + 1,
                seen: walk.seen,
            }));
        }
        walk.descend(first)?;
    }
    walk.finish(LeafCheck::First).map(Walk::Whole)
}

/// Reads leaf-parent `page` (at level `depth` of the tree) into `buf`, checks that it is an
/// interior table page, and appends its children, each checked as [`walk_table`] checks them
/// and claimed in `seen` (which must hold every page listed above the leaves: a child already
/// there is a cycle or a page with two parents).
pub fn read_parent(
    file: &PageFile,
    page: u32,
    depth: u32,
    buf: &mut [u8],
    seen: &AtomicPageSet,
    children: &mut Vec<u32>,
) -> Result<()> {
    file.read_page(page, buf)?;
    let header = table_page_header(file, page, buf)?;
    if !header.is_table_interior() {
        return Err(uneven(file, page, depth, "a leaf", "interior pages"));
    }
    let start = children.len();
    push_interior_children(file, page, buf, &header, |_| true, children)?;
    // Claimed together: one atomic operation per 64 pages rather than per child.
    seen.insert_all(&children[start..]).map_err(|i| {
        let which = if i == usize::from(header.cell_count) {
            "right child".to_string()
        } else {
            format!("cell {i} child")
        };
        already_in_tree(file, page, &which, children[start + i])
    })
}

/// Appends the children of interior page `page` (its bytes in `buf`, its header `header`) to
/// `children` without adding them to any set: for sampling a level, not for walking it.
pub fn interior_children(
    file: &PageFile,
    page: u32,
    buf: &[u8],
    header: &BtreePageHeader,
    children: &mut Vec<u32>,
) -> Result<()> {
    push_interior_children(file, page, buf, header, |_| true, children)
}

/// The state of a walk from the root down, one level at a time.
struct Walker<'a> {
    file: &'a PageFile,
    root: u32,
    seen: PageSet,
    /// The current level's first page, once [`Walker::probe`] has read it.
    buf: Vec<u8>,
    interior_pages: Vec<u32>,
    /// The current level, left to right.
    level: Vec<u32>,
    /// The current level's depth (1: the root).
    depth: u32,
    /// Only the subtrees that can hold these rowids are walked ([`walk_rowid_ranges`]).
    rowids: Option<Vec<(i64, i64)>>,
    /// With `rowids`: the key interval of each page of the current level.
    intervals: Vec<KeyInterval>,
}

impl<'a> Walker<'a> {
    fn new(file: &'a PageFile, root: u32) -> Result<Self> {
        let db = file.header();
        file.check_page_number(root)?;
        if root != 1 {
            if let Some(reason) = db.unusable_page_reason(root) {
                return Err(file.corrupt(root, format!("invalid root page: {reason}")));
            }
        }
        let mut seen = PageSet::new(db.page_count);
        seen.insert(root);
        Ok(Self {
            file,
            root,
            seen,
            buf: file.page_buffer(),
            interior_pages: Vec::new(),
            level: vec![root],
            depth: 1,
            rowids: None,
            intervals: vec![(None, None)],
        })
    }

    /// Reads the current level's first page: `None` when it is a leaf (the walk is at the
    /// leaf level), else its header.
    fn probe(&mut self) -> Result<Option<BtreePageHeader>> {
        let first = self.level.first().copied().unwrap_or(self.root);
        self.file.read_page(first, &mut self.buf)?;
        let header = table_page_header(self.file, first, &self.buf)?;
        if header.is_table_leaf() {
            return Ok(None);
        }
        if self.depth >= MAX_DEPTH {
            return Err(self.file.corrupt(
                first,
                format!(
                    "interior page at depth {}: the b-tree is deeper than {MAX_DEPTH}",
                    self.depth
                ),
            ));
        }
        Ok(Some(header))
    }

    /// Whether the first child of the current level's first page (read by
    /// [`Walker::probe`], its header `first`) is a table leaf; read into `child`. `false` when
    /// that child is no readable table page: the full walk then meets it and says why.
    fn first_child_is_leaf(&self, first: &BtreePageHeader, child: &mut [u8]) -> Result<bool> {
        let page = self.level[0];
        let offset = btree_header_offset(page);
        let usable = self.file.header().usable_size() as usize;
        let pointer = if first.cell_count > 0 {
            first
                .cell_offset(&self.buf, offset, 0, usable)
                .ok()
                .and_then(|cell| be_u32(&self.buf, cell).filter(|_| cell + 4 <= usable))
        } else {
            first.right_child
        };
        let Some(pointer) = pointer.filter(|&p| {
            self.file.check_page_number(p).is_ok()
                && self.file.header().unusable_page_reason(p).is_none()
        }) else {
            return Ok(false);
        };
        self.file.read_page(pointer, child)?;
        Ok(table_page_header(self.file, pointer, child).is_ok_and(|h| h.is_table_leaf()))
    }

    /// Reads every page of the current level (interior pages, the first one's header
    /// `first_header` and bytes from [`Walker::probe`]) and moves to the level below.
    fn descend(&mut self, first_header: BtreePageHeader) -> Result<()> {
        let (file, level) = (self.file, &self.level);
        let db = file.header();
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
        let mut intervals = Vec::new();
        for (k, &page) in level.iter().enumerate() {
            let header = if k == 0 {
                first_header
            } else {
                file.read_page(page, &mut self.buf)?;
                table_page_header(file, page, &self.buf)?
            };
            if !header.is_table_interior() {
                return Err(uneven(file, page, self.depth, "a leaf", "interior pages"));
            }
            let seen = &mut self.seen;
            let claim = |p| seen.insert(p);
            let filter = self.rowids.as_deref().map(|ranges| RowidFilter {
                ranges,
                page: self.intervals.get(k).copied().unwrap_or((None, None)),
                children: &mut intervals,
            });
            push_children_in(file, page, &self.buf, &header, filter, claim, &mut next)?;
            self.interior_pages.push(page);
        }
        self.level = next;
        self.intervals = intervals;
        self.depth += 1;
        Ok(())
    }

    /// The walk is at the leaf level: checks the leaves `check` asks for and returns the tree.
    fn finish(mut self, check: LeafCheck) -> Result<TableTree> {
        // The last page of the level too: a cheap second sample of the depth.
        let sampled = match check {
            LeafCheck::First => self.level.len().saturating_sub(1).max(1),
            LeafCheck::All => 1,
        };
        for &page in self.level.iter().skip(sampled) {
            self.file.read_page(page, &mut self.buf)?;
            if !table_page_header(self.file, page, &self.buf)?.is_table_leaf() {
                return Err(uneven(self.file, page, self.depth, "an interior", "leaves"));
            }
        }
        Ok(TableTree {
            root_page: self.root,
            leaves: self.level,
            interior_pages: self.interior_pages,
            depth: self.depth,
        })
    }
}

fn already_in_tree(file: &PageFile, page: u32, which: &str, child: u32) -> crate::Error {
    file.corrupt(
        page,
        format!(
            "{which} pointer to page {child}, which is already in the tree (a cycle or a page \
             with two parents)"
        ),
    )
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

/// One interior page of [`table_rowids`]' walk: its children, left to right, and how many
/// have been taken (from the right when walking backwards).
struct TableFrame {
    page: u32,
    children: Vec<u32>,
    taken: usize,
    depth: u32,
}

/// The rowids of the `n` rows after the first `skip` of the table b-tree rooted at `root`, in
/// rowid order or, when `backward`, from the last row down: the rows a plain `SELECT ...
/// LIMIT n OFFSET skip` returns from SQLite's loop over the table, which steps over the
/// `OFFSET`'s rows without reading their columns. Whole leaves are passed over from their
/// cell counts (their cell pointers checked, no cell read); interior pages are checked as
/// [`walk_table`] checks them (usable children met once, every leaf at one depth), each
/// rowid read must follow the one before it in the walk's order, and a damaged page is an
/// error naming it.
pub fn table_rowids(
    file: &PageFile,
    root: u32,
    backward: bool,
    skip: u64,
    n: usize,
) -> Result<Vec<i64>> {
    file.check_page_number(root)?;
    if root != 1 {
        if let Some(reason) = file.header().unusable_page_reason(root) {
            return Err(file.corrupt(root, format!("invalid root page: {reason}")));
        }
    }
    let usable = file.header().usable_size() as usize;
    let mut seen = PageSet::new(file.header().page_count);
    seen.insert(root);
    let mut buf = file.page_buffer();
    let (mut skip, mut rowids) = (skip, Vec::with_capacity(n.min(1 << 16)));
    let mut leaf_depth: Option<u32> = None;
    // The page to read next and its depth; then the interior pages above it.
    let mut next = Some((root, 1u32));
    let mut stack: Vec<TableFrame> = Vec::new();
    while rowids.len() < n {
        let (page, depth) = match next.take() {
            Some(p) => p,
            None => {
                let Some(top) = stack.last_mut() else { break };
                if top.taken == top.children.len() {
                    stack.pop();
                    continue;
                }
                let at = if backward {
                    top.children.len() - 1 - top.taken
                } else {
                    top.taken
                };
                top.taken += 1;
                let (child, depth) = (top.children[at], top.depth + 1);
                if !seen.insert(child) {
                    return Err(already_in_tree(file, top.page, "a child", child));
                }
                (child, depth)
            }
        };
        if depth > MAX_DEPTH {
            return Err(file.corrupt(page, format!("table b-tree deeper than {MAX_DEPTH} levels")));
        }
        file.read_page(page, &mut buf)?;
        let header = table_page_header(file, page, &buf)?;
        if header.is_table_interior() {
            let mut children = Vec::with_capacity(usize::from(header.cell_count) + 1);
            push_interior_children(file, page, &buf, &header, |_| true, &mut children)?;
            stack.push(TableFrame {
                page,
                children,
                taken: 0,
                depth,
            });
            continue;
        }
        if *leaf_depth.get_or_insert(depth) != depth {
            return Err(file.corrupt(
                page,
                format!(
                    "table leaf at depth {depth}, where the table's first leaf was at depth {}",
                    leaf_depth.unwrap_or(depth)
                ),
            ));
        }
        let offset = btree_header_offset(page);
        let cells = usize::from(header.cell_count);
        let cell_at = |i: usize| {
            header
                .cell_offset(&buf, offset, i, usable)
                .map_err(|what| file.corrupt(page, what))
        };
        if cells as u64 <= skip {
            for i in 0..cells {
                cell_at(i)?;
            }
            skip -= cells as u64;
            continue;
        }
        for k in (skip as usize)..cells {
            if rowids.len() == n {
                break;
            }
            let i = if backward { cells - 1 - k } else { k };
            let at = cell_at(i)?;
            let rowid = read_varint(&buf[at.min(usable)..usable])
                .and_then(|(_, len)| read_varint(&buf[(at + len).min(usable)..usable]))
                .map(|(rowid, _)| rowid as i64)
                .ok_or_else(|| file.corrupt(page, format!("cell {i} runs past the usable page")))?;
            if let Some(&last) = rowids.last() {
                if (rowid <= last && !backward) || (rowid >= last && backward) {
                    return Err(file.corrupt(
                        page,
                        format!("cell {i}: rowid {rowid} out of order after rowid {last}"),
                    ));
                }
            }
            rowids.push(rowid);
        }
        skip = 0;
    }
    Ok(rowids)
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
    fn atomic_page_set_claims_runs_and_names_the_first_page_met_twice() {
        let mut base = PageSet::new(300);
        base.insert(70);
        let set = AtomicPageSet::from_set(&base);
        assert_eq!(set.insert_all(&[2, 3, 4, 63, 64, 65, 200]), Ok(()));
        // Already present: from the base set, from an earlier call, earlier in the same run.
        assert_eq!(set.insert_all(&[66, 67, 70, 71]), Err(2));
        assert_eq!(set.insert_all(&[100, 101, 4]), Err(2));
        assert_eq!(set.insert_all(&[120, 121, 120]), Err(2));
        assert_eq!(set.insert_all(&[250, 1_000_000]), Err(1));
        assert!(!set.insert(200) && !set.insert(101) && set.insert(299));
        assert_eq!(set.insert_all(&[]), Ok(()));
    }

    #[test]
    fn only_page_one_has_its_btree_header_after_the_database_header() {
        assert_eq!(btree_header_offset(1), 100);
        assert_eq!(btree_header_offset(2), 0);
    }
}
