//! Full sorts (`ORDER BY` without `LIMIT`) in bounded memory: each executor encodes its rows
//! into an arena, sorts them by an order-preserving key prefix, spills sorted runs to a
//! scratch directory when its share of the budget is full, and the coordinator merges every
//! run (k-way) into a stream of rows in the result's order.
//!
//! - **Rows as bytes** ([`SortBuffer`]): a row is one record in an arena (its `ORDER BY`
//!   values, then its output values, each a tag and its bytes), found through a 32-byte entry
//!   holding the record's place, its rowid and a [`prefix`] of its first key: a `u128` such
//!   that `prefix(a) < prefix(b)` implies `a < b` under the key's storage-class order,
//!   collation, `DESC` and `NULLS FIRST/LAST`. Most comparisons end at the prefixes; ties
//!   compare the encoded keys as SQLite does ([`compare_key_ref`]), then the scan order. No
//!   row is an allocation of its own.
//! - **Segments**: the rows are sorted in segments of at most [`SEGMENT_BYTES`] of arena as the
//!   scan goes on, so that a sort's comparisons stay within a few tens of megabytes; a
//!   finished buffer hands each segment to the merge as a run, and a spill merges them.
//! - **Bounded memory** ([`SortSpace`]): a query's budget (`--memory`) is split in two: half
//!   for the executors' buffers while they scan (a buffer that would grow past its share is
//!   sorted and written to a file in the scratch directory, never beside the user's file),
//!   half for the sorted runs that finished executors keep in memory for the merge (a run that
//!   does not fit is written out too). An executor with more than [`MAX_RUNS`] files merges
//!   them into fewer before it hands them over, so the final merge opens a bounded number.
//! - **The merge** ([`SortedMerge`]): a binary heap over the runs' heads, in the order of
//!   the keys, then of the files (a query over several files), then of the rowids. Rows with
//!   equal keys keep SQLite's order: the scan's.
//!
//! Layering: below the kernel (which fills the buffers) and the merge and streams (which
//! merge the runs); above [`super::ir`] and the value types.

use std::cmp::Ordering;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as Atomic};
use std::sync::Arc;

use crate::datatype3::Collation;
use crate::settings::ScanSettings;
use crate::value::{Value, ValueRef};

use super::ir::SortKey;
use super::marks::compare_key_ref;
use super::run_heap;

/// At most this many spilled runs per executor reach the final merge: beyond it, the
/// executor merges its runs into fewer files first (16 at a time).
pub const MAX_RUNS: usize = 16;

/// The files all executors together hand the final merge, at most (each executor's share is
/// at least 2): the merge holds each open, and the usual limit of open files is 1,024.
const MERGE_FILES: usize = 256;

/// Bytes of a spilled run's read buffer in a merge.
/// (Small in tests, so that a run is read in many pieces.)
const READ_BUFFER: usize = if cfg!(test) { 512 } else { 256 * 1024 };

/// Bytes of one entry of a buffer's index (its prefix, rowid and place).
const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();

/// The smallest buffer an executor gets, whatever the budget: a run must hold some rows.
const MIN_BUFFER: usize = 64 * 1024;

/// Bytes of a buffer sorted at once, at most: past it the rows so far are sorted as a segment
/// while the scan goes on, and the segments are merged like runs. A buffer sorted whole at the
/// end of a scan compared rows all over a gigabyte of arena (on SF 1's full sort: 8.5 s of
/// CPU against 6.9 s in 64 MiB pieces); pieces a few times the L3's size sort in cache's reach
/// and sort while the other executors still scan. (Small in tests, so that the unit tests see
/// many segments.)
const SEGMENT_BYTES: usize = if cfg!(test) { 2048 } else { 32 << 20 };

/// How much memory a query's full sorts may hold, and where they spill beyond it: made once
/// per query and cloned into each executor's kernel.
#[derive(Debug, Clone)]
pub struct SortSpace {
    /// Bytes one executor's buffer may hold (arena and index) before it is spilled.
    buffer_limit: usize,
    /// Bytes the sorted runs of finished executors may keep in memory, all together.
    held_limit: u64,
    /// Bytes they keep now.
    held: Arc<AtomicU64>,
    /// The scratch directory spilled runs are written to.
    dir: PathBuf,
    /// The files one executor may hand the final merge.
    max_runs: usize,
}

impl SortSpace {
    /// A budget of `budget` bytes for a query run by `executors` executors, spilling into
    /// `dir` (see the module docs for how it is split).
    pub fn new(budget: u64, executors: usize, dir: PathBuf) -> Self {
        let half = budget / 2;
        let per = half / executors.max(1) as u64;
        SortSpace {
            buffer_limit: usize::try_from(per).unwrap_or(usize::MAX).max(MIN_BUFFER),
            held_limit: half,
            held: Arc::new(AtomicU64::new(0)),
            dir,
            max_runs: (MERGE_FILES / executors.max(1)).clamp(2, MAX_RUNS),
        }
    }

    /// The budget of a query with `settings` on `executors` executors: `--memory` or a
    /// quarter of the machine's memory, spilling into the scratch directory (`$TMPDIR`, else
    /// `/tmp`).
    pub fn for_query(settings: &ScanSettings, executors: usize) -> Self {
        SortSpace::new(
            settings.memory.unwrap_or_else(default_budget),
            executors,
            std::env::temp_dir(),
        )
    }

    /// No limit: nothing is ever spilled (a kernel built without a budget).
    pub fn unbounded() -> Self {
        SortSpace {
            buffer_limit: usize::MAX,
            held_limit: u64::MAX,
            held: Arc::new(AtomicU64::new(0)),
            dir: std::env::temp_dir(),
            max_runs: MAX_RUNS,
        }
    }

    /// Bytes one executor's buffer (or a grouped query's group table) may hold before it is
    /// spilled.
    pub fn buffer_limit(&self) -> usize {
        self.buffer_limit
    }

    /// The scratch directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The default budget of a query's sorts when none is given: a quarter of the machine's
/// physical memory (at least 64 MiB).
pub fn default_budget() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 when the value is unknown.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let total = u64::try_from(pages)
        .unwrap_or(0)
        .saturating_mul(u64::try_from(size).unwrap_or(0));
    (total / 4).max(64 << 20)
}

/// One row of a buffer: the prefix of its first key, its rowid, and where its record starts
/// in the arena (a `u32` length, then the record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    prefix: u128,
    rowid: i64,
    at: u64,
}

/// A storage class tag in a record.
const NULL: u8 = 0;
const INTEGER: u8 = 1;
const REAL: u8 = 2;
const TEXT: u8 = 3;
const BLOB: u8 = 4;

