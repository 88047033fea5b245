//! Index b-trees: their entries read in key order, from either end.
//!
//! An index b-tree holds one entry per row (per row its `WHERE` admits, for a partial index):
//! a record of the key columns followed by the row's rowid. Interior pages (type `0x02`) hold
//! entries too, between their children: in key order, child `i` comes before cell `i`'s entry,
//! and the right child after the last. A cell is the 4-byte child pointer (interior pages
//! only), the payload size (varint), the first [`index_local_payload`] bytes of the record and,
//! when it spills, the first overflow page.
//!
//! [`index_rowids`] walks an index from its first entry forwards or from its last backwards
//! and returns the rowids of the first `n` entries met: the rows SQLite's loop over the index
//! gives first. [`index_range_rowids`] walks only the subtrees that can hold entries whose
//! first field lies in one of a list of ranges (an `IN` list's values), and returns their rowids. [`index_distinct_firsts`] and
//! [`index_distinct_count`] seek from each distinct first field to the next, as SQLite's
//! skip-ahead `DISTINCT` does. Every page is checked as table pages are (an index page, its cell pointers
//! inside the usable part, children usable and met once, every leaf at the same depth, each
//! cell and its overflow chain within bounds, each record's header and field count, an
//! integer rowid last): a damaged index is a [`crate::Error`] naming the file and the page.

use crate::btree::{btree_header_offset, PageSet};
use crate::cell::{follow_overflow_chain, TableLeafCell};
use crate::error::Result;
use crate::format::{
    be_u32, local_payload, read_be_int, read_varint, serial_type_size, BtreePageHeader,
    PAGE_INTERIOR_INDEX, PAGE_LEAF_INDEX,
};
use crate::pager::PageFile;

/// How many bytes of an index cell's `payload_len`-byte record stay on its page, on pages of
/// `usable` bytes (btree.c's `btreeParseCellAdjustSizeForOverflow` with the index page's
/// `maxLocal`).
pub fn index_local_payload(usable: u32, payload_len: u64) -> u64 {
    local_payload(
        usable,
        payload_len,
        ((u64::from(usable) - 12) * 64 / 255) - 23,
    )
}

/// One page of the walk: its bytes, header, and how many of its items (children and entries,
/// in key order) have been taken.
struct Frame {
    page: u32,
    buf: Vec<u8>,
    header: BtreePageHeader,
    depth: u32,
    taken: usize,
}

impl Frame {
    /// Items in key order: a leaf's entries; an interior page's children and entries
    /// interleaved (child 0, entry 0, child 1, ..., entry k-1, right child).
    fn items(&self) -> usize {
        let cells = usize::from(self.header.cell_count);
        if self.header.page_type == PAGE_LEAF_INDEX {
            cells
        } else {
            2 * cells + 1
        }
    }
}

/// What the next item of a page is.
enum Item {
    Child(u32),
    Entry(usize),
}

/// The rowids of the first `n` entries of the index b-tree rooted at `root`, in key order, or
/// from the last entry down when `backward`; fewer when the index has fewer. `fields` is the
/// number of fields of each entry (the index's columns and the rowid). See the module docs
/// for what is checked.
///
/// A walk of more than [`PARALLEL_WALK`] entries shares the index's subtrees among up to
/// `std::thread::available_parallelism` threads: the upper levels are read first, level by
/// level, until they name enough subtrees ([`Work`]); each thread walks a run of them (with
/// the entries of the upper pages between them) in order, and the runs are joined in key
/// order, every leaf checked to lie at one depth, and no page met twice.
///
/// With `skip`, the first `skip` entries met are passed over first (an `OFFSET` SQLite's loop
/// steps through without reading the rows): a leaf passed over whole is counted from its
/// cell count, its cell pointers checked, its records not read; the walk is then one thread's.
pub fn index_rowids(
    file: &PageFile,
    root: u32,
    fields: usize,
    backward: bool,
    skip: u64,
    n: usize,
) -> Result<Vec<i64>> {
    if skip > 0 {
        let (frame, mut seen) = walk_start(file, root)?;
        let keep = Keep::Rowids {
            fields,
            skip_nulls: false,
        };
        return walk_from(
            file,
            &mut vec![frame],
            keep,
            (backward, skip),
            n,
            &mut seen,
            None,
        )
        .map(|w| w.rowids);
    }
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    if n > PARALLEL_WALK && threads > 1 {
        let keep = Keep::Rowids {
            fields,
            skip_nulls: false,
        };
        return parallel_walk(file, root, keep, backward, n, threads).map(|w| w.rowids);
    }
    index_walk(file, root, fields, backward, n, false)
}

/// The size of walk from which [`index_rowids`] walks an index's subtrees on several threads.
pub const PARALLEL_WALK: usize = 100_000;

/// An item of the upper levels of an index, in the walk's order: an entry's rowid, or a
/// subtree to walk (its page and depth).
enum Work {
    Rowid(i64),
    Subtree(u32, u32),
}

/// What one thread of [`parallel_walk`] met, and the pages it read.
type Run = (Walked, PageSet);

