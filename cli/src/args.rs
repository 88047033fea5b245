//! The arguments the subcommands share (`--io`, `--sqpoll`, `--cores`/`--cpus`). This module
//! imports no other module of the binary.

use clap::{Args, ValueEnum};
use partitioner::topology::{IoMode, SqpollPolicy};

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
    /// The placement these options ask for (the engine's planner places the executors).
    pub fn placement(&self) -> engine::Placement {
        match (&self.cpus, self.cores) {
            (Some(list), _) => engine::Placement::Cpus(list.0.clone()),
            (None, Some(n)) => engine::Placement::Cores(n as usize),
            (None, None) => engine::Placement::AllCpus,
        }
    }

    /// The executors without SQPOLL, placed by the engine's planner
    /// ([`engine::placement::resolve`]).
    pub fn executors(&self) -> anyhow::Result<Vec<engine::ExecutorSpec>> {
        let (executors, _) =
            engine::placement::resolve(&self.placement(), &engine::ScanOptions::default(), 4096)?;
        Ok(executors)
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
