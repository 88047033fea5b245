//! [`TablePlan`]: everything the engine needs to scan one table of one file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::affinity::Affinity;
use crate::btree::{
    table_page_header, walk_rowid_ranges, walk_table, walk_upper, LeafCheck, PageSet, TableTree,
    Walk,
};
use crate::cell::{follow_overflow_chain, TableLeafCell};
use crate::create_table::{CreateTable, Generated};
use crate::default_value::DefaultValue;
use crate::error::Result;
use crate::header::DbHeader;
use crate::leaf_parents::{LeafParents, Share};
use crate::pager::{FileSnapshot, PageFile};
use crate::partition::{extents_of, split_leaves, Extent, LeafRange};
use crate::schema::{
    find_table, read_planner_stats, read_schema, table_indexes, PlannerStats, SchemaEntry,
    TableSchema,
};
use crate::sidecar::DbFiles;
use crate::snapshot::ReadSnapshot;
use crate::wal::{PageLocation, WalIndex};

/// A table's layout in a database file: header facts, schema, and leaf pages in file order.
#[derive(Debug, Clone)]
pub struct TablePlan {
    /// The database file.
    pub path: PathBuf,
    /// Its validated header.
    pub header: DbHeader,
    /// The table's schema entry.
    pub table: TableSchema,
    /// Every leaf page of the table, sorted by page number; empty when the plan left the
    /// leaf-parent level to the scan ([`TablePlan::leaf_parents`]).
    pub leaves: Vec<u32>,
    /// Every leaf page of the table in b-tree (rowid) order when that differs from
    /// [`TablePlan::leaves`] (see [`TablePlan::leaves_in_key_order`]); `None` when the walk met
    /// the leaves in page order, so that a large table's list is not held twice.
    key_order: Option<Vec<u32>>,
    /// Every interior page of the table, sorted by page number (without the leaf-parent
    /// level when the plan left it to the scan).
    pub interior_pages: Vec<u32>,
    /// The leaves grouped into runs of consecutive pages, in file order (empty when the plan
    /// left the leaf-parent level to the scan).
    pub extents: Vec<Extent>,
    /// The leaf-parent level, listed and not read, of a plan from
    /// [`TablePlan::open_for_scan`] of a table of three or more levels: the scan's
    /// executors read it ([`TablePlan::shares`]). `None` when the leaves are listed.
    pub leaf_parents: Option<LeafParents>,
    /// The parsed `CREATE TABLE` statement (column storage details).
    pub definition: CreateTable,
    /// The table's indexes as `sqlite_schema` lists them (`CREATE INDEX` statements and the
    /// automatic indexes behind `UNIQUE` and `PRIMARY KEY`), in schema order: with
    /// [`TablePlan::stats`], what SQLite's planner chooses among.
    pub indexes: Vec<SchemaEntry>,
    /// What `ANALYZE` recorded about the table (read only when it has indexes).
    pub stats: PlannerStats,
    /// Levels in the table's b-tree (1 when the root is a leaf).
    pub depth: u32,
    /// The write-ahead log's frame map when the log holds committed frames: pages it has are
    /// read from the log (see [`TablePlan::location`]), and [`DbHeader::page_count`] is the
    /// size its last commit records.
    pub wal: Option<WalIndex>,
    /// Why a non-empty write-ahead log beside the file was ignored, if one was (SQLite finds
    /// no committed frame in it: a bad header, or no commit frame).
    pub wal_ignored: Option<String>,
    /// The file and log as planned; [`TablePlan::check_unchanged`] compares against it.
    pub snapshot: FileSnapshot,
    /// The committed state the plan (and a scan of it) reads, with the locks that keep it
    /// ([`crate::snapshot`]): released when the last clone of the plan is dropped.
    pub read: Arc<ReadSnapshot>,
    /// When the plan is of one of the table's indexes in place of the table
    /// ([`TablePlan::index_scan`]): the leaves are that index's, and this places its
    /// entries. `None` for a plan of the table.
    pub index_scan: Option<Arc<IndexScan>>,
}

