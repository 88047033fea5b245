//! The `corescan` command: its clap definition ([`Cli`]), the dispatch to one module per
//! subcommand, and the error contract shared by all of them.
//!
//! Contract (see `design.md`): an error is one line on stderr starting with `error:` and exit
//! status 1; a usage error is one `error:` line too, with status 2 (clap's message with its
//! usage block and hints folded into that line, see [`usage_line`]); `--help` and `--version`
//! exit 0. A panic is reported the same way (one `error: internal error: ...` line, status 1),
//! never as Rust's multi-line panic message. Every `error:` line goes through
//! [`partitioner::printable`]: the libraries' errors already escape the text they took from a
//! file, and this covers whatever else reaches the line (an I/O error's path, an argument, a
//! panic message), so no control character reaches the terminal raw and the line stays one.
//!
//! Every option that takes a value accepts a negative-looking one (`--discount -0.06`,
//! `--cores -1`), so that its value parser, not clap's "unexpected argument" path, rejects it
//! with a message about the value ([`clap_command`]).

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use partitioner::printable;

#[cfg(feature = "sql")]
use crate::sql;
#[cfg(feature = "distributed")]
use crate::worker;
use crate::{bench, explain, gen, q6, query, topology};

/// Thread-per-core table scans of SQLite-format files: TPC-H Q6 and single-table SELECT queries,
/// with the answers SQLite gives, and any SQL over many tables through DataFusion.
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
    #[command(about = QUERY_ABOUT, override_usage = QUERY_USAGE)]
    Query(query::QueryArgs),
    /// Run any SQL (joins, subqueries, CTEs, window functions) over the tables of DB through
    /// Apache DataFusion, with corescan's scans as its tables.
    #[cfg(feature = "sql")]
    #[command(override_usage = "corescan sql [OPTIONS] <DB>... <SQL>")]
    Sql(sql::SqlArgs),
    /// Serve the SQLite files under a directory to `corescan sql --workers`: each file's scans
    /// run here, thread-per-core, as a local scan.
    #[cfg(feature = "distributed")]
    Worker(worker::WorkerArgs),
    /// Plan executor placement for a machine (hwloc) and write or check topology.toml.
    Topology(topology::TopologyArgs),
    /// Run an experiment: core-count scaling, readahead sweeps, the seed report, or a
    /// comparison with SQLite, DuckDB and Turso.
    Bench(bench::BenchArgs),
}

/// `corescan query`'s line in the help.
const QUERY_ABOUT: &str =
    "Run one SELECT over one table with SQLite's answers, the thread-per-core way.";

/// `corescan query`'s usage line.
const QUERY_USAGE: &str = "corescan query [OPTIONS] <DB>... <SQL>";

/// The command line of `corescan query` alone ([`Cli`] with its other subcommands left out,
/// the same help and errors): clap builds every argument of every subcommand it is given, and
/// for the whole tree that took 0.4-0.6 ms of the 5 ms in which `query` answers an index
/// seek.
#[derive(Debug, Parser)]
#[command(name = "corescan", version, propagate_version = true)]
struct QueryCli {
    #[command(subcommand)]
    command: QueryOnly,
}

#[derive(Debug, Subcommand)]
enum QueryOnly {
    #[command(about = QUERY_ABOUT, override_usage = QUERY_USAGE)]
    Query(query::QueryArgs),
}

/// The command line: [`QueryCli`] when the first argument names `query`, else [`Cli`].
fn parse() -> Result<Cli, clap::Error> {
    if std::env::args_os().nth(1).is_some_and(|a| a == "query") {
        let QueryOnly::Query(args) = adjust(QueryCli::command())
            .try_get_matches()
            .and_then(|m| QueryCli::from_arg_matches(&m))?
            .command;
        return Ok(Cli {
            command: Command::Query(args),
        });
    }
    clap_command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
}

