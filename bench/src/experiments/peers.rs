//! The other engines `bench compare` runs Q6 on: the `sqlite3` command-line shell, and DuckDB
//! and Turso through their Python packages (`duckdb`, `pyturso`), each used only when present.
//!
//! - **Probing** never installs anything: [`probe_sqlite3`] and [`probe_python_module`] say
//!   what is there, or why not, so the command can print what it skips.
//! - **The SQL** is the one [`crate::text::q6_sql`] renders for every engine: TPC-H Q6 with the
//!   parameters substituted as literals (the discount bounds as computed decimals, `0.05` and
//!   `0.07`).
//! - **DuckDB** reads its own copy of the table ([`duckdb_copy`]): exported from SQLite to
//!   CSV, loaded into a `.duckdb` file with TPC-H's column types (`DECIMAL(15,2)`, `DATE`),
//!   so its sum is an exact decimal. Made once, in a cache directory beside `--out`.
//! - **Turso** 0.8 opens a database read-write and switches it to WAL mode (it rewrites the
//!   header's version bytes 18-19 and creates a `-wal` file), so it runs on a private copy
//!   ([`turso_copy`]), never on the user's file.
//! - **Answers** ([`Answer`]): exact decimals must equal the exact answer; floats must agree
//!   within [`FLOAT_RULE`].

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{ExperimentError, Result};
use crate::oracle;
use crate::text::quote_identifier;

/// The Python side of the peers: probes a module, builds the DuckDB copy, runs Q6 in DuckDB or
/// Turso and prints one JSON object with the answer and the seconds from opening the database
/// to the answer.
pub const PYTHON_HELPER: &str = r#"
import decimal, json, sys, time

def answer(v):
    if v is None:
        return {"answer": None, "kind": "null"}
    if isinstance(v, decimal.Decimal):
        return {"answer": str(v), "kind": "decimal"}
    if isinstance(v, float):
        return {"answer": repr(v), "kind": "float"}
    return {"answer": str(v), "kind": type(v).__name__}

def version(dist, module):
    try:
        from importlib.metadata import version as v
        return v(dist)
    except Exception:
        return getattr(module, "__version__", "unknown")

action = sys.argv[1]
if action == "probe":
    import importlib
    m = importlib.import_module(sys.argv[2])
    print(json.dumps({"version": version(sys.argv[3], m)}))
elif action == "duckdb-build":
    import duckdb
    csv_path, out, columns, table = sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]
    spec = "{" + ", ".join("'%s': '%s'" % (n.replace("'", "''"), t) for n, t in columns) + "}"
    con = duckdb.connect(out)
    con.execute("CREATE TABLE \"%s\" AS SELECT * FROM read_csv('%s', header=true, delim=',', quote='\"', columns=%s)"
                % (table.replace('"', '""'), csv_path.replace("'", "''"), spec))
    con.close()
    print(json.dumps({"ok": True}))
elif action == "duckdb-q6":
    import duckdb
    t0 = time.perf_counter()
    con = duckdb.connect(sys.argv[2], read_only=True)
    v = con.execute(sys.argv[3]).fetchone()[0]
    out = answer(v); out["seconds"] = time.perf_counter() - t0
    out["version"] = version("duckdb", duckdb)
    print(json.dumps(out))
elif action == "turso-q6":
    import turso
    t0 = time.perf_counter()
    con = turso.connect(sys.argv[2])
    v = con.execute(sys.argv[3]).fetchone()[0]
    out = answer(v); out["seconds"] = time.perf_counter() - t0
    con.close()
    out["version"] = version("pyturso", turso)
    print(json.dumps(out))
else:
    sys.exit("unknown action " + action)
"#;

/// How float answers are compared with the exact one.
pub const FLOAT_RULE: &str = "a float answer x agrees with the exact answer e when \
    |x - e| <= 1e-9 * |e| + 0.00005: binary floating point cannot represent cents exactly and \
    the engines sum millions of inexact products, but one TPC-H row contributes at least \
    0.05 x 900 = 45 to the revenue, so no missing or extra row fits inside the tolerance";

/// An engine's answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "lowercase")]
pub enum Answer {
    /// An exact decimal, in 1/10000 units.
    Exact(i128),
    /// A binary floating-point number.
    Float(f64),
    /// No rows matched and the engine returned NULL.
    Null,
}

