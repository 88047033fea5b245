//! Aggregate state with `update` (one row), `merge` (a later range's partial) and `finish`,
//! and the group keys that decide which rows share a group.
//!
//! `sum`, `total` and `avg` follow SQLite 3.54's `sumStep`/`sumFinalize`: the sum is an
//! integer while every input is one (text that is wholly an integer counts as one); once any
//! input is not, the result is a real. An integer sum whose running total leaves the 64-bit
//! range is the error `integer overflow`, unless a non-integer input follows (SQLite then
//! returns a real); the running total is followed in the order partials arrive (each
//! executor's pages in file order, executors in range order), which is SQLite's rowid order
//! unless the table's leaves are out of rowid order in the file. Reals are summed exactly ([`ExactSum`]) and rounded once, so results do
//! not depend on how rows were split over executors; SQLite's own Kahan-Babuska-Neumaier sum
//! agrees with that rounding except in rare last-bit cases.

use std::cmp::Ordering;
use std::collections::HashMap;

use smallvec::SmallVec;

use crate::datatype3::{compare_values, Collation};
use crate::value::{numeric_affinity_of_text, Number, Value, ValueRef};

use super::exact_sum::ExactSum;
use super::ir::{AggFunc, AggSpec};
use super::json::{JsonArg, JsonGroup, JsonGroupKind, JsonMark};

/// One part of a group or `DISTINCT` key, normalized so that values SQLite calls equal
/// (`1` and `1.0`; `'a'` and `'A'` under NOCASE) hash and compare equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum KeyPart {
    /// NULL (all NULLs form one group).
    Null,
    /// An integer, or a real equal to one.
    Integer(i64),
    /// Any other real, by its bits.
    Real(u64),
    /// Text under its collation.
    Text(Vec<u8>),
    /// A blob.
    Blob(Vec<u8>),
}

impl KeyPart {
    /// The key of `v` under `collation`.
    pub fn of(v: ValueRef<'_>, collation: Collation) -> KeyPart {
        match v {
            ValueRef::Null => KeyPart::Null,
            ValueRef::Integer(i) => KeyPart::Integer(i),
            ValueRef::Real(r) => KeyPart::of_real(r),
            ValueRef::Text(t) => KeyPart::Text(match collation {
                Collation::Binary => t.to_vec(),
                Collation::NoCase => crate::datatype3::nocase_key(t),
                Collation::RTrim => rtrim(t).to_vec(),
            }),
            ValueRef::Blob(b) => KeyPart::Blob(b.to_vec()),
        }
    }

    /// The key of a real (allocates nothing): the integer it equals, or its bits.
    pub fn of_real(r: f64) -> KeyPart {
        if r == 0.0 {
            KeyPart::Integer(0)
        } else if r.fract() == 0.0
            && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&r)
        {
            KeyPart::Integer(r as i64)
        } else {
            KeyPart::Real(r.to_bits())
        }
    }

    /// The part as a value (text as normalized under its collation), which has the same key.
    pub fn as_value_ref(&self) -> ValueRef<'_> {
        match self {
            KeyPart::Null => ValueRef::Null,
            KeyPart::Integer(i) => ValueRef::Integer(*i),
            KeyPart::Real(bits) => ValueRef::Real(f64::from_bits(*bits)),
            KeyPart::Text(t) => ValueRef::Text(t),
            KeyPart::Blob(b) => ValueRef::Blob(b),
        }
    }
}

/// `t` without its trailing spaces (what `RTRIM` compares).
pub(super) fn rtrim(t: &[u8]) -> &[u8] {
    let end = t.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1);
    &t[..end]
}

/// The running state of `sum`, `total` and `avg`, in the smallest of three forms that holds
/// what it has seen (a grouped query keeps one per group and aggregate: 40 bytes where the
/// general form is 96).
///
/// Every form stands for a [`WideSum`], the general state, and gives the same answers: the
/// compact forms hold the states whose parts fit 64 bits and whose reals fit [`ExactSum`]'s
/// fixed-point window, and a state moves to the wide form (once, boxed) when an input needs
/// it. The running totals' extremes matter only while every input is an integer (they decide
/// SQLite's `integer overflow`): once a real arrives the sum is a real and they are dropped.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum SumState {
    /// Every input so far an integer, and every running total within 64 bits.
    Ints {
        /// Non-NULL inputs.
        count: i64,
        /// The running total.
        sum: i64,
        /// The lowest and highest running totals (starting from 0).
        min: i64,
        /// See `min`.
        max: i64,
    },
    /// Some input was not an integer: the integer inputs' sum within 64 bits, and the reals
    /// within the exact sum's fixed-point window ([`ExactSum::window_term`]).
    Reals {
        /// Non-NULL inputs.
        count: i64,
        /// The sum of the integer inputs.
        int_sum: i64,
        /// The sum of the real inputs, in the window's units.
        window: Window,
    },
    /// Anything else.
    Wide(Box<WideSum>),
}

impl Default for SumState {
    fn default() -> Self {
        SumState::Ints {
            count: 0,
            sum: 0,
            min: 0,
            max: 0,
        }
    }
}

