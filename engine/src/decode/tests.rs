//! The batch decoder against SQLite's own reading of real files, and its word-at-a-time varint
//! against the byte-at-a-time one.

use super::*;
use rusqlite::types::Value as SqlValue;
use testkit::Rng;

fn encode_varint(v: u64) -> Vec<u8> {
    if v >> 56 != 0 {
        // Nine bytes: eight groups of seven bits, then a whole last byte.
        let mut out: Vec<u8> = (0..8)
            .map(|i| ((v >> (57 - 7 * i)) as u8 & 0x7f) | 0x80)
            .collect();
        out.push(v as u8);
        return out;
    }
    let mut groups = vec![(v & 0x7f) as u8];
    let mut rest = v >> 7;
    while rest > 0 {
        groups.push((rest & 0x7f) as u8 | 0x80);
        rest >>= 7;
    }
    groups.reverse();
    groups
}

/// Decodes leaf `page` through the page loop this CPU runs, or through the baseline one
/// (SSE2 on x86-64) that CPUs without AVX2 run.
fn decode_leaf(
    batch: &mut CellBatch,
    columns: &NeededColumns,
    leaf: u32,
    page: &[u8],
    usable: u32,
    spills: &mut Vec<Spill>,
    baseline: bool,
) -> Result<usize, String> {
    if baseline {
        batch.decode_page_with::<header::Baseline>(columns, leaf, page, &[], usable, spills)
    } else {
        batch.decode_page(columns, leaf, page, usable, spills)
    }
}

#[test]
fn word_varints_read_as_the_bytewise_reader_does() {
    let mut rng = Rng::xorshift64_star(0x5eed);
    let mut values = vec![
        0,
        1,
        127,
        128,
        16383,
        16384,
        u64::MAX,
        i64::MAX as u64,
        1 << 56,
    ];
    for bits in 1..64 {
        values.push((1u64 << bits) - 1);
        values.push(1u64 << bits);
        values.push(rng.next_u64() >> (64 - bits));
    }
    for v in values {
        let enc = encode_varint(v);
        assert_eq!(read_varint(&enc), Some((v, enc.len())), "encoder for {v}");
        for pad in [0usize, 1, 7, 8, 12] {
            let mut buf = enc.clone();
            buf.extend((0..pad).map(|_| rng.next_u64() as u8));
            assert_eq!(
                varint(&buf),
                Some((v, enc.len())),
                "{v} with {pad} bytes after"
            );
        }
        // Cut short: both readers see the end of the buffer.
        assert_eq!(varint(&enc[..enc.len() - 1]), None, "{v} cut short");
    }
}

/// Makes a database with page size `page_size` holding every storage class, NULLs, long text
/// and blobs that spill onto overflow pages, multi-byte serial types and a column added by
/// `ALTER TABLE` (older rows lack it).
fn make_db(dir: &std::path::Path, page_size: u32, seed: u64) -> std::path::PathBuf {
    let path = dir.join(format!("batch-{page_size}.db"));
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA page_size={page_size}; CREATE TABLE t(a, b INTEGER, c REAL, d TEXT, e BLOB, f);"
    ))
    .unwrap();
    let mut rng = Rng::xorshift64_star(seed);
    let value = |rng: &mut Rng| -> SqlValue {
        match rng.below(9) {
            0 => SqlValue::Null,
            1 => SqlValue::Integer(rng.below(3) as i64),
            2 => SqlValue::Integer((rng.next_u64() >> rng.below(64)) as i64),
            3 => SqlValue::Real((rng.next_u64() as i64) as f64 / 1e6),
            4 => SqlValue::Text("x".repeat(rng.below(40) as usize)),
            5 => SqlValue::Text("long".repeat(rng.below(page_size as u64 / 2) as usize)),
            6 => SqlValue::Blob(vec![0xab; rng.below(100) as usize]),
            7 => SqlValue::Blob(vec![7; rng.below(u64::from(page_size) * 3) as usize]),
            _ => SqlValue::Text("héllo".into()),
        }
    };
    let tx = conn.unchecked_transaction().unwrap();
    for _ in 0..600 {
        let row: Vec<SqlValue> = (0..6).map(|_| value(&mut rng)).collect();
        tx.execute(
            "INSERT INTO t(a,b,c,d,e,f) VALUES (?,?,?,?,?,?)",
            rusqlite::params_from_iter(row),
        )
        .unwrap();
    }
    tx.execute_batch("ALTER TABLE t ADD COLUMN g DEFAULT 7")
        .unwrap();
    for _ in 0..300 {
        let row: Vec<SqlValue> = (0..7).map(|_| value(&mut rng)).collect();
        tx.execute(
            "INSERT INTO t(a,b,c,d,e,f,g) VALUES (?,?,?,?,?,?,?)",
            rusqlite::params_from_iter(row),
        )
        .unwrap();
    }
    tx.commit().unwrap();
    path
}

