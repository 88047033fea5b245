//! Long-lived glommio executors, reused by the scans of a process.
//!
//! glommio 0.9 leaks an eventfd for every executor it builds and ends (DataDog/glommio#448):
//! a process that built its executors afresh for every scan (a server answering queries, the
//! differential tester, `bench compare`) ran out of descriptors after a few hundred scans. So
//! an executor is kept when its scan is done: it goes back to an idle list keyed by what it was
//! built with ([`Key`]: CPU, ring depth, I/O memory), and the next scan that needs the same
//! takes it instead of building one.
//!
//! A scan takes its executors for itself ([`Executor::take`]): two scans running at once never
//! share one, so neither ever waits for the other (a key-ordered scan's executors wait for
//! their consumer, and a shared executor could close a cycle of waits between two scans). When
//! no idle executor fits, a new one is built. At most [`MAX_IDLE_PER_KEY`] executors stay idle
//! per key and two per CPU in all; one more ends (and leaks its eventfd, as before). Idle
//! executors keep their rings and their locked I/O memory: when building one fails (the
//! `RLIMIT_MEMLOCK` budget taken by idle ones), the idle ones are ended and the build is
//! tried once more.
//!
//! Layering: below the coordinator, its only user; imports nothing from the crate.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, OnceLock};

use crossbeam_channel::{unbounded, Receiver, Sender};
use glommio::{ExecutorJoinHandle, LocalExecutorBuilder, Placement};

/// Work for an executor: builds, on the executor's thread, the future it runs to completion.
pub(crate) type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// What an executor was built with; only an executor built the same way is reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    /// The CPU it is pinned to.
    pub cpu: usize,
    /// Its io_uring rings' depth.
    pub ring_depth: usize,
    /// Bytes of registered I/O memory.
    pub io_memory: usize,
}

/// The most idle executors kept for one key.
pub(crate) const MAX_IDLE_PER_KEY: usize = 2;

/// The most idle executors kept in all: two per CPU this process may use, so that what idle
/// executors hold (rings, locked I/O memory: about 8 MiB each with the default window) stays
/// proportional to the machine.
fn max_idle() -> usize {
    2 * std::thread::available_parallelism().map_or(1, usize::from)
}

/// A pinned glommio executor running the jobs it is sent, one after the other.
pub(crate) struct Executor {
    key: Key,
    jobs: Sender<Job>,
    thread: ExecutorJoinHandle<()>,
}

/// The idle executors by key.
fn idle() -> MutexGuard<'static, HashMap<Key, Vec<Executor>>> {
    static IDLE: OnceLock<Mutex<HashMap<Key, Vec<Executor>>>> = OnceLock::new();
    IDLE.get_or_init(Default::default)
        .lock()
        // A panic while the list was held cannot leave it inconsistent (pushes and pops).
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Executor {
    /// Runs `job` on an idle executor built for `key`, or on a new one (its thread named
    /// `name`), and returns that executor, which the caller gives back with
    /// [`Executor::release`] once the job has reported.
    pub(crate) fn start(key: Key, name: &str, mut job: Job) -> Result<Executor, String> {
        loop {
            let Some(e) = idle().get_mut(&key).and_then(Vec::pop) else {
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
    /// finishing delays the next scan's, never mixes with it), or ends it when the list is full.
    pub(crate) fn release(self) {
        let mut idle = idle();
        let total: usize = idle.values().map(Vec::len).sum();
        let list = idle.entry(self.key).or_default();
        if list.len() < MAX_IDLE_PER_KEY && total < max_idle() {
            list.push(self);
        } else {
            drop(idle);
            self.end();
        }
    }

    /// Ends the executor and waits for its thread.
    fn end(self) {
        drop(self.jobs);
        let _ = self.thread.join();
    }
}

/// Ends every idle executor (freeing their rings and locked memory); returns how many.
fn end_idle() -> usize {
    let all: Vec<Executor> = idle().drain().flat_map(|(_, list)| list).collect();
    let n = all.len();
    for e in all {
        e.end();
    }
    n
}

/// How many executors are idle now (for tests).
#[cfg(test)]
pub(crate) fn idle_count() -> usize {
    idle().values().map(Vec::len).sum()
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
}
