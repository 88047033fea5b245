//! `corescan bench floor`: the memory-bandwidth floor of a warm scan, measured on the table
//! itself.
//!
//! A warm scan cannot be faster than reading its bytes once from memory. This experiment
//! reads exactly the bytes a scan of the table reads, the way the warm path reads them: the
//! table's leaf pages are split into the same ranges `q6` gives its executors (in file order,
//! [`partitioner::TablePlan::split`]), one thread per range is pinned to the CPU an executor
//! would use ([`engine::spread`]), and each sums every 8-byte word of its pages through a
//! read-only `mmap` of the file (so the kernel maps the page cache as it does for the `mmap`
//! backend: that cost is part of the floor). No record is decoded: the time left is memory,
//! page-table and fault work only. The page cache is expected to be warm (read the file once
//! first); the report says how many of the pages were resident before the first round.
//!
//! Rounds repeat the whole read (each with a fresh mapping, as each scan has); the result is
//! the median round with the minimum and maximum, in seconds from the threads' common start
//! to the last one's end, and the bytes per second that makes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use memmap2::Mmap;
use partitioner::{Extent, TablePlan};
use serde::Serialize;

use super::{ExperimentError, Result, Spread};

/// What to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FloorOptions {
    /// The database file.
    pub db: PathBuf,
    /// The table.
    pub table: String,
    /// Threads (one per range, pinned like executors).
    pub threads: usize,
    /// Rounds.
    pub repeat: usize,
}

/// What the floor measured.
#[derive(Debug, Clone, Serialize)]
pub struct FloorReport {
    /// The database file.
    pub db: String,
    /// The table.
    pub table: String,
    /// Leaf pages read per round.
    pub pages: u64,
    /// Bytes read per round.
    pub bytes: u64,
    /// The CPU each thread was pinned to.
    pub cpus: Vec<usize>,
    /// Percent of the leaf pages resident in the page cache before the first round.
    pub resident_pct: f64,
    /// Seconds per round, from the common start to the last thread's end.
    pub wall_s: Spread,
    /// Bytes per second of the median round, in GB/s.
    pub gb_per_s: f64,
    /// How the bytes were read.
    pub method: &'static str,
}

/// Measures the floor.
pub fn run_floor(opts: &FloorOptions) -> Result<FloorReport> {
    if opts.repeat == 0 || opts.threads == 0 {
        return Err(ExperimentError::Invalid(
            "--repeat and --cores must be at least 1".into(),
        ));
    }
    let plan = TablePlan::open(&opts.db, &opts.table)?;
    let page_size = plan.header.page_size as usize;
    let specs = engine::spread(opts.threads);
    let weights: Vec<u32> = specs.iter().map(|s| s.weight).collect();
    let ranges: Vec<Arc<Vec<Extent>>> = plan
        .split(&weights)
        .into_iter()
        .map(|r| Arc::new(r.extents))
        .collect();
    let pages: u64 = ranges
        .iter()
        .flat_map(|r| r.iter())
        .map(|e| u64::from(e.pages))
        .sum();
    let resident_pct = resident_pct(&opts.db, &ranges, page_size)?;
    let mut rounds = Vec::with_capacity(opts.repeat);
    let mut sink = 0u64;
    for _ in 0..opts.repeat {
        let (seconds, sum) = one_round(&opts.db, &ranges, &specs, page_size)?;
        rounds.push(seconds);
        sink = sink.wrapping_add(sum);
    }
    std::hint::black_box(sink);
    let wall_s = Spread::of(&rounds).expect("at least one round");
    let bytes = pages * page_size as u64;
    Ok(FloorReport {
        db: opts.db.display().to_string(),
        table: plan.table.name.clone(),
        pages,
        bytes,
        cpus: specs.iter().map(|s| s.cpu).collect(),
        resident_pct,
        gb_per_s: bytes as f64 / wall_s.median / 1e9,
        wall_s,
        method: "mmap (read-only, no hints), every 8-byte word of the leaf pages summed",
    })
}

/// A fresh read-only mapping of the whole file.
fn map(db: &Path) -> Result<Mmap> {
    let io = |op: &'static str| {
        move |source| ExperimentError::Io {
            path: db.to_path_buf(),
            op: op.into(),
            source,
        }
    };
    let file = std::fs::File::open(db).map_err(io("open"))?;
    // SAFETY: the mapping is only read; corescan never writes the file, and a writer that
    // truncates it under the measurement would end it with SIGBUS, as it would any mmap
    // reader (the scan's mmap backend guards against that; this measurement does not).
    unsafe { Mmap::map(&file) }.map_err(io("mmap"))
}

