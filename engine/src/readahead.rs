//! Application readahead: which reads to issue, and how many pages to keep in flight.
//!
//! With `O_DIRECT` the kernel's readahead is gone, so an executor that issues one page read at a
//! time waits a full device round trip per page and hands the block layer nothing to merge. The
//! cure is to keep a window of reads in flight ahead of the decoder and to submit them together:
//!
//! - [`ReadPlan`] turns a range's extents (runs of consecutive pages) into reads, each at most
//!   `coalesce` pages long and never crossing an extent boundary, so no page is read that the
//!   scan does not need;
//! - [`ReadaheadWindow`] admits another read while fewer pages than the window are in flight, so
//!   the last read admitted may cross the window's edge: reads keep their coalesced size
//!   whatever the window (a window smaller than one read still overlaps the next read with the
//!   decoding of this one). A window of 0 means one read at a time: submit, wait, decode,
//!   submit the next (the seed's slow case). The window is refilled in batches, once an eighth
//!   of it and at least [`MIN_BATCH_BYTES`] are free (at most half the window), so that one
//!   `io_uring_enter` carries several reads instead of one syscall per completed read, and
//!   small reads submitted together reach the block layer together, which merges neighbours
//!   into larger requests; the device queue stays at least half full.
//!
//! [`ReadSchedule`] drives both for one executor: it is the readahead loop's mechanism (what
//! to issue, when to refill, what is in flight, what was submitted), with no I/O of its own.
//! The two scan loops (the async glommio `dma` loop and the synchronous loop over the other
//! backends) drive the same schedule and differ only in how a read is issued and awaited.
//!
//! All three are plain state machines with no I/O, shared by every backend; this module
//! imports nothing from the rest of the engine.

use std::collections::VecDeque;

use partitioner::Extent;

/// One read: `pages` consecutive pages starting at `first_page`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    /// The first page (1-based).
    pub first_page: u32,
    /// Number of pages (at least 1).
    pub pages: u32,
}

/// The reads that cover a list of extents, in file order.
#[derive(Debug, Clone)]
pub struct ReadPlan<'a> {
    extents: &'a [Extent],
    /// Index of the extent being cut and how many of its pages are already planned.
    next: usize,
    done_in_extent: u32,
    max_pages: u32,
    bridge: u32,
}

impl<'a> ReadPlan<'a> {
    /// Reads of at most `max_pages` pages (at least 1) over `extents`, never crossing a gap
    /// between extents.
    #[cfg(test)]
    pub fn new(extents: &'a [Extent], max_pages: u32) -> Self {
        Self::bridging(extents, max_pages, 0)
    }

    /// Like [`Self::new`], but a read may continue into the next extent across a gap of at most
    /// `bridge` pages (which it reads and the decoder skips), so that a table whose leaves are
    /// interrupted by an interior page every few hundred pages is still read as one sequential
    /// stream of full-size requests.
    pub fn bridging(extents: &'a [Extent], max_pages: u32, bridge: u32) -> Self {
        ReadPlan {
            extents,
            next: 0,
            done_in_extent: 0,
            max_pages: max_pages.max(1),
            bridge,
        }
    }

    /// The next read, if any, and where the plan stands after it.
    fn cut(&self) -> Option<(ReadRequest, usize, u32)> {
        let mut idx = self.next;
        let e = self.extents.get(idx)?;
        let first_page = e.first_page + self.done_in_extent;
        let mut done = self.done_in_extent;
        let mut room = self.max_pages;
        let mut end;
        loop {
            let e = self.extents[idx];
            let take = (e.pages - done).min(room);
            room -= take;
            done += take;
            end = e.first_page + done;
            if done < e.pages {
                break;
            }
            idx += 1;
            done = 0;
            let Some(next) = self.extents.get(idx) else {
                break;
            };
            // Extents in key order can step back in the file: never bridge backwards.
            let Some(gap) = next.first_page.checked_sub(end) else {
                break;
            };
            if gap > self.bridge || gap >= room {
                break;
            }
            room -= gap;
        }
        Some((
            ReadRequest {
                first_page,
                pages: end - first_page,
            },
            idx,
            done,
        ))
    }

    /// The next read, if any, without consuming it.
    pub fn peek(&self) -> Option<ReadRequest> {
        self.cut().map(|(req, _, _)| req)
    }
}

impl Iterator for ReadPlan<'_> {
    type Item = ReadRequest;

    fn next(&mut self) -> Option<ReadRequest> {
        let (req, next, done) = self.cut()?;
        self.next = next;
        self.done_in_extent = done;
        Some(req)
    }
}