/// A plan's scan of an index's entries in key order in place of the table's rows (SQLite's
/// `SCAN t USING COVERING INDEX i`): the leaves are the index's, each decoded into its entries
/// (records of the key columns then the rowid); the entries of its interior pages, which no
/// leaf holds, come after the leaf they follow in key order ([`IndexScan::after`]). Each entry
/// is numbered by its place in the index ([`IndexScan::place`]), which a scan uses as the
/// rows' key where it would use the rowid: rows then come, merge and tie in the index's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexScan {
    /// The index's name as the schema spells it.
    pub name: String,
    /// Its `CREATE INDEX` statement (`None` for an automatic index): a plan made again after
    /// the file changed must find the same index.
    pub sql: Option<String>,
    /// The fields of each entry (the index's columns and the rowid).
    pub fields: usize,
    /// Each leaf's position in key order, by page number.
    ordinals: HashMap<u32, u32>,
    /// The interior pages' entries after each leaf, by the leaf's page number, whole records.
    between: HashMap<u32, Vec<Vec<u8>>>,
}

impl IndexScan {
    /// Entry places per leaf: a leaf's cell `i` is place `(ordinal << 17) + i`, the interior
    /// entries after it `(ordinal << 17) + 65536 + j` (a page holds fewer than 65,536 cells).
    pub const PLACES_PER_LEAF: i64 = 1 << 17;

    /// The place of the first interior entry after a leaf, counted from the leaf's first
    /// cell's.
    pub const AFTER_CELLS: i64 = 1 << 16;

    /// The place of leaf `page`'s first cell, when `page` is a leaf of the index.
    pub fn place(&self, page: u32) -> Option<i64> {
        self.ordinals
            .get(&page)
            .map(|&o| i64::from(o) * Self::PLACES_PER_LEAF)
    }

    /// The rowid of the entry at `place` (one of leaf `page`'s, whose bytes are `bytes`, or an
    /// interior entry after them), for messages: `None` when it is not on the page.
    pub fn rowid_at(&self, page: u32, bytes: &[u8], usable: u32, place: i64) -> Option<i64> {
        let offset = place.checked_sub(self.place(page)?)?;
        if offset < Self::AFTER_CELLS {
            crate::index::leaf_entry_rowid(bytes, usable, usize::try_from(offset).ok()?)
        } else {
            let j = usize::try_from(offset - Self::AFTER_CELLS).ok()?;
            crate::index::entry_rowid(self.after(page).get(j)?)
        }
    }

    /// The entries of the interior pages that come after leaf `page`'s, in key order.
    pub fn after(&self, page: u32) -> &[Vec<u8>] {
        self.between.get(&page).map_or(&[], Vec::as_slice)
    }
}

/// Where a column's value comes from when a row is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnSource {
    /// The value at this 0-based position of the record.
    Record(usize),
    /// The cell's rowid: the column is an `INTEGER PRIMARY KEY` (its record slot holds NULL).
    Rowid,
}

/// Page and row counts from reading every leaf page of a table and following its overflow
/// chains (see [`TablePlan::census`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageCensus {
    /// Leaf pages read.
    pub leaf_pages: u64,
    /// Interior pages of the table's b-tree.
    pub interior_pages: u64,
    /// Overflow pages holding the tails of payloads too large for their leaf.
    pub overflow_pages: u64,
    /// Rows (table-leaf cells).
    pub rows: u64,
    /// Rows whose payload spills onto overflow pages.
    pub rows_with_overflow: u64,
    /// Total record bytes, local and spilled.
    pub payload_bytes: u64,
    /// The largest record, in bytes.
    pub max_payload: u64,
}

/// The definition (columns, types, defaults) of `table` in the database file `path`, read
/// from its schema without walking the table's b-tree: for a table spread over several files,
/// whose columns are matched by name.
pub fn table_definition(path: &Path, table: &str) -> Result<CreateTable> {
    let file = PageFile::open(path)?;
    let entries = read_schema(&file)?;
    let schema = find_table(&file, &entries, table)?;
    schema.definition().map_err(|w| file.invalid(w))
}

