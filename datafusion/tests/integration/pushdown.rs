//! Filters pushed into the scan keep exactly DataFusion's rows: random `WHERE` clauses over
//! columns of every type, with the values where SQLite's rules and Arrow's part (`-0.0`, ASCII
//! case under `NOCASE` and `LIKE`, decimals one digit past their scale, the ends of the date
//! and integer ranges, quotes), each answered with the pushdown and without (DataFusion
//! filtering every row), which must agree row for row.

use std::path::Path;

use corescan_datafusion::TableOptions;
use engine::Placement;
use rusqlite::types::Value as Sql;
use rusqlite::Connection;
use testkit::Rng;

use crate::{datafusion_tables, runtime, scratch_dir, session};

/// Columns, and literals (in DataFusion's dialect) they are compared with.
const COLUMNS: &[(&str, &[&str])] = &[
    (
        "i",
        &[
            "-1",
            "0",
            "2",
            "5",
            "9223372036854775807",
            "-9223372036854775807",
        ],
    ),
    ("s", TEXTS),
    ("n", TEXTS),
    (
        "d",
        &[
            "DATE '1994-01-01'",
            "DATE '1970-01-01'",
            "DATE '9999-12-31'",
            "DATE '1994-01-01' + INTERVAL '1' YEAR",
        ],
    ),
    (
        "m",
        &[
            "0.05",
            "0.07",
            "0.065",
            "24",
            "0.06 + 0.01",
            "-0.05",
            "0",
            "23.99",
        ],
    ),
    ("r", &["0.0", "-0.0", "1.5", "2"]),
];

const TEXTS: &[&str] = &["'a'", "'A'", "'ab'", "''", "'o''k'", "'é'", "'É'", "'zz'"];

const PATTERNS: &[&str] = &[
    "'a%'", "'A%'", "'%b'", "'a_c'", "'%'", "'é%'", "'a\\%b'", "'_'",
];

/// A table whose rows take every column's values from small lists, so that comparisons hit.
fn table(path: &Path, rng: &mut Rng) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE T(id INTEGER PRIMARY KEY, i INTEGER, s TEXT, n TEXT COLLATE NOCASE,
             d DATE, m DECIMAL(10,2), r REAL)",
    )
    .unwrap();
    let ints = [
        Sql::Null,
        Sql::Integer(-3),
        Sql::Integer(-1),
        Sql::Integer(0),
        Sql::Integer(2),
        Sql::Integer(5),
        Sql::Integer(i64::MAX),
        Sql::Integer(i64::MIN + 1),
    ];
    let texts: Vec<Sql> = [
        "", "a", "A", "ab", "aB", "b", "o'k", "é", "É", "a%b", "a_c", "abc", "zz",
    ]
    .iter()
    .map(|t| Sql::Text((*t).into()))
    .chain([Sql::Null])
    .collect();
    let dates: Vec<Sql> = [
        "1970-01-01",
        "1993-12-31",
        "1994-01-01",
        "1994-06-15",
        "1995-01-01",
        "2024-02-29",
        "0001-01-01",
        "9999-12-31",
    ]
    .iter()
    .map(|t| Sql::Text((*t).into()))
    .chain([Sql::Null])
    .collect();
    let money = [
        Sql::Null,
        Sql::Real(0.05),
        Sql::Real(0.06),
        Sql::Real(0.07),
        Sql::Real(-0.05),
        Sql::Real(23.99),
        Sql::Integer(24),
        Sql::Integer(5),
        Sql::Real(0.0),
        Sql::Real(-0.0),
        Sql::Real(99_999_999.99),
    ];
    let reals = [
        Sql::Null,
        Sql::Real(0.0),
        Sql::Real(-0.0),
        Sql::Real(1.5),
        Sql::Real(-1.5),
        Sql::Real(1e300),
        Sql::Integer(2),
    ];
    let tx = conn.unchecked_transaction().unwrap();
    {
        let mut insert = tx
            .prepare("INSERT INTO T(i, s, n, d, m, r) VALUES (?, ?, ?, ?, ?, ?)")
            .unwrap();
        for _ in 0..400 {
            insert
                .execute([
                    rng.pick(&ints).clone(),
                    rng.pick(&texts).clone(),
                    rng.pick(&texts).clone(),
                    rng.pick(&dates).clone(),
                    rng.pick(&money).clone(),
                    rng.pick(&reals).clone(),
                ])
                .unwrap();
        }
    }
    tx.commit().unwrap();
}

