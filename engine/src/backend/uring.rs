//! The `uring` backend: a private io_uring per executor, built with the io-uring crate, with
//! registered buffers and `O_DIRECT`, and an optional kernel SQ poll thread (SQPOLL), which
//! glommio does not offer.
//!
//! SQPOLL moves submission into a kernel thread that spins on the submission queue, so the
//! executor submits without system calls; the price is a CPU kept busy for as long as the ring
//! is active (plus `sq_thread_idle` after it). That pays only when the poll thread runs on a
//! CPU that would otherwise be idle, which is why the coordinator pins it (`IORING_SETUP_SQ_AFF`)
//! to an idle CPU and never to one running an executor. SQPOLL needs kernel 5.11+ for
//! unprivileged use (CAP_SYS_NICE before 5.13 in some configurations).
//!
//! Buffers: one slot per read that can be in flight plus one for the read being decoded, each
//! as large as the largest read, allocated once on huge pages (one device segment per read, see
//! [`crate::hugepages`]), aligned for `O_DIRECT` and registered with the ring
//! (`IORING_REGISTER_BUFFERS`), so the kernel pins them once instead of on every read.
//!
//! Teardown: the ring counts the reads the kernel owes a completion for (`pending`). When a scan
//! stops early (a damaged page, a cancelled run), dropping the backend submits whatever is still
//! queued, then waits for exactly those completions before freeing the buffers the kernel writes
//! into; it never waits for a completion it has already reaped or for a read never submitted.
//!
//! Layering: a backend; imports only the backend interface (`backend`) and `hugepages`.

use std::fs::{File, OpenOptions};
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

use io_uring::{opcode, types, IoUring};

use crate::backend::{BackendOptions, BackendStats, ByteRange, SyncBackend};
use crate::hugepages::{huge_page_bytes, HugeRegion};

/// Alignment of the buffers: enough for any logical block size `O_DIRECT` may require.
const BUFFER_ALIGN: usize = 4096;
/// How long the SQ poll thread spins without work before it sleeps, in milliseconds.
const SQ_THREAD_IDLE_MS: u32 = 50;

/// One executor's ring and its registered buffers.
pub(crate) struct UringBackend {
    ring: IoUring,
    file: File,
    o_direct: bool,
    /// Freed by `Drop` only once the kernel owes no completion (it may still write into them).
    buffers: ManuallyDrop<AlignedBuffers>,
    /// Completion results by slot: `None` while the read is in flight.
    results: Vec<Option<i32>>,
    /// Reads pushed to the submission queue whose completion has not been reaped yet.
    pending: u64,
    /// Sequence number of the next read to start; its slot is `seq % slots`.
    next_seq: u64,
    /// Sequence number of the oldest read not yet released.
    oldest_seq: u64,
    enters: u64,
    sqpoll_cpu: Option<usize>,
    /// Whether the buffers are registered (`READ_FIXED`); plain `READ` when the kernel refused.
    registered: bool,
    notice: Option<String>,
    /// CPU time of this ring's poll thread when the scan started, if it could be found.
    poll_thread: Option<(i32, f64)>,
}

impl UringBackend {
    /// Builds the ring: `options.capacity` reads in flight, SQPOLL on `options.sqpoll_cpu`.
    pub(crate) fn open(options: &BackendOptions<'_>) -> io::Result<Self> {
        let capacity = options.capacity.max(1);
        let slots = capacity + 1;
        let slot_len = options.max_read_bytes;
        let faults = options.faults;
        let mut notices = Vec::new();
        let (file, o_direct) = open_direct(options.path, faults.odirect)?;
        if !o_direct {
            notices.push("O_DIRECT refused for this file: uring reads through the page cache");
        }
        let entries = (slots as u32).next_power_of_two().max(8);
        let mut sqpoll_cpu = options.sqpoll_cpu;
        let ring = match sqpoll_cpu {
            Some(cpu) => {
                let built = if faults.sqpoll {
                    Err(io::Error::from_raw_os_error(libc::EPERM))
                } else {
                    IoUring::builder()
                        .setup_sqpoll(SQ_THREAD_IDLE_MS)
                        .setup_sqpoll_cpu(cpu as u32)
                        .build(entries)
                };
                match built {
                    Ok(ring) => ring,
                    Err(_) => {
                        notices.push("the kernel refused SQPOLL: plain io_uring ring");
                        sqpoll_cpu = None;
                        IoUring::new(entries)?
                    }
                }
            }
            None => IoUring::new(entries)?,
        };
        let buffers = AlignedBuffers::new(slots, slot_len)?;
        let iovecs: Vec<libc::iovec> = (0..slots)
            .map(|i| libc::iovec {
                iov_base: buffers.slot_ptr(i).cast(),
                iov_len: slot_len,
            })
            .collect();
        // SAFETY: the buffers live as long as the ring (both are fields of self; Drop waits
        // for reads in flight before either is released) and are never moved.
        let registered =
            !faults.memlock && unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok();
        if !registered {
            notices.push("buffer registration refused (RLIMIT_MEMLOCK?): unregistered reads");
        }
        let poll_thread = sqpoll_cpu.and_then(|_| find_poll_thread(ring.as_raw_fd()));
        Ok(UringBackend {
            ring,
            file,
            o_direct,
            buffers: ManuallyDrop::new(buffers),
            results: vec![None; slots],
            pending: 0,
            next_seq: 0,
            oldest_seq: 0,
            enters: 0,
            sqpoll_cpu,
            registered,
            notice: (!notices.is_empty()).then(|| notices.join("; ")),
            poll_thread,
        })
    }

