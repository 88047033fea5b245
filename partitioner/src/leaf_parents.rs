//! Leaving a table's leaf-parent level to the scan: [`LeafParents`] and the per-executor
//! [`ParentShare`]s cut from it.
//!
//! Listing the leaves of a large table means reading every interior page whose children are
//! leaves: 5,500 pages for the 2 million leaves of SF 10's `lineitem`, 25-35 ms warm and about
//! 0.1 s cold, all of it before the first executor could start. A plan from
//! [`crate::TablePlan::open_for_scan`] reads only the levels above (a dozen pages) and keeps
//! the leaf-parent level as a list; [`crate::TablePlan::shares`] cuts that list into
//! contiguous runs, one per executor, and each executor reads its run on its own CPU
//! ([`ParentShare::read`]) and scans the leaves it found. The checks are those of the full
//! walk ([`crate::btree`]): every parent must be an interior table page, every child a usable
//! page number that no other page of the tree claims, the last through one
//! [`AtomicPageSet`] shared by the executors of the scan.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use crate::btree::{interior_children, read_parent, table_page_header, AtomicPageSet, PageSet};
use crate::error::Result;
use crate::pager::PageFile;
use crate::partition::{extents_of, proportional_shares, split_leaves, LeafRange};

/// How many leaf-parents, spread over the level, are read when planning to sample the
/// table's leaves (for the page-cache residency check that chooses `auto`'s backend).
const SAMPLED_PARENTS: usize = 8;

/// Below this many leaf-parents per executor the plan's split reads the parents itself and
/// cuts the leaves, as for a small table: a split by parents is only as even as one parent's
/// children, and reading 32 pages per executor costs less than a millisecond.
pub const MIN_PARENTS_PER_SHARE: usize = 32;

/// The leaf-parent level of a table b-tree, listed in key order and left for the scan to read.
#[derive(Clone)]
pub struct LeafParents {
    /// The level's pages, left to right (key order).
    pages: Arc<[u32]>,
    /// The level's depth in the tree (the leaves are one level below).
    depth: u32,
    /// Every page listed by the walk that found the level (the levels above it and the level).
    seen: Arc<PageSet>,
    /// The file (and log) the plan read, in the plan's snapshot.
    file: Arc<PageFile>,
    /// Leaves of a few parents spread over the level.
    sample: Vec<u32>,
    /// Those parents (read when planning, so in the page cache whether the table is or not).
    sampled: Arc<[u32]>,
    /// See [`MIN_PARENTS_PER_SHARE`].
    min_per_share: usize,
}

impl fmt::Debug for LeafParents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeafParents")
            .field("pages", &self.pages.len())
            .field("depth", &self.depth)
            .field("sample", &self.sample.len())
            .field("min_per_share", &self.min_per_share)
            .finish()
    }
}

impl LeafParents {
    /// The level `pages` (depth `depth`) of the tree whose listed pages are `seen`, read later
    /// from `file`. Reads a few of the pages to sample the leaves; a page that cannot be read
    /// or parsed is left out of the sample (the executor reading it reports what is wrong).
    pub(crate) fn new(file: Arc<PageFile>, pages: Vec<u32>, depth: u32, seen: PageSet) -> Self {
        let n = pages.len();
        let picks = SAMPLED_PARENTS.min(n);
        let mut buf = file.page_buffer();
        let (mut sample, mut sampled) = (Vec::new(), Vec::with_capacity(picks));
        for k in 0..picks {
            let page = pages[if picks > 1 {
                k * (n - 1) / (picks - 1)
            } else {
                0
            }];
            sampled.push(page);
            let before = sample.len();
            let read = file.read_page(page, &mut buf).and_then(|()| {
                let header = table_page_header(&file, page, &buf)?;
                if k == 0 {
                    sample.reserve(picks * (usize::from(header.cell_count) + 1));
                }
                interior_children(&file, page, &buf, &header, &mut sample)
            });
            if read.is_err() {
                sample.truncate(before);
            }
        }
        sample.sort_unstable();
        sample.dedup();
        Self {
            pages: pages.into(),
            depth,
            seen: Arc::new(seen),
            file,
            sample,
            sampled: sampled.into(),
            min_per_share: MIN_PARENTS_PER_SHARE,
        }
    }

    /// The level's pages, left to right.
    pub fn pages(&self) -> &[u32] {
        &self.pages
    }

    /// Leaf pages of a few parents spread over the level, sorted: a sample of the table's
    /// leaves (not every leaf; possibly none when those parents are damaged).
    pub fn sample(&self) -> &[u32] {
        &self.sample
    }

    /// Sets the fewest parents per executor for [`LeafParents::shares`] to split by parents
    /// (default [`MIN_PARENTS_PER_SHARE`]; at least 1): tests lower it to run the executors'
    /// walk on small tables.
    pub fn set_min_parents_per_share(&mut self, n: usize) {
        self.min_per_share = n.max(1);
    }