/// Appends `v` to `out`: a tag, then 8 bytes for a number, or a `u32` length and the bytes.
fn put(out: &mut Vec<u8>, v: ValueRef<'_>) {
    match v {
        ValueRef::Null => out.push(NULL),
        ValueRef::Integer(i) => {
            out.push(INTEGER);
            out.extend_from_slice(&i.to_le_bytes());
        }
        ValueRef::Real(r) => {
            out.push(REAL);
            out.extend_from_slice(&r.to_le_bytes());
        }
        ValueRef::Text(b) | ValueRef::Blob(b) => {
            out.push(if matches!(v, ValueRef::Text(_)) {
                TEXT
            } else {
                BLOB
            });
            // SQLite's values are at most 2^31 - 1 bytes.
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(b);
        }
    }
}

/// The value at the start of `b`, and `b` moved past it (records are written by [`put`]
/// only, so a malformed one is a bug).
fn take<'a>(b: &mut &'a [u8]) -> ValueRef<'a> {
    let (tag, rest) = b.split_first().expect("a sort record holds its values");
    let word = |rest: &[u8]| -> [u8; 8] { rest[..8].try_into().expect("8 bytes") };
    let (v, rest) = match *tag {
        NULL => (ValueRef::Null, rest),
        INTEGER => (
            ValueRef::Integer(i64::from_le_bytes(word(rest))),
            &rest[8..],
        ),
        REAL => (ValueRef::Real(f64::from_le_bytes(word(rest))), &rest[8..]),
        tag => {
            let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
            let bytes = &rest[4..4 + len];
            let v = if tag == TEXT {
                ValueRef::Text(bytes)
            } else {
                debug_assert_eq!(tag, BLOB);
                ValueRef::Blob(bytes)
            };
            (v, &rest[4 + len..])
        }
    };
    *b = rest;
    v
}

/// The output values of a record whose first `keys` values are its `ORDER BY` values,
/// appended to `out`.
pub fn record_outputs<'a>(record: &'a [u8], keys: usize, out: &mut Vec<ValueRef<'a>>) {
    let mut b = record;
    for _ in 0..keys {
        take(&mut b);
    }
    while !b.is_empty() {
        out.push(take(&mut b));
    }
}

/// A record's output values as owned values.
pub fn record_values(record: &[u8], keys: usize) -> Vec<Value> {
    let mut refs = Vec::new();
    record_outputs(record, keys, &mut refs);
    refs.into_iter().map(ValueRef::to_owned).collect()
}

/// The first 15 bytes of `bytes`, big-endian in the low 120 bits (zero-padded): monotone in
/// the bytes' `memcmp` order.
fn head15(bytes: impl Iterator<Item = u8>) -> u128 {
    let mut p = 0u128;
    let mut n = 0;
    for b in bytes.take(15) {
        p = (p << 8) | u128::from(b);
        n += 1;
    }
    p << (8 * (15 - n))
}

/// An order-preserving prefix of the value `v` of `ORDER BY` term `k`: the top byte is the
/// value's place among NULLs, numbers, texts and blobs (as `k` orders them), the low 120 bits
/// a monotone digest of the value (a number's double; a text's first 15 bytes under its
/// collation; a blob's first 15 bytes), inverted for `DESC`. Equal prefixes say nothing.
pub fn prefix(k: &SortKey, v: ValueRef<'_>) -> u128 {
    prefix_under(v, k.collation, k.descending, k.nulls_first)
}

/// [`prefix`] of `v` ordered under `collation`, descending or not, with NULLs first or last:
/// `prefix_under(v, c, false, true)` orders as SQLite's grouping sorter orders group keys.
pub fn prefix_under(
    v: ValueRef<'_>,
    collation: Collation,
    descending: bool,
    nulls_first: bool,
) -> u128 {
    const LOW: u128 = (1 << 120) - 1;
    let (class, digest) = match v {
        ValueRef::Null => return if nulls_first { 0 } else { u128::MAX },
        // An integer rounds to its nearest double: monotone, and never on the wrong side of
        // a real it is exactly compared with (sqlite3IntFloatCompare).
        ValueRef::Integer(i) => (1u128, u128::from(double_bits(i as f64)) << 56),
        ValueRef::Real(r) => (1, u128::from(double_bits(r)) << 56),
        ValueRef::Text(t) => (
            2,
            match collation {
                Collation::Binary => head15(t.iter().copied()),
                // Folded up to the first NUL, zero after it: the key NOCASE compares by.
                Collation::NoCase => {
                    let nul = t.iter().position(|&c| c == 0).unwrap_or(t.len());
                    head15(t.iter().enumerate().map(|(i, c)| {
                        if i < nul {
                            c.to_ascii_lowercase()
                        } else {
                            0
                        }
                    }))
                }
                Collation::RTrim => {
                    let end = t.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1);
                    head15(t[..end].iter().copied())
                }
            },
        ),
        ValueRef::Blob(b) => (3, head15(b.iter().copied())),
    };
    if descending {
        ((4 - class) << 120) | (!digest & LOW)
    } else {
        (class << 120) | digest
    }
}

