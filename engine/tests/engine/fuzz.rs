//! A structured fuzzer for the record decoder that runs on stable Rust: real table-leaf pages
//! from a generated file, mutated (bit flips, byte stores, varint and pointer rewrites, cut
//! payloads), decoded whole and record by record. Nothing may panic; errors are fine.
//! `CORESCAN_FUZZ_SECS` bounds the time (default 2 s); `CORESCAN_FUZZ_SEED` replays a seed.

use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use engine::q6::decoder::{LeafDecoder, Spill};
use engine::q6::Q6Params;
use engine::q6::{PartialAggregate, Q6Filter};
use partitioner::TablePlan;
use testkit::Rng;

use crate::fixture::{make_lineitem, test_dir};

fn mutate(page: &mut [u8], rng: &mut Rng) {
    for _ in 0..1 + rng.index(4) {
        let at = rng.index(page.len());
        match rng.index(5) {
            0 => page[at] ^= 1 << rng.index(8),
            1 => page[at] = rng.next_u64() as u8,
            2 => page[at] = [0x00, 0x7f, 0x80, 0xff, 10, 11, 12, 13][rng.index(8)],
            3 => {
                // Rewrite a cell pointer to anywhere.
                let cells = usize::from(u16::from_be_bytes([page[3], page[4]])).max(1);
                let p = 8 + 2 * rng.index(cells);
                if p + 1 < page.len() {
                    let v = rng.index(page.len() + 64) as u16;
                    page[p..p + 2].copy_from_slice(&v.to_be_bytes());
                }
            }
            _ => {
                // A run of 0xff: the longest varints and the largest sizes.
                let end = (at + 1 + rng.index(9)).min(page.len());
                page[at..end].fill(0xff);
            }
        }
    }
}

#[test]
fn mutated_leaf_pages_never_panic_the_decoder() {
    let dir = test_dir("fuzz");
    let path = dir.join("li.db");
    make_lineitem(&path, 3_000, 1024);
    let plan = TablePlan::open(&path, "lineitem").unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let pages: Vec<Vec<u8>> = plan
        .leaves
        .iter()
        .take(64)
        .map(|&p| {
            let mut b = vec![0; 1024];
            file.read_exact_at(&mut b, u64::from(p - 1) * 1024).unwrap();
            b
        })
        .collect();
    let cols = engine::q6::q6_columns(&plan).unwrap();
    let mut decoder = LeafDecoder::new(cols, Q6Filter::from(&Q6Params::default()), 1024);
    let secs: u64 = std::env::var("CORESCAN_FUZZ_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let seed: u64 = std::env::var("CORESCAN_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_cafe);
    println!("record fuzzer: seed {seed}, {secs} s (replay with CORESCAN_FUZZ_SEED)");
    // xorshift64: the stream the seeds printed by earlier runs replay.
    let mut rng = Rng::xorshift64(seed | 1);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut cases = 0u64;
    let mut spills: Vec<Spill> = Vec::new();
    while Instant::now() < deadline {
        let mut page = pages[rng.index(pages.len())].clone();
        mutate(&mut page, &mut rng);
        let mut agg = PartialAggregate::default();
        let _ = decoder.decode_page(7, &page, &mut agg, &mut spills);
        spills.clear();
        // Records on their own: any slice, claimed complete or not.
        let start = rng.index(page.len());
        let end = start + rng.index(page.len() - start + 1);
        let _ = decoder.eval_record(&page[start..end], rng.index(2) == 0, &mut agg);
        cases += 1;
    }
    assert!(cases > 100, "the fuzzer ran ({cases} cases)");
}
