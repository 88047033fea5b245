//! The `corescan` binary: a thin entry point over [`cli`], which parses the command line, runs
//! the subcommand and turns every error into one `error:` line and an exit status.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