/// A double's bits, ordered as the doubles are (`-0.0` as `0.0`; NaN, which SQLite never
/// stores, below every number, as sqlite3IntFloatCompare puts it below every integer).
fn double_bits(r: f64) -> u64 {
    if r.is_nan() {
        return 0;
    }
    let bits = (if r == 0.0 { 0.0 } else { r }).to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// How two records' keys compare (the prefixes were equal, or not looked at).
fn compare_records(order: &[SortKey], mut a: &[u8], mut b: &[u8]) -> Ordering {
    for k in order {
        let (x, y) = (take(&mut a), take(&mut b));
        let o = compare_key_ref(k, x, y);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// The order of two rows of one scan (equal keys: the scan's order).
fn compare_rows(
    order: &[SortKey],
    backward: bool,
    a: (u128, i64, &[u8]),
    b: (u128, i64, &[u8]),
) -> Ordering {
    a.0.cmp(&b.0)
        .then_with(|| compare_records(order, a.2, b.2))
        .then_with(|| scan_order(backward, a.1, b.1))
}

fn scan_order(backward: bool, a: i64, b: i64) -> Ordering {
    if backward {
        b.cmp(&a)
    } else {
        a.cmp(&b)
    }
}

/// What a query's sorts did, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SortStats {
    /// Rows sorted.
    pub rows: u64,
    /// Runs written to the scratch directory (merged runs included).
    pub spilled_runs: u64,
    /// Bytes written to the scratch directory.
    pub spilled_bytes: u64,
    /// The peak bytes of the executors' buffers, all together (an upper bound: the sum of
    /// each one's peak).
    pub buffer_bytes: u64,
}

impl SortStats {
    fn add(&mut self, o: &SortStats) {
        self.rows += o.rows;
        self.spilled_runs += o.spilled_runs;
        self.spilled_bytes += o.spilled_bytes;
        self.buffer_bytes += o.buffer_bytes;
    }
}

/// A sorted run written to the scratch directory: an unnamed file (`O_TMPFILE`, or unlinked
/// as soon as it is made), so that nothing is left behind, even by a killed process.
#[derive(Clone)]
struct SpillFile {
    file: Arc<File>,
    rows: u64,
    /// Every [`MARK_ROWS`]th row's number and byte offset: where a part of a split merge
    /// ([`SortedMerge::split`]) starts reading.
    marks: Arc<Vec<(u64, u64)>>,
}

/// Rows between two marks of a spilled run ([`SpillFile::marks`]).
const MARK_ROWS: u64 = if cfg!(test) { 16 } else { 8192 };

/// A run being written: its rows, one after the other, and its marks.
struct RunWriter<'f> {
    out: BufWriter<&'f File>,
    offset: u64,
    rows: u64,
    marks: Vec<(u64, u64)>,
}

impl RunWriter<'_> {
    /// Appends a row: its first key's prefix, its rowid, its record's length and record.
    fn row(&mut self, prefix: u128, rowid: i64, record: &[u8]) -> io::Result<()> {
        if self.rows.is_multiple_of(MARK_ROWS) {
            self.marks.push((self.rows, self.offset));
        }
        self.out.write_all(&prefix.to_le_bytes())?;
        self.out.write_all(&rowid.to_le_bytes())?;
        self.out.write_all(&(record.len() as u32).to_le_bytes())?;
        self.out.write_all(record)?;
        self.offset += (ROW_HEAD + record.len()) as u64;
        self.rows += 1;
        Ok(())
    }
}

/// Bytes before a spilled row's record: its prefix, rowid and record length.
const ROW_HEAD: usize = 16 + 8 + 4;

impl fmt::Debug for SpillFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a sorted run of {} rows", self.rows)
    }
}

/// An executor's rows while it scans, and its sorted runs once it is done.
#[derive(Debug)]
pub struct SortBuffer {
    space: SortSpace,
    arena: Vec<u8>,
    entries: Vec<Entry>,
    /// Where each sorted segment of `entries` ends: the rows after the last are not sorted
    /// yet. A finished buffer is the runs `entries[0..ends[0]]`, `entries[ends[0]..ends[1]]`...
    ends: Vec<usize>,
    spills: Vec<SpillFile>,
    /// Whether every row is in a sorted segment (the buffer is finished).
    sorted: bool,
    /// Bytes of the finished run counted in the space's held bytes.
    held: u64,
    /// The first failure to write or read a run: the query's error.
    failed: Option<SpillError>,
    stats: SortStats,
}

impl PartialEq for SortBuffer {
    /// Buffers are equal when they hold the same rows in the same runs (for tests).
    fn eq(&self, other: &Self) -> bool {
        self.arena == other.arena
            && self.entries == other.entries
            && self.ends == other.ends
            && self.spills.len() == other.spills.len()
    }
}

impl Clone for SortBuffer {
    /// A copy of the rows (and handles on the same files); its memory is not counted in the
    /// budget's held bytes.
    fn clone(&self) -> Self {
        SortBuffer {
            space: self.space.clone(),
            arena: self.arena.clone(),
            entries: self.entries.clone(),
            ends: self.ends.clone(),
            spills: self.spills.clone(),
            sorted: self.sorted,
            held: 0,
            failed: self.failed.clone(),
            stats: self.stats,
        }
    }
}

impl Drop for SortBuffer {
    fn drop(&mut self) {
        self.space.held.fetch_sub(self.held, Atomic::Relaxed);
    }
}

/// Writing or reading a spilled run failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sorting in the scratch directory {}: {what}", dir.display())]
pub struct SpillError {
    /// The scratch directory.
    pub dir: PathBuf,
    /// What failed.
    pub what: String,
}

impl SortBuffer {
    /// An empty buffer within `space`.
    pub fn new(space: SortSpace) -> Self {
        SortBuffer {
            space,
            arena: Vec::new(),
            entries: Vec::new(),
            ends: Vec::new(),
            spills: Vec::new(),
            sorted: false,
            held: 0,
            failed: None,
            stats: SortStats::default(),
        }
    }

    /// The bytes the buffer holds (large vectors grow by remapping, and pages not yet
    /// written are not resident: the lengths are what counts).
    fn bytes(&self) -> usize {
        self.arena.len() + self.entries.len() * ENTRY_BYTES
    }

