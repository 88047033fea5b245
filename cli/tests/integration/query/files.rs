//! `corescan query` over a table spread over several files, against SQLite reading the same
//! files attached and joined by `UNION ALL` in the listed order (each file's table in rowid
//! order, columns matched by name, NULL where a file lacks one): the union, its order without
//! `ORDER BY`, `LIMIT`/`OFFSET` across file boundaries, sorts whose ties span files, groups
//! and aggregates, a file in WAL mode with a writer holding the log open, schemas that
//! drifted, files without the table, and the refusals.

use std::path::{Path, PathBuf};

use engine::query::{run_query_files, run_query_files_streaming, FileRow, MissingTable};
use engine::{spread, IoBackend, IoChoice, ScanSettings};
use rusqlite::Connection;

use super::{answer_on, difference, Answer};
use crate::corescan;

/// Files `t0.db` .. `t4.db` of table `ev`, the last two with a column added, the third in
/// WAL mode with its last rows only in the log (the returned connection holds it), and
/// `other.db` without the table.
fn tenant_files(dir: &Path) -> (Vec<PathBuf>, Connection) {
    let mut paths = Vec::new();
    let mut live = None;
    for i in 0..5i64 {
        let path = dir.join(format!("t{i}.db"));
        let c = Connection::open(&path).unwrap();
        if i == 2 {
            c.execute_batch("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;")
                .unwrap();
        }
        c.execute_batch("CREATE TABLE ev(id INTEGER PRIMARY KEY, dev TEXT, v REAL, n INTEGER)")
            .unwrap();
        if i >= 3 {
            c.execute_batch("ALTER TABLE ev ADD COLUMN extra TEXT")
                .unwrap();
        }
        let tx = c.unchecked_transaction().unwrap();
        for j in 0..(700 + 300 * i) {
            c.execute(
                "INSERT INTO ev(dev, v, n) VALUES (?1, ?2, ?3)",
                rusqlite::params![
                    format!("d{}", j % 7),
                    j as f64 * 0.25 + i as f64,
                    j * i % 97
                ],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        if i == 4 {
            c.execute_batch("UPDATE ev SET extra = 'x' || id WHERE id % 5 = 0")
                .unwrap();
        }
        if i == 2 {
            // Rows only in the log, the writer still connected.
            c.execute_batch("INSERT INTO ev(dev, v, n) VALUES ('wal', 0.5, 1), ('wal', 1.5, 2)")
                .unwrap();
            live = Some(c);
        }
        paths.push(path);
    }
    let other = dir.join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE x(a)")
        .unwrap();
    (paths, live.unwrap())
}

/// SQLite's answer over the files: attached, `ev` a view of their union in order.
fn sqlite_union(paths: &[PathBuf], sql: &str) -> Answer {
    sqlite_union_with(paths, sql, false)
}

/// [`sqlite_union`], with the view's last column `_file` (each row's file path) when `file`.
fn sqlite_union_with(paths: &[PathBuf], sql: &str, file: bool) -> Answer {
    let conn = Connection::open_in_memory().unwrap();
    let mut parts = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        conn.execute(&format!("ATTACH ?1 AS f{i}"), [p.to_str().unwrap()])
            .unwrap();
        let has_extra: bool = conn
            .query_row(
                &format!(
                    "SELECT count(*) FROM pragma_table_info('ev', 'f{i}') WHERE name = 'extra'"
                ),
                [],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
            > 0;
        let extra = if has_extra { "extra" } else { "NULL AS extra" };
        let path = if file {
            format!(", '{}' AS _file", p.display())
        } else {
            String::new()
        };
        parts.push(format!("SELECT id, dev, v, n, {extra}{path} FROM f{i}.ev"));
    }
    conn.execute_batch(&format!(
        "CREATE TEMP VIEW ev AS {}",
        parts.join(" UNION ALL ")
    ))
    .unwrap();
    answer_on(&conn, sql)
}

/// The default settings for `table`'s page size, with backend `io` and a sort budget.
fn settings_for(table: &partitioner::TablePlan, io: IoChoice, memory: Option<u64>) -> ScanSettings {
    ScanSettings {
        io,
        memory,
        ..ScanSettings::defaults(table.header.page_size)
    }
}

fn corescan_files(paths: &[PathBuf], sql: &str, cores: usize, io: IoChoice) -> Answer {
    corescan_files_in(paths, sql, cores, io, None)
}

/// [`corescan_files`] with a full sort's memory budget (`Some(1)`: every unit spills).
fn corescan_files_in(
    paths: &[PathBuf],
    sql: &str,
    cores: usize,
    io: IoChoice,
    memory: Option<u64>,
) -> Answer {
    let planned = corescan_sql::plan_query_files(paths, sql, false).map_err(|e| e.to_string())?;
    let settings = settings_for(&planned.table, io, memory);
    let out = run_query_files(
        paths.to_vec(),
        &planned.table,
        planned.query,
        &settings,
        &spread(cores),
        MissingTable::Fail,
    )
    .map_err(|e| e.to_string())?;
    let report = out.report.files.as_ref().expect("a files report");
    assert_eq!(report.files, paths.len());
    assert!(report.opened <= paths.len());
    Ok((out.names, out.rows))
}

/// [`corescan_files`] through the streaming entry point (file by file, channels drained in
/// the listed order, for a plain projection; the others collected).
fn corescan_streamed(paths: &[PathBuf], sql: &str, cores: usize, io: IoChoice) -> Answer {
    corescan_streamed_in(paths, sql, cores, io, None)
}

/// [`corescan_streamed`] with a full sort's memory budget.
fn corescan_streamed_in(
    paths: &[PathBuf],
    sql: &str,
    cores: usize,
    io: IoChoice,
    memory: Option<u64>,
) -> Answer {
    let planned = corescan_sql::plan_query_files(paths, sql, false).map_err(|e| e.to_string())?;
    let settings = settings_for(&planned.table, io, memory);
    let mut rows = Vec::new();
    let out = run_query_files_streaming(
        paths.to_vec(),
        &planned.table,
        planned.query,
        &settings,
        &spread(cores),
        MissingTable::Fail,
        None,
        &mut |row| {
            match row {
                FileRow::Values(v) => rows.push(v.to_vec()),
                FileRow::Rendered(_) => panic!("no renderer was given"),
            }
            Ok(())
        },
    )
    .map_err(|e| e.to_string())?;
    let streams = engine::query::streams(
        &corescan_sql::plan_query_files(paths, sql, false)
            .unwrap()
            .query,
    );
    assert_eq!(out.streamed, streams, "{sql}");
    Ok((out.names, rows))
}

#[test]
fn a_table_over_several_files_answers_as_sqlite_over_their_union() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (paths, _writer) = tenant_files(dir.path());
    let queries = [
        "SELECT * FROM ev",
        "SELECT id, dev, extra FROM ev WHERE n % 10 = 3",
        "SELECT id, n FROM ev LIMIT 5 OFFSET 695",
        "SELECT id, v FROM ev WHERE dev = 'wal'",
        "SELECT count(*), sum(n), min(v), max(v), count(extra) FROM ev",
        "SELECT dev, count(*), sum(n), max(id) FROM ev GROUP BY dev ORDER BY dev",
        "SELECT n % 5 AS b, count(*) FROM ev WHERE v > 100 GROUP BY b HAVING count(*) > 10",
        "SELECT id, dev FROM ev ORDER BY id DESC LIMIT 7",
        "SELECT id, v FROM ev ORDER BY id LIMIT 4 OFFSET 3",
        "SELECT dev, n FROM ev ORDER BY n DESC, dev LIMIT 12",
        "SELECT extra, id FROM ev WHERE extra IS NOT NULL ORDER BY extra LIMIT 6",
        // Full sorts: the units' sorted runs merged, ties by file, then rowid.
        "SELECT dev, n, id FROM ev ORDER BY n DESC, dev",
        "SELECT extra, id, v FROM ev ORDER BY extra",
    ];
    let backends = [
        IoChoice::Fixed(IoBackend::Pread),
        IoChoice::Fixed(IoBackend::Mmap),
        IoChoice::Fixed(IoBackend::Dma),
    ];
    for sql in queries {
        let want = sqlite_union(&paths, sql);
        assert!(want.is_ok(), "{sql}: SQLite failed: {want:?}");
        for (cores, io) in [
            (1, backends[0]),
            (2, backends[1]),
            (2, backends[2]),
            (3, backends[0]),
        ] {
            let got = corescan_files(&paths, sql, cores, io);
            if let Some(d) = difference(&want, &got, true) {
                panic!("{sql} ({cores} executors, {io:?}): {d}");
            }
            let got = corescan_streamed(&paths, sql, cores, io);
            if let Some(d) = difference(&want, &got, true) {
                panic!("{sql} ({cores} executors, {io:?}, streamed): {d}");
            }
        }
    }
}

#[test]
fn files_are_named_by_paths_globs_and_lists_and_bad_ones_are_one_error_line() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (paths, _writer) = tenant_files(dir.path());
    let d = dir.path();
    let pattern = format!("{}/t*.db", d.display());
    let sql = "SELECT count(*), sum(n) FROM ev";
    let want = sqlite_union(&paths, sql).unwrap().1;
    let int = |v: &engine::value::Value| match v {
        engine::value::Value::Integer(i) => i.to_string(),
        other => panic!("not an integer: {other:?}"),
    };
    let line = format!(
        "count(*),sum(n)\n{},{}\n",
        int(&want[0][0]),
        int(&want[0][1])
    );
    let by_glob = corescan(["query", "--format", "csv", &pattern, sql]);
    assert_eq!(by_glob.status, 0, "{}", by_glob.stderr);
    assert_eq!(by_glob.stdout, line);
    let list = d.join("files.txt");
    let listed: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    std::fs::write(&list, listed.join("\n")).unwrap();
    let by_list = corescan([
        "query",
        "--format",
        "csv",
        &format!("@{}", list.display()),
        sql,
    ]);
    assert_eq!(by_list.stdout, line, "{}", by_list.stderr);

    // A file without the table: an error naming it, or skipped and counted.
    let other = d.join("other.db").display().to_string();
    corescan(["query", &pattern, &other, sql]).assert_error(&["other.db", "no table named \"ev\""]);
    let skipped = corescan([
        "query",
        "--skip-missing",
        "--report",
        "--format",
        "jsonl",
        &pattern,
        &other,
        sql,
    ]);
    assert_eq!(skipped.status, 0, "{}", skipped.stderr);
    assert_eq!(
        skipped.stdout,
        format!(
            "{{\"count(*)\":{},\"sum(n)\":{}}}\n",
            int(&want[0][0]),
            int(&want[0][1])
        )
    );
    let report: serde_json::Value = serde_json::from_str(skipped.stderr.trim()).unwrap();
    assert_eq!(report["files"]["files"], 6);
    assert_eq!(report["files"]["opened"], 5);
    assert_eq!(report["files"]["skipped"], 1);
    assert_eq!(
        report["files"]["open_files_bound"],
        report["executors"].as_array().unwrap().len()
    );

    // A missing file, a pattern that matches nothing, a damaged file.
    corescan(["query", &pattern, "nowhere.db", sql]).assert_error(&["nowhere.db"]);
    let none = format!("{}/*.sqlite", d.display());
    corescan(["query", &none, sql]).assert_error(&["*.sqlite", "no file matches"]);
    let damaged = d.join("t9.db");
    let mut bytes = std::fs::read(&paths[1]).unwrap();
    let len = bytes.len();
    bytes[len - 4096..].fill(0xee);
    std::fs::write(&damaged, bytes).unwrap();
    let damaged = damaged.display().to_string();
    corescan(["query", &pattern, sql]).assert_error(&["t9.db", "page"]);
    // Streamed, the rows of the files before it are written, then the error.
    let streamed = corescan(["query", "--format", "csv", &pattern, "SELECT id, n FROM ev"]);
    streamed.assert_error(&["t9.db", "page"]);
    let before = sqlite_union(&paths, "SELECT id, n FROM ev").unwrap().1;
    let lines: Vec<&str> = streamed.stdout.lines().collect();
    assert!(lines.len() > before.len(), "{} lines", lines.len());
    for (row, line) in before.iter().zip(&lines[1..]) {
        assert_eq!(format!("{},{}", int(&row[0]), int(&row[1])), *line);
    }
    drop(damaged);

    // A column whose affinity differs in a later file.
    let drift = d.join("u.db");
    Connection::open(&drift)
        .unwrap()
        .execute_batch("CREATE TABLE ev(id INTEGER PRIMARY KEY, dev BLOB, v REAL, n INTEGER); INSERT INTO ev(dev) VALUES (x'00')")
        .unwrap();
    let drift = drift.display().to_string();
    let p0 = paths[0].display().to_string();
    corescan(["query", &p0, &drift, "SELECT count(dev) FROM ev"])
        .assert_error(&["u.db", "\"dev\"", "affinity"]);
}

