//! Random joins of two and three tables an application wrote, through DataFusion over
//! corescan's scans, each compared row for row with SQLite's answer to the same text.
//!
//! The tables hold integers, text and dates with NULLs, duplicate keys and keys that match
//! nothing; the queries are inner and left joins on keys and on non-key columns,
//! `IN`/`EXISTS` subqueries, `WHERE` terms (pushed into the scans or not), and grouped
//! aggregates whose results are exact in both engines (`count`, integer `sum`, `min`/`max` of
//! text and dates). Every query orders by all its output columns with `NULLS FIRST` (SQLite's
//! order for NULLs), so both engines' rows come in one order. Each runs under one and two
//! executors per scan.

use std::path::Path;

use engine::Placement;
use rusqlite::types::Value as Sql;
use rusqlite::Connection;
use testkit::Rng;

use crate::{datafusion_with, scratch_dir, sqlite};

/// Three tables: `a` (200 rows), `b` (300, pointing at `a`, some at nothing), `c` (150,
/// pointing at `b`).
fn tables(path: &Path, rng: &mut Rng) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE A(id INTEGER PRIMARY KEY, k INTEGER, g TEXT, d DATE);
         CREATE TABLE b(id INTEGER PRIMARY KEY, a_id INTEGER, k INTEGER, w INTEGER);
         CREATE TABLE c(id INTEGER PRIMARY KEY, b_id INTEGER, t TEXT COLLATE BINARY);",
    )
    .unwrap();
    let maybe = |v: Sql, rng: &mut Rng| if rng.percent(10) { Sql::Null } else { v };
    let groups = ["x", "y", "z", "X", "é", ""];
    let dates = ["1994-01-01", "1994-06-30", "1995-01-01", "2024-02-29"];
    let tx = conn.unchecked_transaction().unwrap();
    for _ in 0..200 {
        let row = [
            maybe(Sql::Integer(rng.below(20) as i64), rng),
            maybe(Sql::Text(rng.pick(&groups).to_string()), rng),
            maybe(Sql::Text(rng.pick(&dates).to_string()), rng),
        ];
        tx.execute("INSERT INTO A(k, g, d) VALUES (?, ?, ?)", row)
            .unwrap();
    }
    for _ in 0..300 {
        let row = [
            maybe(Sql::Integer(1 + rng.below(220) as i64), rng),
            maybe(Sql::Integer(rng.below(20) as i64), rng),
            maybe(Sql::Integer(rng.below(100) as i64 - 30), rng),
        ];
        tx.execute("INSERT INTO b(a_id, k, w) VALUES (?, ?, ?)", row)
            .unwrap();
    }
    for i in 0..150 {
        let row = [
            maybe(Sql::Integer(1 + rng.below(320) as i64), rng),
            maybe(Sql::Text(format!("t{}", (i * 7) % 23)), rng),
        ];
        tx.execute("INSERT INTO c(b_id, t) VALUES (?, ?)", row)
            .unwrap();
    }
    tx.commit().unwrap();
}

/// A `WHERE` term over `a`, `b` or `c` (by their aliases), in the dialect both engines share.
fn term(rng: &mut Rng, with_c: bool) -> String {
    let mut choices = vec![
        format!(
            "a.k {} {}",
            rng.pick(&["=", "<", ">=", "<>"]),
            rng.below(20)
        ),
        format!(
            "a.g {} '{}'",
            rng.pick(&["=", "<", ">"]),
            rng.pick(&["x", "y", "X"])
        ),
        format!("a.d < '{}'", rng.pick(&["1994-06-30", "1995-01-01"])),
        "a.g IS NULL".to_string(),
        format!(
            "b.w {} {}",
            rng.pick(&["<", ">", "="]),
            rng.below(60) as i64 - 20
        ),
        format!("b.k BETWEEN {} AND {}", rng.below(10), 10 + rng.below(10)),
        format!("(b.w < 0 OR a.k IN ({}, {}))", rng.below(20), rng.below(20)),
    ];
    if with_c {
        choices.push(format!(
            "c.t {} 't{}'",
            rng.pick(&["=", ">"]),
            rng.below(23)
        ));
        choices.push("c.t IS NOT NULL".to_string());
    }
    rng.pick(&choices).clone()
}

/// One random query in the SQL both engines read alike.
fn query(rng: &mut Rng) -> String {
    let join = *rng.pick(&["JOIN", "LEFT JOIN"]);
    let on_ab = *rng.pick(&["a.id = b.a_id", "a.k = b.k", "a.id = b.a_id AND a.k <= b.k"]);
    let with_c = rng.percent(50);
    let from = if with_c {
        let join_c = *rng.pick(&["JOIN", "LEFT JOIN"]);
        format!("a {join} b ON {on_ab} {join_c} c ON c.b_id = b.id")
    } else {
        format!("a {join} b ON {on_ab}")
    };
    let filter = match rng.below(3) {
        0 => String::new(),
        1 => format!(" WHERE {}", term(rng, with_c)),
        _ => format!(" WHERE {} AND {}", term(rng, with_c), term(rng, with_c)),
    };
    match rng.below(4) {
        0 => {
            let c = if with_c { ", c.t" } else { "" };
            format!(
                "SELECT a.id, a.g, a.d, b.id, b.w{c} FROM {from}{filter} \
                 ORDER BY 1 NULLS FIRST, 2 NULLS FIRST, 3 NULLS FIRST, 4 NULLS FIRST, \
                 5 NULLS FIRST{}",
                if with_c { ", 6 NULLS FIRST" } else { "" }
            )
        }
        1 => {
            let key = *rng.pick(&["a.g", "a.d", "b.k", "a.k"]);
            let c = if with_c {
                ", max(c.t), count(c.id)"
            } else {
                ""
            };
            format!(
                "SELECT {key}, count(*), sum(b.w), min(a.g), max(a.d){c} FROM {from}{filter} \
                 GROUP BY {key} ORDER BY 1 NULLS FIRST"
            )
        }
        2 => format!(
            "SELECT a.id, a.k FROM a WHERE a.k {} (SELECT b.k FROM b WHERE b.w > {}) \
             ORDER BY 1 NULLS FIRST, 2 NULLS FIRST",
            rng.pick(&["IN", "NOT IN"]),
            rng.below(60) as i64 - 20
        ),
        _ => format!(
            "SELECT a.id, a.g FROM a WHERE {}EXISTS (SELECT 1 FROM b WHERE b.a_id = a.id \
             AND b.w < {}) ORDER BY 1 NULLS FIRST, 2 NULLS FIRST",
            if rng.percent(50) { "NOT " } else { "" },
            rng.below(60) as i64 - 20
        ),
    }
}

#[test]
fn random_joins_of_two_and_three_tables_give_sqlites_rows() {
    let dir = scratch_dir("joins");
    let db = dir.join("app.db");
    let mut rng = Rng::new(0x0010_1a5e);
    tables(&db, &mut rng);
    let mut nonempty = 0;
    for i in 0..120 {
        let sql = query(&mut rng);
        let theirs = sqlite(&db, &sql);
        let placement = if i % 2 == 0 {
            Placement::Cores(1)
        } else {
            Placement::default()
        };
        let ours = datafusion_with(&db, &sql, placement).unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(ours.rows, theirs, "{sql}");
        nonempty += usize::from(!theirs.is_empty());
    }
    // The comparison means something only if most queries have rows to compare.
    assert!(nonempty >= 90, "only {nonempty} of 120 queries had rows");
}
