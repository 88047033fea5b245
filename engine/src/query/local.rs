//! A single-threaded driver for [`QueryKernel`]: reads each range's leaf pages (and overflow
//! chains) through [`partitioner::PageFile`], which takes every page from its latest committed
//! copy (the WAL's, when it has one). It is the reference the parallel scan is tested against
//! and the path taken for tiny tables.

use partitioner::format::overflow_page_capacity;
use partitioner::{PageFile, TablePlan};

use crate::error::{Error, Result};

use super::ir::QueryPlan;
use super::kernel::{Partial, QueryKernel, RowSpill};
use super::record::Decoded;

/// Runs `query` over `plan` split into `ranges` ranges, one kernel per range, in this thread;
/// returns the partials in range order and the number of rows scanned.
pub fn run_local(
    plan: &TablePlan,
    query: std::sync::Arc<QueryPlan>,
    ranges: usize,
) -> Result<(Vec<Partial>, u64)> {
    let file = PageFile::open(&plan.path)?;
    let usable = plan.header.usable_size();
    let corrupt = |page: u32, what: String| Error::Corrupt {
        cpu: 0,
        path: plan.path.clone(),
        page,
        what,
    };
    let weights = vec![1; ranges.max(1)];
    let mut partials = Vec::new();
    let mut rows = 0;
    let mut page = file.page_buffer();
    for range in plan.split(&weights) {
        let mut kernel = QueryKernel::new(std::sync::Arc::clone(&query), usable);
        let mut spills = Vec::new();
        let leaves = range
            .extents
            .iter()
            .flat_map(|e| e.first_page..e.first_page + e.pages);
        for leaf in leaves {
            file.read_page(leaf, &mut page)?;
            kernel
                .decode_page(leaf, &page, &mut spills)
                .map_err(|w| corrupt(leaf, w))?;
            for spill in spills.drain(..) {
                let payload = read_overflow(&file, usable, &spill).map_err(|e| match e {
                    Error::Plan(p) => Error::Plan(p),
                    other => other,
                })?;
                match kernel.eval_spill(&spill, &payload, true) {
                    Ok(Decoded::Done) => {}
                    Ok(Decoded::NeedMore) => {
                        return Err(corrupt(leaf, "record runs past its payload".into()))
                    }
                    Err(w) => return Err(corrupt(leaf, w)),
                }
            }
        }
        rows += kernel.rows();
        partials.push(kernel.finish());
    }
    plan.check_unchanged()?;
    Ok((partials, rows))
}

/// The whole payload of a spilled cell: its local part and its overflow chain.
fn read_overflow(file: &PageFile, usable: u32, spill: &RowSpill) -> Result<Vec<u8>> {
    let mut payload = spill.local.clone();
    let capacity = overflow_page_capacity(usable) as usize;
    let mut next = spill.first_overflow;
    let mut buf = file.page_buffer();
    let max_pages = file.header().page_count;
    let mut pages = 0u32;
    while (payload.len() as u64) < spill.payload_len {
        if next == 0 || pages > max_pages {
            return Err(Error::Plan(file.corrupt(
                spill.page,
                format!(
                    "overflow chain of the cell with rowid {} ends before its payload",
                    spill.rowid
                ),
            )));
        }
        file.read_page(next, &mut buf)?;
        let want = ((spill.payload_len - payload.len() as u64) as usize).min(capacity);
        payload.extend_from_slice(&buf[4..4 + want]);
        next = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        pages += 1;
    }
    Ok(payload)
}