/// Two states are equal when the sums they stand for are.
impl PartialEq for SumState {
    fn eq(&self, other: &Self) -> bool {
        self.clone().into_wide() == other.clone().into_wide()
    }
}

/// An `i128` in two 64-bit halves, so that [`SumState`] is aligned (and padded) to 8 bytes
/// rather than 16.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Window {
    low: u64,
    high: i64,
}

impl Window {
    #[inline(always)]
    fn get(self) -> i128 {
        (i128::from(self.high) << 64) | i128::from(self.low)
    }
}

impl From<i128> for Window {
    #[inline(always)]
    fn from(v: i128) -> Self {
        Window {
            low: v as u64,
            high: (v >> 64) as i64,
        }
    }
}

impl SumState {
    /// Non-NULL inputs so far.
    pub fn count(&self) -> i64 {
        match self {
            SumState::Ints { count, .. } | SumState::Reals { count, .. } => *count,
            SumState::Wide(w) => w.count,
        }
    }

    /// Whether any input was not an integer (the sum is then a real).
    pub fn approx(&self) -> bool {
        match self {
            SumState::Ints { .. } => false,
            SumState::Reals { .. } => true,
            SumState::Wide(w) => w.approx,
        }
    }

    /// Adds one argument value (NULL is skipped).
    #[inline(always)]
    pub fn update(&mut self, v: ValueRef<'_>) {
        match v {
            ValueRef::Null => {}
            ValueRef::Integer(i) => self.add_integer(i),
            ValueRef::Real(r) => self.add_real(r),
            other => self.add_converted(other),
        }
    }

    /// Adds a value of a typed run ([`super::numeric`]): the integer `x` when `int` (exact:
    /// below 2^53), else the real `x`; what [`Self::update`] does with the value.
    #[inline(always)]
    pub fn update_number(&mut self, x: f64, int: bool) {
        if int {
            self.add_integer(x as i64);
        } else {
            self.add_real(x);
        }
    }

    /// Adds an integer.
    #[inline(always)]
    pub(super) fn add_integer(&mut self, i: i64) {
        match self {
            SumState::Ints {
                count,
                sum,
                min,
                max,
            } => {
                if let Some(s) = sum.checked_add(i) {
                    *count += 1;
                    *sum = s;
                    *min = (*min).min(s);
                    *max = (*max).max(s);
                    return;
                }
            }
            SumState::Reals { count, int_sum, .. } => {
                if let Some(s) = int_sum.checked_add(i) {
                    *count += 1;
                    *int_sum = s;
                    return;
                }
            }
            SumState::Wide(w) => return w.add_integer(i),
        }
        self.widen().add_integer(i);
    }

    /// Adds a real.
    #[inline(always)]
    pub(super) fn add_real(&mut self, r: f64) {
        match self {
            SumState::Ints { count, sum, .. } => {
                if let Some(term) = ExactSum::window_term(r) {
                    *self = SumState::Reals {
                        count: *count + 1,
                        int_sum: *sum,
                        window: term.into(),
                    };
                    return;
                }
            }
            SumState::Reals { count, window, .. } => {
                if let Some(s) =
                    ExactSum::window_term(r).and_then(|term| window.get().checked_add(term))
                {
                    *count += 1;
                    *window = s.into();
                    return;
                }
            }
            SumState::Wide(w) => return w.add_real(r),
        }
        self.widen().add_real(r);
    }

    /// Text and blobs: what they read as (text that is wholly an integer counts as one).
    #[inline(never)]
    fn add_converted(&mut self, v: ValueRef<'_>) {
        match number_of(v) {
            Number::Integer(i) => self.add_integer(i),
            Number::Real(r) => self.add_real(r),
        }
    }

    /// The state in its wide form, from now on.
    #[cold]
    #[inline(never)]
    fn widen(&mut self) -> &mut WideSum {
        let wide = std::mem::take(self).into_wide();
        *self = SumState::Wide(Box::new(wide));
        match self {
            SumState::Wide(w) => w,
            _ => unreachable!("just widened"),
        }
    }

    /// The general state this one stands for.
    pub fn into_wide(self) -> WideSum {
        match self {
            SumState::Ints {
                count,
                sum,
                min,
                max,
            } => WideSum {
                count,
                approx: false,
                int_sum: sum.into(),
                int_min: min.into(),
                int_max: max.into(),
                reals: ExactSum::default(),
            },
            SumState::Reals {
                count,
                int_sum,
                window,
            } => WideSum {
                count,
                approx: true,
                int_sum: int_sum.into(),
                int_min: 0,
                int_max: 0,
                reals: ExactSum::from_window(window.get()),
            },
            SumState::Wide(w) => *w,
        }
    }

    /// The most compact form of `w`.
    fn from_wide(w: WideSum) -> SumState {
        let narrow = |v: i128| i64::try_from(v).ok();
        if !w.approx {
            if let (Some(sum), Some(min), Some(max)) =
                (narrow(w.int_sum), narrow(w.int_min), narrow(w.int_max))
            {
                return SumState::Ints {
                    count: w.count,
                    sum,
                    min,
                    max,
                };
            }
        } else if let (Some(int_sum), Some(window)) = (narrow(w.int_sum), w.reals.only_window()) {
            return SumState::Reals {
                count: w.count,
                int_sum,
                window: window.into(),
            };
        }
        SumState::Wide(Box::new(w))
    }

