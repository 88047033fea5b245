//! The record decoder: table-leaf cells -> the four Q6 columns -> the Q6 filter and sum.
//!
//! Only the four columns Q6 needs are decoded; the others are skipped by the sizes their serial
//! types imply. The common case, a record header of one-byte serial types, takes a fast path.
//! A record whose needed columns lie beyond the part of its payload stored on the leaf is
//! returned as a [`Spill`]; the executor follows its overflow chain and calls
//! [`LeafDecoder::eval_record`] again on the assembled prefix.
//!
//! SQLite's comparison rules decide every boundary, for each column's declared affinity and
//! collation (see the `predicate` submodule and [`crate::datatype3`]): on the usual NUMERIC
//! columns a date matches only when stored as text (numbers sort before text and blobs after
//! it), a NULL never matches, an integer compares exactly, and a REAL compares against the
//! double nearest to the decimal bound, which is what SQLite itself compares; on a TEXT column
//! the numeric literals become text and compare bytewise (or under the column's collation). A
//! stored NaN reads as NULL, as in SQLite. The sum is exact: each matched price and discount
//! must be a decimal with at most two places (an integer, the REAL nearest to such a decimal,
//! or text that is wholly such a number); anything else is an error rather than a rounded
//! answer.
//!
//! Layering: the decoder uses the Q6 parameters ([`crate::q6::params`]) and the scan seam's
//! types ([`crate::scan::kernel`]); [`crate::q6::run`] makes it the scan's kernel.

use partitioner::format::be_u32;
use partitioner::format::{
    read_be_int, read_varint, serial_type_size, table_leaf_local_payload, varint_len,
};

use crate::scan::kernel::table_leaf;
pub use crate::scan::kernel::{RecordOutcome, Spill};

use crate::q6::params::{PartialAggregate, Q6Filter};

mod predicate;

pub use predicate::Q6ColumnTypes;
use predicate::{hundredths, Q6Predicates, Stored};

/// Positions of the four Q6 columns in the table's records (0-based, declaration order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Q6Columns {
    /// `l_quantity`.
    pub quantity: usize,
    /// `l_extendedprice`.
    pub extended_price: usize,
    /// `l_discount`.
    pub discount: usize,
    /// `l_shipdate`.
    pub ship_date: usize,
}

/// What a record that ends before a needed column holds for it: the column's DEFAULT (with its
/// affinity applied), as SQLite reads it for rows written before `ALTER TABLE ... ADD COLUMN`.
#[derive(Debug, Clone, PartialEq)]
pub enum MissingValue {
    /// No DEFAULT clause (or `DEFAULT NULL`).
    Null,
    /// An integer default.
    Integer(i64),
    /// A real default.
    Real(f64),
    /// A text default.
    Text(Vec<u8>),
    /// A blob default.
    Blob,
    /// A default that cannot be evaluated without SQLite; the scan fails with this message if a
    /// record actually lacks the column.
    Unavailable(String),
}

impl MissingValue {
    fn stored(&self) -> Stored<'_> {
        match self {
            MissingValue::Null | MissingValue::Unavailable(_) => Stored::Null,
            MissingValue::Integer(i) => Stored::Int(*i),
            MissingValue::Real(x) => Stored::Real(*x),
            MissingValue::Text(t) => Stored::Text(t),
            MissingValue::Blob => Stored::Blob,
        }
    }
}

/// Decodes table-leaf pages and evaluates Q6 on every row.
#[derive(Debug, Clone)]
pub struct LeafDecoder {
    filter: Q6Filter,
    /// The comparisons, planned for the columns' affinities and collations.
    predicates: Q6Predicates,
    usable: u32,
    /// The highest needed column index: the header walk stops there.
    last_needed: usize,
    /// For each column up to `last_needed`, which slot (0 = ship date, 1 = discount,
    /// 2 = quantity, 3 = price) it fills, or `NOT_NEEDED`.
    slot_of: Vec<u8>,
    /// The column of each slot (ship date, discount, quantity, price).
    slot_columns: [usize; 4],
    /// What each slot holds when a record ends before its column.
    missing: [MissingValue; 4],
}

