//! Hardware performance counters of one executor thread: cycles, instructions and last-level
//! cache misses, through `perf_event_open` (the `perf-event2` crate).
//!
//! The seed's explanation of `O_DIRECT`'s cost was exactly these numbers (4.8 M more cache
//! misses than `pread`), so every report carries them where the kernel exposes them, and says
//! why not where it does not: a VM without a virtual PMU (`perf stat -e cycles` prints
//! `<not supported>`), `kernel.perf_event_paranoid` above 2 for an unprivileged user, or a
//! seccomp filter. The three counters form one group, so they cover exactly the same span:
//! from the executor's start to its last page, on its own thread only.
//!
//! Layering: a building block beside [`crate::cputime`]; the scan loops start and stop it.

use perf_event::events::Hardware;
use perf_event::{Builder, Counter, Group};
use serde::Serialize;

/// Counts of one thread (or, summed, of a run), or the reason there are none.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HwCounters {
    /// CPU cycles.
    pub cycles: Option<u64>,
    /// Retired instructions.
    pub instructions: Option<u64>,
    /// Last-level cache misses (`PERF_COUNT_HW_CACHE_MISSES`).
    pub llc_misses: Option<u64>,
    /// Why the counts are missing, when they are.
    pub unavailable: Option<String>,
}

impl HwCounters {
    /// The counts of several threads added up; missing when any thread's are.
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a HwCounters>) -> HwCounters {
        let mut total = HwCounters {
            cycles: Some(0),
            instructions: Some(0),
            llc_misses: Some(0),
            unavailable: None,
        };
        let mut any = false;
        for c in all {
            any = true;
            if let Some(why) = &c.unavailable {
                return HwCounters::missing(why.clone());
            }
            let add = |t: &mut Option<u64>, v: Option<u64>| *t = t.zip(v).map(|(a, b)| a + b);
            add(&mut total.cycles, c.cycles);
            add(&mut total.instructions, c.instructions);
            add(&mut total.llc_misses, c.llc_misses);
        }
        if any {
            total
        } else {
            HwCounters::missing("no executor ran".into())
        }
    }

    fn missing(why: String) -> HwCounters {
        HwCounters {
            unavailable: Some(why),
            ..HwCounters::default()
        }
    }
}

/// Counters running on the calling thread.
pub struct ThreadCounters {
    /// The group; its leader counts the cycles.
    group: Group,
    instructions: Counter,
    llc_misses: Counter,
}

impl std::fmt::Debug for ThreadCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ThreadCounters")
    }
}

/// Counters of the calling thread, started; or, when they cannot be had, the reason.
pub enum Measure {
    /// Counting.
    Running(Box<ThreadCounters>),
    /// Not available, and why.
    Unavailable(String),
}

impl Measure {
    /// Starts counting the calling thread (`no_pmu`, the `pmu` fault of the scan settings,
    /// pretends there is no PMU, for tests on machines that have one).
    pub fn start(no_pmu: bool) -> Measure {
        if no_pmu {
            return Measure::Unavailable("injected: no PMU".into());
        }
        match ThreadCounters::start() {
            Ok(c) => Measure::Running(Box::new(c)),
            Err(e) => Measure::Unavailable(explain(&e)),
        }
    }

    /// Stops counting and returns the counts.
    pub fn stop(self) -> HwCounters {
        match self {
            Measure::Unavailable(why) => HwCounters::missing(why),
            Measure::Running(mut c) => match c.read() {
                Ok(counts) => counts,
                Err(e) => HwCounters::missing(format!("reading the counters failed: {e}")),
            },
        }
    }
}

impl ThreadCounters {
    fn start() -> std::io::Result<Self> {
        // The cycles counter leads the group itself. The crate's default leader is a software
        // dummy event, which always opens: the kernel then accounts a per-task event (the
        // first one after a second without any enables a static key and waits for an RCU
        // grace period, 10-20 ms measured here) before the hardware one fails on a machine
        // without a PMU. A hardware leader fails at once there.
        let mut leader = Group::builder();
        leader.event(Hardware::CPU_CYCLES);
        let mut group = leader.build_group()?;
        let instructions = group.add(&Builder::new(Hardware::INSTRUCTIONS))?;
        let llc_misses = group.add(&Builder::new(Hardware::CACHE_MISSES))?;
        group.enable()?;
        Ok(ThreadCounters {
            group,
            instructions,
            llc_misses,
        })
    }

    fn read(&mut self) -> std::io::Result<HwCounters> {
        self.group.disable()?;
        let counts = self.group.read()?;
        Ok(HwCounters {
            cycles: Some(counts[self.group.as_counter()]),
            instructions: Some(counts[&self.instructions]),
            llc_misses: Some(counts[&self.llc_misses]),
            unavailable: None,
        })
    }
}

/// Why `perf_event_open` refused, in words a user can act on.
fn explain(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => format!(
            "the CPU exposes no hardware counters here (perf_event_open: {e}); a VM without a \
             virtual PMU does this"
        ),
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "perf_event_open not permitted ({e}): lower kernel.perf_event_paranoid or run with \
             CAP_PERFMON"
        ),
        Some(libc::ENOSYS) => format!("perf_event_open is not available ({e})"),
        _ => format!("perf_event_open failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_or_says_why_not() {
        let m = Measure::start(false);
        let mut x = 0u64;
        for i in 0..100_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let c = m.stop();
        match &c.unavailable {
            Some(why) => {
                assert!(c.cycles.is_none() && c.instructions.is_none() && c.llc_misses.is_none());
                assert!(!why.is_empty());
            }
            None => {
                // 100,000 multiply-adds retire at least that many instructions.
                assert!(c.instructions.unwrap() >= 100_000, "{c:?}");
                assert!(c.cycles.unwrap() > 0, "{c:?}");
            }
        }
    }

    #[test]
    fn a_missing_thread_makes_the_sum_missing() {
        let ok = HwCounters {
            cycles: Some(5),
            instructions: Some(7),
            llc_misses: Some(1),
            unavailable: None,
        };
        let s = HwCounters::sum([&ok, &ok]);
        assert_eq!(
            (s.cycles, s.instructions, s.llc_misses),
            (Some(10), Some(14), Some(2))
        );
        let none = Measure::start(true).stop();
        assert_eq!(none.unavailable.as_deref(), Some("injected: no PMU"));
        let s = HwCounters::sum([&ok, &none]);
        assert!(s.cycles.is_none() && s.unavailable.is_some());
    }
}
