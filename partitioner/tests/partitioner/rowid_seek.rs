//! A walk restricted to rowid ranges (`TablePlan::restrict_to_rowid_ranges`, what an index
//! seek's rows and `WHERE rowid IN (...)` read) against SQLite's own view of the tree:
//! `dbstat` lists the leaves in key order with their cell counts, so each leaf's first and
//! last rowid are known. Every leaf holding a rowid of a range must be listed, and a leaf
//! whose neighbours' rowids shut it out of every range must not be (its parent's keys lie
//! between its rowids and its neighbours'), on a three-level tree with gaps in the rowids.

use partitioner::TablePlan;

use super::{create_db, read_only, rng_from, Layout};

/// The table's leaves in key order (dbstat's path order), each with its rowids.
fn leaves_with_rowids(path: &std::path::Path) -> Vec<(u32, Vec<i64>)> {
    let conn = read_only(path);
    let leaves: Vec<(u32, i64)> = conn
        .prepare(
            "SELECT pageno, ncell FROM dbstat WHERE name = 't' AND pagetype = 'leaf' ORDER BY path",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let rowids: Vec<i64> = conn
        .prepare("SELECT rowid FROM t ORDER BY rowid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut at = 0;
    let out: Vec<(u32, Vec<i64>)> = leaves
        .into_iter()
        .map(|(page, cells)| {
            let cells = cells as usize;
            at += cells;
            (page, rowids[at - cells..at].to_vec())
        })
        .collect();
    assert_eq!(at, rowids.len());
    out
}

#[test]
fn a_rowid_seek_lists_exactly_the_leaves_its_ranges_can_reach() {
    let dir = tempfile::tempdir().unwrap();
    // Rowids 3, 6, 9, ... with a hole of 3,000 in the middle: seeks land in gaps too.
    let path = create_db(dir.path(), "seek.db", Layout::pages(1024), |conn| {
        conn.execute_batch(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30000)
             INSERT INTO t SELECT i * 3 + (CASE WHEN i > 15000 THEN 3000 ELSE 0 END), i FROM n;",
        )
        .unwrap();
    });
    let plan = TablePlan::open(&path, "t").unwrap();
    assert!(plan.depth >= 3, "a three-level tree, got {}", plan.depth);
    let leaves = leaves_with_rowids(&path);
    let max = *leaves.last().unwrap().1.last().unwrap();
    let mut rng = rng_from(20_261_207);
    for round in 0..300 {
        // 1-8 disjoint ascending ranges, points and spans, some outside the rowids.
        let mut ranges: Vec<(i64, i64)> = Vec::new();
        let mut lo = rng.below(200) as i64 - 100;
        for _ in 0..1 + rng.below(8) {
            let len = match rng.below(4) {
                0 => 0,
                1 => rng.below(10) as i64,
                2 => rng.below(2_000) as i64,
                _ => rng.below(40_000) as i64,
            };
            ranges.push((lo, lo + len));
            lo += len + 1 + rng.below(max as u64 / 4) as i64;
        }
        let listed = plan.restrict_to_rowid_ranges(&ranges).unwrap();
        let listed: Vec<u32> = listed.leaves_in_key_order().to_vec();
        let meets = |lo: i64, hi: i64| ranges.iter().any(|&(a, b)| a <= hi && lo <= b);
        // The leaves in key order that must be listed, and those that may be.
        let mut must = Vec::new();
        let mut may = Vec::new();
        for (k, (page, rowids)) in leaves.iter().enumerate() {
            let after = k
                .checked_sub(1)
                .map_or(i64::MIN, |p| leaves[p].1.last().unwrap() + 1);
            let before = leaves.get(k + 1).map_or(i64::MAX, |n| n.1[0] - 1);
            if meets(after, before) {
                may.push(*page);
            }
            if rowids.iter().any(|&r| meets(r, r)) {
                must.push(*page);
            }
        }
        let mut rest = listed.iter();
        for page in &must {
            assert!(
                rest.any(|p| p == page),
                "round {round}, ranges {ranges:?}: leaf {page} holds a rowid sought but is not listed (in key order): {listed:?}"
            );
        }
        for page in &listed {
            assert!(
                may.contains(page),
                "round {round}, ranges {ranges:?}: leaf {page} can hold no rowid sought but is listed"
            );
        }
    }
}