/// [`index_rowids`]' walk on `threads` threads, keeping `keep` of the entries.
fn parallel_walk(
    file: &PageFile,
    root: u32,
    keep: Keep,
    backward: bool,
    n: usize,
    threads: usize,
) -> Result<Walked> {
    let db = file.header();
    let (frame, mut seen) = walk_start(file, root)?;
    let (mut record, mut scratch) = (Vec::new(), Vec::new());
    let mut leaf_depth: Option<u32> = None;
    let mut work = vec![Work::Subtree(root, 1)];
    let mut root_frame = Some(frame);
    let subtrees = |work: &[Work]| {
        work.iter()
            .filter(|w| matches!(w, Work::Subtree(..)))
            .count()
    };
    // Expand level by level until there are four subtrees a thread (or only leaves).
    while subtrees(&work) > 0 && subtrees(&work) < 4 * threads.max(2) {
        let mut next = Vec::with_capacity(work.len() * 8);
        for w in work {
            let (page, depth) = match w {
                Work::Rowid(r) => {
                    next.push(Work::Rowid(r));
                    continue;
                }
                Work::Subtree(page, depth) => (page, depth),
            };
            let frame = match root_frame.take() {
                Some(f) => f,
                None => read_frame(file, page, depth)?,
            };
            let items = frame.items();
            let leaf = frame.header.page_type == PAGE_LEAF_INDEX;
            if leaf && *leaf_depth.get_or_insert(depth) != depth {
                return Err(file.corrupt(page, "index leaves at different depths"));
            }
            for taken in 0..items {
                let at = if backward { items - 1 - taken } else { taken };
                if leaf || at % 2 == 1 {
                    let i = if leaf { at } else { at / 2 };
                    match keep {
                        Keep::Count => {
                            cell_offset(file, &frame, i)?;
                            next.push(Work::Rowid(0));
                        }
                        Keep::Rowids { fields, skip_nulls } => {
                            let (key, rowid) = entry(
                                file,
                                &frame,
                                i,
                                fields,
                                &mut seen,
                                &mut record,
                                &mut scratch,
                            )?;
                            if !(skip_nulls && key == KeyField::Null) {
                                next.push(Work::Rowid(rowid));
                            }
                        }
                    }
                    continue;
                }
                let child = child_of(file, &frame, at / 2)?;
                if !seen.insert(child) {
                    return Err(file.corrupt(
                        page,
                        format!(
                            "index cell {} child pointer: page {child} is already in the b-tree",
                            at / 2
                        ),
                    ));
                }
                if depth >= 64 {
                    return Err(file.corrupt(page, "index b-tree deeper than 64 levels"));
                }
                next.push(Work::Subtree(child, depth + 1));
            }
        }
        work = next;
    }
    // Runs of about equal numbers of subtrees, each with the entries after its subtrees.
    let total = subtrees(&work).max(1);
    let mut runs: Vec<&[Work]> = Vec::with_capacity(threads);
    let (mut start, mut met) = (0, 0);
    for (i, w) in work.iter().enumerate() {
        if let Work::Subtree(..) = w {
            if met * threads >= total * (runs.len() + 1) && i > start {
                runs.push(&work[start..i]);
                start = i;
            }
            met += 1;
        }
    }
    runs.push(&work[start..]);
    let walk_run = |run: &[Work]| -> Result<Run> {
        let mut seen = PageSet::new(db.page_count);
        let mut walked = Walked {
            rowids: Vec::new(),
            met: 0,
            leaf_depth: None,
        };
        for w in run {
            if walked.met >= n as u64 {
                break;
            }
            match *w {
                Work::Rowid(r) => {
                    if let Keep::Rowids { .. } = keep {
                        walked.rowids.push(r);
                    }
                    walked.met += 1;
                }
                Work::Subtree(page, d) => {
                    let frame = read_frame(file, page, d)?;
                    let left = n - walked.met as usize;
                    let part = walk_from(
                        file,
                        &mut vec![frame],
                        keep,
                        (backward, 0),
                        left,
                        &mut seen,
                        None,
                    )?;
                    if let (Some(a), Some(b)) = (walked.leaf_depth, part.leaf_depth) {
                        if a != b {
                            return Err(file.corrupt(page, "index leaves at different depths"));
                        }
                    }
                    walked.leaf_depth = walked.leaf_depth.or(part.leaf_depth);
                    walked.rowids.extend(part.rowids);
                    walked.met += part.met;
                }
            }
        }
        Ok((walked, seen))
    };
    let results: Vec<Result<Run>> = if runs.len() == 1 {
        vec![walk_run(runs[0])]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = runs
                .iter()
                .map(|&run| s.spawn(move || walk_run(run)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("an index walk thread does not panic"))
                .collect()
        })
    };
    let mut all = Walked {
        rowids: Vec::new(),
        met: 0,
        leaf_depth,
    };
    for result in results {
        let (part, pages) = result?;
        if let (Some(a), Some(b)) = (all.leaf_depth, part.leaf_depth) {
            if a != b {
                return Err(file.corrupt(root, format!("index leaves at depths {a} and {b}")));
            }
        }
        all.leaf_depth = all.leaf_depth.or(part.leaf_depth);
        if let Some(page) = seen.add_disjoint(&pages) {
            return Err(file.corrupt(
                root,
                format!("page {page} is reached twice in the index b-tree"),
            ));
        }
        if all.rowids.is_empty() {
            all.rowids = part.rowids;
        } else {
            all.rowids.extend(part.rowids);
        }
        all.met += part.met;
        if all.met >= n as u64 {
            all.met = n as u64;
            all.rowids.truncate(n);
            break;
        }
    }
    Ok(all)
}

/// The child page before entry `i` of an interior `frame` (its right child for `i` equal to
/// the cell count), checked to be a usable page.
fn child_of(file: &PageFile, frame: &Frame, i: usize) -> Result<u32> {
    let child = if i == usize::from(frame.header.cell_count) {
        frame.header.right_child.unwrap_or(0)
    } else {
        let cell = cell_offset(file, frame, i)?;
        be_u32(&frame.buf, cell).ok_or_else(|| {
            file.corrupt(frame.page, format!("cell {i} runs past the usable page"))
        })?
    };
    if let Some(reason) = file.header().unusable_page_reason(child) {
        return Err(file.corrupt(
            frame.page,
            format!("index cell {i} child pointer: {reason}"),
        ));
    }
    Ok(child)
}

/// The root page of a walk from index root `root`, read and checked, and the set of the
/// pages it has met (the root).
fn walk_start(file: &PageFile, root: u32) -> Result<(Frame, PageSet)> {
    let frame = read_root(file, root)?;
    let mut seen = PageSet::new(file.header().page_count);
    seen.insert(root);
    Ok((frame, seen))
}

/// The root page `root` of an index, read and checked.
fn read_root(file: &PageFile, root: u32) -> Result<Frame> {
    file.check_page_number(root)?;
    if let Some(reason) = file.header().unusable_page_reason(root) {
        return Err(file.corrupt(root, format!("invalid index root page: {reason}")));
    }
    read_frame(file, root, 1)
}

/// The rowid of the first entry of the index b-tree rooted at `root` whose first field is
/// not NULL, in key order or from the last entry down when `backward` (where SQLite's
/// `min()` lands: `SeekGT` past the NULLs); `None` when there is none. Checked as
/// [`index_rowids`] checks; the NULL entries before it are walked.
pub fn index_first_not_null(
    file: &PageFile,
    root: u32,
    fields: usize,
    backward: bool,
) -> Result<Option<i64>> {
    Ok(index_walk(file, root, fields, backward, 1, true)?.pop())
}

/// The rowids of the entries of the first `runs` runs of the index b-tree rooted at `root`,
/// in key order or from the last entry down when `backward`, and how many runs they are
/// (fewer than `runs` when the index ends first): a run is a stretch of entries whose first
/// fields `same` finds equal to the run's first. `None` when they are more than `max`
/// entries. The walk stops at the first entry of the next run (where SQLite's loop
/// over an index that delivers a `GROUP BY` ends the group its `LIMIT` completes). Checked
/// as [`index_rowids`] checks.
pub fn index_first_runs(
    file: &PageFile,
    root: u32,
    fields: usize,
    backward: bool,
    (runs, max): (u64, usize),
    same: &dyn Fn(KeyField<'_>, KeyField<'_>) -> bool,
) -> Result<Option<(Vec<i64>, u64)>> {
    let (frame, mut seen) = walk_start(file, root)?;
    let keep = Keep::Rowids {
        fields,
        skip_nulls: false,
    };
    let mut last: Option<OwnedField> = None;
    let mut met = 0u64;
    let mut until = |key: KeyField<'_>| {
        if last.as_ref().is_some_and(|l| same(l.borrowed(), key)) {
            return Step::Keep;
        }
        met += 1;
        last = Some(OwnedField::of(key));
        if met > runs {
            Step::Stop
        } else {
            Step::Keep
        }
    };
    let n = max.saturating_add(1);
    let walked = walk_from(
        file,
        &mut vec![frame],
        keep,
        (backward, 0),
        n,
        &mut seen,
        Some(&mut until),
    )?;
    Ok((walked.rowids.len() <= max).then(|| (walked.rowids, met.min(runs))))
}

