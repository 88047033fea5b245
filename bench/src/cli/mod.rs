//! The command line: argument parsing (clap derive), one module per subcommand, and the error
//! contract shared by all of them.
//!
//! Contract (see `design.md`): an error is one line on stderr starting with `error:` and exit
//! status 1; a usage error is one `error:` line too, with status 2 (clap's message with its
//! usage block and hints folded into that line, see [`usage_line`]); `--help` and `--version`
//! exit 0. A panic is reported the same way (one `error: internal error: ...` line, status 1),
//! never as Rust's multi-line panic message.
//!
//! Every option that takes a value accepts a negative-looking one (`--discount -0.06`,
//! `--cores -1`), so that its value parser, not clap's "unexpected argument" path, rejects it
//! with a message about the value ([`command`]).

mod bench;
mod explain;
mod gen;
mod q6;
mod topology;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use partitioner::topology::{plan_executors, IoMode, Machine, SqpollPolicy};

/// Thread-per-core table scans of SQLite-format files, answering TPC-H Q6.
#[derive(Debug, Parser)]
#[command(name = "corescan", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a TPC-H database (SQLite format) with tpchgen.
    Gen(gen::GenArgs),
    /// Show how a table is laid out in a database file and how it would be split over CPUs.
    Explain(explain::ExplainArgs),
    /// Run TPC-H Q6 with one pinned executor per CPU and report the answer and the I/O.
    Q6(q6::Q6Args),
    /// Plan executor placement for a machine (hwloc) and write or check topology.toml.
    Topology(topology::TopologyArgs),
    /// Run an experiment: core-count scaling, readahead sweeps, the seed report, or a
    /// comparison with SQLite, DuckDB and Turso.
    Bench(bench::BenchArgs),
}

/// Parses the arguments, runs the subcommand and reports the outcome as the exit status.
pub fn main() -> ExitCode {
    install_panic_hook();
    let cli = match command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => return usage_exit(&e),
    };
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::from(1)
        }
        // The panic hook has already printed the error line.
        Err(_) => ExitCode::from(1),
    }
}

/// The command line as clap builds it from [`Cli`], with two settings applied to every
/// subcommand: an option that takes a value accepts a negative-looking one (its value parser
/// decides), and a missing subcommand is an error rather than the help text on stderr.
fn command() -> clap::Command {
    fn adjust(cmd: clap::Command) -> clap::Command {
        cmd.arg_required_else_help(false)
            .mut_args(|a| {
                if !a.get_action().takes_values() || a.is_positional() {
                    a
                } else if a.get_value_delimiter().is_some() {
                    // A list ("-1,2") is not a number to clap: take any value after the option.
                    a.allow_hyphen_values(true)
                } else {
                    a.allow_negative_numbers(true)
                }
            })
            .mut_subcommands(adjust)
    }
    adjust(Cli::command())
}

/// Prints `--help`/`--version` (exit 0) or a usage error as one `error:` line (exit 2).
fn usage_exit(e: &clap::Error) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("error: {}", usage_line(e));
            ExitCode::from(2)
        }
    }
}

/// Clap's error message on one line: its first line without `error: `, then its detail lines
/// (`[possible values: ...]`, the missing arguments, `tip: ...`), up to the usage block, which
/// is left out (`--help` shows it).
fn usage_line(e: &clap::Error) -> String {
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return "a subcommand or argument is missing (see --help)".into();
    }
    let text = e.render().to_string();
    let mut line = String::new();
    for part in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if part.starts_with("Usage:") || part.starts_with("For more information") {
            break;
        }
        let part = part.strip_prefix("error: ").unwrap_or(part);
        if !line.is_empty() {
            line.push_str(if part.starts_with("tip:") { "; " } else { " " });
        }
        line.push_str(part);
    }
    if line.is_empty() {
        line = e.kind().to_string();
    }
    line
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Gen(args) => gen::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Q6(args) => q6::run(args),
        Command::Topology(args) => topology::run(args),
        Command::Bench(args) => bench::run(args),
    }
}

/// The error and its causes joined by `: `, on one line. Library errors often print their
/// source already (`FILE: open: No such file ...`), so a cause whose text is already in the
/// message is not repeated.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line.replace(['\n', '\r'], " ")
}

fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let what = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("panic");
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!(
            "error: internal error: {}{at}",
            what.replace(['\n', '\r'], " ")
        );
    }));
}

/// `--io` values, shared by `q6` and `topology detect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IoArg {
    /// glommio DmaFile: O_DIRECT reads on the executor's own glommio io_uring.
    Dma,
    /// A private io_uring per executor (io-uring crate), registered buffers, O_DIRECT; the only
    /// path with SQPOLL.
    Uring,
    /// Buffered pread through the page cache (the kernel reads ahead).
    Pread,
    /// memmap2 with sequential access advice.
    Mmap,
    /// dma (O_DIRECT) when the table is not in the page cache, mmap when it is.
    Auto,
}

