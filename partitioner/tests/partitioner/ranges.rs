//! Splitting leaves into per-executor ranges: contiguous, disjoint, complete, proportional.

use partitioner::partition::{extents_of, proportional_shares, split_leaves};
use partitioner::LeafRange;
use tempfile::tempdir;
use testkit::Rng;

use crate::{create_db, fill, rng_from, Layout};

/// Checks every invariant of `ranges` cut from `leaves` by `weights`.
fn check(leaves: &[u32], weights: &[u32], ranges: &[LeafRange]) {
    assert_eq!(ranges.len(), weights.len());
    if weights.is_empty() {
        return;
    }
    // Together the ranges list every leaf once, in order: contiguous and disjoint.
    let mut flat = Vec::new();
    for (i, r) in ranges.iter().enumerate() {
        assert_eq!(r.index, i);
        for e in &r.extents {
            assert!(e.pages >= 1);
            flat.extend(e.first_page..=e.last_page());
        }
        // Extents within a range are maximal runs (a cut only happens between ranges).
        for pair in r.extents.windows(2) {
            assert!(
                pair[0].last_page() + 1 < pair[1].first_page,
                "{:?}",
                r.extents
            );
        }
    }
    assert_eq!(flat, leaves);
    let counts: Vec<u64> = ranges.iter().map(LeafRange::pages).collect();
    let total = leaves.len() as u64;
    let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    for (i, (&count, &w)) in counts.iter().zip(weights).enumerate() {
        if sum == 0 {
            // All-zero weights count as equal.
            let even = total / weights.len() as u64;
            assert!(count == even || count == even + 1, "{counts:?}");
        } else {
            // Within one page of the exact proportional share.
            let exact = total as f64 * f64::from(w) / sum as f64;
            assert!(
                (count as f64 - exact).abs() < 1.0,
                "range {i}: {counts:?} for {weights:?}"
            );
            if w == 0 {
                assert_eq!(count, 0);
                assert!(ranges[i].first_page().is_none());
            }
        }
    }
    if weights.windows(2).all(|w| w[0] == w[1]) {
        let (min, max) = (counts.iter().min(), counts.iter().max());
        if let (Some(min), Some(max)) = (min, max) {
            assert!(max - min <= 1, "{counts:?}");
        }
    }
}

fn random_leaves(rng: &mut Rng, n: usize) -> Vec<u32> {
    let mut page = 1 + rng.below(10) as u32;
    let mut leaves = Vec::with_capacity(n);
    for _ in 0..n {
        leaves.push(page);
        // Mostly consecutive runs, sometimes gaps (pages of other tables).
        page += if rng.below(4) == 0 {
            2 + rng.below(20) as u32
        } else {
            1
        };
    }
    leaves
}

#[test]
fn random_leaf_sets_and_weights() {
    let mut rng = rng_from(42);
    for round in 0..2000 {
        let n = match round % 4 {
            0 => rng.below(5) as usize,
            1 => rng.below(50) as usize,
            _ => rng.below(3000) as usize,
        };
        let leaves = random_leaves(&mut rng, n);
        let k = rng.below(17) as usize;
        let weights: Vec<u32> = match round % 3 {
            0 => vec![1 + rng.below(5) as u32; k],
            1 => (0..k).map(|_| rng.below(6) as u32).collect(),
            _ => (0..k).map(|_| rng.below(1 << 20) as u32).collect(),
        };
        let ranges = split_leaves(&leaves, &weights);
        check(&leaves, &weights, &ranges);
    }
}

#[test]
fn equal_weights_differ_by_at_most_one_page() {
    let leaves: Vec<u32> = (2..=1001).collect();
    for k in 1..=33 {
        let ranges = split_leaves(&leaves, &vec![1; k]);
        check(&leaves, &vec![1; k], &ranges);
    }
}

#[test]
fn weights_one_to_three_give_a_quarter_and_three_quarters() {
    let leaves: Vec<u32> = (10..410).collect();
    let ranges = split_leaves(&leaves, &[1, 3]);
    assert_eq!(ranges[0].pages(), 100);
    assert_eq!(ranges[1].pages(), 300);
    assert_eq!(ranges[0].last_page(), Some(109));
    assert_eq!(ranges[1].first_page(), Some(110));
}

#[test]
fn degenerate_inputs() {
    assert!(split_leaves(&[1, 2, 3], &[]).is_empty());
    let r = split_leaves(&[], &[1, 1]);
    assert!(r.iter().all(|r| r.extents.is_empty()));
    let r = split_leaves(&[5, 6, 7], &[0, 0, 0]);
    assert_eq!(
        r.iter().map(LeafRange::pages).collect::<Vec<_>>(),
        [1, 1, 1]
    );
    let r = split_leaves(&[5, 6, 7], &[0, 9, 0]);
    assert_eq!(
        r.iter().map(LeafRange::pages).collect::<Vec<_>>(),
        [0, 3, 0]
    );
    // More executors than leaves: some ranges are empty, none gets a page twice.
    let r = split_leaves(&[5, 6], &[1; 5]);
    check(&[5, 6], &[1; 5], &r);
    assert_eq!(proportional_shares(2, &[1; 5]), [1, 1, 0, 0, 0]);
}

#[test]
fn split_of_a_real_table() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "r.db", Layout::pages(1024), |c| {
        fill(c, "t", 8000, 100, None);
    });
    let plan = partitioner::TablePlan::open(&path, "t").unwrap();
    assert_eq!(plan.extents, extents_of(&plan.leaves));
    for weights in [vec![1], vec![1, 1], vec![2, 1, 1], vec![1; 7], vec![0, 1]] {
        check(&plan.leaves, &weights, &plan.split(&weights));
    }
}