    /// Adds a row: its `ORDER BY` values `keys` (for the terms of `order`), its rowid and its
    /// output values. A buffer past its share of the budget is spilled first.
    pub fn push(
        &mut self,
        order: &[SortKey],
        backward: bool,
        keys: &[ValueRef<'_>],
        rowid: i64,
        outputs: &[ValueRef<'_>],
    ) {
        let at = self.arena.len();
        self.arena.extend_from_slice(&[0; 4]);
        for &v in keys.iter().chain(outputs) {
            put(&mut self.arena, v);
        }
        let len = (self.arena.len() - at - 4) as u32;
        self.arena[at..at + 4].copy_from_slice(&len.to_le_bytes());
        let prefix = match (order.first(), keys.first()) {
            (Some(k), Some(&v)) => prefix(k, v),
            _ => 0,
        };
        self.entries.push(Entry {
            prefix,
            rowid,
            at: at as u64,
        });
        self.stats.rows += 1;
        if self.bytes() >= self.space.buffer_limit && self.entries.len() > 1 {
            self.spill(order, backward);
        } else if self.arena.len() - self.tail_at() >= self.segment_bytes() {
            self.sort_tail(order, backward);
        }
    }

    /// Where the unsorted rows' records start in the arena: the first unsorted entry's (the
    /// rows after the last segment are still in the order they came).
    fn tail_at(&self) -> usize {
        let from = self.ends.last().copied().unwrap_or(0);
        self.entries
            .get(from)
            .map_or(self.arena.len(), |e| e.at as usize)
    }

    /// Bytes of arena past which the unsorted rows are sorted as a segment: at most a quarter
    /// of the buffer's share, so that a spill merges a few segments.
    fn segment_bytes(&self) -> usize {
        SEGMENT_BYTES.min(self.space.buffer_limit / 4)
    }

    /// Sorts the rows after the last segment into a segment of their own.
    fn sort_tail(&mut self, order: &[SortKey], backward: bool) {
        let from = self.ends.last().copied().unwrap_or(0);
        if from < self.entries.len() {
            let arena = &self.arena;
            let record = |e: &Entry| entry_record(e, arena);
            self.entries[from..].sort_unstable_by(|a, b| {
                compare_rows(
                    order,
                    backward,
                    (a.prefix, a.rowid, record(a)),
                    (b.prefix, b.rowid, record(b)),
                )
            });
            self.ends.push(self.entries.len());
        }
    }

    /// The sorted segments, as ranges of entries.
    fn segments(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        std::iter::once(0)
            .chain(self.ends.iter().copied())
            .zip(self.ends.iter().copied())
    }

    /// Sorts the buffer's rows and writes them to a new run in the scratch directory.
    fn spill(&mut self, order: &[SortKey], backward: bool) {
        self.stats.buffer_bytes = self.stats.buffer_bytes.max(self.bytes() as u64);
        self.sort_tail(order, backward);
        if self.failed.is_none() {
            let written = write_run(&self.space.dir, self.entries.len() as u64, |out| {
                self.merge_segments(order, backward, |e| {
                    out.row(e.prefix, e.rowid, entry_record(e, &self.arena))
                })
            });
            self.add_run(written, "writing a sorted run");
        }
        self.arena.clear();
        self.entries.clear();
        self.ends.clear();
        self.sorted = false;
    }

    /// Hands `each` the rows of the sorted segments in the merged order (a k-way merge of
    /// the segments; rows of one scan: no file order).
    fn merge_segments(
        &self,
        order: &[SortKey],
        backward: bool,
        mut each: impl FnMut(&Entry) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut at: Vec<(usize, usize)> = self.segments().collect();
        let arena = &self.arena;
        let entry = |at: &[(usize, usize)], s: usize| &self.entries[at[s].0];
        let less = |at: &[(usize, usize)], a: usize, b: usize| {
            let (x, y) = (entry(at, a), entry(at, b));
            compare_rows(
                order,
                backward,
                (x.prefix, x.rowid, entry_record(x, arena)),
                (y.prefix, y.rowid, entry_record(y, arena)),
            ) == Ordering::Less
        };
        let mut heap: Vec<usize> = (0..at.len()).filter(|&s| at[s].0 < at[s].1).collect();
        run_heap::heapify(&mut heap, |a, b| less(&at, a, b));
        while let Some(&top) = heap.first() {
            each(entry(&at, top))?;
            at[top].0 += 1;
            let exhausted = at[top].0 == at[top].1;
            run_heap::advance_top(&mut heap, exhausted, |a, b| less(&at, a, b));
        }
        Ok(())
    }

    /// Keeps a run just written, or the failure of `doing` it as the buffer's error.
    fn add_run(&mut self, written: io::Result<(SpillFile, u64)>, doing: &str) {
        match written {
            Ok((file, bytes)) => {
                self.spills.push(file);
                self.stats.spilled_runs += 1;
                self.stats.spilled_bytes += bytes;
            }
            Err(e) => {
                self.failed = Some(SpillError {
                    dir: self.space.dir.clone(),
                    what: format!("{doing}: {e}"),
                })
            }
        }
    }

    /// Ends the scan: sorts the rows in memory, keeps them there if the finished runs of
    /// all executors fit the budget's half for them (else writes them out too), and merges
    /// the executor's files into at most [`MAX_RUNS`] (fewer with many executors: all of them
    /// together hand the final merge at most 256).
    pub fn finish(&mut self, order: &[SortKey], backward: bool) {
        self.stats.buffer_bytes = self.stats.buffer_bytes.max(self.bytes() as u64);
        let bytes = (self.arena.len() + self.entries.len() * ENTRY_BYTES) as u64;
        let held = self.space.held.fetch_add(bytes, Atomic::Relaxed) + bytes;
        if held > self.space.held_limit && !self.entries.is_empty() {
            self.space.held.fetch_sub(bytes, Atomic::Relaxed);
            self.spill(order, backward);
        } else {
            self.held = bytes;
            self.sort_tail(order, backward);
            self.sorted = true;
            self.lay_out_segments();
        }
        self.arena.shrink_to_fit();
        self.entries.shrink_to_fit();
        while self.spills.len() > self.space.max_runs && self.failed.is_none() {
            // Merge the oldest files, up to MAX_RUNS, into one (runs of one scan: no file
            // order).
            let group: Vec<SpillFile> = self
                .spills
                .drain(..MAX_RUNS.min(self.spills.len()))
                .collect();
            let rows = group.iter().map(|s| s.rows).sum();
            let merged = SortedMerge::of_files(order, backward, group).and_then(|mut merge| {
                write_run(&self.space.dir, rows, |out| {
                    while let Some(h) = merge.next_head()? {
                        out.row(h.prefix, h.rowid, h.record)?;
                    }
                    Ok(())
                })
            });
            self.add_run(merged, "merging sorted runs");
        }
    }

    /// Copies the sorted segments' records into a new arena in their order: the
    /// coordinator's merge then reads each segment front to back instead of jumping around
    /// in memory (the random reads happen here, on every executor at once, rather than on
    /// the one thread that merges). The segments are merged there, beside the threads that
    /// write the output: merging them here first (into one run per executor, so that the
    /// final merge compares fewer heads) measured slower, 8.9 s of CPU on SF 1's full sort
    /// against 6.6 s, and 5.3 s wall against 4.1 s.
    fn lay_out_segments(&mut self) {
        let mut arena = Vec::with_capacity(self.arena.len());
        for e in &mut self.entries {
            let at = e.at as usize;
            let len = u32::from_le_bytes(self.arena[at..at + 4].try_into().expect("4 bytes"));
            e.at = arena.len() as u64;
            arena.extend_from_slice(&self.arena[at..at + 4 + len as usize]);
        }
        self.arena = arena;
    }

    /// An entry of this buffer as a merge's row.
    fn head<'a>(&'a self, e: &Entry) -> Head<'a> {
        Head {
            prefix: e.prefix,
            rowid: e.rowid,
            record: entry_record(e, &self.arena),
        }
    }

    /// The first failure to write or read a run.
    pub fn failed(&self) -> Option<&SpillError> {
        self.failed.as_ref()
    }

    /// What this buffer's sort did.
    pub fn stats(&self) -> SortStats {
        self.stats
    }
}

/// The record of an entry of `arena`.
fn entry_record<'a>(e: &Entry, arena: &'a [u8]) -> &'a [u8] {
    let at = e.at as usize;
    let len = u32::from_le_bytes(arena[at..at + 4].try_into().expect("4 bytes")) as usize;
    &arena[at + 4..at + 4 + len]
}

