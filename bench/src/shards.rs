//! A generated TPC-H database split into shard files, as applications that shard by key lay
//! their data out: `LINEITEM` and `ORDERS` cut by order key into contiguous ranges of about
//! equal row counts (each order's line items in the shard of the order), every other table
//! whole in the first shard only. The union of each table over the shards is the whole
//! database's table, so a query over all the shards (`corescan query`/`sql` with several
//! files) answers as over the whole database. For the scans of one table over many files
//! (`corescan gen --shards N`, `corescan bench files`).
//!
//! One pass over `LINEITEM` and `ORDERS` in rowid order finds each shard's rowid range (tpchgen
//! writes both in order-key order); each shard is then filled with rowid-range copies, which
//! SQLite runs as b-tree seeks.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::gen::GenError;

/// The path of shard `k` of `n` for `out` (`t.db` -> `t-0003.db`): the index zero-padded to
/// the width of `n - 1`, so that the shards sort in order.
pub fn shard_path(out: &Path, k: usize, n: usize) -> PathBuf {
    let width = (n.max(2) - 1).to_string().len();
    let stem = out
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let ext = out
        .extension()
        .map_or_else(String::new, |e| format!(".{}", e.to_string_lossy()));
    out.with_file_name(format!("{stem}-{k:0width$}{ext}"))
}

/// Splits the database `full` into `n` shards next to `out` ([`shard_path`]), each written
/// with pages of `page_size` bytes; returns their paths in order. Existing shard files are
/// replaced only with `force`.
pub fn split(
    full: &Path,
    out: &Path,
    n: usize,
    page_size: u32,
    force: bool,
) -> Result<Vec<PathBuf>, GenError> {
    fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> GenError + '_ {
        move |source| GenError::Sqlite {
            path: path.to_path_buf(),
            source,
        }
    }
    let src = Connection::open_with_flags(full, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(sqlite(full))?;
    let tables: Vec<(String, String)> = src
        .prepare("SELECT name, sql FROM sqlite_schema WHERE type = 'table' ORDER BY rowid")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(sqlite(full))?;
    // The order keys that start shards 1..n: where LINEITEM's rows split into n about equal
    // parts, moved to the next order's first line.
    let keys = |table: &str, key: &str| -> Result<Vec<(i64, i64)>, GenError> {
        let mut stmt = src
            .prepare(&format!("SELECT rowid, {key} FROM {table} ORDER BY rowid"))
            .map_err(sqlite(full))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(sqlite(full))?;
        if rows.windows(2).any(|w| w[1].1 < w[0].1) {
            return Err(GenError::Sqlite {
                path: full.to_path_buf(),
                source: rusqlite::Error::InvalidQuery,
            });
        }
        Ok(rows)
    };
    let has = |name: &str| tables.iter().any(|(t, _)| t.eq_ignore_ascii_case(name));
    let lineitem = if has("lineitem") {
        keys("lineitem", "l_orderkey")?
    } else {
        Vec::new()
    };
    let mut starts = Vec::with_capacity(n);
    for k in 1..n {
        let at = lineitem.len() * k / n;
        // The first line of the next order at or after the quantile.
        let key = lineitem.get(at).map(|r| r.1);
        let key = key.and_then(|q| lineitem[at..].iter().find(|r| r.1 > q).map(|r| r.1));
        starts.push(key.unwrap_or(i64::MAX));
    }
    // Each shard's rowid range of a table sorted by order key.
    let ranges = |rows: &[(i64, i64)]| -> Vec<(i64, i64)> {
        let mut out = Vec::with_capacity(n);
        let mut at = 0;
        for k in 0..n {
            let end = starts.get(k).copied().unwrap_or(i64::MAX);
            let from = at;
            while at < rows.len() && rows[at].1 < end {
                at += 1;
            }
            out.push(if at > from {
                (rows[from].0, rows[at - 1].0)
            } else {
                (1, 0) // empty
            });
        }
        out
    };
    let mut cut: Vec<(String, Vec<(i64, i64)>)> = Vec::new();
    for (name, _) in &tables {
        match name.to_ascii_lowercase().as_str() {
            "lineitem" => cut.push((name.clone(), ranges(&lineitem))),
            "orders" => cut.push((name.clone(), ranges(&keys(name, "o_orderkey")?))),
            _ => {}
        }
    }
    drop(src);
    let mut paths = Vec::with_capacity(n);
    for k in 0..n {
        let path = shard_path(out, k, n);
        if path.symlink_metadata().is_ok() {
            if !force {
                return Err(GenError::Exists(path));
            }
            std::fs::remove_file(&path).map_err(|source| GenError::Io {
                path: path.clone(),
                op: "remove the old shard",
                source,
            })?;
        }
        let c = Connection::open(&path).map_err(sqlite(&path))?;
        c.execute_batch(&format!(
            "PRAGMA page_size = {page_size}; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
        ))
        .map_err(sqlite(&path))?;
        c.execute("ATTACH ?1 AS src", [full.to_string_lossy()])
            .map_err(sqlite(&path))?;
        let mut sql = String::from("BEGIN;");
        for (name, create) in &tables {
            let by_key = cut.iter().find(|(t, _)| t == name);
            // The tables not cut by order key live whole in the first shard only.
            if by_key.is_none() && k > 0 {
                continue;
            }
            sql.push_str(create);
            sql.push(';');
            match by_key {
                Some((_, r)) => {
                    let (lo, hi) = r[k];
                    sql.push_str(&format!(
                        "INSERT INTO main.{name} SELECT * FROM src.{name} WHERE rowid BETWEEN {lo} AND {hi};"
                    ));
                }
                None => sql.push_str(&format!(
                    "INSERT INTO main.{name} SELECT * FROM src.{name};"
                )),
            }
        }
        sql.push_str("COMMIT; DETACH src;");
        c.execute_batch(&sql).map_err(sqlite(&path))?;
        paths.push(path);
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_sort_in_order() {
        let out = Path::new("/x/t.db");
        assert_eq!(shard_path(out, 3, 10), PathBuf::from("/x/t-3.db"));
        assert_eq!(shard_path(out, 3, 1000), PathBuf::from("/x/t-003.db"));
        assert_eq!(shard_path(out, 999, 1000), PathBuf::from("/x/t-999.db"));
        assert_eq!(shard_path(Path::new("t"), 0, 2), PathBuf::from("t-0"));
    }
}
