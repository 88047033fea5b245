//! `corescan query` against SQLite on the same file: hand-written cases for every supported
//! construct ([`cases`]), the functions and clauses beyond the core grammar ([`functions`]), the same queries under every scan setting ([`settings`]), the
//! command line ([`cli`]), streamed projections in rowid order on fragmented tables
//! ([`stream`]), one table over several files ([`files`]), tables read through their indexes
//! in SQLite's order ([`indexes`]), uncorrelated subqueries ([`subqueries`]), grouped pages on the typed and the general path ([`typed_runs`]), and a
//! random differential tester ([`differential`]).
//!
//! Every check of an answer goes through [`QueryTester`] ([`tester`]), which runs it under the
//! backends, core counts, readahead windows and row paths a test asks for; [`check`] and its
//! siblings are its one-configuration shorthands.
//!
//! Rows compare exactly (integers, text, blobs, NULL, and their storage classes), except reals
//! from `sum`/`avg`/`total`, which may differ from SQLite's: corescan sums exactly and rounds
//! once, SQLite with Kahan-Babuska-Neumaier compensation. The hand-written cases allow two
//! units in the last place; the differential tester and [`check_exact`] compare bit for bit
//! with an exact reference instead ([`exact`]).

mod cases;
mod cli;
mod dates;
mod derived;
mod differential;
mod exact;
mod files;
mod functions;
mod group_keys;
mod group_spill;
mod indexes;
mod over;
mod settings;
mod sort;
mod stream;
mod subqueries;
mod tester;
mod typed_runs;
mod window;

use std::path::{Path, PathBuf};

use engine::value::Value;
use rusqlite::{Connection, OpenFlags};
use testkit::Rng;

pub use tester::{Axis, Config, Cores, Io, QueryTester, RowPath, Window};

/// A query's column names and rows, or its error message.
pub type Answer = Result<(Vec<String>, Vec<Vec<Value>>), String>;

/// SQLite's answer (a plain read-only connection, so a `-wal` file is read as SQLite reads it).
pub fn sqlite_answer(path: &Path, sql: &str) -> Answer {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| e.to_string())?;
    answer_on(&conn, sql)
}

/// Asserts that `corescan query` (the binary, which plans with the statement's subquery runner
/// and follows views) answers `sql` on `db` with SQLite's rows, in order, under four
/// backend and core-count configurations (JSON output; reals within 1e-12 relative; no blob
/// columns). Returns the last run's report (`--report`, on stderr).
pub fn binary_answers_as_sqlite(db: &Path, sql: &str) -> String {
    let (names, rows) = sqlite_answer(db, sql).unwrap();
    let path = db.to_str().unwrap();
    let mut report = String::new();
    for config in [
        ["--io", "pread", "--cores", "1"],
        ["--io", "mmap", "--cores", "2"],
        ["--io", "dma", "--cores", "2"],
        ["--io", "auto", "--cores", "1"],
    ] {
        let mut args = vec!["query", path, sql, "--format", "json", "--report"];
        args.extend(config);
        let run = crate::corescan(args);
        assert_eq!(run.status, 0, "{sql} {config:?}: {}", run.stderr);
        let got: Vec<serde_json::Value> = if run.stdout.trim().is_empty() {
            Vec::new()
        } else {
            serde_json::from_str(&run.stdout).unwrap()
        };
        assert_eq!(got.len(), rows.len(), "{sql} {config:?}");
        for (g, want) in got.iter().zip(&rows) {
            for (name, w) in names.iter().zip(want) {
                let v = &g[name.as_str()];
                let same = match w {
                    Value::Null => v.is_null(),
                    Value::Integer(i) => v.as_i64() == Some(*i),
                    Value::Real(r) => v
                        .as_f64()
                        .is_some_and(|x| (x - r).abs() <= 1e-12 * r.abs().max(1.0)),
                    Value::Text(t) => v.as_str().map(str::as_bytes) == Some(&t[..]),
                    Value::Blob(_) => false,
                };
                assert!(
                    same,
                    "{sql} {config:?}: column {name}: SQLite {w:?}, corescan {v}"
                );
            }
        }
        report = run.stderr;
    }
    report
}

/// The answer to `sql` on an open connection.
pub fn answer_on(conn: &Connection, sql: &str) -> Answer {
    let mut stmt = conn.prepare(sql).map_err(|e| e.to_string())?;
    let names: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
    let n = names.len();
    let mut rows = stmt.query([]).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(|e| e.to_string())? {
        let mut values = Vec::with_capacity(n);
        for i in 0..n {
            use rusqlite::types::ValueRef as R;
            values.push(match row.get_ref(i).map_err(|e| e.to_string())? {
                R::Null => Value::Null,
                R::Integer(i) => Value::Integer(i),
                R::Real(r) => Value::Real(r),
                R::Text(t) => Value::Text(t.to_vec()),
                R::Blob(b) => Value::Blob(b.to_vec()),
            });
        }
        out.push(values);
    }
    Ok((names, out))
}