    fn slot(&self, seq: u64) -> usize {
        (seq % self.results.len() as u64) as usize
    }

    fn reap(&mut self) {
        let slots = self.results.len() as u64;
        for cqe in self.ring.completion() {
            let slot = (cqe.user_data() % slots) as usize;
            self.results[slot] = Some(cqe.result());
            self.pending -= 1;
        }
    }
}

impl SyncBackend for UringBackend {
    fn capacity(&self) -> usize {
        self.results.len() - 1
    }

    fn start(&mut self, read: ByteRange) -> io::Result<()> {
        let seq = self.next_seq;
        let slot = self.slot(seq);
        let len = u32::try_from(read.len)
            .ok()
            .filter(|&l| l as usize <= self.buffers.slot_len)
            .ok_or_else(|| io::Error::other("read larger than a buffer slot"))?;
        let fd = types::Fd(self.file.as_raw_fd());
        let buf = self.buffers.slot_ptr(slot);
        let offset = read.offset;
        let entry = if self.registered {
            opcode::ReadFixed::new(fd, buf, len, slot as u16)
                .offset(offset)
                .build()
        } else {
            opcode::Read::new(fd, buf, len).offset(offset).build()
        }
        .user_data(seq);
        self.results[slot] = None;
        // SAFETY: the entry points into a registered slot that no other read uses until this
        // one is released.
        unsafe {
            if self.ring.submission().push(&entry).is_err() {
                self.flush()?;
                self.ring
                    .submission()
                    .push(&entry)
                    .map_err(|_| io::Error::other("submission queue full"))?;
            }
        }
        self.pending += 1;
        self.next_seq += 1;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.ring.submit()?;
        // With SQPOLL, submit() enters the kernel only to wake a sleeping poll thread.
        if self.sqpoll_cpu.is_none() {
            self.enters += 1;
        }
        Ok(())
    }

    fn wait(&mut self, _read: ByteRange) -> io::Result<()> {
        let slot = self.slot(self.oldest_seq);
        loop {
            self.reap();
            if self.results[slot].is_some() {
                break;
            }
            if self.pending == 0 {
                return Err(io::Error::other("waited for a read that was never started"));
            }
            self.ring.submit_and_wait(1)?;
            self.enters += 1;
        }
        let res = self.results[slot].unwrap_or(0);
        if res < 0 {
            return Err(io::Error::from_raw_os_error(-res));
        }
        // A short read (the end of the file) hands over what arrived; the scan loop checks
        // that whole pages came back.
        Ok(())
    }

    fn bytes(&self, _read: ByteRange) -> &[u8] {
        let slot = self.slot(self.oldest_seq);
        let len = self.results[slot].unwrap_or(0).max(0) as usize;
        &self.buffers.slot(slot)[..len]
    }

    fn release(&mut self) {
        self.oldest_seq += 1;
    }

    fn o_direct(&self) -> bool {
        self.o_direct
    }

    fn name(&self) -> &'static str {
        "uring"
    }

    fn notice(&self) -> Option<String> {
        self.notice.clone()
    }

    fn sqpoll_cpu(&self) -> Option<usize> {
        self.sqpoll_cpu
    }

    fn stats(&mut self) -> BackendStats {
        BackendStats {
            io_uring_enters: Some(self.enters),
            huge_page_buffers: huge_page_bytes(self.buffers.slot_ptr(0)).map(|b| b > 0),
            sqpoll_cpu_s: self
                .poll_thread
                .and_then(|(tid, before)| thread_cpu_s(tid).map(|now| (now - before).max(0.0))),
        }
    }
}

