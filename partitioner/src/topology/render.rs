//! Writing `topology.toml` by hand, so every field has its explanation above it (the `toml`
//! crate emits no comments). [`Topology::load`] reads the result back to an equal value.

use std::fmt::Write;
use std::path::Path;

use super::error::{cpu_list, Result, TopologyError};
use super::file::Topology;
use super::placement::{ExecutorPlacement, FULL_CORE_WEIGHT};
use super::settings::{MAX_COALESCE_KIB, MAX_READAHEAD};

/// Comment lines are wrapped to this width.
const WIDTH: usize = 100;

/// Appends `text` as `# ` comment lines wrapped at [`WIDTH`].
fn comment(out: &mut String, text: &str) {
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() > 1 && line.len() + 1 + word.len() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

/// A TOML basic string with every needed escape.
fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

impl Topology {
    /// Writes [`render`](Self::render)'s text to `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.render()).map_err(|source| TopologyError::Write {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The file's text: a header, then `[machine]`, the `[[executor]]` tables and `[scan]`, with
    /// a comment above every field (in full above the first executor's).
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_header(&mut out);
        self.render_machine(&mut out);
        self.render_executors(&mut out);
        self.render_scan(&mut out);
        out
    }

    fn render_header(&self, out: &mut String) {
        let m = &self.machine;
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        comment(
            out,
            &format!(
                "corescan topology for a machine with {}, {}, {} and {}.",
                plural(m.packages, "package"),
                plural(m.numa_nodes, "NUMA node"),
                plural(m.cores, "core"),
                plural(m.pus, "PU")
            ),
        );
        out.push_str("#\n");
        comment(
            out,
            "This file says where each executor runs and how it reads. `corescan topology detect` \
             writes it (from hwloc), `corescan topology check FILE` validates it, and \
             `corescan q6 DB --topology FILE` runs with it.",
        );
        out.push_str("#\n");
        comment(
            out,
            "Placement: executors spread over packages and NUMA nodes first (round-robin across \
             NUMA nodes), take one CPU per physical core before any SMT sibling, and use only the \
             allowed CPUs (`--cpus`). An SQPOLL thread is placed only on an idle CPU, one that \
             runs no executor.",
        );
        if self.oversubscribed() {
            out.push_str("#\n");
            comment(
                out,
                &format!(
                    "OVERSUBSCRIBED: {} executors on {} CPUs; executors that share a CPU take \
                     turns on it, and `corescan topology check` reports each shared CPU.",
                    self.executors.len(),
                    {
                        let mut cpus = self.cpus();
                        cpus.sort_unstable();
                        cpus.dedup();
                        cpus.len()
                    }
                ),
            );
        }
        out.push('\n');
    }

    fn render_machine(&self, out: &mut String) {
        let m = &self.machine;
        out.push_str("[machine]\n");
        comment(out, "CPU sockets (hwloc Package objects).");
        let _ = writeln!(out, "packages = {}", m.packages);
        comment(
            out,
            "NUMA nodes: memory banks, each local to some CPUs. Executors are spread round-robin \
             over them so each node's memory serves its own executors.",
        );
        let _ = writeln!(out, "numa_nodes = {}", m.numa_nodes);
        comment(
            out,
            "Physical cores. Every core gets one executor before any core gets a second one on a \
             sibling hardware thread (SMT), which shares the core's execution units.",
        );
        let _ = writeln!(out, "cores = {}", m.cores);
        comment(
            out,
            "Processing units: hardware threads, the CPUs the kernel schedules on and `cpu` counts.",
        );
        let _ = writeln!(out, "pus = {}", m.pus);
        comment(
            out,
            "Where these facts come from: \"hwloc: this machine\", \"hwloc synthetic: DESC\" or \
             \"hwloc xml: FILE\". `corescan topology check` reads that machine again to check the \
             CPUs below.",
        );
        let _ = writeln!(out, "source = {}", quoted(&m.source));
        if let Some(model) = &m.cpu_model {
            comment(out, "The CPU model (informational, from sysinfo).");
            let _ = writeln!(out, "cpu_model = {}", quoted(model));
        }
        if let Some(bytes) = m.memory_bytes {
            comment(out, "Total memory in bytes (informational, from sysinfo).");
            let _ = writeln!(
                out,
                "memory_bytes = {bytes}  # {:.1} GiB",
                bytes as f64 / f64::from(1u32 << 30)
            );
        }
        out.push('\n');
    }

    fn render_executors(&self, out: &mut String) {
        comment(
            out,
            &format!(
                "One [[executor]] table per executor, in executor order (executor 0 first). \
                 Executors run on CPUs {}.",
                cpu_list(&self.cpus())
            ),
        );
        if self.executors.iter().all(|e| e.sqpoll_cpu.is_none()) {
            let mut cpus = self.cpus();
            cpus.sort_unstable();
            cpus.dedup();
            let idle = self.machine.pus.saturating_sub(cpus.len());
            comment(
                out,
                &format!(
                    "No executor has an SQPOLL thread ([scan] sqpoll = \"{}\"). A poll thread goes \
                     only to an idle CPU, one that runs no executor, and this plan leaves {idle} \
                     of the machine's {} CPUs idle.",
                    self.scan.sqpoll, self.machine.pus
                ),
            );
        }
        for (i, e) in self.executors.iter().enumerate() {
            if i == 0 {
                render_first_executor(out, e);
            } else {
                let _ = writeln!(out, "\n# Executor {i} (fields as for executor 0).");
                out.push_str("[[executor]]\n");
                let _ = writeln!(out, "cpu = {}", e.cpu);
                let _ = writeln!(out, "core = {}", e.core);
                let _ = writeln!(out, "package = {}", e.package);
                let _ = writeln!(out, "numa_node = {}", e.numa_node);
                let _ = writeln!(out, "weight = {}", e.weight);
                if let Some(poll) = e.sqpoll_cpu {
                    let _ = writeln!(out, "sqpoll_cpu = {poll}");
                }
            }
        }
        out.push('\n');
    }

    fn render_scan(&self, out: &mut String) {
        let s = &self.scan;
        comment(out, "How every executor reads.");
        out.push_str("[scan]\n");
        comment(
            out,
            "The I/O path: \"dma\" (glommio, O_DIRECT reads on the executor's own io_uring), \
             \"uring\" (a private io_uring per executor with registered buffers and O_DIRECT; \
             the only path with SQPOLL), \"pread\" (buffered reads; the kernel reads ahead), \
             \"mmap\" (memory-mapped, sequential advice) or \"auto\" (the default: dma when \
             the table is not in the page cache, mmap when it is).",
        );
        let _ = writeln!(out, "io = {}", quoted(s.io.as_str()));
        comment(
            out,
            &format!(
                "Pages kept in flight ahead of each executor's decoder (0 = one read at a time; at \
                 most {MAX_READAHEAD}). Many reads in flight are what lets the block layer merge \
                 them; 1024 is 4 MiB at 4 KiB pages."
            ),
        );
        let _ = writeln!(out, "readahead = {}", s.readahead);
        comment(
            out,
            &format!(
                "Adjacent pages are merged into reads of up to this many KiB (0 = one read per \
                 page; at most {MAX_COALESCE_KIB})."
            ),
        );
        let _ = writeln!(out, "coalesce_kib = {}", s.coalesce_kib);
        comment(
            out,
            "Kernel SQPOLL threads for the \"uring\" path: \"off\" (submissions are system calls), \
             \"auto\" (a poll thread for each executor that has an sqpoll_cpu above) or \"on\" \
             (every executor must have one). A poll thread spins on its CPU, so it pays only on a \
             CPU that runs no executor.",
        );
        let _ = writeln!(out, "sqpoll = {}", quoted(s.sqpoll.as_str()));
    }
}

