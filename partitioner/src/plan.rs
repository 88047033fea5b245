//! [`TablePlan`]: everything the engine needs to scan one table of one file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::affinity::Affinity;
use crate::btree::{table_page_header, walk_table, LeafCheck, PageSet};
use crate::cell::{follow_overflow_chain, TableLeafCell};
use crate::create_table::{CreateTable, Generated};
use crate::default_value::DefaultValue;
use crate::error::Result;
use crate::header::DbHeader;
use crate::pager::{FileSnapshot, PageFile};
use crate::partition::{extents_of, split_leaves, Extent, LeafRange};
use crate::schema::{find_table, read_schema, TableSchema};
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
    /// Every leaf page of the table, sorted by page number.
    pub leaves: Vec<u32>,
    /// Every leaf page of the table in b-tree (rowid) order when that differs from
    /// [`TablePlan::leaves`] (see [`TablePlan::leaves_in_key_order`]); `None` when the walk met
    /// the leaves in page order, so that a large table's list is not held twice.
    key_order: Option<Vec<u32>>,
    /// Every interior page of the table, sorted by page number.
    pub interior_pages: Vec<u32>,
    /// The leaves grouped into runs of consecutive pages, in file order.
    pub extents: Vec<Extent>,
    /// The parsed `CREATE TABLE` statement (column storage details).
    pub definition: CreateTable,
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

impl TablePlan {
    /// Opens `path` read-only, validates it and walks table `table` (case-insensitive).
    ///
    /// Reads the header, the schema and the table's interior pages, not its leaves (see
    /// [`crate::btree`]); [`TablePlan::census`] reads those.
    pub fn open(path: &Path, table: &str) -> Result<Self> {
        let file = PageFile::open(path)?;
        let entries = read_schema(&file)?;
        let schema = find_table(&file, &entries, table)?;
        let definition = schema.definition().map_err(|w| file.invalid(w))?;
        let tree = walk_table(&file, schema.root_page, LeafCheck::First)?;
        // The walk lists the leaves left to right; a table loaded in key order has them in
        // page order already (the leaves are distinct: the walk refuses a page met twice).
        let (leaves, key_order) = if tree.leaves.windows(2).all(|w| w[0] < w[1]) {
            (tree.leaves, None)
        } else {
            let mut by_page = tree.leaves.clone();
            by_page.sort_unstable();
            (by_page, Some(tree.leaves))
        };
        let mut interior_pages = tree.interior_pages;
        interior_pages.sort_unstable();
        Ok(Self {
            path: path.to_path_buf(),
            header: file.header().clone(),
            table: schema,
            extents: extents_of(&leaves),
            leaves,
            key_order,
            interior_pages,
            definition,
            depth: tree.depth,
            wal: file.wal().cloned(),
            wal_ignored: file.wal_ignored().map(str::to_string),
            snapshot: file.snapshot(),
            read: file.read_snapshot().clone(),
        })
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
    /// no ranges.
    pub fn split(&self, weights: &[u32]) -> Vec<LeafRange> {
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
    /// fragmented): then file order is rowid order.
    pub fn leaves_in_file_order(&self) -> bool {
        self.key_order.is_none()
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
    /// chain lengths; the file is opened again and must not have changed since planning.
    pub fn census(&self) -> Result<PageCensus> {
        let file = PageFile::open_in(&DbFiles::resolve(&self.path)?, self.read.clone())?;
        self.check_same_as(&file)?;
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