impl UringBackend {
    /// Waits for every completion the kernel still owes, after submitting what is queued (an
    /// entry left in the submission queue would otherwise never complete). Returns whether the
    /// kernel owes nothing any more.
    fn drain(&mut self) -> bool {
        self.reap();
        while self.pending > 0 {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
            self.reap();
        }
        true
    }
}

impl Drop for UringBackend {
    fn drop(&mut self) {
        // Reads still in flight (after an error) write into the buffers: free them only once
        // every one has completed. If the ring cannot be waited on, leak them instead.
        if self.drain() {
            // SAFETY: dropped once, here; the kernel owes no completion into them.
            unsafe { ManuallyDrop::drop(&mut self.buffers) };
        }
    }
}

/// Opens the file with `O_DIRECT`, falling back to buffered reads where the filesystem refuses
/// it (tmpfs, some FUSE and network filesystems) or the `odirect` fault is injected. Returns
/// the file and whether `O_DIRECT` is really set.
fn open_direct(path: &std::path::Path, refuse: bool) -> io::Result<(File, bool)> {
    let direct = if refuse {
        Err(io::Error::from_raw_os_error(libc::EINVAL))
    } else {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
    };
    match direct {
        Ok(f) => {
            let on = super::has_o_direct(f.as_raw_fd());
            Ok((f, on))
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok((File::open(path)?, false)),
        Err(e) => Err(e),
    }
}

/// Buffers allocated once, on huge pages where the kernel allows (see
/// [`crate::hugepages`]), aligned for `O_DIRECT`.
struct AlignedBuffers {
    region: HugeRegion,
    base: *mut u8,
    slot_len: usize,
}

impl AlignedBuffers {
    fn new(slots: usize, slot_len: usize) -> io::Result<Self> {
        let slot_len = slot_len.div_ceil(BUFFER_ALIGN) * BUFFER_ALIGN;
        let mut region = HugeRegion::new(slots * slot_len)?;
        let base = region.as_mut_ptr();
        Ok(AlignedBuffers {
            region,
            base,
            slot_len,
        })
    }

    fn slot_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY: callers pass i < slots, so the offset stays inside the region.
        unsafe { self.base.add(i * self.slot_len) }
    }

    fn slot(&self, i: usize) -> &[u8] {
        debug_assert!((i + 1) * self.slot_len <= self.region.len());
        // SAFETY: the slot lies inside the region (which lives as long as self); the kernel has
        // finished writing it (the caller saw its completion). Only this slot is borrowed:
        // other slots may still be receiving reads.
        unsafe { std::slice::from_raw_parts(self.slot_ptr(i), self.slot_len) }
    }
}

/// The SQ poll thread of the ring `ring_fd` and its CPU time so far: from the ring's fdinfo, or
/// on kernels that do not show it there, the newest `iou-sqp-*` thread of this process (called
/// right after the ring is built, so the newest is this ring's unless another scan in the same
/// process made one in between).
fn find_poll_thread(ring_fd: i32) -> Option<(i32, f64)> {
    // The ring's own fdinfo names its poll thread (`SqThread:`); other rings in the process
    // (another scan running beside this one) have theirs.
    let own = std::fs::read_to_string(format!("/proc/self/fdinfo/{ring_fd}"))
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("SqThread:"))
                .and_then(|v| v.trim().parse::<i32>().ok())
        })
        .filter(|&tid| tid > 0);
    // The kernel gives the thread's id in the initial PID namespace; inside another one
    // (a container) /proc/self/task does not know it, so fall back.
    if let Some(found) = own.and_then(|tid| thread_cpu_s(tid).map(|s| (tid, s))) {
        return Some(found);
    }
    // Kernels whose fdinfo does not say: the newest poll thread of the process.
    let mut best: Option<i32> = None;
    for entry in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let tid: i32 = entry.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.starts_with("iou-sqp") && best.is_none_or(|b| tid > b) {
            best = Some(tid);
        }
    }
    best.and_then(|tid| thread_cpu_s(tid).map(|s| (tid, s)))
}

/// User plus system CPU time of thread `tid` of this process, in seconds.
fn thread_cpu_s(tid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no side effects.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((utime + stime) / ticks.max(1.0))
}