#[test]
fn ties_between_files_go_to_the_earlier_file_as_in_sqlites_union() {
    // Keys SQLite calls equal but spells differently ('a'/'A' under NOCASE, 1/1.0 in a column
    // without affinity), spread so that a later file has the lower rowids.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut paths = Vec::new();
    let rows: [&[(&str, &str)]; 3] = [
        &[("1.0", "'b'"), ("2", "'A'"), ("3", "'a'")],
        &[("1", "'B'"), ("2.0", "'a'"), ("1.0", "'x'"), ("2", "'b'")],
        &[("1", "'a'"), ("3.0", "'B'")],
    ];
    for (i, file) in rows.iter().enumerate() {
        let path = dir.path().join(format!("k{i}.db"));
        let c = Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE k(a, b)").unwrap();
        // Later files' rows take lower rowids than earlier files' do.
        for (j, (a, b)) in file.iter().enumerate() {
            let rowid = 100 - 10 * i as i64 + j as i64;
            c.execute_batch(&format!(
                "INSERT INTO k(rowid, a, b) VALUES ({rowid}, {a}, {b})"
            ))
            .unwrap();
        }
        paths.push(path);
    }
    let conn = Connection::open_in_memory().unwrap();
    let mut parts = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        conn.execute(&format!("ATTACH ?1 AS f{i}"), [p.to_str().unwrap()])
            .unwrap();
        parts.push(format!("SELECT a, b FROM f{i}.k"));
    }
    conn.execute_batch(&format!(
        "CREATE TEMP VIEW k AS {}",
        parts.join(" UNION ALL ")
    ))
    .unwrap();
    for sql in [
        "SELECT a, count(*) FROM k GROUP BY a",
        "SELECT b COLLATE NOCASE, count(*) FROM k GROUP BY 1",
        "SELECT b COLLATE NOCASE AS g, max(a), min(a) FROM k GROUP BY g",
        "SELECT min(a), max(a), count(DISTINCT a), sum(DISTINCT a) FROM k",
        "SELECT typeof(sum(DISTINCT a)), total(DISTINCT a) FROM k",
        "SELECT a, b FROM k ORDER BY a LIMIT 4",
        "SELECT a, b FROM k ORDER BY b COLLATE NOCASE, a LIMIT 5 OFFSET 1",
        "SELECT a, b FROM k ORDER BY a",
        "SELECT a, b FROM k ORDER BY b COLLATE NOCASE DESC",
        "SELECT group_concat(a), group_concat(b, '') FROM k",
        "SELECT b COLLATE NOCASE, group_concat(a, ';') FROM k GROUP BY 1",
        "SELECT DISTINCT a FROM k",
        "SELECT DISTINCT b COLLATE NOCASE FROM k",
        "SELECT DISTINCT b COLLATE NOCASE, a FROM k LIMIT 3 OFFSET 1",
    ] {
        let want = answer_on(&conn, sql);
        for cores in [1, 2] {
            let got = corescan_files(&paths, sql, cores, IoChoice::Fixed(IoBackend::Pread));
            if let Some(d) = difference(&want, &got, false) {
                panic!("{sql} ({cores} executors): {d}");
            }
        }
    }
}