/// The rowids of the first entries of the first `keys` distinct first fields of the index
/// b-tree rooted at `root`, in key order or from the last entry down when `backward`: the
/// rows an ordered `SELECT DISTINCT` of the index's first column shows. `order` compares two
/// first fields in the index's key order (a `DESC` column's largest first) under its
/// collation; fields it finds equal are one value. `None` when there are more than `max`.
/// See [`distinct_walk`] for how the values are found.
pub fn index_distinct_firsts(
    file: &PageFile,
    root: u32,
    fields: usize,
    backward: bool,
    (keys, max): (u64, usize),
    order: &dyn Fn(KeyField<'_>, KeyField<'_>) -> std::cmp::Ordering,
) -> Result<Option<Vec<i64>>> {
    let mut rowids = Vec::new();
    let mut over = false;
    distinct_walk(file, root, fields, backward, order, &mut |_, rowid| {
        if rowids.len() == max {
            over = true;
            return false;
        }
        rowids.push(rowid);
        (rowids.len() as u64) < keys
    })?;
    Ok((!over).then_some(rowids))
}

/// The number of distinct first fields of the index b-tree rooted at `root` other than NULL,
/// under `order` (as for [`index_distinct_firsts`]): `count(DISTINCT x)` of the index's first
/// column, no table page read. See [`distinct_walk`].
pub fn index_distinct_count(
    file: &PageFile,
    root: u32,
    fields: usize,
    order: &dyn Fn(KeyField<'_>, KeyField<'_>) -> std::cmp::Ordering,
) -> Result<u64> {
    let mut n = 0u64;
    distinct_walk(file, root, fields, false, order, &mut |key, _| {
        n += u64::from(key != KeyField::Null);
        true
    })?;
    Ok(n)
}

/// Calls `each` with the first field and rowid of the first entry of each distinct first
/// field of the index b-tree rooted at `root` (under `order`, walking forwards or
/// `backward`), until it returns `false` or the index ends.
///
/// After each value the walk seeks the first entry past it, as SQLite's skip-ahead
/// `DISTINCT` does (`OP_SeekGT` on the value): within the current leaf when the leaf holds a
/// later entry (found by a galloping search from the walk's place: a few probes where values
/// are dense, a bisection where a value has many entries), otherwise down from the root,
/// each page's entries bisected; the entries of a value are not all read. The pages read
/// are checked as [`index_rowids`] checks them, and each value must come after the one
/// before it (a misordered index is an error naming the page).
fn distinct_walk(
    file: &PageFile,
    root: u32,
    fields: usize,
    backward: bool,
    order: &dyn Fn(KeyField<'_>, KeyField<'_>) -> std::cmp::Ordering,
    each: &mut dyn FnMut(KeyField<'_>, i64) -> bool,
) -> Result<()> {
    let (frame, mut seen) = walk_start(file, root)?;
    let keep = Keep::Rowids {
        fields,
        skip_nulls: false,
    };
    // `after(a, b)`: `b` comes after `a` in the walk's order.
    let after = |a: KeyField<'_>, b: KeyField<'_>| {
        let o = order(b, a);
        if backward {
            o.is_lt()
        } else {
            o.is_gt()
        }
    };
    let mut seek = Seek {
        file,
        fields,
        backward,
        after: &after,
        leaf_depth: None,
        stride: 1,
        probed: PageSet::new(file.header().page_count),
        record: Vec::new(),
        scratch: Vec::new(),
    };
    let mut stack = vec![frame];
    let mut last: Option<OwnedField> = None;
    loop {
        if let Some(value) = &last {
            seek.past(&mut stack, value.borrowed())?;
        }
        let mut met = None;
        let mut until = |key: KeyField<'_>| {
            met = Some(OwnedField::of(key));
            Step::Keep
        };
        let walked = walk_from(
            file,
            &mut stack,
            keep,
            (backward, 0),
            1,
            &mut seen,
            Some(&mut until),
        )?;
        let (Some(key), [rowid]) = (met, walked.rowids.as_slice()) else {
            return Ok(());
        };
        if let Some(value) = &last {
            if !after(value.borrowed(), key.borrowed()) {
                let page = stack.last().map_or(root, |f| f.page);
                return Err(file.corrupt(page, "index entries out of key order"));
            }
        }
        if !each(key.borrowed(), *rowid) {
            return Ok(());
        }
        last = Some(key);
    }
}

/// The state of [`distinct_walk`]'s seeks.
struct Seek<'a> {
    file: &'a PageFile,
    fields: usize,
    backward: bool,
    after: &'a dyn Fn(KeyField<'_>, KeyField<'_>) -> bool,
    leaf_depth: Option<u32>,
    /// How many entries the last value found within a leaf had: where a gallop starts.
    stride: usize,
    /// The overflow pages of the record being probed (cleared after each spilled one: the
    /// bisections read some records more than once).
    probed: PageSet,
    record: Vec<u8>,
    scratch: Vec<u8>,
}