/// Whether two result values agree: the same storage class and value; reals equal or, when
/// `loose_reals`, within two units in the last place. corescan sums reals exactly and rounds
/// once (so its answer is the same for every core count and file order); SQLite's compensated
/// summation is exact only while the partial sums stay within its error bound, so on values of
/// wide dynamic range its sum can be one unit from the correctly rounded one, and `avg`
/// divides that sum, adding a rounding of its own: two units between the engines' averages.
pub fn same_value(a: &Value, b: &Value, loose_reals: bool) -> bool {
    match (a, b) {
        (Value::Real(x), Value::Real(y)) => {
            x.to_bits() == y.to_bits()
                || x == y
                || (loose_reals
                    && x.is_finite()
                    && y.is_finite()
                    && (x.to_bits() as i64 - y.to_bits() as i64).abs() <= 2
                    && x.signum() == y.signum())
        }
        _ => a == b,
    }
}

/// Compares two answers; `None` when they agree, else a description of the first difference.
pub fn difference(want: &Answer, got: &Answer, loose_reals: bool) -> Option<String> {
    match (want, got) {
        (Err(_), Err(_)) => None,
        (Ok(_), Err(e)) => Some(format!("SQLite answered, corescan failed: {e}")),
        (Err(e), Ok(_)) => Some(format!("SQLite failed ({e}), corescan answered")),
        (Ok((wn, wr)), Ok((gn, gr))) => {
            if wn != gn {
                return Some(format!("column names: SQLite {wn:?}, corescan {gn:?}"));
            }
            if wr.len() != gr.len() {
                return Some(format!(
                    "{} rows from SQLite, {} from corescan; first rows: {:?} / {:?}",
                    wr.len(),
                    gr.len(),
                    wr.iter().take(3).collect::<Vec<_>>(),
                    gr.iter().take(3).collect::<Vec<_>>()
                ));
            }
            for (i, (w, g)) in wr.iter().zip(gr).enumerate() {
                if w.len() != g.len()
                    || !w.iter().zip(g).all(|(a, b)| same_value(a, b, loose_reals))
                {
                    let cols: Vec<String> = w
                        .iter()
                        .zip(g)
                        .enumerate()
                        .filter(|(_, (a, b))| !same_value(a, b, loose_reals))
                        .map(|(c, (a, b))| {
                            let short = |v: &Value| {
                                let t = format!("{v:?}");
                                t.chars().take(120).collect::<String>()
                            };
                            format!("column {c}: SQLite {}, corescan {}", short(a), short(b))
                        })
                        .collect();
                    return Some(format!("row {i}: {}", cols.join("; ")));
                }
            }
            None
        }
    }
}

/// Asserts that corescan answers `sql` on `path` as SQLite does, in one configuration (which
/// one the SQL text decides: a test's queries together run under every backend, core count,
/// window and path; see [`tester`]).
#[track_caller]
pub fn check(path: &Path, sql: &str) {
    QueryTester::new(path, sql).span(&[]).check();
}

/// Asserts that corescan answers `sql` on `path` as SQLite does with exact `sum`, `total`
/// and `avg` ([`exact`]), reals bit for bit, in one configuration as [`check`] chooses it;
/// returns SQLite's own answer.
#[track_caller]
pub fn check_exact(path: &Path, sql: &str) -> Answer {
    QueryTester::new(path, sql).exact_sums().span(&[]).check();
    sqlite_answer(path, sql)
}

/// Asserts that corescan fails on `sql` with a message containing `needle`, in one
/// configuration as [`check`] chooses it.
#[track_caller]
pub fn check_error(path: &Path, sql: &str, needle: &str) {
    QueryTester::new(path, sql)
        .fails_with(needle)
        .span(&[])
        .check();
}

