//! I/O buffers on transparent huge pages.
//!
//! A direct read lands in the caller's buffer, and the block layer describes that buffer to the
//! device as one segment per physically contiguous run. Buffers on ordinary 4 KiB pages are
//! scattered, so a 128 KiB read is 32 segments. On a virtio disk without indirect descriptors
//! (common in cloud VMs; `/sys/block/<disk>/device/features` bit 28 clear) each segment takes a
//! slot of the virtqueue, which then holds only a handful of such reads. When it fills, blk-mq
//! marks the queue busy and dispatches one request at a time, the queued reads merge into
//! megabyte requests, and the device ends up with one request in flight instead of dozens. On
//! the reference machine this halved the scan's throughput in most cold runs; `fio`, whose
//! buffers happened to be less scattered, kept 32 requests in flight.
//!
//! Buffers on 2 MiB huge pages are physically contiguous, so every read is one segment and the
//! queue holds the whole readahead window. Two ways in:
//!
//! - [`HugeRegion`]: an anonymous mapping, aligned to 2 MiB and advised `MADV_HUGEPAGE`, for
//!   buffers the engine allocates itself (the `uring` backend);
//! - [`HugePageAlloc`]: a global allocator that maps every allocation of 2 MiB or more on its
//!   own (advising huge pages for page-aligned ones, I/O memory) and leaves the rest to
//!   mimalloc. glommio allocates its registered I/O
//!   memory (the `dma` backend's buffers) through the global allocator, so a binary that
//!   installs this one gives the `dma` backend huge-page buffers too.
//!
//! Huge pages are a hint: with transparent huge pages disabled (`never`) or memory too
//! fragmented, the kernel backs the region with small pages and everything still works, only
//! with more segments per read. [`huge_page_bytes`] tells what the kernel actually did.
//!
//! Layering: a leaf of the crate (imports nothing from it); backends and the policy use it.

use std::alloc::{GlobalAlloc, Layout};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use memmap2::{Advice, MmapMut, MmapOptions};
use mimalloc::MiMalloc;

/// The size of a transparent huge page on x86-64 and most arm64 kernels.
pub const HUGE_PAGE: usize = 2 << 20;

/// An anonymous, zero-filled mapping of `len` bytes that starts on a huge-page boundary and is
/// advised to be backed by transparent huge pages.
#[derive(Debug)]
pub struct HugeRegion {
    map: MmapMut,
    offset: usize,
    len: usize,
}

impl HugeRegion {
    /// Maps `len` bytes (at least one). The advice is best effort: a kernel without transparent
    /// huge pages gives small pages.
    pub fn new(len: usize) -> io::Result<Self> {
        let len = len.max(1);
        let rounded = len.next_multiple_of(HUGE_PAGE);
        // One huge page of slack so an aligned start always fits; the unused part is never
        // touched, so it costs address space only.
        let map = MmapOptions::new().len(rounded + HUGE_PAGE).map_anon()?;
        let offset = map.as_ptr().align_offset(HUGE_PAGE);
        // EINVAL means the kernel has no transparent huge pages: small pages it is.
        let _ = map.advise_range(Advice::HugePage, offset, rounded);
        Ok(HugeRegion { map, offset, len })
    }

    /// The start of the region.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        // SAFETY: offset < HUGE_PAGE <= the mapping's length.
        unsafe { self.map.as_mut_ptr().add(self.offset) }
    }

    /// The region's length as asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: [`Self::new`] maps at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The region's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.map[self.offset..self.offset + self.len]
    }
}

/// How many bytes of the mapping that contains `addr` the kernel backs with transparent huge
/// pages (`AnonHugePages` in `/proc/self/smaps`), or `None` when that cannot be read.
pub fn huge_page_bytes(addr: *const u8) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let addr = addr as u64;
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((start, end)) = range.split_once('-') {
                if let (Ok(start), Ok(end)) =
                    (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
                {
                    inside = (start..end).contains(&addr);
                    continue;
                }
            }
        }
        if inside {
            if let Some(kib) = line.strip_prefix("AnonHugePages:") {
                return kib
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .map(|k| k * 1024);
            }
        }
    }
    None
}