impl TablePlan {
    /// Opens `path` read-only, validates it and walks table `table` (case-insensitive).
    ///
    /// Reads the header, the schema and the table's interior pages, not its leaves (see
    /// [`crate::btree`]); [`TablePlan::census`] reads those.
    pub fn open(path: &Path, table: &str) -> Result<Self> {
        Self::open_walking(path, table, false)
    }

    /// Opens `path` as [`TablePlan::open`] does, for a scan: on a table of three or more
    /// levels the plan reads the levels above the leaf-parent level only (a dozen pages for
    /// SF 10's `lineitem`, against 5,520) and leaves the leaf-parent level to the scan's
    /// executors, each reading its share on its own CPU ([`TablePlan::shares`]). Its
    /// [`TablePlan::leaves`] and [`TablePlan::extents`] are then empty: split it with
    /// [`TablePlan::shares`] only.
    pub fn open_for_scan(path: &Path, table: &str) -> Result<Self> {
        Self::open_walking(path, table, true)
    }

    /// [`TablePlan::open_for_scan`] of a file already open (its snapshot held, its log's
    /// frames mapped): tables planned from one [`PageFile`] are read in one committed state,
    /// as the tables of one SQLite query are, whatever a live writer commits meanwhile.
    pub fn open_for_scan_from(file: &PageFile, table: &str) -> Result<Self> {
        Self::walking(file.path(), file.try_clone()?, table, true)
    }

    fn open_walking(path: &Path, table: &str, defer: bool) -> Result<Self> {
        Self::walking(path, PageFile::open(path)?, table, defer)
    }

    fn walking(path: &Path, file: PageFile, table: &str, defer: bool) -> Result<Self> {
        let entries = read_schema(&file)?;
        let schema = find_table(&file, &entries, table)?;
        let definition = schema.definition().map_err(|w| file.invalid(w))?;
        let indexes = table_indexes(&entries, &schema.name);
        let stats = if indexes.is_empty() {
            PlannerStats::default()
        } else {
            read_planner_stats(&file, &entries, &schema.name)?
        };
        let walk = if defer {
            walk_upper(&file, schema.root_page)?
        } else {
            Walk::Whole(walk_table(&file, schema.root_page, LeafCheck::First)?)
        };
        let mut plan = Self {
            path: path.to_path_buf(),
            header: file.header().clone(),
            table: schema,
            leaves: Vec::new(),
            key_order: None,
            interior_pages: Vec::new(),
            extents: Vec::new(),
            leaf_parents: None,
            definition,
            indexes,
            stats,
            depth: 0,
            wal: file.wal().cloned(),
            wal_ignored: file.wal_ignored().map(str::to_string),
            snapshot: file.snapshot(),
            read: file.read_snapshot().clone(),
            index_scan: None,
        };
        match walk {
            Walk::Whole(tree) => plan.set_tree(tree),
            Walk::Upper(upper) => {
                plan.interior_pages = upper.interior_pages;
                plan.interior_pages.sort_unstable();
                plan.depth = upper.depth;
                plan.leaf_parents = Some(LeafParents::new(
                    Arc::new(file),
                    upper.parents,
                    upper.depth - 1,
                    upper.seen,
                ));
            }
        }
        Ok(plan)
    }

    fn set_tree(&mut self, tree: TableTree) {
        // The walk lists the leaves left to right; a table loaded in key order has them in
        // page order already (the leaves are distinct: the walk refuses a page met twice).
        let (leaves, key_order) = if tree.leaves.windows(2).all(|w| w[0] < w[1]) {
            (tree.leaves, None)
        } else {
            let mut by_page = tree.leaves.clone();
            by_page.sort_unstable();
            (by_page, Some(tree.leaves))
        };
        self.interior_pages = tree.interior_pages;
        self.interior_pages.sort_unstable();
        self.extents = extents_of(&leaves);
        self.leaves = leaves;
        self.key_order = key_order;
        self.depth = tree.depth;
    }

