//! An executor's share of a scan of one table over several files: a list of units, each a
//! whole file (which the executor plans itself, on its own CPU, holding the file's snapshot and
//! read locks only while it reads it) or a share of a large file the coordinator planned and
//! split among executors ([`Unit`]). The units run one after the other with a kernel each;
//! their partials come back in order with one report over all of them.
//!
//! Layering: below [`super::launch`], which starts an executor per list, and
//! [`super::files`], which cuts the files into units; above the scan loops.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use partitioner::wal::WalIndex;
use partitioner::{DbHeader, Share, TablePlan};

use crate::backend::IoBackend;
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::scan::task::Cancel;
use crate::scan::{self, ExecutorReport, ExecutorTask, FilesScanned, ScanKernel};

use super::job::ExecutorJob;

/// What a scan of several files computes, file by file (the caller's side of
/// [`crate::run_files`]).
pub trait FileScans<K: ScanKernel>: Send + Sync + 'static {
    /// What a kernel for a file is made from (the query bound to the file's columns).
    type Bound: Send + Sync + 'static;

    /// Plans file `file` at `path` as listed (the plan holds its snapshot and read locks),
    /// with what its kernels are made from; `None` skips the file (it has no such table and
    /// such files are skipped, or the query excludes it by its path).
    fn plan(&self, file: usize, path: &Path) -> Result<Option<(TablePlan, Self::Bound)>>;

    /// The kernel of unit `unit` (of file `file`), read on executor `executor` over pages of
    /// `usable` usable bytes.
    fn kernel(
        &self,
        executor: usize,
        unit: usize,
        file: usize,
        bound: &Self::Bound,
        usable: u32,
    ) -> Result<K>;

    /// Unit `unit` is not read (its file was skipped, or the scan's answer is complete).
    fn skipped(&self, _unit: usize) {}

    /// Whether the scan's answer is complete: the units not yet started are skipped.
    fn complete(&self) -> bool {
        false
    }

    /// Unit `unit` failed, or an earlier unit of its executor did: it will not be read (a
    /// stream's channel for it closes without its end, which a consumer takes as the error).
    fn failed(&self, _unit: usize) {}

    /// The run's units, by their files (in the listed order), before any is read.
    fn layout(&self, _file_of_unit: &[usize]) {}

    /// Executor `executor` is done with its units (`ok`: without an error), on its thread.
    fn executor_done(&self, _executor: usize, _ok: bool) {}
}

/// A file the coordinator planned and split among executors: what each share's task needs.
#[derive(Debug)]
pub struct PlannedFile<B> {
    /// The path, as listed.
    pub path: PathBuf,
    /// The header as of the plan's snapshot.
    pub header: DbHeader,
    /// The log's frame map.
    pub wal: Option<Arc<WalIndex>>,
    /// What the file's kernels are made from.
    pub bound: B,
    /// The plan's index scan ([`partitioner::TablePlan::index_scan`]).
    pub index_scan: Option<Arc<partitioner::plan::IndexScan>>,
}

/// One unit of work of a scan of several files.
#[derive(Debug)]
pub enum Unit<B> {
    /// A whole file, planned by the executor that reads it.
    Whole {
        /// The file's index in the listed order.
        file: usize,
    },
    /// A share of a file the coordinator planned (it holds the plan until the run ends).
    Part {
        /// The file's index in the listed order.
        file: usize,
        /// The planned file.
        planned: Arc<PlannedFile<B>>,
        /// This unit's share of it.
        share: Share,
    },
    /// A file the coordinator found skipped when it planned it.
    Skipped {
        /// The file's index in the listed order.
        file: usize,
    },
}

impl<B> Unit<B> {
    /// The unit's file.
    pub fn file(&self) -> usize {
        match self {
            Unit::Whole { file } | Unit::Part { file, .. } | Unit::Skipped { file } => *file,
        }
    }
}

/// The settings of an executor's tasks that do not depend on the file.
pub(super) struct TaskBase {
    pub index: usize,
    pub cpu: usize,
    pub readahead: u32,
    pub hints: bool,
    pub max_read_pages: u32,
    pub backend: IoBackend,
    /// The backend of whole files (buffered when [`TaskBase::prefetch`]).
    pub whole_backend: IoBackend,
    /// Request the next whole files' first pages ahead ([`Prefetch`]).
    pub prefetch: bool,
    pub sqpoll_cpu: Option<usize>,
    pub faults: Faults,
    pub cancel: Arc<Cancel>,
}

impl TaskBase {
    /// The task of this executor over `share` of the file at `path`, read with `backend`.
    pub(super) fn task(
        &self,
        path: &Path,
        header: &DbHeader,
        wal: Option<Arc<WalIndex>>,
        share: Share,
        (backend, index_scan): (IoBackend, Option<Arc<partitioner::plan::IndexScan>>),
    ) -> ExecutorTask {
        let (extents, parents) = match share {
            Share::Leaves(range) => (range.extents, None),
            Share::Parents(parents) => (Vec::new(), Some(parents)),
        };
        ExecutorTask {
            index: self.index,
            cpu: self.cpu,
            path: path.to_path_buf(),
            header: header.clone(),
            extents,
            parents,
            parent_pages: 0,
            parents_s: 0.0,
            gate: None,
            order: Vec::new(),
            wal_pages: Vec::new(),
            wal,
            readahead: self.readahead,
            hints: self.hints,
            max_read_pages: self.max_read_pages,
            backend,
            sqpoll_cpu: self.sqpoll_cpu,
            faults: self.faults,
            cancel: self.cancel.clone(),
            index_scan,
        }
    }
}

