//! A mutational fuzzer for the same targets as the libFuzzer binaries, on stable Rust.
//!
//! Without coverage feedback it cannot discover new paths the way libFuzzer does; it mutates
//! the seed corpora (`fuzz/corpus/<target>/`, written by `fuzz/seed.sh`) with byte-level
//! and varint-aware mutations for a bounded time, which is what a machine without nightly
//! Rust can run. The partitioner's own structured fuzzer (its `fuzz` test module) covers
//! the header, b-tree and WAL readers more deeply; this runner is mainly for the engine's
//! record decoder, which that test cannot reach.
//!
//! ```text
//! cargo run --release --manifest-path fuzz/Cargo.toml --bin stable -- [--secs N] [--seed S] [TARGET...]
//! ```
//!
//! A panicking or hanging input is written to `fuzz/artifacts/<target>/` (replay it with
//! `cargo fuzz run <target> FILE` or `--replay FILE`), and the exit status is 1.

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A case running longer than this is reported as a hang.
const HANG: Duration = Duration::from_secs(20);

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 4] = [
    ("header", corescan_fuzz::header),
    ("btree", corescan_fuzz::btree),
    ("record", corescan_fuzz::record),
    ("wal", corescan_fuzz::wal),
];

/// xorshift64*: small, deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One to eight byte-level mutations: bit flips, interesting bytes and words, long varints,
/// runs of random bytes, copies within the input, truncation and growth.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(8) {
        let len = input.len().max(1);
        let at = rng.below(len);
        match rng.below(9) {
            0 => {
                if let Some(b) = input.get_mut(at) {
                    *b ^= 1 << rng.below(8);
                }
            }
            1 => {
                let v = [0u8, 1, 0x7f, 0x80, 0xff, 0x0d, 0x05, 12, 13][rng.below(9)];
                if let Some(b) = input.get_mut(at) {
                    *b = v;
                }
            }
            2 => {
                let v: u32 =
                    [0, 1, 0x7fff_ffff, 0xffff_ffff, 0x8000, 0xffff, 100, 4096][rng.below(8)];
                let width = [2, 4][rng.below(2)];
                for (k, b) in v.to_be_bytes()[4 - width..].iter().enumerate() {
                    if let Some(slot) = input.get_mut(at + k) {
                        *slot = *b;
                    }
                }
            }
            3 => {
                // A long varint: continuation bytes, then a final byte.
                let n = 1 + rng.below(9);
                for k in 0..n {
                    if let Some(b) = input.get_mut(at + k) {
                        *b = if k + 1 < n {
                            0x80 | rng.next() as u8
                        } else {
                            rng.next() as u8
                        };
                    }
                }
            }
            4 => {
                for b in input.iter_mut().skip(at).take(1 + rng.below(16)) {
                    *b = rng.next() as u8;
                }
            }
            5 => {
                let from = rng.below(len);
                let n = rng.below(64).min(input.len().saturating_sub(from.max(at)));
                let chunk: Vec<u8> = input
                    .get(from..from + n)
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default();
                if let Some(dst) = input.get_mut(at..at + chunk.len()) {
                    dst.copy_from_slice(&chunk);
                }
            }
            6 => input.truncate(at),
            7 => {
                let extra = rng.below(512);
                input.extend((0..extra).map(|_| rng.next() as u8));
            }
            _ => {
                if at < input.len() {
                    input.insert(at, rng.next() as u8);
                }
            }
        }
    }
}

fn load_corpus(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    files.iter().filter_map(|f| std::fs::read(f).ok()).collect()
}

/// Saves `input` under `fuzz/artifacts/<target>/` and returns the file's path.
fn save(root: &Path, target: &str, kind: &str, seed: u64, input: &[u8]) -> PathBuf {
    let dir = root.join("artifacts").join(target);
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{kind}-{seed:016x}"));
    let _ = std::fs::write(&path, input);
    path
}

/// Fuzzes `target` for `secs` seconds; returns whether no input failed.
fn fuzz(root: &Path, name: &'static str, target: Target, secs: f64, base: u64) -> bool {
    let corpus = load_corpus(&root.join("corpus").join(name));
    if corpus.is_empty() {
        eprintln!("{name}: no corpus in fuzz/corpus/{name}; run fuzz/seed.sh first");
        return false;
    }
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let started = Arc::new(AtomicU64::new(0));
    let current: Arc<std::sync::Mutex<Vec<u8>>> = Arc::default();
    // The watchdog saves the running input and exits when one case hangs.
    let (watch_started, watch_input, watch_root) =
        (started.clone(), current.clone(), root.to_path_buf());
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let since = watch_started.load(Ordering::Relaxed);
        let now = epoch_ms();
        if since != 0 && now.saturating_sub(since) > HANG.as_millis() as u64 {
            let input = watch_input.lock().map(|g| g.clone()).unwrap_or_default();
            let path = save(&watch_root, name, "timeout", now, &input);
            eprintln!(
                "{name}: an input ran longer than {HANG:?}: {}",
                path.display()
            );
            std::process::exit(1);
        }
    });
    let mut cases = 0u64;
    let mut rng = Rng(base | 1);
    while Instant::now() < deadline {
        let seed = rng.next();
        let mut case_rng = Rng(seed | 1);
        let mut input = corpus[case_rng.below(corpus.len())].clone();
        mutate(&mut case_rng, &mut input);
        if let Ok(mut g) = current.lock() {
            g.clone_from(&input);
        }
        started.store(epoch_ms(), Ordering::Relaxed);
        let outcome = catch_unwind(AssertUnwindSafe(|| target(&input)));
        started.store(0, Ordering::Relaxed);
        if outcome.is_err() {
            let path = save(root, name, "crash", seed, &input);
            eprintln!("{name}: a panic on the input saved as {}", path.display());
            return false;
        }
        cases += 1;
    }
    eprintln!("{name}: {cases} cases, no failure");
    true
}

fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_millis() as u64)
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut args = std::env::args().skip(1);
    let (mut secs, mut seed, mut names) = (10.0, 0x5EED_u64, Vec::new());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--secs" => secs = args.next().and_then(|s| s.parse().ok()).unwrap_or(secs),
            "--seed" => seed = args.next().and_then(|s| s.parse().ok()).unwrap_or(seed),
            "--replay" => {
                let (Some(target), Some(file)) = (args.next(), args.next()) else {
                    eprintln!("usage: stable --replay TARGET FILE");
                    std::process::exit(2);
                };
                let input = std::fs::read(&file).unwrap_or_default();
                let run = TARGETS.iter().find(|(n, _)| *n == target).map(|t| t.1);
                run.map_or_else(|| eprintln!("unknown target {target}"), |f| f(&input));
                return;
            }
            name => names.push(name.to_string()),
        }
    }
    let mut ok = true;
    for (name, target) in TARGETS {
        if names.is_empty() || names.iter().any(|n| n == name) {
            ok &= fuzz(root, name, target, secs, seed);
            let _ = std::io::stderr().flush();
        }
    }
    std::process::exit(if ok { 0 } else { 1 });
}
