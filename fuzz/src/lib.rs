//! # corescan-fuzz: the bodies of corescan's fuzz targets
//!
//! Each function takes arbitrary bytes, feeds them to one reader of hostile input and panics
//! only when that reader misbehaves: a panic inside it, an error that does not name the file,
//! or an accepted result that is inconsistent. The libFuzzer binaries in `fuzz_targets/`
//! (built by `cargo fuzz`, nightly Rust) and the stable runner `src/bin/stable.rs` call them.
//!
//! | target | input | reader |
//! |---|---|---|
//! | [`header`] | the first 100 bytes of a database, then 8 bytes of file size (LE) | `DbHeader::parse` |
//! | [`btree`] | a whole database image | `TablePlan::open` of table `t` and its census |
//! | [`record`] | log2(page size) - 9, reserved bytes, then a table-leaf page | the engine's `LeafDecoder` |
//! | [`wal`] | database length (4 bytes LE), the database, then its `-wal` log | `TablePlan::open` through the log |
//!
//! Seed corpora come from files SQLite generates at run time: `fuzz/seed.sh`.
#![deny(missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use engine::q6::decoder::{LeafDecoder, MissingValue, Q6Columns};
use engine::q6::{PartialAggregate, Q6Filter, Q6Params};
use partitioner::sidecar::wal_path;
use partitioner::{DbHeader, Error, PageLocation, TablePlan};

/// A directory for the files the b-tree and WAL targets write, private to this process.
fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
        .path()
}

/// Panics unless `err` is one line that starts with `path`.
fn assert_names(err: &Error, path: &Path) {
    let text = err.to_string();
    assert!(
        text.starts_with(&path.display().to_string()) && !text.contains('\n'),
        "an error that does not name the file: {text:?}"
    );
}

/// `DbHeader::parse` on the first 100 bytes, with the file size from the next 8.
pub fn header(data: &[u8]) {
    let (bytes, rest) = data.split_at(data.len().min(100));
    let size = rest.get(..8).map_or(data.len() as u64, |b| {
        u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))
    });
    let path = Path::new("fuzz-header.db");
    match DbHeader::parse(path, bytes, size) {
        Err(e) => assert_names(&e, path),
        Ok(h) => {
            assert!((512..=65536).contains(&h.page_size) && h.page_size.is_power_of_two());
            assert!(h.usable_size() >= 480);
            assert!(u64::from(h.page_count) * u64::from(h.page_size) <= size);
            for page in [0, 1, h.page_count, u32::MAX] {
                let _ = (h.unusable_page_reason(page), h.page_offset(page));
            }
        }
    }
}

/// Plans table `t` of the database at `db` (and its log, if written), checks the plan's
/// consistency and runs the census.
fn plan_and_census(db: &Path) {
    let plan = match TablePlan::open(db, "t") {
        Ok(plan) => plan,
        Err(e) => return assert_names(&e, db),
    };
    let h = &plan.header;
    assert!(
        plan.leaves.windows(2).all(|w| w[0] < w[1]),
        "unsorted leaves"
    );
    assert!(plan.leaves.iter().all(|p| (2..=h.page_count).contains(p)));
    let pages: u64 = plan.extents.iter().map(|e| u64::from(e.pages)).sum();
    assert_eq!(pages, plan.leaves.len() as u64);
    let ranges: u64 = plan.split(&[1, 3]).iter().map(|r| r.pages()).sum();
    assert_eq!(ranges, pages);
    let wal_len = std::fs::metadata(wal_path(db)).map_or(0, |m| m.len());
    for &leaf in &plan.leaves {
        let end = |at: u64| at + u64::from(h.page_size);
        match plan.location(leaf) {
            PageLocation::Main(at) => assert!(end(at) <= h.file_size, "page {leaf} past the file"),
            PageLocation::Wal(at) => assert!(end(at) <= wal_len, "page {leaf} past the log"),
        }
    }
    for column in &plan.table.columns {
        if let Err(e) = plan.column_default(column) {
            assert_names(&e, db);
        }
    }
    match plan.census() {
        Ok(census) => assert_eq!(census.leaf_pages, plan.leaves.len() as u64),
        Err(e) => assert_names(&e, db),
    }
}

fn write_files(name: &str, db: &[u8], wal: Option<&[u8]>) -> PathBuf {
    let path = scratch().join(name);
    std::fs::write(&path, db).expect("write the database");
    match wal {
        Some(wal) => std::fs::write(wal_path(&path), wal).expect("write the log"),
        None => {
            let _ = std::fs::remove_file(wal_path(&path));
        }
    }
    path
}

/// A whole database image: plans table `t` and censuses it.
pub fn btree(data: &[u8]) {
    plan_and_census(&write_files("btree.db", data, None));
}

/// A database and its log (`u32` LE length of the database, the database, the log): plans
/// table `t` through the log and censuses it.
pub fn wal(data: &[u8]) {
    let Some((len, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (db, log) = rest.split_at(len);
    plan_and_census(&write_files("wal.db", db, Some(log)));
}

/// A table-leaf page for the engine's record decoder: `data[0]` picks the page size
/// (`512 << (data[0] % 8)`; bit 7 also picks other column positions, bit 6 column defaults),
/// `data[1]` the reserved bytes, the rest is the page (zero-padded or cut to size). Decodes
/// the page, re-evaluates each spilled record's local part, and evaluates the page bytes as
/// one record, complete and not.
pub fn record(data: &[u8]) {
    let [selector, reserved, page @ ..] = data else {
        return;
    };
    let page_size = 512u32 << (selector % 8);
    let usable = page_size.saturating_sub(u32::from(*reserved)).max(480);
    let columns = if selector & 0x80 == 0 {
        // The TPC-H lineitem positions.
        Q6Columns {
            quantity: 4,
            extended_price: 5,
            discount: 6,
            ship_date: 10,
        }
    } else {
        Q6Columns {
            quantity: 3,
            extended_price: 0,
            discount: 2,
            ship_date: 1,
        }
    };
    let mut decoder = LeafDecoder::new(columns, Q6Filter::from(&Q6Params::default()), usable);
    if selector & 0x40 != 0 {
        decoder = decoder.with_defaults([
            MissingValue::Integer(5),
            MissingValue::Real(901.25),
            MissingValue::Text(b"0.06".to_vec()),
            MissingValue::Unavailable("DEFAULT CURRENT_DATE".to_string()),
        ]);
    }
    let mut image = page.to_vec();
    image.resize(page_size as usize, 0);
    let mut agg = PartialAggregate::default();
    let mut spills = Vec::new();
    if decoder
        .decode_page(2, &image, &mut agg, &mut spills)
        .is_ok()
    {
        for spill in &spills {
            assert!(spill.local.len() as u64 <= spill.payload_len);
            let _ = decoder.eval_record(&spill.local, false, &mut agg);
        }
    }
    let _ = decoder.eval_record(page, true, &mut agg);
    let _ = decoder.eval_record(page, false, &mut agg);
    assert!(agg.rows_matched <= agg.rows_scanned + 2);
}