/// The widest gap between extents a coalesced read bridges, in pages: an eighth of the largest
/// read (4 pages for 32-page reads), none without coalescing.
pub fn bridge_pages(max_read_pages: u32) -> u32 {
    max_read_pages / 8
}

/// The largest read, in pages, for a coalescing limit of `coalesce_kib` KiB: one page when
/// coalescing is off (or the limit is smaller than a page).
pub fn max_read_pages(coalesce_kib: u32, page_size: u32) -> u32 {
    (u64::from(coalesce_kib) * 1024 / u64::from(page_size)).max(1) as u32
}

/// The least a refill batch carries, in bytes, when the window allows: with one read per page,
/// batches of 4 pages (an eighth of a 32-page window) reached the disk as 16 KiB requests
/// (75 % merged) and took 1.39-1.45 s at SF 1; batches of 16 pages made 62 KiB requests (93 %
/// merged) in 1.14-1.23 s. Coalesced reads are larger than this on their own.
pub const MIN_BATCH_BYTES: u32 = 64 << 10;

/// Counts the pages in flight and decides whether another read may be issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadaheadWindow {
    window: u32,
    /// Free pages that make a refill worthwhile.
    refill_at: u32,
    in_flight_pages: u32,
    in_flight_reads: u32,
}

impl ReadaheadWindow {
    /// A window of `pages` pages of `page_size` bytes ahead of the decoder (0 = one read at a
    /// time).
    pub fn new(pages: u32, page_size: u32) -> Self {
        let min_batch = MIN_BATCH_BYTES / page_size.max(1);
        ReadaheadWindow {
            window: pages,
            refill_at: (pages / 8).max(min_batch).min(pages / 2).max(1),
            in_flight_pages: 0,
            in_flight_reads: 0,
        }
    }

    /// Whether another read may be issued now: always with nothing in flight (so the scan makes
    /// progress whatever the sizes), else while fewer pages than the window are in flight.
    pub fn admits(&self, _pages: u32) -> bool {
        self.in_flight_reads == 0 || self.in_flight_pages < self.window
    }

    /// Whether enough of the window is free to be worth a batch of reads: nothing is in flight,
    /// or an eighth of the window and [`MIN_BATCH_BYTES`] (at most half the window) are free.
    pub fn wants_refill(&self) -> bool {
        self.in_flight_reads == 0
            || self.window.saturating_sub(self.in_flight_pages) >= self.refill_at
    }

    /// Records that a read of `pages` pages was issued.
    pub fn issued(&mut self, pages: u32) {
        self.in_flight_pages += pages;
        self.in_flight_reads += 1;
    }

    /// Records that a read of `pages` pages completed and was handed to the decoder.
    pub fn completed(&mut self, pages: u32) {
        self.in_flight_pages -= pages;
        self.in_flight_reads -= 1;
    }

    /// Pages currently in flight.
    pub fn in_flight_pages(&self) -> u32 {
        self.in_flight_pages
    }

    /// The most reads that can be in flight at once for reads of at least one page.
    pub fn max_reads(&self) -> usize {
        self.window as usize + 1
    }
}

/// Reads handed to the kernel, as counted by [`ReadSchedule`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScheduleStats {
    /// Reads issued.
    pub reads_submitted: u64,
    /// Batches of reads issued together (each refill that issued at least one read).
    pub submit_batches: u64,
    /// Bytes asked for (pages x page size).
    pub bytes_read: u64,
    /// The most pages in flight at once.
    pub max_in_flight_pages: u32,
}

/// One executor's readahead loop, as a state machine: the [`ReadPlan`] of its extents, the
/// [`ReadaheadWindow`] and the reads in flight, oldest first.
///
/// A scan loop drives it like this (`room` is whether its backend can take one more read):
///
/// ```text
/// loop {
///     if schedule.fill_before_wait() { while room { let Some(r) = schedule.issue() else break; start(r) } schedule.end_batch() }
///     let Some(r) = schedule.oldest() else { break };
///     wait(r); schedule.completed();
///     if schedule.refill_after_completion() { ...the same batch as above... }
///     decode(r); release(r);
/// }
/// ```
///
/// With a window of 0 the next read is issued only once the last one is decoded (one read at a
/// time); otherwise the window is topped up right after a completion, before the decoder runs,
/// so the device works while the CPU decodes.
#[derive(Debug, Clone)]
pub struct ReadSchedule<'a> {
    plan: ReadPlan<'a>,
    window: ReadaheadWindow,
    one_at_a_time: bool,
    in_flight: VecDeque<ReadRequest>,
    page_size: u32,
    batch: u64,
    stats: ScheduleStats,
}

