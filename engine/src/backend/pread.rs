//! The `pread` backend: buffered reads through the page cache, the seed's syscall backend.
//!
//! The kernel's own readahead works here (the file is not opened with `O_DIRECT`); the window
//! adds `POSIX_FADV_WILLNEED` for the reads ahead, which starts their I/O without waiting.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use crate::backend::SyncBackend;
use crate::readahead::ReadRequest;
use crate::scan::ExecutorTask;

/// Buffered `pread` into one reusable buffer.
pub(crate) struct PreadBackend {
    file: File,
    notice: Option<String>,
    buf: Vec<u8>,
    len: usize,
    capacity: usize,
}

impl PreadBackend {
    /// Opens the task's file and sizes the buffer for its largest read; `notice` says why this
    /// backend runs when another was asked for.
    pub(crate) fn open(
        task: &ExecutorTask,
        capacity: usize,
        notice: Option<String>,
    ) -> io::Result<Self> {
        let file = File::open(&task.path)?;
        // SAFETY: advice only; the descriptor is ours.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
        Ok(PreadBackend {
            file,
            notice,
            buf: vec![0; task.max_read_pages as usize * task.page_size as usize],
            len: 0,
            capacity: capacity.max(1),
        })
    }
}

impl SyncBackend for PreadBackend {
    fn capacity(&self) -> usize {
        self.capacity
    }

    fn start(&mut self, task: &ExecutorTask, req: ReadRequest) -> io::Result<()> {
        if task.readahead > 0 {
            let len = i64::from(req.pages) * i64::from(task.page_size);
            // SAFETY: advice only; the descriptor is ours.
            unsafe {
                libc::posix_fadvise(
                    self.file.as_raw_fd(),
                    task.offset(req.first_page) as i64,
                    len,
                    libc::POSIX_FADV_WILLNEED,
                )
            };
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn wait(&mut self, task: &ExecutorTask, req: ReadRequest) -> io::Result<()> {
        let want = req.pages as usize * task.page_size as usize;
        let buf = &mut self.buf[..want];
        let mut done = 0;
        let base = task.offset(req.first_page);
        while done < want {
            match self.file.read_at(&mut buf[done..], base + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.len = done;
        Ok(())
    }

    fn bytes(&self, _req: ReadRequest) -> &[u8] {
        &self.buf[..self.len]
    }

    fn release(&mut self, _req: ReadRequest) {}

    fn o_direct(&self) -> bool {
        false
    }

    fn name(&self) -> &'static str {
        "pread"
    }

    fn notice(&self) -> Option<String> {
        self.notice.clone()
    }
}
