//! [`ScanKernel`]: the seam between the scan loop and what is computed from the rows.
//!
//! The scan loop (I/O, readahead, page order, overflow chains, the WAL) is the same for every
//! query; what it computes is a kernel, as ripgrep's `Sink` is what a search does with its
//! matches. The coordinator makes one kernel per executor; each is fed its executor's
//! table-leaf pages in the range's order (file order, or b-tree key order for an ordered run),
//! then [`ScanKernel::finish`]es into a partial that the coordinator returns in range order
//! (range 0 first). In an ordered run the ranges and the pages in each follow the b-tree, so
//! a kernel streaming rows sees them in rowid order.
//!
//! Records whose needed bytes continue on overflow pages come back as [`Spill`]s: the scan
//! follows the chain only as far as the kernel asks ([`RecordOutcome::NeedMore`]) and calls
//! [`ScanKernel::eval_spill`] with the payload assembled so far.
//!
//! The loop is generic over the kernel (monomorphised, no `dyn`): a kernel's per-row code runs
//! as if written into the loop. [`table_leaf`] is the page check every kernel starts with.
//! Layering: this file imports nothing from the engine; the scan
//! loops below it call it, and kernels (such as the Q6 decoder, [`crate::q6`]) implement it.

/// The usable part of a table-leaf page and its b-tree header, checked: every kernel starts
/// its `decode_page` here. Errors say what is wrong (the scan adds the file and page).
pub fn table_leaf(
    page: &[u8],
    usable: u32,
) -> Result<(&[u8], partitioner::format::BtreePageHeader), String> {
    let page = page
        .get(..usable as usize)
        .ok_or_else(|| "page shorter than its usable size".to_string())?;
    let header = partitioner::format::BtreePageHeader::parse(page, 0)?;
    if !header.is_table_leaf() {
        return Err(format!(
            "expected a table leaf page (0x0d), found page type 0x{:02x}",
            header.page_type
        ));
    }
    Ok((page, header))
}

/// A cell whose needed bytes continue on overflow pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spill {
    /// The leaf page holding the cell.
    pub page: u32,
    /// The row's key.
    pub rowid: i64,
    /// The payload stored on the leaf page.
    pub local: Vec<u8>,
    /// The whole payload's size in bytes.
    pub payload_len: u64,
    /// The first overflow page.
    pub first_overflow: u32,
}

/// A row whose evaluation failed, as a kernel reports it from [`ScanKernel::page_done`]:
/// SQLite's error for the row (`integer overflow`, a function's error), not a fault of the
/// page. The scan adds the file, page and CPU ([`crate::Error::Eval`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError {
    /// The row's rowid.
    pub rowid: i64,
    /// SQLite's error message.
    pub message: String,
}

/// Whether a record could be evaluated from the bytes given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOutcome {
    /// The row was evaluated (and, if it qualified, kept).
    Done,
    /// A needed column (or the record header) lies beyond the bytes given.
    NeedMore,
}

/// What a scan computes: one per executor, fed that executor's leaf pages in its range's order.
pub trait ScanKernel: Clone + Send + 'static {
    /// One executor's partial result, sent to the coordinator.
    type Partial: Send + 'static;

    /// Decodes one table-leaf page (`page` is the whole page, `page_no` its number); cells
    /// whose needed bytes continue on overflow pages are pushed to `spills`, to come back
    /// through [`Self::eval_spill`]. `next` is the page the executor gives next (empty when it
    /// does not know it), which a kernel may ask the CPU to start loading while it decodes this
    /// one. Errors say what is wrong with the page; the scan adds the file, CPU and page number.
    fn decode_page(
        &mut self,
        page_no: u32,
        page: &[u8],
        next: &[u8],
        spills: &mut Vec<Spill>,
    ) -> Result<(), String>;

    /// Decodes one leaf page of an index scanned in place of the table
    /// ([`partitioner::plan::IndexScan`]): each cell's record (the key columns, then the
    /// rowid) is a row whose key is `first_place` plus the cell's index, its place in the
    /// index's order, used wherever a table's rows use their rowid. Spills as
    /// [`Self::decode_page`]. The default refuses: only kernels that read records by position
    /// (the query kernel) read indexes.
    fn decode_index_page(
        &mut self,
        page_no: u32,
        page: &[u8],
        first_place: i64,
        spills: &mut Vec<Spill>,
    ) -> Result<(), String> {
        let _ = (page_no, page, first_place, spills);
        Err("this scan reads table pages only, not an index's".into())
    }

    /// Evaluates the record of `spill` from a prefix of its payload (`complete` when it is the
    /// whole payload), or asks for more of the chain with [`RecordOutcome::NeedMore`] (only
    /// when not `complete`). Errors name the problem; the scan adds the leaf page.
    fn eval_spill(
        &mut self,
        spill: &Spill,
        payload: &[u8],
        complete: bool,
    ) -> Result<RecordOutcome, String>;

    /// Called once a page's cells, including those completed from overflow pages, have all
    /// been given to the kernel (a kernel streaming rows in order learns here that the
    /// page's rows are complete: records with overflow come after the page's other cells).
    /// A row whose evaluation failed ends the scan here: a kernel that met one keeps the
    /// page's rows before it first, then returns it (the scan adds the file and page).
    fn page_done(&mut self) -> Result<(), RowError> {
        Ok(())
    }

    /// Whether the scan should go on; once `false`, the executor stops reading (after the read
    /// it is decoding) and finishes normally: a `LIMIT` without `ORDER BY` that has its rows.
    fn wants_more(&self) -> bool {
        true
    }

    /// Rows examined so far (for the executor's report).
    fn rows(&self) -> u64;

    /// Ends the executor's share.
    fn finish(self) -> Self::Partial;
}