/// Parses the arguments, runs the subcommand and reports the outcome as the exit status.
pub fn main() -> ExitCode {
    install_panic_hook();
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => return usage_exit(&e),
    };
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        // The reader of the results went away (`| head`): the output it took is the answer,
        // and the command ends quietly, as `sqlite3` does.
        Ok(Err(_)) if crate::query_output::output_closed() => ExitCode::SUCCESS,
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
fn clap_command() -> clap::Command {
    adjust(Cli::command())
}

/// `cmd` and its subcommands with [`clap_command`]'s two settings.
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

/// Prints `--help`/`--version` (exit 0) or a usage error as one `error:` line (exit 2).
fn usage_exit(e: &clap::Error) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("error: {}", printable(&usage_line(e)));
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
    // Not `query`: most of its statements (an index seek, a small table) are placed without
    // the topology (`Placement::for_seek`), and the discovery running beside them, which
    // binds itself to each CPU in turn, cost an index seek answered in 6-7 ms about 1 ms; a
    // scan large enough to need the topology waits for it after planning instead (2-3 ms of
    // a scan that takes 100 ms or more).
    let places_executors = match cli.command {
        Command::Q6(_) => true,
        #[cfg(feature = "sql")]
        Command::Sql(_) => true,
        #[cfg(feature = "distributed")]
        Command::Worker(_) => true,
        _ => false,
    };
    if places_executors {
        // hwloc's discovery (milliseconds) overlaps with opening and planning the table; the
        // placement waits for it.
        partitioner::topology::Machine::detect_in_background();
    }
    match cli.command {
        Command::Gen(args) => gen::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Q6(args) => q6::run(args),
        Command::Query(args) => query::run(args),
        #[cfg(feature = "sql")]
        Command::Sql(args) => sql::run(args),
        #[cfg(feature = "distributed")]
        Command::Worker(args) => worker::run(args),
        Command::Topology(args) => topology::run(args),
        Command::Bench(args) => bench::run(args),
    }
}

/// The error and its causes joined by `: `, on one line (a newline or any other control
/// character left in the text shows as its escape). Library errors often print their source
/// already (`FILE: open: No such file ...`), so a cause whose text is already in the message
/// is not repeated.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    printable(&line).into_owned()
}

/// The thread name of DataFusion's runtime (`corescan_datafusion::runtime`).
const DATAFUSION_THREADS: &str = "corescan-df";

fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        // A panic in one of DataFusion's tasks reaches the query as its error (DataFusion
        // re-raises a task's panic where the task is awaited, or turns it into the stream's
        // error), which the main thread then reports: printing it here too would make two
        // lines. A background task of the distributed engine cancelled while the query ends
        // on another error (its `JoinSet::join_all` panics on a cancelled task) is one such.
        if std::thread::current().name() == Some(DATAFUSION_THREADS) {
            return;
        }
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
            "error: internal error: {}",
            printable(&format!("{what}{at}"))
        );
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
        clap_command().debug_assert();
        adjust(QueryCli::command()).debug_assert();
    }

    #[test]
    fn query_alone_parses_and_helps_as_the_whole_command_line() {
        let help = |mut cmd: clap::Command| {
            cmd.build();
            let sub = cmd.find_subcommand_mut("query").expect("query");
            let args: Vec<String> = sub.get_arguments().map(|a| format!("{a:?}")).collect();
            (sub.render_long_help().to_string(), args)
        };
        let (whole, whole_args) = help(clap_command());
        let (alone, alone_args) = help(adjust(QueryCli::command()));
        assert!(
            whole.contains("--readahead") && whole.contains(QUERY_USAGE),
            "{whole}"
        );
        assert_eq!(alone, whole);
        assert_eq!(alone_args, whole_args);
        let argv = ["corescan", "query", "a.db", "SELECT 1", "--cores", "-1"];
        let parse = |cmd: clap::Command| {
            cmd.try_get_matches_from(argv)
                .map(|_| ())
                .map_err(|e| e.kind())
        };
        assert_eq!(parse(adjust(QueryCli::command())), parse(clap_command()));
    }
}