impl Seek<'_> {
    /// Moves the walk `stack` to just before the first entry after `value`, reading as
    /// little as a cursor would: from the page on top up to the first page on the stack whose
    /// entries still to come include one after `value` (its last one does), then down again,
    /// each page bisected. Within the leaf on top, a galloping search: probes `s`, `2s`,
    /// `4s`, ... entries on (`s` as many as the last value had), then a bisection between
    /// the last probe not after `value` and the first after it. A probe reads only the
    /// entry's first field where it lies on the page.
    ///
    /// The entries still to come follow in this order: the top page's, then each page's
    /// below the root in turn (the rest of its entries, each after a child, and its last
    /// child); so the first after `value` is in the child before the first such entry of the
    /// lowest page that has one, or is that entry; or, where that entry is the page's next,
    /// in the last child of the highest page below it with children still to come.
    fn past(&mut self, stack: &mut Vec<Frame>, value: KeyField<'_>) -> Result<()> {
        // The entries still to come of each page, and whether its last child is.
        let rest = |f: &Frame, top: bool| {
            let cells = usize::from(f.header.cell_count);
            if f.header.page_type == PAGE_LEAF_INDEX {
                (f.taken..cells, false)
            } else {
                (f.taken / 2..cells, top || f.taken / 2 < cells)
            }
        };
        let top = stack.len().saturating_sub(1);
        let mut found = None;
        for level in (0..stack.len()).rev() {
            let (entries, _) = rest(&stack[level], level == top);
            if !entries.is_empty() && self.probe(&stack[level], entries.end - 1, value)? {
                found = Some((level, entries));
                break;
            }
        }
        let below = found.as_ref().map_or(0, |(level, _)| level + 1);
        if let Some((level, entries)) = found {
            let frame = &mut stack[level];
            if frame.header.page_type == PAGE_LEAF_INDEX {
                // The first probe where the last value's entries would end, were they as
                // many as the value's before it.
                let (mut lo, mut step) = (entries.start, self.stride.max(1));
                loop {
                    let at = (lo + step - 1).min(entries.end - 1);
                    if self.probe(frame, at, value)? {
                        frame.taken = self.first_after(frame, (lo, at), value)?;
                        // The value's first entry was the one before the walk's place.
                        self.stride = frame.taken + 1 - entries.start;
                        return Ok(());
                    }
                    lo = at + 1;
                    step *= 2;
                }
            }
            let m = self.first_after(frame, (entries.start, entries.end - 1), value)?;
            let next = level == top || m > entries.start;
            if next {
                // The child before entry m, or entry m.
                stack.truncate(level + 1);
                return self.descend(stack, m, value);
            }
        }
        // Entry m (if any) is next: the last child of the highest page below it with children
        // still to come, or nothing before it.
        let with_child = (below..stack.len()).find(|&l| rest(&stack[l], l == top).1);
        match with_child {
            Some(l) => {
                stack.truncate(l + 1);
                let cells = usize::from(stack[l].header.cell_count);
                self.descend(stack, cells, value)
            }
            None => {
                stack.truncate(below);
                if let Some(frame) = stack.last_mut() {
                    // Its next entry comes after `value`: take it next.
                    frame.taken = 2 * (frame.taken / 2) + 1;
                }
                Ok(())
            }
        }
    }

    /// Descends from the page on top of `stack` into its walk-order child `j` (between its
    /// entries `j - 1` and `j`) and on down to the first entry after `value` in that subtree,
    /// each page bisected: the pages pushed at their places (a leaf's past its entries not
    /// after `value`; an interior page's past the child taken, so its entry follows). A
    /// subtree with no entry after `value` leaves its leaf spent, and the walk goes on from
    /// the page above.
    fn descend(&mut self, stack: &mut Vec<Frame>, mut j: usize, value: KeyField<'_>) -> Result<()> {
        loop {
            let parent = stack.last_mut().expect("a page to descend from");
            let cells = usize::from(parent.header.cell_count);
            let at = if self.backward { cells - j } else { j };
            let child = child_of(self.file, parent, at)?;
            if parent.depth >= 64 {
                return Err(self
                    .file
                    .corrupt(parent.page, "index b-tree deeper than 64 levels"));
            }
            parent.taken = 2 * j + 1;
            let mut frame = read_frame(self.file, child, parent.depth + 1)?;
            j = self.first_after(&frame, (0, usize::from(frame.header.cell_count)), value)?;
            let leaf = frame.header.page_type == PAGE_LEAF_INDEX;
            if leaf {
                if *self.leaf_depth.get_or_insert(frame.depth) != frame.depth {
                    return Err(self
                        .file
                        .corrupt(frame.page, "index leaves at different depths"));
                }
                frame.taken = j;
            }
            stack.push(frame);
            if leaf {
                return Ok(());
            }
        }
    }

    /// The first of `frame`'s entries from the `lo`-th to the `hi`-th, in the walk's order,
    /// that comes after `value`, by bisection: `hi` when none before it does (the `hi`-th
    /// itself is known to come after, or is the entry count).
    fn first_after(
        &mut self,
        frame: &Frame,
        (mut lo, mut hi): (usize, usize),
        value: KeyField<'_>,
    ) -> Result<usize> {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.probe(frame, mid, value)? {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    }

    /// Whether `frame`'s `j`-th entry in the walk's order comes after `value`.
    fn probe(&mut self, frame: &Frame, j: usize, value: KeyField<'_>) -> Result<bool> {
        let cells = usize::from(frame.header.cell_count);
        let i = if self.backward { cells - 1 - j } else { j };
        if let Some(key) = first_field(local_record(self.file, frame, i)?.local) {
            return Ok((self.after)(value, key));
        }
        self.record.clear();
        let (key, _) = entry(
            self.file,
            frame,
            i,
            self.fields,
            &mut self.probed,
            &mut self.record,
            &mut self.scratch,
        )?;
        let later = (self.after)(value, key);
        if !self.record.is_empty() {
            self.probed = PageSet::new(self.file.header().page_count);
        }
        Ok(later)
    }
}

/// What a walk does with the entry it is at ([`walk_from`]'s `until`).
enum Step {
    /// Keeps it.
    Keep,
    /// Stops before it.
    Stop,
}

/// A [`KeyField`] kept past its page.
enum OwnedField {
    Null,
    Integer(i64),
    Real(f64),
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

impl OwnedField {
    fn of(key: KeyField<'_>) -> OwnedField {
        match key {
            KeyField::Null => OwnedField::Null,
            KeyField::Integer(i) => OwnedField::Integer(i),
            KeyField::Real(r) => OwnedField::Real(r),
            KeyField::Text(t) => OwnedField::Text(t.to_vec()),
            KeyField::Blob(b) => OwnedField::Blob(b.to_vec()),
        }
    }

    fn borrowed(&self) -> KeyField<'_> {
        match self {
            OwnedField::Null => KeyField::Null,
            OwnedField::Integer(i) => KeyField::Integer(*i),
            OwnedField::Real(r) => KeyField::Real(*r),
            OwnedField::Text(t) => KeyField::Text(t),
            OwnedField::Blob(b) => KeyField::Blob(b),
        }
    }
}

/// What a walk keeps of the entries it meets.
#[derive(Debug, Clone, Copy)]
enum Keep {
    /// Their rowids (each record of `fields` fields checked), but of those whose first field
    /// is NULL when `skip_nulls`.
    Rowids { fields: usize, skip_nulls: bool },
    /// Only how many there are: the records are not read (SQLite's `OP_Count` reads none),
    /// the cell pointers are checked.
    Count,
}

/// [`index_rowids`], skipping the entries whose first field is NULL when `skip_nulls`.
fn index_walk(
    file: &PageFile,
    root: u32,
    fields: usize,
    backward: bool,
    n: usize,
    skip_nulls: bool,
) -> Result<Vec<i64>> {
    let (frame, mut seen) = walk_start(file, root)?;
    let keep = Keep::Rowids { fields, skip_nulls };
    walk_from(
        file,
        &mut vec![frame],
        keep,
        (backward, 0),
        n,
        &mut seen,
        None,
    )
    .map(|walked| walked.rowids)
}

/// The number of entries of the index b-tree rooted at `root` (one per row of its table,
/// per row its `WHERE` admits for a partial index), counted as SQLite's `count(*)` counts
/// them over an index: from the pages' cell counts, on several threads as [`index_rowids`]
/// walks. The pages are checked as a walk checks them, but the records are not read.
pub fn index_entries(file: &PageFile, root: u32) -> Result<u64> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    Ok(parallel_walk(file, root, Keep::Count, false, usize::MAX, threads)?.met)
}

/// What a walk met: the rowids it kept, how many entries it counted, the depth of its leaves.
struct Walked {
    rowids: Vec<i64>,
    met: u64,
    leaf_depth: Option<u32>,
}

