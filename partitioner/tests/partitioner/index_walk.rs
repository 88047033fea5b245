//! Walking a whole index: above `partitioner::index::PARALLEL_WALK` entries the root's
//! subtrees are shared among threads; the rowids must come in SQLite's index order (checked
//! against `ORDER BY` over the index, both directions), and a page that two subtrees reach
//! must be an error, not rows listed twice.

use partitioner::index::PARALLEL_WALK;
use partitioner::TablePlan;

use super::{create_db, read_only, Layout};

/// A table of `rows` rows with an index on a key of many duplicates (so the rowid orders
/// ties) and a text column long enough to give the index four levels on 1 KiB pages.
fn build(dir: &std::path::Path, rows: i64) -> std::path::PathBuf {
    create_db(dir, "walk.db", Layout::pages(1024), |conn| {
        conn.execute_batch(&format!(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, s TEXT);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
             INSERT INTO t(k, s) SELECT (i * 7919) % 1000, printf('%08d', (i * 104729) % {rows})
             FROM n;
             CREATE INDEX t_k_s ON t(k, s);"
        ))
        .unwrap();
    })
}

fn index_root(plan: &TablePlan) -> u32 {
    plan.indexes
        .iter()
        .find(|i| i.name == "t_k_s")
        .expect("the index")
        .root_page
}

#[test]
fn a_whole_index_walk_gives_sqlites_order_in_both_directions() {
    let dir = tempfile::tempdir().unwrap();
    let rows = (PARALLEL_WALK as i64) * 3 / 2;
    let path = build(dir.path(), rows);
    let plan = TablePlan::open(&path, "t").unwrap();
    let root = index_root(&plan);
    let conn = read_only(&path);
    for (backward, dir) in [(false, "ASC"), (true, "DESC")] {
        let expected: Vec<i64> = conn
            .prepare(&format!(
                "SELECT id FROM t INDEXED BY t_k_s ORDER BY k {dir}, s {dir}, id {dir}"
            ))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(expected.len() as i64, rows);
        let walked = plan.index_rowids(root, 3, backward, 0, usize::MAX).unwrap();
        assert_eq!(walked.len(), expected.len(), "backward {backward}");
        assert!(walked == expected, "backward {backward}: another order");
        assert_eq!(plan.index_entries(root).unwrap(), rows as u64);
        // A walk that stops early stops at the same entries.
        let some = plan
            .index_rowids(root, 3, backward, 0, PARALLEL_WALK + 7)
            .unwrap();
        assert_eq!(some[..], expected[..PARALLEL_WALK + 7]);
        // Past an OFFSET: whole leaves counted, the entries of interior pages among them
        // (four levels: every kind of skip), then the entries wanted; none past the end.
        for skip in [
            1,
            5,
            1_000,
            54_321,
            rows as usize - 3,
            rows as usize,
            rows as usize + 9,
        ] {
            let after = plan
                .index_rowids(root, 3, backward, skip as u64, 10)
                .unwrap();
            let want = &expected[skip.min(expected.len())..(skip + 10).min(expected.len())];
            assert_eq!(after[..], want[..], "backward {backward}, skip {skip}");
        }
    }
}

