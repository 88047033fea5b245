//! Starting a scan's executors: [`Launch::prepare`] cuts the table into shares, resolves the
//! I/O path ([`crate::backend::policy`]) and sizes the rings and windows; [`Launch::spawn`]
//! starts one pinned executor per share (a pooled glommio executor, or a plain pinned thread
//! for the backends without a ring), each reporting exactly one outcome over a channel, even
//! when it panics.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::{unbounded, Receiver};
use futures_lite::FutureExt;
use partitioner::{Share, TablePlan};

use crate::backend::policy::{self, ResolvedIo, Runtime};
use crate::backend::IoBackend;
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::pool;
use crate::readahead::max_read_pages;
use crate::scan::task::Cancel;
use crate::scan::{Arrival, ScanKernel, StartGate};
use crate::settings::{ExecutorSpec, ScanSettings};

use super::file_run::{FileScans, TaskBase, Unit, UnitRun};
use super::job::{ExecutorJob, Outcome, RangeJob};
use super::range_order::RangeOrder;

/// What every executor of a run is started with.
pub(super) struct Launch {
    /// Each executor's share of the table, in range order.
    shares: Vec<Share>,
    /// The resolved I/O path.
    pub io: ResolvedIo,
    /// The largest read, in pages.
    pub max_read: u32,
    /// Pages in flight ahead of the decoder.
    readahead: u32,
    /// Reads in flight per executor for the synchronous backends.
    sync_capacity: usize,
    /// Each glommio executor's ring depth.
    ring_depth: usize,
    /// A cold scan's executors wait here for each other's leaf parents.
    gate: Option<Arc<StartGate>>,
    /// The failures to pretend.
    faults: Faults,
    /// The cancellation mark the executors share.
    cancel: Arc<Cancel>,
    /// How the ranges are cut and read.
    order: RangeOrder,
    /// The backend was asked for as `auto`.
    auto: bool,
    /// A failing executor cancels no other (a segmented scan, [`super::segments`]: the
    /// consumer stops the rest once it has reached the failure in the result's order).
    pub keep_going: bool,
}

/// The executors started, by CPU.
pub(super) type Workers = Vec<(usize, Worker)>;

/// The channel of the executors' outcomes, each with its range's index.
pub(super) type Outcomes<P> = Receiver<(usize, Outcome<P>)>;

/// Executors started by a scan that have not yet reported (see [`running_executors`]).
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// How many executors, over every scan of this process, are still running: started and not
/// yet done with their range (an executor kept idle for the next scan does not count). A
/// cancelled scan's executors leave this count as they stop.
pub fn running_executors() -> usize {
    RUNNING.load(Ordering::Relaxed)
}

impl Launch {
    /// Shares, I/O path and sizes for `executors` over `plan` (see the module docs).
    pub fn prepare(
        plan: &TablePlan,
        settings: &ScanSettings,
        executors: &[ExecutorSpec],
        order: RangeOrder,
        available: &[usize],
    ) -> Result<Launch> {
        let weights: Vec<u32> = executors.iter().map(|e| e.weight).collect();
        // A plan that left the leaf-parent level to the scan is cut into runs of that level,
        // which each executor reads on its own CPU (ExecutorTask::prepare).
        let shares = plan.shares(&weights, matches!(order, RangeOrder::Key))?;
        Self::prepare_shares(plan, shares, settings, executors, order, available)
    }

