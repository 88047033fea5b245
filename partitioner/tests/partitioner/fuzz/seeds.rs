//! Valid files to mutate, generated once per test run with SQLite: small databases of several
//! layouts, and WAL-mode databases whose `-wal` log holds committed (and uncommitted) frames.

use std::path::Path;
use std::sync::OnceLock;

use rusqlite::Connection;
use tempfile::tempdir;

use crate::{create_db, fill, insert_rows, Layout};

/// A database image and the table to plan in it.
pub struct DbSeed {
    pub name: &'static str,
    pub db: Vec<u8>,
    /// The log beside it (empty: none).
    pub wal: Vec<u8>,
    pub table: &'static str,
}

impl DbSeed {
    /// The page size recorded in the image's header.
    pub fn page_size(&self) -> usize {
        match u16::from_be_bytes([self.db[16], self.db[17]]) {
            1 => 65536,
            n => usize::from(n),
        }
    }
}

/// The seeds: plain databases first, then WAL-mode ones.
pub fn seeds() -> &'static [DbSeed] {
    static SEEDS: OnceLock<Vec<DbSeed>> = OnceLock::new();
    SEEDS.get_or_init(generate)
}

fn plain(
    dir: &Path,
    name: &'static str,
    layout: Layout,
    build: impl FnOnce(&Connection),
) -> DbSeed {
    let path = create_db(dir, name, layout, build);
    DbSeed {
        name,
        db: std::fs::read(path).unwrap(),
        wal: Vec::new(),
        table: "t",
    }
}

/// A WAL-mode database: `base` rows checkpointed into the file, then committed changes in the
/// log and (with `pending`) a transaction in progress whose spilled frames do not count.
fn wal_mode(dir: &Path, name: &'static str, page_size: u32, pending: bool) -> DbSeed {
    let path = dir.join(name);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA page_size = {page_size}; PRAGMA journal_mode = WAL; \
         PRAGMA wal_autocheckpoint = 0;"
    ))
    .unwrap();
    fill(&conn, "t", 300, 60, Some((41, 2 * page_size as usize)));
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    conn.execute_batch("UPDATE t SET b = b || 'x' WHERE a % 7 = 0; DELETE FROM t WHERE a < 40;")
        .unwrap();
    insert_rows(
        &conn,
        "t",
        300..500,
        60,
        Some((53, page_size as usize + 100)),
    );
    fill(&conn, "u", 30, 20, None);
    if pending {
        conn.execute_batch("PRAGMA cache_size = 2; BEGIN; UPDATE t SET c = -c;")
            .unwrap();
    }
    // Read while the writer is open, so the log is not checkpointed away.
    let seed = DbSeed {
        name,
        db: std::fs::read(&path).unwrap(),
        wal: std::fs::read(partitioner::wal::wal_path(&path)).unwrap(),
        table: "t",
    };
    if pending {
        conn.execute_batch("ROLLBACK").unwrap();
    }
    seed
}

fn generate() -> Vec<DbSeed> {
    let dir = tempdir().unwrap();
    let d = dir.path();
    vec![
        plain(d, "deep512.db", Layout::pages(512), |c| {
            fill(c, "t", 700, 40, Some((37, 1200)));
            c.execute_batch(
                "CREATE INDEX ti ON t(b); CREATE TABLE u(x DECIMAL(15,2) DEFAULT 0.06, y);",
            )
            .unwrap();
        }),
        plain(
            d,
            "vacuum1024.db",
            Layout {
                page_size: 1024,
                reserved_bytes: 16,
                auto_vacuum: "FULL",
            },
            |c| {
                fill(c, "t", 500, 90, Some((29, 3000)));
                c.execute_batch("DELETE FROM t WHERE a % 3 = 0").unwrap();
            },
        ),
        plain(d, "freelist4096.db", Layout::pages(4096), |c| {
            fill(c, "t", 400, 300, Some((50, 9000)));
            fill(c, "gone", 300, 300, None);
            c.execute_batch("DROP TABLE gone; ALTER TABLE t ADD COLUMN d INTEGER DEFAULT -5;")
                .unwrap();
        }),
        wal_mode(d, "wal1024.db", 1024, false),
        wal_mode(d, "pending512.db", 512, true),
    ]
}

/// Writes the seeds as libFuzzer corpora under `dir` (`dir/<target>/<name>`), in the input
/// formats of the targets in the repository's `fuzz/` directory.
pub fn write_corpora(dir: &Path) {
    for target in ["header", "btree", "record", "wal"] {
        std::fs::create_dir_all(dir.join(target)).unwrap();
    }
    for seed in seeds() {
        let put = |target: &str, bytes: &[u8]| {
            std::fs::write(dir.join(target).join(seed.name), bytes).unwrap();
        };
        // `header` inputs: the first 100 bytes, then the file size (8 bytes, little endian).
        let mut header = seed.db[..100].to_vec();
        header.extend_from_slice(&(seed.db.len() as u64).to_le_bytes());
        put("header", &header);
        // (The main files of the WAL-mode seeds are valid databases too.)
        put("btree", &seed.db);
        if !seed.wal.is_empty() {
            // `wal` inputs: the database's length (4 bytes, little endian), it, then the log.
            let mut input = (seed.db.len() as u32).to_le_bytes().to_vec();
            input.extend_from_slice(&seed.db);
            input.extend_from_slice(&seed.wal);
            put("wal", &input);
        }
        // `record` inputs: log2(page size) - 9, the reserved bytes per page, then a
        // table-leaf page.
        let size = seed.page_size();
        for (k, page) in seed.db.chunks_exact(size).enumerate().skip(1).take(40) {
            if page[0] == 0x0d {
                let mut input = vec![(size.trailing_zeros() - 9) as u8, seed.db[20]];
                input.extend_from_slice(page);
                let name = format!("{}-page{}", seed.name, k + 1);
                std::fs::write(dir.join("record").join(name), input).unwrap();
            }
        }
    }
}