#[test]
fn a_page_two_subtrees_reach_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = build(dir.path(), (PARALLEL_WALK as i64) * 3 / 2);
    let plan = TablePlan::open(&path, "t").unwrap();
    let root = index_root(&plan);
    drop(plan);
    // dbstat's paths: "/" the root, "/000/" its first child, and so on. The last page of
    // the third level gets the first leaf of the first one as its right child: the walk's
    // first and last subtrees, read by different threads, both reach that leaf.
    let conn = read_only(&path);
    let page_at = |sql: &str| -> u32 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    let last_third = page_at(
        "SELECT pageno FROM dbstat WHERE name = 't_k_s' AND length(path) = 9 \
         ORDER BY path DESC LIMIT 1",
    );
    let first_leaf = page_at(
        "SELECT pageno FROM dbstat WHERE name = 't_k_s' AND pagetype = 'leaf' ORDER BY path LIMIT 1",
    );
    drop(conn);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = (last_third as usize - 1) * 1024;
    assert_eq!(bytes[at], 0x02, "an interior index page above the leaves");
    bytes[at + 8..at + 12].copy_from_slice(&first_leaf.to_be_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let plan = TablePlan::open(&path, "t").unwrap();
    for backward in [None, Some(false), Some(true)] {
        let err = match backward {
            Some(b) => plan.index_rowids(root, 3, b, 0, usize::MAX).unwrap_err(),
            None => plan.index_entries(root).unwrap_err(),
        }
        .to_string();
        let twice = format!("page {first_leaf} is reached twice");
        let serial = format!("page {first_leaf} is already in the b-tree");
        assert!(err.contains(&twice) || err.contains(&serial), "{err}");
    }
}

/// `LIMIT n OFFSET m` over the table itself: the rowids after the first `m` rows in both
/// directions (whole leaves passed over from their cell counts), as SQLite's loop gives them;
/// a table leaf that a walk passes over whole is still checked (its cell pointer array).
#[test]
fn the_rows_after_an_offset_of_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let rows = 20_000i64;
    let path = build(dir.path(), rows);
    let plan = TablePlan::open(&path, "t").unwrap();
    let conn = read_only(&path);
    for (backward, dir) in [(false, "ASC"), (true, "DESC")] {
        for skip in [0, 1, 37, 9_999, 19_995, 20_000, 30_000] {
            let expected: Vec<i64> = conn
                .prepare(&format!(
                    "SELECT id FROM t ORDER BY id {dir} LIMIT 10 OFFSET {skip}"
                ))
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let got = plan.table_rowids(backward, skip, 10).unwrap();
            assert_eq!(got, expected, "backward {backward}, skip {skip}");
        }
    }
    let leaf: u32 = conn
        .query_row(
            "SELECT pageno FROM dbstat WHERE name = 't' AND pagetype = 'leaf' \
             ORDER BY path LIMIT 1 OFFSET 3",
            [],
            |r| r.get(0),
        )
        .unwrap();
    drop((conn, plan));
    let mut bytes = std::fs::read(&path).unwrap();
    let at = (leaf as usize - 1) * 1024;
    assert_eq!(bytes[at], 0x0d, "a table leaf");
    // A cell count whose pointer array runs past the page.
    bytes[at + 3..at + 5].copy_from_slice(&900u16.to_be_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let plan = TablePlan::open(&path, "t").unwrap();
    let err = plan
        .table_rowids(false, 15_000, 10)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&format!("page {leaf}")), "{err}");
}