/// Whether the decoded value is SQLite's. `real`: the column has REAL affinity, whose integral
/// values SQLite stores as integers and reads back as reals (the kernels apply that affinity).
fn same(got: Option<ValueRef<'_>>, want: &SqlValue, default: &SqlValue, real: bool) -> bool {
    match (got, want) {
        (Some(ValueRef::Integer(a)), SqlValue::Real(b)) if real => a as f64 == *b,
        (None, w) => w == default,
        (Some(ValueRef::Null), SqlValue::Null) => true,
        (Some(ValueRef::Integer(a)), SqlValue::Integer(b)) => a == *b,
        (Some(ValueRef::Real(a)), SqlValue::Real(b)) => a.to_bits() == b.to_bits(),
        (Some(ValueRef::Text(a)), SqlValue::Text(b)) => a == b.as_bytes(),
        (Some(ValueRef::Blob(a)), SqlValue::Blob(b)) => a == &b[..],
        _ => false,
    }
}

/// The payload of a spilled cell, assembled from its overflow chain.
fn assemble(file: &[u8], page_size: usize, spill: &Spill) -> Vec<u8> {
    let mut payload = spill.local.clone();
    let mut next = spill.first_overflow;
    while (payload.len() as u64) < spill.payload_len {
        let page = &file[(next as usize - 1) * page_size..next as usize * page_size];
        let take = (spill.payload_len - payload.len() as u64).min(page_size as u64 - 4) as usize;
        payload.extend_from_slice(&page[4..4 + take]);
        next = u32::from_be_bytes(page[..4].try_into().unwrap());
    }
    payload
}

#[test]
fn batches_read_what_sqlite_reads() {
    let dir = tempfile::tempdir().unwrap();
    for (page_size, seed) in [(512u32, 1u64), (4096, 2), (65536, 3)] {
        let path = make_db(dir.path(), page_size, seed);
        let plan = partitioner::TablePlan::open(&path, "t").unwrap();
        let file = std::fs::read(&path).unwrap();
        let ps = page_size as usize;
        let usable = plan.header.usable_size();
        let conn = rusqlite::Connection::open(&path).unwrap();
        let sets = [
            vec![],
            vec![0],
            vec![2, 5],
            vec![5, 0, 3],
            vec![6, 1],
            vec![4, 3, 2, 1],
        ];
        // Every set with rowids read eagerly and lazily, through the page loop this CPU runs
        // and through the baseline one (SSE2 on x86-64) that CPUs without AVX2 run.
        let cases = sets.iter().flat_map(|w| {
            [(false, false), (true, false), (false, true)]
                .map(|(lazy, baseline)| (w.clone(), lazy, baseline))
        });
        for (wanted, lazy_rowids, baseline) in cases {
            let columns = if lazy_rowids {
                NeededColumns::new(&wanted).without_rowid()
            } else {
                NeededColumns::new(&wanted)
            };
            let mut got: Vec<(i64, Vec<Option<ValueRef<'_>>>)> = Vec::new();
            let mut spilled: Vec<Vec<u8>> = Vec::new();
            let mut spill_rowids = Vec::new();
            let mut batch = CellBatch::new();
            let mut scanned = 0;
            for &leaf in &plan.leaves {
                let page = &file[(leaf as usize - 1) * ps..leaf as usize * ps];
                let mut spills = Vec::new();
                scanned += decode_leaf(
                    &mut batch,
                    &columns,
                    leaf,
                    page,
                    usable,
                    &mut spills,
                    baseline,
                )
                .unwrap();
                assert_eq!(batch.rowids().is_some(), !lazy_rowids);
                for r in 0..batch.len() {
                    let values = (0..wanted.len()).map(|s| batch.value(page, r, s)).collect();
                    got.push((batch.rowid(page, r), values));
                }
                for spill in spills {
                    spill_rowids.push(spill.rowid);
                    spilled.push(assemble(&file, ps, &spill));
                }
            }
            // Spilled rows: decoded from their whole payloads, one at a time.
            let mut one = CellBatch::new();
            for (payload, rowid) in spilled.iter().zip(&spill_rowids) {
                let outcome = one.decode_record(&columns, *rowid, payload, true).unwrap();
                assert_eq!(outcome, RecordOutcome::Done);
                assert_eq!(one.len(), 1);
                let values = (0..wanted.len())
                    .map(|s| one.value(payload, 0, s))
                    .collect();
                got.push((one.rowid(payload, 0), values));
            }
            got.sort_by_key(|(rowid, _)| *rowid);
            let names = ["a", "b", "c", "d", "e", "f", "g"];
            let select: Vec<&str> = std::iter::once("rowid")
                .chain(wanted.iter().map(|&c| names[c]))
                .collect();
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT {} FROM t ORDER BY rowid",
                    select.join(",")
                ))
                .unwrap();
            let want: Vec<Vec<SqlValue>> = stmt
                .query_map([], |row| {
                    (0..select.len())
                        .map(|i| row.get::<_, SqlValue>(i))
                        .collect()
                })
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert_eq!(scanned, want.len(), "page size {page_size}: rows scanned");
            assert_eq!(got.len(), want.len(), "page size {page_size} {wanted:?}");
            for ((rowid, values), want) in got.iter().zip(&want) {
                assert_eq!(SqlValue::Integer(*rowid), want[0]);
                for (s, v) in values.iter().enumerate() {
                    // Only `g` is ever absent; SQLite reads its DEFAULT there.
                    let default = if wanted[s] == 6 {
                        SqlValue::Integer(7)
                    } else {
                        SqlValue::Null
                    };
                    assert!(
                        same(*v, &want[s + 1], &default, wanted[s] == 2),
                        "page size {page_size}, rowid {rowid}, column {}: {v:?} vs {:?}",
                        names[wanted[s]],
                        want[s + 1]
                    );
                }
            }
            if wanted == [4, 3, 2, 1] && page_size == 512 {
                assert!(!spilled.is_empty(), "the test must exercise spills");
            }
        }
    }
}

