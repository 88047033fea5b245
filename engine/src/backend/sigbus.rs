//! Surviving a file that shrinks under the `mmap` backend.
//!
//! Touching a mapped page that lies past the end of its file raises SIGBUS, which kills the
//! process. That happens when another process truncates the database during a scan (a `VACUUM`
//! that shrinks the file, a careless `cp` over it), and `mmap` is what `--io auto` picks for a
//! warm table. The end-of-scan change check cannot help: the process is dead before it runs.
//!
//! So, as EFL's `eina_mmap_safety` and Sapling's indexedlog do: a SIGBUS handler looks the
//! faulting address up among the guarded mappings and, when it is in one, maps a page of zeros
//! over the page that faulted (`MAP_FIXED`, read-only) and marks the mapping. The read resumes
//! and sees zeros; the scan loop then asks [`Guard::faulted`] and stops with an error saying
//! the file shrank, rather than decoding zeros. A SIGBUS anywhere else goes to the handler that
//! was installed before (Rust's own stack-overflow handler, say) or, with none, kills the
//! process as it would have.
//!
//! The handler only does async-signal-safe work: atomic loads and stores and `mmap`.
//!
//! Layering: a leaf (imports nothing from the crate); the `mmap` backend uses it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

/// How many mappings can be guarded at once (one per `mmap` executor; more run unguarded).
const SLOTS: usize = 64;

/// One guarded mapping: `start == 0` means free.
struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    faulted: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    faulted: AtomicBool::new(false),
};

static GUARDED: [Slot; SLOTS] = [FREE; SLOTS];
static INSTALL: Once = Once::new();
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static PAGE: AtomicUsize = AtomicUsize::new(4096);

/// A mapping under the SIGBUS handler's protection; dropping it ends the protection, so drop
/// it before unmapping.
#[derive(Debug)]
pub(crate) struct Guard {
    slot: usize,
}

/// Puts `len` bytes of mapping at `start` under the handler (installing it on first use).
/// `None` when every slot is taken or the handler could not be installed: the mapping is then
/// unguarded, as it was before this module existed.
pub(crate) fn guard(start: *const u8, len: usize) -> Option<Guard> {
    if start.is_null() || len == 0 || !install() {
        return None;
    }
    for (slot, s) in GUARDED.iter().enumerate() {
        // Claim the slot with a placeholder start, then publish the real range.
        if s.start
            .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            s.faulted.store(false, Ordering::Release);
            s.len.store(len, Ordering::Release);
            s.start.store(start as usize, Ordering::Release);
            return Some(Guard { slot });
        }
    }
    None
}

impl Guard {
    /// Whether a page of the mapping was found past the end of the file (and replaced by zeros).
    pub(crate) fn faulted(&self) -> bool {
        GUARDED[self.slot].faulted.load(Ordering::Acquire)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let s = &GUARDED[self.slot];
        s.len.store(0, Ordering::Release);
        s.start.store(0, Ordering::Release);
    }
}

/// Installs the handler once; whether it is in place.
fn install() -> bool {
    INSTALL.call_once(|| {
        // SAFETY: sysconf has no side effects; sigaction reads and writes only the structs
        // passed. The previous action is saved before ours goes in, so the handler always
        // finds it.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE);
            if page > 0 {
                PAGE.store(page as usize, Ordering::Relaxed);
            }
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
                return;
            }
            let _ = PREVIOUS.set(previous);
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            // If this fails, installed() says so and mappings stay unguarded.
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
    });
    installed()
}

/// Whether our handler is the current SIGBUS action.
fn installed() -> bool {
    // SAFETY: querying the current action only.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == on_sigbus as *const () as usize
    }
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    for s in &GUARDED {
        let start = s.start.load(Ordering::Acquire);
        if start == 0 || start == usize::MAX {
            continue;
        }
        let len = s.len.load(Ordering::Acquire);
        if addr >= start && addr < start.saturating_add(len) {
            let at = addr & !(page - 1);
            // SAFETY: the page lies inside a read-only file mapping that is live (its guard
            // exists); replacing it with an anonymous zero page changes only what it reads.
            let zero = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    page,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if zero != libc::MAP_FAILED {
                s.faulted.store(true, Ordering::Release);
                return;
            }
        }
    }
    // Not ours: what would have happened without us.
    match PREVIOUS.get() {
        Some(prev) if prev.sa_sigaction != libc::SIG_DFL && prev.sa_sigaction != libc::SIG_IGN => {
            // SAFETY: the previous handler was installed for SIGBUS with these flags.
            unsafe {
                if prev.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(prev.sa_sigaction);
                    f(sig, info, context);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(prev.sa_sigaction);
                    f(sig);
                }
            }
        }
        _ => {
            // Back to the default action; returning re-runs the faulting access, which now
            // terminates the process with SIGBUS as it would have without this handler.
            // SAFETY: sigaction is async-signal-safe.
            unsafe {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &default, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn pages_past_a_truncated_end_read_as_zeros_and_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shrinks");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![7u8; 4 * 4096]).unwrap();
        f.sync_all().unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: the test owns the file; the point is what happens when it shrinks.
        let map = unsafe { memmap2::Mmap::map(&file).unwrap() };
        let g = guard(map.as_ptr(), map.len()).expect("a free slot");
        assert_eq!(map[3 * 4096], 7);
        assert!(!g.faulted());
        // Another process would do this; the effect on the mapping is the same.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4096)
            .unwrap();
        let past_end = std::hint::black_box(&map[2 * 4096..]);
        assert!(past_end.iter().all(|&b| b == 0), "zeros, not SIGBUS");
        assert!(g.faulted());
        assert_eq!(map[0], 7, "pages before the new end are untouched");
        drop(g);
        drop(map);
    }

    #[test]
    fn guards_release_their_slots() {
        let data = [1u8; 16];
        let g = guard(data.as_ptr(), data.len()).expect("a free slot");
        let slot = g.slot;
        assert_eq!(
            GUARDED[slot].start.load(Ordering::Acquire),
            data.as_ptr() as usize
        );
        drop(g);
        assert_eq!(GUARDED[slot].start.load(Ordering::Acquire), 0, "free again");
        assert!(guard(std::ptr::null(), 16).is_none());
        assert!(guard(data.as_ptr(), 0).is_none());
        assert!(installed());
    }
}
