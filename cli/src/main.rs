//! # corescan: the command line
//!
//! The `corescan` binary: [`command`] (the clap definition, the dispatch to one module per
//! subcommand and the error contract: one `error:` line and an exit status) on top of one module
//! per subcommand, which share the arguments of [`args`] (`--io`, `--sqpoll`,
//! `--cores`/`--cpus`). The work itself is in the libraries: `partitioner` (what to read),
//! `engine` (how to read it and what to compute), `corescan-sql` (SQL text to a query plan),
//! `corescan-datafusion` (DataFusion over corescan's scans, for `sql`; the cargo feature `sql`,
//! on by default) and `bench` (data generation, the SQLite oracle, experiments).
//!
//! Dependencies run one way: `command` imports the subcommand modules, they import `args`, and
//! `args` imports neither.

mod args;
mod bench;
mod command;
#[cfg(feature = "distributed")]
mod distributed_bench;
mod explain;
mod files_bench;
mod gen;
mod live;
mod q6;
mod query;
mod query_output;
mod report;
mod scan_setup;
#[cfg(feature = "sql")]
mod sql;
mod topology;
#[cfg(feature = "sql")]
mod tpch_bench;
#[cfg(feature = "distributed")]
mod worker;

/// Large allocations (glommio's registered I/O memory among them) on transparent huge pages,
/// so each direct read is one physically contiguous segment for the device.
#[global_allocator]
static ALLOC: engine::hugepages::HugePageAlloc = engine::hugepages::HugePageAlloc;

/// hwloc plugins corescan has no use for: three discover I/O devices (PCI, OpenCL, OpenGL), and
/// loading them pulls in libOpenCL, libX11 and libxcb. On a cold start that took about 130 ms
/// before the first page could be read (the machine's CPUs are all the scan asks hwloc for).
/// The fourth reads and writes XML with libxml2, which pulls in ICU (a 31 MB data library),
/// liblzma, zlib and libstdc++: about 25 ms of a cold start in the topology thread the plan
/// waits for. hwloc's own XML code, built into the library, reads and writes the same files
/// (`topology detect --xml`, tested). hwloc matches the names by substring, so both `hwloc_gl`
/// and `hwloc_gl.so` are covered.
const UNUSED_HWLOC_PLUGINS: &str = "hwloc_opencl.so,hwloc_gl.so,hwloc_pci.so,hwloc_xml_libxml.so";

fn main() -> std::process::ExitCode {
    engine::mark_process_start();
    if std::env::var_os("HWLOC_PLUGINS_BLACKLIST").is_none() {
        // SAFETY: the first thing the process does, before any other thread exists (nothing
        // can read the environment concurrently). A user's own setting is left alone.
        unsafe { std::env::set_var("HWLOC_PLUGINS_BLACKLIST", UNUSED_HWLOC_PLUGINS) };
    }
    raise_open_files_limit();
    command::main()
}

/// Raises the soft limit of open files to the hard one: a sort's final merge holds each of
/// its spilled runs open (up to 256), and a query over many files opens them in turn; the
/// usual soft limit of 1,024 is a default, not a decision.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            // A failure leaves the limit as it was: nothing depends on it.
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