    /// [`Launch::prepare`] with the table already cut into `shares` (one per executor for
    /// [`Launch::spawn`]; any number for [`Launch::spawn_units`]).
    pub fn prepare_shares(
        plan: &TablePlan,
        shares: Vec<Share>,
        settings: &ScanSettings,
        executors: &[ExecutorSpec],
        order: RangeOrder,
        available: &[usize],
    ) -> Result<Launch> {
        let page_size = plan.header.page_size;
        let max_read = max_read_pages(settings.coalesce_kib, page_size);
        let faults = settings.faults;
        let window_bytes =
            (u64::from(settings.readahead.max(1)) + u64::from(max_read) + 2) * u64::from(page_size);
        let io = policy::resolve(plan, settings, executors, available, window_bytes, &faults)?;
        // Reads in flight per executor for the synchronous backends: enough for a full window
        // of the largest reads, with room for smaller ones at extent ends.
        let window = settings.readahead.max(1);
        let sync_capacity = ((window / max_read) * 2 + 2).min(window + 1) as usize;
        let ring_depth = (settings.readahead.max(1) as usize + 8)
            .next_power_of_two()
            .clamp(128, 4096);
        // A cold scan's executors read their parents first, all of them, then the leaves.
        let parents_shared = shares.iter().any(|s| matches!(s, Share::Parents(_)));
        let gate = (parents_shared && !io.cached && executors.len() > 1)
            .then(|| StartGate::new(executors.len()));
        Ok(Launch {
            shares,
            io,
            max_read,
            readahead: settings.readahead,
            sync_capacity,
            ring_depth,
            gate,
            faults,
            cancel: Arc::new(Cancel::new()),
            order,
            auto: settings.io == crate::settings::IoChoice::Auto,
            keep_going: false,
        })
    }

    /// Starts one executor per share, each running `kernel_for(index)` over its share, and
    /// returns them with the channel of their outcomes (one message each).
    pub fn spawn<K: ScanKernel>(
        &mut self,
        plan: &TablePlan,
        executors: &[ExecutorSpec],
        mut kernel_for: impl FnMut(usize) -> K,
    ) -> (Workers, Outcomes<K::Partial>) {
        let shares = std::mem::take(&mut self.shares);
        let (tx, rx) = unbounded::<(usize, Outcome<K::Partial>)>();
        let mut workers = Vec::with_capacity(executors.len());
        let wal = plan.wal.clone().map(Arc::new);
        for (index, (spec, share)) in executors.iter().zip(shares).enumerate() {
            let mut task = self.task_base(index, spec.cpu).task(
                &plan.path,
                &plan.header,
                wal.clone(),
                share,
                (self.io.backend, plan.index_scan.clone()),
            );
            task.gate = self.gate.clone().map(|g| Arc::new(Arrival(g)));
            let job = RangeJob {
                task,
                kernel: kernel_for(index),
            };
            workers.extend(self.start(index, spec.cpu, job, &tx));
        }
        (workers, rx)
    }
}

impl Launch {
    /// Starts one executor per entry of `executors`, executor `i` reading the units of a
    /// scan of several files `dealt[i]` one after the other (see [`super::file_run`]); each
    /// reports the partials of its units in order and one report over all of them.
    pub fn spawn_units<K: ScanKernel, S: FileScans<K>>(
        &mut self,
        executors: &[ExecutorSpec],
        paths: Arc<Vec<std::path::PathBuf>>,
        dealt: Vec<Vec<(usize, Unit<S::Bound>)>>,
        scans: Arc<S>,
    ) -> (Workers, Outcomes<Vec<Option<K::Partial>>>) {
        let (tx, rx) = unbounded::<(usize, Outcome<Vec<Option<K::Partial>>>)>();
        let mut workers = Vec::with_capacity(executors.len());
        for (index, (spec, units)) in executors.iter().zip(dealt).enumerate() {
            let run = UnitRun {
                units,
                paths: Arc::clone(&paths),
                scans: Arc::clone(&scans),
                base: self.task_base(index, spec.cpu),
                key_order: matches!(self.order, RangeOrder::Key),
                kernel: std::marker::PhantomData,
            };
            workers.extend(self.start(index, spec.cpu, run, &tx));
        }
        (workers, rx)
    }

