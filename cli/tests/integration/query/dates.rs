//! The date functions against SQLite: every modifier of <https://sqlite.org/lang_datefunc.html>
//! (and `end of`, which SQLite 3.54 also knows) on every form of time value, every `strftime`
//! conversion, and `'now'`: one instant per statement, for every row and executor.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::{Axis, Config, Cores, Io, QueryTester, RowPath, Window};
use crate::scratch_dir;

fn table() -> &'static Path {
    static DB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DB.get_or_init(|| {
        let path = scratch_dir("query-dates").join("dates.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE d(v, g INTEGER);
             INSERT INTO d(v) VALUES ('2024-01-31'), ('2024-02-29 13:45:30.123'),
               ('1994-12-31T23:59:59Z'), ('2000-06-15 08:00:00+05:30'), ('2000-06-15 08:00 -02:00'),
               ('2000-06-15 08:00:00 z'), ('2000-06-15 08:00-0530'), ('12:34:56'), ('24:00'),
               ('2024-03-10 24:00:00'), ('2024-12-31 24:00'), ('07:08:09.987654'),
               (2460000.5), (2451545), (1700000000), (1700000000.5), (-1), (0), (5373484.4),
               ('2460000.25'), (' 2024-01-01'), (NULL), ('garbage'), ('2023-02-31'),
               (x'323032342d30312d3031'), ('-0044-03-15'), ('9999-12-31 23:59:59.999'),
               ('0000-01-01'), ('2024-01-07 00:00'), ('2021-01-03'), ('2020-12-31 12:00'),
               ('2026-06-30T18:30:00.5-07:00'), ('1970-01-01'), ('2038-03-01 12:00'),
               ('1900-07-04 09:10'), ('2024-1-5'), ('2024-01-05T'), ('2024-01-05 10:00:00Zx');
             UPDATE d SET g = rowid % 3;",
        )
        .unwrap();
        path
    })
}

const MODIFIERS: &[&[&str]] = &[
    &[],
    &["+1 day"],
    &["-1.5 days"],
    &["+36 hours"],
    &["+90 minutes"],
    &["-30.25 seconds"],
    &["+1 month"],
    &["-13 months"],
    &["+1.5 months"],
    &["+2 years"],
    &["+0.5 years"],
    &["+1 month", "floor"],
    &["+1 month", "ceiling"],
    &["-1 year", "floor"],
    &["start of day"],
    &["start of month"],
    &["start of year"],
    &["end of day"],
    &["end of month"],
    &["end of year"],
    &["start of month", "+1 month", "-1 day"],
    &["weekday 0"],
    &["weekday 3"],
    &["weekday 6"],
    &["weekday -2"],
    &["weekday 7"],
    &["weekday 1.5"],
    &["unixepoch"],
    &["julianday"],
    &["auto"],
    &["unixepoch", "localtime"],
    &["localtime"],
    &["utc"],
    &["localtime", "utc"],
    &["subsec"],
    &["subsecond"],
    &["auto", "subsec"],
    &["+01:30"],
    &["-02:15:30.5"],
    &["+24:00"],
    &["+0001-02-03"],
    &["-0000-01-15 10:20"],
    &["+0001-01-01 01:02:03.5"],
    &["+00001-00-00"],
    &["0001-00-00"],
    &["garbage"],
    &["+1 fortnight"],
    &["+1 days "],
    &["START OF MONTH"],
    &["+1 DAY", "Weekday 2"],
    &["+5373485 days"],
    &["+1e3 seconds"],
    &["1 day", "auto"],
];

fn quoted(args: &[&str]) -> String {
    args.iter()
        .map(|a| format!(", '{}'", a.replace('\'', "''")))
        .collect()
}

/// SQLite's answer, reals bit for bit, in one configuration (see [`super::check`]).
fn check(db: &Path, sql: &str) {
    QueryTester::new(db, sql).exact_reals().span(&[]).check();
}

/// Asserts that SQLite and corescan both refuse `sql` (their messages differ).
fn both_fail(db: &Path, sql: &str) {
    QueryTester::new(db, sql)
        .sqlite_may_fail()
        .span(&[])
        .check()
        .oracle
        .expect_err(sql);
}

#[test]
fn every_modifier_matches_sqlite() {
    let db = table();
    for mods in MODIFIERS {
        let m = quoted(mods);
        check(
            db,
            &format!(
                "SELECT v, date(v{m}), time(v{m}), datetime(v{m}), julianday(v{m}), \
                 unixepoch(v{m}) FROM d"
            ),
        );
    }
}