/// A global allocator that puts every allocation of at least [`HUGE_PAGE`] bytes in its own
/// huge-page-aligned anonymous mapping, advised `MADV_HUGEPAGE` when it is page-aligned I/O
/// memory, and hands everything smaller to mimalloc. Growing such a block with `realloc` moves
/// its pages with `mremap` rather than copying them (it may then start on an ordinary page
/// boundary; its aligned 2 MiB stretches still get huge pages). Install it in a binary that
/// uses the `dma` backend:
///
/// ```ignore
/// #[global_allocator]
/// static ALLOC: engine::hugepages::HugePageAlloc = engine::hugepages::HugePageAlloc;
/// ```
///
/// Small blocks go to mimalloc rather than glibc's allocator: a grouped query frees millions of
/// small blocks (group keys and states) on the merge threads that the executors' threads
/// allocated, which glibc serializes on its arenas' locks (`GROUP BY` over 632k keys: 0.99 s
/// -> 0.81 s, 1.5M keys 1.62 s -> 1.35 s, medians, `--io pread`, 2 executors). mimalloc's
/// arenas are committed lazily ([`small`]): eager commit on top of transparent huge pages
/// held 35 MiB resident where a streamed export needs 14.
///
/// Only I/O memory is advised huge pages. Group tables and sort runs were too, once: each
/// first touch of a huge page zeroes 2 MiB in the kernel, and on the reference VM that zeroing
/// (perf: `clear_page_erms` under `do_huge_pmd_anonymous_page`, from `GroupTable::push` and
/// hashbrown's rehash) ran several times slower in about one run of three (our guess: the
/// host backing again free 2 MiB blocks its virtio balloon had taken): `GROUP BY l_orderkey` on SF 1
/// (`--io pread`, 2 executors) took 0.93-1.41 s with 0.13-0.85 s of system time, against
/// 1.03-1.10 s and 0.23-0.28 s on small pages (eight runs each, transparent huge pages
/// switched off system-wide for the second set).
#[derive(Debug, Clone, Copy, Default)]
pub struct HugePageAlloc;

/// Whether mimalloc's options were set.
static SMALL_READY: AtomicBool = AtomicBool::new(false);

/// mimalloc's `mi_option_arena_eager_commit` (the same place in its v2 and v3 option lists).
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// The allocator for blocks below [`HUGE_PAGE`], its options set before its first allocation
/// (mimalloc reads an option when it first needs it, and commits an arena's memory as it is
/// used when eager commit is off).
#[inline(always)]
fn small() -> MiMalloc {
    if !SMALL_READY.load(AtomicOrdering::Relaxed) {
        set_small_options();
    }
    MiMalloc
}

#[cold]
fn set_small_options() {
    // SAFETY: sets a value in mimalloc's option table; allocates nothing. Two threads racing
    // here both set the same value.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0) };
    SMALL_READY.store(true, AtomicOrdering::Relaxed);
}

impl HugePageAlloc {
    fn is_huge(layout: Layout) -> bool {
        layout.size() >= HUGE_PAGE && layout.align() <= HUGE_PAGE
    }

    /// Whether a large block is I/O memory, to be advised `MADV_HUGEPAGE`: page-aligned, as
    /// glommio's registered buffers are. Other large blocks (group tables, sort runs, hash
    /// indexes) get the system's default: see [`HugePageAlloc`].
    fn is_io(layout: Layout) -> bool {
        layout.align() >= 4096
    }

    /// Maps `size` bytes (a multiple of [`HUGE_PAGE`]) on a huge-page boundary, advised
    /// `MADV_HUGEPAGE` when `advise`.
    unsafe fn map(size: usize, advise: bool) -> *mut u8 {
        let span = size + HUGE_PAGE;
        // SAFETY: an anonymous private mapping with no address hint touches no existing memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        let base = base as usize;
        let start = base.next_multiple_of(HUGE_PAGE);
        // Give back the slack before and after the aligned part, so that `dealloc` can unmap
        // exactly [start, start + size).
        // SAFETY: both ranges lie inside the mapping just made and are page-aligned.
        unsafe {
            if start > base {
                libc::munmap(base as *mut libc::c_void, start - base);
            }
            let tail = base + span - (start + size);
            if tail > 0 {
                libc::munmap((start + size) as *mut libc::c_void, tail);
            }
            // Best effort: without transparent huge pages the kernel says EINVAL.
            if advise {
                libc::madvise(start as *mut libc::c_void, size, libc::MADV_HUGEPAGE);
            }
        }
        start as *mut u8
    }
}

