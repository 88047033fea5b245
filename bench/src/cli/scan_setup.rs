//! The executors and scan settings of a run, from the command line's `--cores`/`--cpus`/
//! `--topology`, `--io`, `--sqpoll`, `--readahead` and `--coalesce-kib` (shared by `q6` and
//! `query`).

use std::path::Path;

use engine::{ExecutorSpec, ScanSettings, SqpollMode};
use partitioner::topology::{IoMode, Machine, Topology};

use super::{CpuArgs, IoArg, SqpollArg};

/// The scan-related options as given (each `None` when not given).
#[derive(Debug, Clone, Copy)]
pub struct ScanOptions<'a> {
    /// `--cores` / `--cpus`.
    pub cpus: &'a CpuArgs,
    /// `--topology FILE`.
    pub topology: Option<&'a Path>,
    /// `--io`.
    pub io: Option<IoArg>,
    /// `--sqpoll`.
    pub sqpoll: Option<SqpollArg>,
    /// `--readahead`.
    pub readahead: Option<u32>,
    /// `--coalesce-kib`.
    pub coalesce_kib: Option<u32>,
}

/// The executors and settings for a file with `page_size`-byte pages: a topology file's
/// executors and `[scan]` section, or the planner's placement for `--cores`/`--cpus` with the
/// engine's defaults; explicit options override either.
pub fn scan_setup(
    o: ScanOptions<'_>,
    page_size: u32,
) -> anyhow::Result<(Vec<ExecutorSpec>, ScanSettings)> {
    let defaults = ScanSettings::defaults(page_size);
    let sqpoll: Option<SqpollMode> = o.sqpoll.map(Into::into);
    let io: Option<IoMode> = o.io.map(Into::into);
    let (executors, base) = match o.topology {
        Some(path) => {
            let machine = Machine::detect()?;
            let topo = Topology::load_checked(path, Some(&machine))?;
            let executors = topo
                .executors
                .iter()
                .map(|e| ExecutorSpec {
                    // An explicit --sqpoll replans the poll threads; otherwise the file's stand.
                    sqpoll_cpu: if sqpoll.is_some() { None } else { e.sqpoll_cpu },
                    ..ExecutorSpec::from(e)
                })
                .collect();
            let scan = &topo.scan;
            let base = ScanSettings {
                readahead: scan.readahead,
                coalesce_kib: scan.coalesce_kib,
                io: scan.io.into(),
                sqpoll: scan.sqpoll,
            };
            (executors, base)
        }
        None => (
            o.cpus.placement(sqpoll.unwrap_or(defaults.sqpoll))?,
            defaults,
        ),
    };
    let settings = ScanSettings {
        readahead: o.readahead.unwrap_or(base.readahead),
        coalesce_kib: o.coalesce_kib.unwrap_or(base.coalesce_kib),
        io: io.map_or(base.io, Into::into),
        sqpoll: sqpoll.unwrap_or(base.sqpoll),
    };
    Ok((executors, settings))
}
