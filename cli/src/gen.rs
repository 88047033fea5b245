//! `corescan gen OUT.db [--scale-factor SF] [--page-size BYTES] [--tables lineitem|all] [--shards N] [--force]`

use std::path::PathBuf;

use bench::gen::{generate, GenOptions, TableSelection};
use clap::{Args, ValueEnum};

/// Arguments of `corescan gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// The database file to create (written as OUT.partial, renamed when complete).
    #[arg(value_name = "OUT.db")]
    out: PathBuf,
    /// TPC-H scale factor (1 = about 6 million LINEITEM rows); a finite number > 0.
    #[arg(
        long,
        short = 's',
        value_name = "SF",
        default_value_t = 1.0,
        allow_negative_numbers = true,
        value_parser = scale_factor_arg
    )]
    scale_factor: f64,
    /// Page size in bytes: a power of two from 512 to 65536.
    #[arg(long, value_name = "BYTES", default_value_t = 4096, value_parser = page_size_arg)]
    page_size: u32,
    /// Which tables to generate.
    #[arg(long, value_enum, default_value_t = Tables::All)]
    tables: Tables,
    /// Replace OUT.db (or the shards) if it exists.
    #[arg(long)]
    force: bool,
    /// Split the database into N files, OUT-0..OUT-(N-1) with the index zero-padded
    /// (t.db -> t-000.db ... t-999.db): LINEITEM and ORDERS cut by order key into ranges of
    /// about equal row counts, the other tables whole in the first shard: each table's union
    /// over the shards is the whole database's.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=100_000))]
    shards: Option<u32>,
}

/// `--scale-factor`: a finite number > 0 (checked again by [`generate`]).
fn scale_factor_arg(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(sf) if sf.is_finite() && sf > 0.0 => Ok(sf),
        _ => Err("expected a finite number greater than 0".into()),
    }
}

/// `--page-size`: a power of two from 512 to 65536 (checked again by [`generate`]).
fn page_size_arg(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if n.is_power_of_two() && (512..=65536).contains(&n) => Ok(n),
        _ => Err("expected a power of two from 512 to 65536".into()),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Tables {
    /// Only LINEITEM, the table Q6 reads.
    Lineitem,
    /// All eight TPC-H tables, LINEITEM last.
    All,
}

/// Generates the database and prints one summary line.
pub fn run(args: GenArgs) -> anyhow::Result<()> {
    if let Some(n) = args.shards {
        return run_shards(args, n as usize);
    }
    let opts = GenOptions {
        out: args.out,
        scale_factor: args.scale_factor,
        page_size: args.page_size,
        tables: match args.tables {
            Tables::Lineitem => TableSelection::Lineitem,
            Tables::All => TableSelection::All,
        },
        force: args.force,
    };
    let summary = generate(&opts, true)?;
    let tables: Vec<String> = summary
        .tables
        .iter()
        .map(|t| format!("{} {}", t.table, t.rows))
        .collect();
    println!(
        "wrote {}: {} bytes, {} pages of {} bytes, in {:.1} s (rows: {})",
        summary.path.display(),
        summary.file_size,
        summary.file_size / u64::from(opts.page_size),
        opts.page_size,
        summary.elapsed.as_secs_f64(),
        tables.join(", ")
    );
    Ok(())
}

/// `--shards N`: the whole database generated beside the shards (removed afterwards), then
/// split ([`bench::shards::split`]).
fn run_shards(args: GenArgs, n: usize) -> anyhow::Result<()> {
    let mut full = args.out.clone().into_os_string();
    full.push(".whole");
    let full = PathBuf::from(full);
    let opts = GenOptions {
        out: full.clone(),
        scale_factor: args.scale_factor,
        page_size: args.page_size,
        tables: match args.tables {
            Tables::Lineitem => TableSelection::Lineitem,
            Tables::All => TableSelection::All,
        },
        force: true,
    };
    let started = std::time::Instant::now();
    let summary = generate(&opts, true)?;
    let split = bench::shards::split(&full, &args.out, n, args.page_size, args.force);
    let _ = std::fs::remove_file(&full);
    let paths = split?;
    let bytes: u64 = paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let tables: Vec<String> = summary
        .tables
        .iter()
        .map(|t| format!("{} {}", t.table, t.rows))
        .collect();
    println!(
        "wrote {n} shards {} .. {}: {bytes} bytes in all, in {:.1} s (rows over all shards: {})",
        paths[0].display(),
        paths[n - 1].display(),
        started.elapsed().as_secs_f64(),
        tables.join(", ")
    );
    Ok(())
}
