//! The page-batch record decoder every scan kernel shares: one table-leaf page's cells decoded
//! together into the serial types and body offsets of the columns a query needs.
//!
//! A kernel names the record columns it needs once ([`NeededColumns`]); for each page,
//! [`CellBatch::decode_page`] walks the cell pointer array and, for every cell, reads the
//! payload size and rowid varints, the record header up to the last needed column, and keeps
//! each needed column's serial type and offset. Values are read afterwards, only for the rows
//! and columns a filter still cares about ([`CellBatch::value`]): a predicate that rejects most
//! rows on one column never materialises the others.
//!
//! The common case takes a fast path without per-byte branches:
//! the varints are read from one eight-byte word (the continuation bits found with a mask, the
//! seven-bit groups packed with three shift-and-mask steps: SIMD within a register, portable to
//! every target), and when every needed column is among the first sixteen, their sixteen serial
//! types become body offsets in one vector step (`header`: SSE2 on x86-64, a size table
//! elsewhere), with one check for "all of them were single-byte" at the end. Needed columns
//! further right take the same walk through the size table. Anything else (multi-byte serial
//! types, a record that ends before a needed column, payloads that spill, cells at the very end
//! of the page) takes the general path, kept out of line, which checks every byte and names
//! what is wrong.
//!
//! Two things keep the CPU fed on a warm scan, where the page is in memory but not in the
//! cache: told the page that comes next ([`CellBatch::decode_page_ahead`]), the decoder asks
//! for its cache lines a few per cell while it decodes this one (a hardware prefetcher does not
//! cross a 4 KiB page, and a burst of requests stalls on the core's line-fill buffers); and a
//! kernel whose filter opens with a bytewise range test on a short text (Q6's ship date) can
//! have the decoder drop the rows outside it before they are written to the batch
//! ([`TextWindow`]): six rows in seven never cost the kernel anything.
//!
//! A cell whose needed columns lie beyond the part of its payload stored on the leaf is not
//! part of the batch: it is returned as a [`Spill`]; the scan follows its overflow chain and
//! the kernel decodes the assembled prefix with [`CellBatch::decode_record`], a batch of one.
//! Rows keep page order within a batch (cell pointer order, which is rowid order).

use std::sync::Arc;

use partitioner::format::{
    read_be_int, read_varint, serial_type_size, table_leaf_local_payload, varint_len,
};

use crate::scan::kernel::{table_leaf, RecordOutcome, Spill};
use crate::value::ValueRef;

/// A needed column's "serial type" when the record ends before it: a row written before
/// `ALTER TABLE ... ADD COLUMN` added the column. The kernel reads the column's DEFAULT.
pub const ABSENT: u32 = u32::MAX;

/// A cache line's size (the prefetch stride).
const LINE: usize = 64;

/// Records whose needed columns are all among the first this many take the fast path.
const MAX_FAST_COLUMNS: usize = 64;

/// Where one needed column's value lies in one row: its serial type ([`ABSENT`] when the record
/// ends before the column) and the offset of its body in the batch's base buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slot {
    /// The serial type (values of 2 GiB and more, serial types above `u32::MAX - 1`, are
    /// refused when decoded).
    pub serial: u32,
    /// The first byte of the body.
    pub offset: u32,
}

impl Slot {
    /// Whether the value is text.
    #[inline(always)]
    pub fn is_text(self) -> bool {
        self.serial >= 13 && self.serial & 1 == 1 && self.serial != ABSENT
    }

    /// The body bytes of a text or blob value (empty for other types).
    #[inline(always)]
    pub fn bytes(self, base: &[u8]) -> &[u8] {
        if self.serial >= 12 && self.serial != ABSENT {
            let at = self.offset as usize;
            &base[at..at + ((self.serial - 12) / 2) as usize]
        } else {
            &[]
        }
    }

    /// The value, borrowed from `base`; `None` when the record ends before the column. A
    /// stored NaN reads as NULL, as in SQLite.
    #[inline(always)]
    pub fn value(self, base: &[u8]) -> Option<ValueRef<'_>> {
        let at = self.offset as usize;
        Some(match self.serial {
            0 => ValueRef::Null,
            8 => ValueRef::Integer(0),
            9 => ValueRef::Integer(1),
            s @ 1..=6 => {
                let size = serial_type_size(u64::from(s)).unwrap_or(0) as usize;
                ValueRef::Integer(read_be_int(&base[at..at + size]))
            }
            7 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&base[at..at + 8]);
                let x = f64::from_bits(u64::from_be_bytes(b));
                if x.is_nan() {
                    ValueRef::Null
                } else {
                    ValueRef::Real(x)
                }
            }
            ABSENT => return None,
            s => {
                let bytes = &base[at..at + ((s - 12) / 2) as usize];
                if s % 2 == 1 {
                    ValueRef::Text(bytes)
                } else {
                    ValueRef::Blob(bytes)
                }
            }
        })
    }
}

