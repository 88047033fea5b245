//! Damaged files: every kind of damage gives an `Err` naming the file and the page at fault;
//! nothing panics, hangs or reads out of bounds.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use partitioner::{Error, TablePlan};
use tempfile::{tempdir, TempDir};

use crate::{create_db, fill, rng_from, Layout};

const PAGE: u32 = 512;

/// A valid 512-byte-page database with a three-level table `t` and overflow rows, and its plan.
fn sample() -> (TempDir, PathBuf, TablePlan) {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "c.db", Layout::pages(PAGE), |c| {
        fill(c, "t", 5000, 60, Some((97, 1500)));
    });
    let plan = TablePlan::open(&path, "t").unwrap();
    assert!(plan.depth >= 3);
    (dir, path, plan)
}

/// Page `page` of the 512-byte-page file `path` (shared with `leaf_parents`).
pub(crate) fn read_page(path: &Path, page: u32) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    let at = (page as usize - 1) * PAGE as usize;
    raw[at..at + PAGE as usize].to_vec()
}

/// Writes `bytes` at `offset` of page `page` of the 512-byte-page file `path`.
pub(crate) fn write_at(path: &Path, page: u32, offset: usize, bytes: &[u8]) {
    let file = OpenOptions::new().write(true).open(path).unwrap();
    let at = u64::from(page - 1) * u64::from(PAGE) + offset as u64;
    file.write_all_at(bytes, at).unwrap();
}

/// Offset in `page` of the 4-byte child pointer of interior cell `i`.
pub(crate) fn child_pointer_offset(path: &Path, page: u32, i: usize) -> usize {
    let bytes = read_page(path, page);
    assert_eq!(bytes[0], 0x05, "page {page} is not interior");
    usize::from(u16::from_be_bytes([bytes[12 + 2 * i], bytes[13 + 2 * i]]))
}

/// Opens and censuses `path`; expects an error that names the file and, when given, the page,
/// and whose message contains `needle`.
fn expect_error(path: &Path, page: Option<u32>, needle: &str) -> Error {
    let err = TablePlan::open(path, "t")
        .and_then(|plan| plan.census())
        .expect_err("damage went unnoticed");
    let text = err.to_string();
    assert!(text.starts_with(&path.display().to_string()), "{text}");
    if let Some(page) = page {
        assert!(text.contains(&format!(": page {page}: ")), "{text}");
        assert_eq!(err.page(), Some(page), "{text}");
    }
    assert!(text.contains(needle), "expected {needle:?} in: {text}");
    err
}

#[test]
fn truncated_file() {
    let (_dir, path, plan) = sample();
    let len = plan.header.file_size;
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 300)
        .unwrap();
    expect_error(&path, None, "truncated");
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(60)
        .unwrap();
    expect_error(&path, None, "too short");
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    expect_error(&path, None, "empty");
}

#[test]
fn wrong_magic_and_bad_page_size() {
    let (_dir, path, _) = sample();
    write_at(&path, 1, 0, b"SQLite format 4");
    expect_error(&path, None, "not a SQLite database");
    write_at(&path, 1, 0, b"SQLite format 3");
    write_at(&path, 1, 16, &1000u16.to_be_bytes());
    expect_error(&path, None, "invalid page size 1000");
}

#[test]
fn child_pointer_cycle() {
    let (_dir, path, plan) = sample();
    let root = plan.table.root_page;
    // The root's first child is an interior page; point its first child back at the root.
    let child = read_page(&path, root);
    let at = child_pointer_offset(&path, root, 0);
    let level2 = u32::from_be_bytes(child[at..at + 4].try_into().unwrap());
    let at2 = child_pointer_offset(&path, level2, 0);
    write_at(&path, level2, at2, &root.to_be_bytes());
    expect_error(&path, Some(level2), "already in the tree");
}

#[test]
fn child_pointer_to_itself_and_shared_children() {
    let (_dir, path, plan) = sample();
    let root = plan.table.root_page;
    let at = child_pointer_offset(&path, root, 0);
    write_at(&path, root, at, &root.to_be_bytes());
    expect_error(&path, Some(root), "already in the tree");

    let (_dir, path, plan) = sample();
    let root = plan.table.root_page;
    // Two cells pointing at the same child.
    let right = read_page(&path, root)[8..12].to_vec();
    let at = child_pointer_offset(&path, root, 0);
    write_at(&path, root, at, &right);
    expect_error(&path, Some(root), "two parents");
}

#[test]
fn child_pointer_past_the_end_zero_and_page_one() {
    for (value, needle) in [
        (100_000u32, "past the end"),
        (0, "page number 0"),
        (1, "schema root"),
    ] {
        let (_dir, path, plan) = sample();
        let root = plan.table.root_page;
        let at = child_pointer_offset(&path, root, 1);
        write_at(&path, root, at, &value.to_be_bytes());
        expect_error(&path, Some(root), needle);
    }
    // The right-most child is checked as well.
    let (_dir, path, plan) = sample();
    let root = plan.table.root_page;
    write_at(&path, root, 8, &0u32.to_be_bytes());
    expect_error(&path, Some(root), "right child pointer");
}