fn render_first_executor(out: &mut String, e: &ExecutorPlacement) {
    out.push_str("[[executor]]\n");
    comment(
        out,
        "The CPU the executor's thread is pinned to: the kernel's CPU number, as taskset and \
         /proc/cpuinfo use.",
    );
    let _ = writeln!(out, "cpu = {}", e.cpu);
    comment(
        out,
        "Its physical core (hwloc's logical core index, unique across the machine).",
    );
    let _ = writeln!(out, "core = {}", e.core);
    comment(out, "Its package (socket), numbered as the kernel does.");
    let _ = writeln!(out, "package = {}", e.package);
    comment(
        out,
        "The NUMA node local to that CPU, numbered as numactl does.",
    );
    let _ = writeln!(out, "numa_node = {}", e.numa_node);
    comment(
        out,
        &format!(
            "The executor's share of the table's leaf pages, relative to the others: \
             {FULL_CORE_WEIGHT} for a physical core of its own, split between executors that \
             share a core ({} each for two). The leaf pages are cut in proportion to the \
             weights, so each NUMA node reads a share in proportion to the cores its executors \
             have. Optional; {FULL_CORE_WEIGHT} when absent.",
            FULL_CORE_WEIGHT / 2
        ),
    );
    let _ = writeln!(out, "weight = {}", e.weight);
    match e.sqpoll_cpu {
        Some(poll) => {
            comment(
                out,
                "The idle CPU that hosts this executor's SQPOLL kernel thread (absent: none).",
            );
            let _ = writeln!(out, "sqpoll_cpu = {poll}");
        }
        None => comment(
            out,
            "No `sqpoll_cpu`: this executor has no SQPOLL thread (one would be given only an idle \
             CPU, one that runs no executor).",
        ),
    }
}
