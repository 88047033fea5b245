//! The record decoder: table-leaf cells -> the four Q6 columns -> the Q6 filter and sum.
//!
//! A page's cells are decoded together by the shared batch decoder ([`crate::decode`]) into the
//! serial types and offsets of the four columns Q6 needs; the filter then runs over the batch,
//! the ship date first (it rejects six rows in seven), reading the other three columns only for
//! the rows it keeps. A record whose needed columns lie beyond the part of its payload stored on
//! the leaf is returned as a [`Spill`]; the executor follows its overflow chain and calls
//! [`LeafDecoder::eval_record`] on the assembled prefix.
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

use crate::decode::{CellBatch, NeededColumns, TextWindow, ABSENT};
pub use crate::scan::kernel::{RecordOutcome, Spill};
use crate::value::ValueRef;

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
    /// The four columns as batch slots: 0 = ship date, 1 = discount, 2 = quantity, 3 = price.
    columns: NeededColumns,
    /// What each slot holds when a record ends before its column.
    missing: [MissingValue; 4],
    /// The current page's decoded cells.
    batch: CellBatch,
}

const SHIP: usize = 0;
const DISCOUNT: usize = 1;
const QUANTITY: usize = 2;
const PRICE: usize = 3;

impl LeafDecoder {
    /// A decoder for pages with `usable` usable bytes (page size minus reserved bytes). Records
    /// shorter than the schema read the missing columns as NULL; see [`Self::with_defaults`].
    pub fn new(cols: Q6Columns, filter: Q6Filter, usable: u32) -> Self {
        let predicates = Q6Predicates::new(filter, &Q6ColumnTypes::default());
        LeafDecoder {
            filter,
            usable,
            // The four columns have distinct names, so they occupy distinct positions.
            columns: NeededColumns::new(&[
                cols.ship_date,
                cols.discount,
                cols.quantity,
                cols.extended_price,
            ])
            // Q6 reads no rowid; a message about a row reads it on demand.
            .without_rowid()
            .with_window(date_window(&filter, &predicates)),
            predicates,
            missing: [
                MissingValue::Null,
                MissingValue::Null,
                MissingValue::Null,
                MissingValue::Null,
            ],
            batch: CellBatch::new(),
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
        self.columns = self
            .columns
            .with_window(date_window(&self.filter, &self.predicates));
        self
    }

    /// Decodes every cell of table-leaf page `page_no` (`page` is the whole page), adding matched
    /// rows to `agg` and pushing cells that need their overflow chain onto `spills`.
    ///
    /// Errors describe what is wrong with the page (the caller adds the file and page number).
    pub fn decode_page(
        &mut self,
        page_no: u32,
        page: &[u8],
        agg: &mut PartialAggregate,
        spills: &mut Vec<Spill>,
    ) -> Result<(), String> {
        self.decode_page_ahead(page_no, page, &[], agg, spills)
    }

    /// [`Self::decode_page`], told the page decoded next (see [`CellBatch::decode_page_ahead`]).
    pub fn decode_page_ahead(
        &mut self,
        page_no: u32,
        page: &[u8],
        next: &[u8],
        agg: &mut PartialAggregate,
        spills: &mut Vec<Spill>,
    ) -> Result<(), String> {
        let rows = self.batch.decode_page_ahead(
            &self.columns,
            page_no,
            page,
            next,
            self.usable,
            spills,
        )?;
        agg.rows_scanned += rows as u64;
        self.eval_batch(page, agg)
    }

    /// Evaluates one record given (a prefix of) its payload. `complete` says whether `payload`
    /// is the whole payload; if it is not and a needed byte lies beyond it, returns
    /// [`RecordOutcome::NeedMore`] without touching `agg`. The row itself is counted in
    /// `rows_scanned` by the caller.
    pub fn eval_record(
        &mut self,
        payload: &[u8],
        complete: bool,
        agg: &mut PartialAggregate,
    ) -> Result<RecordOutcome, String> {
        let outcome = self
            .batch
            .decode_record(&self.columns, 0, payload, complete)?;
        if outcome == RecordOutcome::Done {
            self.eval_batch(payload, agg)?;
        }
        Ok(outcome)
    }

    /// Q6 over the batch's rows, whose offsets point into `base`.
    #[inline(always)]
    fn eval_batch(&self, base: &[u8], agg: &mut PartialAggregate) -> Result<(), String> {
        let batch = &self.batch;
        let p = &self.predicates;
        for (row, cells) in batch.cells().chunks_exact(4).enumerate() {
            // Most rows fail the date test (the window is one year of seven): decide it before
            // anything else when the serial type and the bytes are enough.
            let ship = cells[SHIP];
            if ship.serial != ABSENT {
                if !ship.is_text() {
                    if p.only_text_dates_match() {
                        continue;
                    }
                } else {
                    let date = ship.bytes(base);
                    if p.date_bytes_decide(date) && !self.filter.date_in_window(date) {
                        continue;
                    }
                }
            }
            // The common shapes (a REAL or small-integer discount and quantity) first judged
            // by one branch over plain double comparisons, which reject exactly the rows the
            // exact tests below reject (see `quick_number`); the rest take the exact tests.
            if let (Some(d), Some(q)) = (
                quick_number(cells[DISCOUNT], base),
                quick_number(cells[QUANTITY], base),
            ) {
                let f = &self.filter;
                if !((d >= f.discount_lo_f64) & (d <= f.discount_hi_f64) & (q < f.quantity_f64)) {
                    continue;
                }
            }
            let value = |slot: usize| -> Result<Stored<'_>, String> {
                match cells[slot].value(base) {
                    Some(v) => Ok(Stored::from(v)),
                    None => match &self.missing[slot] {
                        MissingValue::Unavailable(why) => Err(why.clone()),
                        missing => Ok(missing.stored()),
                    },
                }
            };
            // Each value is read when its test comes, the most selective first (one row in
            // four passes the discount test): a row's later values are never decoded once it
            // fails. A DEFAULT that cannot be evaluated is an error only when a row needs it.
            let discount = value(DISCOUNT)?;
            if !p.discount(discount) || !p.quantity(value(QUANTITY)?) {
                continue;
            }
            if !p.ship_date(value(SHIP)?) {
                continue;
            }
            let price = value(PRICE)?;
            let rowid = batch.rowid(base, row);
            agg.rows_matched += 1;
            let discount = hundredths(discount, "l_discount")
                .map_err(|e| format!("row {rowid}: {e}"))?
                .ok_or_else(|| format!("row {rowid}: l_discount matched but holds no number"))?;
            // A NULL price makes the product NULL, which sum() skips.
            if let Some(price) =
                hundredths(price, "l_extendedprice").map_err(|e| format!("row {rowid}: {e}"))?
            {
                agg.revenue += i128::from(price) * i128::from(discount);
            }
        }
        Ok(())
    }
}