#[test]
fn bad_page_types() {
    let (_dir, path, plan) = sample();
    // The root's right child: an interior page that is not the first of its level.
    let root = read_page(&path, plan.table.root_page);
    let interior = u32::from_be_bytes(root[8..12].try_into().unwrap());
    assert!(plan.interior_pages.contains(&interior));
    write_at(&path, interior, 0, &[0x02]);
    expect_error(&path, Some(interior), "index b-tree page");
    write_at(&path, interior, 0, &[0x07]);
    expect_error(&path, Some(interior), "invalid b-tree page type 0x07");
    write_at(&path, interior, 0, &[0x0d]);
    expect_error(&path, Some(interior), "same depth");

    // A damaged leaf is found by the census, which reads every leaf.
    let (_dir, path, plan) = sample();
    let leaf = plan.leaves[plan.leaves.len() / 2];
    write_at(&path, leaf, 0, &[0x0a]);
    expect_error(&path, Some(leaf), "index b-tree page");
    write_at(&path, leaf, 0, &[0x05]);
    expect_error(&path, Some(leaf), "different depths");

    // The schema's own root (page 1, b-tree header at offset 100).
    let (_dir, path, _) = sample();
    write_at(&path, 1, 100, &[0x99]);
    expect_error(&path, Some(1), "invalid b-tree page type 0x99");
}

#[test]
fn cell_pointers_outside_the_page() {
    for pointer in [0xFFFFu16, 600, 4, 0] {
        let (_dir, path, plan) = sample();
        let root = plan.table.root_page;
        write_at(&path, root, 12, &pointer.to_be_bytes());
        expect_error(&path, Some(root), "outside the cell content area");
    }
    let (_dir, path, plan) = sample();
    let leaf = plan.leaves[3];
    write_at(&path, leaf, 8, &0xFFF0u16.to_be_bytes());
    expect_error(&path, Some(leaf), "outside the cell content area");
    // A cell count whose pointer array cannot fit the page.
    let (_dir, path, plan) = sample();
    let root = plan.table.root_page;
    write_at(&path, root, 3, &0x4000u16.to_be_bytes());
    expect_error(&path, Some(root), "cell pointer array");
}

#[test]
fn broken_overflow_chains() {
    let (_dir, path, plan) = sample();
    let stat = crate::dbstat(&path, "t");
    let overflow = stat.overflow[0];
    // Point the first overflow page's next pointer back at itself.
    write_at(&path, overflow, 0, &overflow.to_be_bytes());
    expect_error(&path, Some(overflow), "already in use");
    write_at(&path, overflow, 0, &0u32.to_be_bytes());
    expect_error(&path, Some(overflow), "chain ends after 1");
    // A chain pointing into the table's own leaves.
    write_at(&path, overflow, 0, &plan.leaves[0].to_be_bytes());
    expect_error(&path, Some(overflow), "already in use");
}

#[test]
fn root_page_damage_in_the_schema() {
    let (_dir, path, plan) = sample();
    // Rewrite the 1-byte root page value in t's schema record to an index page number.
    let page1 = read_page(&path, 1);
    let root = plan.table.root_page as u8;
    let pos = page1
        .windows(3)
        .rposition(|w| w == [b't', b't', root])
        .expect("schema record of t");
    write_at(&path, 1, pos + 2, &[0]);
    expect_error(&path, Some(1), "root page 0");
}

#[test]
fn random_byte_damage_never_panics() {
    let (_dir, path, plan) = sample();
    let pristine = std::fs::read(&path).unwrap();
    let mut rng = rng_from(7);
    let (mut refused, mut accepted) = (0, 0);
    let interesting: Vec<u32> = plan
        .interior_pages
        .iter()
        .copied()
        .chain(plan.leaves.iter().copied().step_by(50))
        .chain([1])
        .collect();
    for _ in 0..300 {
        let mut bytes = pristine.clone();
        for _ in 0..1 + rng.below(4) {
            let page = interesting[rng.below(interesting.len() as u64) as usize];
            // Mostly headers and cell pointers, sometimes anywhere in the page.
            let within = if rng.below(2) == 0 {
                rng.below(40)
            } else {
                rng.below(u64::from(PAGE))
            };
            let at = (page as usize - 1) * PAGE as usize + within as usize;
            bytes[at] = rng.next_u64() as u8;
        }
        std::fs::write(&path, &bytes).unwrap();
        let named = |e: partitioner::Error| {
            let text = e.to_string();
            assert!(
                text.starts_with(&path.display().to_string()) && !text.contains('\n'),
                "{text:?}"
            );
        };
        match TablePlan::open(&path, "t") {
            Ok(plan) => {
                match plan.census() {
                    Ok(_) => accepted += 1,
                    Err(e) => {
                        named(e);
                        refused += 1;
                    }
                }
                let _ = plan.split(&[1, 2, 3]);
            }
            Err(e) => {
                named(e);
                refused += 1;
            }
        }
    }
    // The damage reached both outcomes: some files refused (with the file named), some read.
    assert!(
        refused > 0 && accepted > 0,
        "{refused} refused, {accepted} read"
    );
}