    /// How many leaf pages the plan lists, when it lists them all; `None` when it left the
    /// leaf-parent level to the scan ([`TablePlan::leaf_parents`]: a table of three or more
    /// levels, so many leaves).
    pub fn listed_leaves(&self) -> Option<usize> {
        self.leaf_parents.is_none().then_some(self.leaves.len())
    }

    /// This plan restricted to the leaves that can hold a rowid in `lo..=hi`, found by walking
    /// only the subtrees whose keys admit the range (see [`crate::btree::walk_rowids`]), in
    /// the plan's snapshot: what SQLite's planner reads for `WHERE rowid BETWEEN lo AND hi`
    /// instead of the whole table. Rows outside the range may remain on the leaves kept (a
    /// leaf's rows are not split); a scan still filters every row. No leaf when `lo > hi`.
    pub fn restrict_to_rowids(&self, lo: i64, hi: i64) -> Result<Self> {
        self.restrict_to_rowid_ranges(&[(lo, hi)])
    }

    /// [`TablePlan::restrict_to_rowids`] for several inclusive ranges, ascending and disjoint
    /// (`WHERE rowid IN (3, 70, 9000)`: three root-to-leaf paths), each page read once. No
    /// leaf when `ranges` is empty or its only range is empty.
    pub fn restrict_to_rowid_ranges(&self, ranges: &[(i64, i64)]) -> Result<Self> {
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
        let mut plan = self.clone();
        plan.leaf_parents = None;
        let ranges: Vec<(i64, i64)> = ranges.iter().copied().filter(|(l, h)| l <= h).collect();
        let tree = if ranges.is_empty() {
            // No rowid can match: nothing to walk.
            TableTree {
                root_page: self.table.root_page,
                leaves: Vec::new(),
                interior_pages: Vec::new(),
                depth: self.depth,
            }
        } else {
            walk_rowid_ranges(&file, self.table.root_page, &ranges)?
        };
        plan.set_tree(tree);
        Ok(plan)
    }

    /// The rowids of the first `n` entries after the first `skip` of the index b-tree rooted
    /// at `root` (one of [`TablePlan::indexes`]), in key order or, when `backward`, from the
    /// last entry down, in the plan's snapshot: the rows SQLite's loop over that index gives
    /// first, past an `OFFSET` of `skip` (entries passed over are counted, not read). `fields` is
    /// the number of fields of an entry (the index's columns and the rowid). A damaged index
    /// is an error naming the page (see [`crate::index`]).
    pub fn index_rowids(
        &self,
        root: u32,
        fields: usize,
        backward: bool,
        skip: u64,
        n: usize,
    ) -> Result<Vec<i64>> {
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
        crate::index::index_rowids(&file, root, fields, backward, skip, n)
    }

    /// The rowids of the `n` rows after the first `skip` of the table, in rowid order or, when
    /// `backward`, from the last row down, in the plan's snapshot: the rows SQLite's loop over
    /// the table returns for `LIMIT n OFFSET skip` (the rows passed over are counted from the
    /// leaves' cell counts, not read; see [`crate::btree::table_rowids`]).
    pub fn table_rowids(&self, backward: bool, skip: u64, n: usize) -> Result<Vec<i64>> {
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
        crate::btree::table_rowids(&file, self.table.root_page, backward, skip, n)
    }

