//! Long-lived glommio executors, reused by the scans of a process.
//!
//! glommio 0.9 leaks an eventfd for every executor it builds and ends (DataDog/glommio#448):
//! a process that built its executors afresh for every scan (a server answering queries, the
//! differential tester, `bench compare`) ran out of descriptors after a few hundred scans. So
//! an executor is kept when its scan is done: it goes back to an idle list with what it was
//! built with ([`Key`]: CPU, ring depth, I/O memory), and the next scan on that CPU takes one
//! that has at least the ring depth and I/O memory it needs (the smallest such) instead of
//! building one. Bigger is kept over smaller: a process that alternates scan shapes (readahead
//! windows, backends) soon holds executors every shape fits, and stops building (and leaking).
//!
//! A scan takes its executors for itself ([`Executor::take`]): two scans running at once never
//! share one, so neither ever waits for the other (a key-ordered scan's executors wait for
//! their consumer, and a shared executor could close a cycle of waits between two scans). When
//! no idle executor fits, a new one is built. At most [`MAX_IDLE_PER_CPU`] executors stay idle
//! per CPU; when one more comes back, the smallest of them ends (and leaks its eventfd). Idle
//! executors keep their rings and their locked I/O memory: when building one fails (the
//! `RLIMIT_MEMLOCK` budget taken by idle ones), the idle ones are ended and the build is
//! tried once more.
//!
//! Layering: below the coordinator, its only user; imports nothing from the crate.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, OnceLock};

use crossbeam_channel::{unbounded, Receiver, Sender};
use glommio::{ExecutorJoinHandle, LocalExecutorBuilder, Placement};

/// Work for an executor: builds, on the executor's thread, the future it runs to completion.
pub(crate) type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// What an executor was built with, or what a scan needs of one: an executor serves a scan
/// whose key it [fits](Key::fits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    /// The CPU it is pinned to.
    pub cpu: usize,
    /// Its io_uring rings' depth.
    pub ring_depth: usize,
    /// Bytes of registered I/O memory.
    pub io_memory: usize,
}

impl Key {
    /// Whether an executor built with this key serves a scan that needs `want`: the same CPU,
    /// rings at least as deep and at least as much I/O memory (more of either costs a scan
    /// nothing: the rings are never fuller than its window, the memory is a pool).
    fn fits(&self, want: &Key) -> bool {
        self.cpu == want.cpu
            && self.ring_depth >= want.ring_depth
            && self.io_memory >= want.io_memory
    }

    /// The order in which idle executors are taken and kept: smaller first.
    fn size(&self) -> (usize, usize) {
        (self.io_memory, self.ring_depth)
    }
}

/// The most idle executors kept for one CPU (two scans at once each take one).
pub(crate) const MAX_IDLE_PER_CPU: usize = 2;

/// A pinned glommio executor running the jobs it is sent, one after the other.
pub(crate) struct Executor {
    key: Key,
    jobs: Sender<Job>,
    thread: ExecutorJoinHandle<()>,
}

