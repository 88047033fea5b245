//! Byte-range read locks on a file, the kernel objects SQLite's locking protocol is made of.
//!
//! SQLite coordinates its connections, in every process, only through `fcntl` byte-range locks:
//! on the database file for the rollback-mode lock states (`SHARED` and up, see
//! [`crate::snapshot`]) and on the `-shm` file for the write-ahead log's read marks. A reader
//! that takes the same locks is, to every SQLite connection, just another reader.
//!
//! Policy: corescan only ever takes *read* locks (`F_RDLCK`), never a write lock, and always
//! without waiting (`F_OFD_SETLK`, not the blocking `F_OFD_SETLKW`): a busy lock is reported as
//! [`LockOutcome::Busy`] and the caller backs off and retries as SQLite does.
//!
//! The locks are Linux *open file description* locks (`F_OFD_SETLK` / `F_OFD_GETLK`, Linux 3.15):
//! they belong to the open file, not to the process, so closing another descriptor of the same
//! file (the engine's executors open the database and its log themselves) does not drop them,
//! which is what happens to POSIX `F_SETLK` locks. They still conflict with the POSIX locks
//! SQLite takes, in other processes and in this one. Closing the [`std::fs::File`] releases its
//! locks. Where the kernel or the file system refuses locking altogether (`ENOLCK`, `EINVAL`,
//! `EOPNOTSUPP`, `ENOSYS`), [`LockOutcome::Unsupported`] lets the caller fall back to
//! verifying after the fact.
//!
//! Layering: the bottom of the file layer with [`crate::sidecar`]; it imports nothing of the
//! crate but the error-free `std` and `libc`.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

/// What an attempt to take or release a lock came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockOutcome {
    /// Done.
    Done,
    /// Another open file description holds a conflicting lock.
    Busy,
    /// The kernel or the file system does not support these locks.
    Unsupported,
}

/// The lock another open file description holds on a byte range, as `F_OFD_GETLK` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// Nobody holds any lock on the range.
    Nobody,
    /// Someone holds a read (shared) lock.
    Reader,
    /// Someone holds a write (exclusive) lock.
    Writer,
}

#[cfg(target_os = "linux")]
const SETLK: libc::c_int = libc::F_OFD_SETLK;
#[cfg(target_os = "linux")]
const GETLK: libc::c_int = libc::F_OFD_GETLK;

fn flock(kind: libc::c_short, start: u64, len: u64) -> libc::flock {
    // SAFETY: `flock` is a plain C struct; all-zero is a valid value (and OFD locks require
    // `l_pid` to be 0).
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = start as libc::off_t;
    l.l_len = len as libc::off_t;
    l
}

fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOLCK | libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS)
    )
}

#[cfg(target_os = "linux")]
fn set(file: &File, kind: libc::c_short, start: u64, len: u64) -> io::Result<LockOutcome> {
    let l = flock(kind, start, len);
    loop {
        // SAFETY: a valid descriptor and a pointer to a live, initialised `flock`.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), SETLK, &l) };
        if rc == 0 {
            return Ok(LockOutcome::Done);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN | libc::EACCES) => return Ok(LockOutcome::Busy),
            _ if unsupported(&e) => return Ok(LockOutcome::Unsupported),
            _ => return Err(e),
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn set(_: &File, _: libc::c_short, _: u64, _: u64) -> io::Result<LockOutcome> {
    Ok(LockOutcome::Unsupported)
}

/// Takes a read lock on `len` bytes of `file` from `start`, without waiting.
pub fn read_lock(file: &File, start: u64, len: u64) -> io::Result<LockOutcome> {
    set(file, libc::F_RDLCK as libc::c_short, start, len)
}

/// Releases whatever lock this open file description holds on the range.
pub fn unlock(file: &File, start: u64, len: u64) -> io::Result<LockOutcome> {
    set(file, libc::F_UNLCK as libc::c_short, start, len)
}

/// Which lock, if any, another open file description holds on the range (SQLite's `F_GETLK`
/// probes: is RESERVED held, is the `-shm` dead-man switch held). `None` when locking is not
/// supported.
#[cfg(target_os = "linux")]
pub fn holder(file: &File, start: u64, len: u64) -> io::Result<Option<Holder>> {
    let mut l = flock(libc::F_WRLCK as libc::c_short, start, len);
    // SAFETY: a valid descriptor and a pointer to a live `flock` the kernel may overwrite.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), GETLK, &mut l) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return if unsupported(&e) { Ok(None) } else { Err(e) };
    }
    Ok(Some(match i32::from(l.l_type) {
        t if t == libc::F_UNLCK => Holder::Nobody,
        t if t == libc::F_RDLCK => Holder::Reader,
        _ => Holder::Writer,
    }))
}

/// Without OFD locks nothing can be probed.
#[cfg(not(target_os = "linux"))]
pub fn holder(_: &File, _: u64, _: u64) -> io::Result<Option<Holder>> {
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_locks_share_and_probe_as_readers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"x").unwrap();
        let (a, b) = (File::open(&path).unwrap(), File::open(&path).unwrap());
        assert_eq!(holder(&b, 100, 1).unwrap(), Some(Holder::Nobody));
        assert_eq!(read_lock(&a, 100, 1).unwrap(), LockOutcome::Done);
        // Two open file descriptions of one process: OFD locks see each other.
        assert_eq!(holder(&b, 100, 1).unwrap(), Some(Holder::Reader));
        assert_eq!(read_lock(&b, 100, 1).unwrap(), LockOutcome::Done);
        // Closing another descriptor of the file keeps `a`'s lock (POSIX locks would go).
        drop(File::open(&path).unwrap());
        drop(b);
        let c = File::open(&path).unwrap();
        assert_eq!(holder(&c, 100, 1).unwrap(), Some(Holder::Reader));
        assert_eq!(unlock(&a, 100, 1).unwrap(), LockOutcome::Done);
        assert_eq!(holder(&c, 100, 1).unwrap(), Some(Holder::Nobody));
    }
}
