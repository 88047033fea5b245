//! What both scan loops do with the bytes of a completed read: pick the range's leaf pages out
//! of it, hand them to the kernel in the range's order (file order, or key order for an ordered
//! run), and complete records that continue on overflow pages, page by page. Also reads the
//! pages whose latest copy is in the write-ahead log, at their places in that order.
//!
//! Overflow pages are rare and scattered, so they are read with a plain `pread` on a second
//! descriptor rather than through the readahead window; the chain is walked with the
//! partitioner's [`OverflowChain`], which checks every link (usable page, no cycle, the chain's
//! length against the payload's).
//!
//! Layering: above `task` and `kernel`, below the two scan loops that call it.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Instant;

use partitioner::cell::OverflowChain;
use partitioner::format::be_u32;
use partitioner::plan::IndexScan;
use partitioner::wal::PageLocation;

use crate::counters::Measure;
use crate::cputime::CpuTime;
use crate::error::Result;
use crate::faults::Faults;
use crate::scan::kernel::{RecordOutcome, ScanKernel, Spill};
use crate::scan::task::{ExecutorReport, ExecutorTask};

/// Feeds one executor's pages to its kernel.
pub(crate) struct PageDecoder<'t, K: ScanKernel> {
    task: &'t ExecutorTask,
    pub kernel: K,
    /// The position in the task's `order` of the next page to give the kernel: reads arrive in
    /// the order of the extents, so whether a page read is the range's next leaf is a
    /// forward-moving cursor, in file order and in key order alike.
    next: usize,
    /// The range's pages whose latest copy is in the write-ahead log, sorted (looked up when
    /// the log holds any).
    wal_set: Vec<u32>,
    spills: Vec<Spill>,
    overflow_file: Option<File>,
    wal_file: Option<File>,
    overflow_page: Vec<u8>,
    /// The pages of the chain being walked (its cycle check).
    chain_pages: HashSet<u32>,
    /// When the first page was decoded (the end of the executor's start-up).
    first_page_at: Option<Instant>,
    /// The interior entries of an index scan given to the kernel (rows it does not count).
    between_rows: u64,
}

impl<'t, K: ScanKernel> PageDecoder<'t, K> {
    pub(crate) fn new(task: &'t ExecutorTask, kernel: K) -> Self {
        let mut wal_set: Vec<u32> = task.wal_pages.iter().map(|&(p, _)| p).collect();
        wal_set.sort_unstable();
        PageDecoder {
            task,
            kernel,
            next: 0,
            wal_set,
            spills: Vec::new(),
            overflow_file: None,
            wal_file: None,
            overflow_page: Vec::new(),
            chain_pages: HashSet::new(),
            first_page_at: None,
            between_rows: 0,
        }
    }