/// A discount or quantity as a double, for the values whose comparison with Q6's bounds a
/// double comparison decides exactly as [`Q6Predicates`] does: REALs (compared as doubles there
/// too; a NaN, which SQLite reads as NULL, fails every comparison either way) and integers of
/// up to two bytes (exact as doubles, and no bound in hundredths rounds across one of them).
/// A stored NaN reads as NULL, as everywhere. `None` for everything else.
#[inline(always)]
fn quick_number(slot: crate::decode::Slot, base: &[u8]) -> Option<f64> {
    match slot.value(base)? {
        ValueRef::Real(x) => Some(x),
        // Serial types 1 and 2 (one- and two-byte integers), 8 and 9 (the constants 0 and 1).
        ValueRef::Integer(i) if matches!(slot.serial, 1 | 2 | 8 | 9) => Some(i as f64),
        _ => None,
    }
}

/// The ship-date test the batch decoder applies itself: ten-byte dates outside the window,
/// when the column's comparison is bytewise for them (the same rows `eval_batch` rejects on
/// the date alone).
fn date_window(filter: &Q6Filter, predicates: &Q6Predicates) -> Option<TextWindow> {
    predicates.ten_byte_dates_decide().map(|sep| TextWindow {
        slot: SHIP,
        lo: filter.date_lo,
        hi: filter.date_hi,
        sep,
    })
}

#[cfg(test)]
mod tests;