    /// This table's index `name` (case-insensitive) planned for a scan of its entries in
    /// place of the table's rows, in the plan's snapshot ([`IndexScan`]): its leaves in key
    /// order as the plan's leaves (split and read as a fragmented table's are), its interior
    /// pages read and checked here ([`crate::index::index_tree`]), no leaf-parent level left to
    /// the scan; `fields` is the number of fields of each entry (the index's columns and the
    /// rowid: SQLite's `PRAGMA index_xinfo` rows). With `place`, only the leaves and interior
    /// entries a range of the first key column can need (see [`crate::index::index_tree`]).
    /// Fails naming the index when the table has none of that name.
    pub fn index_scan(
        &self,
        name: &str,
        fields: usize,
        place: Option<&dyn Fn(crate::index::KeyField<'_>) -> crate::index::Place>,
    ) -> Result<Self> {
        let Some(entry) = self
            .indexes
            .iter()
            .find(|e| e.name.eq_ignore_ascii_case(name))
        else {
            return Err(crate::Error::Invalid {
                path: self.path.clone(),
                what: format!("table {:?} has no index {name:?}", self.table.name),
            });
        };
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
        let tree = crate::index::index_tree(&file, entry.root_page, fields, place)?;
        let ordinals = tree
            .leaves
            .iter()
            .enumerate()
            .map(|(i, &leaf)| (leaf, i as u32))
            .collect();
        let mut between: HashMap<u32, Vec<Vec<u8>>> = HashMap::new();
        for (after, record) in tree.between {
            between.entry(tree.leaves[after]).or_default().push(record);
        }
        let mut plan = self.clone();
        plan.leaf_parents = None;
        plan.set_tree(TableTree {
            root_page: entry.root_page,
            leaves: tree.leaves,
            interior_pages: tree.interior_pages,
            depth: tree.depth,
        });
        plan.index_scan = Some(Arc::new(IndexScan {
            name: entry.name.clone(),
            sql: entry.sql.clone(),
            fields,
            ordinals,
            between,
        }));
        Ok(plan)
    }

    /// The rowids of the entries of the first `runs` runs of equal first fields (by `same`)
    /// of the index b-tree rooted at `root`, at most `max` of them, and how many runs they
    /// are (see [`crate::index::index_first_runs`]).
    pub fn index_first_runs(
        &self,
        root: u32,
        (fields, backward): (usize, bool),
        (runs, max): (u64, usize),
        same: &dyn Fn(crate::index::KeyField, crate::index::KeyField) -> bool,
    ) -> Result<Option<(Vec<i64>, u64)>> {
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
        crate::index::index_first_runs(&file, root, fields, backward, (runs, max), same)
    }

    /// The rowids of the first entries of the first `keys` distinct first fields of the
    /// index b-tree rooted at `root` in the plan's snapshot, under `order`, at most `max` of
    /// them, found by seeking past each (see [`crate::index::index_distinct_firsts`]).
    pub fn index_distinct_firsts(
        &self,
        root: u32,
        (fields, backward): (usize, bool),
        (keys, max): (u64, usize),
        order: &dyn Fn(crate::index::KeyField, crate::index::KeyField) -> std::cmp::Ordering,
    ) -> Result<Option<Vec<i64>>> {
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
        crate::index::index_distinct_firsts(&file, root, fields, backward, (keys, max), order)
    }

    /// The number of distinct first fields other than NULL of the index b-tree rooted at
    /// `root` in the plan's snapshot, under `order`, found by seeking past each (see
    /// [`crate::index::index_distinct_count`]).
    pub fn index_distinct_count(
        &self,
        root: u32,
        fields: usize,
        order: &dyn Fn(crate::index::KeyField, crate::index::KeyField) -> std::cmp::Ordering,
    ) -> Result<u64> {
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
        crate::index::index_distinct_count(&file, root, fields, order)
    }

    /// The number of entries of the index b-tree rooted at `root` (one of
    /// [`TablePlan::indexes`]) in the plan's snapshot, counted from its pages' cell counts
    /// as SQLite's `count(*)` counts an index (see [`crate::index::index_entries`]).
    pub fn index_entries(&self, root: u32) -> Result<u64> {
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
        crate::index::index_entries(&file, root)
    }

    /// The rowid of the first entry of the index b-tree rooted at `root` whose first field
    /// is not NULL, walking forwards or `backward` (see
    /// [`crate::index::index_first_not_null`]).
    pub fn index_first_not_null(
        &self,
        root: u32,
        fields: usize,
        backward: bool,
    ) -> Result<Option<i64>> {
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
        crate::index::index_first_not_null(&file, root, fields, backward)
    }

    /// The rowids of the entries of the index b-tree rooted at `root` whose first field
    /// `place` puts inside a range, in key order; `None` when more than `max` are (see
    /// [`crate::index::index_range_rowids`]).
    pub fn index_range_rowids(
        &self,
        root: u32,
        fields: usize,
        place: &dyn Fn(crate::index::KeyField) -> crate::index::Place,
        max: usize,
    ) -> Result<Option<Vec<i64>>> {
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
        crate::index::index_range_rowids(&file, root, fields, place, max)
    }

    /// The number of entries of the index b-tree rooted at `root` whose first field `place`
    /// puts inside a range, in the plan's snapshot (see [`crate::index::index_range_count`]).
    pub fn index_range_count(
        &self,
        root: u32,
        fields: usize,
        place: &dyn Fn(crate::index::KeyField) -> crate::index::Place,
    ) -> Result<u64> {
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
        crate::index::index_range_count(&file, root, fields, place)
    }

    /// Cuts the table into one share per weight for a scan, as [`TablePlan::split`] (or, with
    /// `key_order`, [`TablePlan::split_in_key_order`]) cuts the leaves. A plan whose
    /// leaf-parent level is left to the scan ([`TablePlan::leaf_parents`]) is cut into
    /// contiguous runs of that level in key order, sized by the weights, which the executors
    /// read ([`Share::leaves`]); with fewer than
    /// [`crate::leaf_parents::MIN_PARENTS_PER_SHARE`] parents per executor the level is read
    /// here and the leaves are cut. Fails only when reading the level here fails.
    pub fn shares(&self, weights: &[u32], key_order: bool) -> Result<Vec<Share>> {
        match &self.leaf_parents {
            Some(parents) => parents.shares(weights, key_order),
            None => {
                let ranges = if key_order {
                    self.split_in_key_order(weights)
                } else {
                    self.split(weights)
                };
                Ok(ranges.into_iter().map(Share::Leaves).collect())
            }
        }
    }

    /// Leaf pages to sample for page-cache residency: every leaf, or, when the plan left the
    /// leaf-parent level to the scan, the leaves of a few parents spread over it.
    pub fn leaf_sample(&self) -> &[u32] {
        match &self.leaf_parents {
            Some(parents) => parents.sample(),
            None => &self.leaves,
        }
    }

    /// Where the latest committed copy of `page` lies: its frame in the write-ahead log when
    /// the log has one, else its place in the database file. Pages of [`TablePlan::extents`]
    /// are consecutive in the file, not necessarily in the log: a reader substitutes the log's
    /// copies page by page.
    pub fn location(&self, page: u32) -> PageLocation {
        match &self.wal {
            Some(wal) => wal.location(page),
            None => PageLocation::Main(self.header.page_offset(page)),
        }
    }

    /// Fails with [`crate::Error::Changed`] naming the file when the snapshot is held without
    /// locks ([`crate::snapshot::Protocol::VerifyRetry`]) and the file or its write-ahead log
    /// changed since planning (a transaction committed, a checkpoint ran, the file was
    /// replaced): pages read before and after such a change may belong to different versions.
    /// Reopens both files and rereads the log. Under SQLite's locks nothing a scan reads can
    /// change, and this returns `Ok` at once.
    pub fn check_unchanged(&self) -> Result<()> {
        if !self.read.needs_verification() {
            return Ok(());
        }
        let now = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&now)
    }