/// The idle executors.
fn idle() -> MutexGuard<'static, Vec<Executor>> {
    static IDLE: OnceLock<Mutex<Vec<Executor>>> = OnceLock::new();
    IDLE.get_or_init(Default::default)
        .lock()
        // A panic while the list was held cannot leave it inconsistent (pushes and pops).
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Executor {
    /// Runs `job` on the smallest idle executor that fits `key`, or on a new one built for it
    /// (its thread named `name`), and returns that executor, which the caller gives back with
    /// [`Executor::release`] once the job has reported.
    pub(crate) fn start(key: Key, name: &str, mut job: Job) -> Result<Executor, String> {
        loop {
            let taken = {
                let mut idle = idle();
                let keys: Vec<Key> = idle.iter().map(|e| e.key).collect();
                choose(&keys, &key).map(|i| idle.swap_remove(i))
            };
            let Some(e) = taken else {
                break;
            };
            match e.jobs.send(job) {
                Ok(()) => return Ok(e),
                // Its thread ended (glommio's reactor failed): try the next one.
                Err(back) => job = back.0,
            }
        }
        let e = match Self::build(key, name) {
            Ok(e) => e,
            Err(first) => {
                if end_idle() == 0 {
                    return Err(first);
                }
                Self::build(key, name)?
            }
        };
        e.jobs
            .send(job)
            .map_err(|_| "the executor's thread ended as it started".to_string())?;
        Ok(e)
    }

    fn build(key: Key, name: &str) -> Result<Executor, String> {
        let (jobs, inbox): (Sender<Job>, Receiver<Job>) = unbounded();
        let thread = LocalExecutorBuilder::new(Placement::Fixed(key.cpu))
            .name(name)
            .io_memory(key.io_memory)
            .ring_depth(key.ring_depth)
            .spawn(move || async move {
                // Between scans the thread sleeps here; nothing else runs on this executor.
                while let Ok(job) = inbox.recv() {
                    job().await;
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Executor { key, jobs, thread })
    }

    /// Puts the executor back on the idle list once its job is done (jobs queue, so one still
    /// finishing delays the next scan's, never mixes with it). When its CPU already has
    /// [`MAX_IDLE_PER_CPU`] idle ones, the smallest of them and it ends.
    pub(crate) fn release(self) {
        let mut idle = idle();
        let cpu = self.key.cpu;
        idle.push(self);
        let keys: Vec<Key> = idle.iter().map(|e| e.key).collect();
        let ended = surplus(&keys, cpu).map(|i| idle.swap_remove(i));
        drop(idle);
        if let Some(e) = ended {
            e.end();
        }
    }

    /// Ends the executor and waits for its thread.
    fn end(self) {
        drop(self.jobs);
        let _ = self.thread.join();
    }
}

/// Which of the idle executors (their keys) a scan that needs `want` takes: the smallest that
/// fits it.
fn choose(idle: &[Key], want: &Key) -> Option<usize> {
    (0..idle.len())
        .filter(|&i| idle[i].fits(want))
        .min_by_key(|&i| idle[i].size())
}

/// Which idle executor (by key) ends when CPU `cpu` has more than [`MAX_IDLE_PER_CPU`]: its
/// smallest.
fn surplus(idle: &[Key], cpu: usize) -> Option<usize> {
    let on_cpu = (0..idle.len()).filter(|&i| idle[i].cpu == cpu);
    if on_cpu.clone().count() <= MAX_IDLE_PER_CPU {
        return None;
    }
    on_cpu.min_by_key(|&i| idle[i].size())
}

/// Ends every idle executor (freeing their rings and locked memory); returns how many.
fn end_idle() -> usize {
    let all: Vec<Executor> = idle().drain(..).collect();
    let n = all.len();
    for e in all {
        e.end();
    }
    n
}

/// How many executors are idle now (for tests).
#[cfg(test)]
pub(crate) fn idle_count() -> usize {
    idle().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_executor_runs_jobs_in_turn_and_is_reused() {
        let key = Key {
            cpu: 0,
            ring_depth: 128,
            io_memory: 1 << 20,
        };
        let (tx, rx) = unbounded();
        let thread_of = |tx: Sender<std::thread::ThreadId>| -> Job {
            Box::new(move || {
                Box::pin(async move {
                    tx.send(std::thread::current().id()).unwrap();
                })
            })
        };
        let e = Executor::start(key, "pool-test", thread_of(tx.clone())).unwrap();
        let first = rx.recv().unwrap();
        e.release();
        assert!(idle_count() >= 1);
        let again = Executor::start(key, "pool-test", thread_of(tx)).unwrap();
        assert_eq!(
            rx.recv().unwrap(),
            first,
            "the same executor thread ran both"
        );
        again.release();
    }

    #[test]
    fn a_scan_takes_the_smallest_idle_executor_that_fits_and_the_smallest_ends_first() {
        let key = |cpu, ring_depth, io_memory| Key {
            cpu,
            ring_depth,
            io_memory,
        };
        let idle = [
            key(0, 4096, 8 << 20),
            key(1, 128, 64 << 10),
            key(0, 512, 1 << 20),
        ];
        // Less of both than two of them: the smaller of those; the other CPU's never.
        assert_eq!(choose(&idle, &key(0, 128, 64 << 10)), Some(2));
        assert_eq!(choose(&idle, &key(0, 1024, 64 << 10)), Some(0));
        assert_eq!(choose(&idle, &key(1, 128, 64 << 10)), Some(1));
        // Deeper rings or more memory than any: none (a new one is built).
        assert_eq!(choose(&idle, &key(1, 256, 64 << 10)), None);
        assert_eq!(choose(&idle, &key(0, 128, 16 << 20)), None);
        assert_eq!(choose(&idle, &key(2, 128, 64 << 10)), None);
        // Two per CPU stay; a third makes the smallest end (so the bigger, which serve every
        // smaller scan, are the ones kept).
        assert_eq!(surplus(&idle, 0), None);
        let more = [idle[0], idle[1], idle[2], key(0, 1024, 2 << 20)];
        assert_eq!(surplus(&more, 0), Some(2));
        assert_eq!(surplus(&more, 1), None);
    }
}