/// [`index_walk`] on from the pages on `stack` (each at the item it has taken up to; the
/// top of a subtree alone to walk all of it), in key order or, when `backward`, from the last
/// entry down, adding the pages below them to `seen`, until `n` entries are met after the
/// first `skip` (passed over: only their cell pointers checked), or until `until` says to
/// stop at an entry (given its first field; the entry is not kept).
fn walk_from(
    file: &PageFile,
    stack: &mut Vec<Frame>,
    keep: Keep,
    (backward, mut skip): (bool, u64),
    n: usize,
    seen: &mut PageSet,
    mut until: Option<&mut dyn FnMut(KeyField<'_>) -> Step>,
) -> Result<Walked> {
    let mut leaf_depth: Option<u32> = None;
    let mut rowids = Vec::new();
    let mut record = Vec::new();
    let mut scratch = Vec::new();
    let mut met: u64 = 0;
    while met < n as u64 {
        let Some(top) = stack.last_mut() else { break };
        let items = top.items();
        if top.taken == items {
            stack.pop();
            continue;
        }
        let whole_leaf = top.header.page_type == PAGE_LEAF_INDEX && top.taken == 0;
        if whole_leaf && (matches!(keep, Keep::Count) || items as u64 <= skip) {
            // A leaf counted whole: its depth and cell pointers checked.
            let (page, depth) = (top.page, top.depth);
            if *leaf_depth.get_or_insert(depth) != depth {
                return Err(file.corrupt(page, "index leaves at different depths"));
            }
            for i in 0..items {
                cell_offset(file, top, i)?;
            }
            top.taken = items;
            if matches!(keep, Keep::Count) {
                met += items as u64;
            } else {
                skip -= items as u64;
            }
            continue;
        }
        let at = if backward {
            items - 1 - top.taken
        } else {
            top.taken
        };
        top.taken += 1;
        let (page, depth) = (top.page, top.depth);
        let item = if top.header.page_type == PAGE_LEAF_INDEX {
            if *leaf_depth.get_or_insert(depth) != depth {
                return Err(file.corrupt(
                    page,
                    format!(
                        "index leaf at depth {depth}, where the index's first leaf was at depth \
                         {}",
                        leaf_depth.unwrap_or(depth)
                    ),
                ));
            }
            Item::Entry(at)
        } else if at % 2 == 1 {
            Item::Entry(at / 2)
        } else {
            Item::Child(child_of(file, top, at / 2)?)
        };
        match item {
            Item::Child(child) => {
                let which = || format!("index cell {} child", at / 2);
                if !seen.insert(child) {
                    return Err(file.corrupt(
                        page,
                        format!("{} pointer: page {child} is already in the b-tree", which()),
                    ));
                }
                if depth >= 64 {
                    return Err(file.corrupt(page, "index b-tree deeper than 64 levels"));
                }
                stack.push(read_frame(file, child, depth + 1)?);
            }
            Item::Entry(i) => {
                let top = stack.last().expect("the frame of the entry");
                if skip > 0 && !matches!(keep, Keep::Count) {
                    cell_offset(file, top, i)?;
                    skip -= 1;
                    continue;
                }
                match keep {
                    Keep::Count => {
                        cell_offset(file, top, i)?;
                        met += 1;
                    }
                    Keep::Rowids { fields, skip_nulls } => {
                        let (key, rowid) =
                            entry(file, top, i, fields, seen, &mut record, &mut scratch)?;
                        match until.as_mut().map_or(Step::Keep, |step| step(key)) {
                            Step::Stop => break,
                            Step::Keep => {}
                        }
                        if !(skip_nulls && key == KeyField::Null) {
                            rowids.push(rowid);
                            met += 1;
                        }
                    }
                }
            }
        }
    }
    Ok(Walked {
        rowids,
        met,
        leaf_depth,
    })
}

/// The first field of an index entry (its bytes borrowed from the record).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KeyField<'a> {
    /// NULL.
    Null,
    /// An integer.
    Integer(i64),
    /// A real.
    Real(f64),
    /// Text, in the database's encoding.
    Text(&'a [u8]),
    /// A blob.
    Blob(&'a [u8]),
}

/// Where an entry's first field lies against a list of disjoint ranges of keys, listed in
/// the index's order (one range for `BETWEEN`, one range per value for an `IN` list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Before range `n` of the list and after range `n - 1` (before the only range: `0`).
    Before(usize),
    /// In range `n`.
    Inside(usize),
    /// After every range.
    Above,
}

impl Place {
    /// Whether the place is inside one of the ranges.
    pub fn is_inside(self) -> bool {
        matches!(self, Place::Inside(_))
    }

    /// The places in the order of the index: ranges and the gaps before them alternate.
    fn ordinal(self) -> usize {
        match self {
            Place::Before(n) => 2 * n,
            Place::Inside(n) => 2 * n + 1,
            Place::Above => usize::MAX,
        }
    }

    /// Whether a child page holding the keys between an entry at `before` and one at `after`
    /// (the first child: from `Before(0)`; the last: to no entry) can hold a key inside a
    /// range: some range lies between the two places.
    fn child_wanted(before: Place, after: Option<Place>) -> bool {
        before != Place::Above && (before.ordinal() | 1) <= after.map_or(usize::MAX, Place::ordinal)
    }
}

/// The rowids of the entries of the index b-tree rooted at `root` whose first field `place`
/// puts inside one of its ranges, in key order, walking only the subtrees that can hold such
/// entries (child `i` of an interior page holds the keys between entries `i - 1` and `i`);
/// `None` when there are more than `max`. `place` must be monotonic in the index's order of its
/// first column. Checked as [`index_rowids`] checks.
pub fn index_range_rowids(
    file: &PageFile,
    root: u32,
    fields: usize,
    place: &dyn Fn(KeyField<'_>) -> Place,
    max: usize,
) -> Result<Option<Vec<i64>>> {
    let mut walk = RangeWalk::new(file, root, fields, place, (max, None))?;
    Ok(walk.visit(root, 1)?.then_some(walk.rowids))
}

/// The number of entries of the index b-tree rooted at `root` whose first field `place` puts
/// inside one of its ranges, walking the subtrees [`index_range_rowids`] walks: a leaf whose
/// first and last entries are inside the same range is counted from its cell count (its cell
/// pointers checked, its other records not read), as SQLite's `count(*)` over the range
/// steps over them.
pub fn index_range_count(
    file: &PageFile,
    root: u32,
    fields: usize,
    place: &dyn Fn(KeyField<'_>) -> Place,
) -> Result<u64> {
    let mut walk = RangeWalk::new(file, root, fields, place, (usize::MAX, Some(0)))?;
    walk.visit(root, 1)?;
    Ok(walk.counted.unwrap_or(0))
}

/// The state of [`index_range_rowids`].
struct RangeWalk<'a> {
    file: &'a PageFile,
    fields: usize,
    place: &'a dyn Fn(KeyField<'_>) -> Place,
    max: usize,
    /// Counting ([`index_range_count`]): the entries inside so far; no rowid is kept.
    counted: Option<u64>,
    seen: PageSet,
    leaf_depth: Option<u32>,
    rowids: Vec<i64>,
    record: Vec<u8>,
    scratch: Vec<u8>,
}

impl<'a> RangeWalk<'a> {
    /// A walk from index root `root` (checked usable), keeping at most `max` rowids, or
    /// counting from `counted` when that is `Some`.
    fn new(
        file: &'a PageFile,
        root: u32,
        fields: usize,
        place: &'a dyn Fn(KeyField<'_>) -> Place,
        (max, counted): (usize, Option<u64>),
    ) -> Result<Self> {
        let db = file.header();
        file.check_page_number(root)?;
        if let Some(reason) = db.unusable_page_reason(root) {
            return Err(file.corrupt(root, format!("invalid index root page: {reason}")));
        }
        let mut seen = PageSet::new(db.page_count);
        seen.insert(root);
        Ok(RangeWalk {
            file,
            fields,
            place,
            max,
            counted,
            seen,
            leaf_depth: None,
            rowids: Vec::new(),
            record: Vec::new(),
            scratch: Vec::new(),
        })
    }

    /// Collects the entries of the subtree at `page` inside the range; `false` once more
    /// than `max` are.
    fn visit(&mut self, page: u32, depth: u32) -> Result<bool> {
        let file = self.file;
        let frame = read_frame(file, page, depth)?;
        let cells = usize::from(frame.header.cell_count);
        let leaf = frame.header.page_type == PAGE_LEAF_INDEX;
        if leaf && *self.leaf_depth.get_or_insert(depth) != depth {
            return Err(file.corrupt(
                page,
                format!("index leaf at depth {depth}, where the index's first leaf was deeper or shallower"),
            ));
        }
        // Counting: the places of a leaf's first and last entries (each record read once: a
        // spilled one claims its overflow pages), and the leaf counted whole when both are
        // inside (so is every entry between them).
        let mut known: [Option<(usize, Place)>; 2] = [None, None];
        if leaf && cells > 0 && self.counted.is_some() {
            for (k, i) in [0, cells - 1].into_iter().enumerate() {
                if k == 1 && i == 0 {
                    known[1] = known[0];
                    break;
                }
                let (key, _) = entry(
                    file,
                    &frame,
                    i,
                    self.fields,
                    &mut self.seen,
                    &mut self.record,
                    &mut self.scratch,
                )?;
                known[k] = Some((i, (self.place)(key)));
            }
            // Both inside the same range: so is every entry between them.
            if matches!(known, [Some((_, first @ Place::Inside(_))), Some((_, last))] if first == last)
            {
                for i in 1..cells.saturating_sub(1) {
                    cell_offset(file, &frame, i)?;
                }
                if let Some(n) = &mut self.counted {
                    *n += cells as u64;
                }
                return Ok(true);
            }
        }
        // The place of the entry before the current child (none for the first child).
        let mut before = Place::Before(0);
        for i in 0..=cells {
            let cached = known.iter().flatten().find(|(at, _)| *at == i);
            let current = if let Some(&(_, p)) = cached {
                // Read above (counting: no rowid is kept).
                Some((p, 0))
            } else if i < cells {
                let (key, rowid) = entry(
                    file,
                    &frame,
                    i,
                    self.fields,
                    &mut self.seen,
                    &mut self.record,
                    &mut self.scratch,
                )?;
                Some(((self.place)(key), rowid))
            } else {
                None
            };
            // Child i holds keys from entry i - 1 up to entry i.
            if !leaf && Place::child_wanted(before, current.map(|(p, _)| p)) {
                let child = if i < cells {
                    let cell = cell_offset(file, &frame, i)?;
                    be_u32(&frame.buf, cell).ok_or_else(|| {
                        file.corrupt(page, format!("cell {i} runs past the usable page"))
                    })?
                } else {
                    frame.header.right_child.unwrap_or(0)
                };
                let which = || format!("index cell {i} child");
                let db = file.header();
                if let Some(reason) = db.unusable_page_reason(child) {
                    return Err(file.corrupt(page, format!("{} pointer: {reason}", which())));
                }
                if !self.seen.insert(child) {
                    return Err(file.corrupt(
                        page,
                        format!("{} pointer: page {child} is already in the b-tree", which()),
                    ));
                }
                if depth >= 64 {
                    return Err(file.corrupt(page, "index b-tree deeper than 64 levels"));
                }
                if !self.visit(child, depth + 1)? {
                    return Ok(false);
                }
            }
            let Some((p, rowid)) = current else { break };
            match p {
                Place::Inside(_) => {
                    if let Some(n) = &mut self.counted {
                        *n += 1;
                    } else if self.rowids.len() == self.max {
                        return Ok(false);
                    } else {
                        self.rowids.push(rowid);
                    }
                }
                Place::Above => return Ok(true),
                Place::Before(_) => {}
            }
            before = p;
        }
        Ok(true)
    }
}