/// Writes a run of `rows` rows with `write` to a new file in `dir`; returns it and its size.
fn write_run(
    dir: &Path,
    rows: u64,
    write: impl FnOnce(&mut RunWriter<'_>) -> io::Result<()>,
) -> io::Result<(SpillFile, u64)> {
    let file = tempfile::tempfile_in(dir)?;
    let marks = {
        let mut out = RunWriter {
            out: BufWriter::with_capacity(READ_BUFFER, &file),
            offset: 0,
            rows: 0,
            marks: Vec::new(),
        };
        write(&mut out)?;
        out.out.flush()?;
        debug_assert_eq!(out.rows, rows);
        out.marks
    };
    let bytes = file.metadata()?.len();
    Ok((
        SpillFile {
            file: Arc::new(file),
            rows,
            marks: Arc::new(marks),
        },
        bytes,
    ))
}

/// A row at the head of a run.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    /// Its first key's prefix.
    prefix: u128,
    /// Its rowid.
    rowid: i64,
    /// Its record: the `ORDER BY` values, then the output values.
    pub record: &'a [u8],
}

/// One run being merged.
enum Cursor {
    /// A run in memory: a finished buffer, the first entry of its rows here, the next and
    /// the end.
    Memory {
        buffer: Arc<SortBuffer>,
        from: usize,
        next: usize,
        end: usize,
    },
    /// A run in a file, and its current row (prefix, rowid, record).
    File {
        source: SpillFile,
        reader: BufReader<RunReader>,
        left: u64,
        prefix: u128,
        rowid: i64,
        record: Vec<u8>,
    },
}

/// A spilled run read from a byte offset with positional reads: the cursors of a cut merge
/// read one file side by side, and a handle's own offset would be shared by them all (a
/// duplicated descriptor shares it).
struct RunReader {
    file: Arc<File>,
    at: u64,
}

impl RunReader {
    fn new(s: &SpillFile, at: u64, buffer: usize) -> BufReader<RunReader> {
        BufReader::with_capacity(
            buffer,
            RunReader {
                file: Arc::clone(&s.file),
                at,
            },
        )
    }
}

impl Read for RunReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Reads a spilled row: its prefix and rowid, its record into `record`.
fn read_row(reader: &mut impl Read, record: &mut Vec<u8>) -> io::Result<(u128, i64)> {
    let mut head = [0u8; ROW_HEAD];
    reader.read_exact(&mut head)?;
    let prefix = u128::from_le_bytes(head[..16].try_into().expect("16 bytes"));
    let rowid = i64::from_le_bytes(head[16..24].try_into().expect("8 bytes"));
    let len = u32::from_le_bytes(head[24..].try_into().expect("4 bytes"));
    record.resize(len as usize, 0);
    reader.read_exact(record)?;
    Ok((prefix, rowid))
}

impl Cursor {
    fn open(s: SpillFile) -> io::Result<Cursor> {
        let rows = s.rows;
        Cursor::open_at(s, 0, rows)
    }

    /// A cursor over `rows` rows of the run `s` from byte `offset`, with a handle of its own
    /// (each cursor has one reader).
    fn open_at(s: SpillFile, offset: u64, rows: u64) -> io::Result<Cursor> {
        let reader = RunReader::new(&s, offset, READ_BUFFER);
        let mut c = Cursor::File {
            source: s,
            reader,
            left: rows,
            prefix: 0,
            rowid: 0,
            record: Vec::new(),
        };
        c.read_next()?;
        Ok(c)
    }

    /// Reads a file run's next row (its count says when it ends).
    fn read_next(&mut self) -> io::Result<()> {
        if let Cursor::File {
            reader,
            left,
            prefix,
            rowid,
            record,
            ..
        } = self
        {
            if *left == 0 {
                return Ok(());
            }
            (*prefix, *rowid) = read_row(reader, record)?;
        }
        Ok(())
    }

    fn head(&self) -> Option<Head<'_>> {
        match self {
            Cursor::Memory {
                buffer, next, end, ..
            } => (next < end).then(|| buffer.head(&buffer.entries[*next])),
            Cursor::File {
                left,
                prefix,
                rowid,
                record,
                ..
            } => (*left > 0).then_some(Head {
                prefix: *prefix,
                rowid: *rowid,
                record,
            }),
        }
    }

    fn advance(&mut self) -> io::Result<()> {
        match self {
            Cursor::Memory { next, .. } => {
                *next += 1;
                Ok(())
            }
            Cursor::File { left, .. } => {
                *left -= 1;
                self.read_next()
            }
        }
    }

    /// The rows left.
    fn rows(&self) -> u64 {
        match self {
            Cursor::Memory { next, end, .. } => (end - next) as u64,
            Cursor::File { left, .. } => *left,
        }
    }
}

/// How two rows of a merge compare: by their keys, then their runs' file ranks, then in
/// scan order (a total order: no two rows of one file share a rowid).
fn compare_heads(
    order: &[SortKey],
    backward: bool,
    (x, x_rank): (Head<'_>, usize),
    (y, y_rank): (Head<'_>, usize),
) -> Ordering {
    x.prefix
        .cmp(&y.prefix)
        .then_with(|| compare_records(order, x.record, y.record))
        .then_with(|| x_rank.cmp(&y_rank))
        .then_with(|| scan_order(backward, x.rowid, y.rowid))
}

/// A row of a run kept by [`SortedMerge::split`]: where the parts begin.
#[derive(Clone)]
struct Sample {
    prefix: u128,
    rowid: i64,
    rank: usize,
    record: Vec<u8>,
}

impl Sample {
    fn of(h: Head<'_>, rank: usize) -> Sample {
        Sample {
            prefix: h.prefix,
            rowid: h.rowid,
            rank,
            record: h.record.to_vec(),
        }
    }

    fn head(&self) -> (Head<'_>, usize) {
        (
            Head {
                prefix: self.prefix,
                rowid: self.rowid,
                record: &self.record,
            },
            self.rank,
        )
    }
}

/// One run's rows within a part of a split merge.
enum Piece {
    /// Entries `from..to` of a finished buffer.
    Memory(Arc<SortBuffer>, usize, usize),
    /// `rows` rows of a spilled run from byte `offset`.
    File(SpillFile, u64, u64),
}

/// A part of a merge cut by [`SortedMerge::split`]: every run's rows within one range of the
/// result's order. [`MergePart::open`] makes its merge (its files' readers only then).
pub struct MergePart<'p> {
    order: &'p [SortKey],
    backward: bool,
    pieces: Vec<(usize, Piece)>,
    dir: PathBuf,
}

impl<'p> MergePart<'p> {
    /// The merge of this part's rows, in the result's order.
    pub fn open(&self) -> Result<SortedMerge<'p>, SpillError> {
        let mut cursors = Vec::new();
        let mut ranks = Vec::new();
        for (rank, piece) in &self.pieces {
            let c = match piece {
                Piece::Memory(buffer, from, to) => Cursor::Memory {
                    buffer: Arc::clone(buffer),
                    from: *from,
                    next: *from,
                    end: *to,
                },
                Piece::File(s, offset, rows) => Cursor::open_at(s.clone(), *offset, *rows)
                    .map_err(|e| SpillError {
                        dir: self.dir.clone(),
                        what: format!("reading a sorted run: {e}"),
                    })?,
            };
            cursors.push(c);
            ranks.push(*rank);
        }
        Ok(SortedMerge::start(
            self.order,
            self.backward,
            cursors,
            ranks,
            self.dir.clone(),
            SortStats::default(),
        ))
    }

    /// Its rows.
    pub fn rows(&self) -> u64 {
        self.pieces
            .iter()
            .map(|(_, p)| match p {
                Piece::Memory(_, from, to) => (to - from) as u64,
                Piece::File(_, _, rows) => *rows,
            })
            .sum()
    }
}

