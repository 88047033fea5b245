//! `corescan explain DB [--table NAME] [--cores N | --cpus LIST] [--json]`: the header facts, the
//! table's b-tree page counts and extents, and the per-executor leaf ranges a scan would use.
//!
//! Planning reads only the b-tree's interior pages, so `explain` is fast on any size of table
//! (the interior pages are about 0.3 % of a TPC-H table). Rows and overflow pages are written
//! only on the leaves: `--census` counts them with a scan ([`engine::census::CensusKernel`]),
//! which reads the table like `q6` does (every executor its range, the readahead window, the
//! default backend) and follows every overflow chain.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use partitioner::TablePlan;
use serde::Serialize;

use crate::args::CpuArgs;

/// Arguments of `corescan explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The database file; or several (paths, quoted glob patterns such as 'shards/*.db',
    /// sorted, or @list.txt): each file's table, and how a scan deals the files to the
    /// executors.
    #[arg(value_name = "DB", required = true, num_args = 1..)]
    inputs: Vec<String>,
    /// The table to explain (case-insensitive).
    #[arg(long, default_value = "lineitem")]
    table: String,
    #[command(flatten)]
    cpus: CpuArgs,
    /// Also count rows and overflow pages by scanning every leaf page and overflow chain (one
    /// full read of the table, done like a scan).
    #[arg(long)]
    census: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// What `explain` reports; also its `--json` form.
#[derive(Debug, Serialize)]
struct Report {
    path: String,
    file_size: u64,
    page_size: u32,
    page_count: u32,
    reserved_bytes: u8,
    change_counter: u32,
    /// Whether the file has pointer-map pages (auto-vacuum FULL or INCREMENTAL).
    auto_vacuum: bool,
    freelist_pages: u32,
    /// The lock-byte page, when the file reaches 1 GiB.
    lock_byte_page: Option<u32>,
    table: String,
    root_page: u32,
    columns: usize,
    btree_depth: u32,
    /// Rows, from `--census` (null without it).
    rows: Option<u64>,
    leaf_pages: u64,
    interior_pages: u64,
    /// Overflow pages, from `--census` (null without it).
    overflow_pages: Option<u64>,
    /// How the census read the table (null without `--census`).
    census: Option<CensusReport>,
    extents: u64,
    mean_extent_pages: f64,
    ranges: Vec<RangeReport>,
    /// How one committed state of the database was held while it was read.
    snapshot: engine::SnapshotReport,
    /// Why the snapshot was held without SQLite's locks, or retried, when it was.
    notice: Option<String>,
}

/// How `--census` read the table.
#[derive(Debug, Serialize)]
struct CensusReport {
    /// The I/O path that ran.
    io: engine::IoReport,
    wall_s: f64,
    rows_with_overflow: u64,
    payload_bytes: u64,
    max_payload: u64,
}

/// One executor's share of the leaves.
#[derive(Debug, Serialize)]
struct RangeReport {
    cpu: usize,
    /// The executor's share weight (100 = a whole physical core to itself).
    weight: u32,
    /// The first leaf page (null when the range is empty).
    first_page: Option<u32>,
    /// The last leaf page (null when the range is empty).
    last_page: Option<u32>,
    pages: u64,
    extents: usize,
}

