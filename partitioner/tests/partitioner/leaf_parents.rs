//! Plans that leave the leaf-parent level to the scan ([`TablePlan::open_for_scan`]): the
//! shares list exactly the leaves the full walk lists, in the order asked for, and damage in
//! the level is reported by the share that reads it, naming the file and the page.

use std::path::{Path, PathBuf};

use partitioner::{Share, TablePlan};
use tempfile::{tempdir, TempDir};

use crate::corrupt::{child_pointer_offset, read_page, write_at};
use crate::{create_db, fill, rng_from, Layout};

/// `t` with 512-byte pages (three or four levels), rows inserted in key order.
fn in_order(dir: &Path) -> PathBuf {
    create_db(dir, "in_order.db", Layout::pages(512), |c| {
        fill(c, "t", 6000, 60, Some((97, 1500)));
    })
}

/// `t` with 512-byte pages and rowids inserted in a shuffled order, so that page splits
/// leave the leaves out of key order in the file.
fn shuffled(dir: &Path) -> PathBuf {
    create_db(dir, "shuffled.db", Layout::pages(512), |c| {
        fill(c, "t", 0, 0, None);
        let mut ids: Vec<u64> = (0..6000).collect();
        let mut rng = rng_from(7);
        for i in (1..ids.len()).rev() {
            ids.swap(i, rng.below(i as u64 + 1) as usize);
        }
        c.execute_batch("BEGIN").unwrap();
        for id in ids {
            c.execute(
                "INSERT INTO t(rowid, a, b, c) VALUES (?1, ?1, ?2, 0.5)",
                rusqlite::params![id as i64, "y".repeat((id % 50) as usize)],
            )
            .unwrap();
        }
        c.execute_batch("COMMIT").unwrap();
    })
}

/// The leaves of every share, in the order each share lists them, shares in order.
fn leaves_of(shares: Vec<Share>) -> Vec<Vec<u32>> {
    shares
        .into_iter()
        .map(|s| {
            let range = s.leaves().unwrap();
            range
                .extents
                .iter()
                .flat_map(|e| e.first_page..=e.last_page())
                .collect()
        })
        .collect()
}

#[test]
fn shares_list_the_leaves_the_full_walk_lists() {
    let dir = tempdir().unwrap();
    let paths = [in_order(dir.path()), shuffled(dir.path())];
    for path in &paths {
        let path = path.as_path();
        let full = TablePlan::open(path, "t").unwrap();
        let mut plan = TablePlan::open_for_scan(path, "t").unwrap();
        assert!(full.depth >= 3, "{}", path.display());
        assert_eq!(plan.depth, full.depth);
        assert!(plan.leaves.is_empty() && plan.extents.is_empty());
        let parents = plan
            .leaf_parents
            .as_ref()
            .expect("a deferred leaf-parent level");
        // The parents are interior pages the full walk read; the plan read only those above.
        assert!(parents
            .pages()
            .iter()
            .all(|p| full.interior_pages.contains(p)));
        assert_eq!(
            plan.interior_pages.len() + parents.pages().len(),
            full.interior_pages.len()
        );
        assert!(!plan.leaf_sample().is_empty());
        assert!(plan.leaf_sample().iter().all(|p| full.leaves.contains(p)));
        for min in [1, usize::MAX] {
            // `usize::MAX`: too few parents per share, so the plan reads them itself.
            plan.leaf_parents
                .as_mut()
                .unwrap()
                .set_min_parents_per_share(min);
            for weights in [
                vec![1],
                vec![1, 1],
                vec![1, 2, 3],
                vec![0, 1, 0],
                vec![1; 9],
            ] {
                let what = format!("{}, min {min}, weights {weights:?}", path.display());
                // File order: each share's leaves ascending, all of them once.
                let by_page = leaves_of(plan.shares(&weights, false).unwrap());
                assert_eq!(by_page.len(), weights.len(), "{what}");
                assert!(
                    by_page.iter().all(|s| s.windows(2).all(|w| w[0] < w[1])),
                    "{what}"
                );
                let mut all: Vec<u32> = by_page.concat();
                all.sort_unstable();
                assert_eq!(all, full.leaves, "{what}");
                for (share, &w) in by_page.iter().zip(&weights) {
                    assert_eq!(share.is_empty(), w == 0, "{what}");
                }
                // Key order: the shares one after the other are the full walk's key order.
                let by_key = leaves_of(plan.shares(&weights, true).unwrap());
                assert_eq!(by_key.concat(), full.leaves_in_key_order(), "{what}");
            }
        }
        assert_eq!(plan.census().unwrap(), full.census().unwrap());
    }
    // The shuffled table really is fragmented (else its key-order check proves nothing).
    let full = TablePlan::open(&paths[1], "t").unwrap();
    assert!(!full.leaves_in_file_order());
}