#[test]
fn damaged_pages_give_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_db(dir.path(), 1024, 9);
    let plan = partitioner::TablePlan::open(&path, "t").unwrap();
    let file = std::fs::read(&path).unwrap();
    let usable = plan.header.usable_size();
    let columns = NeededColumns::new(&[6, 0, 3]);
    let mut rng = Rng::xorshift64_star(42);
    let mut batch = CellBatch::new();
    let (mut errors, mut oks) = (0, 0);
    for _ in 0..3000 {
        let leaf = plan.leaves[rng.below(plan.leaves.len() as u64) as usize] as usize;
        let mut page = file[(leaf - 1) * 1024..leaf * 1024].to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(1024) as usize;
            page[at] = rng.next_u64() as u8;
        }
        let mut spills = Vec::new();
        let baseline = rng.below(2) == 1;
        let decoded = decode_leaf(
            &mut batch,
            &columns,
            leaf as u32,
            &page,
            usable,
            &mut spills,
            baseline,
        );
        match decoded {
            Ok(_) => {
                oks += 1;
                // Every value the batch offers must be readable.
                for r in 0..batch.len() {
                    for s in 0..columns.len() {
                        let _ = batch.value(&page, r, s);
                    }
                }
            }
            Err(_) => errors += 1,
        }
    }
    assert!(
        errors > 0 && oks > 0,
        "{errors} errors, {oks} clean decodes"
    );
}