    fn merge(&mut self, later: &SumState) {
        let mut w = std::mem::take(self).into_wide();
        w.merge(&later.clone().into_wide());
        *self = SumState::from_wide(w);
    }
}

/// What a text or blob adds to a sum (text that is wholly an integer counts as one).
fn number_of(v: ValueRef<'_>) -> Number {
    match v {
        ValueRef::Text(t) => {
            numeric_affinity_of_text(t).unwrap_or(Number::Real(v.to_f64().unwrap_or(0.0)))
        }
        _ => Number::Real(v.to_f64().unwrap_or(0.0)),
    }
}

/// The general state of `sum`, `total` and `avg` ([`SumState`]'s wide form).
///
/// Integer inputs are summed in an `i128` (exact for up to 2^64 of them) and real inputs in an
/// [`ExactSum`]; the two meet only when the result is read.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct WideSum {
    /// Non-NULL inputs.
    count: i64,
    /// Whether any input was not an integer.
    approx: bool,
    /// The sum of every integer input (while `approx` is false, the running integer total).
    int_sum: i128,
    /// The lowest and highest running integer totals while every input was an integer (to
    /// detect an overflow of the running sum however the inputs were split; unused once
    /// `approx`).
    int_min: i128,
    int_max: i128,
    /// The real inputs, exactly.
    reals: ExactSum,
}

/// Equal when they give the same answers (the extremes only while every input is an integer).
impl PartialEq for WideSum {
    fn eq(&self, other: &Self) -> bool {
        (self.count, self.approx, self.int_sum, &self.reals)
            == (other.count, other.approx, other.int_sum, &other.reals)
            && (self.approx || (self.int_min, self.int_max) == (other.int_min, other.int_max))
    }
}

impl WideSum {
    fn add_integer(&mut self, i: i64) {
        self.count += 1;
        self.int_sum += i128::from(i);
        if !self.approx {
            self.int_min = self.int_min.min(self.int_sum);
            self.int_max = self.int_max.max(self.int_sum);
        }
    }

    fn add_real(&mut self, r: f64) {
        self.count += 1;
        self.approx = true;
        self.reals.add_f64(r);
    }

    fn merge(&mut self, later: &WideSum) {
        if !self.approx {
            self.int_min = self.int_min.min(self.int_sum + later.int_min);
            self.int_max = self.int_max.max(self.int_sum + later.int_max);
        }
        self.int_sum += later.int_sum;
        self.count += later.count;
        self.approx |= later.approx;
        self.reals.merge(&later.reals);
    }

    fn overflowed(&self) -> bool {
        self.int_max > i128::from(i64::MAX) || self.int_min < i128::from(i64::MIN)
    }

    /// Everything, exactly, rounded once.
    fn real(&self) -> f64 {
        let mut all = self.reals.clone();
        all.add_i128(self.int_sum);
        all.to_f64()
    }
}

thread_local! {
    /// Bytes the `DISTINCT` and `group_concat` states updated on this thread grew by since
    /// [`take_growth`] last read them (states that grow with their group's rows: the group
    /// table counts them toward its memory budget, see [`super::group_spill`]).
    static GROWTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// What the growing states updated on this thread grew by since the last call (a kernel runs
/// on its executor's thread, and reads this after each page).
pub fn take_growth() -> usize {
    GROWTH.with(|g| g.replace(0))
}

#[inline(never)]
fn grew(bytes: usize) {
    GROWTH.with(|g| g.set(g.get().saturating_add(bytes)));
}

/// The bytes a value held in a growing state takes beyond its place.
fn heap_bytes(v: ValueRef<'_>) -> usize {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => b.len(),
        _ => 0,
    }
}

/// One aggregate's running state (serialized when a grouped query's groups spill:
/// [`super::group_spill`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum AggState {
    /// `count`.
    Count(i64),
    /// `sum`, `total`, `avg`.
    Sum(SumState),
    /// `min`/`max`: the best value so far and its row's rowid (of equal values SQLite keeps
    /// the first in rowid order, and `1` and `1.0` are equal). With a `FILTER`, a NULL
    /// best is the last row that passed it with a NULL value while no value has.
    Best(Option<(Value, i64)>),
    /// A `DISTINCT` aggregate: its distinct inputs, each as first seen in rowid order, by key.
    Distinct(Box<HashMap<KeyPart, (Value, i64)>>),
    /// `count(DISTINCT x)`: only its inputs' keys (which value and row came first does not
    /// change a count).
    CountDistinct(Box<DistinctKeys>),
    /// `group_concat`: the text of each non-NULL input with its row's rowid (an executor
    /// reads its leaves in file order, which need not be rowid order): joined in rowid order
    /// when finished.
    Concat(Vec<(i64, Vec<u8>)>),
    /// A JSON aggregate: each row's arguments rendered alone, with its row's rowid (merged
    /// in rowid order when finished, as SQLite's scan renders them one after another).
    Json(Box<JsonRows>),
    /// `json_group_array(DISTINCT x)`: as [`AggState::Distinct`] (NULL included), each value
    /// with whether it carried the JSON subtype.
    JsonDistinct(Box<HashMap<KeyPart, (Value, i64, bool)>>),
    /// An aggregate with `ORDER BY` inside: every row's sort keys and arguments, added to
    /// the aggregate in that order when finished (as SQLite replays its ORDER BY table).
    Ordered(Vec<OrderedRow>),
    /// A bare column ([`AggFunc::Shown`]): its value in the row that shows the group's keys
    /// (the row `Group::keys_rowid` names), set by `super::key_row::load_shown`.
    Shown(Option<Value>),
}