impl<'a> ReadSchedule<'a> {
    /// The schedule of reads of at most `max_read_pages` pages over `extents` (bridging small
    /// gaps, see [`bridge_pages`]) with a window of `readahead` pages of `page_size` bytes.
    pub fn new(extents: &'a [Extent], max_read_pages: u32, readahead: u32, page_size: u32) -> Self {
        let window = ReadaheadWindow::new(readahead, page_size);
        ReadSchedule {
            plan: ReadPlan::bridging(extents, max_read_pages, bridge_pages(max_read_pages)),
            in_flight: VecDeque::with_capacity(window.max_reads()),
            window,
            one_at_a_time: readahead == 0,
            page_size,
            batch: 0,
            stats: ScheduleStats::default(),
        }
    }

    /// The most reads the schedule can have in flight at once.
    pub fn max_reads(&self) -> usize {
        self.window.max_reads()
    }

    /// Whether to issue reads before waiting for the oldest one: always with a window of 0
    /// (the next read goes out only after the last was decoded), else when nothing is in
    /// flight (the start).
    pub fn fill_before_wait(&self) -> bool {
        self.one_at_a_time || self.in_flight.is_empty()
    }

    /// Whether to top the window up right after a completion, before decoding it.
    pub fn refill_after_completion(&self) -> bool {
        !self.one_at_a_time && self.window.wants_refill()
    }

    /// The next read, if the window admits it, recorded as issued (the caller has room for it
    /// and starts it); `None` when the window is full or the plan is done.
    pub fn issue(&mut self) -> Option<ReadRequest> {
        let req = self.plan.peek().filter(|r| self.window.admits(r.pages))?;
        self.plan.next();
        self.window.issued(req.pages);
        self.in_flight.push_back(req);
        self.batch += 1;
        self.stats.bytes_read += u64::from(req.pages) * u64::from(self.page_size);
        Some(req)
    }

    /// Ends a batch of [`Self::issue`] calls (the caller hands them to the kernel together);
    /// returns how many reads it issued.
    pub fn end_batch(&mut self) -> u64 {
        let queued = std::mem::take(&mut self.batch);
        if queued > 0 {
            self.stats.reads_submitted += queued;
            self.stats.submit_batches += 1;
            self.stats.max_in_flight_pages = self
                .stats
                .max_in_flight_pages
                .max(self.window.in_flight_pages());
        }
        queued
    }

    /// Reads in flight (issued, not yet completed).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The oldest read in flight, the next to complete; `None` when the scan is done.
    pub fn oldest(&self) -> Option<ReadRequest> {
        self.in_flight.front().copied()
    }

    /// Records that the oldest read completed (it goes to the decoder).
    pub fn completed(&mut self) -> Option<ReadRequest> {
        let req = self.in_flight.pop_front()?;
        self.window.completed(req.pages);
        Some(req)
    }

    /// What was issued so far.
    pub fn stats(&self) -> ScheduleStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(first_page: u32, pages: u32) -> Extent {
        Extent { first_page, pages }
    }

    #[test]
    fn reads_never_cross_extents_and_cover_every_page() {
        let extents = [ext(3, 5), ext(10, 1), ext(12, 9)];
        let reads: Vec<_> = ReadPlan::new(&extents, 4).collect();
        let expect = [(3, 4), (7, 1), (10, 1), (12, 4), (16, 4), (20, 1)];
        let got: Vec<_> = reads.iter().map(|r| (r.first_page, r.pages)).collect();
        assert_eq!(got, expect);
        let one: Vec<_> = ReadPlan::new(&extents, 0).collect();
        assert_eq!(one.len(), 15);
        assert!(one.iter().all(|r| r.pages == 1));
    }

    #[test]
    fn bridged_reads_cross_small_gaps_only() {
        // Leaves 3..=7, an interior page 8, leaves 9..=20, a gap of 5, then 26..=27.
        let extents = [ext(3, 5), ext(9, 12), ext(26, 2)];
        let reads: Vec<_> = ReadPlan::bridging(&extents, 8, 1)
            .map(|r| (r.first_page, r.pages))
            .collect();
        assert_eq!(reads, [(3, 8), (11, 8), (19, 2), (26, 2)]);
        // Every leaf page is covered exactly once; only gap pages are extra.
        let covered: Vec<u32> = ReadPlan::bridging(&extents, 8, 1)
            .flat_map(|r| r.first_page..r.first_page + r.pages)
            .collect();
        let leaves: Vec<u32> = extents
            .iter()
            .flat_map(|e| e.first_page..=e.last_page())
            .collect();
        assert!(leaves
            .iter()
            .all(|p| covered.iter().filter(|&&c| c == *p).count() == 1));
        assert_eq!(covered.len(), leaves.len() + 1);
        // No bridging: the same reads as before.
        let plain: Vec<_> = ReadPlan::bridging(&extents, 8, 0).collect();
        assert_eq!(plain, ReadPlan::new(&extents, 8).collect::<Vec<_>>());
        assert_eq!(bridge_pages(32), 4);
        assert_eq!(bridge_pages(1), 0);
    }

