//! The `corescan` binary: a thin entry point over [`cli::command`], which parses the command line, runs
//! the subcommand and turns every error into one `error:` line and an exit status.

mod cli;

/// Large allocations (glommio's registered I/O memory among them) on transparent huge pages,
/// so each direct read is one physically contiguous segment for the device.
#[global_allocator]
static ALLOC: engine::hugepages::HugePageAlloc = engine::hugepages::HugePageAlloc;

fn main() -> std::process::ExitCode {
    engine::cputime::mark_process_start();
    cli::command::main()
}
