//! The files SQLite keeps beside a database (`DB-wal`, `DB-shm`, `DB-journal`), and which path they sit
//! beside.
//!
//! SQLite never derives a sidecar name from the path it was given: its unix VFS first turns
//! that path into a full one (`unixFullPathname` and `appendOnePathElement` in `os_unix.c`),
//! and every name it derives (`-journal`, `-wal`, `-shm`) is that full path plus a suffix. So
//! when the path is a symbolic link, the log and the journal that count are the ones beside the
//! link's *target*, not beside the link. [`DbFiles::resolve`] does the same walk:
//!
//! - a relative path is appended to the current directory (`getcwd`, already free of links);
//! - the path's elements are appended one at a time: empty elements and `.` are dropped, `..`
//!   removes the last element appended so far (which is itself resolved, so this is the
//!   physical parent);
//! - after each element, `lstat`: a symbolic link is replaced by its target, an absolute target
//!   restarting the path and a relative one continuing from the link's directory, with the
//!   target's own elements resolved the same way (so chains of links and links inside
//!   directories are followed); a missing element is kept as it is (the open that follows
//!   reports it); any other `lstat` or `readlink` failure is an error;
//! - more than [`MAX_SYMLINKS`]` + 1` links is an error, as in SQLite, so a loop of links
//!   ends.
//!
//! Everything that opens a database through this crate ([`crate::PageFile::open`], and so
//! [`crate::TablePlan::open`]) resolves the path here first and reads the database, its log
//! and its journal by the resolved names. This module is the bottom of the file layer:
//! [`crate::wal`] and [`crate::pager`] import it, it imports neither.

use std::ffi::OsStr;
use std::fs::Metadata;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// `SQLITE_MAX_SYMLINK` of SQLite's unix VFS. Its check (`nSymlink++ > SQLITE_MAX_SYMLINK`)
/// follows up to one more link than this; the next one is an error, here as there.
pub const MAX_SYMLINKS: u32 = 200;

/// A database's path as given, its full path resolved as SQLite's unix VFS resolves it, and
/// the sidecar files beside the resolved path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbFiles {
    /// The path as given (what error messages name).
    pub given: PathBuf,
    /// The full path with every symbolic link resolved: the file SQLite opens.
    pub real: PathBuf,
    /// The write-ahead log SQLite uses: [`DbFiles::real`] plus `-wal`.
    pub wal: PathBuf,
    /// The rollback journal SQLite uses: [`DbFiles::real`] plus `-journal`.
    pub journal: PathBuf,
    /// The wal-index SQLite shares between connections: [`DbFiles::real`] plus `-shm`.
    pub shm: PathBuf,
}

impl DbFiles {
    /// Resolves `db` (see the module docs) and names its sidecar files. Errors name `db`.
    pub fn resolve(db: &Path) -> Result<DbFiles> {
        let real = resolve_db_path(db)?;
        Ok(DbFiles {
            given: db.to_path_buf(),
            wal: wal_path(&real),
            journal: journal_path(&real),
            shm: with_suffix(&real, "-shm"),
            real,
        })
    }
}

/// The path of the write-ahead log SQLite keeps beside `db`: the file name plus `-wal`. Pass a
/// resolved path ([`DbFiles`] does): SQLite looks beside a link's target, not the link.
pub fn wal_path(db: &Path) -> PathBuf {
    with_suffix(db, "-wal")
}

/// The path of the rollback journal SQLite keeps beside `db`: the file name plus `-journal`.
/// Pass a resolved path ([`DbFiles`] does).
pub fn journal_path(db: &Path) -> PathBuf {
    with_suffix(db, "-journal")
}

fn with_suffix(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// `db` as a full path with every symbolic link resolved, the way SQLite's unix VFS resolves a
/// database path before deriving any sidecar name (see the module docs). Errors name `db`.
pub fn resolve_db_path(db: &Path) -> Result<PathBuf> {
    let mut walk = Walk {
        db,
        out: Vec::new(),
        links: 0,
    };
    let given = db.as_os_str().as_bytes();
    if !given.starts_with(b"/") {
        let cwd = std::env::current_dir().map_err(|source| Error::Io {
            path: db.to_path_buf(),
            op: "getcwd".into(),
            source,
        })?;
        walk.append_all(cwd.as_os_str().as_bytes())?;
    }
    walk.append_all(given)?;
    if walk.out.is_empty() {
        walk.out.push(b'/');
    }
    Ok(PathBuf::from(OsStr::from_bytes(&walk.out)))
}

/// A path under construction (SQLite's `DbPath`).
struct Walk<'a> {
    db: &'a Path,
    out: Vec<u8>,
    links: u32,
}

