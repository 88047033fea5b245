//! Window functions (`OVER`): the window stage of a query ([`WindowStage`]), run on the
//! coordinator over every row the executors' scan returned, with SQLite 3.54's semantics
//! (`window.c`).
//!
//! The rows come in SQLite's loop order. Each distinct window is one pass, the last written
//! first (SQLite nests one sub-select per window, the last innermost): a stable sort by its
//! partition keys and `ORDER BY`, so ties keep the order the pass before left them, then
//! every call over it, partition by partition. The partitions of a pass are computed on
//! several threads when there are many rows. The output columns, the stage's `ORDER BY`
//! (stable again), `LIMIT` and `OFFSET` follow.
//!
//! Per row, a call costs:
//!
//! - nothing beyond the partition's peer groups for the ranking functions (`row_number`,
//!   `rank`, `dense_rank`, `percent_rank`, `cume_dist`, `ntile`) and `lag`/`lead`, which
//!   ignore the frame, and `first_value`/`last_value`/`nth_value`, which read one row of it;
//! - one step for an aggregate whose frame starts at the partition's first row or ends at
//!   its last (running forwards or backwards: a state's value does not depend on the order
//!   of its steps, each row's position in the partition deciding `min`/`max` ties and
//!   `group_concat` order); each distinct frame of other aggregates is aggregated afresh.

use std::cmp::Ordering;

use crate::datatype3::{apply_column_affinity, Affinity};
use crate::value::{Value, ValueRef};

use super::aggregate::{AggState, SumState};
use super::eval::eval;
use super::ir::{
    AggFunc, AggSpec, ArithOp, Expr, Frame, FrameBound, FrameUnits, SortKey, WindowCall,
    WindowFunc, WindowPass, WindowStage,
};
use super::marks::{compare_key, compare_key_ref, compare_keys};

/// Rows from which a pass's partitions are computed on several threads.
const PARALLEL_ROWS: usize = 32 * 1024;

/// Runs `stage` over `rows` (its input slots, in SQLite's loop order): the query's result.
pub fn apply(stage: &WindowStage, rows: Vec<Vec<Value>>) -> Result<Vec<Vec<Value>>, String> {
    let calls: usize = stage.passes.iter().map(|p| p.calls.len()).sum();
    let width = stage.inputs + calls;
    let mut rows: Vec<Vec<Value>> = rows
        .into_iter()
        .map(|mut r| {
            r.resize(width, Value::Null);
            r
        })
        .collect();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    for pass in &stage.passes {
        order = sorted(pass, &rows, order);
        let parts = partitions(pass, &rows, &order);
        let results = compute_parts(pass, &rows, &order, &parts)?;
        for ((start, _), values) in parts.iter().zip(results) {
            for (k, vals) in values.into_iter().enumerate() {
                let row = &mut rows[order[start + k]];
                for ((slot, _), v) in pass.calls.iter().zip(vals) {
                    row[stage.inputs + slot] = v;
                }
            }
        }
    }
    finish(stage, rows, order)
}

