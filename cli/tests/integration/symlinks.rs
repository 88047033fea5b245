//! Database paths that are symbolic links: every command reads the `-wal` log and checks the
//! `-journal` beside the link's *target*, as SQLite does (its unix VFS resolves the path before
//! naming any sidecar file), for absolute and relative links, chains of links and relative
//! paths.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use bench::oracle::{self, OracleAnswer};
use engine::q6::Q6Params;
use partitioner::pager::JOURNAL_MAGIC;
use partitioner::sidecar::journal_path;
use rusqlite::{Connection, OpenFlags};

use crate::scan::ScanTester;
use crate::wal::live_wal_db;
use crate::{corescan, layouts, scratch_dir};

/// SQLite's answer through `path` itself: a read-only connection that reads the log it finds
/// (beside the resolved path) through the live writer's `-shm`.
fn sqlite_through(path: &Path, params: &Q6Params) -> OracleAnswer {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    oracle::q6_on(&conn, "LINEITEM", params).unwrap()
}

/// `path` relative to the current directory (`..` up to `/`, then the absolute path).
fn relative_from_cwd(path: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap();
    let mut rel = PathBuf::new();
    for _ in cwd.components().skip(1) {
        rel.push("..");
    }
    rel.join(path.strip_prefix("/").unwrap())
}

/// Links to `target` in `dir/links/`: absolute, relative, a chain (a link to the relative
/// link), and the chain named by a path relative to the current directory.
fn links_to(target: &Path, dir: &Path) -> Vec<PathBuf> {
    let links = dir.join("links");
    std::fs::create_dir_all(&links).unwrap();
    let name = target.file_name().unwrap().to_str().unwrap();
    let absolute = links.join(format!("abs-{name}"));
    symlink(target, &absolute).unwrap();
    let relative = links.join(format!("rel-{name}"));
    symlink(format!("../{name}"), &relative).unwrap();
    let chain = links.join(format!("chain-{name}"));
    symlink(relative.file_name().unwrap(), &chain).unwrap();
    let from_cwd = relative_from_cwd(&chain);
    vec![absolute, relative, chain, from_cwd]
}

fn json(run: &crate::Run) -> serde_json::Value {
    assert_eq!(run.status, 0, "{run:?}");
    serde_json::from_str(&run.stdout).unwrap()
}

#[test]
fn q6_and_explain_through_links_to_a_live_wal_database_answer_as_sqlite() {
    let (writer, db) = live_wal_db("symlink-wal");
    let db = std::fs::canonicalize(&db).unwrap();
    let dir = db.parent().unwrap().to_path_buf();
    let params = Q6Params::default();
    let want = sqlite_through(&db, &params);
    // Told to ignore the log, SQLite gives another answer: the committed log matters.
    let stale = oracle::q6(&db, "LINEITEM", &params).unwrap();
    assert_ne!(stale.revenue(), want.revenue());

    let links = links_to(&db, &dir);
    for link in &links {
        assert_eq!(sqlite_through(link, &params), want, "{}", link.display());
        let q6 = json(&corescan([
            "q6".as_ref(),
            link.as_os_str(),
            "--json".as_ref(),
        ]));
        assert_eq!(q6["revenue"], want.revenue(), "{}", link.display());
        assert_eq!(q6["rows_matched"], want.rows_matched, "{}", link.display());
        assert_eq!(q6["rows_scanned"], want.rows_scanned, "{}", link.display());
        let explain = json(&corescan([
            "explain".as_ref(),
            link.as_os_str(),
            "--json".as_ref(),
            "--census".as_ref(),
        ]));
        assert_eq!(explain["rows"], want.rows_scanned, "{}", link.display());
    }
    // Every backend, core count, readahead window and coalescing size through a chain.
    let chain = &links[2];
    let runs = ScanTester::default().check_with(chain, "LINEITEM", |p| sqlite_through(chain, p));
    assert!(runs > 0);
    drop(writer);
}

#[test]
fn a_hot_journal_beside_the_target_is_refused_through_links_by_every_command() {
    let dir = std::fs::canonicalize(scratch_dir("symlink-hot")).unwrap();
    let db = dir.join("hot.db");
    std::fs::copy(&layouts()[0].path, &db).unwrap();
    let mut header = JOURNAL_MAGIC.to_vec();
    header.resize(512, 0);
    std::fs::write(journal_path(&db), &header).unwrap();
    let out = dir.join("out");
    let by_real = corescan(["q6".as_ref(), db.as_os_str()]);
    by_real.assert_error(&["hot rollback journal", "a writer may be active"]);
    let real_text = by_real.stderr.replacen(&db.display().to_string(), "DB", 1);
    for link in links_to(&db, &dir) {
        let shown = link.display().to_string();
        let runs = [
            corescan(["q6".as_ref(), link.as_os_str()]),
            corescan(["explain".as_ref(), link.as_os_str()]),
            corescan([
                "bench".as_ref(),
                "scale".as_ref(),
                link.as_os_str(),
                "--cores=1".as_ref(),
                "--repeat=1".as_ref(),
                "--out".as_ref(),
                out.as_os_str(),
            ]),
        ];
        for run in runs {
            run.assert_error(&[&shown, "hot rollback journal", "a writer may be active"]);
            // Exactly the refusal of the real path, naming the path as given.
            assert_eq!(run.stderr.replacen(&shown, "DB", 1), real_text);
        }
    }
    assert!(!out.exists(), "nothing was written");
}