/// Marks, in [`FAST_SIZES`], a header byte the fast path cannot take: the first byte of a
/// multi-byte varint (>= 0x80) or a reserved serial type (10, 11). Real sizes stay below it.
const NOT_FAST: u8 = 0x80;

/// Body sizes by header byte for the fast path, or [`NOT_FAST`].
const FAST_SIZES: [u8; 256] = {
    let mut t = [NOT_FAST; 256];
    let mut b = 0;
    while b < 128 {
        if let Some(size) = serial_type_size(b as u64) {
            t[b] = size as u8;
        }
        b += 1;
    }
    t
};

/// Which record columns a kernel needs, in the order it numbers them ("slots").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeededColumns {
    /// Whether the kernel reads every row's rowid (otherwise [`CellBatch::rowid`] reads one on
    /// demand, for a message).
    rowid: bool,
    /// The record column of each slot.
    columns: Vec<usize>,
    /// For each record column up to the last needed one, its slot or [`NOT_NEEDED`].
    slot_of: Vec<u16>,
    /// The vector header walk's mask (see [`header::keep_mask`]): the first `walk` types.
    keep: [u8; header::LANES],
    /// For the vector walk (every needed column among the first [`header::LANES`]): the
    /// record column of each slot, as a lane.
    lanes: [u8; header::LANES],
    /// Rows the decoder drops itself (see [`NeededColumns::with_window`]).
    window: Option<TextWindow>,
    /// Whether the window's column is the last one the vector walk reads: then a row's types
    /// before it are summed into its offset alone, and the running sums of the whole walk are
    /// computed only for the rows the window keeps.
    window_last: bool,
    /// The lanes before the window's column (for [`header::Walk::sum`]).
    before_window: [u8; header::LANES],
    /// Rows the decoder skips by rowid (see [`NeededColumns::with_rowid_ranges`]).
    rowids: Option<Arc<[(i64, i64)]>>,
}

/// A first test the decoder applies to a slot, for a kernel whose filter begins with a
/// bytewise range test on a text column: a row whose slot holds a text of exactly
/// [`TextWindow::LEN`] bytes that lies outside `[lo, hi)` (and, when `sep` is set, has the
/// given byte at the given position) is not added to the batch at all. Rows are still counted
/// as scanned; the kernel never sees the dropped ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextWindow {
    /// The slot tested.
    pub slot: usize,
    /// The inclusive lower bound.
    pub lo: [u8; TextWindow::LEN],
    /// The exclusive upper bound.
    pub hi: [u8; TextWindow::LEN],
    /// A byte the text must hold at a position for the row to be dropped (for a kernel whose
    /// comparison is bytewise only for texts of a certain shape).
    pub sep: Option<(usize, u8)>,
}

impl TextWindow {
    /// The length of the texts tested (a `YYYY-MM-DD` date).
    pub const LEN: usize = 10;

    /// Whether a text of [`Self::LEN`] bytes is dropped.
    #[inline(always)]
    fn drops(&self, text: &[u8; Self::LEN]) -> bool {
        let key = |t: &[u8; Self::LEN]| {
            let hi = u64::from_be_bytes([t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]]);
            (u128::from(hi) << 16) | u128::from(u16::from_be_bytes([t[8], t[9]]))
        };
        let k = key(text);
        (k < key(&self.lo) || k >= key(&self.hi)) && self.sep.is_none_or(|(at, b)| text[at] == b)
    }
}

const NOT_NEEDED: u16 = u16::MAX;

impl NeededColumns {
    /// The record columns (0-based, in declaration order of the stored columns) a kernel reads,
    /// slot `i` being `columns[i]`. A column may not be listed twice.
    pub fn new(columns: &[usize]) -> Self {
        let last = columns.iter().copied().max().map_or(0, |c| c + 1);
        let mut slot_of = vec![NOT_NEEDED; last];
        for (slot, &c) in columns.iter().enumerate() {
            debug_assert_eq!(slot_of[c], NOT_NEEDED, "column {c} listed twice");
            slot_of[c] = slot as u16;
        }
        NeededColumns {
            rowid: true,
            columns: columns.to_vec(),
            keep: header::keep_mask(slot_of.len()),
            lanes: std::array::from_fn(|slot| {
                columns.get(slot).map_or(0, |&c| (c % header::LANES) as u8)
            }),
            slot_of,
            window: None,
            window_last: false,
            before_window: [0; header::LANES],
            rowids: None,
        }
    }

    /// The same columns, with the cells whose rowid lies outside every one of `ranges`
    /// (inclusive, ascending, disjoint) skipped before their records are read: a seek's
    /// leaves hold many rows besides the few it wants (an index seek of 70 rowids reads 70
    /// leaves of about 130 rows each). Only for a kernel whose filter rejects every such row
    /// ([`crate::query::ir::QueryPlan::rowid_ranges`]); SQLite, seeking, never evaluates them
    /// either, so a failure such a row would raise is not the query's. `None`: none skipped.
    pub fn with_rowid_ranges(mut self, ranges: Option<Vec<(i64, i64)>>) -> Self {
        self.rowids = ranges.map(Arc::from);
        self
    }

