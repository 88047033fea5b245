//! A database path that is a symbolic link: the `-wal` and `-journal` that count are the ones
//! beside the link's target, as in SQLite (whose unix VFS resolves the path first), whether the
//! link is absolute or relative, one of a chain, or the path itself is relative.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use partitioner::pager::JOURNAL_MAGIC;
use partitioner::sidecar::{journal_path, wal_path, MAX_SYMLINKS};
use partitioner::TablePlan;
use rusqlite::{Connection, OpenFlags};
use tempfile::tempdir;

use crate::{create_db, fill, insert_rows, Layout};

/// The real database lives in `DIR/data/`, the links in `DIR/links/` (so nothing beside a link
/// is beside the real file).
fn dirs(root: &Path) -> (PathBuf, PathBuf) {
    let root = std::fs::canonicalize(root).unwrap();
    let (data, links) = (root.join("data"), root.join("links"));
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&links).unwrap();
    (data, links)
}

/// `count(*)` and `sum(a)` of table `t` as SQLite reads them through `path` (a normal,
/// non-immutable read-only open, so SQLite reads the log it finds).
fn sqlite_rows(path: &Path) -> (i64, i64) {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    conn.query_row("SELECT count(*), sum(a) FROM t", [], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .unwrap()
}

/// The rows of table `t` as partitioner reads them through `path` (a census of every leaf).
fn partitioner_rows(path: &Path) -> u64 {
    TablePlan::open(path, "t").unwrap().census().unwrap().rows
}

/// `path` relative to the current directory (`../..` up to `/`, then the absolute path).
fn relative_from_cwd(path: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap();
    let mut rel = PathBuf::new();
    for _ in cwd.components().skip(1) {
        rel.push("..");
    }
    rel.join(path.strip_prefix("/").unwrap())
}

#[test]
fn a_wal_database_through_links_reads_the_log_beside_the_target() {
    let dir = tempdir().unwrap();
    let (data, links) = dirs(dir.path());
    let real = data.join("live.db");
    let writer = Connection::open(&real).unwrap();
    writer
        .execute_batch("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;")
        .unwrap();
    fill(&writer, "t", 2000, 60, None);
    writer
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    // Committed transactions that live only in the log while the writer stays open.
    insert_rows(&writer, "t", 2000..5000, 60, None);
    writer
        .execute_batch("DELETE FROM t WHERE a % 7 = 0")
        .unwrap();
    assert!(std::fs::metadata(wal_path(&real)).unwrap().len() > 32);

    let absolute = links.join("abs.db");
    symlink(&real, &absolute).unwrap();
    let relative = links.join("rel.db");
    symlink("../data/live.db", &relative).unwrap();
    let chain = links.join("chain.db");
    symlink("rel.db", &chain).unwrap();
    let via_dir = links.join("datadir");
    symlink("../data", &via_dir).unwrap();
    let paths = [
        absolute.clone(),
        relative.clone(),
        chain.clone(),
        via_dir.join("live.db"),
        relative_from_cwd(&chain),
    ];

    let (sqlite_count, _) = sqlite_rows(&real);
    // The file alone (SQLite told to ignore the log) holds fewer rows: the log matters.
    let stale: i64 = Connection::open_with_flags(
        format!("file:{}?immutable=1", real.display()),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap()
    .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
    .unwrap();
    assert_ne!(
        stale, sqlite_count,
        "the committed rows are only in the log"
    );

    for path in &paths {
        assert_eq!(sqlite_rows(path), sqlite_rows(&real), "{}", path.display());
        assert_eq!(
            partitioner_rows(path),
            sqlite_count as u64,
            "{}",
            path.display()
        );
        let plan = TablePlan::open(path, "t").unwrap();
        assert_eq!(plan.path, *path, "the plan names the path as given");
        assert_eq!(
            plan.wal.as_ref().map(|w| w.path.clone()),
            Some(wal_path(&real)),
            "{}",
            path.display()
        );
    }
    let mut beside_links: Vec<String> = std::fs::read_dir(&links)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    beside_links.sort();
    assert_eq!(
        beside_links,
        ["abs.db", "chain.db", "datadir", "rel.db"],
        "nothing appeared beside the links"
    );
    drop(writer);
}

#[test]
fn a_hot_journal_beside_the_target_is_refused_through_a_link_as_by_the_real_path() {
    let dir = tempdir().unwrap();
    let (data, links) = dirs(dir.path());
    let real = create_db(&data, "hot.db", Layout::pages(4096), |c| {
        fill(c, "t", 500, 50, None);
    });
    let mut header = JOURNAL_MAGIC.to_vec();
    header.resize(512, 0);
    std::fs::write(journal_path(&real), &header).unwrap();
    let link = links.join("hot-link.db");
    symlink("../data/hot.db", &link).unwrap();
    let chain = links.join("hot-chain.db");
    symlink(&link, &chain).unwrap();

    let by_real = TablePlan::open(&real, "t").unwrap_err().to_string();
    assert!(by_real.contains("hot rollback journal"), "{by_real}");
    for path in [&link, &chain] {
        let err = TablePlan::open(path, "t").unwrap_err().to_string();
        // The same refusal; only the leading path (as given) differs.
        assert_eq!(
            err.strip_prefix(&path.display().to_string()),
            by_real.strip_prefix(&real.display().to_string()),
            "{err}"
        );
        // SQLite itself sees the journal through the link: it is hot (a read-only connection
        // cannot roll it back).
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        assert!(conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .is_err());
    }
}

#[test]
fn sidecar_files_beside_the_link_itself_are_ignored_as_sqlite_ignores_them() {
    let dir = tempdir().unwrap();
    let (data, links) = dirs(dir.path());
    let real = create_db(&data, "plain.db", Layout::pages(4096), |c| {
        fill(c, "t", 800, 50, None);
    });
    let link = links.join("plain-link.db");
    symlink(&real, &link).unwrap();
    // A hot journal and a log that do not belong to the target.
    let mut header = JOURNAL_MAGIC.to_vec();
    header.resize(512, 0);
    std::fs::write(journal_path(&link), &header).unwrap();
    std::fs::write(wal_path(&link), vec![0x5a; 4096]).unwrap();

    let plan = TablePlan::open(&link, "t").unwrap();
    assert!(plan.wal.is_none() && plan.wal_ignored.is_none());
    let (count, _) = sqlite_rows(&link);
    assert_eq!(plan.census().unwrap().rows, count as u64);
    assert_eq!(count, 800);
}

#[test]
fn the_link_limit_is_sqlites() {
    let dir = tempdir().unwrap();
    let (data, links) = dirs(dir.path());
    let real = create_db(&data, "x.db", Layout::pages(4096), |c| {
        fill(c, "t", 10, 5, None);
    });
    // l0 -> x.db, l1 -> l0, ...: lN is N + 1 links from the file.
    let mut prev = real.clone();
    for i in 0..=MAX_SYMLINKS + 1 {
        let name = links.join(format!("l{i}"));
        symlink(&prev, &name).unwrap();
        prev = name;
    }
    let opens = |p: &Path| {
        Connection::open_with_flags(p, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|c| c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)))
            .is_ok()
    };
    let last_ok = links.join(format!("l{MAX_SYMLINKS}"));
    let one_more = links.join(format!("l{}", MAX_SYMLINKS + 1));
    assert!(opens(&last_ok) && !opens(&one_more), "SQLite's limit moved");
    assert_eq!(partitioner_rows(&last_ok), 10);
    let err = TablePlan::open(&one_more, "t").unwrap_err().to_string();
    assert!(err.contains("symbolic links"), "{err}");
}
