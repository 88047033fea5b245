//! A grouped query's groups beyond its memory budget: runs of groups sorted by key, written
//! to the scratch directory and read back in key order for the merge.
//!
//! An executor whose group table outgrows its share of the budget (`--memory`, split as for
//! full sorts: [`super::sort::SortSpace`]) sorts its groups by key (SQLite's group order),
//! writes them to an unnamed file in the scratch directory ([`GroupWriter`]) and starts an
//! empty table: a key met again lands in a new group, and the merge combines the groups of
//! one key from every run in scan order (the runs of an executor in the order written,
//! before its groups still in memory), so aggregate states, the shown keys and the running
//! sums' overflow checks see the rows in the order they would have without spilling.
//!
//! A run is a sequence of records (a `u32` length, then the group in serde's `postcard`
//! encoding); every [`MARK_EVERY`]th group's key and place are kept in memory
//! ([`SpilledGroups`]), so that the merge can cut a run into slices of the key space and read
//! each slice from near its start ([`GroupReader`]) on its own thread.
//!
//! Layering: below the kernel (which spills) and [`super::group_merge`] (which merges runs,
//! and compacts an executor's runs once there are [`MAX_RUNS`] of one level); above
//! [`super::groups`] and the value types.

use std::cmp::Ordering;
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::datatype3::Collation;

use super::aggregate::AggState;
use super::groups::{compare_key_values, key_prefix, Group};
use super::sort::SpillError;

/// Every this many groups of a run, its key and place are kept in memory.
pub const MARK_EVERY: usize = 512;

/// An executor merges its spilled runs into one once it has this many of the same level (a
/// level is how many such merges went into a run), so that a query holds a bounded number
/// of files open and the final merge a bounded number of readers, whatever the budget.
pub const MAX_RUNS: usize = 16;

/// Bytes of a run's write buffer and of each reader's buffer.
const BUFFER: usize = 128 * 1024;

/// A group's key as a bound: its [`key_prefix`] and its values.
pub type KeyBound = (u128, super::groups::GroupKeys);

/// Where one group of a run starts (every [`MARK_EVERY`]th): its byte offset and its key.
#[derive(Debug, Clone, PartialEq)]
struct Mark {
    at: u64,
    key: KeyBound,
}

/// A run of groups sorted by key, written to an unnamed file in the scratch directory (gone
/// with its last handle, even if the process is killed).
#[derive(Clone)]
pub struct SpilledGroups {
    file: Arc<File>,
    dir: PathBuf,
    /// Its groups.
    pub groups: usize,
    /// Its bytes.
    pub bytes: u64,
    /// How many merges of runs went into it (0: written from a group table).
    pub level: u32,
    /// Shared by the run's readers (a merge cut into many slices reads a run from as many
    /// marks).
    marks: Arc<[Mark]>,
    /// The lowest and highest rowid its groups are tagged with (before `shift`).
    span: Option<(i64, i64)>,
    /// Added to every rowid tag as the groups are read ([`super::merge::Partial::shift_rowids`]).
    shift: i64,
}

impl fmt::Debug for SpilledGroups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} spilled groups ({} bytes, level {})",
            self.groups, self.bytes, self.level
        )
    }
}

impl PartialEq for SpilledGroups {
    /// Runs are equal when they hold as many groups in as many bytes (for tests).
    fn eq(&self, other: &Self) -> bool {
        (self.groups, self.bytes, self.span, self.shift)
            == (other.groups, other.bytes, other.span, other.shift)
    }
}

impl SpilledGroups {
    /// The lowest and highest rowid tag of its groups, as read.
    pub fn rowid_span(&self) -> Option<(i64, i64)> {
        self.span.map(|(lo, hi)| (lo + self.shift, hi + self.shift))
    }

    /// Adds `by` to every rowid tag of its groups as they are read.
    pub fn shift_rowids(&mut self, by: i64) {
        self.shift += by;
    }

    /// The keys of up to `count` groups at even places of the run (from its marks), in key
    /// order, none of them the first group: where the merge may cut the key space.
    pub fn splitters(&self, count: usize) -> Vec<KeyBound> {
        let mut picked: Vec<usize> = (1..count)
            .map(|i| self.marks.len() * i / count)
            .filter(|&m| m > 0)
            .collect();
        picked.dedup();
        picked
            .into_iter()
            .map(|m| self.marks[m].key.clone())
            .collect()
    }