/// `order` sorted stably by the pass's partition keys and `ORDER BY`. The keys are copied
/// side by side first (numbers inline), so a comparison reads one place, not a row's.
fn sorted(pass: &WindowPass, rows: &[Vec<Value>], order: Vec<usize>) -> Vec<usize> {
    let slots: Vec<usize> = pass
        .partition
        .iter()
        .map(|&(slot, _)| slot)
        .chain(pass.order.iter().map(slot_of))
        .collect();
    let width = slots.len();
    if width == 0 {
        return order;
    }
    let keys: Vec<ValueRef<'_>> = order
        .iter()
        .flat_map(|&i| slots.iter().map(move |&s| rows[i][s].as_ref()))
        .collect();
    let compare = |a: &[ValueRef<'_>], b: &[ValueRef<'_>]| -> Ordering {
        for (k, &(_, collation)) in pass.partition.iter().enumerate() {
            let o = crate::datatype3::compare_values(a[k], b[k], collation);
            if o != Ordering::Equal {
                return o;
            }
        }
        let base = pass.partition.len();
        for (k, key) in pass.order.iter().enumerate() {
            let o = compare_key_ref(key, a[base + k], b[base + k]);
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    };
    if width == 1 {
        let pairs: Vec<(ValueRef<'_>, usize)> = keys.into_iter().zip(order).collect();
        let pairs = parallel_sort(pairs, &|a, b| {
            compare(std::slice::from_ref(&a.0), std::slice::from_ref(&b.0))
        });
        return pairs.into_iter().map(|(_, i)| i).collect();
    }
    let perm: Vec<u32> = (0..order.len() as u32).collect();
    let perm = parallel_sort(perm, &|&a, &b| {
        let (a, b) = (a as usize * width, b as usize * width);
        compare(&keys[a..a + width], &keys[b..b + width])
    });
    perm.into_iter().map(|p| order[p as usize]).collect()
}

/// A stable sort of `v` on the machine's threads: runs sorted side by side, then merged
/// (ties keep the earlier run's first).
fn parallel_sort<T: Send + Copy>(
    mut v: Vec<T>,
    compare: &(dyn Fn(&T, &T) -> Ordering + Sync),
) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || v.len() < PARALLEL_ROWS {
        v.sort_by(compare);
        return v;
    }
    let run = v.len().div_ceil(threads);
    std::thread::scope(|s| {
        for chunk in v.chunks_mut(run) {
            s.spawn(move || chunk.sort_by(compare));
        }
    });
    let mut runs: Vec<Vec<T>> = v.chunks(run).map(<[T]>::to_vec).collect();
    while runs.len() > 1 {
        let mut next = Vec::with_capacity(runs.len().div_ceil(2));
        let mut it = runs.into_iter();
        while let Some(left) = it.next() {
            match it.next() {
                None => next.push(left),
                Some(right) => {
                    let mut merged = Vec::with_capacity(left.len() + right.len());
                    let (mut i, mut j) = (0, 0);
                    while i < left.len() && j < right.len() {
                        if compare(&right[j], &left[i]) == Ordering::Less {
                            merged.push(right[j]);
                            j += 1;
                        } else {
                            merged.push(left[i]);
                            i += 1;
                        }
                    }
                    merged.extend_from_slice(&left[i..]);
                    merged.extend_from_slice(&right[j..]);
                    next.push(merged);
                }
            }
        }
        runs = next;
    }
    runs.pop().unwrap_or_default()
}

/// The output columns of the rows in `order`, sorted by the stage's `ORDER BY`, with its
/// `LIMIT` and `OFFSET`.
fn finish(
    stage: &WindowStage,
    rows: Vec<Vec<Value>>,
    order: Vec<usize>,
) -> Result<Vec<Vec<Value>>, String> {
    let offset = usize::try_from(stage.offset).unwrap_or(usize::MAX);
    let limit = stage
        .limit
        .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let outputs = |row: &[Value]| -> Result<Vec<Value>, String> {
        let slots: Vec<ValueRef<'_>> = row.iter().map(Value::as_ref).collect();
        stage.outputs.iter().map(|e| eval(e, &slots)).collect()
    };
    if stage.order_by.is_empty() {
        // No sorter: the rows the OFFSET skips and those after the LIMIT are never output.
        return order
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|i| outputs(&rows[i]))
            .collect();
    }
    // As SQLite fills its sorter: each row's output columns, then its keys.
    let mut keyed = Vec::with_capacity(order.len());
    for i in order {
        let values = outputs(&rows[i])?;
        let slots: Vec<ValueRef<'_>> = rows[i].iter().map(Value::as_ref).collect();
        let keys = stage
            .order_by
            .iter()
            .map(|k| eval(&k.expr, &slots))
            .collect::<Result<Vec<_>, _>>()?;
        keyed.push((keys, values));
    }
    keyed.sort_by(|a, b| compare_keys(&stage.order_by, &a.0, &b.0));
    Ok(keyed
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|(_, v)| v)
        .collect())
}

