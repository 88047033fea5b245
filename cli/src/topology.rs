//! `corescan topology detect|check`: plan executors for a machine and write `topology.toml`, or
//! validate one.
//!
//! `detect` reads the machine with hwloc (this one, a `--synthetic` description or an `--xml`
//! export of another), places the executors by the policy in
//! [`partitioner::topology`] (packages and NUMA nodes first, cores before SMT siblings, SQPOLL
//! only on idle CPUs) and writes the file with a comment above every field. A flag combination
//! the file could not honour (`--sqpoll on` without `--io uring`) is an error; more executors
//! than CPUs is allowed, with a warning.
//!
//! `check` loads a file and prints one `error:` line per problem, checking its CPUs against the
//! machine its `source` names (rebuilt from the synthetic description or XML file) unless
//! `--synthetic` or `--xml` says otherwise; a hand-written `source` is checked against this
//! machine.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use partitioner::topology::{
    plan_executors, Machine, MachineSource, Problem, ScanSettings, Topology, MAX_COALESCE_KIB,
    MAX_READAHEAD,
};

use crate::args::{parse_cpu_list, CpuList, IoArg, SqpollArg};

/// Arguments of `corescan topology`.
#[derive(Debug, Args)]
pub struct TopologyArgs {
    #[command(subcommand)]
    command: TopologyCommand,
}

#[derive(Debug, Subcommand)]
enum TopologyCommand {
    /// Read the machine with hwloc, place the executors and write topology.toml (stdout
    /// without -o).
    Detect(DetectArgs),
    /// Validate a topology.toml: one error line per problem, exit status 1 if any.
    Check(CheckArgs),
}

/// Where the machine's facts come from (`--synthetic DESC | --xml FILE`, default this machine).
#[derive(Debug, Args)]
struct MachineArgs {
    /// Plan for an hwloc synthetic machine instead of this one, e.g. "pack:2 numa:2 core:4 pu:2".
    #[arg(long, value_name = "DESC", conflicts_with = "xml")]
    synthetic: Option<String>,
    /// Plan for the machine in an hwloc XML file (`lstopo --of xml FILE` on that machine).
    #[arg(long, value_name = "FILE")]
    xml: Option<PathBuf>,
}

impl MachineArgs {
    fn source(&self) -> Option<MachineSource> {
        match (&self.synthetic, &self.xml) {
            (Some(d), _) => Some(MachineSource::Synthetic(d.clone())),
            (None, Some(p)) => Some(MachineSource::Xml(p.clone())),
            (None, None) => None,
        }
    }
}

#[derive(Debug, Args)]
struct DetectArgs {
    /// Number of executors [default: one per physical core among the allowed CPUs]; more than
    /// the allowed CPUs is allowed and flagged.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    executors: Option<u32>,
    #[command(flatten)]
    machine: MachineArgs,
    /// Use only these CPUs, e.g. "0,2-3" [default: all the machine's CPUs].
    #[arg(long, value_name = "LIST", value_parser = parse_cpu_list)]
    cpus: Option<CpuList>,
    /// SQPOLL threads (uring only): auto gives one to each executor that finds an idle CPU, on
    /// refuses unless every executor does.
    #[arg(long, value_enum, default_value_t = SqpollArg::Off)]
    sqpoll: SqpollArg,
    /// The I/O path the file asks for.
    #[arg(long, value_enum, default_value_t = IoArg::Auto)]
    io: IoArg,
    /// Pages in flight ahead of each executor's decoder (0 = one read at a time).
    #[arg(long, value_name = "PAGES", default_value_t = ScanSettings::default().readahead,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_READAHEAD)))]
    readahead: u32,
    /// Merge adjacent pages into reads of up to K KiB (0 = one read per page).
    #[arg(long, value_name = "K", default_value_t = ScanSettings::default().coalesce_kib,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_COALESCE_KIB)))]
    coalesce_kib: u32,
    /// Write the file here instead of to stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// The topology file.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Check against these machine facts instead of the machine the file's `source` names.
    #[command(flatten)]
    machine: MachineArgs,
}

/// Runs `corescan topology`.
pub fn run(args: TopologyArgs) -> anyhow::Result<()> {
    match args.command {
        TopologyCommand::Detect(a) => detect(a),
        TopologyCommand::Check(a) => check(a),
    }
}

