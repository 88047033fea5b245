//! `corescan bench live DB`: Q6 scans while a writer process commits (see
//! [`bench::experiments::live`]), and the hidden `corescan bench live-writer DB` that is that
//! writer (it commits until its standard input closes, then prints one JSON line).

use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use bench::experiments::live::writer::run_writer;
use bench::experiments::live::{markdown, run_live, Journal, LiveOptions, WriterOptions};
use clap::{Args, ValueEnum};
use engine::IoChoice;
use partitioner::topology::IoMode;

use crate::args::{CpuArgs, IoArg};

/// `--journal` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JournalArg {
    /// Write-ahead log.
    Wal,
    /// Rollback journal (journal_mode=DELETE).
    Delete,
}

impl From<JournalArg> for Journal {
    fn from(a: JournalArg) -> Self {
        match a {
            JournalArg::Wal => Journal::Wal,
            JournalArg::Delete => Journal::Delete,
        }
    }
}

/// How the writer writes (shared by `live` and `live-writer`).
#[derive(Debug, Clone, Copy, Args)]
pub struct WriterArgs {
    /// Commits per second the writer aims at (0: as fast as it can).
    #[arg(long, value_name = "TX_PER_S", default_value_t = 300)]
    rate: u32,
    /// The writer's wal_autocheckpoint, in pages.
    #[arg(long, value_name = "PAGES", default_value_t = 8)]
    autocheckpoint: u32,
    /// Transactions between the writer's explicit RESTART / TRUNCATE checkpoints (0: none).
    #[arg(long, value_name = "N", default_value_t = 25)]
    checkpoint_every: u32,
}

impl WriterArgs {
    fn options(self, journal: Journal) -> WriterOptions {
        WriterOptions {
            journal,
            rate: self.rate,
            autocheckpoint: self.autocheckpoint,
            checkpoint_every: self.checkpoint_every,
        }
    }
}

/// Arguments of `corescan bench live`.
#[derive(Debug, Args)]
pub struct LiveArgs {
    /// A generated TPC-H database (`corescan gen`); its journal mode is changed.
    db: PathBuf,
    /// Consecutive scans per journal mode and backend.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100000))]
    scans: u32,
    /// Journal modes, in order.
    #[arg(
        long,
        value_name = "LIST",
        value_enum,
        value_delimiter = ',',
        default_value = "wal,delete"
    )]
    journal: Vec<JournalArg>,
    /// Backends, in order.
    #[arg(
        long,
        value_name = "LIST",
        value_enum,
        value_delimiter = ',',
        default_value = "dma,uring,pread,mmap"
    )]
    io: Vec<IoArg>,
    #[command(flatten)]
    cpus: CpuArgs,
    #[command(flatten)]
    writer: WriterArgs,
    /// Print the results as JSON instead of a markdown table.
    #[arg(long)]
    json: bool,
}

/// Arguments of the hidden `corescan bench live-writer`.
#[derive(Debug, Args)]
pub struct LiveWriterArgs {
    /// The database to write.
    db: PathBuf,
    /// The journal mode.
    #[arg(long, value_enum)]
    journal: JournalArg,
    #[command(flatten)]
    writer: WriterArgs,
}

/// Runs `corescan bench live`.
pub fn run(args: LiveArgs) -> anyhow::Result<()> {
    let opts = LiveOptions {
        db: args.db,
        exe: std::env::current_exe().context("finding the corescan binary")?,
        journals: args.journal.into_iter().map(Into::into).collect(),
        backends: args
            .io
            .into_iter()
            .map(|a| IoChoice::from(IoMode::from(a)))
            .collect(),
        scans: args.scans,
        executors: args.cpus.executors()?,
        writer: args.writer.options(Journal::Wal),
    };
    let results = run_live(&opts)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{}", markdown(&results));
    }
    Ok(())
}

/// Runs the writer until standard input closes, then prints its figures as one JSON line.
pub fn run_writer_process(args: LiveWriterArgs) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        flag.store(true, Ordering::Relaxed);
    });
    let opts = args.writer.options(args.journal.into());
    let stats = run_writer(&args.db, &opts, &stop, || println!("ready"))
        .with_context(|| format!("{}: the writer failed", args.db.display()))?;
    println!("{}", serde_json::to_string(&stats)?);
    Ok(())
}
