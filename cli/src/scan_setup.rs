//! The executors and scan settings of a run, from the command line's `--cores`/`--cpus`/
//! `--topology`, `--io`, `--sqpoll`, `--readahead` and `--coalesce-kib` (shared by `q6` and
//! `query`), and the faults to inject from `CORESCAN_FAULTS`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use engine::faults::Faults;
use engine::{ExecutorSpec, Placement, ScanOptions, ScanSettings};
use partitioner::topology::IoMode;

use crate::args::{CpuArgs, IoArg, SqpollArg};

/// The scan options of `q6` and `query`, as given on the command line (each `None` when not
/// given): flattened into both commands' arguments.
#[derive(Debug, Args)]
pub struct ScanArgs {
    #[command(flatten)]
    cpus: CpuArgs,
    /// Run with the executors and scan settings of this topology file (from `corescan
    /// topology detect`); --io, --sqpoll, --readahead and --coalesce-kib override its [scan].
    #[arg(long, value_name = "FILE", conflicts_with_all = ["cores", "cpus"])]
    topology: Option<PathBuf>,
    /// The I/O backend [default: auto: mmap when the table is in the page cache, dma (O_DIRECT)
    /// when it is not].
    #[arg(long, value_enum)]
    io: Option<IoArg>,
    /// Kernel SQ poll thread for --io uring: auto uses one only where an idle CPU can host it
    /// [default: off].
    #[arg(long, value_enum)]
    sqpoll: Option<SqpollArg>,
    /// Pages kept in flight ahead of each executor's decoder (0 = one read at a time)
    /// [default: 4 MiB worth of pages, 1024 at 4 KiB].
    #[arg(long, value_name = "PAGES")]
    readahead: Option<u32>,
    /// Merge adjacent pages into reads of up to K KiB (0 = one read per page) [default: 128].
    #[arg(long, value_name = "K")]
    coalesce_kib: Option<u32>,
}

impl ScanArgs {
    /// Where the executors run: a topology file, or `--cores`/`--cpus`.
    pub fn placement(&self) -> Placement {
        match &self.topology {
            Some(path) => Placement::Topology(path.clone()),
            None => self.cpus.placement(),
        }
    }

    /// The settings given explicitly (the others come from the topology file or the
    /// engine's defaults).
    pub fn options(&self) -> ScanOptions {
        ScanOptions {
            io: self.io.map(|a| IoMode::from(a).into()),
            sqpoll: self.sqpoll.map(Into::into),
            readahead: self.readahead,
            coalesce_kib: self.coalesce_kib,
            faults: None,
            memory: None,
        }
    }
}

/// The executors and settings for a file with `page_size`-byte pages, placed by the engine
/// ([`engine::placement::resolve`]): a topology file's executors and `[scan]` section, or the
/// planner's placement for `--cores`/`--cpus` with the engine's defaults; explicit options
/// override either.
pub fn scan_setup(
    o: &ScanArgs,
    page_size: u32,
) -> anyhow::Result<(Vec<ExecutorSpec>, ScanSettings)> {
    scan_setup_placed(o, o.placement(), page_size)
}

/// [`scan_setup`] for a scan that reads `leaves` leaf pages (`None`: many) for at most
/// `seek_rows` rows named by rowid (`None`: any): a small one runs on one executor unless the
/// placement was given ([`Placement::for_seek`]).
pub fn scan_setup_for_leaves(
    o: &ScanArgs,
    page_size: u32,
    leaves: Option<usize>,
    seek_rows: Option<u64>,
) -> anyhow::Result<(Vec<ExecutorSpec>, ScanSettings)> {
    scan_setup_placed(o, o.placement().for_seek(leaves, seek_rows), page_size)
}

fn scan_setup_placed(
    o: &ScanArgs,
    placement: Placement,
    page_size: u32,
) -> anyhow::Result<(Vec<ExecutorSpec>, ScanSettings)> {
    let options = ScanOptions {
        faults: Some(injected_faults()?),
        ..o.options()
    };
    Ok(engine::placement::resolve(&placement, &options, page_size)?)
}

/// The environment variable that lists the failures to pretend (see `engine::faults`): how the
/// end-to-end tests reach each fallback on a machine where nothing fails.
const FAULTS_ENV: &str = "CORESCAN_FAULTS";

/// The faults named in [`FAULTS_ENV`] (none when it is unset), for every command that scans.
pub fn injected_faults() -> anyhow::Result<Faults> {
    match std::env::var(FAULTS_ENV) {
        Ok(list) => Ok(Faults::parse(&list).with_context(|| FAULTS_ENV)?),
        Err(_) => Ok(Faults::NONE),
    }
}