    /// Decodes the leaf pages among the `pages` whole pages starting at `first_page` (a read
    /// may bridge a small gap between extents; those pages are skipped and counted as wasted);
    /// `bytes` must hold at least them. Pages of the range whose latest copy is in the log and
    /// that come before a page of this read in the range's order are decoded first, from the
    /// log, so the kernel sees every page in the range's order.
    pub(crate) fn decode(
        &mut self,
        first_page: u32,
        pages: u32,
        bytes: &[u8],
        report: &mut ExecutorReport,
    ) -> Result<()> {
        let task = self.task;
        let page_size = task.page_size() as usize;
        let want = pages as usize * page_size;
        if bytes.len() < want {
            let last = first_page + pages - 1;
            return Err(task.corrupt(
                first_page + (bytes.len() / page_size) as u32,
                format!(
                    "short read: the file ends inside pages {first_page}..={last} (did it shrink during the scan?)"
                ),
            ));
        }
        for (k, page) in bytes[..want].chunks_exact(page_size).enumerate() {
            let page_no = first_page + k as u32;
            // The page after this one in the read, which the kernel may start loading.
            let next = bytes[..want]
                .get((k + 1) * page_size..(k + 2) * page_size)
                .unwrap_or(&[]);
            loop {
                match task.order.get(self.next) {
                    Some(&logged) if self.in_wal(logged) => {
                        self.next += 1;
                        self.decode_wal_page(logged, report)?;
                    }
                    Some(&leaf) if leaf == page_no => {
                        self.next += 1;
                        self.decode_one(page_no, page, next, report)?;
                        break;
                    }
                    _ => {
                        // A gap page a coalesced read bridged (or a stale copy of a logged page).
                        report.wasted_bytes += page_size as u64;
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn in_wal(&self, page: u32) -> bool {
        !self.wal_set.is_empty() && self.wal_set.binary_search(&page).is_ok()
    }

    /// Gives one leaf page to the kernel, completes its records that continue on overflow
    /// pages, and tells the kernel the page is done.
    fn decode_one(
        &mut self,
        page_no: u32,
        page: &[u8],
        next: &[u8],
        report: &mut ExecutorReport,
    ) -> Result<()> {
        let task = self.task;
        let first_place = match &task.index_scan {
            None => {
                self.kernel
                    .decode_page(page_no, page, next, &mut self.spills)
                    .map_err(|what| task.corrupt(page_no, what))?;
                None
            }
            Some(scan) => {
                let first = scan.place(page_no).ok_or_else(|| {
                    task.corrupt(page_no, format!("not a leaf of index {:?}", scan.name))
                })?;
                self.kernel
                    .decode_index_page(page_no, page, first, &mut self.spills)
                    .map_err(|what| task.corrupt(page_no, what))?;
                Some(first)
            }
        };
        if report.pages == 0 {
            self.first_page_at = Some(Instant::now());
        }
        report.pages += 1;
        if !self.spills.is_empty() {
            let mut spills = std::mem::take(&mut self.spills);
            let followed = spills
                .iter()
                .try_for_each(|spill| self.follow_overflow(spill, report));
            spills.clear();
            self.spills = spills;
            followed?;
        }
        if let (Some(first), Some(scan)) = (first_place, &task.index_scan) {
            // The interior pages' entries that follow this leaf's in key order.
            let after = scan.after(page_no);
            self.between_rows += after.len() as u64;
            for (j, record) in after.iter().enumerate() {
                let spill = Spill {
                    page: page_no,
                    rowid: first + IndexScan::AFTER_CELLS + j as i64,
                    local: Vec::new(),
                    payload_len: record.len() as u64,
                    first_overflow: 0,
                };
                let outcome = self
                    .kernel
                    .eval_spill(&spill, record, true)
                    .map_err(|what| task.corrupt(page_no, what))?;
                if outcome == RecordOutcome::NeedMore {
                    return Err(task.corrupt(
                        page_no,
                        format!(
                            "an entry of index {:?} after this leaf runs past its record",
                            scan.name
                        ),
                    ));
                }
            }
        }
        self.kernel.page_done().map_err(|mut row| {
            if let Some(scan) = &task.index_scan {
                // The row's key is its place in the index: the message names its rowid.
                match scan.rowid_at(page_no, page, task.header.usable_size(), row.rowid) {
                    Some(rowid) => row.rowid = rowid,
                    None => row.message = format!("{} (index {:?})", row.message, scan.name),
                }
            }
            task.eval_error(page_no, row)
        })
    }

    /// Completes a record whose needed bytes continue on overflow pages, reading the chain
    /// only as far as the kernel asks.
    fn follow_overflow(&mut self, spill: &Spill, report: &mut ExecutorReport) -> Result<()> {
        let task = self.task;
        let header = &task.header;
        let broken = |e: partitioner::cell::ChainError| task.corrupt(e.page, e.what);
        let mut chain = OverflowChain::new(
            header,
            spill.page,
            spill.rowid,
            spill.payload_len,
            spill.local.len(),
            spill.first_overflow,
        )
        .map_err(broken)?;
        self.chain_pages.clear();
        let mut payload = spill.local.clone();
        loop {
            let complete = payload.len() as u64 == spill.payload_len;
            match self
                .kernel
                .eval_spill(spill, &payload, complete)
                .map_err(|what| task.corrupt(spill.page, what))?
            {
                RecordOutcome::Done => return Ok(()),
                RecordOutcome::NeedMore if complete => {
                    return Err(task.corrupt(
                        spill.page,
                        format!("rowid {}: record runs past its payload", spill.rowid),
                    ))
                }
                RecordOutcome::NeedMore => {}
            }
            let Some(next) = chain
                .next_page(header, &mut self.chain_pages)
                .map_err(broken)?
            else {
                return Err(task.corrupt(
                    spill.page,
                    format!("rowid {}: overflow chain ended early", spill.rowid),
                ));
            };
            self.read_page(next, "overflow page")?;
            let take = chain.took(be_u32(&self.overflow_page, 0).unwrap_or(0));
            payload.extend_from_slice(self.overflow_page.get(4..4 + take).unwrap_or(&[]));
            report.overflow_pages += 1;
            report.bytes_read += u64::from(task.page_size());
        }
    }

    /// Reads the latest committed copy of `page` into `self.overflow_page`, from the
    /// write-ahead log when it has one, else from the database file.
    fn read_page(&mut self, page: u32, what: &str) -> Result<()> {
        let task = self.task;
        let location = match &task.wal {
            Some(wal) => wal.location(page),
            None => PageLocation::Main(task.offset(page)),
        };
        self.overflow_page.resize(task.page_size() as usize, 0);
        let (slot, path, offset) = match location {
            PageLocation::Main(offset) => (&mut self.overflow_file, &task.path, offset),
            PageLocation::Wal(offset) => {
                let wal = task.wal.as_ref().expect("a WAL location comes from a WAL");
                (&mut self.wal_file, &wal.path, offset)
            }
        };
        if slot.is_none() {
            let f = File::open(path).map_err(|e| task.io_error("open", path, None, e))?;
            *slot = Some(f);
        }
        let file = slot.as_ref().expect("opened above");
        file.read_exact_at(&mut self.overflow_page, offset)
            .map_err(|e| task.io_error(format!("read {what} {page}"), path, Some(offset), e))
    }

    /// Reads one page of the range from the write-ahead log and decodes it. A live log holds
    /// few pages (it is checkpointed every 1000 by default), so they are read one by one.
    fn decode_wal_page(&mut self, page: u32, report: &mut ExecutorReport) -> Result<()> {
        self.read_page(page, "page")?;
        let bytes = std::mem::take(&mut self.overflow_page);
        let decoded = self.decode_one(page, &bytes, &[], report);
        self.overflow_page = bytes;
        decoded?;
        report.reads_submitted += 1;
        report.bytes_read += u64::from(self.task.page_size());
        report.wal_pages += 1;
        Ok(())
    }

    /// Decodes the range's pages left after its last read from the database file: those
    /// whose latest copy is in the write-ahead log.
    pub(crate) fn decode_wal_pages(&mut self, report: &mut ExecutorReport) -> Result<()> {
        let task = self.task;
        while let Some(&page) = task.order.get(self.next) {
            self.next += 1;
            if !self.in_wal(page) {
                return Err(task.corrupt(
                    page,
                    "leaf page never read: the reads did not follow the range's order".into(),
                ));
            }
            self.decode_wal_page(page, report)?;
        }
        Ok(())
    }

    /// Ends the executor's scan: the kernel's partial and the report's final figures.
    pub(crate) fn finish(
        self,
        mut report: ExecutorReport,
        clock: ThreadClock,
    ) -> (K::Partial, ExecutorReport) {
        report.rows = self.kernel.rows() + self.between_rows;
        report.wall_s = clock.started.elapsed().as_secs_f64();
        let used = CpuTime::thread().since(clock.cpu);
        report.user_s = used.user_s;
        report.sys_s = used.sys_s;
        report.counters = clock.hw.stop();
        report.first_page_at = self.first_page_at;
        report.first_page_s = self
            .first_page_at
            .map(|t| t.duration_since(clock.started).as_secs_f64());
        // Per-core decode throughput: from the first page decoded to the last (start-up is
        // reported on its own), over the leaf bytes decoded.
        let decoding = self
            .first_page_at
            .map_or(0.0, |t| t.elapsed().as_secs_f64());
        if decoding > 0.0 {
            report.rows_per_s = Some(report.rows as f64 / decoding);
            let leaf_bytes = report.pages * u64::from(self.task.page_size());
            report.gb_per_s = Some(leaf_bytes as f64 / decoding / 1e9);
        }
        (self.kernel.finish(), report)
    }
}

/// What an executor measures of its own thread from its start to its last page: wall time,
/// CPU time and the hardware counters.
pub(crate) struct ThreadClock {
    started: Instant,
    cpu: CpuTime,
    hw: Measure,
}

impl ThreadClock {
    /// Starts measuring the calling thread.
    pub(crate) fn start(faults: &Faults) -> Self {
        ThreadClock {
            started: Instant::now(),
            cpu: CpuTime::thread(),
            hw: Measure::start(faults.pmu),
        }
    }
}
