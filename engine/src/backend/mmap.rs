//! The `mmap` backend: the file mapped read-only with memmap2; pages are decoded in place.
//!
//! `MADV_SEQUENTIAL` lets the kernel read ahead aggressively and drop pages behind the scan; the
//! window adds `MADV_WILLNEED` for the reads ahead, except when `auto` chose `mmap` because the
//! table is already cached (the hints then only cost system calls: 5 % of a warm SF 1 scan's
//! samples). Then the window's reads are `MADV_POPULATE_READ` instead (Linux 5.14; ignored
//! where it is unknown): the kernel maps a whole read's cached pages in one call rather than
//! in one page fault per 64 KiB as the decoder first touches them (warm SF 1 `q6`, executor
//! wall, nine alternating pairs: 0.0927 -> 0.0882 s with a page cache of 4 KiB folios, as
//! faults through a mapping leave it; unchanged at 0.0732 s with the large folios readahead
//! for sequential `read`s leaves). On a warm cache this path copies nothing. A
//! file truncated under the map ends the scan with an error instead of SIGBUS (`backend::sigbus`).
//!
//! Layering: a backend; imports only the backend interface (`backend`) and `sigbus`.

use std::fs::File;
use std::io;

use memmap2::{Advice, Mmap};

use crate::backend::{sigbus, BackendOptions, ByteRange, SyncBackend};

/// A read-only map of the whole file.
pub(crate) struct MmapBackend {
    /// Declared before `map`, so that the protection ends before the unmapping.
    guard: Option<sigbus::Guard>,
    map: Mmap,
    /// The mapped file, to tell whether it shrank ([`SyncBackend::check_after_damage`]).
    file: File,
    capacity: usize,
    hints: bool,
}

impl MmapBackend {
    /// Maps the file.
    pub(crate) fn open(options: &BackendOptions<'_>) -> io::Result<Self> {
        let file = File::open(options.path)?;
        // SAFETY: the map is read-only and private to this executor. If another process
        // truncates the file during the scan, touching a page past the new end raises SIGBUS;
        // the guard turns that into zeros and an error (see `sigbus`).
        let map = unsafe { Mmap::map(&file)? };
        let _ = map.advise(Advice::Sequential);
        Ok(MmapBackend {
            guard: sigbus::guard(map.as_ptr(), map.len()),
            map,
            file,
            capacity: options.capacity.max(1),
            hints: options.hints,
        })
    }

    /// The part of the map `read` covers (empty past the end of the file).
    fn range(&self, read: ByteRange) -> (usize, usize) {
        let len = self.map.len();
        let start = usize::try_from(read.offset).unwrap_or(len).min(len);
        (start, start.saturating_add(read.len).min(len))
    }
}

impl SyncBackend for MmapBackend {
    fn capacity(&self) -> usize {
        self.capacity
    }

    fn start(&mut self, read: ByteRange) -> io::Result<()> {
        let (start, end) = self.range(read);
        if end > start {
            if self.hints {
                let _ = self.map.advise_range(Advice::WillNeed, start, end - start);
            } else {
                // Cached: map the pages now, in one call (a range past a truncated end fails
                // here quietly and raises SIGBUS when touched, which the guard catches).
                let _ = self
                    .map
                    .advise_range(Advice::PopulateRead, start, end - start);
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn wait(&mut self, _read: ByteRange) -> io::Result<()> {
        Ok(())
    }

    fn bytes(&self, read: ByteRange) -> &[u8] {
        let (start, end) = self.range(read);
        &self.map[start..end]
    }

    fn release(&mut self) {}

    fn o_direct(&self) -> bool {
        false
    }

    fn name(&self) -> &'static str {
        "mmap"
    }

    fn check(&self) -> io::Result<()> {
        if self.guard.as_ref().is_some_and(sigbus::Guard::faulted) {
            return Err(shrank());
        }
        Ok(())
    }

    fn check_after_damage(&self) -> io::Result<()> {
        match self.file.metadata() {
            Ok(m) if m.len() < self.map.len() as u64 => Err(shrank()),
            _ => Ok(()),
        }
    }
}

/// The error of a scan whose file shrank under the map.
fn shrank() -> io::Error {
    io::Error::other(
        "the file shrank while mapped (truncated by another process?): pages past its new end \
         read as zeros",
    )
}