#[test]
fn the_hidden_file_column_names_each_rows_file_and_excludes_files_unopened() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (paths, _writer) = tenant_files(dir.path());
    let t2 = paths[2].display().to_string();
    let t3 = paths[3].display().to_string();
    let queries = [
        "SELECT _file, count(*), sum(n) FROM ev GROUP BY _file ORDER BY _file".to_string(),
        format!("SELECT id, _file FROM ev WHERE _file = '{t2}' AND n > 90"),
        format!("SELECT count(*) FROM ev WHERE _file IN ('{t2}', '{t3}') AND v > 10"),
        "SELECT _file, id FROM ev WHERE _file LIKE '%t4.db' ORDER BY id DESC LIMIT 3".to_string(),
        "SELECT substr(_file, -5), max(v) FROM ev GROUP BY 1".to_string(),
        "SELECT id, _file FROM ev LIMIT 3 OFFSET 1699".to_string(),
    ];
    for sql in &queries {
        let want = sqlite_union_with(&paths, sql, true);
        assert!(want.is_ok(), "{sql}: {want:?}");
        for cores in [1, 2] {
            let io = IoChoice::Fixed(IoBackend::Pread);
            for got in [
                corescan_files(&paths, sql, cores, io),
                corescan_streamed(&paths, sql, cores, io),
            ] {
                if let Some(d) = difference(&want, &got, true) {
                    panic!("{sql} ({cores} executors): {d}");
                }
            }
        }
    }
    // Not in `*`.
    let (names, _) = corescan_files(&paths, "SELECT * FROM ev LIMIT 1", 2, IoChoice::Auto).unwrap();
    assert_eq!(names, ["id", "dev", "v", "n", "extra"]);
    // A file its path excludes is never opened.
    let pattern = format!("{}/t*.db", dir.path().display());
    let run = corescan([
        "query",
        "--report",
        "--format",
        "jsonl",
        &pattern,
        &format!("SELECT count(*) FROM ev WHERE _file = '{t3}'"),
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "{\"count(*)\":1600}\n");
    let report: serde_json::Value = serde_json::from_str(run.stderr.trim()).unwrap();
    assert_eq!(report["files"]["opened"], 1, "{report}");
    // A real column of that name shadows it.
    let mut own = Vec::new();
    for name in ["own1", "own2"] {
        let path = dir.path().join(format!("{name}.db"));
        Connection::open(&path)
            .unwrap()
            .execute_batch(&format!(
                "CREATE TABLE ev(id INTEGER PRIMARY KEY, _file TEXT); INSERT INTO ev VALUES (1, '{name}')"
            ))
            .unwrap();
        own.push(path.display().to_string());
    }
    let shadowed = corescan([
        "query",
        "--format",
        "csv",
        &own[0],
        &own[1],
        "SELECT _file FROM ev",
    ]);
    assert_eq!(
        shadowed.stdout, "_file\nown1\nown2\n",
        "{}",
        shadowed.stderr
    );
    // Over one file there is no hidden column.
    corescan([
        "query",
        &paths[0].display().to_string(),
        "SELECT _file FROM ev",
    ])
    .assert_error(&["no such column: _file"]);
}