/// Reads `page` and requires an index b-tree page whose cell pointers fit the usable part.
fn read_frame(file: &PageFile, page: u32, depth: u32) -> Result<Frame> {
    let mut buf = file.page_buffer();
    file.read_page(page, &mut buf)?;
    let offset = btree_header_offset(page);
    let header = BtreePageHeader::parse(&buf, offset).map_err(|what| file.corrupt(page, what))?;
    if !matches!(header.page_type, PAGE_INTERIOR_INDEX | PAGE_LEAF_INDEX) {
        return Err(file.corrupt(
            page,
            format!(
                "page type 0x{:02x} where an index b-tree page was expected",
                header.page_type
            ),
        ));
    }
    if header.cell_pointers_end(offset) > file.header().usable_size() as usize {
        return Err(file.corrupt(
            page,
            format!(
                "cell pointer array of {} cells runs into the reserved bytes",
                header.cell_count
            ),
        ));
    }
    Ok(Frame {
        page,
        buf,
        header,
        depth,
        taken: 0,
    })
}

/// The offset of cell `i` of the frame's page.
fn cell_offset(file: &PageFile, frame: &Frame, i: usize) -> Result<usize> {
    let usable = file.header().usable_size() as usize;
    frame
        .header
        .cell_offset(&frame.buf, btree_header_offset(frame.page), i, usable)
        .map_err(|what| file.corrupt(frame.page, what))
}

/// Cell `i`'s entry: its first field and its rowid, from the record (its spilled part read
/// from the overflow chain into `record`), whose last field must be an integer.
fn entry<'r>(
    file: &PageFile,
    frame: &'r Frame,
    i: usize,
    fields: usize,
    seen: &mut PageSet,
    record: &'r mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Result<(KeyField<'r>, i64)> {
    let page = frame.page;
    let corrupt = |what: String| file.corrupt(page, format!("index cell {i}: {what}"));
    let cell = local_record(file, frame, i)?;
    if !cell.spills {
        // The whole record is on the page: read in place.
        return first_and_last(cell.local, fields).map_err(corrupt);
    }
    record.clear();
    record.extend_from_slice(cell.local);
    read_overflow(file, frame, &cell, seen, record, scratch)?;
    first_and_last(record, fields).map_err(corrupt)
}