/// The k-way merge of sorted runs into the result's order: by the keys, then by the rank of
/// the run's file (several files are one table, file by file), then in scan order.
pub struct SortedMerge<'p> {
    order: &'p [SortKey],
    backward: bool,
    cursors: Vec<Cursor>,
    /// Each cursor's file rank.
    ranks: Vec<usize>,
    /// A binary heap of the cursors with rows, the least first.
    heap: Vec<usize>,
    /// The cursor whose head was handed out last (advanced at the next call).
    pending: Option<usize>,
    /// The scratch directory (for errors).
    dir: PathBuf,
    stats: SortStats,
}

impl<'p> SortedMerge<'p> {
    /// A merge of the finished buffers `runs`, each with the rank of its file, for a query
    /// ordered by `order` (`backward`: the scan's order is descending rowids). A buffer that
    /// failed to spill is the merge's error.
    pub fn new(
        order: &'p [SortKey],
        backward: bool,
        runs: Vec<(usize, SortBuffer)>,
    ) -> Result<Self, SpillError> {
        let mut cursors = Vec::new();
        let mut ranks = Vec::new();
        let mut stats = SortStats::default();
        let mut dir = std::env::temp_dir();
        for (rank, mut buffer) in runs {
            if let Some(e) = buffer.failed.take() {
                return Err(e);
            }
            stats.add(&buffer.stats);
            dir.clone_from(&buffer.space.dir);
            for s in std::mem::take(&mut buffer.spills) {
                let c = Cursor::open(s).map_err(|e| SpillError {
                    dir: buffer.space.dir.clone(),
                    what: format!("reading a sorted run: {e}"),
                })?;
                cursors.push(c);
                ranks.push(rank);
            }
            debug_assert!(buffer.sorted || buffer.entries.is_empty());
            let buffer = Arc::new(buffer);
            for (from, end) in buffer.segments() {
                cursors.push(Cursor::Memory {
                    buffer: Arc::clone(&buffer),
                    from,
                    next: from,
                    end,
                });
                ranks.push(rank);
            }
        }
        Ok(Self::start(order, backward, cursors, ranks, dir, stats))
    }

    fn of_files(order: &'p [SortKey], backward: bool, files: Vec<SpillFile>) -> io::Result<Self> {
        let ranks = vec![0; files.len()];
        let cursors = files
            .into_iter()
            .map(Cursor::open)
            .collect::<io::Result<_>>()?;
        Ok(Self::start(
            order,
            backward,
            cursors,
            ranks,
            PathBuf::new(),
            SortStats::default(),
        ))
    }

    fn start(
        order: &'p [SortKey],
        backward: bool,
        cursors: Vec<Cursor>,
        ranks: Vec<usize>,
        dir: PathBuf,
        stats: SortStats,
    ) -> Self {
        let mut m = SortedMerge {
            order,
            backward,
            heap: (0..cursors.len())
                .filter(|&i| cursors[i].head().is_some())
                .collect(),
            cursors,
            ranks,
            pending: None,
            dir,
            stats,
        };
        let mut heap = std::mem::take(&mut m.heap);
        run_heap::heapify(&mut heap, |a, b| m.less(a, b));
        m.heap = heap;
        m
    }

    /// What the sorts did (the executors' figures).
    pub fn stats(&self) -> SortStats {
        self.stats
    }

    fn less(&self, a: usize, b: usize) -> bool {
        let (x, y) = (
            self.cursors[a].head().expect("heap cursors have rows"),
            self.cursors[b].head().expect("heap cursors have rows"),
        );
        compare_heads(
            self.order,
            self.backward,
            (x, self.ranks[a]),
            (y, self.ranks[b]),
        ) == Ordering::Less
    }