fn detect(args: DetectArgs) -> anyhow::Result<()> {
    let topology = plan(&args)?;
    match &args.output {
        Some(path) => {
            topology.write(path)?;
            eprintln!("wrote {} ({})", path.display(), summary(&topology));
        }
        None => print!("{}", topology.render()),
    }
    Ok(())
}

/// The file `detect` writes for `args`; errors for flags the file could not honour.
fn plan(args: &DetectArgs) -> anyhow::Result<Topology> {
    let source = args.machine.source().unwrap_or(MachineSource::ThisMachine);
    let machine = source.load()?;
    let allowed = args.cpus.as_ref().map(|c| c.0.as_slice());
    let n = match args.executors {
        Some(n) => n as usize,
        None => machine.cores_in(allowed).max(1),
    };
    let placement = plan_executors(&machine, n, allowed, args.sqpoll.into())?;
    let scan = ScanSettings {
        io: args.io.into(),
        readahead: args.readahead,
        coalesce_kib: args.coalesce_kib,
        sqpoll: args.sqpoll.into(),
    };
    let topology = Topology::new(&machine, &placement, scan);
    let mut refusals = Vec::new();
    for problem in topology.check(Some(&machine)) {
        match problem {
            Problem::SharedCpu { .. } => eprintln!("warning: {problem}"),
            Problem::SqpollNeedsUring { .. } => {
                refusals.push("--sqpoll on needs --io uring (only that path has SQPOLL)".into())
            }
            other => refusals.push(other.to_string()),
        }
    }
    match refusals.len() {
        0 => Ok(topology),
        _ => anyhow::bail!("{}", refusals.join("; ")),
    }
}

/// `2 executors on CPUs 0-1, io dma, ...; hwloc: this machine`.
fn summary(t: &Topology) -> String {
    let mut cpus = t.cpus();
    cpus.sort_unstable();
    cpus.dedup();
    let polls = t
        .executors
        .iter()
        .filter(|e| e.sqpoll_cpu.is_some())
        .count();
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    format!(
        "{} on CPU{} {}, io {}, readahead {} pages, coalesce {} KiB, sqpoll {}{}; {}",
        plural(t.executors.len(), "executor"),
        if cpus.len() == 1 { "" } else { "s" },
        list(&cpus),
        t.scan.io,
        t.scan.readahead,
        t.scan.coalesce_kib,
        t.scan.sqpoll,
        if polls > 0 {
            format!(" ({})", plural(polls, "poll thread"))
        } else {
            String::new()
        },
        t.machine.source
    )
}

