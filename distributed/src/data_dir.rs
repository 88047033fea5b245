//! [`DataDir`]: the directory a worker serves, and the only place it reads.
//!
//! A worker lists the SQLite files under its directory (recursively, in path order; a file is
//! a SQLite file when it starts with SQLite's 16-byte header string) and names each by its
//! path relative to the directory, with `/` between components: that relative path is the
//! file's identity across the cluster (the same path on several workers is one file held in
//! replicas). A path a plan names is resolved here and refused unless it is relative, has no
//! `..`, `.` or empty component, and its canonical form (symbolic links followed) is a regular
//! file inside the directory's canonical form: no absolute path, no `..`, no link out.
//!
//! Layering: above [`crate::error`].

use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::error::Error;

/// SQLite's header string, the first 16 bytes of every database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// A worker's data directory (see the module docs).
#[derive(Debug, Clone)]
pub struct DataDir {
    /// The directory as given (for messages).
    given: PathBuf,
    /// Its canonical path.
    root: PathBuf,
}

impl DataDir {
    /// The directory `dir`, which must exist.
    pub fn open(dir: impl AsRef<Path>) -> Result<DataDir, Error> {
        let given = dir.as_ref().to_path_buf();
        let root = fs::canonicalize(&given).map_err(|e| Error::DataDir {
            path: given.clone(),
            what: e.to_string(),
        })?;
        if !root.is_dir() {
            return Err(Error::DataDir {
                path: given,
                what: "not a directory".into(),
            });
        }
        Ok(DataDir { given, root })
    }

    /// The directory as given.
    pub fn path(&self) -> &Path {
        &self.given
    }

    /// The SQLite files under the directory, as relative paths in sorted order, each with its
    /// resolved path. Files that are not SQLite databases (and `-wal`/`-shm` companions,
    /// which are not) are left out; so are links that lead out of the directory.
    pub fn list(&self) -> Result<Vec<(String, PathBuf)>, Error> {
        let mut found = Vec::new();
        self.walk(&self.root, "", &mut found)?;
        found.sort();
        Ok(found)
    }

    fn walk(
        &self,
        dir: &Path,
        prefix: &str,
        found: &mut Vec<(String, PathBuf)>,
    ) -> Result<(), Error> {
        let io = |e: std::io::Error| Error::DataDir {
            path: dir.to_path_buf(),
            what: e.to_string(),
        };
        for entry in fs::read_dir(dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue; // Not UTF-8: cannot be named in SQL or in a plan.
            };
            let rel = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let Ok(real) = fs::canonicalize(entry.path()) else {
                continue; // A dangling link.
            };
            if !real.starts_with(&self.root) {
                continue;
            }
            if real.is_dir() {
                if entry.file_type().map_err(io)?.is_symlink() {
                    continue; // Each file once, under its own path.
                }
                self.walk(&real, &rel, found)?;
            } else if real.is_file() && is_sqlite(&real) {
                found.push((rel, real));
            }
        }
        Ok(())
    }

    /// The file a plan names by `rel` (see the module docs for what is refused).
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, Error> {
        let refuse = |what: &str| Error::Refused {
            path: rel.to_string(),
            what: what.to_string(),
        };
        if rel.is_empty() {
            return Err(refuse("an empty path"));
        }
        let path = Path::new(rel);
        if path.is_absolute() {
            return Err(refuse("an absolute path"));
        }
        if rel
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
            || path
                .components()
                .any(|c| !matches!(c, Component::Normal(_)))
        {
            return Err(refuse("a path with '..', '.' or an empty component"));
        }
        let real = fs::canonicalize(self.root.join(path))
            .map_err(|e| refuse(&format!("not found under {}: {e}", self.given.display())))?;
        if !real.starts_with(&self.root) {
            return Err(refuse("a link that leads out of the data directory"));
        }
        if !real.is_file() {
            return Err(refuse("not a regular file"));
        }
        Ok(real)
    }
}

/// Whether `path` starts with SQLite's header string.
fn is_sqlite(path: &Path) -> bool {
    let mut magic = [0u8; 16];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == SQLITE_MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_only_files_inside() {
        let base = std::env::temp_dir().join(format!("corescan-datadir-{}", std::process::id()));
        let dir = base.join("data");
        fs::create_dir_all(dir.join("sub")).unwrap();
        let mut db = SQLITE_MAGIC.to_vec();
        db.resize(512, 0);
        fs::write(dir.join("a.db"), &db).unwrap();
        fs::write(dir.join("sub/b.db"), &db).unwrap();
        fs::write(dir.join("notes.txt"), b"hello").unwrap();
        fs::write(base.join("outside.db"), &db).unwrap();
        std::os::unix::fs::symlink(base.join("outside.db"), dir.join("link.db")).unwrap();
        let data = DataDir::open(&dir).unwrap();
        let listed: Vec<String> = data.list().unwrap().into_iter().map(|(r, _)| r).collect();
        assert_eq!(listed, ["a.db", "sub/b.db"]);
        assert!(data.resolve("sub/b.db").is_ok());
        for bad in [
            "../outside.db",
            "sub/../a.db",
            "./a.db",
            "/etc/passwd",
            "link.db",
            "sub",
            "missing.db",
            "",
            "sub//b.db",
        ] {
            let e = data.resolve(bad).unwrap_err();
            assert!(matches!(e, Error::Refused { .. }), "{bad}: {e}");
        }
        fs::remove_dir_all(&base).unwrap();
    }
}