/// The distinct non-NULL keys of `count(DISTINCT x)` ([`AggState::CountDistinct`]): integers
/// (and reals equal to one) as themselves, 8 bytes each in the set, any other key as its
/// [`KeyPart`] (32 bytes and the bytes of a text or blob). The general `DISTINCT` state keeps
/// each value's first value and row as well (72 bytes an entry): `count(DISTINCT l_partkey)`
/// over 1,000 groups of SF 1 held 744 MB.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DistinctKeys {
    ints: hashbrown::HashSet<i64>,
    others: hashbrown::HashSet<KeyPart>,
}

impl DistinctKeys {
    /// Adds the key of a non-NULL value; returns the bytes the set grew by (an estimate: the
    /// entry at the set's lowest load, and the key's bytes).
    fn insert(&mut self, key: KeyPart) -> usize {
        match key {
            KeyPart::Integer(i) => {
                if self.ints.insert(i) {
                    return 2 * std::mem::size_of::<i64>();
                }
            }
            other => {
                let bytes = match &other {
                    KeyPart::Text(b) | KeyPart::Blob(b) => b.len(),
                    _ => 0,
                };
                if self.others.insert(other) {
                    return 2 * std::mem::size_of::<KeyPart>() + bytes;
                }
            }
        }
        0
    }

    /// How many distinct keys.
    fn len(&self) -> usize {
        self.ints.len() + self.others.len()
    }

    /// Adds the keys of another set.
    fn extend(&mut self, more: DistinctKeys) {
        self.ints.extend(more.ints);
        self.others.extend(more.others);
    }
}

/// The rows of a JSON aggregate ([`AggState::Json`]), each rendered alone: their bytes one
/// after another in one buffer, and per row its rowid, length and how it ended (16 bytes).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JsonRows {
    /// Per row, in the order added.
    rows: Vec<JsonRowAt>,
    /// The rows' bytes, in the same order.
    bytes: Vec<u8>,
}

/// One row of [`JsonRows`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
struct JsonRowAt {
    rowid: i64,
    len: u32,
    mark: JsonMark,
}

impl JsonRows {
    /// Renders and keeps the row with rowid `rowid`.
    fn push(
        &mut self,
        kind: JsonGroupKind,
        args: &[JsonArg<'_>],
        rowid: i64,
    ) -> Result<(), String> {
        let start = self.bytes.len();
        let mark = JsonGroup::render_row(kind, args, &mut self.bytes)?;
        let len = self.bytes.len() - start;
        let len = u32::try_from(len).map_err(|_| super::strings::TOO_BIG.to_string())?;
        grew(std::mem::size_of::<JsonRowAt>() + len as usize);
        self.rows.push(JsonRowAt { rowid, len, mark });
        Ok(())
    }

    /// Adds the rows of another range.
    fn extend(&mut self, more: JsonRows) {
        self.rows.extend(more.rows);
        self.bytes.extend(more.bytes);
    }

    /// The rowids of the rows, to change them.
    pub fn rowids_mut(&mut self) -> impl Iterator<Item = &mut i64> {
        self.rows.iter_mut().map(|r| &mut r.rowid)
    }

    /// The rowids of the rows.
    pub fn rowids(&self) -> impl Iterator<Item = i64> + '_ {
        self.rows.iter().map(|r| r.rowid)
    }

    /// The aggregate over the rows in rowid order.
    fn finish(self, kind: JsonGroupKind) -> Result<Value, String> {
        let mut starts = Vec::with_capacity(self.rows.len());
        let mut at = 0usize;
        for r in &self.rows {
            starts.push(at);
            at += r.len as usize;
        }
        let mut order: Vec<usize> = (0..self.rows.len()).collect();
        if !self.rows.is_sorted_by_key(|r| r.rowid) {
            order.sort_by_key(|&i| self.rows[i].rowid);
        }
        let mut all = JsonGroup::new(kind);
        for i in order {
            let r = self.rows[i];
            all.merge_row(&self.bytes[starts[i]..starts[i] + r.len as usize], r.mark);
        }
        Ok(all.finish()?.0)
    }
}

/// A row kept by an aggregate with `ORDER BY` inside ([`AggState::Ordered`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OrderedRow {
    /// The values of the `ORDER BY` terms.
    pub keys: SmallVec<[Value; 1]>,
    /// The row's rowid (scan order: ties, and the first of `DISTINCT` values).
    pub rowid: i64,
    /// The arguments, each with whether it carries the JSON subtype.
    pub args: SmallVec<[(Value, bool); 2]>,
}