#[test]
fn every_strftime_conversion_matches_sqlite() {
    let db = table();
    let all = "%d|%e|%f|%F|%G|%g|%H|%I|%j|%J|%k|%l|%m|%M|%p|%P|%R|%s|%S|%T|%u|%U|%V|%w|%W|%Y|%%";
    for fmt in all
        .split('|')
        .chain([all, "%q", "x%", "plain", "%Y-%m-%dT%H:%M:%fZ"])
    {
        for mods in [&[][..], &["subsec"], &["+12 hours", "weekday 1"]] {
            check(
                db,
                &format!("SELECT v, strftime('{fmt}', v{}) FROM d", quoted(mods)),
            );
        }
    }
    // Arguments of other storage classes.
    check(
        db,
        "SELECT strftime(NULL, v), date(v, NULL), date(v, 1), strftime(v, v) FROM d",
    );
}

#[test]
fn now_is_one_instant_per_statement() {
    let db = scratch_dir("query-dates-now").join("now.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 1024; CREATE TABLE n(i INTEGER, pad TEXT);
         WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 40000)
         INSERT INTO n SELECT i, printf('%.*c', i % 50, 'p') FROM k;",
    )
    .unwrap();
    drop(conn);
    // Every row, every executor and the group stage see the same instant, to the
    // millisecond; SQLite's answers are the same.
    let sqls = [
        "SELECT count(DISTINCT strftime('%Y-%m-%d %H:%M:%f', 'now')) FROM n",
        "SELECT count(DISTINCT julianday()) , count(DISTINCT unixepoch('subsec')) FROM n",
        "SELECT min(julianday('now')) = julianday('now'), max(unixepoch()) = unixepoch('now') \
         FROM n",
        "SELECT i % 3, min(datetime('now', 'subsec')) = datetime('now', 'subsec') FROM n GROUP BY 1",
        "SELECT date() = date('now'), time() = time('now'), strftime('%s') = strftime('%s', 'now') \
         FROM n LIMIT 3",
        "SELECT current_date = date('now'), current_time = time(), current_timestamp = datetime() \
         FROM n LIMIT 2",
    ];
    for sql in sqls {
        QueryTester::new(&db, sql)
            .exact_reals()
            .span(&[Axis::Cores])
            .check();
    }
    both_fail(&db, "SELECT current_date() FROM n");
    // And the instant is the clock's.
    let one = Config {
        io: Io::Pread,
        cores: Cores::One,
        window: Window::Off,
        path: RowPath::Streamed,
        memory: None,
    };
    let (_, rows) = one
        .answer(&db, "SELECT unixepoch('now') FROM n LIMIT 1")
        .unwrap();
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    match rows[0][0] {
        engine::value::Value::Integer(t) => assert!((t - clock).abs() <= 5, "{t} vs {clock}"),
        ref other => panic!("unixepoch('now') gave {other:?}"),
    }
}

/// `timediff(A, B)` for every pair of a time value of the table and one of these, both ways:
/// the sign, the month and year borrows (end of month, leap days, across the year), times of
/// day and zones, Julian day numbers, NULL and invalid values.
#[test]
fn timediff_matches_sqlite() {
    let db = table();
    let others = [
        "'2024-01-31'",
        "'2024-02-29'",
        "'2024-03-01 00:00:00.001'",
        "'2023-02-28 23:59:59.999'",
        "'2023-03-31 12:00'",
        "'2025-01-01T00:00:00Z'",
        "'1994-12-31 23:59:59+01:00'",
        "'2000-06-15 08:00:00'",
        "'0000-01-01'",
        "'-0044-03-15 12:00'",
        "'9999-12-31 23:59:59.999'",
        "'12:00'",
        "'24:00'",
        "2460000.5",
        "2451545",
        "0",
        "-1",
        "1700000000",
        "NULL",
        "'garbage'",
        "x'323032342d30312d3031'",
        "v",
    ];
    for b in others {
        check(
            db,
            &format!("SELECT v, timediff(v, {b}), timediff({b}, v) FROM d"),
        );
    }
    check(
        db,
        "SELECT timediff('now', 'now'), timediff('2024-03-31', '2024-02-29'), \
         timediff('2024-02-29', '2024-03-31'), timediff('2023-03-01', '2024-02-29'), \
         timediff('2024-02-29', '2023-03-01'), timediff('2024-02-29', '2025-02-28'), \
         timediff('2025-02-28', '2024-02-29'), timediff('2024-01-31 10:00', '2023-12-31 11:00'), \
         timediff('2023-12-31 11:00', '2024-01-31 10:00') FROM d LIMIT 1",
    );
    // Two arguments, no more and no less, as in SQLite.
    for sql in [
        "SELECT timediff(v) FROM d",
        "SELECT timediff(v, v, v) FROM d",
    ] {
        both_fail(db, sql);
    }
}
