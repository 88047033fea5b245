//! Page lists and counts agree with SQLite's `dbstat` for every layout a real file may have.

use partitioner::PageFile;
use tempfile::tempdir;

use crate::{assert_matches_sqlite, create_db, dbstat, fill, insert_rows, read_only, Layout};

#[test]
fn page_sizes_512_4096_65536() {
    let dir = tempdir().unwrap();
    for (page_size, rows, big) in [
        (512, 6000, 700),
        (4096, 20_000, 9000),
        (65536, 40_000, 150_000),
    ] {
        let path = create_db(
            dir.path(),
            &format!("p{page_size}.db"),
            Layout::pages(page_size),
            |c| {
                fill(c, "t", rows, 120, Some((997, big)));
            },
        );
        let plan = assert_matches_sqlite(&path, "t");
        assert_eq!(plan.header.page_size, page_size);
        assert!(
            !plan.interior_pages.is_empty(),
            "{page_size}: no interior pages"
        );
        assert!(
            !dbstat(&path, "t").overflow.is_empty(),
            "{page_size}: no overflow"
        );
        if page_size == 512 {
            assert!(plan.depth >= 3, "512-byte pages should give a deep tree");
        }
    }
}

#[test]
fn tables_whose_pages_interleave() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "mixed.db", Layout::pages(1024), |c| {
        fill(c, "a", 0, 0, None);
        fill(c, "b", 0, 0, None);
        // Alternate small batches so both tables keep allocating pages in turn.
        for batch in 0..60 {
            insert_rows(c, "a", batch * 50..batch * 50 + 50, 200, None);
            insert_rows(c, "b", batch * 50..batch * 50 + 50, 200, None);
        }
    });
    let a = assert_matches_sqlite(&path, "a");
    let b = assert_matches_sqlite(&path, "b");
    assert!(
        a.extents.len() > 10,
        "pages of a did not interleave: {:?}",
        a.extents
    );
    let (first, last) = (a.leaves[0], a.leaves[a.leaves.len() - 1]);
    assert!(b.leaves.iter().any(|p| (first..last).contains(p)));
}

#[test]
fn freelist_pages_left_by_deletes() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "free.db", Layout::pages(4096), |c| {
        fill(c, "keep", 3000, 300, Some((50, 6000)));
        fill(c, "gone", 3000, 300, Some((50, 6000)));
        c.execute_batch("DELETE FROM gone WHERE a % 3 <> 0")
            .unwrap();
        insert_rows(c, "keep", 3000..4000, 300, Some((40, 6000)));
    });
    let plan = assert_matches_sqlite(&path, "keep");
    assert_matches_sqlite(&path, "gone");
    assert!(plan.header.freelist_pages > 0, "no freelist pages");
    let free: u32 = read_only(&path)
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    assert_eq!(plan.header.freelist_pages, free);
}

#[test]
fn rows_spilling_onto_long_overflow_chains() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "big.db", Layout::pages(4096), |c| {
        fill(c, "t", 400, 20_000, Some((7, 200_000)));
    });
    let plan = assert_matches_sqlite(&path, "t");
    let census = plan.census().unwrap();
    assert!(census.overflow_pages > 400, "{census:?}");
    assert!(census.rows_with_overflow > 300, "{census:?}");
    assert!(census.max_payload > 200_000, "{census:?}");
}

#[test]
fn auto_vacuum_pointer_map_pages() {
    let dir = tempdir().unwrap();
    for mode in ["FULL", "INCREMENTAL"] {
        let layout = Layout {
            auto_vacuum: mode,
            ..Layout::pages(512)
        };
        let path = create_db(dir.path(), &format!("{mode}.db"), layout, |c| {
            fill(c, "t", 4000, 150, Some((300, 3000)));
            fill(c, "u", 1000, 150, None);
            c.execute_batch("DELETE FROM u WHERE a % 2 = 0").unwrap();
        });
        let plan = assert_matches_sqlite(&path, "t");
        assert_matches_sqlite(&path, "u");
        let header = plan.header.clone();
        assert!(
            header.largest_root_page > 0,
            "{mode}: not an auto-vacuum file"
        );
        // Every page is a b-tree page (dbstat), a freelist page, or a pointer-map page, and
        // our pointer-map rule picks exactly the pages SQLite left out.
        let conn = read_only(&path);
        let mut stmt = conn.prepare("SELECT DISTINCT pageno FROM dbstat").unwrap();
        let in_btrees: Vec<u32> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut all = in_btrees.clone();
        let maps: Vec<u32> = (1..=header.page_count)
            .filter(|&p| header.is_pointer_map_page(p))
            .collect();
        assert!(
            maps.len() >= 2,
            "{mode}: expected several pointer-map pages"
        );
        assert!(maps.iter().all(|p| !in_btrees.contains(p)));
        all.extend(&maps);
        all.sort_unstable();
        let accounted = all.len() as u32 + header.freelist_pages;
        assert_eq!(accounted, header.page_count, "{mode}");
    }
}

#[test]
fn reserved_bytes_per_page() {
    let dir = tempdir().unwrap();
    for (page_size, reserved) in [(4096, 40), (512, 32), (1024, 255)] {
        let layout = Layout {
            reserved_bytes: reserved,
            ..Layout::pages(page_size)
        };
        let path = create_db(dir.path(), &format!("r{page_size}.db"), layout, |c| {
            fill(c, "t", 3000, 300, Some((13, 5000)));
        });
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(raw[20], reserved, "SQLite did not reserve bytes");
        let plan = assert_matches_sqlite(&path, "t");
        assert_eq!(plan.header.usable_size(), page_size - u32::from(reserved));
    }
}

#[test]
fn trailing_bytes_after_the_last_page_are_tolerated_like_sqlite() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "tail.db", Layout::pages(4096), |c| {
        fill(c, "t", 500, 100, None);
    });
    let pages = PageFile::open(&path).unwrap().header().page_count;
    let mut raw = std::fs::read(&path).unwrap();
    raw.extend_from_slice(&[0xAB; 1000]);
    std::fs::write(&path, &raw).unwrap();
    // SQLite still reads it, and so do we, with the same page count.
    let n: i64 = read_only(&path)
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 500);
    let plan = assert_matches_sqlite(&path, "t");
    assert_eq!(plan.header.page_count, pages);
}

#[test]
fn an_empty_table_is_one_leaf() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "empty.db", Layout::pages(4096), |c| {
        fill(c, "t", 0, 0, None);
    });
    let plan = assert_matches_sqlite(&path, "t");
    assert_eq!(plan.leaves, [plan.table.root_page]);
    assert_eq!(plan.depth, 1);
}