/// One executor's units (see the module docs), each with its index in the run's order.
pub(super) struct UnitRun<K: ScanKernel, S: FileScans<K>> {
    pub units: Vec<(usize, Unit<S::Bound>)>,
    pub paths: Arc<Vec<PathBuf>>,
    pub scans: Arc<S>,
    pub base: TaskBase,
    pub key_order: bool,
    pub kernel: std::marker::PhantomData<fn() -> K>,
}

/// Whole files this many units ahead of the one being read have their first pages requested.
const PREFETCH_FILES: usize = 16;

/// The first bytes of a file requested ahead: its header, schema and b-tree top, and its first
/// leaves (the buffered reader's own hints request the rest as it reads).
const PREFETCH_BYTES: i64 = 4 << 20;

/// Requests the first pages of the whole files an executor reads next
/// (`POSIX_FADV_WILLNEED`), so that the kernel reads them while the executor plans and reads
/// the current one: a cold small file is otherwise a few synchronous reads (header, schema,
/// root) and a short burst, one file after the other.
struct Prefetch {
    /// The paths of the executor's whole-file units, by position among its units.
    files: Vec<Option<PathBuf>>,
    /// Positions requested so far.
    next: usize,
    on: bool,
}

impl Prefetch {
    fn new<B>(units: &[(usize, Unit<B>)], paths: &[PathBuf], on: bool) -> Self {
        let files = if on {
            units
                .iter()
                .map(|(_, u)| match u {
                    Unit::Whole { file } => Some(paths[*file].clone()),
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        Prefetch { files, next: 0, on }
    }

    /// Before unit `i` is read: the files up to [`PREFETCH_FILES`] ahead requested.
    fn ahead_of(&mut self, i: usize) {
        if !self.on {
            return;
        }
        let end = (i + 1 + PREFETCH_FILES).min(self.files.len());
        while self.next < end {
            if let Some(path) = &self.files[self.next] {
                // Only a hint: a file that cannot be opened here fails when it is read.
                if let Ok(f) = std::fs::File::open(path) {
                    use std::os::fd::AsRawFd;
                    // SAFETY: the descriptor is open for the call; the advice reads nothing.
                    unsafe {
                        libc::posix_fadvise(
                            f.as_raw_fd(),
                            0,
                            PREFETCH_BYTES,
                            libc::POSIX_FADV_WILLNEED,
                        );
                    }
                }
            }
            self.next += 1;
        }
    }
}

/// A unit ready to read: its task and kernel, and the plan of a whole file (its snapshot,
/// released after the read).
struct Ready<K> {
    task: ExecutorTask,
    kernel: K,
    plan: Option<TablePlan>,
}

/// What an executor reports for its units: the partials in order and one report.
pub(super) type UnitsOutcome<P> = (Vec<Option<P>>, ExecutorReport);

impl<K: ScanKernel, S: FileScans<K>> ExecutorJob for UnitRun<K, S> {
    type Partial = Vec<Option<K::Partial>>;

    async fn run_async(self, sync_capacity: usize) -> Result<UnitsOutcome<K::Partial>> {
        let (scans, index) = (Arc::clone(&self.scans), self.base.index);
        let out = self.units_async(sync_capacity).await;
        scans.executor_done(index, out.is_ok());
        out
    }

    fn run_sync(self, sync_capacity: usize) -> Result<UnitsOutcome<K::Partial>> {
        let (scans, index) = (Arc::clone(&self.scans), self.base.index);
        let out = self.units_sync(sync_capacity);
        scans.executor_done(index, out.is_ok());
        out
    }
}

impl<K: ScanKernel, S: FileScans<K>> UnitRun<K, S> {
    /// Plans (a whole file), makes the task and kernel of, and prepares unit `u`; `None`
    /// when it is skipped.
    fn ready(
        &self,
        u: usize,
        unit: Unit<S::Bound>,
        scanned: &mut FilesScanned,
    ) -> Result<Option<Ready<K>>> {
        if self.base.cancel.applies(self.base.index) {
            return Err(Error::Cancelled { cpu: self.base.cpu });
        }
        let started = Instant::now();
        let ready = match unit {
            Unit::Skipped { .. } => None,
            // (A whole file's plan asks the same of the caller.)
            Unit::Part { .. } if self.scans.complete() => None,
            Unit::Whole { file } => {
                scanned.files += 1;
                match self.scans.plan(file, &self.paths[file])? {
                    None => None,
                    Some((plan, bound)) => {
                        let share = plan
                            .shares(&[1], self.key_order)?
                            .pop()
                            .ok_or_else(|| Error::Config("a plan cut into no share".into()))?;
                        let wal = plan.wal.clone().map(Arc::new);
                        let backend = self.base.whole_backend;
                        let task = self.base.task(
                            &plan.path,
                            &plan.header,
                            wal,
                            share,
                            (backend, plan.index_scan.clone()),
                        );
                        let usable = plan.header.usable_size();
                        let kernel = self
                            .scans
                            .kernel(self.base.index, u, file, &bound, usable)?;
                        scanned.opened += 1;
                        Some(Ready {
                            task,
                            kernel,
                            plan: Some(plan),
                        })
                    }
                }
            }
            Unit::Part {
                file,
                planned,
                share,
            } => {
                let task = self.base.task(
                    &planned.path,
                    &planned.header,
                    planned.wal.clone(),
                    share,
                    (self.base.backend, planned.index_scan.clone()),
                );
                let usable = planned.header.usable_size();
                let kernel = self
                    .scans
                    .kernel(self.base.index, u, file, &planned.bound, usable)?;
                Some(Ready {
                    task,
                    kernel,
                    plan: None,
                })
            }
        };
        let Some(mut ready) = ready else {
            self.scans.skipped(u);
            return Ok(None);
        };
        ready.task.prepare()?;
        if ready.plan.is_some() {
            let took = started.elapsed().as_secs_f64();
            scanned.plan_s += took;
            scanned.plan_s_max = scanned.plan_s_max.max(took);
        }
        Ok(Some(ready))
    }

    /// Ends one unit: checks a whole file was not changed under a scan without locks (and
    /// closes it), and adds the unit's figures to the executor's.
    fn done(
        plan: Option<TablePlan>,
        (partial, report): (K::Partial, ExecutorReport),
        total: &mut Option<ExecutorReport>,
        partials: &mut Vec<Option<K::Partial>>,
    ) -> Result<()> {
        if let Some(plan) = plan {
            plan.check_unchanged()?;
        }
        match total {
            Some(t) => t.absorb(report),
            None => *total = Some(report),
        }
        partials.push(Some(partial));
        Ok(())
    }

    fn finish(
        &self,
        started: Instant,
        total: Option<ExecutorReport>,
        scanned: FilesScanned,
        partials: Vec<Option<K::Partial>>,
        page_size: u32,
    ) -> UnitsOutcome<K::Partial> {
        let mut report = total.unwrap_or_else(|| ExecutorReport {
            cpu: self.base.cpu,
            backend: self.base.backend.name().to_string(),
            counters: crate::counters::HwCounters::sum([]),
            ..ExecutorReport::default()
        });
        report.rates_over(started, page_size);
        report.files = Some(scanned);
        (partials, report)
    }

    async fn units_async(mut self, sync_capacity: usize) -> Result<UnitsOutcome<K::Partial>> {
        let started = Instant::now();
        let (mut total, mut scanned, mut partials) = (None, FilesScanned::default(), Vec::new());
        let mut page_size = 0;
        let units = std::mem::take(&mut self.units);
        let order: Vec<usize> = units.iter().map(|(u, _)| *u).collect();
        let mut prefetch = Prefetch::new(&units, &self.paths, self.base.prefetch);
        for (i, (u, unit)) in units.into_iter().enumerate() {
            prefetch.ahead_of(i);
            let read = async {
                let Some(Ready { task, kernel, plan }) = self.ready(u, unit, &mut scanned)? else {
                    partials.push(None);
                    return Ok(());
                };
                page_size = task.page_size();
                let out = scan::run(&task, kernel, sync_capacity).await?;
                Self::done(plan, out, &mut total, &mut partials)
            };
            if let Err(e) = read.await {
                order[i..].iter().for_each(|&u| self.scans.failed(u));
                return Err(e);
            }
        }
        Ok(self.finish(started, total, scanned, partials, page_size))
    }

    fn units_sync(mut self, sync_capacity: usize) -> Result<UnitsOutcome<K::Partial>> {
        let started = Instant::now();
        let (mut total, mut scanned, mut partials) = (None, FilesScanned::default(), Vec::new());
        let mut page_size = 0;
        let units = std::mem::take(&mut self.units);
        let order: Vec<usize> = units.iter().map(|(u, _)| *u).collect();
        let mut prefetch = Prefetch::new(&units, &self.paths, self.base.prefetch);
        for (i, (u, unit)) in units.into_iter().enumerate() {
            prefetch.ahead_of(i);
            let read = || {
                let Some(Ready { task, kernel, plan }) = self.ready(u, unit, &mut scanned)? else {
                    partials.push(None);
                    return Ok(());
                };
                page_size = task.page_size();
                let out = scan::run_without_uring(&task, kernel, sync_capacity)?;
                Self::done(plan, out, &mut total, &mut partials)
            };
            if let Err(e) = read() {
                order[i..].iter().for_each(|&u| self.scans.failed(u));
                return Err(e);
            }
        }
        Ok(self.finish(started, total, scanned, partials, page_size))
    }
}