/// Plans the table and prints the report.
pub fn run(args: ExplainArgs) -> anyhow::Result<()> {
    let files = partitioner::sources::expand(&args.inputs)?;
    if crate::query::several(&args.inputs, &files) {
        return run_files(&args, &files);
    }
    let db = files.into_iter().next().context("no database file")?;
    // Partitioner errors already name the file (and the page at fault).
    let executors = args.cpus.executors()?;
    let faults = crate::scan_setup::injected_faults()?;
    // Planning alone reads the interior pages; with --census every leaf too. Either way
    // from one committed state (engine::retry plans again if an unlocked one changed).
    let done = engine::consistent(
        &db,
        || TablePlan::open(&db, &args.table),
        |plan| {
            if !args.census {
                return Ok(None);
            }
            let mut settings = engine::ScanSettings::defaults(plan.header.page_size);
            settings.faults = faults;
            let kernel = engine::census::CensusKernel::new(plan.header.usable_size());
            let (partials, run) = engine::run_scan(plan, &settings, &executors, kernel)?;
            let mut total = engine::census::Census::default();
            partials.iter().for_each(|c| total.merge(c));
            Ok(Some((total, run)))
        },
    )?;
    let mut snapshot = engine::SnapshotReport::of(&done.plan.read);
    let mut notice = done.plan.read.notice.clone();
    done.report_into(&mut snapshot, &mut notice);
    let (plan, census) = (&done.plan, done.value);
    let cpus: Vec<usize> = executors.iter().map(|e| e.cpu).collect();
    let weights: Vec<u32> = executors.iter().map(|e| e.weight).collect();
    let ranges = plan.split(&weights);
    let h = &plan.header;
    let extents = plan.extents.len() as u64;
    let report = Report {
        path: db.display().to_string(),
        file_size: h.file_size,
        page_size: h.page_size,
        page_count: h.page_count,
        reserved_bytes: h.reserved_bytes,
        change_counter: h.change_counter,
        auto_vacuum: h.has_pointer_map(),
        freelist_pages: h.freelist_pages,
        lock_byte_page: h.lock_byte_page(),
        table: plan.table.name.clone(),
        root_page: plan.table.root_page,
        columns: plan.table.columns.len(),
        btree_depth: plan.depth,
        rows: census.as_ref().map(|(c, _)| c.rows),
        leaf_pages: plan.leaves.len() as u64,
        interior_pages: plan.interior_pages.len() as u64,
        overflow_pages: census.as_ref().map(|(_, run)| run.overflow_pages_read),
        census: census.as_ref().map(|(c, run)| CensusReport {
            io: run.io.clone(),
            wall_s: run.wall_s,
            rows_with_overflow: c.rows_with_overflow,
            payload_bytes: c.payload_bytes,
            max_payload: c.max_payload,
        }),
        extents,
        mean_extent_pages: if extents == 0 {
            0.0
        } else {
            plan.leaves.len() as f64 / extents as f64
        },
        ranges: ranges
            .iter()
            .map(|r| RangeReport {
                cpu: cpus[r.index],
                weight: weights[r.index],
                first_page: r.first_page(),
                last_page: r.last_page(),
                pages: r.pages(),
                extents: r.extents.len(),
            })
            .collect(),
        snapshot,
        notice,
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_text(&report);
    }
    Ok(())
}

fn print_text(r: &Report) {
    let opt = |p: Option<u32>| p.map_or_else(|| "-".to_string(), |p| p.to_string());
    println!("file            {} ({} bytes)", r.path, r.file_size);
    println!(
        "page size       {} bytes ({} reserved)",
        r.page_size, r.reserved_bytes
    );
    println!(
        "pages           {} ({} on the freelist)",
        r.page_count, r.freelist_pages
    );
    println!("change counter  {}", r.change_counter);
    println!(
        "auto-vacuum     {}",
        if r.auto_vacuum {
            "on (pointer-map pages)"
        } else {
            "off"
        }
    );
    println!("lock-byte page  {}", opt(r.lock_byte_page));
    println!(
        "table           {} (root page {}, {} columns)",
        r.table, r.root_page, r.columns
    );
    let counted =
        |v: Option<u64>| v.map_or_else(|| "? (--census counts)".to_string(), |v| v.to_string());
    println!("rows            {}", counted(r.rows));
    println!(
        "b-tree          depth {}: {} leaf, {} interior, {} overflow pages",
        r.btree_depth,
        r.leaf_pages,
        r.interior_pages,
        counted(r.overflow_pages)
    );
    if let Some(c) = &r.census {
        println!(
            "census          {:.3} s ({}{})",
            c.wall_s,
            c.io.backend,
            if c.io.o_direct { ", O_DIRECT" } else { "" }
        );
    }
    println!(
        "extents         {} (mean {:.1} pages)",
        r.extents, r.mean_extent_pages
    );
    println!(
        "snapshot        {}{}, {} attempt(s)",
        r.snapshot.protocol,
        r.snapshot
            .read_mark
            .map_or(String::new(), |i| format!(" (READ({i}))")),
        r.snapshot.attempts
    );
    if let Some(n) = &r.notice {
        println!("notice          {n}");
    }
    println!("ranges          {} executors", r.ranges.len());
    println!(
        "  {:>5}  {:>10}  {:>10}  {:>10}  {:>8}",
        "cpu", "first_page", "last_page", "pages", "extents"
    );
    for x in &r.ranges {
        println!(
            "  {:>5}  {:>10}  {:>10}  {:>10}  {:>8}",
            x.cpu,
            opt(x.first_page),
            opt(x.last_page),
            x.pages,
            x.extents
        );
    }
}