impl Answer {
    /// Parses `text` as an exact decimal with at most four decimals (`123.45`, `-0.5`, `7`).
    pub fn parse_decimal(text: &str) -> Option<Answer> {
        let t = text.trim();
        let (neg, t) = t.strip_prefix('-').map_or((false, t), |r| (true, r));
        let (int, frac) = t.split_once('.').unwrap_or((t, ""));
        let frac = frac.trim_end_matches('0');
        if int.is_empty() && frac.is_empty()
            || frac.len() > 4
            || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let int: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let frac: i128 = format!("{frac:0<4}").parse().ok()?;
        let v = int.checked_mul(10_000)?.checked_add(frac)?;
        Some(Answer::Exact(if neg { -v } else { v }))
    }

    /// Parses an engine's printed answer of the given kind (`decimal`, `int`, `float`, `null`).
    pub fn parse(text: Option<&str>, kind: &str) -> Option<Answer> {
        match (kind, text) {
            ("null", _) | (_, None) => Some(Answer::Null),
            ("decimal" | "int", Some(t)) => Answer::parse_decimal(t),
            (_, Some(t)) => t.trim().parse::<f64>().ok().map(Answer::Float),
        }
    }

    /// Whether this answer agrees with the exact one (in 1/10000 units): exact answers must
    /// be equal, floats must satisfy [`FLOAT_RULE`], NULL stands for 0 (no row matched).
    pub fn agrees_with(&self, exact: i128) -> bool {
        match *self {
            Answer::Exact(v) => v == exact,
            Answer::Null => exact == 0,
            Answer::Float(x) => {
                let e = exact as f64 / 10_000.0;
                x.is_finite() && (x - e).abs() <= 1e-9 * e.abs() + 0.00005
            }
        }
    }
}

/// The `sqlite3` shell's version, or why it cannot be used.
pub fn probe_sqlite3() -> std::result::Result<String, String> {
    match Command::new("sqlite3").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout)
            .split_ascii_whitespace()
            .next()
            .unwrap_or("unknown")
            .to_string()),
        Ok(o) => Err(format!("sqlite3 --version failed: {}", one_line(&o.stderr))),
        Err(e) => Err(format!("sqlite3 is not on PATH ({e})")),
    }
}

/// The version of Python package `dist` (module `module`), or why it cannot be imported.
pub fn probe_python_module(module: &str, dist: &str) -> std::result::Result<String, String> {
    #[derive(Deserialize)]
    struct Probe {
        version: String,
    }
    match Command::new("python3")
        .args(["-c", PYTHON_HELPER, "probe", module, dist])
        .output()
    {
        Ok(o) if o.status.success() => serde_json::from_slice::<Probe>(&o.stdout)
            .map(|p| p.version)
            .map_err(|e| format!("unexpected probe output: {e}")),
        Ok(o) => Err(format!(
            "Python package {dist} is not importable ({}); pip install {dist}",
            last_line(&o.stderr)
        )),
        Err(e) => Err(format!("python3 is not on PATH ({e})")),
    }
}

/// One timed answer from a peer.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerRun {
    /// Seconds from opening the database to the answer.
    pub seconds: f64,
    /// The answer as the engine printed it.
    pub printed: String,
    /// The parsed answer.
    pub answer: Answer,
}

/// Runs `sql` in the `sqlite3` shell, read-only; the time is the whole process's (its start
/// costs about a millisecond).
pub fn run_sqlite3(db: &Path, sql: &str) -> Result<PeerRun> {
    let fail = |message: String| ExperimentError::Peer {
        engine: "sqlite3".into(),
        message,
    };
    let started = Instant::now();
    let out = Command::new("sqlite3")
        .arg("-readonly")
        .arg("-batch")
        .arg(db)
        .arg(sql)
        .output()
        .map_err(|e| fail(format!("run: {e}")))?;
    let seconds = started.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(fail(one_line(&out.stderr)));
    }
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let answer = if printed.is_empty() {
        Answer::Null
    } else {
        Answer::parse(Some(&printed), "float")
            .ok_or_else(|| fail(format!("cannot parse the answer {printed:?}")))?
    };
    Ok(PeerRun {
        seconds,
        printed,
        answer,
    })
}

