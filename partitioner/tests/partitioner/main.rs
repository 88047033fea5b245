//! Integration tests for `partitioner`, one module per topic. Every database is generated at
//! test time with SQLite (rusqlite, bundled) in a temporary directory, and SQLite's own `dbstat`
//! virtual table is the oracle for which pages belong to a table.

mod columns;
mod corrupt;
mod dbstat;
mod defaults;
mod fuzz;
mod index_walk;
mod leaf_parents;
mod locks;
mod ranges;
mod readonly;
mod rowid_seek;
mod schema;
mod symlinks;
mod topology;
mod wal;

use std::path::{Path, PathBuf};

use partitioner::TablePlan;
use rusqlite::{Connection, OpenFlags};
use testkit::Rng;

/// The partitioner tests' generator from `seed`: xorshift64* from the seed times the golden
/// gamma (so that neighbouring seeds start far apart), the stream their fixtures and the
/// fuzzers' replay seeds were made with.
pub fn rng_from(seed: u64) -> Rng {
    Rng::xorshift64_star(seed.wrapping_mul(testkit::GOLDEN_GAMMA) | 1)
}

/// How to lay out a generated database file.
#[derive(Clone, Copy)]
pub struct Layout {
    pub page_size: u32,
    pub reserved_bytes: u8,
    /// `PRAGMA auto_vacuum` value: `NONE`, `FULL` or `INCREMENTAL`.
    pub auto_vacuum: &'static str,
}

impl Layout {
    pub fn pages(page_size: u32) -> Self {
        Self {
            page_size,
            reserved_bytes: 0,
            auto_vacuum: "NONE",
        }
    }
}

/// Creates the database `dir/name` with `layout` and runs `build` on it, then closes it (so no
/// journal or WAL file is left behind).
pub fn create_db(
    dir: &Path,
    name: &str,
    layout: Layout,
    build: impl FnOnce(&Connection),
) -> PathBuf {
    let path = dir.join(name);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA page_size = {}; PRAGMA auto_vacuum = {};",
        layout.page_size, layout.auto_vacuum
    ))
    .unwrap();
    if layout.reserved_bytes > 0 {
        // Reserved bytes can only be chosen before the first write, through a file control.
        let mut n: std::os::raw::c_int = layout.reserved_bytes.into();
        let rc = unsafe {
            rusqlite::ffi::sqlite3_file_control(
                conn.handle(),
                c"main".as_ptr(),
                rusqlite::ffi::SQLITE_FCNTL_RESERVE_BYTES,
                (&mut n as *mut std::os::raw::c_int).cast(),
            )
        };
        assert_eq!(rc, rusqlite::ffi::SQLITE_OK);
    }
    build(&conn);
    conn.close().unwrap();
    path
}

/// Creates `table(a INTEGER, b TEXT, c REAL)` and inserts `rows` rows whose text lengths vary
/// from 0 to `max_text` bytes; every `big_every`-th row instead carries `big_len` bytes (to
/// force overflow pages).
pub fn fill(conn: &Connection, table: &str, rows: u64, max_text: u64, big: Option<(u64, usize)>) {
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {table}(a INTEGER, b TEXT, c REAL)"
    ))
    .unwrap();
    insert_rows(conn, table, 0..rows, max_text, big);
}

/// Inserts rows `ids` into a table made by [`fill`].
pub fn insert_rows(
    conn: &Connection,
    table: &str,
    ids: std::ops::Range<u64>,
    max_text: u64,
    big: Option<(u64, usize)>,
) {
    let mut rng = rng_from(ids.start + 17);
    let mut stmt = conn
        .prepare(&format!("INSERT INTO {table}(a, b, c) VALUES (?1, ?2, ?3)"))
        .unwrap();
    conn.execute_batch("BEGIN").unwrap();
    for id in ids {
        let len = match big {
            Some((every, len)) if id % every == every - 1 => len,
            _ => rng.below(max_text + 1) as usize,
        };
        let text = "x".repeat(len);
        stmt.execute(rusqlite::params![id as i64, text, id as f64 / 7.0])
            .unwrap();
    }
    conn.execute_batch("COMMIT").unwrap();
}

/// The pages SQLite's `dbstat` assigns to one table (or index), each list sorted.
#[derive(Debug, Default)]
pub struct Stat {
    pub leaves: Vec<u32>,
    pub internal: Vec<u32>,
    pub overflow: Vec<u32>,
}

pub fn read_only(path: &Path) -> Connection {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

pub fn dbstat(path: &Path, table: &str) -> Stat {
    let conn = read_only(path);
    let mut stmt = conn
        .prepare("SELECT pageno, pagetype FROM dbstat WHERE name = ?1 ORDER BY pageno")
        .unwrap();
    let mut stat = Stat::default();
    let rows = stmt
        .query_map([table], |r| {
            Ok((r.get::<_, u32>(0)?, r.get::<_, String>(1)?))
        })
        .unwrap();
    for row in rows {
        let (page, kind) = row.unwrap();
        match kind.as_str() {
            "leaf" => stat.leaves.push(page),
            "internal" => stat.internal.push(page),
            "overflow" => stat.overflow.push(page),
            other => panic!("unexpected dbstat page type {other}"),
        }
    }
    stat
}

/// Plans `table` and checks its leaf, interior and overflow pages and its row count against
/// SQLite.
pub fn assert_matches_sqlite(path: &Path, table: &str) -> TablePlan {
    let plan = TablePlan::open(path, table).unwrap();
    let stat = dbstat(path, table);
    assert!(!stat.leaves.is_empty());
    assert_eq!(plan.leaves, stat.leaves, "leaf pages of {table}");
    assert_eq!(
        plan.interior_pages, stat.internal,
        "interior pages of {table}"
    );
    let census = plan.census().unwrap();
    assert_eq!(
        census.overflow_pages,
        stat.overflow.len() as u64,
        "overflow pages of {table}"
    );
    assert_eq!(census.leaf_pages, stat.leaves.len() as u64);
    assert_eq!(census.interior_pages, stat.internal.len() as u64);
    let rows: i64 = read_only(path)
        .query_row(&format!("SELECT count(*) FROM \"{table}\""), [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(census.rows, rows as u64, "rows of {table}");
    let pages: u64 = plan.extents.iter().map(|e| u64::from(e.pages)).sum();
    assert_eq!(pages, plan.leaves.len() as u64);
    plan
}