    /// A reader of the run's groups whose keys are at or above `lower` and below `upper`
    /// (`None`: unbounded), starting at the last mark below `lower`.
    pub fn reader(
        &self,
        collations: &[Collation],
        lower: Option<KeyBound>,
        upper: Option<KeyBound>,
    ) -> GroupReader {
        let start = lower.as_ref().map_or(0, |l| {
            let past = self
                .marks
                .partition_point(|m| compare_bound(&m.key, l, collations) == Ordering::Less);
            past.checked_sub(1).map_or(0, |m| self.marks[m].at)
        });
        GroupReader {
            run: self.clone(),
            collations: collations.to_vec(),
            lower,
            upper,
            at: start,
            buf: Vec::new(),
            pos: 0,
        }
    }

    fn error(&self, what: impl fmt::Display) -> SpillError {
        SpillError {
            dir: self.dir.clone(),
            what: format!("reading spilled groups: {what}"),
        }
    }
}

/// Orders two key bounds as their groups' keys order.
fn compare_bound(a: &KeyBound, b: &KeyBound, collations: &[Collation]) -> Ordering {
    a.0.cmp(&b.0)
        .then_with(|| compare_key_values(&a.1, &b.1, collations))
}

/// Orders group `g`'s key against `bound`.
pub fn compare_to_bound(g: &Group, bound: &KeyBound, collations: &[Collation]) -> Ordering {
    key_prefix(g, collations)
        .cmp(&bound.0)
        .then_with(|| compare_key_values(&g.keys, &bound.1, collations))
}

/// The key bound of group `g`.
pub fn bound_of(g: &Group, collations: &[Collation]) -> KeyBound {
    (key_prefix(g, collations), g.keys.clone())
}

/// Writes groups, in key order, to a new run.
pub struct GroupWriter {
    out: BufWriter<File>,
    dir: PathBuf,
    collations: Vec<Collation>,
    level: u32,
    groups: usize,
    bytes: u64,
    marks: Vec<Mark>,
    span: Option<(i64, i64)>,
    record: Vec<u8>,
}

impl GroupWriter {
    /// A new run of level `level` in the scratch directory `dir`.
    pub fn create(dir: &Path, collations: &[Collation], level: u32) -> Result<Self, SpillError> {
        let file = tempfile::tempfile_in(dir).map_err(|e| SpillError {
            dir: dir.to_path_buf(),
            what: format!("creating a file for spilled groups: {e}"),
        })?;
        Ok(GroupWriter {
            out: BufWriter::with_capacity(BUFFER, file),
            dir: dir.to_path_buf(),
            collations: collations.to_vec(),
            level,
            groups: 0,
            bytes: 0,
            marks: Vec::new(),
            span: None,
            record: Vec::new(),
        })
    }

    fn error(&self, e: impl fmt::Display) -> SpillError {
        SpillError {
            dir: self.dir.clone(),
            what: format!("writing spilled groups: {e}"),
        }
    }

    /// Appends `g` (its key above the last one's).
    pub fn push(&mut self, g: &Group) -> Result<(), SpillError> {
        if self.groups.is_multiple_of(MARK_EVERY) {
            self.marks.push(Mark {
                at: self.bytes,
                key: bound_of(g, &self.collations),
            });
        }
        for_each_tag(g, |t| {
            let (lo, hi) = self.span.get_or_insert((t, t));
            *lo = (*lo).min(t);
            *hi = (*hi).max(t);
        });
        let mut record = std::mem::take(&mut self.record);
        record.clear();
        record.extend_from_slice(&[0; 4]);
        let mut record = postcard::to_extend(g, record).map_err(|e| self.error(e))?;
        let len = u32::try_from(record.len() - 4).map_err(|_| self.error("a group too large"))?;
        record[..4].copy_from_slice(&len.to_le_bytes());
        self.out.write_all(&record).map_err(|e| self.error(e))?;
        self.bytes += record.len() as u64;
        self.groups += 1;
        self.record = record;
        Ok(())
    }

    /// The run written.
    pub fn finish(self) -> Result<SpilledGroups, SpillError> {
        let dir = self.dir.clone();
        let file = self.out.into_inner().map_err(|e| SpillError {
            dir: dir.clone(),
            what: format!("writing spilled groups: {}", e.error()),
        })?;
        Ok(SpilledGroups {
            file: Arc::new(file),
            dir,
            groups: self.groups,
            bytes: self.bytes,
            level: self.level,
            marks: self.marks.into(),
            span: self.span,
            shift: 0,
        })
    }
}

/// Writes `groups` (sorted by key) to a new run of level 0 in `dir`.
pub fn spill(
    dir: &Path,
    collations: &[Collation],
    groups: Vec<Group>,
) -> Result<SpilledGroups, SpillError> {
    let mut w = GroupWriter::create(dir, collations, 0)?;
    for g in &groups {
        w.push(g)?;
    }
    drop(groups);
    w.finish()
}