impl AggState {
    /// The empty state of `spec`.
    pub fn new(spec: &AggSpec) -> AggState {
        if !spec.order_by.is_empty() {
            return AggState::Ordered(Vec::new());
        }
        if spec.distinct {
            if let AggFunc::Json(_) = spec.func {
                return AggState::JsonDistinct(Box::default());
            }
            if matches!(spec.func, AggFunc::Count | AggFunc::CountStar) {
                return AggState::CountDistinct(Box::default());
            }
            return AggState::Distinct(Box::default());
        }
        match spec.func {
            AggFunc::CountStar | AggFunc::Count => AggState::Count(0),
            AggFunc::Sum | AggFunc::Total | AggFunc::Avg => AggState::Sum(SumState::default()),
            AggFunc::Min | AggFunc::Max => AggState::Best(None),
            AggFunc::GroupConcat => AggState::Concat(Vec::new()),
            AggFunc::Json(_) => AggState::Json(Box::default()),
            AggFunc::Shown => AggState::Shown(None),
        }
    }

    /// Keeps a row of an aggregate with `ORDER BY` inside: its sort keys and arguments (each
    /// with whether it carries the JSON subtype).
    pub fn push_ordered(&mut self, row: OrderedRow) {
        if let AggState::Ordered(rows) = self {
            let values = row.keys.iter().chain(row.args.iter().map(|a| &a.0));
            grew(
                std::mem::size_of::<OrderedRow>()
                    + values.map(|v| heap_bytes(v.as_ref())).sum::<usize>(),
            );
            rows.push(row);
        }
    }