/// `0-3,8` (the kernel's CPU list format).
fn list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some(&start) = cpus.get(i) {
        let mut end = start;
        while cpus.get(i + 1) == Some(&(end + 1)) {
            i += 1;
            end += 1;
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

fn check(args: CheckArgs) -> anyhow::Result<()> {
    let topology = Topology::load(&args.file)?;
    let machine = machine_for(&args, &topology)?;
    let problems = topology.check(Some(&machine));
    let Some((last, rest)) = problems.split_last() else {
        println!("{}: ok ({})", args.file.display(), summary(&topology));
        return Ok(());
    };
    // One `error:` line per problem: all but the last here, the last as the command's error
    // (which the binary prints the same way, with exit status 1).
    for problem in rest {
        eprintln!("error: {}: {problem}", args.file.display());
    }
    Err(anyhow::anyhow!("{}: {last}", args.file.display()))
}

/// The machine to check `topology` against: the flags', else the one its `source` names
/// (an XML path relative to the file's folder is found there too), else this machine.
fn machine_for(args: &CheckArgs, topology: &Topology) -> anyhow::Result<Machine> {
    let source = match args.machine.source() {
        Some(s) => s,
        None => match MachineSource::from_described(&topology.machine.source) {
            Some(MachineSource::Xml(p)) if !p.exists() && p.is_relative() => {
                let beside = args.file.parent().map(|d| d.join(&p));
                MachineSource::Xml(beside.filter(|b| b.exists()).unwrap_or(p))
            }
            Some(s) => s,
            None => MachineSource::ThisMachine,
        },
    };
    source.load().with_context(|| {
        format!(
            "{}: cannot read the machine to check against (pass --synthetic or --xml)",
            args.file.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use partitioner::topology::{IoMode, SqpollPolicy};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: TopologyCommand,
    }

    fn detect_args(argv: &[&str]) -> DetectArgs {
        let argv = ["topology", "detect"].iter().chain(argv);
        match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(TopologyCommand::Detect(a)) => a,
            other => panic!("{other:?}"),
        }
    }

    fn check_args(argv: &[&str]) -> CheckArgs {
        let argv = ["topology", "check"].iter().chain(argv);
        match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(TopologyCommand::Check(a)) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn detect_defaults_to_one_executor_per_core_and_documented_scan_settings() {
        let t = plan(&detect_args(&["--synthetic", "pack:1 core:3 pu:2"])).unwrap();
        assert_eq!(t.cpus(), [0, 2, 4]);
        assert_eq!(t.scan, ScanSettings::default());
        assert_eq!(t.scan.io, IoMode::Auto);
        assert_eq!((t.scan.readahead, t.scan.coalesce_kib), (1024, 128));
        assert_eq!(t.scan.sqpoll, SqpollPolicy::Off);
    }

    #[test]
    fn detect_honours_flags() {
        let t = plan(&detect_args(&[
            "--synthetic",
            "core:2 pu:1",
            "--executors",
            "1",
            "--sqpoll",
            "auto",
            "--io",
            "uring",
            "--readahead",
            "64",
            "--coalesce-kib",
            "0",
        ]))
        .unwrap();
        assert_eq!(t.cpus(), [0]);
        assert_eq!(t.executors[0].sqpoll_cpu, Some(1));
        assert_eq!(
            (t.scan.io, t.scan.readahead, t.scan.coalesce_kib),
            (IoMode::Uring, 64, 0)
        );
        let t = plan(&detect_args(&[
            "--synthetic",
            "core:4 pu:1",
            "--cpus",
            "1,3",
        ]))
        .unwrap();
        assert_eq!(t.cpus(), [1, 3]);
    }

    #[test]
    fn detect_refuses_what_the_file_could_not_honour() {
        for argv in [
            &["--synthetic", "core:2 pu:1", "--sqpoll", "on"][..],
            &[
                "--synthetic",
                "core:2 pu:1",
                "--executors",
                "1",
                "--sqpoll",
                "on",
            ][..],
            &["--synthetic", "core:2 pu:1", "--cpus", "5"][..],
            &["--synthetic", "bogus:2"][..],
            &["--xml", "/nonexistent/machine.xml"][..],
        ] {
            let e = plan(&detect_args(argv)).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
        }
        let e = plan(&detect_args(&[
            "--synthetic",
            "core:2 pu:1",
            "--executors",
            "1",
            "--sqpoll",
            "on",
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("--io uring"), "{e}");
        for bad in [
            &["--synthetic", "pu:1", "--xml", "m.xml"][..],
            &["--executors", "0"][..],
            &["--readahead", "16385"][..],
            &["--coalesce-kib", "16385"][..],
            &["--sqpoll", "maybe"][..],
        ] {
            let argv = ["topology", "detect"].iter().chain(bad);
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn oversubscription_is_a_warning_not_an_error() {
        let t = plan(&detect_args(&["--synthetic", "pu:1", "--executors", "2"])).unwrap();
        assert_eq!(t.cpus(), [0, 0]);
    }

    #[test]
    fn check_reports_ok_or_every_problem() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.toml");
        let t = plan(&detect_args(&["--synthetic", "pack:2 core:2 pu:2"])).unwrap();
        t.write(&good).unwrap();
        check(check_args(&[good.to_str().unwrap()])).unwrap();
        let text = std::fs::read_to_string(&good).unwrap();
        let bad = dir.path().join("bad.toml");
        std::fs::write(
            &bad,
            text.replace("cpu = 4\n", "cpu = 0\n")
                .replace("io = \"auto\"", "io = \"autoo\""),
        )
        .unwrap();
        let e = check(check_args(&[bad.to_str().unwrap()])).unwrap_err();
        assert!(e.to_string().starts_with(bad.to_str().unwrap()), "{e}");
        assert!(e.to_string().contains("cpu 0"), "{e}");
        // Checked against another machine, the CPUs do not exist.
        let e = check(check_args(&[good.to_str().unwrap(), "--synthetic", "pu:2"])).unwrap_err();
        assert!(e.to_string().contains("not a CPU"), "{e}");
    }

    #[test]
    fn cpu_lists_render_like_the_kernel() {
        assert_eq!(list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(list(&[]), "");
    }
}