    #[test]
    fn read_size_follows_coalescing() {
        assert_eq!(max_read_pages(0, 4096), 1);
        assert_eq!(max_read_pages(128, 4096), 32);
        assert_eq!(max_read_pages(128, 65536), 2);
        assert_eq!(max_read_pages(1, 65536), 1);
    }

    #[test]
    fn refills_wait_for_a_worthwhile_batch() {
        // Free pages needed before a refill, by window, at 4 KiB pages: an eighth of the
        // window, at least 64 KiB, at most half the window.
        let free_needed = |window: u32| {
            // A full window of one-page reads, completing one by one.
            let mut w = ReadaheadWindow::new(window, 4096);
            (0..window).for_each(|_| w.issued(1));
            (1..=window)
                .find(|_| {
                    w.completed(1);
                    w.wants_refill()
                })
                .unwrap()
        };
        assert_eq!(free_needed(1024), 128);
        assert_eq!(free_needed(256), 32);
        assert_eq!(free_needed(32), 16);
        assert_eq!(free_needed(8), 4);
        assert_eq!(free_needed(1), 1);
        // Nothing in flight always refills.
        assert!(ReadaheadWindow::new(32, 4096).wants_refill());
    }

    /// Drives a schedule as a scan loop does, with room for `capacity` reads; returns the
    /// events: `I` issue (first page), `W` wait, `D` decode.
    fn drive(readahead: u32, capacity: usize) -> (Vec<(char, u32)>, ScheduleStats) {
        let extents = [ext(2, 8)];
        let mut s = ReadSchedule::new(&extents, 2, readahead, 4096);
        let mut events = Vec::new();
        let fill = |s: &mut ReadSchedule<'_>, events: &mut Vec<(char, u32)>| {
            while s.in_flight() < capacity {
                let Some(r) = s.issue() else { break };
                events.push(('I', r.first_page));
            }
            s.end_batch();
        };
        loop {
            if s.fill_before_wait() {
                fill(&mut s, &mut events);
            }
            let Some(r) = s.oldest() else { break };
            events.push(('W', r.first_page));
            s.completed();
            if s.refill_after_completion() {
                fill(&mut s, &mut events);
            }
            events.push(('D', r.first_page));
        }
        (events, s.stats())
    }

    #[test]
    fn the_schedule_reads_one_at_a_time_or_ahead_of_the_decoder() {
        let (events, stats) = drive(0, 4);
        let want: Vec<(char, u32)> = [2, 4, 6, 8]
            .iter()
            .flat_map(|&p| [('I', p), ('W', p), ('D', p)])
            .collect();
        assert_eq!(events, want, "window 0: issue, wait, decode, then the next");
        assert_eq!((stats.reads_submitted, stats.submit_batches), (4, 4));
        assert_eq!(stats.bytes_read, 8 * 4096);
        // A window of 4 pages: two reads ahead; the next goes out before the decoder runs.
        let (events, stats) = drive(4, 4);
        assert_eq!(&events[..4], &[('I', 2), ('I', 4), ('W', 2), ('I', 6)]);
        assert_eq!(events.iter().filter(|e| e.0 == 'I').count(), 4);
        assert!(stats.max_in_flight_pages <= 4 + 2);
        // The backend's room bounds what is in flight, whatever the window.
        let (events, _) = drive(64, 1);
        assert_eq!(&events[..3], &[('I', 2), ('W', 2), ('I', 4)]);
    }

    #[test]
    fn window_bounds_pages_in_flight() {
        let mut w = ReadaheadWindow::new(8, 65536);
        assert!(w.admits(4));
        w.issued(4);
        assert!(w.admits(4));
        w.issued(4);
        assert!(!w.admits(1));
        w.completed(4);
        assert!(w.admits(4));
        // A read larger than the free space still goes when the window is not full: reads
        // keep their coalesced size.
        let mut small = ReadaheadWindow::new(4, 65536);
        small.issued(32);
        assert!(!small.admits(32));
        small.completed(32);
        assert!(small.admits(32));
        assert!(w.wants_refill());
        w.issued(4);
        assert!(
            !w.wants_refill(),
            "only when an eighth of the window is free"
        );
        w.completed(4);
        assert!(w.wants_refill());
        let mut zero = ReadaheadWindow::new(0, 65536);
        assert!(zero.admits(32));
        zero.issued(32);
        assert!(!zero.admits(1));
    }
}