    /// The same columns, with rows whose slot `window.slot` holds a text outside the window
    /// dropped by the decoder (see [`TextWindow`]; `None`: none dropped). Applied on the
    /// decoder's fast path; rows the general path decodes reach the kernel, which must apply
    /// its own test anyway.
    pub fn with_window(mut self, window: Option<TextWindow>) -> Self {
        debug_assert!(window.is_none_or(|w| w.slot < self.columns.len()));
        self.window = window;
        let column = window.map(|w| self.columns[w.slot]);
        self.window_last = column.is_some_and(|c| c + 1 == self.walk() && c < header::LANES);
        self.before_window = header::keep_mask(column.unwrap_or(0));
        self
    }

    /// The same columns for a kernel that needs no rowids in the steady state: the decoder
    /// skips each rowid's varint instead of reading its value.
    pub fn without_rowid(mut self) -> Self {
        self.rowid = false;
        self
    }

    /// How many slots there are.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Whether no record column is needed (a `count(*)`).
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The record column of each slot.
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// How many leading serial types the header walk reads: one past the last needed column.
    fn walk(&self) -> usize {
        self.slot_of.len()
    }
}

/// One page's decoded cells: for every row its rowid and, for every needed column, its
/// [`Slot`] (serial type and body offset into the page, or into the payload given to
/// [`CellBatch::decode_record`]). Reused from page to page: steady-state decoding allocates
/// nothing.
#[derive(Debug, Clone, Default)]
pub struct CellBatch {
    slots: usize,
    len: usize,
    /// Whether `keys` holds rowids (else cell offsets in the page).
    eager_rowids: bool,
    /// For a batch of one from [`Self::decode_record`]: its rowid.
    record_rowid: Option<i64>,
    /// `keys[row]`: the row's rowid, or for batches decoded without rowids
    /// ([`NeededColumns::without_rowid`]) its cell's offset in the page, from which
    /// [`Self::rowid`] reads the rowid on demand. Longer than `len` (kept from bigger pages),
    /// never read past it.
    keys: Vec<i64>,
    /// `cells[row * slots + slot]`; longer than `len * slots`, likewise.
    cells: Vec<Slot>,
    /// Whether the last [`Self::decode_page_ahead`] requested the page decoded next.
    next_requested: bool,
}

impl CellBatch {
    /// An empty batch.
    pub fn new() -> Self {
        CellBatch::default()
    }

    /// The number of rows decoded.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no row was decoded.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The rowids of the rows, in cell order, when the columns asked for them (`None` after
    /// [`NeededColumns::without_rowid`]: use [`Self::rowid`]).
    #[inline]
    pub fn rowids(&self) -> Option<&[i64]> {
        self.eager_rowids.then(|| &self.keys[..self.len])
    }

    /// Row `row`'s rowid; `base` is the batch's base buffer (the page), from which a batch
    /// decoded without rowids reads it.
    #[inline]
    pub fn rowid(&self, base: &[u8], row: usize) -> i64 {
        if let Some(rowid) = self.record_rowid {
            return rowid;
        }
        if self.eager_rowids {
            return self.keys[row];
        }
        // The cell was decoded once, so both varints are known to fit.
        let cell = &base[self.keys[row] as usize..];
        let (_, a) = varint(cell).unwrap_or((0, 0));
        varint(&cell[a..]).map_or(0, |(rowid, _)| rowid as i64)
    }

    /// Every row's slots, row after row (`slots` of them each: see [`NeededColumns::len`]).
    #[inline]
    pub fn cells(&self) -> &[Slot] {
        &self.cells[..self.len * self.slots]
    }

    /// Slot `slot` of row `row`.
    #[inline]
    pub fn slot(&self, row: usize, slot: usize) -> Slot {
        self.cells[row * self.slots + slot]
    }