    /// Reads every parent on the calling thread: the table's leaves in key order.
    pub fn read_all(&self) -> Result<Vec<u32>> {
        self.share(0, 0..self.pages.len(), true, self.walk())
            .children()
    }

    /// Cuts the level into one share per weight, or, when there are fewer than the minimum
    /// parents per share, reads it and cuts the leaves (see [`crate::TablePlan::shares`]).
    pub(crate) fn shares(&self, weights: &[u32], key_order: bool) -> Result<Vec<Share>> {
        let takers = weights.iter().filter(|&&w| w > 0).count().max(1);
        if self.pages.len() < self.min_per_share.saturating_mul(takers) {
            let mut leaves = self.read_all()?;
            if !key_order {
                leaves.sort_unstable();
            }
            return Ok(split_leaves(&leaves, weights)
                .into_iter()
                .map(Share::Leaves)
                .collect());
        }
        let walk = self.walk();
        let mut start = 0;
        Ok(proportional_shares(self.pages.len() as u64, weights)
            .into_iter()
            .enumerate()
            .map(|(index, n)| {
                let range = start..start + n as usize;
                start = range.end;
                Share::Parents(self.share(index, range, key_order, walk.clone()))
            })
            .collect())
    }

    /// A fresh two-parents check for one scan: the pages listed above the leaves.
    fn walk(&self) -> Arc<SharedWalk> {
        Arc::new(SharedWalk {
            file: self.file.clone(),
            seen: AtomicPageSet::from_set(&self.seen),
            depth: self.depth,
            sampled: self.sampled.clone(),
        })
    }

    fn share(
        &self,
        index: usize,
        range: Range<usize>,
        key_order: bool,
        walk: Arc<SharedWalk>,
    ) -> ParentShare {
        ParentShare {
            index,
            pages: self.pages.clone(),
            range,
            key_order,
            walk,
        }
    }
}

/// What the shares of one scan have in common: the file and the pages claimed so far.
#[derive(Debug)]
struct SharedWalk {
    file: Arc<PageFile>,
    seen: AtomicPageSet,
    depth: u32,
    /// The parents planning read (see [`LeafParents::new`]).
    sampled: Arc<[u32]>,
}

/// One executor's part of a scan, as [`crate::TablePlan::shares`] cuts it.
#[derive(Debug, Clone)]
pub enum Share {
    /// Leaves listed by the plan.
    Leaves(LeafRange),
    /// A run of the leaf-parent level, to be read by the executor ([`ParentShare::read`]).
    Parents(ParentShare),
}

impl Share {
    /// The leaves of this share: listed, or read from its parents on the calling thread.
    pub fn leaves(self) -> Result<LeafRange> {
        match self {
            Share::Leaves(range) => Ok(range),
            Share::Parents(share) => share.read(),
        }
    }
}

/// A contiguous run of a table's leaf-parent level (in key order), for one executor.
#[derive(Debug, Clone)]
pub struct ParentShare {
    index: usize,
    pages: Arc<[u32]>,
    range: Range<usize>,
    key_order: bool,
    walk: Arc<SharedWalk>,
}

impl ParentShare {
    /// The parents of this share, left to right.
    pub fn parents(&self) -> &[u32] {
        &self.pages[self.range.clone()]
    }

    /// Reads the share's parents on the calling thread and returns their leaves as the
    /// [`LeafRange`] the plan's split would give: extents in page order, or, for a split in
    /// key order, runs consecutive both in the file and in key order, listed in key order.
    /// Fails naming the file and page when a parent is not an interior table page or a child
    /// pointer is unusable or already in the tree (claimed by this or another share).
    pub fn read(&self) -> Result<LeafRange> {
        let mut leaves = self.children()?;
        if !self.key_order {
            leaves.sort_unstable();
        }
        Ok(LeafRange {
            index: self.index,
            extents: extents_of(&leaves),
        })
    }

    /// The share's leaves in key order.
    fn children(&self) -> Result<Vec<u32>> {
        let (file, parents) = (&self.walk.file, self.parents());
        // As the full walk does: the run asked for at once unless it is cached already, as
        // its last page is (not one of those planning read, which are cached either way).
        let probe = parents
            .iter()
            .rev()
            .find(|p| !self.walk.sampled.contains(p));
        if probe.is_some_and(|&p| file.is_cached(p) != Some(true)) {
            file.will_need(parents);
        }
        let mut buf = file.page_buffer();
        let mut leaves = Vec::new();
        for (k, &page) in parents.iter().enumerate() {
            read_parent(
                file,
                page,
                self.walk.depth,
                &mut buf,
                &self.walk.seen,
                &mut leaves,
            )?;
            if k == 0 {
                // About as many children per parent as the first has (they are filled alike),
                // never more than the file has pages (a damaged first parent must not size it).
                let pages = file.header().page_count as usize;
                leaves.reserve((leaves.len() * (parents.len() - 1)).min(pages));
            }
        }
        Ok(leaves)
    }
}