/// Records whose needed columns all lie among the first this many take the fast path (the
/// offsets array is initialised for every row, so it is kept small).
const MAX_FAST_COLUMNS: usize = 16;

const NOT_NEEDED: u8 = u8::MAX;

/// Marks the reserved serial types 10 and 11 in [`ONE_BYTE_SIZES`].
const RESERVED: u8 = u8::MAX;

/// Marks, in [`FAST_SIZES`], a header byte the fast path cannot take: the first byte of a
/// multi-byte varint (>= 0x80) or a reserved serial type (10, 11). Real sizes stay below it.
const NOT_FAST: u8 = 0x80;

/// Body sizes by header byte for the fast path, or [`NOT_FAST`].
const FAST_SIZES: [u8; 256] = {
    let mut t = [NOT_FAST; 256];
    let mut b = 0;
    while b < 128 {
        if ONE_BYTE_SIZES[b] != RESERVED {
            t[b] = ONE_BYTE_SIZES[b];
        }
        b += 1;
    }
    t
};

/// Body sizes of the serial types that fit in one header byte (0..=127), or [`RESERVED`].
const ONE_BYTE_SIZES: [u8; 128] = {
    let mut t = [RESERVED; 128];
    let mut s = 0;
    while s < 128 {
        if let Some(size) = serial_type_size(s as u64) {
            t[s] = size as u8;
        }
        s += 1;
    }
    t
};

/// Where a needed column's value lies in a record: its serial type and body offset.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    serial: u64,
    offset: usize,
    present: bool,
}

impl LeafDecoder {
    /// A decoder for pages with `usable` usable bytes (page size minus reserved bytes). Records
    /// shorter than the schema read the missing columns as NULL; see [`Self::with_defaults`].
    pub fn new(cols: Q6Columns, filter: Q6Filter, usable: u32) -> Self {
        let last_needed = cols
            .quantity
            .max(cols.extended_price)
            .max(cols.discount)
            .max(cols.ship_date);
        let mut slot_of = vec![NOT_NEEDED; last_needed + 1];
        // The four columns have distinct names, so they occupy distinct positions.
        for (slot, col) in [
            cols.ship_date,
            cols.discount,
            cols.quantity,
            cols.extended_price,
        ]
        .into_iter()
        .enumerate()
        {
            slot_of[col] = slot as u8;
        }
        LeafDecoder {
            filter,
            predicates: Q6Predicates::new(filter, &Q6ColumnTypes::default()),
            usable,
            last_needed,
            slot_of,
            slot_columns: [
                cols.ship_date,
                cols.discount,
                cols.quantity,
                cols.extended_price,
            ],
            missing: [
                MissingValue::Null,
                MissingValue::Null,
                MissingValue::Null,
                MissingValue::Null,
            ],
        }
    }

    /// Sets what records shorter than the schema hold for each Q6 column, in the order
    /// quantity, extended price, discount, ship date.
    pub fn with_defaults(mut self, [quantity, price, discount, ship]: [MissingValue; 4]) -> Self {
        self.missing = [ship, discount, quantity, price];
        self
    }

    /// Sets the columns' affinities and collations (the default is the common TPC-H layout:
    /// NUMERIC columns, no collation), which decide how SQLite compares each column with the
    /// Q6 literals.
    pub fn with_types(mut self, types: &Q6ColumnTypes) -> Self {
        self.predicates = Q6Predicates::new(self.filter, types);
        self
    }