    /// Starts executor `index` on `cpu` running `job`: a pooled glommio executor or a plain
    /// pinned thread, by the resolved runtime. The executor sends exactly one outcome on `tx`
    /// (a panic is caught and sent as its error), and a failure cancels the executors it
    /// should; an executor that cannot start sends its error at once and is not returned.
    fn start<J: ExecutorJob>(
        &self,
        index: usize,
        cpu: usize,
        job: J,
        tx: &crossbeam_channel::Sender<(usize, Outcome<J::Partial>)>,
    ) -> Option<(usize, Worker)> {
        let (order, sync_capacity, keep_going) = (self.order, self.sync_capacity, self.keep_going);
        let (exec_tx, exec_cancel) = (tx.clone(), self.cancel.clone());
        let report = move |result: std::thread::Result<Outcome<J::Partial>>| {
            let result = result.unwrap_or_else(|payload| {
                Err(Error::Panicked {
                    cpu,
                    message: panic_message(payload.as_ref()),
                })
            });
            if result.is_err() && !keep_going {
                match order {
                    RangeOrder::File => exec_cancel.all(),
                    RangeOrder::Key => exec_cancel.after(index),
                }
            }
            let _ = exec_tx.send((index, result));
            RUNNING.fetch_sub(1, Ordering::Relaxed);
        };
        RUNNING.fetch_add(1, Ordering::Relaxed);
        let name = format!("corescan-cpu{cpu}");
        let spawned = match self.io.runtime {
            Runtime::Glommio => {
                let key = pool::Key {
                    cpu,
                    ring_depth: self.ring_depth,
                    io_memory: self.io.io_memory,
                };
                let job: pool::Job = Box::new(move || {
                    Box::pin(async move {
                        let outcome = AssertUnwindSafe(job.run_async(sync_capacity))
                            .catch_unwind()
                            .await;
                        report(outcome);
                    })
                });
                pool::Executor::start(key, &name, job).map(Worker::Pooled)
            }
            Runtime::Threads => std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    let pinned = core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
                    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        if !pinned {
                            return Err(Error::Start {
                                cpu,
                                cause: "cannot pin the thread to this CPU".into(),
                            });
                        }
                        // On its own CPU: the threads do this work at once, not in turn.
                        job.run_sync(sync_capacity)
                    }));
                    report(outcome);
                })
                .map(Worker::Thread)
                .map_err(|e| e.to_string()),
        };
        match spawned {
            Ok(h) => Some((cpu, h)),
            Err(e) => {
                RUNNING.fetch_sub(1, Ordering::Relaxed);
                match order {
                    RangeOrder::File => self.cancel.all(),
                    RangeOrder::Key => self.cancel.after(index),
                }
                let _ = tx.send((index, Err(Error::Start { cpu, cause: e })));
                None
            }
        }
    }

    /// What every task of executor `index` shares, whichever file it reads.
    fn task_base(&self, index: usize, cpu: usize) -> TaskBase {
        // `auto` found the files cold and chose O_DIRECT: whole files (small, most often) are
        // read buffered instead, the next files' first pages requested ahead, so that one
        // file's planning and reads overlap the next ones' (file_run::Prefetch).
        let prefetch = self.auto && !self.io.cached && self.io.backend == IoBackend::Dma;
        TaskBase {
            index,
            cpu,
            readahead: self.readahead,
            hints: self.readahead > 0 && !self.io.cached,
            max_read_pages: self.max_read,
            backend: self.io.backend,
            whole_backend: if prefetch {
                IoBackend::Pread
            } else {
                self.io.backend
            },
            prefetch,
            sqpoll_cpu: self.io.sqpoll_cpus[index],
            faults: self.faults,
            cancel: self.cancel.clone(),
        }
    }
}

/// An executor running a scan's range.
pub(super) enum Worker {
    /// A glommio executor of the pool ([`crate::pool`]), given back when its range is done.
    Pooled(pool::Executor),
    /// A plain pinned thread (no io_uring).
    Thread(std::thread::JoinHandle<()>),
}

impl Worker {
    /// Waits for a plain thread; gives a pooled executor back (its job has reported).
    pub fn join(self) -> std::result::Result<(), String> {
        match self {
            Worker::Pooled(e) => {
                e.release();
                Ok(())
            }
            Worker::Thread(h) => h.join().map_err(|p| panic_message(p.as_ref())),
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}
