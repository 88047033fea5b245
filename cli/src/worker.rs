//! `corescan worker --listen ADDR --data DIR`: serves the SQLite files under DIR to
//! `corescan sql --workers` (`corescan_distributed`): each scan a coordinator sends runs here,
//! thread-per-core on this machine's CPUs with this command's scan options, as a local scan.
//!
//! The first line on stdout says where it listens (with `--listen HOST:0`, the port the
//! system chose), how many files it serves and the executors of a scan; then it serves until
//! it is stopped.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use corescan_distributed::{CorescanWorker, DataDir, WorkerConfig};

use crate::scan_setup::ScanArgs;

/// DataFusion's threads on a worker: the operators of the fragments it runs (joins, partial
/// aggregates, exchanges), beside the scans' pinned executors.
const WORKER_THREADS: usize = 2;

/// Arguments of `corescan worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The address to listen on, HOST:PORT (port 0: one the system picks). Loopback by
    /// default: a worker runs the plans it is sent, so expose it only on a network you trust.
    #[arg(long, default_value = "127.0.0.1:50051", value_name = "HOST:PORT")]
    listen: String,
    /// The directory whose SQLite files (searched recursively) this worker serves; it reads
    /// no file outside it.
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    #[command(flatten)]
    scan: ScanArgs,
}

/// Runs `corescan worker`.
pub fn run(args: WorkerArgs) -> anyhow::Result<()> {
    let dir = DataDir::open(&args.data)?;
    let files = dir.list()?.len();
    let worker = CorescanWorker::new(WorkerConfig {
        dir,
        placement: args.scan.placement(),
        options: args.scan.options(),
    })?;
    corescan_datafusion::runtime(WORKER_THREADS)
        .context("starting DataFusion's runtime")?
        .block_on(async move {
            let listener = tokio::net::TcpListener::bind(&args.listen)
                .await
                .with_context(|| format!("listening on {}", args.listen))?;
            let addr = listener.local_addr().context("the listening address")?;
            let mut out = std::io::stdout();
            writeln!(
                out,
                "corescan worker listening on {addr}: {files} SQLite file{} under {}, {} \
                 executor{} per scan",
                if files == 1 { "" } else { "s" },
                worker.dir().path().display(),
                worker.executors(),
                if worker.executors() == 1 { "" } else { "s" },
            )
            .and_then(|()| out.flush())
            .context("writing to stdout")?;
            worker.serve(listener).await?;
            Ok(())
        })
}