    /// Decodes every cell of table-leaf page `page_no` (`page` is the whole page), adding matched
    /// rows to `agg` and pushing cells that need their overflow chain onto `spills`.
    ///
    /// Errors describe what is wrong with the page (the caller adds the file and page number).
    pub fn decode_page(
        &self,
        page_no: u32,
        page: &[u8],
        agg: &mut PartialAggregate,
        spills: &mut Vec<Spill>,
    ) -> Result<(), String> {
        let usable = self.usable as usize;
        let (page, hdr) = table_leaf(page, self.usable)?;
        for i in 0..usize::from(hdr.cell_count) {
            let off = hdr.cell_offset(page, 0, i, usable)?;
            let (payload_len, a) = read_varint(&page[off..])
                .ok_or_else(|| format!("cell {i}: payload size runs past the page"))?;
            let b = varint_len(&page[off + a..])
                .ok_or_else(|| format!("cell {i}: rowid runs past the page"))?;
            let start = off + a + b;
            let local = table_leaf_local_payload(self.usable, payload_len) as usize;
            let spills_over = (local as u64) < payload_len;
            let end = start + local + if spills_over { 4 } else { 0 };
            if end > usable {
                return Err(format!(
                    "cell {i}: payload of {payload_len} bytes runs past the end of the page"
                ));
            }
            let payload = &page[start..start + local];
            agg.rows_scanned += 1;
            match self.eval_record(payload, !spills_over, agg) {
                Ok(RecordOutcome::Done) => {}
                Ok(RecordOutcome::NeedMore) if spills_over => spills.push(Spill {
                    page: page_no,
                    rowid: read_varint(&page[off + a..]).map_or(0, |(r, _)| r as i64),
                    local: payload.to_vec(),
                    payload_len,
                    first_overflow: be_u32(page, start + local).unwrap_or(0),
                }),
                Ok(RecordOutcome::NeedMore) => {
                    return Err(format!("cell {i}: record runs past its payload"))
                }
                Err(e) => return Err(format!("cell {i}: {e}")),
            }
        }
        Ok(())
    }