    /// The value in slot `slot` of row `row`, borrowed from `base` (the page given to
    /// [`Self::decode_page`] or the payload given to [`Self::decode_record`]); `None` when the
    /// record ends before the column.
    #[inline]
    pub fn value<'a>(&self, base: &'a [u8], row: usize, slot: usize) -> Option<ValueRef<'a>> {
        self.slot(row, slot).value(base)
    }

    fn start(&mut self, columns: &NeededColumns, rows: usize) {
        self.slots = columns.len();
        self.len = 0;
        self.eager_rowids = columns.rowid;
        self.record_rowid = None;
        if self.keys.len() < rows {
            self.keys.resize(rows, 0);
        }
        if self.cells.len() < rows * self.slots {
            self.cells.resize(rows * self.slots, Slot::default());
        }
    }

    /// Decodes every cell of table-leaf page `page_no` (`page` is the whole page, `usable` its
    /// usable size) into this batch; cells whose needed columns continue on overflow pages go
    /// to `spills` instead. Returns how many cells the page holds (rows scanned).
    ///
    /// Errors describe what is wrong with the page (the caller adds the file and page number).
    pub fn decode_page(
        &mut self,
        columns: &NeededColumns,
        page_no: u32,
        page: &[u8],
        usable: u32,
        spills: &mut Vec<Spill>,
    ) -> Result<usize, String> {
        self.decode_page_ahead(columns, page_no, page, &[], usable, spills)
    }

    /// [`Self::decode_page`], told the page the caller decodes next (`next`, empty when it does
    /// not know it): while this page's cells are decoded, the next page's cache lines are
    /// requested a few at a time, spread over the cells, so that they arrive while the CPU
    /// is busy instead of when the next call first touches them. (A burst of requests at the
    /// start of a page stalls once the core's line-fill buffers are full: that is what a
    /// hardware prefetcher, which does not cross a 4 KiB page, cannot do for us.)
    pub fn decode_page_ahead(
        &mut self,
        columns: &NeededColumns,
        page_no: u32,
        page: &[u8],
        next: &[u8],
        usable: u32,
        spills: &mut Vec<Spill>,
    ) -> Result<usize, String> {
        #[cfg(target_arch = "x86_64")]
        if header::has_avx2() {
            // SAFETY: the CPU has AVX2, checked at run time just above.
            return unsafe { self.decode_page_avx2(columns, page_no, page, next, usable, spills) };
        }
        self.decode_page_with::<header::Baseline>(columns, page_no, page, next, usable, spills)
    }

    /// [`Self::decode_page_with`] compiled for CPUs with AVX2: the same code, with the vector
    /// header walk in AVX2 and every vector instruction in the three-operand encoding.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn decode_page_avx2(
        &mut self,
        columns: &NeededColumns,
        page_no: u32,
        page: &[u8],
        next: &[u8],
        usable: u32,
        spills: &mut Vec<Spill>,
    ) -> Result<usize, String> {
        self.decode_page_with::<header::Avx2>(columns, page_no, page, next, usable, spills)
    }

    /// The page loop, with the header walk `W`.
    #[inline(always)]
    fn decode_page_with<W: header::Walk>(
        &mut self,
        columns: &NeededColumns,
        page_no: u32,
        page: &[u8],
        next: &[u8],
        usable: u32,
        spills: &mut Vec<Spill>,
    ) -> Result<usize, String> {
        let (page, hdr) = table_leaf(page, usable)?;
        let cells = usize::from(hdr.cell_count);
        self.start(columns, cells);
        let ptrs_at = hdr.header_len;
        let content_start = hdr.cell_pointers_end(0);
        let ptrs = page
            .get(ptrs_at..ptrs_at + 2 * cells)
            .ok_or_else(|| "cell pointer array runs past the end of the page".to_string())?;
        // A page the previous call did not request ahead: every cell's first cache line is
        // requested before any is parsed, so that its misses overlap.
        if !std::mem::replace(&mut self.next_requested, !next.is_empty()) {
            for ptr in ptrs.chunks_exact(2) {
                let at = usize::from(u16::from_be_bytes([ptr[0], ptr[1]]));
                if let Some(cell) = page.get(at..) {
                    prefetch(cell);
                }
            }
        }
        // The next page's lines, spread evenly over this page's cells: after cell `i`,
        // `(i + 1) * lines / cells` of them have been asked for (counted without a division).
        let lines = next.len().div_ceil(LINE);
        let (mut asked, mut share) = (0usize, 0usize);
        let vector_walk = columns.walk() <= header::LANES;
        // A payload longer than this spills to overflow pages (the general path's case).
        let max_local = (usable as usize).saturating_sub(35);
        for (i, ptr) in ptrs.chunks_exact(2).enumerate() {
            share += lines;
            while share >= cells {
                share -= cells;
                prefetch_at(next, asked * LINE);
                asked += 1;
            }
            let at = usize::from(u16::from_be_bytes([ptr[0], ptr[1]]));
            if at < content_start || at >= page.len() {
                return Err(format!(
                    "cell {i} pointer {at} lies outside the cell content area"
                ));
            }
            if columns
                .rowids
                .as_deref()
                .is_some_and(|ranges| !admits_cell(&page[at..], ranges))
            {
                continue;
            }
            if vector_walk && self.push_cell_fast::<W>(columns, page, at, max_local) {
                continue;
            }
            self.decode_cell(columns, page_no, page, at, usable, spills)
                .map_err(|e| format!("cell {i}: {e}"))?;
        }
        Ok(cells)
    }

    /// The common cell, decoded with as few instructions as it takes: a payload stored wholly
    /// on the page, varints read from eight-byte words, a one-byte header size and one-byte
    /// serial types up to the last needed column, walked sixteen at a time
    /// ([`header::Walk`]). Returns `false`, having appended nothing, for anything else
    /// (including every kind of damage): the general path then decodes the cell and names
    /// what is wrong.
    #[inline(always)]
    fn push_cell_fast<W: header::Walk>(
        &mut self,
        columns: &NeededColumns,
        page: &[u8],
        at: usize,
        max_local: usize,
    ) -> bool {
        // The two varints are read as words, and the sixteen types after the header size
        // as one vector: both need the bytes to be there, which they are but for cells at
        // the very end of a page.
        let Some(word) = page.get(at..at + 8) else {
            return false;
        };
        // Payload sizes below 16 KiB (one or two bytes) without the general unpacking, and
        // without a branch between the two: rows of one table straddle 128 bytes often
        // enough that such a branch would be mispredicted every other row.
        let w = be_u64(word);
        let (b0, b1) = (w >> 56, (w >> 48) & 0xff);
        let (payload_len, a) = if b0 & b1 & 0x80 == 0 {
            let two = b0 >> 7;
            let long = ((b0 & 0x7f) << 7) | b1;
            let mask = two.wrapping_neg();
            ((long & mask) | (b0 & !mask), 1 + two as usize)
        } else {
            match packed_varint(w) {
                Some(found) => found,
                None => return false,
            }
        };
        let Some(word) = page.get(at + a..at + a + 8) else {
            return false;
        };
        let w = be_u64(word);
        let (key, b) = if columns.rowid {
            match packed_varint(w) {
                Some((rowid, b)) => (rowid as i64, b),
                None => return false,
            }
        } else {
            let stops = !w & 0x8080_8080_8080_8080;
            if stops == 0 {
                return false;
            }
            (at as i64, (stops.leading_zeros() / 8 + 1) as usize)
        };
        let start = at + a + b;
        let payload_len = payload_len as usize;
        if payload_len > max_local || start + payload_len > page.len() {
            return false;
        }
        let Some(types) = page.get(start + 1..start + 1 + header::LANES) else {
            return false;
        };
        let header_len = usize::from(page[start]);
        if header_len >= 0x80 || columns.walk() >= header_len || header_len > payload_len {
            return false;
        }
        let types: &[u8; header::LANES] = types.try_into().expect("sixteen bytes");
        const DATE: u8 = 13 + 2 * TextWindow::LEN as u8;
        if let (true, Some(window)) = (columns.window_last, &columns.window) {
            // Most rows of a windowed scan end here: the window's column is the last one the
            // walk reads, so one sum of the sizes before it places its text, and the checks
            // the full walk makes (every kept type a one-byte one, the walk inside the
            // payload) are made on that sum.
            let c = columns.walk() - 1;
            if types[c] == DATE {
                let Some(before) = W::sum(types, &columns.keep, &columns.before_window) else {
                    return false;
                };
                let end = header_len + before as usize + TextWindow::LEN;
                if end > payload_len {
                    return false;
                }
                let at = start + end - TextWindow::LEN;
                let text = page[at..at + TextWindow::LEN]
                    .try_into()
                    .expect("ten bytes");
                if window.drops(text) {
                    return true;
                }
            }
        }
        let Some(offsets) = W::offsets(types, &columns.keep) else {
            return false;
        };
        // Offsets grow with the column, so the walk's end bounds every needed body.
        let end = header_len + offsets.end as usize;
        if end > payload_len {
            return false;
        }
        let body = start + header_len;
        if let (false, Some(window)) = (columns.window_last, &columns.window) {
            let c = usize::from(columns.lanes[window.slot % header::LANES]) % header::LANES;
            if types[c] == DATE {
                let at = body + usize::from(offsets.starts[c]);
                let text = page[at..at + TextWindow::LEN]
                    .try_into()
                    .expect("ten bytes");
                if window.drops(text) {
                    return true;
                }
            }
        }
        // The needed values usually end on a later cache line than the header: ask for it
        // now, so that the filter over the batch finds it in the cache.
        prefetch(&page[start + end.saturating_sub(1)..]);
        let row = self.len;
        let slots = columns.len();
        self.keys[row] = key;
        let body = body as u32;
        // Every needed column is below LANES here, so the lanes index without checks.
        for (cell, &lane) in self.cells[row * slots..(row + 1) * slots]
            .iter_mut()
            .zip(&columns.lanes)
        {
            let c = usize::from(lane) % header::LANES;
            *cell = Slot {
                serial: u32::from(types[c]),
                offset: body + u32::from(offsets.starts[c]),
            };
        }
        self.len += 1;
        true
    }

    /// Decodes every cell of index-leaf page `page_no` (type `0x0a`) into this batch, cell
    /// `i`'s record (the key columns, then the rowid) as a row whose key is `first_place + i`
    /// (its place in the index: see [`partitioner::plan::IndexScan`]); cells whose needed
    /// fields continue on overflow pages go to `spills`, under that key. Returns how many
    /// cells the page holds. Errors describe what is wrong with the page.
    pub fn decode_index_page(
        &mut self,
        columns: &NeededColumns,
        page: &[u8],
        (page_no, first_place): (u32, i64),
        usable: u32,
        spills: &mut Vec<Spill>,
    ) -> Result<usize, String> {
        let page = page
            .get(..usable as usize)
            .ok_or_else(|| "page shorter than its usable size".to_string())?;
        let hdr = partitioner::format::BtreePageHeader::parse(page, 0)?;
        if hdr.page_type != partitioner::format::PAGE_LEAF_INDEX {
            return Err(format!(
                "expected an index leaf page (0x0a), found page type 0x{:02x}",
                hdr.page_type
            ));
        }
        let cells = usize::from(hdr.cell_count);
        if cells as i64 >= partitioner::plan::IndexScan::AFTER_CELLS {
            return Err(format!("{cells} cells on one page"));
        }
        self.start(columns, cells);
        // Every key is the entry's place, whatever the columns ask.
        self.eager_rowids = true;
        let ptrs_at = hdr.header_len;
        let content_start = hdr.cell_pointers_end(0);
        let ptrs = page
            .get(ptrs_at..ptrs_at + 2 * cells)
            .ok_or_else(|| "cell pointer array runs past the end of the page".to_string())?;
        for (i, ptr) in ptrs.chunks_exact(2).enumerate() {
            let at = usize::from(u16::from_be_bytes([ptr[0], ptr[1]]));
            if at < content_start || at >= page.len() {
                return Err(format!(
                    "cell {i} pointer {at} lies outside the cell content area"
                ));
            }
            let place = first_place + i as i64;
            let cell = &page[at..];
            let (payload_len, a) =
                varint(cell).ok_or_else(|| format!("cell {i}: payload size runs past the page"))?;
            let local = partitioner::index::index_local_payload(usable, payload_len) as usize;
            let spills_over = (local as u64) < payload_len;
            let end = a + local + if spills_over { 4 } else { 0 };
            if end > cell.len() {
                return Err(format!(
                    "cell {i}: payload of {payload_len} bytes runs past the end of the page"
                ));
            }
            let payload = &cell[a..a + local];
            match self
                .push_record(columns, place, payload, at + a, !spills_over)
                .map_err(|e| format!("cell {i}: {e}"))?
            {
                RecordOutcome::Done => {}
                RecordOutcome::NeedMore => {
                    let o = a + local;
                    spills.push(Spill {
                        page: page_no,
                        rowid: place,
                        local: payload.to_vec(),
                        payload_len,
                        first_overflow: u32::from_be_bytes([
                            cell[o],
                            cell[o + 1],
                            cell[o + 2],
                            cell[o + 3],
                        ]),
                    });
                }
            }
        }
        Ok(cells)
    }

    /// The general cell decoder: every check, every kind of cell (kept out of line, so that
    /// the fast path's loop stays small).
    #[inline(never)]
    fn decode_cell(
        &mut self,
        columns: &NeededColumns,
        page_no: u32,
        page: &[u8],
        at: usize,
        usable: u32,
        spills: &mut Vec<Spill>,
    ) -> Result<(), String> {
        let cell = &page[at..];
        let (payload_len, a) =
            varint(cell).ok_or_else(|| "payload size runs past the page".to_string())?;
        let rowid_missing = || "rowid runs past the page".to_string();
        let (rowid, b) = if columns.rowid {
            varint(&cell[a..]).ok_or_else(rowid_missing)?
        } else {
            (0, skip_varint(&cell[a..]).ok_or_else(rowid_missing)?)
        };
        let key = if columns.rowid {
            rowid as i64
        } else {
            at as i64
        };
        let start = a + b;
        let local = table_leaf_local_payload(usable, payload_len) as usize;
        let spills_over = (local as u64) < payload_len;
        let end = start + local + if spills_over { 4 } else { 0 };
        if end > cell.len() {
            return Err(format!(
                "payload of {payload_len} bytes runs past the end of the page"
            ));
        }
        let payload = &cell[start..start + local];
        let base = at + start;
        match self.push_record(columns, key, payload, base, !spills_over)? {
            RecordOutcome::Done => Ok(()),
            RecordOutcome::NeedMore => {
                let o = start + local;
                let rowid = if columns.rowid {
                    rowid
                } else {
                    varint(&cell[a..]).map_or(0, |(r, _)| r)
                };
                spills.push(Spill {
                    page: page_no,
                    rowid: rowid as i64,
                    local: payload.to_vec(),
                    payload_len,
                    first_overflow: u32::from_be_bytes([
                        cell[o],
                        cell[o + 1],
                        cell[o + 2],
                        cell[o + 3],
                    ]),
                });
                Ok(())
            }
        }
    }

    /// Decodes one record given (a prefix of) its payload as a batch of one row, offsets into
    /// `payload`. `complete` says whether `payload` is the whole payload; if it is not and a
    /// needed byte lies beyond it, returns [`RecordOutcome::NeedMore`] and leaves the batch
    /// empty.
    pub fn decode_record(
        &mut self,
        columns: &NeededColumns,
        rowid: i64,
        payload: &[u8],
        complete: bool,
    ) -> Result<RecordOutcome, String> {
        self.start(columns, 1);
        self.record_rowid = Some(rowid);
        self.push_record(columns, rowid, payload, 0, complete)
    }

    /// Appends the record `payload` (whose first byte is at `base` in the batch's base buffer)
    /// as the next row, or returns `NeedMore` (nothing appended) when a needed byte lies beyond
    /// an incomplete payload.
    #[inline(always)]
    fn push_record(
        &mut self,
        columns: &NeededColumns,
        key: i64,
        payload: &[u8],
        base: usize,
        complete: bool,
    ) -> Result<RecordOutcome, String> {
        let walk = columns.walk();
        // Fast path: a one-byte header size and one-byte serial types up to the last needed
        // column, all inside the payload. The body offsets are a prefix sum over a size table
        // on the stack; one test at the end says whether every type was a one-byte one.
        if let Some(&h) = payload.first() {
            let header_len = usize::from(h);
            if h < 0x80 && walk < header_len && header_len <= payload.len() {
                let done = if walk <= 16 {
                    self.push_fast::<16>(columns, key, payload, base, header_len)
                } else if walk <= MAX_FAST_COLUMNS {
                    self.push_fast::<MAX_FAST_COLUMNS>(columns, key, payload, base, header_len)
                } else {
                    None
                };
                match done {
                    Some(true) => return Ok(RecordOutcome::Done),
                    Some(false) => return short(complete),
                    None => {}
                }
            }
        }
        self.push_record_slow(columns, key, payload, base, complete)
    }

    /// The fast header walk for records whose needed columns are among the first `N`:
    /// `Some(true)` when the row was appended, `Some(false)` when a needed body lies beyond the
    /// payload, `None` when a serial type is not a one-byte one (the general walk decides).
    #[inline(always)]
    fn push_fast<const N: usize>(
        &mut self,
        columns: &NeededColumns,
        key: i64,
        payload: &[u8],
        base: usize,
        header_len: usize,
    ) -> Option<bool> {
        let walk = columns.walk();
        let types = &payload[1..=walk];
        let mut offsets = [0u32; N];
        let mut acc = header_len;
        let mut bad = 0u8;
        for (o, &t) in offsets.iter_mut().zip(types) {
            *o = acc as u32;
            let size = FAST_SIZES[usize::from(t)];
            bad |= size;
            acc += usize::from(size);
        }
        if bad & NOT_FAST != 0 {
            return None;
        }
        // Offsets grow with the column, so the walk's end bounds every needed body.
        if acc > payload.len() {
            return Some(false);
        }
        // The needed values usually end on a later cache line than the header: ask for it
        // now, so that the filter over the batch finds it in the cache.
        if let Some(last) = payload.get(acc.saturating_sub(1)..) {
            prefetch(last);
        }
        self.push_slots(columns, key, base, types, &offsets);
        Some(true)
    }

    /// Appends a row whose column `c` has serial type `types[c]` and body offset `offsets[c]`
    /// in its record, which starts at `base`.
    #[inline(always)]
    fn push_slots(
        &mut self,
        columns: &NeededColumns,
        key: i64,
        base: usize,
        types: &[u8],
        offsets: &[u32],
    ) {
        let row = self.len;
        self.keys[row] = key;
        let cells = &mut self.cells[row * columns.len()..(row + 1) * columns.len()];
        for (cell, &c) in cells.iter_mut().zip(&columns.columns) {
            *cell = Slot {
                serial: u32::from(types[c]),
                offset: (base as u32) + offsets[c],
            };
        }
        self.len += 1;
    }

    /// The general header walk: multi-byte serial types, records shorter than the schema,
    /// truncated prefixes, reserved types (an error).
    #[cold]
    #[inline(never)]
    fn push_record_slow(
        &mut self,
        columns: &NeededColumns,
        key: i64,
        payload: &[u8],
        base: usize,
        complete: bool,
    ) -> Result<RecordOutcome, String> {
        let Some((header_len, n)) = read_varint(payload) else {
            return short(complete);
        };
        let header_len = usize::try_from(header_len).unwrap_or(usize::MAX);
        if header_len < n || (complete && header_len > payload.len()) {
            return Err(format!("record header size {header_len} is invalid"));
        }
        // The row is written in place and only counted once it is whole.
        let first = self.len * columns.len();
        let row = &mut self.cells[first..first + columns.len()];
        row.fill(Slot {
            serial: ABSENT,
            offset: 0,
        });
        let (mut pos, mut body, mut col) = (n, header_len, 0usize);
        let mut result = Ok(RecordOutcome::Done);
        while col < columns.walk() && pos < header_len {
            let Some((serial, k)) = read_varint(&payload[pos..header_len.min(payload.len())])
            else {
                result = short(complete);
                break;
            };
            pos += k;
            let Some(size) = serial_type_size(serial) else {
                result = Err(format!("column {col} has reserved serial type {serial}"));
                break;
            };
            let slot = columns.slot_of[col];
            if slot != NOT_NEEDED {
                let end = body.checked_add(size as usize);
                if end.is_none_or(|end| end > payload.len()) {
                    result = short(complete);
                    break;
                }
                let Ok(offset) = u32::try_from(base + body) else {
                    result = Err(format!("column {col} lies beyond 4 GiB into its record"));
                    break;
                };
                let serial = match u32::try_from(serial) {
                    Ok(s) if s != ABSENT => s,
                    _ => {
                        result = Err(format!("column {col} holds a value of 2 GiB or more"));
                        break;
                    }
                };
                row[usize::from(slot)] = Slot { serial, offset };
            }
            body = body.saturating_add(size as usize);
            col += 1;
        }
        if result.is_ok() && pos > header_len {
            result = Err("record header's last serial type runs past the header".to_string());
        }
        if !matches!(result, Ok(RecordOutcome::Done)) {
            return result;
        }
        self.keys[self.len] = key;
        self.len += 1;
        Ok(RecordOutcome::Done)
    }
}