/// One round: every thread sums its range; the seconds from the common start to the last
/// end, and the sum (so that the reads are not optimised away).
fn one_round(
    db: &Path,
    ranges: &[Arc<Vec<Extent>>],
    specs: &[engine::ExecutorSpec],
    page_size: usize,
) -> Result<(f64, u64)> {
    let map = Arc::new(map(db)?);
    let start = Arc::new(Barrier::new(ranges.len() + 1));
    let threads: Vec<_> = ranges
        .iter()
        .zip(specs)
        .map(|(extents, spec)| {
            let (map, start, extents, cpu) =
                (map.clone(), start.clone(), extents.clone(), spec.cpu);
            std::thread::spawn(move || {
                core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
                start.wait();
                let began = Instant::now();
                let mut sum = 0u64;
                for e in extents.iter() {
                    let at = (e.first_page as usize - 1) * page_size;
                    let end = (at + e.pages as usize * page_size).min(map.len());
                    sum = sum.wrapping_add(sum_words(&map[at.min(end)..end]));
                }
                (began, Instant::now(), sum)
            })
        })
        .collect();
    start.wait();
    // From the first thread's start to the last one's end (measured by the threads: the
    // calling thread may not run again before they are done).
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    let mut total = 0u64;
    for t in threads {
        let (began, ended, sum) = t.join().map_err(|_| {
            ExperimentError::Invalid("a floor thread panicked while reading the mapping".into())
        })?;
        first = Some(first.map_or(began, |f| f.min(began)));
        last = Some(last.map_or(ended, |l| l.max(ended)));
        total = total.wrapping_add(sum);
    }
    let seconds = first
        .zip(last)
        .map_or(0.0, |(f, l)| l.duration_since(f).as_secs_f64());
    Ok((seconds, total))
}

/// The wrapping sum of the 8-byte words of `bytes` (four independent sums, so that the loop
/// is bound by memory, not by one chain of additions).
fn sum_words(bytes: &[u8]) -> u64 {
    let mut acc = [0u64; 4];
    let mut chunks = bytes.chunks_exact(32);
    for c in &mut chunks {
        for (a, w) in acc.iter_mut().zip(c.chunks_exact(8)) {
            *a = a.wrapping_add(u64::from_ne_bytes(w.try_into().expect("eight bytes")));
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(0u64, |s, &b| s.wrapping_add(u64::from(b)));
    acc.iter().fold(tail, |s, &a| s.wrapping_add(a))
}

/// Percent of the ranges' pages resident in the page cache (`mincore` over a mapping).
fn resident_pct(db: &Path, ranges: &[Arc<Vec<Extent>>], page_size: usize) -> Result<f64> {
    let map = map(db)?;
    let os_page = 4096usize;
    let (mut resident, mut total) = (0u64, 0u64);
    let mut vec = Vec::new();
    for e in ranges.iter().flat_map(|r| r.iter()) {
        let at = (e.first_page as usize - 1) * page_size;
        let len = (e.pages as usize * page_size).min(map.len().saturating_sub(at));
        if len == 0 {
            continue;
        }
        // mincore wants a page-aligned start; the file's pages are multiples of 512 bytes.
        let aligned = at / os_page * os_page;
        let span = at + len - aligned;
        vec.resize(span.div_ceil(os_page), 0u8);
        // SAFETY: the range lies within the live mapping, and `vec` has one byte per page.
        let rc = unsafe {
            libc::mincore(
                map.as_ptr().add(aligned) as *mut libc::c_void,
                span,
                vec.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(ExperimentError::Io {
                path: db.to_path_buf(),
                op: "mincore".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        resident += vec.iter().filter(|&&b| b & 1 == 1).count() as u64;
        total += vec.len() as u64;
    }
    Ok(if total == 0 {
        100.0
    } else {
        resident as f64 * 100.0 / total as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_sum_covers_every_byte() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        // Words in native order, plus the tail's bytes one at a time.
        let words: u64 = bytes[..992]
            .chunks_exact(8)
            .map(|w| u64::from_ne_bytes(w.try_into().unwrap()))
            .fold(0, u64::wrapping_add);
        let tail: u64 = bytes[992..].iter().map(|&b| u64::from(b)).sum();
        assert_eq!(sum_words(&bytes), words.wrapping_add(tail));
        let mut changed = bytes.clone();
        changed[500] ^= 1;
        assert_ne!(sum_words(&changed), sum_words(&bytes));
    }
}