/// Reads a run's groups within a range of keys, in key order (with the run's rowid shift
/// applied). Several readers read one run at once: each reads at its own offsets.
pub struct GroupReader {
    run: SpilledGroups,
    collations: Vec<Collation>,
    lower: Option<KeyBound>,
    upper: Option<KeyBound>,
    /// The file offset of `buf`'s first byte.
    at: u64,
    buf: Vec<u8>,
    pos: usize,
}

impl GroupReader {
    /// Makes `want` bytes from `pos` available in `buf`; false at the end of the run.
    fn fill(&mut self, want: usize) -> Result<bool, SpillError> {
        if self.buf.len() - self.pos >= want {
            return Ok(true);
        }
        self.at += self.pos as u64;
        self.buf.drain(..self.pos);
        self.pos = 0;
        let left = self
            .run
            .bytes
            .saturating_sub(self.at + self.buf.len() as u64);
        let need = want - self.buf.len();
        if (left as usize) < need {
            if left == 0 && self.buf.is_empty() {
                return Ok(false);
            }
            return Err(self.run.error("a run ends inside a group"));
        }
        let read = (left as usize).min(need.max(BUFFER));
        let from = self.at + self.buf.len() as u64;
        let old = self.buf.len();
        self.buf.resize(old + read, 0);
        self.run
            .file
            .read_exact_at(&mut self.buf[old..], from)
            .map_err(|e| self.run.error(e))?;
        Ok(true)
    }

    /// The next group in the range, or `None` after its last.
    pub fn next_group(&mut self) -> Result<Option<Group>, SpillError> {
        loop {
            if !self.fill(4)? {
                return Ok(None);
            }
            let len_bytes: [u8; 4] = self.buf[self.pos..self.pos + 4]
                .try_into()
                .expect("4 bytes");
            let len = u32::from_le_bytes(len_bytes) as usize;
            if !self.fill(4 + len)? {
                return Err(self.run.error("a run ends inside a group"));
            }
            let record = &self.buf[self.pos + 4..self.pos + 4 + len];
            let mut g: Group = postcard::from_bytes(record).map_err(|e| self.run.error(e))?;
            self.pos += 4 + len;
            if let Some(l) = &self.lower {
                if compare_to_bound(&g, l, &self.collations) == Ordering::Less {
                    continue;
                }
            }
            if let Some(u) = &self.upper {
                if compare_to_bound(&g, u, &self.collations) != Ordering::Less {
                    // Past the range: nothing more to read.
                    self.at = self.run.bytes;
                    self.buf.clear();
                    self.pos = 0;
                    return Ok(None);
                }
            }
            if self.run.shift != 0 {
                let by = self.run.shift;
                for_each_tag_mut(&mut g, |t| *t += by);
            }
            return Ok(Some(g));
        }
    }
}

/// Calls `f` with every rowid tag of a group: the row its keys came from and those its
/// aggregate states keep.
pub fn for_each_tag(g: &Group, mut f: impl FnMut(i64)) {
    f(g.keys_rowid);
    for s in &g.states {
        match s {
            AggState::Best(Some((_, at))) => f(*at),
            AggState::Distinct(seen) => seen.values().for_each(|(_, at)| f(*at)),
            AggState::Concat(parts) => parts.iter().for_each(|(at, _)| f(*at)),
            AggState::Json(rows) => rows.rowids().for_each(&mut f),
            AggState::JsonDistinct(seen) => seen.values().for_each(|(_, at, _)| f(*at)),
            AggState::Ordered(rows) => rows.iter().for_each(|r| f(r.rowid)),
            _ => {}
        }
    }
}

/// [`for_each_tag`], to change them.
pub fn for_each_tag_mut(g: &mut Group, mut f: impl FnMut(&mut i64)) {
    f(&mut g.keys_rowid);
    for s in &mut g.states {
        match s {
            AggState::Best(Some((_, at))) => f(at),
            AggState::Distinct(seen) => seen.values_mut().for_each(|(_, at)| f(at)),
            AggState::Concat(parts) => parts.iter_mut().for_each(|(at, _)| f(at)),
            AggState::Json(rows) => rows.rowids_mut().for_each(&mut f),
            AggState::JsonDistinct(seen) => seen.values_mut().for_each(|(_, at, _)| f(at)),
            AggState::Ordered(rows) => rows.iter_mut().for_each(|r| f(&mut r.rowid)),
            _ => {}
        }
    }
}