/// Rows of a table as SQLite reads them: `(rowid, columns...)`.
fn sqlite_rows(path: &std::path::Path, select: &str) -> Vec<Vec<SqlValue>> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn.prepare(select).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |row| {
        (0..n).map(|i| row.get::<_, SqlValue>(i)).collect()
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

#[test]
fn columns_beyond_the_vector_walk_read_what_sqlite_reads() {
    // Twenty columns: a needed column at 18 takes the scalar walk, one at 15 the vector walk's
    // last lane; one-byte and multi-byte serial types mixed.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let cols: Vec<String> = (0..20).map(|c| format!("c{c}")).collect();
    conn.execute_batch(&format!("CREATE TABLE t({});", cols.join(",")))
        .unwrap();
    let mut rng = Rng::xorshift64_star(77);
    let tx = conn.unchecked_transaction().unwrap();
    for _ in 0..2000 {
        let row: Vec<SqlValue> = (0..20)
            .map(|_| match rng.below(5) {
                0 => SqlValue::Null,
                1 => SqlValue::Integer((rng.next_u64() >> rng.below(64)) as i64),
                2 => SqlValue::Real(rng.below(1000) as f64 / 8.0),
                3 => SqlValue::Text("t".repeat(rng.below(80) as usize)),
                _ => SqlValue::Blob(vec![1; rng.below(3) as usize]),
            })
            .collect();
        tx.execute(
            &format!("INSERT INTO t VALUES ({})", vec!["?"; 20].join(",")),
            rusqlite::params_from_iter(row),
        )
        .unwrap();
    }
    tx.commit().unwrap();
    let plan = partitioner::TablePlan::open(&path, "t").unwrap();
    let file = std::fs::read(&path).unwrap();
    let ps = plan.header.page_size as usize;
    for wanted in [vec![15usize, 0], vec![18, 2], vec![3, 19, 16]] {
        let columns = NeededColumns::new(&wanted);
        let mut batch = CellBatch::new();
        let mut got = Vec::new();
        for &leaf in &plan.leaves {
            let page = &file[(leaf as usize - 1) * ps..leaf as usize * ps];
            let mut spills = Vec::new();
            batch
                .decode_page(&columns, leaf, page, plan.header.usable_size(), &mut spills)
                .unwrap();
            assert!(spills.is_empty());
            for r in 0..batch.len() {
                let values: Vec<_> = (0..wanted.len()).map(|s| batch.value(page, r, s)).collect();
                got.push((batch.rowid(page, r), values));
            }
        }
        let select: Vec<String> = wanted.iter().map(|c| format!("c{c}")).collect();
        let want = sqlite_rows(
            &path,
            &format!("SELECT rowid, {} FROM t ORDER BY rowid", select.join(",")),
        );
        assert_eq!(got.len(), want.len());
        for ((rowid, values), want) in got.iter().zip(&want) {
            assert_eq!(SqlValue::Integer(*rowid), want[0]);
            for (s, v) in values.iter().enumerate() {
                assert!(
                    same(*v, &want[s + 1], &SqlValue::Null, false),
                    "{wanted:?} rowid {rowid} slot {s}: {v:?} vs {:?}",
                    want[s + 1]
                );
            }
        }
    }
}

#[test]
fn a_text_window_drops_exactly_the_ten_byte_texts_outside_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dates.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE t(n, d, x);").unwrap();
    let mut rng = Rng::xorshift64_star(5);
    let texts = [
        "1993-12-31",
        "1994-01-01",
        "1994-06-15",
        "1994-12-31",
        "1995-01-01",
        "1994x06-15",
        "1994-06-1",
        "1994-06-150",
        "0000000000",
        "1994-01-00",
    ];
    let tx = conn.unchecked_transaction().unwrap();
    for i in 0..3000 {
        let d = match rng.below(6) {
            0 => SqlValue::Null,
            1 => SqlValue::Integer(19940615),
            2 => SqlValue::Blob(b"1993-01-01".to_vec()),
            _ => SqlValue::Text(texts[rng.below(texts.len() as u64) as usize].into()),
        };
        tx.execute(
            "INSERT INTO t VALUES (?, ?, ?)",
            rusqlite::params![i, d, "y".repeat(rng.below(30) as usize)],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    let plan = partitioner::TablePlan::open(&path, "t").unwrap();
    let file = std::fs::read(&path).unwrap();
    let ps = plan.header.page_size as usize;
    // The window's column last among the needed ones (its offset is found by one sum), or
    // with a needed column after it (the full walk), in either slot order.
    let layouts: [(&[usize], usize, usize); 3] =
        [(&[0, 1], 1, 0), (&[1, 0], 0, 1), (&[0, 1, 2], 1, 0)];
    for (sep, (needed, window_slot, n_slot)) in [None, Some((4, b'-'))]
        .into_iter()
        .flat_map(|sep| layouts.into_iter().map(move |l| (sep, l)))
    {
        let window = TextWindow {
            slot: window_slot,
            lo: *b"1994-01-01",
            hi: *b"1995-01-01",
            sep,
        };
        let columns = NeededColumns::new(needed).with_window(Some(window));
        let mut batch = CellBatch::new();
        let (mut kept, mut scanned) = (Vec::new(), 0);
        for &leaf in &plan.leaves {
            let page = &file[(leaf as usize - 1) * ps..leaf as usize * ps];
            let mut spills = Vec::new();
            scanned += batch
                .decode_page(&columns, leaf, page, plan.header.usable_size(), &mut spills)
                .unwrap();
            for r in 0..batch.len() {
                match batch.value(page, r, n_slot) {
                    Some(ValueRef::Integer(n)) => kept.push(n),
                    other => panic!("n: {other:?}"),
                }
            }
        }
        // SQLite's own answer to "which rows survive": all but ten-byte texts outside the
        // window (that also hold '-' at 4 when `sep` says so).
        let dash = if sep.is_some() {
            "AND substr(d, 5, 1) = '-'"
        } else {
            ""
        };
        let want: Vec<i64> = sqlite_rows(
            &path,
            &format!(
                "SELECT n FROM t WHERE NOT (typeof(d) = 'text' AND length(d) = 10 {dash} \
                 AND (d < '1994-01-01' OR d >= '1995-01-01')) ORDER BY rowid"
            ),
        )
        .into_iter()
        .map(|r| match r[0] {
            SqlValue::Integer(n) => n,
            _ => unreachable!(),
        })
        .collect();
        assert_eq!(scanned, 3000, "dropped rows still count as scanned");
        assert_eq!(kept, want, "sep {sep:?}, columns {needed:?}");
        assert!(kept.len() < 3000 && kept.len() > 1000);
    }
}

#[test]
fn the_page_after_changes_nothing_but_what_is_prefetched() {
    // The same pages decoded one by one and told the page that follows (including one shorter
    // than a page and the empty hint) give the same rows.
    let dir = tempfile::tempdir().unwrap();
    let path = make_db(dir.path(), 4096, 11);
    let plan = partitioner::TablePlan::open(&path, "t").unwrap();
    let file = std::fs::read(&path).unwrap();
    let usable = plan.header.usable_size();
    let columns = NeededColumns::new(&[5, 1, 3]);
    let decode = |ahead: bool| {
        let mut batch = CellBatch::new();
        let mut rows = Vec::new();
        let leaves = &plan.leaves;
        for (i, &leaf) in leaves.iter().enumerate() {
            let page = &file[(leaf as usize - 1) * 4096..leaf as usize * 4096];
            let next = match leaves.get(i + 1) {
                Some(&n) if ahead && i % 3 != 2 => {
                    let at = (n as usize - 1) * 4096;
                    &file[at..at + if i % 3 == 1 { 100 } else { 4096 }]
                }
                _ => &[][..],
            };
            let mut spills = Vec::new();
            batch
                .decode_page_ahead(&columns, leaf, page, next, usable, &mut spills)
                .unwrap();
            for r in 0..batch.len() {
                let values: Vec<_> = (0..3)
                    .map(|s| format!("{:?}", batch.value(page, r, s)))
                    .collect();
                rows.push((batch.rowid(page, r), values));
            }
            rows.extend(
                spills
                    .iter()
                    .map(|s| (s.rowid, vec!["spilled".to_string()])),
            );
        }
        rows
    };
    let plain = decode(false);
    assert!(plain.len() > 100);
    assert_eq!(decode(true), plain);
}

/// A seek's rowid ranges: the decoder keeps exactly the cells whose rowid one of them holds
/// (also those whose record spills to overflow pages), through both page loops, with rowids
/// read eagerly and lazily; the page's cells are all still counted as scanned.
#[test]
fn rowid_ranges_keep_only_the_cells_they_hold() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_db(dir.path(), 1024, 11);
    let plan = partitioner::TablePlan::open(&path, "t").unwrap();
    let file = std::fs::read(&path).unwrap();
    let usable = plan.header.usable_size();
    let ranges = vec![(3, 3), (10, 20), (57, 57), (400, 700), (900, i64::MAX)];
    let conn = rusqlite::Connection::open(&path).unwrap();
    let want: Vec<i64> = conn
        .prepare(
            "SELECT rowid FROM t WHERE rowid = 3 OR rowid BETWEEN 10 AND 20 OR rowid = 57 \
             OR rowid BETWEEN 400 AND 700 OR rowid >= 900 ORDER BY rowid",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let all: i64 = conn
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    for (lazy, baseline) in [(false, false), (true, false), (false, true)] {
        let columns = NeededColumns::new(&[0, 4, 3]);
        let columns = if lazy {
            columns.without_rowid()
        } else {
            columns
        };
        let columns = columns.with_rowid_ranges(Some(ranges.clone()));
        let (mut got, mut scanned) = (Vec::new(), 0);
        let mut batch = CellBatch::new();
        for &leaf in &plan.leaves {
            let page = &file[(leaf as usize - 1) * 1024..leaf as usize * 1024];
            let mut spills = Vec::new();
            scanned += decode_leaf(
                &mut batch,
                &columns,
                leaf,
                page,
                usable,
                &mut spills,
                baseline,
            )
            .unwrap();
            got.extend((0..batch.len()).map(|r| batch.rowid(page, r)));
            got.extend(spills.iter().map(|s| s.rowid));
        }
        got.sort_unstable();
        assert_eq!(got, want, "lazy rowids {lazy}, baseline loop {baseline}");
        assert_eq!(scanned as i64, all);
    }
}