    /// Cuts a merge not yet started into at most `parts` merges of consecutive ranges of the
    /// result's order, each of at least about `min_rows` rows, which can run side by side:
    /// the rows of part 0, then of part 1 and so on are the whole merge's, in its order.
    /// The cuts come from a row every [`MARK_ROWS`] of each run (a spilled run's marks), sorted;
    /// each run is then cut where its rows pass each cut (a binary search in memory; in a
    /// file, a read from the mark before it). `None` when the merge is too small to cut (or
    /// already started).
    pub fn split(
        &self,
        parts: usize,
        min_rows: u64,
    ) -> Result<Option<Vec<MergePart<'p>>>, SpillError> {
        let total: u64 = self.cursors.iter().map(Cursor::rows).sum();
        let fresh = self.pending.is_none()
            && self.cursors.iter().all(|c| match c {
                Cursor::Memory { from, next, .. } => next == from,
                Cursor::File { source, left, .. } => *left == source.rows,
            });
        let parts = parts.min(usize::try_from(total / min_rows.max(1)).unwrap_or(usize::MAX));
        if !fresh || parts < 2 {
            return Ok(None);
        }
        let failed = |e: io::Error| SpillError {
            dir: self.dir.clone(),
            what: format!("reading a sorted run: {e}"),
        };
        // Each file run's marked rows, and the rows every run contributes to the cuts.
        let mut marked: Vec<Vec<Sample>> = Vec::with_capacity(self.cursors.len());
        let mut samples = Vec::new();
        for (c, &rank) in self.cursors.iter().zip(&self.ranks) {
            let mut rows = Vec::new();
            match c {
                Cursor::Memory {
                    buffer, from, end, ..
                } => {
                    for e in buffer.entries[*from..*end]
                        .iter()
                        .step_by(MARK_ROWS as usize)
                    {
                        samples.push(Sample::of(buffer.head(e), rank));
                    }
                }
                Cursor::File { source, .. } => {
                    let mut record = Vec::new();
                    for &(_, offset) in source.marks.iter() {
                        let mut file = RunReader::new(source, offset, 4096);
                        let (prefix, rowid) = read_row(&mut file, &mut record).map_err(failed)?;
                        rows.push(Sample {
                            prefix,
                            rowid,
                            rank,
                            record: record.clone(),
                        });
                    }
                    samples.extend(rows.iter().cloned());
                }
            }
            marked.push(rows);
        }
        let cmp = |a: (Head<'_>, usize), b: (Head<'_>, usize)| {
            compare_heads(self.order, self.backward, a, b)
        };
        samples.sort_by(|a, b| cmp(a.head(), b.head()));
        let mut cuts: Vec<&Sample> = (1..parts)
            .map(|j| &samples[j * samples.len() / parts])
            .collect();
        cuts.dedup_by(|a, b| cmp(a.head(), b.head()) == Ordering::Equal);
        // Each run's bounds: where its rows reach each cut, as (row, byte offset in a file).
        let mut pieces: Vec<Vec<(usize, Piece)>> = (0..=cuts.len()).map(|_| Vec::new()).collect();
        for ((c, &rank), marks) in self.cursors.iter().zip(&self.ranks).zip(&marked) {
            match c {
                Cursor::Memory {
                    buffer, from, end, ..
                } => {
                    let entries = &buffer.entries[*from..*end];
                    let mut bounds = vec![*from];
                    for cut in &cuts {
                        bounds.push(
                            from + entries.partition_point(|e| {
                                cmp((buffer.head(e), rank), cut.head()) == Ordering::Less
                            }),
                        );
                    }
                    bounds.push(*end);
                    for (part, w) in bounds.windows(2).enumerate() {
                        if w[0] < w[1] {
                            pieces[part]
                                .push((rank, Piece::Memory(Arc::clone(buffer), w[0], w[1])));
                        }
                    }
                }
                Cursor::File { source, .. } => {
                    let mut bounds = vec![(0u64, 0u64)];
                    let mut record = Vec::new();
                    for cut in &cuts {
                        let before =
                            marks.partition_point(|m| cmp(m.head(), cut.head()) == Ordering::Less);
                        let Some(from) = before.checked_sub(1) else {
                            bounds.push((0, 0));
                            continue;
                        };
                        // From the last mark before the cut, the rows before it.
                        let (mut row, mut offset) = source.marks[from];
                        let mut reader = RunReader::new(source, offset, 64 * 1024);
                        while row < source.rows {
                            let (prefix, rowid) =
                                read_row(&mut reader, &mut record).map_err(failed)?;
                            let h = Head {
                                prefix,
                                rowid,
                                record: &record,
                            };
                            if cmp((h, rank), cut.head()) != Ordering::Less {
                                break;
                            }
                            row += 1;
                            offset += (ROW_HEAD + record.len()) as u64;
                        }
                        bounds.push((row, offset));
                    }
                    bounds.push((source.rows, 0));
                    for (part, w) in bounds.windows(2).enumerate() {
                        let ((from, offset), (to, _)) = (w[0], w[1]);
                        if from < to {
                            pieces[part]
                                .push((rank, Piece::File(source.clone(), offset, to - from)));
                        }
                    }
                }
            }
        }
        Ok(Some(
            pieces
                .into_iter()
                .map(|pieces| MergePart {
                    order: self.order,
                    backward: self.backward,
                    pieces,
                    dir: self.dir.clone(),
                })
                .collect(),
        ))
    }

    /// The next row in the result's order, or `None` after the last.
    fn next_head(&mut self) -> io::Result<Option<Head<'_>>> {
        if let Some(c) = self.pending.take() {
            self.cursors[c].advance()?;
            let exhausted = self.cursors[c].head().is_none();
            let mut heap = std::mem::take(&mut self.heap);
            run_heap::advance_top(&mut heap, exhausted, |a, b| self.less(a, b));
            self.heap = heap;
        }
        let Some(&top) = self.heap.first() else {
            return Ok(None);
        };
        self.pending = Some(top);
        Ok(self.cursors[top].head())
    }

    /// The next row's record ([`record_outputs`] reads its values), or `None` after the last.
    pub fn next_record(&mut self) -> Result<Option<&[u8]>, SpillError> {
        let dir = self.dir.clone();
        match self.next_head() {
            Ok(h) => Ok(h.map(|h| h.record)),
            Err(e) => Err(SpillError {
                dir,
                what: format!("reading a sorted run: {e}"),
            }),
        }
    }
}