/// Asks the CPU to start loading the cache line holding `bytes[0]`: a hint that never faults.
#[inline(always)]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch of an address inside a live slice; it reads and writes nothing.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            bytes.as_ptr().cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// [`prefetch`] of `bytes[at]`, a hint that needs no bounds check: an address past the end is
/// never read (prefetches do not fault), only not worth asking for.
#[inline(always)]
fn prefetch_at(bytes: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the address is only computed (wrapping), never dereferenced: a prefetch reads
    // and writes nothing and does not fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            bytes.as_ptr().wrapping_add(at).cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, at);
}

/// The length of the varint at the start of `buf`, from one eight-byte word when `buf` has one.
#[inline(always)]
/// Whether the table leaf cell `cell` holds a rowid inside one of `ranges` (inclusive,
/// ascending, disjoint), or cannot be read that far: a damaged cell is left to the decoder,
/// which names what is wrong.
fn admits_cell(cell: &[u8], ranges: &[(i64, i64)]) -> bool {
    let Some((_, a)) = varint(cell) else {
        return true;
    };
    let Some((rowid, _)) = cell.get(a..).and_then(varint) else {
        return true;
    };
    let rowid = rowid as i64;
    // The first range that does not end below the rowid.
    let i = ranges.partition_point(|&(_, hi)| hi < rowid);
    ranges.get(i).is_some_and(|&(lo, _)| lo <= rowid)
}