impl Walk<'_> {
    fn append_all(&mut self, path: &[u8]) -> Result<()> {
        for name in path.split(|&b| b == b'/').filter(|n| !n.is_empty()) {
            self.append_one(name)?;
        }
        Ok(())
    }

    fn append_one(&mut self, name: &[u8]) -> Result<()> {
        match name {
            b"." => return Ok(()),
            b".." => {
                if let Some(slash) = self.out.iter().rposition(|&b| b == b'/') {
                    self.out.truncate(slash);
                }
                return Ok(());
            }
            _ => {}
        }
        self.out.push(b'/');
        self.out.extend_from_slice(name);
        let here = PathBuf::from(OsStr::from_bytes(&self.out));
        let io = |op: &str, source| Error::Io {
            path: self.db.to_path_buf(),
            op: format!("{op} {}", here.display()),
            source,
        };
        let meta = match std::fs::symlink_metadata(&here) {
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io("lstat", e)),
            Ok(meta) => meta,
        };
        if !meta.file_type().is_symlink() {
            return Ok(());
        }
        if self.links > MAX_SYMLINKS {
            return Err(Error::Invalid {
                path: self.db.to_path_buf(),
                what: format!(
                    "more than {} symbolic links to follow (a loop of links?) at {}",
                    MAX_SYMLINKS + 1,
                    here.display()
                ),
            });
        }
        self.links += 1;
        let target = std::fs::read_link(&here).map_err(|e| io("readlink", e))?;
        let target = target.as_os_str().as_bytes();
        if target.is_empty() {
            return Err(Error::Invalid {
                path: self.db.to_path_buf(),
                what: format!("symbolic link {} has an empty target", here.display()),
            });
        }
        if target.starts_with(b"/") {
            self.out.clear();
        } else {
            self.out.truncate(self.out.len() - name.len() - 1);
        }
        self.append_all(target)
    }
}

/// The metadata of `sidecar`, a file SQLite keeps beside `db` (`-journal`, `-wal`): `None` when
/// it does not exist, an error naming `db` when it cannot be examined or is not a regular file
/// (opening a FIFO would block, and SQLite could not use such a file either).
pub fn sidecar_metadata(db: &Path, sidecar: &Path) -> Result<Option<Metadata>> {
    match std::fs::metadata(sidecar) {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Io {
            path: db.to_path_buf(),
            op: format!("stat {}", sidecar.display()),
            source,
        }),
        Ok(meta) if !meta.is_file() => Err(Error::Invalid {
            path: db.to_path_buf(),
            what: format!(
                "{} beside the database is not a regular file",
                sidecar.display()
            ),
        }),
        Ok(meta) => Ok(Some(meta)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn real(dir: &Path) -> PathBuf {
        std::fs::canonicalize(dir).unwrap()
    }

    #[test]
    fn plain_paths_are_made_full_and_lexically_clean() {
        let dir = tempfile::tempdir().unwrap();
        let base = real(dir.path());
        std::fs::create_dir(base.join("d")).unwrap();
        std::fs::write(base.join("x.db"), b"").unwrap();
        let messy = base.join("d/.././/./x.db");
        assert_eq!(resolve_db_path(&messy).unwrap(), base.join("x.db"));
        // A missing file keeps its name (the open reports it).
        assert_eq!(
            resolve_db_path(&base.join("missing.db")).unwrap(),
            base.join("missing.db")
        );
        assert_eq!(resolve_db_path(Path::new("/")).unwrap(), PathBuf::from("/"));
        assert_eq!(
            resolve_db_path(Path::new("/..")).unwrap(),
            PathBuf::from("/")
        );
    }

    #[test]
    fn links_chains_and_directory_links_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let base = real(dir.path());
        std::fs::create_dir_all(base.join("data/inner")).unwrap();
        std::fs::write(base.join("data/inner/x.db"), b"").unwrap();
        // A relative link, a link to that link, and an absolute link to the directory.
        symlink("data/inner/x.db", base.join("rel.db")).unwrap();
        symlink("rel.db", base.join("chain.db")).unwrap();
        symlink(base.join("data/inner"), base.join("dirlink")).unwrap();
        let want = base.join("data/inner/x.db");
        for p in [
            "rel.db",
            "chain.db",
            "dirlink/x.db",
            "dirlink/../inner/x.db",
        ] {
            assert_eq!(resolve_db_path(&base.join(p)).unwrap(), want, "{p}");
        }
        let files = DbFiles::resolve(&base.join("chain.db")).unwrap();
        assert_eq!(files.given, base.join("chain.db"));
        assert_eq!(files.wal, base.join("data/inner/x.db-wal"));
        assert_eq!(files.journal, base.join("data/inner/x.db-journal"));
    }

    #[test]
    fn a_loop_of_links_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let base = real(dir.path());
        symlink("b", base.join("a")).unwrap();
        symlink("a", base.join("b")).unwrap();
        let err = resolve_db_path(&base.join("a")).unwrap_err().to_string();
        assert!(
            err.starts_with(&base.join("a").display().to_string()),
            "{err}"
        );
        assert!(err.contains("symbolic links"), "{err}");
    }

    #[test]
    fn the_link_limit_is_sqlites() {
        let dir = tempfile::tempdir().unwrap();
        let base = real(dir.path());
        std::fs::write(base.join("x.db"), b"").unwrap();
        // l0 -> x.db, l1 -> l0, ...: reaching x.db from lN follows N + 1 links.
        let mut prev = "x.db".to_string();
        for i in 0..=MAX_SYMLINKS + 1 {
            let name = format!("l{i}");
            symlink(&prev, base.join(&name)).unwrap();
            prev = name;
        }
        let last_ok = base.join(format!("l{MAX_SYMLINKS}"));
        assert_eq!(resolve_db_path(&last_ok).unwrap(), base.join("x.db"));
        let one_more = base.join(format!("l{}", MAX_SYMLINKS + 1));
        assert!(resolve_db_path(&one_more).is_err());
    }
}