    fn check_same_as(&self, now: &PageFile) -> Result<()> {
        if !self.read.needs_verification() {
            return Ok(());
        }
        let changed = |what: &str| crate::Error::Changed {
            path: self.path.clone(),
            what: format!("the file changed since the table was planned: {what}"),
        };
        match self.snapshot.difference(&now.snapshot()) {
            Some(what) => Err(changed(&what)),
            None if now.header() != &self.header => Err(changed("its header differs")),
            None => Ok(()),
        }
    }

    /// Cuts the leaves into `weights.len()` contiguous ranges whose page counts are proportional
    /// to the weights (equal weights: counts differ by at most one).
    ///
    /// Rounding is by largest remainder (see [`crate::partition::proportional_shares`]): a zero
    /// weight gets an empty range, all-zero weights count as equal, and an empty slice yields
    /// no ranges. A plan whose leaf-parent level is left to the scan has no leaves listed:
    /// cut it with [`TablePlan::shares`].
    pub fn split(&self, weights: &[u32]) -> Vec<LeafRange> {
        debug_assert!(
            self.leaf_parents.is_none(),
            "split of a plan without its leaves"
        );
        split_leaves(&self.leaves, weights)
    }

    /// Cuts the leaves in b-tree order ([`TablePlan::leaves_in_key_order`]) into
    /// `weights.len()` contiguous ranges of that order, sized as [`TablePlan::split`] sizes
    /// them: range `i` holds only rowids below those of range `i + 1`, and each range's
    /// extents are its runs of pages consecutive both in the file and in key order, listed in
    /// key order. Reading and decoding a range's extents in the order given, and the ranges
    /// one after the other, yields the rows in rowid order, as SQLite's full scan does, on any
    /// table. On an unfragmented table this is the same split as [`TablePlan::split`]; on a
    /// fragmented one the extents are shorter (less coalesced I/O).
    pub fn split_in_key_order(&self, weights: &[u32]) -> Vec<LeafRange> {
        debug_assert!(
            self.leaf_parents.is_none(),
            "split of a plan without its leaves"
        );
        split_leaves(self.leaves_in_key_order(), weights)
    }