/// One random term of depth at most `depth`.
fn term(rng: &mut Rng, depth: u32) -> String {
    let (column, literals) = *rng.pick(COLUMNS);
    let lit = |rng: &mut Rng| rng.pick(literals).to_string();
    match rng.below(if depth == 0 { 6 } else { 9 }) {
        0 | 1 => {
            let op = rng.pick(&["=", "<>", "<", "<=", ">", ">="]);
            if rng.percent(20) {
                format!("{} {op} {column}", lit(rng))
            } else {
                format!("{column} {op} {}", lit(rng))
            }
        }
        2 => {
            let not = if rng.percent(30) { "NOT " } else { "" };
            format!("{column} {not}BETWEEN {} AND {}", lit(rng), lit(rng))
        }
        3 => {
            let not = if rng.percent(30) { "NOT " } else { "" };
            format!("{column} {not}IN ({}, {})", lit(rng), lit(rng))
        }
        4 => {
            let not = if rng.percent(50) { "NOT " } else { "" };
            format!("{column} IS {not}NULL")
        }
        5 => {
            let column = rng.pick(&["s", "n"]);
            let not = if rng.percent(25) { "NOT " } else { "" };
            format!("{column} {not}LIKE {}", rng.pick(PATTERNS))
        }
        6 => format!("NOT ({})", term(rng, depth - 1)),
        7 => format!("({} AND {})", term(rng, depth - 1), term(rng, depth - 1)),
        _ => format!("({} OR {})", term(rng, depth - 1), term(rng, depth - 1)),
    }
}

/// Whether `sql`'s plan has a filter in its corescan scan, and an exact one (no `FilterExec`).
fn pushed(db: &Path, sql: &str) -> (bool, bool) {
    let plan = runtime().block_on(async {
        let ctx = session(db, Placement::default(), TableOptions::default()).unwrap();
        let plan = ctx
            .sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let text = datafusion::physical_plan::displayable(plan.as_ref())
            .indent(true)
            .to_string();
        text
    });
    let in_scan = plan.contains("CorescanExec") && plan.contains("filter=");
    (in_scan, in_scan && !plan.contains("FilterExec"))
}

#[test]
fn random_filters_keep_the_same_rows_pushed_into_the_scan_or_not() {
    let dir = scratch_dir("pushdown");
    let db = dir.join("pushdown.db");
    let mut rng = Rng::new(0x5eed_f11e);
    table(&db, &mut rng);
    let off = TableOptions {
        push_filters: false,
        ..TableOptions::default()
    };
    let (mut compared, mut in_scan, mut exact) = (0, 0, 0);
    for _ in 0..250 {
        let filter = term(&mut rng, 2);
        let sql = format!("SELECT id FROM t WHERE {filter} ORDER BY id");
        let without = datafusion_tables(&db, &sql, Placement::default(), off.clone());
        let with = datafusion_tables(&db, &sql, Placement::default(), TableOptions::default());
        match (without, with) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a.rows, b.rows, "{sql}: rows differ with the filter pushed");
                compared += 1;
                let (s, e) = pushed(&db, &sql);
                in_scan += usize::from(s);
                exact += usize::from(e);
            }
            // A query DataFusion refuses (a date compared with a number) is refused either way.
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{sql}"),
            (a, b) => panic!("{sql}: without pushdown {a:?}, with {b:?}"),
        }
    }
    // The comparison means something only if most filters did reach the scan.
    assert!(compared >= 150, "only {compared} of 250 queries ran");
    assert!(in_scan * 2 >= compared, "{in_scan} of {compared} pushed");
    assert!(
        exact * 4 >= compared,
        "{exact} of {compared} pushed exactly"
    );
}

#[test]
fn a_pushed_filter_shows_in_the_plan_and_replaces_datafusions() {
    let dir = scratch_dir("pushdown-plan");
    let db = dir.join("plan.db");
    table(&db, &mut Rng::new(7));
    let sql =
        "SELECT id FROM t WHERE m BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND d < DATE '1995-01-01'";
    assert_eq!(pushed(&db, sql), (true, true));
    // A REAL column is compared by DataFusion (Arrow orders -0.0 before 0.0).
    assert_eq!(
        pushed(&db, "SELECT id FROM t WHERE r < 0.0"),
        (false, false)
    );
    // LIKE narrows the scan; DataFusion still filters (SQLite's LIKE ignores ASCII case).
    assert_eq!(
        pushed(&db, "SELECT id FROM t WHERE s LIKE 'a%'"),
        (true, false)
    );
}