    /// Evaluates one record given (a prefix of) its payload. `complete` says whether `payload`
    /// is the whole payload; if it is not and a needed byte lies beyond it, returns
    /// [`RecordOutcome::NeedMore`] without touching `agg`. The row itself is counted in
    /// `rows_scanned` by the caller.
    pub fn eval_record(
        &self,
        payload: &[u8],
        complete: bool,
        agg: &mut PartialAggregate,
    ) -> Result<RecordOutcome, String> {
        let need_more = || {
            if complete {
                Err("record runs past its payload".to_string())
            } else {
                Ok(RecordOutcome::NeedMore)
            }
        };
        let Some((header_len, n)) = read_varint(payload) else {
            return need_more();
        };
        let header_len = header_len as usize;
        if header_len < n || (complete && header_len > payload.len()) {
            return Err(format!("record header size {header_len} is invalid"));
        }
        let mut slots = [Slot::default(); 4];
        let mut pos = n;
        let mut body = header_len;
        let mut col = 0usize;
        // Fast path: the serial types up to the last needed column are single bytes (true of
        // nearly every TPC-H row). Sizes come from a table and the offsets are a branch-free
        // prefix sum; any multi-byte or reserved serial type sends the row to the general path.
        // (`header_len <= payload.len()` also bounds every offset, whatever the header claims.)
        let fast_end = n + self.last_needed + 1;
        if self.last_needed < MAX_FAST_COLUMNS
            && header_len <= payload.len()
            && fast_end <= header_len
        {
            let head = &payload[n..fast_end];
            let mut offsets = [0u32; MAX_FAST_COLUMNS];
            let mut acc = header_len;
            let mut bad = 0u8;
            for (slot_offset, &b) in offsets.iter_mut().zip(head) {
                *slot_offset = acc as u32;
                let size = FAST_SIZES[usize::from(b)];
                bad |= size;
                acc += usize::from(size);
            }
            if bad & NOT_FAST == 0 {
                // Most rows fail the date test (the window is one year of seven): decide it
                // before anything else when the serial type and the bytes are enough.
                let ship = self.slot_columns[0];
                let serial = head[ship];
                let is_text = serial >= 13 && serial & 1 == 1;
                if !is_text && self.predicates.only_text_dates_match() {
                    return Ok(RecordOutcome::Done);
                }
                let start = offsets[ship] as usize;
                let len = usize::from(serial.saturating_sub(13) / 2);
                if let Some(date) = payload.get(start..start + len) {
                    if is_text
                        && self.predicates.date_bytes_decide(date)
                        && !self.filter.date_in_window(date)
                    {
                        return Ok(RecordOutcome::Done);
                    }
                }
                for (slot, &c) in slots.iter_mut().zip(&self.slot_columns) {
                    *slot = Slot {
                        serial: u64::from(head[c]),
                        offset: offsets[c] as usize,
                        present: true,
                    };
                }
                col = self.last_needed + 1;
                pos = fast_end;
                body = acc;
            }
        }
        // General path (multi-byte serial types, reserved types, truncated prefixes): walk the
        // rest of the serial types up to the last needed column; columns past the header's end
        // are NULL or their DEFAULT (added by ALTER TABLE after the row was written).
        while col <= self.last_needed && pos < header_len {
            let Some(&b) = payload.get(pos) else {
                return need_more();
            };
            let serial = if b < 0x80 {
                pos += 1;
                u64::from(b)
            } else {
                let Some((s, k)) = read_varint(&payload[pos..header_len.min(payload.len())]) else {
                    return need_more();
                };
                pos += k;
                s
            };
            let size = serial_type_size(serial)
                .ok_or_else(|| format!("column {col} has reserved serial type {serial}"))?;
            let slot = self.slot_of[col];
            if slot != NOT_NEEDED {
                slots[usize::from(slot)] = Slot {
                    serial,
                    offset: body,
                    present: true,
                };
            }
            body = body
                .checked_add(size as usize)
                .ok_or_else(|| "record body size overflows".to_string())?;
            col += 1;
        }
        if pos > header_len {
            return Err("record header's last serial type runs past the header".to_string());
        }
        // Every needed value must be available before the row is judged.
        for (s, missing) in slots.iter().zip(&self.missing) {
            if s.present {
                let size = serial_type_size(s.serial).unwrap_or(0) as usize;
                if s.offset
                    .checked_add(size)
                    .is_none_or(|end| end > payload.len())
                {
                    return need_more();
                }
            } else if let MissingValue::Unavailable(why) = missing {
                return Err(why.clone());
            }
        }
        let [ship, disc, qty, price] = slots;
        let [ship_d, disc_d, qty_d, price_d] = &self.missing;
        let value = |slot: Slot, missing| value(payload, slot, missing);
        let p = &self.predicates;
        if !p.ship_date(value(ship, ship_d))
            || !p.discount(value(disc, disc_d))
            || !p.quantity(value(qty, qty_d))
        {
            return Ok(RecordOutcome::Done);
        }
        agg.rows_matched += 1;
        let discount = hundredths(value(disc, disc_d), "l_discount")?
            .ok_or_else(|| "l_discount matched but holds no number".to_string())?;
        // A NULL price makes the product NULL, which sum() skips.
        if let Some(price) = hundredths(value(price, price_d), "l_extendedprice")? {
            agg.revenue += i128::from(price) * i128::from(discount);
        }
        Ok(RecordOutcome::Done)
    }
}

/// Reads the value in `slot` of a record whose payload is `payload` (bounds already checked),
/// or the column's default when the record ends before it.
#[inline(always)]
fn value<'a>(payload: &'a [u8], slot: Slot, missing: &'a MissingValue) -> Stored<'a> {
    if !slot.present {
        return missing.stored();
    }
    let at = slot.offset;
    match slot.serial {
        0 => Stored::Null,
        8 => Stored::Int(0),
        9 => Stored::Int(1),
        s @ 1..=6 => {
            let size = serial_type_size(s).unwrap_or(0) as usize;
            Stored::Int(read_be_int(&payload[at..at + size]))
        }
        7 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&payload[at..at + 8]);
            let x = f64::from_bits(u64::from_be_bytes(b));
            // SQLite reads a stored NaN as NULL.
            if x.is_nan() {
                Stored::Null
            } else {
                Stored::Real(x)
            }
        }
        s if s >= 13 && s % 2 == 1 => {
            let size = ((s - 13) / 2) as usize;
            Stored::Text(&payload[at..at + size])
        }
        _ => Stored::Blob,
    }
}

#[cfg(test)]
mod tests;