/// Runs Q6 in DuckDB (`action` `duckdb-q6`) or Turso (`turso-q6`) over `db` via the Python
/// helper; returns the run and the package version.
pub fn run_python(engine: &str, action: &str, db: &Path, sql: &str) -> Result<(PeerRun, String)> {
    #[derive(Deserialize)]
    struct Out {
        answer: Option<String>,
        kind: String,
        seconds: f64,
        version: String,
    }
    let fail = |message: String| ExperimentError::Peer {
        engine: engine.into(),
        message,
    };
    let out = Command::new("python3")
        .args(["-c", PYTHON_HELPER, action])
        .arg(db)
        .arg(sql)
        .output()
        .map_err(|e| fail(format!("run python3: {e}")))?;
    if !out.status.success() {
        return Err(fail(last_line(&out.stderr)));
    }
    let o: Out = serde_json::from_slice(&out.stdout).map_err(|e| {
        fail(format!(
            "unexpected output {:?}: {e}",
            one_line(&out.stdout)
        ))
    })?;
    let answer = Answer::parse(o.answer.as_deref(), &o.kind).ok_or_else(|| {
        fail(format!(
            "cannot parse the answer {:?} ({})",
            o.answer, o.kind
        ))
    })?;
    let printed = o.answer.unwrap_or_else(|| "NULL".into());
    Ok((
        PeerRun {
            seconds: o.seconds,
            printed,
            answer,
        },
        o.version,
    ))
}

/// The cache directory for copies of `db`: `corescan-cache/<stem>-<size>-<mtime>` beside the
/// output directory `out` (never beside the database), so a changed file gets new copies.
pub fn cache_dir(out: &Path, db: &Path) -> Result<PathBuf> {
    let meta = std::fs::metadata(db).map_err(|e| ExperimentError::io(db, "stat", e))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let stem = db
        .file_stem()
        .map_or("db".into(), |s| s.to_string_lossy().into_owned());
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Ok(parent
        .join("corescan-cache")
        .join(format!("{stem}-{}-{mtime}", meta.len())))
}

/// A DuckDB copy of `table` in `cache`, made once: the table exported to CSV through
/// SQLite, then loaded by DuckDB with TPC-H's column types. Returns the `.duckdb` file and
/// whether it was made now.
pub fn duckdb_copy(db: &Path, table: &str, cache: &Path) -> Result<(PathBuf, bool)> {
    let target = cache.join(format!("{}.duckdb", table.to_ascii_lowercase()));
    if target.exists() {
        return Ok((target, false));
    }
    std::fs::create_dir_all(cache)
        .map_err(|e| ExperimentError::io(cache, "create directory", e))?;
    let csv_path = cache.join(format!("{}.csv", table.to_ascii_lowercase()));
    let columns = export_csv(db, table, &csv_path)?;
    let partial = cache.join("partial.duckdb");
    let _ = std::fs::remove_file(&partial);
    let _ = std::fs::remove_file(cache.join("partial.duckdb.wal"));
    let columns_json = serde_json::to_string(&columns).unwrap_or_default();
    let out = Command::new("python3")
        .args(["-c", PYTHON_HELPER, "duckdb-build"])
        .arg(&csv_path)
        .arg(&partial)
        .arg(columns_json)
        .arg(table.to_ascii_lowercase())
        .output();
    let _ = std::fs::remove_file(&csv_path);
    let fail = |message: String| ExperimentError::Peer {
        engine: "duckdb".into(),
        message,
    };
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return Err(fail(format!(
                "loading the CSV copy: {}",
                last_line(&o.stderr)
            )))
        }
        Err(e) => return Err(fail(format!("run python3: {e}"))),
    }
    std::fs::rename(&partial, &target)
        .map_err(|e| ExperimentError::io(&target, "rename the finished copy into place", e))?;
    Ok((target, true))
}

/// Writes every row of `table` to `csv_path`; returns each column's name and DuckDB type.
fn export_csv(db: &Path, table: &str, csv_path: &Path) -> Result<Vec<(String, String)>> {
    let sql_fail = |what: &str| {
        let what = what.to_string();
        move |source| ExperimentError::Sqlite {
            path: db.to_path_buf(),
            what: what.clone(),
            source,
        }
    };
    let conn = oracle::open_read_only(db)?;
    let t = quote_identifier(table);
    let mut info = conn
        .prepare(&format!("PRAGMA table_info({t})"))
        .map_err(sql_fail("read the columns"))?;
    let columns: Vec<(String, String)> = info
        .query_map([], |r| Ok((r.get::<_, String>(1)?, r.get::<_, String>(2)?)))
        .map_err(sql_fail("read the columns"))?
        .collect::<std::result::Result<_, _>>()
        .map_err(sql_fail("read the columns"))?;
    let typed: Vec<(String, String)> = columns
        .iter()
        .map(|(n, d)| (n.clone(), duckdb_type(n, d).to_string()))
        .collect();
    let fail = |e: csv::Error| ExperimentError::output(csv_path, format!("write CSV: {e}"));
    let mut w = csv::Writer::from_path(csv_path).map_err(fail)?;
    w.write_record(columns.iter().map(|(n, _)| n))
        .map_err(fail)?;
    let mut stmt = conn
        .prepare(&format!("SELECT * FROM {t}"))
        .map_err(sql_fail("export the table"))?;
    let mut rows = stmt.query([]).map_err(sql_fail("export the table"))?;
    let mut record: Vec<String> = Vec::with_capacity(columns.len());
    while let Some(row) = rows.next().map_err(sql_fail("export the table"))? {
        record.clear();
        for i in 0..columns.len() {
            use rusqlite::types::ValueRef;
            record.push(
                match row.get_ref(i).map_err(sql_fail("export the table"))? {
                    ValueRef::Null => String::new(),
                    ValueRef::Integer(v) => v.to_string(),
                    // Rust prints the shortest text that reads back as the same double, never in
                    // exponent form: 0.07 stays "0.07", which DuckDB parses exactly as a DECIMAL.
                    ValueRef::Real(v) => v.to_string(),
                    ValueRef::Text(b) | ValueRef::Blob(b) => {
                        String::from_utf8_lossy(b).into_owned()
                    }
                },
            );
        }
        w.write_record(&record).map_err(fail)?;
    }
    w.flush()
        .map_err(|e| ExperimentError::io(csv_path, "write", e))?;
    Ok(typed)
}

