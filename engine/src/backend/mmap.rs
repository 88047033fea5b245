//! The `mmap` backend: the file mapped read-only with memmap2; pages are decoded in place.
//!
//! `MADV_SEQUENTIAL` lets the kernel read ahead aggressively and drop pages behind the scan; the
//! window adds `MADV_WILLNEED` for the reads ahead. On a warm cache this path copies nothing. A
//! file truncated under the map ends the scan with an error instead of SIGBUS (`backend::sigbus`).

use std::fs::File;
use std::io;

use memmap2::{Advice, Mmap};

use crate::backend::{sigbus, SyncBackend};
use crate::readahead::ReadRequest;
use crate::scan::ExecutorTask;

/// A read-only map of the whole file.
pub(crate) struct MmapBackend {
    /// Declared before `map`, so that the protection ends before the unmapping.
    guard: Option<sigbus::Guard>,
    map: Mmap,
    page_size: usize,
    capacity: usize,
}

impl MmapBackend {
    /// Maps the task's file.
    pub(crate) fn open(task: &ExecutorTask, capacity: usize) -> io::Result<Self> {
        let file = File::open(&task.path)?;
        // SAFETY: the map is read-only and private to this executor. If another process
        // truncates the file during the scan, touching a page past the new end raises SIGBUS;
        // the guard turns that into zeros and an error (see `sigbus`).
        let map = unsafe { Mmap::map(&file)? };
        let _ = map.advise(Advice::Sequential);
        Ok(MmapBackend {
            guard: sigbus::guard(map.as_ptr(), map.len()),
            map,
            page_size: task.page_size as usize,
            capacity: capacity.max(1),
        })
    }

    fn range(&self, req: ReadRequest) -> (usize, usize) {
        let start = (req.first_page as usize - 1) * self.page_size;
        let end = start + req.pages as usize * self.page_size;
        (start.min(self.map.len()), end.min(self.map.len()))
    }
}

impl SyncBackend for MmapBackend {
    fn capacity(&self) -> usize {
        self.capacity
    }

    fn start(&mut self, task: &ExecutorTask, req: ReadRequest) -> io::Result<()> {
        if task.readahead > 0 {
            let (start, end) = self.range(req);
            if end > start {
                let _ = self.map.advise_range(Advice::WillNeed, start, end - start);
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn wait(&mut self, _task: &ExecutorTask, _req: ReadRequest) -> io::Result<()> {
        Ok(())
    }

    fn bytes(&self, req: ReadRequest) -> &[u8] {
        let (start, end) = self.range(req);
        &self.map[start..end]
    }

    fn release(&mut self, _req: ReadRequest) {}

    fn o_direct(&self) -> bool {
        false
    }

    fn name(&self) -> &'static str {
        "mmap"
    }

    fn check(&self) -> io::Result<()> {
        if self.guard.as_ref().is_some_and(sigbus::Guard::faulted) {
            return Err(io::Error::other(
                "the file shrank while mapped (truncated by another process?): pages past its \
                 new end read as zeros",
            ));
        }
        Ok(())
    }
}