/// How two rows' partition keys compare (each ascending under its collation).
fn partition_cmp(pass: &WindowPass, a: &[Value], b: &[Value]) -> Ordering {
    for &(slot, collation) in &pass.partition {
        let o = crate::datatype3::compare_values(a[slot].as_ref(), b[slot].as_ref(), collation);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// How two rows compare under `keys`, whose expressions are input slots.
fn compare_keys_of(keys: &[SortKey], a: &[Value], b: &[Value]) -> Ordering {
    for k in keys {
        let o = compare_key(k, &a[slot_of(k)], &b[slot_of(k)]);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

fn slot_of(k: &SortKey) -> usize {
    match k.expr {
        Expr::Column(i) => i,
        _ => unreachable!("a window's ORDER BY is planned as input slots"),
    }
}

/// The partitions of the sorted `order`: `(start, len)` in it.
fn partitions(pass: &WindowPass, rows: &[Vec<Value>], order: &[usize]) -> Vec<(usize, usize)> {
    let mut parts = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len()
            && partition_cmp(pass, &rows[order[start]], &rows[order[end]]) == Ordering::Equal
        {
            end += 1;
        }
        parts.push((start, end - start));
        start = end;
    }
    parts
}

/// Each partition's rows' call results, on several threads for a large input; the first
/// partition (in order) that fails is the error.
fn compute_parts(
    pass: &WindowPass,
    rows: &[Vec<Value>],
    order: &[usize],
    parts: &[(usize, usize)],
) -> Result<Vec<Vec<Vec<Value>>>, String> {
    let one = |&(start, len): &(usize, usize)| {
        let part: Vec<&[Value]> = order[start..start + len]
            .iter()
            .map(|&i| rows[i].as_slice())
            .collect();
        Partition::new(pass, part).compute()
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || parts.len() < 2 || order.len() < PARALLEL_ROWS {
        return parts.iter().map(&one).collect();
    }
    // Contiguous runs of partitions of about equal rows, one per thread.
    let per = order.len().div_ceil(threads);
    let mut chunks: Vec<&[(usize, usize)]> = Vec::new();
    let (mut from, mut rows_in) = (0, 0);
    for (k, &(_, len)) in parts.iter().enumerate() {
        rows_in += len;
        if rows_in >= per {
            chunks.push(&parts[from..=k]);
            from = k + 1;
            rows_in = 0;
        }
    }
    if from < parts.len() {
        chunks.push(&parts[from..]);
    }
    let results: Vec<Vec<Result<Vec<Vec<Value>>, String>>> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| s.spawn(|| chunk.iter().map(&one).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a window partition's thread panicked"))
            .collect()
    });
    results.into_iter().flatten().collect()
}

/// One partition of a pass, sorted, with its peer groups.
struct Partition<'p, 'r> {
    pass: &'p WindowPass,
    rows: Vec<&'r [Value]>,
    /// Each row's peer group.
    group: Vec<usize>,
    /// Each peer group's first row, and one past the last group's last row.
    group_start: Vec<usize>,
}

impl<'p, 'r> Partition<'p, 'r> {
    fn new(pass: &'p WindowPass, rows: Vec<&'r [Value]>) -> Self {
        let mut group = Vec::with_capacity(rows.len());
        let mut group_start = Vec::new();
        for j in 0..rows.len() {
            let peer = j > 0 && compare_keys_of(&pass.order, rows[j - 1], rows[j]).is_eq();
            if !peer {
                group_start.push(j);
            }
            group.push(group_start.len() - 1);
        }
        group_start.push(rows.len());
        Partition {
            pass,
            rows,
            group,
            group_start,
        }
    }

    fn len(&self) -> usize {
        self.rows.len()
    }

    fn peers(&self, j: usize) -> (usize, usize) {
        let g = self.group[j];
        (self.group_start[g], self.group_start[g + 1])
    }

    /// Every row's results, one per call of the pass.
    fn compute(&self) -> Result<Vec<Vec<Value>>, String> {
        let n = self.len();
        let mut out: Vec<Vec<Value>> = vec![Vec::with_capacity(self.pass.calls.len()); n];
        // Each distinct frame's rows, once.
        let mut frames: Vec<(&Frame, Vec<(usize, usize)>)> = Vec::new();
        for (_, call) in &self.pass.calls {
            let framed = matches!(
                call.func,
                WindowFunc::FirstValue
                    | WindowFunc::LastValue
                    | WindowFunc::NthValue
                    | WindowFunc::Aggregate(_)
            );
            let k = match frames.iter().position(|(f, _)| *f == &call.frame) {
                Some(k) => k,
                None if framed => {
                    let f = &call.frame;
                    let offsets = [&f.start, &f.end]
                        .iter()
                        .any(|b| matches!(b, FrameBound::Preceding(_) | FrameBound::Following(_)));
                    let rows = if f.units == FrameUnits::Range && offsets {
                        self.range_frames(f)?
                    } else {
                        (0..n).map(|j| self.frame(f, j)).collect::<Result<_, _>>()?
                    };
                    frames.push((&call.frame, rows));
                    frames.len() - 1
                }
                None => usize::MAX,
            };
            let none = Vec::new();
            let rows = frames.get(k).map_or(&none, |(_, r)| r);
            let values = self.call(call, rows)?;
            for (o, v) in out.iter_mut().zip(values) {
                o.push(v);
            }
        }
        Ok(out)
    }

    /// Row `j`'s frame: `[start, end)` in the partition (empty when `end <= start`).
    fn frame(&self, f: &Frame, j: usize) -> Result<(usize, usize), String> {
        let n = self.len();
        let (ps, pe) = self.peers(j);
        let start = match &f.start {
            FrameBound::UnboundedPreceding => 0,
            FrameBound::CurrentRow => match f.units {
                FrameUnits::Rows => j,
                _ => ps,
            },
            FrameBound::UnboundedFollowing => n,
            FrameBound::Preceding(off) | FrameBound::Following(off) => {
                let ahead = matches!(f.start, FrameBound::Following(_));
                self.offset_bound(f, j, off, ahead, true)?
            }
        };
        let end = match &f.end {
            FrameBound::UnboundedFollowing => n,
            FrameBound::CurrentRow => match f.units {
                FrameUnits::Rows => j + 1,
                _ => pe,
            },
            FrameBound::UnboundedPreceding => 0,
            FrameBound::Preceding(off) | FrameBound::Following(off) => {
                let ahead = matches!(f.end, FrameBound::Following(_));
                self.offset_bound(f, j, off, ahead, false)?
            }
        };
        Ok((start.min(n), end.min(n)))
    }

    /// The frame bound `off` rows, groups or values before (`ahead` false) or after row `j`:
    /// the start of the frame (`start`) or one past its end.
    fn offset_bound(
        &self,
        f: &Frame,
        j: usize,
        off: &Value,
        ahead: bool,
        start: bool,
    ) -> Result<usize, String> {
        let n = self.len();
        match f.units {
            FrameUnits::Rows => {
                let k = offset_count(off);
                let at = if ahead {
                    j.saturating_add(k)
                } else if k > j {
                    // Before the partition's first row.
                    return Ok(0);
                } else {
                    j - k
                };
                Ok(if start { at } else { at.saturating_add(1) }.min(n))
            }
            FrameUnits::Groups => {
                let k = offset_count(off);
                let g = self.group[j];
                let groups = self.group_start.len() - 1;
                let target = if ahead {
                    g.saturating_add(k)
                } else if k > g {
                    return Ok(0);
                } else {
                    g - k
                };
                if target >= groups {
                    return Ok(n);
                }
                Ok(if start {
                    self.group_start[target]
                } else {
                    self.group_start[target + 1]
                })
            }
            FrameUnits::Range => unreachable!("RANGE offsets are framed by range_frames"),
        }
    }

    /// Every row's frame under `RANGE` with an offset, as SQLite's cursors find it
    /// (`windowCodeRangeTest`): the start and end move forwards a peer group at a time, each
    /// step decided by one comparison, the offset added to (subtracted from, descending) one
    /// side's `ORDER BY` value: the start's group's for `n PRECEDING` starts, and the end's
    /// for `n PRECEDING` ends, the row's own for `FOLLOWING`. A value that is no number is
    /// not moved, a NULL only meets NULLs, and text compares under the order's collation.
    fn range_frames(&self, f: &Frame) -> Result<Vec<(usize, usize)>, String> {
        let n = self.len();
        let key = &self.pass.order[0];
        let slot = slot_of(key);
        let group_of = |p: usize| self.group_start[self.group[p]];
        let moved = |v: &Value, off: &Value| -> Result<Value, String> {
            Ok(match v {
                Value::Integer(_) | Value::Real(_) => {
                    let op = if key.descending {
                        ArithOp::Sub
                    } else {
                        ArithOp::Add
                    };
                    eval(
                        &Expr::Arith(
                            op,
                            Box::new(Expr::Literal(v.clone())),
                            Box::new(Expr::Literal(off.clone())),
                        ),
                        &[],
                    )?
                }
                other => other.clone(),
            })
        };
        // `a OP b` for OP one of >=, <=, > (`op`, with `or_equal`), flipped when
        // descending. A NULL equals NULL and sits where the window sorts NULLs: below every
        // value, or above when they sort against the direction's default (`ASC NULLS LAST`,
        // `DESC NULLS FIRST`), so a NULL's frame is its NULL peers and no other row's frame
        // holds a NULL.
        let null_big = key.nulls_first == key.descending;
        let test = |a: &Value, b: &Value, op: Ordering, or_equal: bool| -> bool {
            let op = if key.descending { op.reverse() } else { op };
            let below = if null_big {
                Ordering::Greater
            } else {
                Ordering::Less
            };
            let o = match (a.is_null(), b.is_null()) {
                (true, true) => Ordering::Equal,
                (true, false) => below,
                (false, true) => below.reverse(),
                _ => crate::datatype3::compare_values(a.as_ref(), b.as_ref(), key.collation),
            };
            o == op || (or_equal && o == Ordering::Equal)
        };
        // Where adding the offset to an integer rounds (beyond 2^53) or overflows, SQLite's
        // cursors take steps this model does not follow: refused, never guessed.
        let offsets: Vec<&Value> = [&f.start, &f.end]
            .into_iter()
            .filter_map(|b| match b {
                FrameBound::Preceding(o) | FrameBound::Following(o) => Some(o),
                _ => None,
            })
            .collect();
        let exact = |k: i64| {
            offsets.iter().all(|o| match o {
                Value::Integer(i) => k.checked_add(*i).is_some() && k.checked_sub(*i).is_some(),
                _ => k.unsigned_abs() <= 1 << 53,
            })
        };
        if self
            .rows
            .iter()
            .any(|r| matches!(r[slot], Value::Integer(k) if !exact(k)))
        {
            return Err(
                "not supported by corescan query: a RANGE frame with an offset over \
                        integers whose sum with it rounds or overflows (beyond 2^53)"
                    .into(),
            );
        }
        let mut frames = Vec::with_capacity(n);
        let (mut start, mut end) = (0usize, 0usize);
        for j in 0..n {
            let current = &self.rows[group_of(j)][slot];
            let (ps, pe) = self.peers(j);
            let s = match &f.start {
                FrameBound::UnboundedPreceding => 0,
                FrameBound::CurrentRow => ps,
                FrameBound::UnboundedFollowing => n,
                // SQLite removes rows from the start after returning a row, testing them
                // against the next: the partition's first group is returned before any test.
                FrameBound::Preceding(_)
                    if self.group[j] == 0 && !matches!(f.end, FrameBound::Preceding(_)) =>
                {
                    0
                }
                FrameBound::Preceding(off) => {
                    // Past each group while `start + off >= current` fails.
                    while start < n
                        && !test(
                            &moved(&self.rows[start][slot], off)?,
                            current,
                            Ordering::Greater,
                            true,
                        )
                    {
                        start = self.group_start[self.group[start] + 1];
                    }
                    start
                }
                FrameBound::Following(off) => {
                    // Past each group while `current + off <= start` fails.
                    let target = moved(current, off)?;
                    while start < n && !test(&target, &self.rows[start][slot], Ordering::Less, true)
                    {
                        start = self.group_start[self.group[start] + 1];
                    }
                    start
                }
            };
            let e = match &f.end {
                FrameBound::UnboundedFollowing => n,
                FrameBound::CurrentRow => pe,
                FrameBound::UnboundedPreceding => 0,
                FrameBound::Preceding(off) => {
                    // Each group while `end + off > current` fails.
                    while end < n
                        && !test(
                            &moved(&self.rows[end][slot], off)?,
                            current,
                            Ordering::Greater,
                            false,
                        )
                    {
                        end = self.group_start[self.group[end] + 1];
                    }
                    end
                }
                FrameBound::Following(off) => {
                    // Each group while `current + off >= end` holds.
                    let target = moved(current, off)?;
                    while end < n && test(&target, &self.rows[end][slot], Ordering::Greater, true) {
                        end = self.group_start[self.group[end] + 1];
                    }
                    end
                }
            };
            frames.push((s, e));
        }
        Ok(frames)
    }

    /// One call's value at every row.
    fn call(&self, call: &WindowCall, frames: &[(usize, usize)]) -> Result<Vec<Value>, String> {
        let n = self.len();
        let arg = |j: usize, k: usize| -> &Value { &self.rows[j][call.args[k]] };
        let mut out = Vec::with_capacity(n);
        match &call.func {
            WindowFunc::RowNumber => out.extend((1..=n).map(|j| Value::Integer(j as i64))),
            WindowFunc::Rank => {
                out.extend((0..n).map(|j| Value::Integer(self.peers(j).0 as i64 + 1)))
            }
            WindowFunc::DenseRank => {
                out.extend((0..n).map(|j| Value::Integer(self.group[j] as i64 + 1)))
            }
            WindowFunc::PercentRank => out.extend((0..n).map(|j| {
                Value::Real(if n > 1 {
                    self.peers(j).0 as f64 / (n - 1) as f64
                } else {
                    0.0
                })
            })),
            WindowFunc::CumeDist => {
                out.extend((0..n).map(|j| Value::Real(self.peers(j).1 as f64 / n as f64)))
            }
            WindowFunc::Ntile => {
                // The argument of the partition's first row (`ntileStepFunc`).
                let buckets = arg(0, 0).as_ref().to_i64().unwrap_or(0);
                if buckets <= 0 {
                    return Err("argument of ntile must be a positive integer".into());
                }
                let total = n as i64;
                let size = total / buckets;
                for row in 0..total {
                    out.push(Value::Integer(if size == 0 {
                        row + 1
                    } else {
                        let large = total - buckets * size;
                        let small = large * (size + 1);
                        if row < small {
                            1 + row / (size + 1)
                        } else {
                            1 + large + (row - small) / size
                        }
                    }));
                }
            }
            WindowFunc::Lag | WindowFunc::Lead => {
                let lead = call.func == WindowFunc::Lead;
                for j in 0..n {
                    let default = if call.args.len() > 2 {
                        arg(j, 2).clone()
                    } else {
                        Value::Null
                    };
                    let at = match call.args.get(1) {
                        None => Some(if lead { j as i64 + 1 } else { j as i64 - 1 }),
                        Some(&slot) => moved(j, &self.rows[j][slot], lead)?,
                    };
                    out.push(match at {
                        Some(t) if (0..n as i64).contains(&t) => arg(t as usize, 0).clone(),
                        _ => default,
                    });
                }
            }
            WindowFunc::FirstValue | WindowFunc::LastValue | WindowFunc::NthValue => {
                for (j, &(s, e)) in frames.iter().enumerate() {
                    let pick = match call.func {
                        WindowFunc::FirstValue => Some(s),
                        WindowFunc::LastValue => e.checked_sub(1),
                        _ => {
                            let k = nth(arg(j, 1))?;
                            s.checked_add(k - 1)
                        }
                    };
                    out.push(match pick {
                        Some(p) if p >= s && p < e => arg(p, 0).clone(),
                        _ => Value::Null,
                    });
                }
            }
            WindowFunc::Aggregate(spec) => return self.aggregate(call, spec, frames),
        }
        Ok(out)
    }

    /// An aggregate over each row's frame. SQLite computes a frame that does not start at
    /// the partition's first row with `sum`'s inverse (`sumInverse`): its state stays
    /// approximate (a real) once a value that is not an integer has been stepped into it,
    /// even after that row left the frame, and the rows from the partition's first to the
    /// frame's end have all been stepped by then. So such a `sum` is a real from the first
    /// row whose frame ends after such a value, an integer before. Its real is NaN (a NULL)
    /// for good once infinities of both signs were stepped or one left the frame, for
    /// `total` and `avg` too.
    fn aggregate(
        &self,
        call: &WindowCall,
        spec: &AggSpec,
        frames: &[(usize, usize)],
    ) -> Result<Vec<Value>, String> {
        let inverse = !matches!(call.frame.start, FrameBound::UnboundedPreceding);
        if spec.func == AggFunc::GroupConcat && inverse {
            return Ok(self.group_concat_inverse(call, spec, frames));
        }
        let summing = matches!(spec.func, AggFunc::Sum | AggFunc::Total | AggFunc::Avg);
        if !summing || !inverse {
            return self.frame_values(call, spec, frames).into_iter().collect();
        }
        // Rows [0, k) hold a value that makes a sum approximate: sticky[k]; values[k] values
        // the sum adds (frames of none are NULL); infinities of either sign, infinite[k].
        let n = self.len();
        let mut sticky = Vec::with_capacity(n + 1);
        let mut values = Vec::with_capacity(n + 1);
        let mut infinite = Vec::with_capacity(n + 1);
        sticky.push(false);
        values.push(0usize);
        infinite.push((false, false));
        for p in 0..n {
            let mut probe = SumState::default();
            let mut inf = infinite[p];
            if self.counts(call, p) {
                let v = self.arg_of(call, p);
                probe.update(v);
                if probe.approx() {
                    let r = v.to_f64().unwrap_or(0.0);
                    inf.0 |= r == f64::INFINITY;
                    inf.1 |= r == f64::NEG_INFINITY;
                }
            }
            sticky.push(sticky[p] || probe.approx());
            values.push(values[p] + usize::from(probe.count() > 0));
            infinite.push(inf);
        }
        let ints = self.frame_values(call, spec, frames);
        let reals = if spec.func == AggFunc::Sum && sticky[n] {
            let total = AggSpec {
                func: AggFunc::Total,
                ..spec.clone()
            };
            self.frame_values(call, &total, frames)
        } else {
            Vec::new()
        };
        let mut out = Vec::with_capacity(n);
        for (j, int) in ints.into_iter().enumerate() {
            let (s, e) = frames[j];
            let empty = e <= s || values[e] == values[s];
            // SQLite's running real once an infinity entered: infinities of both signs, or
            // one that left again (inf - inf), make it NaN for good, a NULL.
            let (pos, neg) = infinite[e];
            let gone = infinite[s.min(e)];
            let nan = (pos && neg) || gone.0 || gone.1;
            out.push(if nan || (spec.func == AggFunc::Sum && empty) {
                Value::Null
            } else if spec.func == AggFunc::Sum && sticky[e] {
                reals[j].clone()?
            } else {
                int?
            });
        }
        Ok(out)
    }

    /// `group_concat` over frames SQLite slides with `groupConcatInverse`, which removes the
    /// first value and one separator's length from the front of the text: when the text
    /// becomes empty (a frame left holding only empty strings) the next value starts it
    /// again without a separator, and a frame of empty strings is `''`. SQLite removes the
    /// rows leaving before it adds those entering (between two rows' values), except for
    /// `RANGE` frames with both ends before or both after the row.
    fn group_concat_inverse(
        &self,
        call: &WindowCall,
        spec: &AggSpec,
        frames: &[(usize, usize)],
    ) -> Vec<Value> {
        let f = &call.frame;
        let step_first = f.units == FrameUnits::Range
            && matches!(
                (&f.start, &f.end),
                (FrameBound::Preceding(_), FrameBound::Preceding(_))
                    | (FrameBound::Following(_), FrameBound::Following(_))
            );
        let separator: Vec<u8> = match &spec.separator {
            None => b",".to_vec(),
            Some(v) => v
                .as_ref()
                .to_text()
                .map_or_else(Vec::new, |t| t.into_owned()),
        };
        let mut state = ConcatState {
            separator,
            ..ConcatState::default()
        };
        let value = |p: usize| {
            if self.counts(call, p) {
                self.arg_of(call, p).to_text()
            } else {
                None
            }
        };
        if let (FrameBound::Following(a), FrameBound::Following(b)) = (&f.start, &f.end) {
            let (a, b) = (offset_count(a), offset_count(b));
            let bounds: Option<Vec<usize>> = match f.units {
                FrameUnits::Rows => Some((0..=self.len()).collect()),
                FrameUnits::Groups => Some(self.group_start.clone()),
                FrameUnits::Range => None,
            };
            if let Some(bounds) = bounds.filter(|_| a <= b) {
                return following_frames(&bounds, a, b, &mut state, value);
            }
        }
        let (mut stepped, mut removed) = (0usize, 0usize);
        let mut out = Vec::with_capacity(frames.len());
        for &(s, e) in frames {
            let e = e.max(s);
            if !step_first {
                // Only rows already stepped can be removed first (a frame starting after
                // the row steps them on its way).
                while removed < s.min(stepped) {
                    state.remove(value(removed).as_deref());
                    removed += 1;
                }
            }
            while stepped < e {
                state.step(value(stepped).as_deref());
                stepped += 1;
            }
            while removed < s {
                state.remove(value(removed).as_deref());
                removed += 1;
            }
            out.push(state.value());
        }
        out
    }

    /// Whether row `p` of the partition passes the call's `FILTER`.
    fn counts(&self, call: &WindowCall, p: usize) -> bool {
        call.filter
            .is_none_or(|f| self.rows[p][f] == Value::Integer(1))
    }

    /// The call's (first) argument at row `p` (NULL for `count(*)`).
    fn arg_of(&self, call: &WindowCall, p: usize) -> ValueRef<'_> {
        call.args
            .first()
            .map_or(ValueRef::Null, |&a| self.rows[p][a].as_ref())
    }

    /// `spec` over each row's frame, each value computed from the frame's rows alone.
    fn frame_values(
        &self,
        call: &WindowCall,
        spec: &AggSpec,
        frames: &[(usize, usize)],
    ) -> Vec<Result<Value, String>> {
        let n = self.len();
        // SQLite keeps a sliding frame's min()/max() candidates in an index ordered by value
        // and then by arrival, and reads its last entry: of equal values (1 and 1.0, 'a'
        // and 'A' under NOCASE) the last in the frame wins; minmaxStep keeps the first.
        let last_ties = matches!(spec.func, AggFunc::Min | AggFunc::Max)
            && !matches!(call.frame.start, FrameBound::UnboundedPreceding);
        let step = |state: &mut AggState, p: usize| {
            if self.counts(call, p) {
                let order = if last_ties { -(p as i64) } else { p as i64 };
                state.update(spec, self.arg_of(call, p), order);
            }
        };
        let value = |state: &AggState| state.clone().finish(spec);
        let mut out = Vec::with_capacity(n);
        let f = &call.frame;
        if matches!(f.start, FrameBound::UnboundedPreceding) {
            // Frames [0, end): running forwards, the end never moving back.
            let mut state = AggState::new(spec);
            let (mut reached, mut last) = (0, None);
            for &(_, end) in frames {
                if last.is_none() || end > reached {
                    while reached < end {
                        step(&mut state, reached);
                        reached += 1;
                    }
                    last = Some(value(&state));
                }
                out.push(last.clone().unwrap_or(Ok(Value::Null)));
            }
        } else if matches!(f.end, FrameBound::UnboundedFollowing) {
            // Frames [start, n): running backwards, the start never moving forward.
            let mut state = AggState::new(spec);
            let (mut reached, mut last) = (n, None);
            out.resize(n, Ok(Value::Null));
            for j in (0..n).rev() {
                let start = frames[j].0;
                if last.is_none() || start < reached {
                    while reached > start {
                        reached -= 1;
                        step(&mut state, reached);
                    }
                    last = Some(value(&state));
                }
                out[j] = last.clone().unwrap_or(Ok(Value::Null));
            }
        } else {
            let mut last: Option<((usize, usize), Result<Value, String>)> = None;
            for &(s, e) in frames {
                if let Some((at, v)) = &last {
                    if *at == (s, e) || (s >= e && at.0 >= at.1) {
                        out.push(v.clone());
                        continue;
                    }
                }
                let mut state = AggState::new(spec);
                for p in s..e.max(s) {
                    step(&mut state, p);
                }
                let v = value(&state);
                out.push(v.clone());
                last = Some(((s, e), v));
            }
        }
        out
    }
}

/// `group_concat`'s state as SQLite keeps it for a sliding frame (`GroupConcatCtx` with a
/// constant separator).
#[derive(Default)]
struct ConcatState {
    separator: Vec<u8>,
    text: Vec<u8>,
    /// Whether a value started the text (`mxAlloc != 0`): the next one is preceded by the
    /// separator.
    started: bool,
    /// Values in the frame (`nAccum`).
    values: i64,
    /// The separator's length when the text was started (`nFirstSepLength`).
    first_separator: usize,
}

impl ConcatState {
    /// `groupConcatStep` (NULL is skipped).
    fn step(&mut self, v: Option<&[u8]>) {
        let Some(v) = v else { return };
        if self.started {
            self.text.extend_from_slice(&self.separator);
        } else {
            self.first_separator = self.separator.len();
        }
        self.started = true;
        self.values += 1;
        self.text.extend_from_slice(v);
    }

    /// `groupConcatInverse`: the value and one separator's length off the front.
    fn remove(&mut self, v: Option<&[u8]>) {
        let Some(v) = v else { return };
        self.values -= 1;
        let n = v.len() + self.first_separator;
        if n >= self.text.len() {
            self.text.clear();
        } else {
            self.text.drain(..n);
        }
        if self.text.is_empty() {
            self.started = false;
        }
    }

    /// `groupConcatValue`.
    fn value(&self) -> Value {
        if !self.text.is_empty() {
            Value::Text(self.text.clone())
        } else if self.values > 0 {
            Value::Text(Vec::new())
        } else {
            Value::Null
        }
    }
}

/// `group_concat` over `ROWS` or `GROUPS BETWEEN a FOLLOWING AND b FOLLOWING` (`a <= b`) in
/// the order SQLite's `sqlite3WindowCodeStep` runs its steps, inverses and returned rows for
/// that frame, unit by unit (a row, or a group of peers between `bounds`): each unit after
/// the partition's first steps the next unit into the frame, returns one once `b` units were
/// stepped ahead of it, and removes one once `b - a` were; the flush steps the last unit,
/// then alternates returning and removing. The interleaving shows where empty strings let
/// `groupConcatInverse` empty the text early (the differential tester's table seed
/// 16448406271645900388: `'8'` where removing the rows before it in one go gives `'|8'`).
fn following_frames<'v>(
    bounds: &[usize],
    a: usize,
    b: usize,
    state: &mut ConcatState,
    value: impl Fn(usize) -> Option<std::borrow::Cow<'v, [u8]>>,
) -> Vec<Value> {
    let units = bounds.len() - 1;
    let mut out = vec![Value::Null; bounds[units]];
    if units == 0 {
        return out;
    }
    let rows = |u: usize| bounds[u]..bounds[u + 1];
    let step = |state: &mut ConcatState, u: usize| {
        rows(u).for_each(|p| state.step(value(p).as_deref()));
    };
    let remove = |state: &mut ConcatState, u: usize| {
        rows(u).for_each(|p| state.remove(value(p).as_deref()));
    };
    let mut give = |state: &ConcatState, u: usize| {
        let v = state.value();
        rows(u).for_each(|p| out[p] = v.clone());
    };
    // `OP_IfPos`: skipped while the countdown is positive (and counted down).
    let due = |countdown: &mut usize| {
        if *countdown > 0 {
            *countdown -= 1;
            false
        } else {
            true
        }
    };
    let (mut to_return, mut to_remove) = (b, b - a);
    let (mut end, mut start, mut current) = (0, 0, 0);
    for _ in 1..units {
        step(state, end);
        end += 1;
        if due(&mut to_return) {
            give(state, current);
            current += 1;
        }
        if due(&mut to_remove) {
            remove(state, start);
            start += 1;
        }
    }
    step(state, end);
    loop {
        if due(&mut to_return) {
            give(state, current);
            current += 1;
            if current == units {
                break;
            }
        }
        if due(&mut to_remove) {
            remove(state, start);
            start += 1;
            if start == units {
                break;
            }
        }
    }
    while current < units {
        give(state, current);
        current += 1;
    }
    out
}

/// A non-negative frame offset as a count of rows or groups (checked at planning).
fn offset_count(off: &Value) -> usize {
    let k = match off {
        Value::Integer(i) => *i,
        other => other.as_ref().to_i64().unwrap_or(0),
    };
    usize::try_from(k.max(0)).unwrap_or(usize::MAX)
}

/// `lag`/`lead`'s target row from row `j` with the offset `off` (SQLite adds or subtracts it
/// from the row's position, then seeks that position: a NULL or a position that is not an
/// integer finds none).
fn moved(j: usize, off: &Value, lead: bool) -> Result<Option<i64>, String> {
    let op = if lead { ArithOp::Add } else { ArithOp::Sub };
    let e = Expr::Arith(
        op,
        Box::new(Expr::Literal(Value::Integer(j as i64))),
        Box::new(Expr::Literal(off.clone())),
    );
    Ok(
        match apply_column_affinity(eval(&e, &[])?.as_ref(), Affinity::Numeric) {
            Value::Integer(t) => Some(t),
            _ => None,
        },
    )
}

/// `nth_value`'s `N`: a positive integer (an integral real is one; text is read as a number).
fn nth(v: &Value) -> Result<usize, String> {
    let bad = || "second argument to nth_value must be a positive integer".to_string();
    let k = match apply_column_affinity(v.as_ref(), Affinity::Numeric) {
        Value::Integer(i) => i,
        Value::Real(r) if (r as i64) as f64 == r => r as i64,
        _ => return Err(bad()),
    };
    if k <= 0 {
        return Err(bad());
    }
    Ok(usize::try_from(k).unwrap_or(usize::MAX))
}
