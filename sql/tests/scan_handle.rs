//! The library seam end to end: SQL planned by `corescan_sql`, run through `engine::scan`
//! (merged, as an iterator and awaited) and `engine::scan_partitions` (one stream per
//! executor) and `engine::scan_partitions_into` (each executor building the embedder's own
//! batches), against SQLite's own rows on the same file, under several placements and
//! backends; and the seam's refusals.

use std::path::{Path, PathBuf};

use engine::query::QueryError;
use engine::value::Value;
use engine::{IoBackend, IoChoice, Placement, ScanOptions, ScanSpec};
use rusqlite::Connection;

fn test_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("seam-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A table an application could have written: a rowid alias, text, reals, NULLs, a blob, a
/// column added later with a default, and enough rows for many leaf pages.
fn make_db(path: &Path, rows: i64) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA page_size=1024;
         CREATE TABLE events(id INTEGER PRIMARY KEY, kind TEXT, amount REAL, note BLOB);",
    )
    .unwrap();
    let tx = conn.unchecked_transaction().unwrap();
    for i in 1..=rows {
        let kind = ["click", "view", "buy", "Buy"][(i % 4) as usize];
        let amount: Option<f64> = (i % 7 != 0).then(|| (i % 1000) as f64 / 8.0);
        tx.execute(
            "INSERT INTO events(id, kind, amount, note) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![i * 3, kind, amount, vec![i as u8; (i % 5) as usize]],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    conn.execute_batch("ALTER TABLE events ADD COLUMN region TEXT DEFAULT 'eu';")
        .unwrap();
    conn.execute("UPDATE events SET region = 'us' WHERE id % 9 = 0", [])
        .unwrap();
}

fn sqlite_rows(path: &Path, sql: &str) -> Vec<Vec<Value>> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    let rows = stmt
        .query_map([], |r| {
            Ok((0..n)
                .map(|i| match r.get_ref(i).unwrap() {
                    rusqlite::types::ValueRef::Null => Value::Null,
                    rusqlite::types::ValueRef::Integer(v) => Value::Integer(v),
                    rusqlite::types::ValueRef::Real(v) => Value::Real(v),
                    rusqlite::types::ValueRef::Text(t) => Value::Text(t.to_vec()),
                    rusqlite::types::ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                })
                .collect())
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

fn configurations() -> Vec<(Placement, ScanOptions)> {
    let mut out = Vec::new();
    for placement in [
        Placement::Cores(1),
        Placement::Cores(2),
        Placement::Cores(3),
    ] {
        for io in [
            IoChoice::Auto,
            IoChoice::Fixed(IoBackend::Dma),
            IoChoice::Fixed(IoBackend::Pread),
            IoChoice::Fixed(IoBackend::Mmap),
        ] {
            let options = ScanOptions {
                io: Some(io),
                readahead: Some(8),
                ..ScanOptions::default()
            };
            out.push((placement.clone(), options));
        }
    }
    out
}

const QUERIES: &[&str] = &[
    "SELECT * FROM events",
    "SELECT id, kind, region FROM events WHERE amount > 50 LIMIT 700",
    "SELECT kind, count(*), sum(amount), max(note) FROM events GROUP BY kind ORDER BY kind",
    "SELECT id, amount FROM events ORDER BY amount DESC, id LIMIT 25",
    "SELECT region, total(amount) FROM events WHERE kind = 'buy' GROUP BY region",
];

#[test]
fn the_merged_scan_gives_sqlites_rows_in_every_configuration() {
    let dir = test_dir("merged");
    let db = dir.join("events.db");
    make_db(&db, 6000);
    for sql in QUERIES {
        let expected = sqlite_rows(&db, sql);
        for (placement, options) in configurations() {
            let spec = corescan_sql::scan_spec(&db, sql)
                .unwrap()
                .with_placement(placement.clone())
                .with_options(options);
            let mut scan = engine::scan(spec).unwrap();
            let mut rows = Vec::new();
            for batch in scan.by_ref() {
                let batch =
                    batch.unwrap_or_else(|e| panic!("{sql} {placement:?} {options:?}: {e}"));
                assert!(batch.rows.len() <= engine::BATCH_ROWS);
                rows.extend(batch.rows);
            }
            assert_eq!(rows, expected, "{sql} under {placement:?} {options:?}");
            let end = scan.end().expect("a finished scan has its report");
            assert_eq!(end.rows, expected.len() as u64);
            assert!(end.report.rows_scanned > 0 || expected.is_empty());
        }
    }
}

#[test]
fn the_scan_can_be_awaited_and_names_its_columns() {
    let dir = test_dir("async");
    let db = dir.join("events.db");
    make_db(&db, 3000);
    let sql = "SELECT id AS key, upper(kind), region FROM events WHERE id % 2 = 0";
    let expected = sqlite_rows(&db, sql);
    let spec = corescan_sql::scan_spec(&db, sql).unwrap();
    let mut scan = engine::scan(spec).unwrap();
    assert_eq!(scan.names(), ["key", "upper(kind)", "region"]);
    let rows = futures_lite::future::block_on(async {
        let mut rows = Vec::new();
        while let Some(batch) = scan.next_batch().await {
            rows.extend(batch.unwrap().rows);
        }
        rows
    });
    assert_eq!(rows, expected);
    // The same through the Stream adapter.
    let stream = engine::scan(corescan_sql::scan_spec(&db, sql).unwrap())
        .unwrap()
        .into_stream();
    let batches: Vec<_> =
        futures_lite::future::block_on(futures_lite::StreamExt::collect::<Vec<_>>(stream));
    let rows: Vec<Vec<Value>> = batches.into_iter().flat_map(|b| b.unwrap().rows).collect();
    assert_eq!(rows, expected);
}

#[test]
fn partitions_hold_the_table_in_rowid_order_one_stream_per_executor() {
    let dir = test_dir("partitions");
    let db = dir.join("events.db");
    make_db(&db, 6000);
    for (sql, oracle) in [
        (
            "SELECT id, kind, note, region FROM events",
            "SELECT id, kind, note, region FROM events ORDER BY rowid",
        ),
        (
            "SELECT id, amount * 2 FROM events WHERE kind GLOB 'b*'",
            "SELECT id, amount * 2 FROM events WHERE kind GLOB 'b*' ORDER BY rowid",
        ),
    ] {
        let expected = sqlite_rows(&db, oracle);
        for (placement, options) in configurations() {
            let spec = corescan_sql::scan_spec(&db, sql)
                .unwrap()
                .with_placement(placement.clone())
                .with_options(options);
            let mut scan = engine::scan_partitions(spec).unwrap();
            let n = scan.partition_count();
            let partitions = scan.take_partitions();
            assert_eq!(partitions.len(), n);
            // Each partition drained on its own thread, as a query engine's tasks would.
            let per_partition: Vec<Vec<Vec<Value>>> = std::thread::scope(|s| {
                let handles: Vec<_> = partitions
                    .into_iter()
                    .map(|p| s.spawn(move || p.flat_map(|b| b.unwrap().rows).collect::<Vec<_>>()))
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert_eq!(per_partition.len(), n);
            let rows: Vec<Vec<Value>> = per_partition.into_iter().flatten().collect();
            assert_eq!(rows, expected, "{sql} under {placement:?} {options:?}");
            let end = scan.finish().unwrap();
            assert_eq!(end.report.executors.len(), n);
            assert_eq!(end.rows, expected.len() as u64);
        }
    }
}

#[test]
fn a_projection_by_column_names_reads_sqlites_values() {
    let dir = test_dir("columns");
    let db = dir.join("events.db");
    make_db(&db, 2500);
    let expected = sqlite_rows(&db, "SELECT rowid, ID, amount, note, region FROM events");
    let spec = ScanSpec::columns(&db, "EVENTS", &["rowid", "ID", "amount", "note", "region"])
        .with_placement(Placement::Cores(2));
    let mut scan = engine::scan(spec).unwrap();
    assert_eq!(scan.names(), ["rowid", "id", "amount", "note", "region"]);
    let rows: Vec<Vec<Value>> = scan.by_ref().flat_map(|b| b.unwrap().rows).collect();
    assert_eq!(rows, expected);
}

#[test]
fn the_seam_refuses_what_it_cannot_answer_with_one_clear_error() {
    let dir = test_dir("refusals");
    let db = dir.join("events.db");
    make_db(&db, 100);
    let err = engine::scan(ScanSpec::columns(&db, "events", &["nope"])).unwrap_err();
    assert!(err.to_string().contains("no column \"nope\""), "{err}");
    let err = engine::scan(ScanSpec::columns(&db, "missing", &["id"])).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    let spec =
        corescan_sql::scan_spec(&db, "SELECT kind, count(*) FROM events GROUP BY kind").unwrap();
    let err = engine::scan_partitions(spec).unwrap_err();
    assert!(
        matches!(err, QueryError::Scan(engine::Error::Config(_))),
        "{err}"
    );
    let spec =
        ScanSpec::columns(&db, "events", &["id"]).with_placement(Placement::Cpus(vec![4095]));
    assert!(engine::scan(spec).is_err());
}

#[test]
fn a_failing_row_ends_the_stream_with_sqlites_message() {
    let dir = test_dir("failing");
    let db = dir.join("t.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE t(a INTEGER); INSERT INTO t VALUES (1), (2), (-9223372036854775808), (4);",
    )
    .unwrap();
    let sql = "SELECT abs(a) FROM t";
    let oracle = Connection::open(&db)
        .unwrap()
        .prepare(sql)
        .unwrap()
        .query_map([], |r| r.get::<_, i64>(0))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap_err()
        .to_string();
    let mut rows = Vec::new();
    let mut error = None;
    for batch in engine::scan(corescan_sql::scan_spec(&db, sql).unwrap()).unwrap() {
        match batch {
            Ok(b) => rows.extend(b.rows),
            Err(e) => error = Some(e.to_string()),
        }
    }
    assert_eq!(rows, vec![vec![Value::Integer(1)], vec![Value::Integer(2)]]);
    let error = error.expect("the stream ends with the row's error");
    assert!(error.contains(&oracle), "{error} lacks SQLite's {oracle:?}");
}

/// A sink as an embedder writes one: it copies every value it is handed into rows of its own,
/// sends them every `every` rows, and (for the test of a failing sink) refuses the text
/// `refuse`, handing over the rows before it and the refused row's rowid.
struct CopySink {
    every: usize,
    refuse: Option<&'static str>,
    rows: Vec<Vec<Value>>,
    refused: Option<i64>,
}

/// What a [`CopySink`] sends.
type Copied = (Vec<Vec<Value>>, Option<i64>);

impl engine::BatchSink for CopySink {
    fn append(&mut self, rows: &engine::SinkRows<'_>) -> bool {
        let mut columns: Vec<Vec<Value>> = Vec::new();
        let mut values = Vec::new();
        for j in 0..rows.width() {
            rows.column(j, &mut values);
            assert_eq!(values.len(), rows.len());
            columns.push(
                values
                    .iter()
                    .map(|v| engine::value::ValueRef::to_owned(*v))
                    .collect(),
            );
        }
        for k in 0..rows.len() {
            let row: Vec<Value> = columns.iter().map(|c| c[k].clone()).collect();
            if let Some(refuse) = self.refuse {
                if row.contains(&Value::text(refuse)) {
                    self.refused = Some(rows.rowid(k));
                    return false;
                }
            }
            self.rows.push(row);
        }
        true
    }

    fn len(&self) -> usize {
        self.rows.len()
    }

    fn is_full(&self) -> bool {
        self.rows.len() >= self.every
    }

    fn take(&mut self) -> Box<dyn std::any::Any + Send> {
        let copied: Copied = (std::mem::take(&mut self.rows), self.refused.take());
        Box::new(copied)
    }
}

/// Each partition's rows and the rowid its sink refused, if any, drained on its own thread;
/// asserts every part is a sink's batch and each partition ends after a refusal.
fn drain_sinks(
    spec: ScanSpec,
    every: usize,
    refuse: Option<&'static str>,
) -> Vec<(Vec<Vec<Value>>, Option<i64>)> {
    let sinks = move |_: usize| -> Box<dyn engine::BatchSink> {
        Box::new(CopySink {
            every,
            refuse,
            rows: Vec::new(),
            refused: None,
        })
    };
    let mut scan = engine::scan_partitions_into(spec, &sinks).unwrap();
    let partitions = scan.take_partitions();
    let out = std::thread::scope(|s| {
        let handles: Vec<_> = partitions
            .into_iter()
            .map(|mut p| {
                s.spawn(move || {
                    let mut rows = Vec::new();
                    let mut refused = None;
                    while let Some(part) = futures_lite::future::block_on(p.next_part()) {
                        assert!(refused.is_none(), "a partition ends after its sink failed");
                        match part.unwrap() {
                            engine::Part::Built { rows: n, batch } => {
                                let (got, r) = *batch.downcast::<Copied>().unwrap();
                                assert_eq!(got.len(), n);
                                assert!(n <= every + 1024, "sent when full: {n} rows");
                                rows.extend(got);
                                refused = r;
                            }
                            engine::Part::Rows(_) => panic!("a sink's partition yields batches"),
                        }
                    }
                    (rows, refused)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    scan.finish().unwrap();
    out
}

/// Each partition's rows through `engine::scan_partitions` (no sink).
fn drain_partitions(spec: ScanSpec) -> Vec<Vec<Vec<Value>>> {
    let mut scan = engine::scan_partitions(spec).unwrap();
    let out = scan
        .take_partitions()
        .into_iter()
        .map(|p| p.flat_map(|b| b.unwrap().rows).collect())
        .collect();
    scan.finish().unwrap();
    out
}

/// A table with records on overflow pages among small ones (pages whose rows a sink gets as
/// evaluated rows, the others straight from the cells).
fn make_docs(path: &Path, rows: i64) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("PRAGMA page_size=1024; CREATE TABLE docs(id INTEGER PRIMARY KEY, body TEXT, n INT, x REAL);")
        .unwrap();
    let tx = conn.unchecked_transaction().unwrap();
    for i in 1..=rows {
        let len = if i % 17 == 0 {
            2500 + i as usize % 300
        } else {
            i as usize % 40
        };
        let body: String = (0..len)
            .map(|k| char::from(b'a' + ((i as usize + k) % 26) as u8))
            .collect();
        tx.execute(
            "INSERT INTO docs(id, body, n, x) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![i, body, i % 11, i],
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

#[test]
fn sinks_build_the_rows_the_streams_yield_in_every_configuration() {
    let dir = test_dir("sinks");
    let db = dir.join("events.db");
    make_db(&db, 6000);
    let docs = dir.join("docs.db");
    make_docs(&docs, 3000);
    let cases: &[(&Path, &str)] = &[
        // Straight from the cells: plain columns, a filter that cannot fail, a column
        // missing from the older records (its DEFAULT), an integer in a REAL column.
        (&db, "SELECT id, kind, note, region FROM events"),
        (
            &db,
            "SELECT amount, id FROM events WHERE amount > 50 AND kind <> 'view'",
        ),
        (
            &db,
            "SELECT region, kind FROM events WHERE kind = 'buy' LIMIT 40",
        ),
        (&docs, "SELECT id, body, n, x FROM docs"),
        (&docs, "SELECT body FROM docs WHERE n % 3 = 0"),
        // As evaluated rows: computed columns, a filter that may fail.
        (
            &db,
            "SELECT id, amount * 2 FROM events WHERE kind GLOB 'b*'",
        ),
        (
            &docs,
            "SELECT length(body), id FROM docs WHERE substr(body, 1, 1) = 'c'",
        ),
    ];
    for &(path, sql) in cases {
        let oracle =
            format!("{sql} ORDER BY rowid").replace(" LIMIT 40 ORDER BY rowid", " ORDER BY rowid");
        let all = sqlite_rows(path, &oracle);
        for (placement, options) in configurations() {
            let spec = || {
                corescan_sql::scan_spec(path, sql)
                    .unwrap()
                    .with_placement(placement.clone())
                    .with_options(options)
            };
            let plain = drain_partitions(spec());
            for every in [1, 100, 8192] {
                let built = drain_sinks(spec(), every, None);
                assert_eq!(built.len(), plain.len());
                for (i, ((rows, refused), plain)) in built.iter().zip(&plain).enumerate() {
                    assert_eq!(*refused, None);
                    assert_eq!(
                        rows, plain,
                        "{sql}: partition {i} under {placement:?} {options:?}, every {every}"
                    );
                }
            }
            if !sql.contains("LIMIT") {
                let rows: Vec<Vec<Value>> = plain.into_iter().flatten().collect();
                assert_eq!(rows, all, "{sql} under {placement:?} {options:?}");
            } else {
                // Each partition yields at most the LIMIT, its range's first rows.
                assert!(plain.iter().all(|p| p.len() <= 40));
                let rows: Vec<Vec<Value>> = plain.into_iter().flatten().collect();
                assert!(rows.iter().all(|r| all.contains(r)));
            }
        }
    }
}

#[test]
fn a_sink_that_refuses_a_value_ends_its_partition_after_the_rows_before_it() {
    let dir = test_dir("sink-refuses");
    let db = dir.join("events.db");
    make_db(&db, 6000);
    for sql in [
        "SELECT id, kind FROM events",
        "SELECT id, upper(kind) FROM events",
    ] {
        let refuse = if sql.contains("upper") { "BUY" } else { "buy" };
        for (placement, options) in configurations() {
            let spec = || {
                corescan_sql::scan_spec(&db, sql)
                    .unwrap()
                    .with_placement(placement.clone())
                    .with_options(options)
            };
            let plain = drain_partitions(spec());
            let built = drain_sinks(spec(), 64, Some(refuse));
            for ((rows, refused), plain) in built.iter().zip(&plain) {
                let at = plain
                    .iter()
                    .position(|r| r[1] == Value::text(refuse))
                    .expect("every range has a 'buy' row");
                assert_eq!(
                    rows[..],
                    plain[..at],
                    "{sql} under {placement:?} {options:?}"
                );
                assert_eq!(
                    *refused,
                    Some(match plain[at][0] {
                        Value::Integer(id) => id,
                        _ => unreachable!(),
                    })
                );
            }
        }
    }
}