fn skip_varint(buf: &[u8]) -> Option<usize> {
    if let Some(word) = buf.get(..8) {
        let w = u64::from_be_bytes(word.try_into().ok()?);
        let stops = !w & 0x8080_8080_8080_8080;
        if stops != 0 {
            return Some((stops.leading_zeros() / 8 + 1) as usize);
        }
    }
    varint_len(buf)
}

/// What a record that ends before a needed byte is: an error when its payload is complete, a
/// request for the rest (its overflow pages) otherwise.
#[cold]
fn short(complete: bool) -> Result<RecordOutcome, String> {
    if complete {
        Err("record runs past its payload".to_string())
    } else {
        Ok(RecordOutcome::NeedMore)
    }
}

/// The eight bytes of `word` as a big-endian integer.
#[inline(always)]
fn be_u64(word: &[u8]) -> u64 {
    u64::from_be_bytes(word.try_into().expect("eight bytes"))
}

/// The varint at the top of `w` (its first byte the most significant) and its length, when it
/// ends within the word (eight bytes or fewer).
#[inline(always)]
fn packed_varint(w: u64) -> Option<(u64, usize)> {
    let stops = !w & 0x8080_8080_8080_8080;
    if stops == 0 {
        return None;
    }
    let n = (stops.leading_zeros() / 8 + 1) as usize;
    // The n bytes at the low end, each down to its seven value bits...
    let v = (w >> (64 - 8 * n as u32)) & 0x7f7f_7f7f_7f7f_7f7f;
    // ...then packed: pairs into 14 bits, fours into 28, all eight into 56.
    let v = ((v & 0x7f00_7f00_7f00_7f00) >> 1) | (v & 0x007f_007f_007f_007f);
    let v = ((v & 0x3fff_0000_3fff_0000) >> 2) | (v & 0x0000_3fff_0000_3fff);
    let v = ((v & 0x0fff_ffff_0000_0000) >> 4) | (v & 0x0000_0000_0fff_ffff);
    Some((v, n))
}

/// Reads the varint at the start of `buf`: from one eight-byte word when `buf` has one (the
/// first byte without a continuation bit found by a mask, the seven-bit groups packed by
/// shifts), byte by byte otherwise and for nine-byte varints.
#[inline(always)]
fn varint(buf: &[u8]) -> Option<(u64, usize)> {
    if let Some(found) = buf.get(..8).and_then(|word| packed_varint(be_u64(word))) {
        return Some(found);
    }
    read_varint(buf)
}

mod header;

#[cfg(test)]
mod tests;
