//! [`CensusKernel`]: counts a table's rows and overflow pages by scanning it, for
//! `corescan explain --census`.
//!
//! Planning reads only the b-tree's interior pages, which is enough to list the leaves and cut
//! the ranges; how many rows there are and how many overflow pages their payloads fill is
//! written only on the leaves. The census reads them the way a query does: every executor its
//! range, with the readahead window and the chosen backend, and every overflow chain followed
//! to its end through the scan's one chain walk (so a looping or truncated chain is an error
//! naming the page, as in any scan). The overflow pages are counted by the scan's report
//! (`overflow_pages_read`), since following the chains is what reads them.
//!
//! Layering: a kernel on top of [`crate::scan::kernel`], beside [`crate::q6`].

use partitioner::cell::TableLeafCell;

use crate::scan::kernel::{table_leaf, RecordOutcome, ScanKernel, Spill};

/// One executor's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Census {
    /// Rows (table-leaf cells).
    pub rows: u64,
    /// Rows whose payload continues on overflow pages.
    pub rows_with_overflow: u64,
    /// Payload bytes of all rows.
    pub payload_bytes: u64,
    /// The largest payload.
    pub max_payload: u64,
}

impl Census {
    /// Adds another executor's counts.
    pub fn merge(&mut self, other: &Census) {
        self.rows += other.rows;
        self.rows_with_overflow += other.rows_with_overflow;
        self.payload_bytes += other.payload_bytes;
        self.max_payload = self.max_payload.max(other.max_payload);
    }
}

/// Counts rows and payloads; asks the scan to follow every overflow chain.
#[derive(Debug, Clone)]
pub struct CensusKernel {
    usable: u32,
    census: Census,
}

impl CensusKernel {
    /// A census of pages with `usable` usable bytes.
    pub fn new(usable: u32) -> Self {
        CensusKernel {
            usable,
            census: Census::default(),
        }
    }
}

impl ScanKernel for CensusKernel {
    type Partial = Census;

    fn decode_page(
        &mut self,
        page_no: u32,
        page: &[u8],
        _next: &[u8],
        spills: &mut Vec<Spill>,
    ) -> Result<(), String> {
        let usable = self.usable as usize;
        let (page, header) = table_leaf(page, self.usable)?;
        for i in 0..usize::from(header.cell_count) {
            let at = header.cell_offset(page, 0, i, usable)?;
            let cell = TableLeafCell::parse(page, at, self.usable)
                .map_err(|w| format!("cell {i}: {w}"))?;
            let c = &mut self.census;
            c.rows += 1;
            c.payload_bytes += cell.payload_len;
            c.max_payload = c.max_payload.max(cell.payload_len);
            if let Some(first_overflow) = cell.first_overflow {
                c.rows_with_overflow += 1;
                spills.push(Spill {
                    page: page_no,
                    rowid: cell.rowid,
                    local: cell.local(page).to_vec(),
                    payload_len: cell.payload_len,
                    first_overflow,
                });
            }
        }
        Ok(())
    }

    fn eval_spill(
        &mut self,
        _spill: &Spill,
        _payload: &[u8],
        complete: bool,
    ) -> Result<RecordOutcome, String> {
        // Walk every chain to its end: that reads (and counts) every overflow page.
        Ok(if complete {
            RecordOutcome::Done
        } else {
            RecordOutcome::NeedMore
        })
    }

    fn rows(&self) -> u64 {
        self.census.rows
    }

    fn finish(self) -> Census {
        self.census
    }
}