/// The DuckDB type for a column: TPC-H's types for the money and quantity columns, else by
/// SQLite's declared type.
fn duckdb_type(name: &str, declared: &str) -> &'static str {
    let n = name.to_ascii_lowercase();
    let d = declared.to_ascii_uppercase();
    if ["l_quantity", "l_extendedprice", "l_discount", "l_tax"].contains(&n.as_str())
        || d.starts_with("DEC")
        || d.starts_with("NUMERIC")
    {
        "DECIMAL(15,2)"
    } else if d.contains("INT") {
        "BIGINT"
    } else if d.contains("DATE") {
        "DATE"
    } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
        "DOUBLE"
    } else {
        "VARCHAR"
    }
}

/// A private copy of `db` in `cache` for Turso, made once (see the module docs).
pub fn turso_copy(db: &Path, cache: &Path) -> Result<(PathBuf, bool)> {
    let target = cache.join("turso-copy.db");
    if target.exists() {
        return Ok((target, false));
    }
    std::fs::create_dir_all(cache)
        .map_err(|e| ExperimentError::io(cache, "create directory", e))?;
    let partial = cache.join("turso-copy.db.partial");
    std::fs::copy(db, &partial)
        .map_err(|e| ExperimentError::io(&partial, "copy the database for Turso", e))?;
    std::fs::rename(&partial, &target)
        .map_err(|e| ExperimentError::io(&target, "rename the finished copy into place", e))?;
    Ok((target, true))
}

fn one_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim()
        .replace(['\n', '\r'], " ")
}

fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim()
        .lines()
        .last()
        .unwrap_or("no message")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_parse_exactly() {
        assert_eq!(
            Answer::parse_decimal("123141078.2283"),
            Some(Answer::Exact(1_231_410_782_283))
        );
        assert_eq!(Answer::parse_decimal("7.5"), Some(Answer::Exact(75_000)));
        assert_eq!(Answer::parse_decimal("-0.0001"), Some(Answer::Exact(-1)));
        assert_eq!(Answer::parse_decimal("12"), Some(Answer::Exact(120_000)));
        assert_eq!(
            Answer::parse_decimal("1.000000"),
            Some(Answer::Exact(10_000))
        );
        for bad in ["", ".", "1.00001", "1e5", "x", "1.2.3"] {
            assert_eq!(Answer::parse_decimal(bad), None, "{bad}");
        }
    }

    #[test]
    fn float_rule() {
        let exact = 1_231_410_782_283; // 123141078.2283
        assert!(Answer::Float(123141078.2283).agrees_with(exact));
        assert!(Answer::Float(123141078.25).agrees_with(exact));
        // One row less (at least 45) is far outside.
        assert!(!Answer::Float(123141033.0).agrees_with(exact));
        assert!(Answer::Float(7.2675).agrees_with(72_675));
        assert!(!Answer::Float(7.2676).agrees_with(72_675));
        assert!(Answer::Null.agrees_with(0));
        assert!(!Answer::Exact(1).agrees_with(0));
    }

    #[test]
    fn duckdb_types() {
        assert_eq!(duckdb_type("L_DISCOUNT", "REAL"), "DECIMAL(15,2)");
        assert_eq!(duckdb_type("L_ORDERKEY", "INTEGER"), "BIGINT");
        assert_eq!(duckdb_type("L_SHIPDATE", "DATE"), "DATE");
        assert_eq!(duckdb_type("L_COMMENT", "VARCHAR(44)"), "VARCHAR");
    }
}