/// Appends to `record` the part of `cell`'s record (on `frame`'s page) that spills to its
/// overflow chain, reading and checking the chain.
fn read_overflow(
    file: &PageFile,
    frame: &Frame,
    cell: &LocalRecord<'_>,
    seen: &mut PageSet,
    record: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Result<()> {
    // The chain walk of table cells, with this cell's sizes.
    let chain = TableLeafCell {
        rowid: 0,
        payload_len: cell.payload_len,
        local_start: cell.start,
        local_len: cell.local.len(),
        first_overflow: be_u32(&frame.buf, cell.start + cell.local.len()),
    };
    follow_overflow_chain(file, frame.page, &chain, seen, Some(record), scratch)?;
    Ok(())
}

/// The part of an index cell's record on its page.
struct LocalRecord<'r> {
    /// The record's bytes on the page.
    local: &'r [u8],
    /// Where they start in the page.
    start: usize,
    /// The whole record's size.
    payload_len: u64,
    /// Whether the record spills (its first overflow page number follows `local`).
    spills: bool,
}

/// Cell `i`'s record as far as it lies on `frame`'s page, checked to fit the usable part.
fn local_record<'r>(file: &PageFile, frame: &'r Frame, i: usize) -> Result<LocalRecord<'r>> {
    let usable = file.header().usable_size();
    let corrupt = |what: String| file.corrupt(frame.page, format!("index cell {i}: {what}"));
    let mut at = cell_offset(file, frame, i)?;
    if frame.header.page_type == PAGE_INTERIOR_INDEX {
        at += 4;
    }
    let area = frame
        .buf
        .get(at..(usable as usize).min(frame.buf.len()))
        .ok_or_else(|| corrupt("the cell lies outside the page".into()))?;
    let (payload_len, n) =
        read_varint(area).ok_or_else(|| corrupt("the payload size runs past the page".into()))?;
    let local = index_local_payload(usable, payload_len) as usize;
    let start = at + n;
    let spills = payload_len > local as u64;
    let end = start + local + if spills { 4 } else { 0 };
    if end > usable as usize {
        return Err(corrupt(format!(
            "a {payload_len}-byte record runs past the usable page"
        )));
    }
    Ok(LocalRecord {
        local: &frame.buf[start..start + local],
        start,
        payload_len,
        spills,
    })
}

/// The first field of a record whose first bytes are `prefix`, when it lies within them
/// (`None` otherwise, or where the header does not parse: the whole entry is then read and
/// checked). What a seek's comparisons read of the entries they pass over.
fn first_field(prefix: &[u8]) -> Option<KeyField<'_>> {
    let (header_len, n) = read_varint(prefix)?;
    let at = usize::try_from(header_len).ok().filter(|&h| h > n)?;
    let (serial, _) = read_varint(prefix.get(n..at)?)?;
    let size = serial_type_size(serial)? as usize;
    let bytes = prefix.get(at..at.checked_add(size)?)?;
    Some(key_field(serial, bytes))
}

/// The field of serial type `serial` (not a reserved one) whose bytes are `bytes`.
fn key_field(serial: u64, bytes: &[u8]) -> KeyField<'_> {
    match serial {
        0 => KeyField::Null,
        1..=6 => KeyField::Integer(read_be_int(bytes)),
        7 => KeyField::Real(f64::from_bits(read_be_int(bytes) as u64)),
        8 => KeyField::Integer(0),
        9 => KeyField::Integer(1),
        s if s % 2 == 0 => KeyField::Blob(bytes),
        _ => KeyField::Text(bytes),
    }
}

/// The first field of `record` and its last, which must be an integer (the rowid); the
/// record must have `fields` fields.
fn first_and_last(
    record: &[u8],
    fields: usize,
) -> std::result::Result<(KeyField<'_>, i64), String> {
    let (header_len, mut pos) =
        read_varint(record).ok_or("the record header size runs past the record")?;
    let header_len = usize::try_from(header_len)
        .ok()
        .filter(|&h| h >= pos && h <= record.len())
        .ok_or_else(|| format!("a record header of {header_len} bytes does not fit its record"))?;
    let mut body = header_len;
    let mut count = 0;
    let mut first = None;
    let mut last = None;
    while pos < header_len {
        let (serial, n) = record[..header_len]
            .get(pos..)
            .and_then(read_varint)
            .ok_or("a serial type runs past the record header")?;
        pos += n;
        let size =
            serial_type_size(serial).ok_or_else(|| format!("reserved serial type {serial}"))?;
        count += 1;
        last = Some((serial, body));
        first.get_or_insert((serial, body));
        body = body
            .checked_add(size as usize)
            .filter(|&b| b <= record.len())
            .ok_or("a field runs past the record")?;
    }
    if count != fields {
        return Err(format!(
            "the record has {count} fields, where the index has {fields}"
        ));
    }
    let field = |(serial, at): (u64, usize)| {
        let size = serial_type_size(serial).unwrap_or(0) as usize;
        key_field(serial, &record[at..at + size])
    };
    let first = first.map(field).unwrap_or(KeyField::Null);
    match last.map(field) {
        Some(KeyField::Integer(rowid)) => Ok((first, rowid)),
        _ => Err("the record does not end with an integer rowid".into()),
    }
}

/// The rowid that ends the index entry `record` (its last field, an integer), or `None` when
/// the record is damaged or does not end with one.
pub fn entry_rowid(record: &[u8]) -> Option<i64> {
    let (header_len, mut pos) = read_varint(record)?;
    let header_len = usize::try_from(header_len)
        .ok()
        .filter(|&h| h >= pos && h <= record.len())?;
    let mut body = header_len;
    let mut last = None;
    while pos < header_len {
        let (serial, n) = record[..header_len].get(pos..).and_then(read_varint)?;
        pos += n;
        let size = serial_type_size(serial)? as usize;
        last = Some((serial, body, size));
        body = body.checked_add(size).filter(|&b| b <= record.len())?;
    }
    let (serial, at, size) = last?;
    match key_field(serial, &record[at..at + size]) {
        KeyField::Integer(rowid) => Some(rowid),
        _ => None,
    }
}