    /// Adds the arguments of the row with rowid `rowid` to a JSON aggregate's state (each
    /// with the JSON subtype it carries).
    pub fn update_json(
        &mut self,
        spec: &AggSpec,
        args: &[JsonArg<'_>],
        rowid: i64,
    ) -> Result<(), String> {
        match (self, spec.func) {
            (AggState::Json(rows), AggFunc::Json(kind)) => rows.push(kind, args, rowid)?,
            (AggState::JsonDistinct(seen), _) => {
                let Some(a) = args.first() else {
                    return Ok(());
                };
                seen.entry(KeyPart::of(a.value, spec.collation))
                    .and_modify(|(value, at, json)| {
                        if rowid < *at {
                            (*value, *at, *json) = (a.value.to_owned(), rowid, a.json);
                        }
                    })
                    .or_insert_with(|| {
                        grew(
                            2 * std::mem::size_of::<(KeyPart, (Value, i64, bool))>()
                                + 2 * heap_bytes(a.value),
                        );
                        (a.value.to_owned(), rowid, a.json)
                    });
            }
            _ => unreachable!("a JSON aggregate keeps a JSON state"),
        }
        Ok(())
    }

    /// Adds the argument of the row with rowid `rowid` (`Null` for `count(*)`, which counts
    /// every row).
    #[inline]
    pub fn update(&mut self, spec: &AggSpec, v: ValueRef<'_>, rowid: i64) {
        match self {
            AggState::Count(n) => {
                if spec.func == AggFunc::CountStar || !v.is_null() {
                    *n += 1;
                }
            }
            AggState::Sum(s) => s.update(v),
            AggState::Best(best) => {
                if v.is_null() {
                    // A row that passed the FILTER (the caller tested it) with a NULL value
                    // shows the group while no value has: the last such row is kept.
                    if spec.filter.is_some() {
                        match best {
                            None => *best = Some((Value::Null, rowid)),
                            Some((Value::Null, at)) if rowid > *at => *at = rowid,
                            Some(_) => {}
                        }
                    }
                    return;
                }
                let replace = match best {
                    None | Some((Value::Null, _)) => true,
                    Some((b, at)) => match compare_values(b.as_ref(), v, spec.collation) {
                        Ordering::Equal => rowid < *at,
                        Ordering::Less => spec.func == AggFunc::Max,
                        Ordering::Greater => spec.func != AggFunc::Max,
                    },
                };
                if replace {
                    *best = Some((v.to_owned(), rowid));
                }
            }
            AggState::Concat(parts) => {
                if let Some(t) = v.to_text() {
                    grew(std::mem::size_of::<(i64, Vec<u8>)>() + t.len());
                    parts.push((rowid, t.into_owned()));
                }
            }
            AggState::Json(_) | AggState::JsonDistinct(_) => {
                unreachable!("a JSON aggregate is updated by update_json")
            }
            AggState::Ordered(_) => unreachable!("an ordered aggregate is updated by push_ordered"),
            // Set where the row shows the group (`key_row::load_shown`), not per row.
            AggState::Shown(_) => {}
            AggState::CountDistinct(keys) => {
                if !v.is_null() {
                    let bytes = keys.insert(KeyPart::of(v, spec.collation));
                    if bytes > 0 {
                        grew(bytes);
                    }
                }
            }
            AggState::Distinct(seen) => {
                if v.is_null() {
                    return;
                }
                seen.entry(KeyPart::of(v, spec.collation))
                    .and_modify(|(value, at)| {
                        if rowid < *at {
                            *value = v.to_owned();
                            *at = rowid;
                        }
                    })
                    .or_insert_with(|| {
                        // The entry (at the map's lowest load), the key's and the value's bytes.
                        grew(
                            2 * std::mem::size_of::<(KeyPart, (Value, i64))>() + 2 * heap_bytes(v),
                        );
                        (v.to_owned(), rowid)
                    });
            }
        }
    }

    /// Adds the state of a later range (ties keep this one's value, as a scan in rowid order
    /// keeps the first).
    pub fn merge(&mut self, spec: &AggSpec, later: AggState) {
        match (self, later) {
            (AggState::Count(a), AggState::Count(b)) => *a += b,
            (AggState::Sum(a), AggState::Sum(b)) => a.merge(&b),
            (this @ AggState::Best(_), AggState::Best(Some((v, at)))) => {
                this.update(spec, v.as_ref(), at)
            }
            (AggState::Concat(a), AggState::Concat(b)) => a.extend(b),
            (AggState::Json(a), AggState::Json(b)) => a.extend(*b),
            (AggState::CountDistinct(a), AggState::CountDistinct(b)) => a.extend(*b),
            (AggState::Ordered(a), AggState::Ordered(b)) => a.extend(b),
            (AggState::JsonDistinct(seen), AggState::JsonDistinct(more)) => {
                for (key, (v, at, json)) in *more {
                    seen.entry(key)
                        .and_modify(|e| {
                            if at < e.1 {
                                *e = (v.clone(), at, json);
                            }
                        })
                        .or_insert((v, at, json));
                }
            }
            (AggState::Distinct(seen), AggState::Distinct(more)) => {
                for (key, (v, at)) in *more {
                    seen.entry(key)
                        .and_modify(|e| {
                            if at < e.1 {
                                *e = (v.clone(), at);
                            }
                        })
                        .or_insert((v, at));
                }
            }
            _ => {}
        }
    }

    /// The aggregate's value.
    pub fn finish(self, spec: &AggSpec) -> Result<Value, String> {
        if let AggState::Ordered(rows) = self {
            return finish_ordered(rows, spec);
        }
        if let AggState::Distinct(seen) = self {
            // In rowid order of first appearance, as SQLite's scan meets them.
            let mut values: Vec<(Value, i64)> = seen.into_values().collect();
            values.sort_by_key(|v| v.1);
            let mut plain = AggSpec {
                distinct: false,
                ..spec.clone()
            };
            if plain.func == AggFunc::CountStar {
                plain.func = AggFunc::Count;
            }
            let mut s = AggState::new(&plain);
            for (v, at) in &values {
                s.update(&plain, v.as_ref(), *at);
            }
            return s.finish(&plain);
        }
        if let AggState::JsonDistinct(seen) = self {
            let mut values: Vec<(Value, i64, bool)> = seen.into_values().collect();
            values.sort_by_key(|v| v.1);
            let plain = AggSpec {
                distinct: false,
                ..spec.clone()
            };
            let mut s = AggState::new(&plain);
            for (v, at, json) in &values {
                let arg = JsonArg {
                    value: v.as_ref(),
                    json: *json,
                    jsonb: None,
                };
                s.update_json(&plain, &[arg], *at)?;
            }
            return s.finish(&plain);
        }
        Ok(match (spec.func, self) {
            (_, AggState::Count(n)) => Value::Integer(n),
            (_, AggState::CountDistinct(keys)) => {
                Value::Integer(i64::try_from(keys.len()).unwrap_or(i64::MAX))
            }
            (AggFunc::Sum, AggState::Sum(s)) => {
                let s = s.into_wide();
                if s.count == 0 {
                    Value::Null
                } else if !s.approx {
                    if s.overflowed() {
                        return Err("integer overflow".into());
                    }
                    Value::Integer(s.int_sum as i64)
                } else {
                    Value::real(s.real())
                }
            }
            (AggFunc::Total, AggState::Sum(s)) => Value::real(s.into_wide().real()),
            (AggFunc::Avg, AggState::Sum(s)) => {
                let s = s.into_wide();
                if s.count == 0 {
                    Value::Null
                } else {
                    Value::real(s.real() / s.count as f64)
                }
            }
            (_, AggState::Best(b)) => b.map_or(Value::Null, |(v, _)| v),
            (_, AggState::Shown(v)) => v.unwrap_or(Value::Null),
            (_, AggState::Concat(mut parts)) => {
                if parts.is_empty() {
                    return Ok(Value::Null);
                }
                if !parts.is_sorted_by_key(|p| p.0) {
                    parts.sort_by_key(|p| p.0);
                }
                let mut text = Vec::new();
                for (i, (_, t)) in parts.into_iter().enumerate() {
                    if i > 0 {
                        push_separator(&mut text, spec);
                    }
                    text.extend_from_slice(&t);
                    if text.len() as i64 > super::strings::MAX_LENGTH {
                        return Err(super::strings::TOO_BIG.into());
                    }
                }
                Value::Text(text)
            }
            (AggFunc::Json(kind), AggState::Json(rows)) => rows.finish(kind)?,
            _ => Value::Null,
        })
    }
}

/// An aggregate with `ORDER BY` inside, as SQLite 3.44+ computes it: the `DISTINCT` check
/// in scan order (the first row of each value kept), then the rows added to the aggregate
/// sorted by the `ORDER BY` terms, ties in scan order.
fn finish_ordered(mut rows: Vec<OrderedRow>, spec: &AggSpec) -> Result<Value, String> {
    if !rows.is_sorted_by_key(|r| r.rowid) {
        rows.sort_by_key(|r| r.rowid);
    }
    if spec.distinct {
        let json = matches!(spec.func, AggFunc::Json(_));
        let mut seen = std::collections::HashSet::new();
        rows.retain(|r| {
            let v = r.args.first().map_or(ValueRef::Null, |a| a.0.as_ref());
            (json || !v.is_null()) && seen.insert(KeyPart::of(v, spec.collation))
        });
    }
    rows.sort_by(|a, b| {
        spec.order_by
            .iter()
            .zip(a.keys.iter().zip(&b.keys))
            .map(|(k, (x, y))| super::marks::compare_key(k, x, y))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
    let plain = AggSpec {
        distinct: false,
        order_by: Vec::new(),
        ..spec.clone()
    };
    let mut s = AggState::new(&plain);
    // Positions as rowids: the states that order by rowid keep this order.
    for (at, row) in rows.iter().enumerate() {
        let at = at as i64;
        if let AggFunc::Json(_) = plain.func {
            let args: SmallVec<[JsonArg<'_>; 2]> = row
                .args
                .iter()
                .map(|(v, json)| JsonArg {
                    value: v.as_ref(),
                    json: *json,
                    jsonb: None,
                })
                .collect();
            s.update_json(&plain, &args, at)?;
        } else {
            let v = row.args.first().map_or(ValueRef::Null, |a| a.0.as_ref());
            s.update(&plain, v, at);
        }
    }
    s.finish(&plain)
}

/// `group_concat`'s separator before a later value: `,` by default, the separator's text,
/// nothing for a NULL one.
fn push_separator(acc: &mut Vec<u8>, spec: &AggSpec) {
    match &spec.separator {
        None => acc.push(b','),
        Some(v) => {
            if let Some(t) = v.as_ref().to_text() {
                acc.extend_from_slice(&t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(func: AggFunc) -> AggSpec {
        AggSpec::new(func, None)
    }

    fn run(func: AggFunc, parts: &[&[Value]]) -> Result<Value, String> {
        let sp = spec(func);
        let mut states = parts.iter().map(|p| {
            let mut s = AggState::new(&sp);
            for (i, v) in p.iter().enumerate() {
                s.update(&sp, v.as_ref(), i as i64);
            }
            s
        });
        let mut first = states.next().unwrap();
        for s in states {
            first.merge(&sp, s);
        }
        first.finish(&sp)
    }

    #[test]
    fn sums_follow_sqlite() {
        let i = Value::Integer;
        assert_eq!(run(AggFunc::Sum, &[&[i(1), i(2)], &[i(3)]]), Ok(i(6)));
        assert_eq!(run(AggFunc::Sum, &[&[]]), Ok(Value::Null));
        assert_eq!(run(AggFunc::Total, &[&[]]), Ok(Value::Real(0.0)));
        assert_eq!(
            run(AggFunc::Sum, &[&[i(i64::MAX)], &[i(1), i(-5)]]),
            Err("integer overflow".into())
        );
        // A real after the overflow makes it a real sum.
        assert_eq!(
            run(AggFunc::Sum, &[&[i(i64::MAX), i(1)], &[Value::Real(0.5)]]),
            Ok(Value::Real(9.223_372_036_854_776e18))
        );
        // The running total never left the range.
        assert_eq!(
            run(AggFunc::Sum, &[&[i(i64::MAX)], &[i(-5), i(1)]]),
            Ok(i(i64::MAX - 4))
        );
        assert_eq!(run(AggFunc::Sum, &[&[Value::text("3")]]), Ok(i(3)));
        assert_eq!(
            run(AggFunc::Sum, &[&[Value::text("3x")]]),
            Ok(Value::Real(3.0))
        );
        assert_eq!(run(AggFunc::Avg, &[&[i(1), i(2)]]), Ok(Value::Real(1.5)));
    }

    /// The compact forms stand for the wide one: every prefix of a mixed sequence (integers
    /// near the 64-bit limits, reals in and out of the window) kept both ways, split in two
    /// at every place, gives the same state and answers.
    #[test]
    fn compact_sum_states_equal_the_wide_form() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..300 {
            let n = (next() % 12) as usize;
            let values: Vec<Value> = (0..n)
                .map(|_| match next() % 7 {
                    0 => Value::Integer(next() as i64),
                    1 => Value::Integer((next() % 100) as i64 - 50),
                    2 => Value::Real((next() % 1000) as f64 / 8.0),
                    3 => Value::Real(f64::from_bits(next() >> 2)),
                    4 => Value::Real(3e12),
                    5 => Value::Integer(i64::MAX - (next() % 3) as i64),
                    _ => Value::Null,
                })
                .collect();
            for cut in 0..=n {
                let (mut compact, mut wide) = (SumState::default(), WideSum::default());
                let mut later = SumState::default();
                for (k, v) in values.iter().enumerate() {
                    let into = if k < cut { &mut compact } else { &mut later };
                    into.update(v.as_ref());
                    match v {
                        Value::Integer(i) => wide.add_integer(*i),
                        Value::Real(r) => wide.add_real(*r),
                        _ => {}
                    }
                }
                compact.merge(&later);
                assert_eq!(
                    compact.clone().into_wide(),
                    wide,
                    "{values:?} split at {cut}"
                );
                for func in [AggFunc::Sum, AggFunc::Total, AggFunc::Avg] {
                    let sp = spec(func);
                    let w = SumState::Wide(Box::new(wide.clone()));
                    assert_eq!(
                        AggState::Sum(compact.clone()).finish(&sp),
                        AggState::Sum(w).finish(&sp)
                    );
                }
            }
        }
    }

    #[test]
    fn states_are_small() {
        // A sum is 40 bytes until an input needs the wide form; an aggregate state 48.
        assert!(std::mem::size_of::<SumState>() <= 40);
        assert!(std::mem::size_of::<AggState>() <= 48);
        let mut s = SumState::default();
        s.update(ValueRef::Integer(5));
        assert!(matches!(s, SumState::Ints { .. }));
        s.update(ValueRef::Real(0.25));
        assert!(matches!(s, SumState::Reals { .. }));
        s.update(ValueRef::Real(1e300));
        assert!(matches!(s, SumState::Wide(_)));
    }

    #[test]
    fn min_max_keep_the_first_of_equals() {
        assert_eq!(
            run(AggFunc::Min, &[&[Value::Real(1.0)], &[Value::Integer(1)]]),
            Ok(Value::Real(1.0))
        );
        assert_eq!(
            run(
                AggFunc::Max,
                &[&[Value::Null, Value::text("a")], &[Value::Integer(9)]]
            ),
            Ok(Value::text("a"))
        );
    }

    /// SQLite's `sum`, `total` and `avg` of `values` inserted in rowid order (an error as its
    /// message).
    fn sqlite_sums(values: &[Value]) -> [Result<Value, String>; 3] {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute("CREATE TABLE t(x)", []).unwrap();
        for v in values {
            let p: rusqlite::types::Value = match v {
                Value::Null => rusqlite::types::Value::Null,
                Value::Integer(i) => rusqlite::types::Value::Integer(*i),
                Value::Real(r) => rusqlite::types::Value::Real(*r),
                Value::Text(t) => {
                    rusqlite::types::Value::Text(String::from_utf8(t.clone()).unwrap())
                }
                Value::Blob(b) => rusqlite::types::Value::Blob(b.clone()),
            };
            conn.execute("INSERT INTO t VALUES (?1)", [p]).unwrap();
        }
        ["sum", "total", "avg"].map(|f| {
            conn.query_row(&format!("SELECT {f}(x) FROM t"), [], |r| {
                Ok(match r.get_ref(0)? {
                    rusqlite::types::ValueRef::Null => Value::Null,
                    rusqlite::types::ValueRef::Integer(i) => Value::Integer(i),
                    rusqlite::types::ValueRef::Real(r) => Value::Real(r),
                    _ => unreachable!("sums are numbers"),
                })
            })
            .map_err(|e| e.to_string())
        })
    }

    /// The integer/real split of the sum state (integers in an `i128`, reals exactly) against
    /// SQLite, for every split of the rows over two executors: overflow errors, a real after
    /// an overflow, cancellation, text that is an integer, NULLs.
    #[test]
    fn sum_states_match_sqlite_for_every_split() {
        let i = Value::Integer;
        let r = Value::Real;
        let cases: Vec<Vec<Value>> = vec![
            vec![i(1), i(2), Value::Null, i(-7)],
            vec![i(i64::MAX), i(1), i(-1)],
            vec![i(i64::MAX), i(-1), i(1)],
            vec![i(i64::MIN), i(-1)],
            vec![i(i64::MAX), i(i64::MAX), r(0.5)],
            vec![r(0.5), i(i64::MAX), i(i64::MAX)],
            vec![i(1 << 60), r(0.25), i(1 << 60), i(-(1 << 61)), r(-0.25)],
            vec![r(1e300), i(3), r(-1e300), r(0.125)],
            vec![Value::text("12"), i(5), Value::text("2.5")],
            vec![Value::Null, Value::Null],
            vec![],
            // The compact forms' edges: a real sum leaving the fixed-point window, reals the
            // window never takes, integers overflowing after a real, a real after integers.
            vec![r(3e12), r(3e12), r(-3e12), r(3e12), i(2)],
            vec![r(1e-20), i(4), r(0.75)],
            vec![r(0.5), i(i64::MAX), i(1), i(-3)],
            vec![i(i64::MAX), i(-2), r(0.5), i(i64::MAX)],
            vec![i(7), r(f64::INFINITY), i(1)],
        ];
        for values in &cases {
            let want = sqlite_sums(values);
            for (k, func) in [AggFunc::Sum, AggFunc::Total, AggFunc::Avg]
                .into_iter()
                .enumerate()
            {
                let want = match &want[k] {
                    Err(e) if e.contains("integer overflow") => Err("integer overflow".into()),
                    other => other.clone(),
                };
                for cut in 0..=values.len() {
                    let got = run(func, &[&values[..cut], &values[cut..]]);
                    assert_eq!(got, want, "{func:?} of {values:?} split at {cut}");
                }
            }
        }
    }
}