#[test]
fn shallow_tables_are_walked_whole() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "small.db", Layout::pages(4096), |c| {
        fill(c, "t", 300, 20, None);
    });
    let plan = TablePlan::open_for_scan(&path, "t").unwrap();
    let full = TablePlan::open(&path, "t").unwrap();
    assert_eq!(plan.depth, 2);
    assert!(plan.leaf_parents.is_none());
    assert_eq!(plan.leaves, full.leaves);
    assert_eq!(plan.leaf_sample(), &full.leaves[..]);
}

/// A fresh in-order file, its deferred plan with one parent per share allowed, and the
/// leaf-parent level.
fn damaged_sample() -> (TempDir, PathBuf, Vec<u32>) {
    let dir = tempdir().unwrap();
    let path = in_order(dir.path());
    let plan = TablePlan::open_for_scan(&path, "t").unwrap();
    let parents = plan.leaf_parents.as_ref().unwrap().pages().to_vec();
    assert!(parents.len() >= 8, "{} parents", parents.len());
    (dir, path, parents)
}

/// The errors of reading two shares of a scan plan of `path` that splits by parents however
/// few there are.
fn share_errors(path: &Path) -> Vec<String> {
    let mut plan = TablePlan::open_for_scan(path, "t").unwrap();
    plan.leaf_parents
        .as_mut()
        .unwrap()
        .set_min_parents_per_share(1);
    plan.shares(&[1, 1], false)
        .unwrap()
        .into_iter()
        .filter_map(|s| s.leaves().err().map(|e| e.to_string()))
        .collect()
}

/// Expects reading two shares of a scan plan of `path` to fail, naming the file and `page`
/// with `needle` in the message.
fn expect_share_error(path: &Path, page: u32, needle: &str) {
    let errors = share_errors(path);
    let text = errors.first().expect("damage went unnoticed");
    assert!(text.starts_with(&path.display().to_string()), "{text}");
    assert!(text.contains(&format!(": page {page}: ")), "{text}");
    assert!(text.contains(needle), "expected {needle:?} in: {text}");
}

#[test]
fn damage_in_the_leaf_parent_level_is_found_by_the_share_reading_it() {
    // A parent in the second share claims the first child of a parent in the first share.
    let (_dir, path, parents) = damaged_sample();
    let (first, late) = (parents[1], parents[parents.len() - 2]);
    let at = child_pointer_offset(&path, first, 0);
    let child = read_page(&path, first)[at..at + 4].to_vec();
    write_at(&path, late, child_pointer_offset(&path, late, 1), &child);
    // Whichever share claimed the page second reports it, naming its own parent.
    let errors = share_errors(&path);
    let text = errors
        .first()
        .expect("a page with two parents went unnoticed");
    assert!(text.contains("two parents"), "{text}");
    assert!(
        text.contains(&format!(": page {first}: ")) || text.contains(&format!(": page {late}: ")),
        "{text}"
    );
    // A page met twice inside one share, and a child pointing back at a parent.
    let (_dir, path, parents) = damaged_sample();
    let p = parents[3];
    let at0 = child_pointer_offset(&path, p, 0);
    let child = read_page(&path, p)[at0..at0 + 4].to_vec();
    write_at(&path, p, child_pointer_offset(&path, p, 2), &child);
    expect_share_error(&path, p, "cell 2 child pointer");
    let (_dir, path, parents) = damaged_sample();
    let p = parents[parents.len() - 3];
    write_at(&path, p, 8, &parents[0].to_be_bytes());
    expect_share_error(&path, p, "right child pointer");

    // A parent that is a leaf: the level is uneven.
    let (_dir, path, parents) = damaged_sample();
    let p = parents[parents.len() / 2 + 1];
    write_at(&path, p, 0, &[0x0d]);
    expect_share_error(&path, p, "same depth");

    // Unusable child pointers.
    for (value, needle) in [(100_000u32, "past the end"), (0, "page number 0")] {
        let (_dir, path, parents) = damaged_sample();
        let p = parents[parents.len() - 1];
        write_at(
            &path,
            p,
            child_pointer_offset(&path, p, 1),
            &value.to_be_bytes(),
        );
        expect_share_error(&path, p, needle);
    }
}
