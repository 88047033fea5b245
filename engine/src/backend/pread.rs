//! The `pread` backend: buffered reads through the page cache, the seed's syscall backend.
//!
//! The kernel's own readahead works here (the file is not opened with `O_DIRECT`); the window
//! adds `POSIX_FADV_WILLNEED` for the reads ahead, which starts their I/O without waiting.
//!
//! Layering: a backend; imports only the backend interface (`backend`).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use crate::backend::{BackendOptions, ByteRange, SyncBackend};

/// Buffered `pread` into one reusable buffer.
pub(crate) struct PreadBackend {
    file: File,
    notice: Option<String>,
    buf: Vec<u8>,
    len: usize,
    capacity: usize,
    hints: bool,
}

impl PreadBackend {
    /// Opens the file and sizes the buffer for its largest read; `notice` says why this
    /// backend runs when another was asked for.
    pub(crate) fn open(options: &BackendOptions<'_>, notice: Option<String>) -> io::Result<Self> {
        let file = File::open(options.path)?;
        // SAFETY: advice only; the descriptor is ours.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
        Ok(PreadBackend {
            file,
            notice,
            buf: vec![0; options.max_read_bytes],
            len: 0,
            capacity: options.capacity.max(1),
            hints: options.hints,
        })
    }
}

impl SyncBackend for PreadBackend {
    fn capacity(&self) -> usize {
        self.capacity
    }

    fn start(&mut self, read: ByteRange) -> io::Result<()> {
        if self.hints {
            // SAFETY: advice only; the descriptor is ours.
            unsafe {
                libc::posix_fadvise(
                    self.file.as_raw_fd(),
                    read.offset as i64,
                    read.len as i64,
                    libc::POSIX_FADV_WILLNEED,
                )
            };
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn wait(&mut self, read: ByteRange) -> io::Result<()> {
        let want = read.len;
        let buf = &mut self.buf[..want];
        let mut done = 0;
        let base = read.offset;
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

    fn bytes(&self, _read: ByteRange) -> &[u8] {
        &self.buf[..self.len]
    }

    fn release(&mut self) {}

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
