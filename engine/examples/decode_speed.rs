//! Decoder throughput on pages already in memory, one core, no I/O: the CPU cost a warm scan
//! cannot avoid. Loads up to `PAGES` leaf pages of the table into one buffer and runs the Q6
//! kernel over them several times; prints the best run.
//!
//!     cargo run --release -p engine --example decode_speed -- DB [TABLE] [PAGES]

use std::os::unix::fs::FileExt;
use std::time::Instant;

use engine::q6::{Q6Kernel, Q6Params};
use engine::scan::ScanKernel;

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
        for (i, &no) in leaves.iter().enumerate() {
            let (page, next) = page_and_next(&buf, page_size, i);
            kernel.decode_page(no, page, next, &mut spills)?;
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
    let d = decode_only(&buf, page_size, &leaves, plan.header.usable_size());
    println!("decode only: {:.1} ns/row", d * 1e9 / rows as f64);
    Ok(())
}

/// Page `i` of `buf` and the page after it (empty after the last), as the scan gives them.
fn page_and_next(buf: &[u8], page_size: usize, i: usize) -> (&[u8], &[u8]) {
    let next = buf
        .get((i + 1) * page_size..(i + 2) * page_size)
        .unwrap_or(&[]);
    (&buf[i * page_size..(i + 1) * page_size], next)
}

/// Pass one alone: the batch decoder without the Q6 filter.
fn decode_only(buf: &[u8], page_size: usize, leaves: &[u32], usable: u32) -> f64 {
    let columns = engine::decode::NeededColumns::new(&[10, 6, 4, 5]).without_rowid();
    let mut batch = engine::decode::CellBatch::new();
    let mut spills = Vec::new();
    let mut best = f64::INFINITY;
    let mut sink = 0usize;
    for _ in 0..20 {
        let t = Instant::now();
        for (i, &no) in leaves.iter().enumerate() {
            let (page, next) = page_and_next(buf, page_size, i);
            sink += batch
                .decode_page_ahead(&columns, no, page, next, usable, &mut spills)
                .unwrap();
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(sink);
    best
}