/// What a grouped query's executors and merge did, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Groups after the merge (before `HAVING`).
    pub groups: u64,
    /// The peak bytes of the executors' group tables, all together (an estimate, and an
    /// upper bound: the sum of each one's peak).
    pub table_bytes: u64,
    /// Runs written to the scratch directory (merged runs included).
    pub spilled_runs: u64,
    /// Bytes written to the scratch directory.
    pub spilled_bytes: u64,
}

impl GroupStats {
    /// Adds another executor's figures.
    pub fn add(&mut self, o: &GroupStats) {
        self.groups += o.groups;
        self.table_bytes += o.table_bytes;
        self.spilled_runs += o.spilled_runs;
        self.spilled_bytes += o.spilled_bytes;
    }
}

/// An executor's groups once its scan is done: the runs it spilled, in the order written,
/// then the groups still in memory, every run sorted by key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupRuns {
    /// The spilled runs, in the order written.
    pub spilled: Vec<SpilledGroups>,
    /// The groups in memory, sorted by key.
    pub memory: Vec<Group>,
    /// The first failure to write a run: the query's error.
    pub failed: Option<SpillError>,
    /// Its figures.
    pub stats: GroupStats,
}

impl GroupRuns {
    /// Groups sorted by key, all in memory.
    pub fn in_memory(memory: Vec<Group>) -> Self {
        GroupRuns {
            memory,
            ..GroupRuns::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::aggregate::{KeyPart, SumState};
    use crate::value::Value;
    use std::collections::HashMap;

    fn group(k: i64) -> Group {
        let mut sum = SumState::default();
        sum.update(crate::value::ValueRef::Integer(k));
        sum.update(crate::value::ValueRef::Real(0.25));
        sum.update(crate::value::ValueRef::Real(1e300));
        let mut seen = HashMap::new();
        seen.insert(KeyPart::Text(b"x".to_vec()), (Value::text("X"), k + 1));
        let count_spec = crate::query::ir::AggSpec {
            distinct: true,
            ..crate::query::ir::AggSpec::new(crate::query::ir::AggFunc::Count, None)
        };
        let mut distinct_count = AggState::new(&count_spec);
        for v in [
            Value::Integer(k),
            Value::Real(2.0),
            Value::text("t"),
            Value::Real(0.5),
        ] {
            distinct_count.update(&count_spec, v.as_ref(), k);
        }
        assert!(matches!(distinct_count, AggState::CountDistinct(_)));
        Group {
            keys: smallvec::smallvec![Value::Integer(k), Value::text(format!("k{k}"))],
            keys_rowid: k * 10,
            states: smallvec::smallvec![
                AggState::Count(k),
                AggState::Sum(sum),
                AggState::Best(Some((Value::Blob(vec![k as u8; 3]), k))),
                AggState::Distinct(Box::new(seen)),
                AggState::Concat(vec![(k, b"a".to_vec())]),
                AggState::Best(None),
                distinct_count,
            ],
        }
    }

    #[test]
    fn runs_read_back_whole_and_by_key_range() {
        let dir = tempfile::tempdir().unwrap();
        let collations = [Collation::Binary, Collation::NoCase];
        let groups: Vec<Group> = (0..2000).map(group).collect();
        let mut run = spill(dir.path(), &collations, groups.clone()).unwrap();
        assert_eq!(run.groups, 2000);
        assert_eq!(run.rowid_span(), Some((0, 19990)));
        let read_all = |r: &mut GroupReader| {
            let mut out = Vec::new();
            while let Some(g) = r.next_group().unwrap() {
                out.push(g);
            }
            out
        };
        assert_eq!(read_all(&mut run.reader(&collations, None, None)), groups);
        // Cut at the splitters: every group in exactly one slice, in order.
        let cuts = run.splitters(3);
        assert_eq!(cuts.len(), 2);
        let mut bounds = vec![None];
        bounds.extend(cuts.into_iter().map(Some));
        bounds.push(None);
        let mut joined = Vec::new();
        for w in bounds.windows(2) {
            joined.extend(read_all(&mut run.reader(
                &collations,
                w[0].clone(),
                w[1].clone(),
            )));
        }
        assert_eq!(joined, groups);
        // A shift moves every tag as the groups are read.
        run.shift_rowids(5);
        assert_eq!(run.rowid_span(), Some((5, 19995)));
        let first = run.reader(&collations, None, None).next_group().unwrap();
        assert_eq!(first.map(|g| g.keys_rowid), Some(5));
    }

    #[test]
    fn a_missing_scratch_directory_is_a_spill_error() {
        let e = spill(
            Path::new("/nonexistent/scratch"),
            &[Collation::Binary],
            vec![group(1)],
        )
        .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/scratch"), "{e}");
    }
}