/// How two rows of keys `a` and `b` compare through their prefixes and records, as a sort
/// compares them (for the tests of the prefix's consistency).
#[cfg(test)]
fn compare_full(order: &[SortKey], a: &[ValueRef<'_>], b: &[ValueRef<'_>]) -> Ordering {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    a.iter().for_each(|&v| put(&mut x, v));
    b.iter().for_each(|&v| put(&mut y, v));
    let p = |v: &[ValueRef<'_>]| prefix(&order[0], v[0]);
    compare_rows(order, false, (p(a), 0, &x), (p(b), 0, &y))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::ir::Expr;

    fn key(descending: bool, nulls_first: bool, collation: Collation) -> SortKey {
        SortKey {
            expr: Expr::Column(0),
            descending,
            nulls_first,
            collation,
        }
    }

    fn values() -> Vec<Value> {
        let mut v = vec![
            Value::Null,
            Value::Integer(i64::MIN),
            Value::Integer(i64::MAX),
            Value::Integer(9_007_199_254_740_993),
            Value::Real(9_007_199_254_740_992.0),
            Value::Integer(-1),
            Value::Integer(0),
            Value::Real(-0.0),
            Value::Real(0.5),
            Value::Real(-1e300),
            Value::Real(1e300),
            Value::Real(f64::INFINITY),
            Value::Real(f64::NEG_INFINITY),
            Value::Integer(1),
            Value::Real(1.0),
        ];
        for t in [
            "", "a", "A", "a ", "ab", "abcdefg", "abcdefgh", "ABCDEFGZ", "a\0b", "a\0", "Z", "é",
        ] {
            v.push(Value::Text(t.as_bytes().to_vec()));
        }
        for b in [&b""[..], b"\0", b"\0\0\0\0\0\0\0\0", b"abc", b"\xff"] {
            v.push(Value::Blob(b.to_vec()));
        }
        v
    }

    #[test]
    fn a_prefix_never_contradicts_the_full_order() {
        let vs = values();
        for descending in [false, true] {
            for nulls_first in [false, true] {
                for collation in [Collation::Binary, Collation::NoCase, Collation::RTrim] {
                    let k = key(descending, nulls_first, collation);
                    for a in &vs {
                        for b in &vs {
                            let full = compare_key_ref(&k, a.as_ref(), b.as_ref());
                            let (pa, pb) = (prefix(&k, a.as_ref()), prefix(&k, b.as_ref()));
                            if pa != pb {
                                assert_eq!(pa.cmp(&pb), full, "{a:?} {b:?} under {k:?}");
                            }
                            let order = std::slice::from_ref(&k);
                            assert_eq!(
                                compare_full(order, &[a.as_ref()], &[b.as_ref()]),
                                full,
                                "{a:?} {b:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn records_keep_their_values() {
        let vs = values();
        let mut rec = Vec::new();
        for v in &vs {
            put(&mut rec, v.as_ref());
        }
        let back = record_values(&rec, 3);
        assert_eq!(back, vs[3..]);
    }

    /// Rows spilled by a tiny budget come back from the merge in the same order as sorted
    /// in memory, ties in rowid order.
    #[test]
    fn spilled_runs_merge_into_the_in_memory_order() {
        let k = key(false, true, Collation::NoCase);
        let order = std::slice::from_ref(&k);
        let texts = ["b", "A", "a", "B", "c", "", "aa"];
        let rows: Vec<(i64, Value)> = (0..40_000)
            .map(|i| {
                let t = texts[(i * 7 + i / 3) as usize % texts.len()];
                (i, Value::Text(t.repeat((i % 5) as usize + 1).into_bytes()))
            })
            .collect();
        // The rows in the merge's order, the sort's figures, the files handed over, and the
        // segments before the last and the runs in memory.
        type Sorted = (Vec<(i64, Value)>, SortStats, usize, (usize, usize));
        let run = |space: SortSpace| -> Sorted {
            let mut b = SortBuffer::new(space);
            for (rowid, v) in &rows {
                b.push(
                    order,
                    false,
                    &[v.as_ref()],
                    *rowid,
                    &[ValueRef::Integer(*rowid), v.as_ref()],
                );
            }
            let segments = b.ends.len();
            b.finish(order, false);
            let files = b.spills.len();
            let mut m = SortedMerge::new(order, false, vec![(0, b)]).unwrap();
            let runs = m.cursors.len() - files;
            let mut out = Vec::new();
            while let Some(r) = m.next_record().unwrap() {
                let vals = record_values(r, 1);
                let Value::Integer(id) = vals[0] else {
                    panic!()
                };
                out.push((id, vals[1].clone()));
            }
            (out, m.stats(), files, (segments, runs))
        };
        let dir = tempfile::tempdir().unwrap();
        let (memory, stats, _, (segments, runs)) = run(SortSpace::unbounded());
        assert_eq!(stats.spilled_runs, 0);
        // Sorted in segments, handed over as runs.
        assert!(segments > 10, "{segments} segments");
        assert_eq!(runs, segments + 1);
        let (spilled, stats, files, _) = run(SortSpace::new(0, 1, dir.path().to_path_buf()));
        assert!(stats.spilled_runs > MAX_RUNS as u64, "{stats:?}");
        assert!(files <= MAX_RUNS, "{files} files handed over");
        assert_eq!(memory.len(), rows.len());
        assert_eq!(spilled, memory);
        // As one of 128 executors, the buffer hands over at most 2 files (256 in all).
        let (spilled, _, files, _) = run(SortSpace::new(0, 128, dir.path().to_path_buf()));
        assert!(files <= 2, "{files} files handed over");
        assert_eq!(spilled, memory);
        let mut expected = rows.clone();
        expected
            .sort_by(|a, b| compare_key_ref(&k, a.1.as_ref(), b.1.as_ref()).then(a.0.cmp(&b.0)));
        assert_eq!(memory, expected);
        // The runs were never named in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// A merge cut into parts gives, part after part, the rows the whole merge gives: runs in
    /// memory and spilled, runs of two files whose rowids repeat, keys that tie under
    /// `NOCASE`, and cuts that fall among equal keys.
    #[test]
    fn a_split_merge_is_the_whole_merge_part_after_part() {
        let k = key(true, false, Collation::NoCase);
        let order = std::slice::from_ref(&k);
        let texts = ["b", "A", "a", "B", "c", "", "aa", "x"];
        let dir = tempfile::tempdir().unwrap();
        let buffer = |space: SortSpace, seed: i64| {
            let mut b = SortBuffer::new(space);
            for i in 0..3_000i64 {
                let t = texts[((i * 7 + seed) % 8) as usize].repeat((i % 3) as usize + 1);
                let v = Value::Text(t.into_bytes());
                // Rowids unique within a file (rank), repeated across the two.
                let rowid = i * 10 + 1 + seed % 2;
                b.push(
                    order,
                    false,
                    &[v.as_ref()],
                    rowid,
                    &[ValueRef::Integer(i * 10 + seed)],
                );
            }
            b.finish(order, false);
            b
        };
        let runs = || {
            vec![
                (0, buffer(SortSpace::unbounded(), 1)),
                (0, buffer(SortSpace::new(0, 1, dir.path().to_path_buf()), 2)),
                (1, buffer(SortSpace::new(0, 1, dir.path().to_path_buf()), 3)),
                (1, buffer(SortSpace::unbounded(), 4)),
            ]
        };
        let ids = |m: &mut SortedMerge<'_>| {
            let mut out = Vec::new();
            while let Some(r) = m.next_record().unwrap() {
                out.push(record_values(r, 1)[0].clone());
            }
            out
        };
        let whole = ids(&mut SortedMerge::new(order, false, runs()).unwrap());
        assert_eq!(whole.len(), 12_000);
        for parts in [2, 3, 7, 64] {
            let merge = SortedMerge::new(order, false, runs()).unwrap();
            let cut = merge
                .split(parts, 100)
                .unwrap()
                .expect("large enough to cut");
            assert!(cut.len() > 1 && cut.len() <= parts, "{} parts", cut.len());
            assert_eq!(cut.iter().map(MergePart::rows).sum::<u64>(), 12_000);
            // All open at once, as threads read them side by side: one file's cursors must
            // not share an offset.
            let mut merges: Vec<SortedMerge<'_>> = cut.iter().map(|p| p.open().unwrap()).collect();
            let mut joined = Vec::new();
            for m in &mut merges {
                joined.extend(ids(m));
            }
            let differ = joined.iter().zip(&whole).position(|(a, b)| a != b);
            assert_eq!((joined.len(), differ), (whole.len(), None), "{parts} parts");
        }
        // Too small to cut, or already started: not cut.
        let merge = SortedMerge::new(order, false, runs()).unwrap();
        assert!(merge.split(4, 100_000).unwrap().is_none());
        let mut merge = SortedMerge::new(order, false, runs()).unwrap();
        merge.next_record().unwrap();
        assert!(merge.split(4, 100).unwrap().is_none());
    }
}