/// One file of a table over several files, as `explain` shows it.
#[derive(Debug, Serialize)]
struct FileReport {
    path: String,
    file_size: u64,
    page_size: u32,
    btree_depth: u32,
    leaf_pages: u64,
    interior_pages: u64,
    /// Into how many shares a scan cuts the file (1: read whole by one executor).
    shares: usize,
    /// The CPUs of the executors that read it.
    cpus: Vec<usize>,
}

/// One executor's share of a table over several files.
#[derive(Debug, Serialize)]
struct DealtReport {
    cpu: usize,
    /// Files (or shares of a split file) dealt to it, in order.
    units: usize,
    bytes: u64,
}

/// What `explain` reports for a table over several files; also its `--json` form.
#[derive(Debug, Serialize)]
struct FilesReport {
    table: String,
    files: Vec<FileReport>,
    executors: Vec<DealtReport>,
}

/// `explain` over several files: each file's table (planned, then closed), and how a scan
/// deals the files to the executors ([`engine::split_counts`], [`engine::deal_files`]).
fn run_files(args: &ExplainArgs, files: &[PathBuf]) -> anyhow::Result<()> {
    if args.census {
        anyhow::bail!("--census counts the rows of one file: name one file");
    }
    let executors = args.cpus.executors()?;
    let mut reports = Vec::with_capacity(files.len());
    let mut table = args.table.clone();
    for f in files {
        let plan = TablePlan::open(f, &args.table)?;
        table = plan.table.name.clone();
        reports.push(FileReport {
            path: f.display().to_string(),
            file_size: plan.header.file_size,
            page_size: plan.header.page_size,
            btree_depth: plan.depth,
            leaf_pages: plan.leaves.len() as u64,
            interior_pages: plan.interior_pages.len() as u64,
            shares: 1,
            cpus: Vec::new(),
        });
    }
    let sizes: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()))
        .collect::<std::io::Result<_>>()?;
    let parts = engine::split_counts(&sizes, executors.len());
    let (mut unit_file, mut unit_sizes) = (Vec::new(), Vec::new());
    for (i, (&size, &k)) in sizes.iter().zip(&parts).enumerate() {
        reports[i].shares = k;
        for _ in 0..k {
            unit_file.push(i);
            unit_sizes.push(size / k as u64);
        }
    }
    let weights: Vec<u32> = executors.iter().map(|e| e.weight).collect();
    let runs = engine::deal_files(&unit_sizes, &weights);
    let mut dealt = Vec::with_capacity(executors.len());
    for (e, run) in executors.iter().zip(&runs) {
        for u in run.clone() {
            let cpus = &mut reports[unit_file[u]].cpus;
            if !cpus.contains(&e.cpu) {
                cpus.push(e.cpu);
            }
        }
        dealt.push(DealtReport {
            cpu: e.cpu,
            units: run.len(),
            bytes: run.clone().map(|u| unit_sizes[u]).sum(),
        });
    }
    let report = FilesReport {
        table,
        files: reports,
        executors: dealt,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "table           {} over {} files",
        report.table,
        report.files.len()
    );
    println!(
        "  {:>12}  {:>6}  {:>10}  {:>8}  {:>6}  {:>8}  file",
        "bytes", "depth", "leaves", "interior", "shares", "cpus"
    );
    for f in &report.files {
        let cpus: Vec<String> = f.cpus.iter().map(usize::to_string).collect();
        println!(
            "  {:>12}  {:>6}  {:>10}  {:>8}  {:>6}  {:>8}  {}",
            f.file_size,
            f.btree_depth,
            f.leaf_pages,
            f.interior_pages,
            f.shares,
            cpus.join(","),
            f.path
        );
    }
    println!("executors       {}", report.executors.len());
    for e in &report.executors {
        println!(
            "  CPU {:<3} {} file(s) or shares, {:.1} MiB",
            e.cpu,
            e.units,
            e.bytes as f64 / (1024.0 * 1024.0)
        );
    }
    Ok(())
}