impl From<IoArg> for IoMode {
    fn from(a: IoArg) -> Self {
        match a {
            IoArg::Dma => IoMode::Dma,
            IoArg::Uring => IoMode::Uring,
            IoArg::Pread => IoMode::Pread,
            IoArg::Mmap => IoMode::Mmap,
            IoArg::Auto => IoMode::Auto,
        }
    }
}

/// `--sqpoll` values, shared by `q6` and `topology detect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SqpollArg {
    /// No SQ poll threads.
    Off,
    /// A poll thread for each executor that can have an idle CPU to itself.
    Auto,
    /// A poll thread for every executor, or refuse to run.
    On,
}

impl From<SqpollArg> for SqpollPolicy {
    fn from(a: SqpollArg) -> Self {
        match a {
            SqpollArg::Off => SqpollPolicy::Off,
            SqpollArg::Auto => SqpollPolicy::Auto,
            SqpollArg::On => SqpollPolicy::On,
        }
    }
}

/// Which CPUs to plan for: `--cores N` (N executors spread over the available CPUs, round-robin
/// when N exceeds them) or `--cpus LIST`; by default one executor per available CPU.
#[derive(Debug, Clone, Args)]
pub struct CpuArgs {
    /// Use N executors, spread over the available CPUs (more than the CPUs is allowed and
    /// flagged) [default: one per available CPU].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096), conflicts_with = "cpus")]
    cores: Option<u32>,
    /// Use these CPUs, e.g. "0,2-3".
    #[arg(long, value_name = "LIST", value_parser = parse_cpu_list)]
    cpus: Option<CpuList>,
}

impl CpuArgs {
    /// The executors, placed by the topology planner (hwloc): NUMA nodes and packages first,
    /// one executor per physical core before any SMT sibling, an SQ poll CPU per executor as
    /// `sqpoll` allows. When hwloc cannot describe the machine, executors go round-robin over
    /// the available CPUs and SQPOLL is left to the engine's simpler policy.
    pub fn placement(&self, sqpoll: SqpollPolicy) -> anyhow::Result<Vec<engine::ExecutorSpec>> {
        let available = engine::coordinator::available_cpus();
        let allowed = match &self.cpus {
            Some(list) => list.0.clone(),
            None => available.clone(),
        };
        let n = match (&self.cpus, self.cores) {
            (Some(list), _) => list.0.len(),
            (None, Some(n)) => n as usize,
            (None, None) => available.len().max(1),
        };
        let Ok(machine) = Machine::detect() else {
            return Ok(match &self.cpus {
                Some(list) => list
                    .0
                    .iter()
                    .map(|&cpu| engine::ExecutorSpec {
                        cpu,
                        weight: 1,
                        sqpoll_cpu: None,
                    })
                    .collect(),
                None => engine::spread(n),
            });
        };
        let plan = plan_executors(&machine, n, Some(&allowed), sqpoll)?;
        Ok(plan
            .executors
            .iter()
            .map(|e| engine::ExecutorSpec {
                cpu: e.cpu,
                weight: e.weight,
                sqpoll_cpu: e.sqpoll_cpu,
            })
            .collect())
    }

    /// The executors without SQPOLL (see [`Self::placement`]).
    pub fn executors(&self) -> anyhow::Result<Vec<engine::ExecutorSpec>> {
        self.placement(SqpollPolicy::Off)
    }
}

/// A parsed `--cpus` list: ascending, distinct CPU ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// Parses `0,2-3` style CPU lists (the format of `/sys/devices/system/cpu/online`).
pub fn parse_cpu_list(s: &str) -> Result<CpuList, String> {
    const MAX_CPU: usize = 65535;
    let number = |t: &str| -> Result<usize, String> {
        let t = t.trim();
        match t.parse::<usize>() {
            Ok(n) if n <= MAX_CPU && !t.starts_with('+') => Ok(n),
            _ => Err(format!("'{t}' is not a CPU number")),
        }
    };
    let mut cpus = Vec::new();
    for part in s.split(',') {
        if part.trim().is_empty() {
            return Err("expected a list like 0,2-3".into());
        }
        match part.split_once('-') {
            // "-1", "2-": a sign or half a range, not a CPU.
            Some((a, b)) if a.trim().is_empty() || b.trim().is_empty() => {
                return Err(format!("'{}' is not a CPU number", part.trim()));
            }
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(format!("range '{}' runs backwards", part.trim()));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(number(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(CpuList(cpus))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0,2-3"), Ok(CpuList(vec![0, 2, 3])));
        assert_eq!(parse_cpu_list("3,1,1-2"), Ok(CpuList(vec![1, 2, 3])));
        assert_eq!(parse_cpu_list("7"), Ok(CpuList(vec![7])));
        for bad in ["", ",", "a", "1-", "3-1", "-1", "0,,1", "1.5", "99999999"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }
}