/// The skip-ahead seeks of `SELECT DISTINCT` and `count(DISTINCT)`: for indexes of one to
/// five levels (512-byte to 4 KiB pages, keys short and spilling), values from one to every
/// row, evenly or skewed (a value with most entries spans many leaves; runs end at leaf
/// and interior boundaries), each value's first entry in both directions and the count of
/// values other than NULL must be SQLite's (the smallest, or largest, rowid of each value,
/// by `GROUP BY` over the table).
#[test]
fn seeking_past_each_value_finds_sqlites_first_entries() {
    use partitioner::index::KeyField;
    let order = |a: KeyField<'_>, b: KeyField<'_>| {
        let rank = |k: &KeyField<'_>| match k {
            KeyField::Null => 0,
            KeyField::Integer(_) | KeyField::Real(_) => 1,
            KeyField::Text(_) => 2,
            KeyField::Blob(_) => 3,
        };
        match (a, b) {
            (KeyField::Integer(x), KeyField::Integer(y)) => x.cmp(&y),
            (KeyField::Text(x), KeyField::Text(y)) => x.cmp(y),
            _ => rank(&a).cmp(&rank(&b)),
        }
    };
    let mut rng = testkit::Rng::xorshift64(0x2545_f491_4f6c_dd1d);
    let dir = tempfile::tempdir().unwrap();
    let mut case = 0;
    for page in [512u32, 1024, 4096] {
        for (rows, values) in [(1, 1), (300, 1), (2_000, 3), (3_000, 40), (2_500, 2_500)] {
            for skew in [false, true] {
                for long in [false, true] {
                    case += 1;
                    let name = format!("distinct-{case}.db");
                    let pad = if long { 700 } else { 3 };
                    let seed = rng.below(1 << 30);
                    let path = create_db(dir.path(), &name, Layout::pages(page), |conn| {
                        // Skewed: about half the rows share value 0; NULL keys too.
                        let value = if skew {
                            format!(
                                "CASE WHEN (i * {seed} + 7) % 2 = 0 THEN 0 WHEN i % 97 = 5 \
                                 THEN NULL ELSE (i * 7919 + {seed}) % {values} END"
                            )
                        } else {
                            format!("(i * 7919 + {seed}) % {values}")
                        };
                        conn.execute_batch(&format!(
                            "CREATE TABLE t(id INTEGER PRIMARY KEY, k);
                             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n
                               WHERE i < {rows})
                             INSERT INTO t(k) SELECT CASE WHEN {long} THEN
                               printf('%.{pad}c%08d', 'v', {value}) ELSE {value} END FROM n;
                             CREATE INDEX t_k ON t(k);"
                        ))
                        .unwrap();
                    });
                    let plan = TablePlan::open(&path, "t").unwrap();
                    let root = plan
                        .indexes
                        .iter()
                        .find(|i| i.name == "t_k")
                        .expect("the index")
                        .root_page;
                    let conn = read_only(&path);
                    let expect = |sql: &str| -> Vec<i64> {
                        conn.prepare(sql)
                            .unwrap()
                            .query_map([], |r| r.get(0))
                            .unwrap()
                            .map(Result::unwrap)
                            .collect()
                    };
                    let forwards = expect("SELECT min(id) FROM t GROUP BY k ORDER BY k");
                    let backwards = expect("SELECT max(id) FROM t GROUP BY k ORDER BY k DESC");
                    let what = format!(
                        "{page}-byte pages, {rows} rows, {values} values, skew {skew}, long {long}"
                    );
                    let all = plan
                        .index_distinct_firsts(root, (2, false), (u64::MAX, 10_000), &order)
                        .unwrap();
                    assert_eq!(all.as_deref(), Some(&forwards[..]), "{what}");
                    let all = plan
                        .index_distinct_firsts(root, (2, true), (u64::MAX, 10_000), &order)
                        .unwrap();
                    assert_eq!(all.as_deref(), Some(&backwards[..]), "{what}, backward");
                    // Stopped after a few values, or past the bound.
                    let few = plan
                        .index_distinct_firsts(root, (2, false), (2, 10_000), &order)
                        .unwrap()
                        .unwrap();
                    assert_eq!(few[..], forwards[..forwards.len().min(2)], "{what}");
                    if forwards.len() > 1 {
                        let over = plan
                            .index_distinct_firsts(root, (2, false), (u64::MAX, 1), &order)
                            .unwrap();
                        assert_eq!(over, None, "{what}: more values than the bound");
                    }
                    let count: i64 = conn
                        .query_row("SELECT count(DISTINCT k) FROM t", [], |r| r.get(0))
                        .unwrap();
                    assert_eq!(
                        plan.index_distinct_count(root, 2, &order).unwrap(),
                        count as u64,
                        "{what}"
                    );
                }
            }
        }
    }
}

