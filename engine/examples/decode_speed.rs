//! Decoder throughput on pages already in memory, one core, no I/O: the CPU cost a warm scan
//! cannot avoid. Loads up to `PAGES` leaf pages of the table into one buffer and runs the Q6
//! kernel over them several times; prints the best run.
//!
//!     cargo run --release -p engine --example decode_speed -- DB [TABLE] [PAGES]

use std::os::unix::fs::FileExt;
use std::time::Instant;

use engine::scan::ScanKernel;
use engine::{Q6Kernel, Q6Params};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let db = args
        .next()
        .ok_or("usage: decode_speed DB [TABLE] [PAGES]")?;
    let table = args.next().unwrap_or_else(|| "lineitem".into());
    let pages: usize = args.next().map_or(Ok(50_000), |p| p.parse())?;
    let plan = partitioner::TablePlan::open(db.as_ref(), &table)?;
    let page_size = plan.header.page_size as usize;
    let file = std::fs::File::open(&db)?;
    let leaves: Vec<u32> = plan.leaves.iter().copied().take(pages).collect();
    let mut buf = vec![0u8; leaves.len() * page_size];
    for (page, &p) in buf.chunks_exact_mut(page_size).zip(&leaves) {
        file.read_exact_at(page, (u64::from(p) - 1) * page_size as u64)?;
    }
    let mut best = f64::INFINITY;
    let mut rows = 0;
    for _ in 0..(200_000 / leaves.len().max(1)).clamp(5, 200) {
        let mut kernel = Q6Kernel::new(&plan, &Q6Params::default())?;
        let mut spills = Vec::new();
        let t = Instant::now();
        for (page, &no) in buf.chunks_exact(page_size).zip(&leaves) {
            kernel.decode_page(no, page, &mut spills)?;
        }
        best = best.min(t.elapsed().as_secs_f64());
        rows = kernel.rows();
    }
    println!(
        "{} pages, {rows} rows: best {:.1} ms, {:.1} ns/row, {:.2} GB/s",
        leaves.len(),
        best * 1e3,
        best * 1e9 / rows as f64,
        buf.len() as f64 / best / 1e9
    );
    Ok(())
}