/// The rowid of index-leaf `page`'s cell `i` (pages of `usable` bytes), when its record lies
/// wholly on the page ([`entry_rowid`]).
pub fn leaf_entry_rowid(page: &[u8], usable: u32, i: usize) -> Option<i64> {
    let header = BtreePageHeader::parse(page, 0).ok()?;
    let at = header.cell_offset(page, 0, i, usable as usize).ok()?;
    let (payload_len, n) = read_varint(page.get(at..)?)?;
    let local = index_local_payload(usable, payload_len);
    if local < payload_len {
        return None;
    }
    entry_rowid(page.get(at + n..at + n + local as usize)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_payload_follows_btree_c() {
        // 4096-byte pages: maxLocal 1002, minLocal 489.
        assert_eq!(index_local_payload(4096, 1002), 1002);
        // The surplus past minLocal modulo an overflow page's capacity stays local when it
        // fits under maxLocal, else minLocal does.
        assert_eq!(index_local_payload(4096, 1003), 489);
        assert_eq!(index_local_payload(4096, 5000), 489 + (5000 - 489) % 4092);
        assert_eq!(index_local_payload(4096, 5000), 908);
        assert_eq!(index_local_payload(4096, 4581), 489);
    }

    #[test]
    fn the_last_field_is_the_rowid() {
        // Header: size 3, serial types 15 (a 1-byte text: 'a') and 1 (a 1-byte integer).
        let record = [3u8, 15, 1, b'a', 0x7f];
        assert_eq!(first_and_last(&record, 2), Ok((KeyField::Text(b"a"), 127)));
        assert!(first_and_last(&record, 3).unwrap_err().contains("2 fields"));
        let text_last = [3u8, 1, 15, 0x05, b'a'];
        assert!(first_and_last(&text_last, 2).is_err());
        let constants = [3u8, 0, 9];
        assert_eq!(first_and_last(&constants, 2), Ok((KeyField::Null, 1)));
        let short = [3u8, 1, 6, 0];
        assert!(first_and_last(&short, 2).unwrap_err().contains("runs past"));
        let real = [3u8, 7, 1, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18, 9];
        assert_eq!(
            first_and_last(&real, 2),
            Ok((KeyField::Real(std::f64::consts::PI), 9))
        );
    }
}

/// An index b-tree laid out for a scan of all its entries in key order by the executors, as a
/// table's leaves are ([`index_tree`]): its leaves in key order (not read here), its interior
/// pages, and the entries those hold, each placed after the leaf it follows in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexTree {
    /// Every leaf page, in key order.
    pub leaves: Vec<u32>,
    /// Every interior page, in the order the walk met them.
    pub interior_pages: Vec<u32>,
    /// Levels in the b-tree (1 when the root is a leaf).
    pub depth: u32,
    /// The entries of the interior pages, whole records (overflow included), in key order,
    /// each with the position in [`IndexTree::leaves`] of the leaf whose entries come just
    /// before it: an interior cell's entry follows the last entry of its left child's subtree.
    pub between: Vec<(usize, Vec<u8>)>,
}

/// The layout of the index b-tree rooted at `root` for a scan of its entries: every interior
/// page read and checked (a page of an index, its children usable pages met once, every leaf
/// at the depth of the first), each interior entry read whole and checked to hold `fields`
/// fields ending with an integer rowid. The leaves are listed, not read: whoever decodes them
/// checks each one is an index leaf.
///
/// With `place`, only the subtrees that can hold entries whose first field it puts inside
/// one of its ranges, as [`index_range_rowids`] walks them (child `i` of an interior page
/// holds the keys between entries `i - 1` and `i`), and only the interior entries inside
/// them: the leaves kept may hold entries outside the ranges (a leaf is not split), which
/// the scan's `WHERE` rejects. `place` must be monotonic in the index's order of its first
/// field.
pub fn index_tree(
    file: &PageFile,
    root: u32,
    fields: usize,
    place: Option<&dyn Fn(KeyField<'_>) -> Place>,
) -> Result<IndexTree> {
    let (frame, mut seen) = walk_start(file, root)?;
    let mut tree = IndexTree {
        leaves: Vec::new(),
        interior_pages: Vec::new(),
        depth: 1,
        between: Vec::new(),
    };
    if frame.header.page_type == PAGE_LEAF_INDEX {
        tree.leaves.push(root);
        return Ok(tree);
    }
    // The depth of the leaves, from the leftmost path.
    let mut child = Some(child_of(file, &frame, 0)?);
    while let Some(page) = child {
        tree.depth += 1;
        let below = read_frame(file, page, tree.depth)?;
        child = match below.header.page_type {
            PAGE_LEAF_INDEX => None,
            _ => Some(child_of(file, &below, 0)?),
        };
    }
    let mut scratch = Vec::new();
    let mut walk = TreeWalk {
        file,
        fields,
        place,
        seen: &mut seen,
        tree: &mut tree,
        scratch: &mut scratch,
    };
    walk.interior(frame)?;
    Ok(tree)
}

/// [`index_tree`]'s walk of the interior pages.
struct TreeWalk<'a> {
    file: &'a PageFile,
    fields: usize,
    place: Option<&'a dyn Fn(KeyField<'_>) -> Place>,
    seen: &'a mut PageSet,
    tree: &'a mut IndexTree,
    scratch: &'a mut Vec<u8>,
}

impl TreeWalk<'_> {
    /// Lists the subtree of interior page `frame` in key order: each child's leaves, then the
    /// cell's entry (those a range wants). `false` once an entry past the range was met: the
    /// walk is over.
    fn interior(&mut self, frame: Frame) -> Result<bool> {
        let file = self.file;
        self.tree.interior_pages.push(frame.page);
        let cells = usize::from(frame.header.cell_count);
        // The place of the entry before the current child (none for the first child).
        let mut before = Place::Before(0);
        for i in 0..=cells {
            let current = match i < cells {
                true => {
                    let record = self.whole_entry(&frame, i)?;
                    let place = match self.place {
                        None => Place::Inside(0),
                        Some(place) => {
                            let (first, _) = first_and_last(&record, self.fields)
                                .map_err(|what| file.corrupt(frame.page, what))?;
                            place(first)
                        }
                    };
                    Some((place, record))
                }
                false => None,
            };
            let wanted = Place::child_wanted(before, current.as_ref().map(|(p, _)| *p));
            if wanted && !self.child(&frame, i)? {
                return Ok(false);
            }
            let Some((place, record)) = current else {
                break;
            };
            match place {
                Place::Inside(_) => {
                    // Child i, which comes before the entry, was walked: a leaf precedes it.
                    let Some(after) = self.tree.leaves.len().checked_sub(1) else {
                        return Err(file.corrupt(
                            frame.page,
                            format!("index cell {i}: an entry before every leaf of its range"),
                        ));
                    };
                    self.tree.between.push((after, record));
                }
                Place::Above => return Ok(false),
                Place::Before(_) => {}
            }
            before = place;
        }
        Ok(true)
    }

    /// Lists child `i` of interior page `frame` (a leaf, or the subtree of an interior page);
    /// `false` once the walk is over.
    fn child(&mut self, frame: &Frame, i: usize) -> Result<bool> {
        let file = self.file;
        let child = child_of(file, frame, i)?;
        if !self.seen.insert(child) {
            return Err(file.corrupt(
                frame.page,
                format!("page {child} is reached twice in the index b-tree"),
            ));
        }
        if frame.depth + 1 == self.tree.depth {
            self.tree.leaves.push(child);
            return Ok(true);
        }
        let below = read_frame(file, child, frame.depth + 1)?;
        if below.header.page_type == PAGE_LEAF_INDEX {
            return Err(file.corrupt(child, "index leaves at different depths"));
        }
        self.interior(below)
    }

    /// Cell `i`'s record, whole, checked to hold the index's fields and a rowid last.
    fn whole_entry(&mut self, frame: &Frame, i: usize) -> Result<Vec<u8>> {
        let file = self.file;
        let cell = local_record(file, frame, i)?;
        let mut record = cell.local.to_vec();
        if cell.spills {
            read_overflow(file, frame, &cell, self.seen, &mut record, self.scratch)?;
        }
        first_and_last(&record, self.fields)
            .map_err(|what| file.corrupt(frame.page, format!("index cell {i}: {what}")))?;
        Ok(record)
    }
}