#[test]
fn a_large_file_among_small_ones_is_split_among_the_executors() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut paths = Vec::new();
    for (i, rows) in [(0, 300i64), (1, 120_000), (2, 500)] {
        let path = dir.path().join(format!("s{i}.db"));
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE ev(id INTEGER PRIMARY KEY, dev TEXT, v REAL, n INTEGER, extra TEXT)",
        )
        .unwrap();
        let tx = c.unchecked_transaction().unwrap();
        for j in 0..rows {
            c.execute(
                "INSERT INTO ev(dev, v, n, extra) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![
                    format!("d{}", j % 11),
                    j as f64 * 0.5,
                    (j * 7 + i) % 1001,
                    "some padding text"
                ],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        paths.push(path);
    }
    assert!(std::fs::metadata(&paths[1]).unwrap().len() > 4 << 20);
    for sql in [
        "SELECT count(*), sum(n), max(v) FROM ev",
        "SELECT dev, count(*), min(id) FROM ev GROUP BY dev",
        "SELECT id, n FROM ev WHERE n = 1000",
        "SELECT id, n FROM ev LIMIT 3 OFFSET 60299",
        "SELECT id, n FROM ev ORDER BY n DESC, id LIMIT 5",
        "SELECT dev, n, id FROM ev ORDER BY dev, n",
    ] {
        let want = sqlite_union(&paths, sql);
        for cores in [2, 3] {
            let io = IoChoice::Fixed(IoBackend::Mmap);
            // A one-byte budget: a full sort's units spill their rows (and the large file's
            // shares merge their many runs) before the merge across files.
            for got in [
                corescan_files(&paths, sql, cores, io),
                corescan_streamed(&paths, sql, cores, io),
                corescan_files_in(&paths, sql, cores, io, Some(1)),
                corescan_streamed_in(&paths, sql, cores, io, Some(1)),
            ] {
                if let Some(d) = difference(&want, &got, true) {
                    panic!("{sql} ({cores} executors): {d}");
                }
            }
        }
    }
    let planned = corescan_sql::plan_query_files(&paths, "SELECT count(*) FROM ev", false).unwrap();
    let out = run_query_files(
        paths.clone(),
        &planned.table,
        planned.query,
        &ScanSettings::defaults(4096),
        &spread(2),
        MissingTable::Fail,
    )
    .unwrap();
    let files = out.report.files.unwrap();
    assert_eq!((files.files, files.opened, files.split), (3, 3, 1));
    // Both executors read some of the large file's pages.
    assert!(
        out.report.executors.iter().all(|e| e.pages > 100),
        "{:?}",
        out.report.executors
    );
}