// SAFETY: large blocks come from private anonymous mappings of at least the layout's size,
// aligned to HUGE_PAGE (>= the layout's alignment) or, after an mremap, to a page (>= the
// layout's alignment, which mremap is only used for), and are unmapped with the same rounded
// size; every other request goes to mimalloc unchanged. `is_huge` depends on the layout only, so a block is
// always freed by the path that allocated it.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if Self::is_huge(layout) {
            // SAFETY: see the impl's comment.
            unsafe {
                Self::map(
                    layout.size().next_multiple_of(HUGE_PAGE),
                    Self::is_io(layout),
                )
            }
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { small().alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if Self::is_huge(layout) {
            // Fresh anonymous mappings are zero-filled.
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { self.alloc(layout) }
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { small().alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if Self::is_huge(layout) {
            // SAFETY: ptr was mapped by `map` with this rounded size.
            unsafe {
                libc::munmap(ptr.cast(), layout.size().next_multiple_of(HUGE_PAGE));
            }
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { small().dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees new_size with layout's alignment is a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !Self::is_huge(layout) && !Self::is_huge(new_layout) {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { small().realloc(ptr, layout, new_size) };
        }
        if Self::is_huge(layout) && Self::is_huge(new_layout) {
            let old = layout.size().next_multiple_of(HUGE_PAGE);
            let new = new_size.next_multiple_of(HUGE_PAGE);
            if old == new {
                return ptr;
            }
            if layout.align() <= 4096 {
                // Let the kernel move the pages instead of copying them (a growing Vec of
                // hundreds of MiB would otherwise be copied at every doubling). The new address
                // is page-aligned, which is all this layout asks for; the mapping keeps its
                // huge-page advice.
                // SAFETY: ptr is a mapping of `old` bytes made by `map` (or an earlier mremap).
                let p = unsafe { libc::mremap(ptr.cast(), old, new, libc::MREMAP_MAYMOVE) };
                return if p == libc::MAP_FAILED {
                    std::ptr::null_mut()
                } else {
                    p.cast()
                };
            }
        }
        // SAFETY: a fresh block of the new layout, the common prefix copied, the old block
        // freed by the path that allocated it.
        unsafe {
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_aligned_zeroed_and_writable() {
        let mut r = HugeRegion::new(3 << 20).unwrap();
        assert_eq!(r.as_mut_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(r.len(), 3 << 20);
        assert!(r.as_slice().iter().all(|&b| b == 0));
        // SAFETY: inside the region.
        unsafe { r.as_mut_ptr().add(r.len() - 1).write(7) };
        assert_eq!(r.as_slice()[r.len() - 1], 7);
    }

    #[test]
    fn allocator_serves_small_and_large_blocks() {
        let a = HugePageAlloc;
        for (size, align) in [(64, 8), (4096, 4096), (HUGE_PAGE, 4096), (5 << 20, 64)] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: non-zero sizes; every block is freed with its layout.
            unsafe {
                let p = a.alloc_zeroed(layout);
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0);
                if size >= HUGE_PAGE {
                    assert_eq!(p as usize % HUGE_PAGE, 0);
                }
                assert_eq!(*p.add(size - 1), 0);
                p.add(size - 1).write(9);
                // Grow across the huge threshold and back, keeping the prefix.
                p.write(42);
                let q = a.realloc(p, layout, size * 3);
                assert_eq!(*q, 42);
                let back = Layout::from_size_align(size * 3, align).unwrap();
                let r = a.realloc(q, back, 16.max(align));
                assert_eq!(*r, 42);
                a.dealloc(r, Layout::from_size_align(16.max(align), align).unwrap());
            }
        }
    }

    #[test]
    fn touched_regions_get_huge_pages_when_the_kernel_allows() {
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|mode| !mode.contains("[never]"));
        let mut r = HugeRegion::new(2 * HUGE_PAGE).unwrap();
        let p = r.as_mut_ptr();
        // SAFETY: one byte per huge page, inside the region.
        unsafe {
            p.write(1);
            p.add(HUGE_PAGE).write(1);
        }
        let huge = huge_page_bytes(p).unwrap();
        assert_eq!(huge > 0, thp, "{huge} bytes on huge pages");
    }

    #[test]
    fn only_page_aligned_large_blocks_are_advised_huge_pages() {
        // Under the `madvise` policy only advised memory gets huge pages, so an unadvised
        // block shows none; under `always` or `never` the advice changes nothing visible.
        let madvise = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|mode| mode.contains("[madvise]"));
        let a = HugePageAlloc;
        for (align, advised) in [(8, false), (4096, true)] {
            let layout = Layout::from_size_align(2 * HUGE_PAGE, align).unwrap();
            assert_eq!(HugePageAlloc::is_io(layout), advised);
            // SAFETY: a non-zero size; the block is freed with its layout.
            unsafe {
                let p = a.alloc(layout);
                assert!(!p.is_null());
                p.write(1);
                p.add(HUGE_PAGE).write(1);
                let huge = huge_page_bytes(p).unwrap();
                if madvise && !advised {
                    assert_eq!(huge, 0, "align {align}: {huge} bytes on huge pages");
                }
                a.dealloc(p, layout);
            }
        }
    }

    #[test]
    fn large_blocks_grow_in_place_or_move_with_their_contents() {
        let a = HugePageAlloc;
        let layout = Layout::from_size_align(HUGE_PAGE + 1, 8).unwrap();
        // SAFETY: every block is used within its size and freed with its layout.
        unsafe {
            let mut p = a.alloc(layout);
            let mut size = layout.size();
            for i in 0..size {
                p.add(i).write(i as u8);
            }
            for _ in 0..4 {
                let grown = size * 2 + 12_345;
                p = a.realloc(p, Layout::from_size_align(size, 8).unwrap(), grown);
                assert!(!p.is_null());
                p.add(grown - 1).write(7);
                size = grown;
            }
            assert!((0..HUGE_PAGE + 1).all(|i| *p.add(i) == i as u8));
            assert_eq!(*p.add(size - 1), 7);
            a.dealloc(p, Layout::from_size_align(size, 8).unwrap());
        }
    }

    #[test]
    fn smaps_names_the_mapping_of_an_address() {
        let r = HugeRegion::new(HUGE_PAGE).unwrap();
        // Zero or more bytes, but the lookup must find the mapping.
        assert!(huge_page_bytes(r.as_slice().as_ptr()).is_some());
        assert!(huge_page_bytes(std::ptr::null()).is_none());
    }
}