/// A value literal for row `i` of a mixed column: every storage class, NULLs, numeric text,
/// dates, long text and blobs (overflow pages on small pages).
pub fn mixed_literal(rng: &mut Rng) -> String {
    match rng.below(16) {
        0 | 1 => "NULL".into(),
        2 => format!("{}", rng.below(200) as i64 - 100),
        3 => format!("{}", rng.next_u64() as i64),
        4 => format!("{:.3}", (rng.below(20000) as f64 - 10000.0) / 7.0),
        5 => format!("{}.5", rng.below(50)),
        6 => format!("'{}'", rng.below(100)),
        7 => format!("' {}.25 '", rng.below(10)),
        8 => format!("'{}abc'", rng.below(10)),
        9 => format!(
            "'199{}-0{}-1{}'",
            rng.below(10),
            1 + rng.below(9),
            rng.below(10)
        ),
        10 => (*rng.pick(&[
            "'apple'",
            "'Apple'",
            "'APPLE  '",
            "'banana'",
            "''",
            "'a%b_c'",
        ]))
        .to_string(),
        11 => format!("x'{:02x}{:02x}'", rng.below(256), rng.below(256)),
        12 => format!("'{}'", "long text ".repeat(50 + rng.below(400) as usize)),
        13 => {
            // From the seed, not randomblob(): a table seed must rebuild the same file.
            let n = 100 + rng.below(3000) as usize;
            let mut hex = String::with_capacity(2 * n + 3);
            hex.push_str("x'");
            while hex.len() < 2 + 2 * n {
                let bits = rng.next_u64();
                for byte in bits.to_le_bytes().iter().take((2 + 2 * n - hex.len()) / 2) {
                    hex.push_str(&format!("{byte:02x}"));
                }
            }
            hex.push('\'');
            hex
        }
        14 => "9223372036854775807".into(),
        _ => format!("{}", rng.below(5)),
    }
}

/// Creates `path` as a table `t` with every kind of column: an INTEGER PRIMARY KEY, typed
/// columns holding mixed storage classes, NOCASE and RTRIM columns, a VIRTUAL and a STORED
/// generated column, and columns added by ALTER TABLE after rows existed (their DEFAULTs).
/// Returns a connection kept open when `wal` (so the `-wal` file stays).
pub fn mixed_table(
    path: &Path,
    page_size: u32,
    rows: usize,
    seed: u64,
    wal: bool,
) -> Option<Connection> {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(path.with_extension("db-wal"));
    let conn = Connection::open(path).expect("create the database");
    conn.execute_batch(&format!("PRAGMA page_size={page_size};"))
        .unwrap();
    if wal {
        conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;")
            .unwrap();
    }
    conn.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, i INT, r REAL, s TEXT, n NUMERIC, b BLOB, x,
             c TEXT COLLATE NOCASE, rt TEXT COLLATE RTRIM,
             g AS (i * 2) VIRTUAL, gs AS (s || '!') STORED);",
    )
    .unwrap();
    let mut rng = Rng::new(seed);
    let insert = |conn: &Connection, rng: &mut Rng, extra: bool, id: Option<i64>| {
        let mut cols = vec!["i", "r", "s", "n", "b", "x", "c", "rt"];
        if extra {
            cols.extend(["added", "added2"]);
        }
        let mut values: Vec<String> = cols.iter().map(|_| mixed_literal(rng)).collect();
        if let Some(id) = id {
            cols.push("id");
            values.push(id.to_string());
        }
        let sql = format!(
            "INSERT INTO t({}) VALUES ({})",
            cols.join(","),
            values.join(",")
        );
        conn.execute_batch(&sql).unwrap();
    };
    conn.execute_batch("BEGIN").unwrap();
    for _ in 0..rows {
        insert(&conn, &mut rng, false, None);
    }
    conn.execute_batch(
        "COMMIT; ALTER TABLE t ADD COLUMN added INT DEFAULT 42;
         ALTER TABLE t ADD COLUMN added2 TEXT DEFAULT 'dflt'; BEGIN;",
    )
    .unwrap();
    for _ in 0..rows / 4 {
        insert(&conn, &mut rng, true, None);
    }
    conn.execute_batch("DELETE FROM t WHERE id % 7 = 3; COMMIT;")
        .unwrap();
    // Rows with rowids below all others land on new pages at the end of the file: the
    // table's leaves are no longer in rowid order.
    conn.execute_batch("BEGIN").unwrap();
    for k in 0..rows / 5 {
        insert(&conn, &mut rng, true, Some(-1 - k as i64));
    }
    conn.execute_batch("COMMIT").unwrap();
    if wal {
        Some(conn)
    } else {
        drop(conn);
        None
    }
}

/// The shared fixture: [`mixed_table`] with 1 KiB pages.
pub fn fixture() -> &'static Path {
    static DB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DB.get_or_init(|| {
        let path = crate::scratch_dir("query-fixture").join("mixed.db");
        mixed_table(&path, 1024, 400, 7, false);
        path
    })
}
