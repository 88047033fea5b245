//! # partitioner: what to read, and who reads it
//!
//! `partitioner` reads a SQLite-format database file itself (never through SQLite) and decides
//! which pages each executor scans:
//!
//! - [`sidecar`] resolves the database path as SQLite's unix VFS does (symbolic links
//!   followed) and names the `-wal` and `-journal` files beside the result;
//! - [`snapshot`] holds one committed state of a live database as a SQLite reader does:
//!   the database's `SHARED` lock, and in WAL mode a read lock on a `-shm` read mark
//!   ([`lock`] has the open-file-description locks, [`shm`] reads the wal-index, read-only);
//!   where that cannot be done, the files are compared after the scan;
//! - [`pager::PageFile`] opens the file read-only within such a snapshot, refuses a hot
//!   `-journal` (an interrupted write), and reads pages with bounds-checked `pread`, each from its latest committed copy:
//!   the `-wal` log's frame when [`wal::WalIndex`] (the log's frame map, built as SQLite's
//!   recovery does: valid salts and cumulative checksums, frames up to the last commit) has
//!   one, else the file;
//! - [`header::DbHeader`] validates the 100-byte header (magic, page size, reserved bytes, page
//!   count against the file size, UTF-8 text encoding) and knows which pages can never belong
//!   to a b-tree (the lock-byte page, pointer-map pages);
//! - [`schema`] reads `sqlite_schema` and finds a table's root page; [`create_table`] parses its
//!   `CREATE TABLE` text into columns ([`schema::TableSchema`]), with each column's `DEFAULT`
//!   clause;
//! - [`affinity::Affinity`] is a column's type affinity, and [`DefaultValue`] what SQLite reads
//!   for a column a record does not reach (rows written before `ALTER TABLE ... ADD COLUMN`),
//!   converted by that affinity with SQLite's own text-to-number rules (ported in `numeric_text.rs`);
//! - [`btree`] walks the table's interior pages and lists every leaf page, refusing cycles,
//!   out-of-range page numbers and wrong page types;
//! - [`cell`] parses table-leaf cells and follows overflow chains with length and cycle checks;
//! - [`plan::TablePlan`] holds the sorted leaf list grouped into [`partition::Extent`]s and cuts
//!   it into contiguous [`partition::LeafRange`]s, one per executor, weighted by the topology;
//!   its [`census`](plan::TablePlan::census) reads every leaf and counts overflow pages;
//! - [`sources`] expands what a user names as a table's files (paths, globs, `@list` files)
//!   into the listed paths of a table spread over several files;
//! - [`format`](mod@format) holds the format primitives (varints, serial types, page headers, the
//!   local-payload rule) that the engine's record decoder shares.
//!
//! Nothing here writes to any file (the locks are read locks), and nothing panics on a malformed one: every error is an
//! [`Error`] that names the file and, where one is at fault, the page.
#![deny(missing_docs)]

pub mod affinity;
pub mod btree;
pub mod cell;
pub mod create_table;
pub mod default_value;
pub mod error;
pub mod format;
pub mod header;
pub mod index;
pub mod leaf_parents;
pub mod lock;
pub mod numeric_text;
pub mod pager;
pub mod partition;
pub mod plan;
pub mod schema;
pub mod shm;
pub mod sidecar;
pub mod snapshot;
pub mod sources;
pub mod topology;
pub mod wal;

pub use affinity::Affinity;
pub use default_value::DefaultValue;
pub use error::{printable, Error, Result};
pub use header::DbHeader;
pub use leaf_parents::{ParentShare, Share};
pub use pager::{FileSnapshot, PageFile};
pub use partition::{Extent, LeafRange};
pub use plan::{table_definition, ColumnSource, PageCensus, TablePlan};
pub use schema::{PlannerStats, SchemaEntry, StoredValue, TableSchema};
pub use snapshot::{Protocol, ReadSnapshot};
pub use wal::{PageLocation, WalIndex};