    /// Every leaf page of the table in b-tree (rowid) order, as the walk met them left to
    /// right: the order of SQLite's full scan. It differs from [`TablePlan::leaves`] when the
    /// table is fragmented (leaves allocated out of key order, by interleaved inserts into
    /// several tables or by page reuse after deletes).
    pub fn leaves_in_key_order(&self) -> &[u32] {
        self.key_order.as_deref().unwrap_or(&self.leaves)
    }

    /// Whether the leaves in b-tree order are in page-number order (the table is not
    /// fragmented): then file order is rowid order. `false` for a plan that left its
    /// leaf-parent level to the scan: its leaves' order is not known yet.
    pub fn leaves_in_file_order(&self) -> bool {
        self.key_order.is_none() && self.leaf_parents.is_none()
    }

    /// The declaration index of column `name` (ASCII case-insensitive), or an
    /// [`crate::Error::Invalid`] listing the table's columns.
    /// The declaration-order index of column `name` (ASCII case-insensitive) in
    /// [`TablePlan::definition`]; fails naming the table and its columns when there is none.
    pub fn column_index(&self, name: &str) -> Result<usize> {
        self.definition
            .columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                self.invalid(format!(
                    "table {:?} has no column {name:?} (columns: {})",
                    self.table.name,
                    self.table.columns.join(", ")
                ))
            })
    }

    /// Where column `name` (ASCII case-insensitive) is found when a row is decoded.
    pub fn column_source(&self, name: &str) -> Result<ColumnSource> {
        let table = &self.table.name;
        let index = self.column_index(name)?;
        if self
            .definition
            .columns
            .get(index)
            .is_some_and(|c| c.rowid_alias)
        {
            return Ok(ColumnSource::Rowid);
        }
        self.definition
            .record_position(index)
            .map(ColumnSource::Record)
            .ok_or_else(|| {
                self.invalid(format!(
                    "column {name:?} of table {table:?} is a VIRTUAL generated column, computed \
                     on read and not stored in the file"
                ))
            })
    }

    /// The record position of column `name` (ASCII case-insensitive). Fails with
    /// [`crate::Error::Invalid`] naming the file, the table, the column and the table's
    /// columns when there is no such column, and when the column is not stored in the record
    /// (a rowid alias or a `VIRTUAL` generated column; see [`TablePlan::column_source`]).
    pub fn column(&self, name: &str) -> Result<usize> {
        match self.column_source(name)? {
            ColumnSource::Record(position) => Ok(position),
            ColumnSource::Rowid => Err(self.invalid(format!(
                "column {name:?} of table {:?} is its INTEGER PRIMARY KEY, an alias of the \
                 rowid, and not stored in the record",
                self.table.name
            ))),
        }
    }

    /// The value SQLite reads for column `name` (ASCII case-insensitive) from a record that
    /// ends before the column's field: rows written before `ALTER TABLE ... ADD COLUMN` added
    /// it keep their shorter records. That is NULL when the column has no `DEFAULT`, else the
    /// default literal converted by the column's [`Affinity`] (see [`DefaultValue`]): on a
    /// `DECIMAL(15,2)` column `DEFAULT '0.06'` reads as the real 0.06 and `DEFAULT 901.0` as
    /// the integer 901; on a `REAL` column `DEFAULT 5` reads as the real 5.0. (A rowid alias
    /// reads the rowid, never its default; see [`TablePlan::column_source`].)
    ///
    /// Fails with [`crate::Error::Invalid`] naming the file, table and column when there is no
    /// such column, when it is a `VIRTUAL` generated column (computed, never stored), and when
    /// its `DEFAULT` is something only SQLite can evaluate (`CURRENT_TIMESTAMP`, a function
    /// call, ...). SQLite refuses those in `ADD COLUMN` on a non-empty table, so a decoder can
    /// hold on to the error and raise it only if a record actually lacks the column.
    pub fn column_default(&self, name: &str) -> Result<DefaultValue> {
        let column = &self.definition.columns[self.column_index(name)?];
        let what = format!("column {:?} of table {:?}", column.name, self.table.name);
        if column.generated == Some(Generated::Virtual) {
            return Err(self.invalid(format!(
                "{what} is a VIRTUAL generated column, computed on read; it has no default"
            )));
        }
        let affinity = Affinity::of_column(column, self.definition.strict);
        DefaultValue::of_clause(column.default.as_ref(), affinity)
            .map_err(|w| self.invalid(format!("{what}: {w}")))
    }

    /// Reads every leaf page and follows every overflow chain, checking page types, cells and
    /// chain lengths; the file is opened again and must not have changed since planning. A
    /// plan that left the leaf-parent level to the scan reads that level first.
    pub fn census(&self) -> Result<PageCensus> {
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
        if let Some(parents) = &self.leaf_parents {
            let mut whole = self.clone();
            let mut leaves = parents.read_all()?;
            whole.interior_pages.extend_from_slice(parents.pages());
            whole.interior_pages.sort_unstable();
            leaves.sort_unstable();
            whole.leaves = leaves;
            whole.leaf_parents = None;
            return whole.census();
        }
        let usable = file.header().usable_size();
        let mut seen = PageSet::new(file.header().page_count);
        for &p in self.leaves.iter().chain(&self.interior_pages) {
            seen.insert(p);
        }
        let (mut page, mut scratch) = (file.page_buffer(), Vec::new());
        let mut census = PageCensus {
            leaf_pages: self.leaves.len() as u64,
            interior_pages: self.interior_pages.len() as u64,
            ..PageCensus::default()
        };
        for &leaf in &self.leaves {
            file.read_page(leaf, &mut page)?;
            let header = table_page_header(&file, leaf, &page)?;
            if !header.is_table_leaf() {
                return Err(file.corrupt(
                    leaf,
                    format!(
                        "interior page (type 0x{:02x}) listed as a leaf: the b-tree's leaves \
                         are at different depths",
                        header.page_type
                    ),
                ));
            }
            let offset = crate::btree::btree_header_offset(leaf);
            for i in 0..usize::from(header.cell_count) {
                let at = header
                    .cell_offset(&page, offset, i, usable as usize)
                    .map_err(|w| file.corrupt(leaf, w))?;
                let cell = TableLeafCell::parse(&page, at, usable)
                    .map_err(|w| file.corrupt(leaf, format!("cell {i}: {w}")))?;
                let spilled =
                    follow_overflow_chain(&file, leaf, &cell, &mut seen, None, &mut scratch)?;
                census.rows += 1;
                census.overflow_pages += spilled;
                census.rows_with_overflow += u64::from(spilled > 0);
                census.payload_bytes += cell.payload_len;
                census.max_payload = census.max_payload.max(cell.payload_len);
            }
        }
        Ok(census)
    }

    fn invalid(&self, what: impl Into<String>) -> crate::Error {
        crate::Error::Invalid {
            path: self.path.clone(),
            what: what.into(),
        }
    }
}