/// The entries of a covering scan, as the executors meet them: each listed leaf's cells, then
/// the interior entries placed after it.
fn scanned_entries(file: &partitioner::PageFile, tree: &partitioner::index::IndexTree) -> Vec<i64> {
    let usable = file.header().usable_size();
    let mut page = file.page_buffer();
    let mut between = tree.between.iter().peekable();
    let mut rowids = Vec::new();
    for (k, &leaf) in tree.leaves.iter().enumerate() {
        file.read_page(leaf, &mut page).unwrap();
        assert_eq!(page[0], 0x0a, "leaf {leaf} is an index leaf");
        let cells = u16::from_be_bytes([page[3], page[4]]) as usize;
        for i in 0..cells {
            rowids.push(partitioner::index::leaf_entry_rowid(&page, usable, i).unwrap());
        }
        while let Some((_, record)) = between.next_if(|(after, _)| *after == k) {
            rowids.push(partitioner::index::entry_rowid(record).unwrap());
        }
    }
    assert!(between.next().is_none(), "an interior entry after no leaf");
    rowids
}

/// A covering scan's layout (`index_tree`): the leaves in key order and the interior entries
/// between them give every entry once, in SQLite's order; with a range of the first key
/// column, the leaves and entries kept hold every entry of the range, in order, and fewer
/// leaves.
#[test]
fn an_index_tree_lists_its_entries_in_key_order() {
    use partitioner::index::{index_tree, KeyField, Place};
    let dir = tempfile::tempdir().unwrap();
    let rows = 30_000;
    let path = build(dir.path(), rows);
    let plan = TablePlan::open(&path, "t").unwrap();
    let root = index_root(&plan);
    let file = partitioner::PageFile::open(&path).unwrap();
    let conn = read_only(&path);
    let ids = |sql: &str| -> Vec<i64> {
        conn.prepare(sql)
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let whole = index_tree(&file, root, 3, None).unwrap();
    assert!(whole.depth >= 3, "depth {}", whole.depth);
    assert!(!whole.between.is_empty());
    let expected = ids("SELECT id FROM t INDEXED BY t_k_s ORDER BY k, s, id");
    assert!(scanned_entries(&file, &whole) == expected, "another order");

    let keys: std::collections::HashMap<i64, i64> = ids("SELECT id FROM t")
        .into_iter()
        .zip(ids("SELECT k FROM t"))
        .collect();
    // One range (`BETWEEN`), then disjoint ranges in key order (an `IN` list's values, one
    // range each, with a `BETWEEN` among them), at the first leaf, inside and at the last.
    let lists: [&[(i64, i64)]; 3] = [
        &[(250, 260)],
        &[
            (0, 0),
            (5, 5),
            (250, 260),
            (261, 261),
            (700, 700),
            (999, 999),
        ],
        &[(17, 17), (640, 642)],
    ];
    for ranges in lists {
        let place = |k: KeyField<'_>| {
            let v = match k {
                KeyField::Null => return Place::Before(0),
                KeyField::Integer(v) => v,
                _ => return Place::Above,
            };
            let n = ranges.partition_point(|&(_, hi)| hi < v);
            match ranges.get(n) {
                None => Place::Above,
                Some(&(lo, _)) if v < lo => Place::Before(n),
                Some(_) => Place::Inside(n),
            }
        };
        let ranged = index_tree(&file, root, 3, Some(&place)).unwrap();
        assert!(
            ranged.leaves.len() * 10 < whole.leaves.len(),
            "{ranges:?}: {} leaves",
            ranged.leaves.len()
        );
        let wanted = |k: i64| ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&k));
        let in_ranges: Vec<i64> = expected
            .iter()
            .copied()
            .filter(|id| wanted(keys[id]))
            .collect();
        let kept: Vec<i64> = scanned_entries(&file, &ranged)
            .into_iter()
            .filter(|id| wanted(keys[id]))
            .collect();
        assert!(
            kept == in_ranges,
            "{ranges:?}: {} of {} entries",
            kept.len(),
            in_ranges.len()
        );
    }
}
