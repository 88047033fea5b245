//! A structured fuzzer that runs on stable Rust, inside the test suite (CI runs it).
//!
//! Each target mutates valid files generated with SQLite ([`seeds`]) with structure-aware
//! mutations ([`mutate`]) and checks that the partitioner never panics or hangs, that every
//! error names the file, and that whatever it accepts is consistent (leaves in range and
//! sorted, extents and ranges covering them, page locations inside the files, the census
//! agreeing with the plan, a second open seeing the same files).
//!
//! - `CORESCAN_FUZZ_SECS`: seconds per target (default 2; the libFuzzer targets in the
//!   repository's `fuzz/` directory are for longer runs on a machine with nightly Rust);
//! - `CORESCAN_FUZZ_SEED`: the base seed (default fixed, so runs are reproducible up to how
//!   many cases fit in the time);
//! - `CORESCAN_FUZZ_REPLAY=target:seed`: runs that one case (printed on failure);
//! - `CORESCAN_FUZZ_CORPUS=DIR`: the `write_seed_corpora` test writes the seeds there as
//!   libFuzzer corpora (`fuzz/seed.sh` does this).
//!
//! What the fuzzers found stays here as regression tests (the `regression_*` tests).

mod mutate;
mod seeds;

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use partitioner::create_table::parse_create_table;
use partitioner::sidecar::wal_path;
use partitioner::{Affinity, DbHeader, DefaultValue, Error, PageFile, PageLocation, TablePlan};
use testkit::Rng;

use crate::rng_from;
use mutate::{mutate_db, mutate_wal};
use seeds::{seeds, DbSeed};

/// A case that takes longer than this is reported as a hang.
const HANG: Duration = Duration::from_secs(30);

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn parse_seed(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The seed of case `n`: SplitMix64's output `n` golden gammas away from the base seed.
fn case_seed(base: u64, n: u64) -> u64 {
    testkit::mix64(base.wrapping_add(n.wrapping_mul(testkit::GOLDEN_GAMMA)))
}

enum Progress {
    Start(u64),
    Failed(u64, String),
    Done(u64, Outcomes),
}

/// Runs `case` (given a seed and a scratch directory) for `CORESCAN_FUZZ_SECS` seconds on a
/// worker thread, failing with the seed of any case that panics, fails its checks or hangs.
/// Returns how far its cases got ([`Outcomes`]), so a target can assert that its mutations
/// reached past the first checks (`None` when only a replay ran).
fn run(target: &'static str, case: fn(u64, &Path) -> Result<(), String>) -> Option<Outcomes> {
    let scratch = tempfile::tempdir().unwrap();
    if let Ok(replay) = std::env::var("CORESCAN_FUZZ_REPLAY") {
        if let Some((name, seed)) = replay.split_once(':') {
            if name == target {
                let seed = parse_seed(seed).expect("CORESCAN_FUZZ_REPLAY=target:seed");
                case(seed, scratch.path()).unwrap();
            }
            return None;
        }
    }
    let budget = Duration::from_secs_f64(env_f64("CORESCAN_FUZZ_SECS", 2.0).max(0.0));
    let base = std::env::var("CORESCAN_FUZZ_SEED")
        .ok()
        .and_then(|s| parse_seed(&s))
        .unwrap_or(0xC0_5CA7);
    let (tx, rx) = channel();
    let dir = scratch.path().to_path_buf();
    // Generate the seed files before the clock starts.
    seeds();
    std::thread::spawn(move || {
        let deadline = Instant::now() + budget;
        let mut n = 0;
        while n == 0 || Instant::now() < deadline {
            let seed = case_seed(base, n);
            let _ = tx.send(Progress::Start(seed));
            let outcome = catch_unwind(AssertUnwindSafe(|| case(seed, &dir)));
            let failure = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(what)) => Some(what),
                Err(panic) => Some(format!(
                    "panicked: {}",
                    panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                )),
            };
            if let Some(what) = failure {
                let _ = tx.send(Progress::Failed(seed, what));
                return;
            }
            n += 1;
        }
        let _ = tx.send(Progress::Done(n, OUTCOMES.with(Cell::get)));
    });
    let replay = |seed: u64| {
        format!(
            "replay: CORESCAN_FUZZ_REPLAY={target}:{seed:#x} cargo test -p partitioner --test \
             partitioner fuzz::{target}"
        )
    };
    let mut current = None;
    loop {
        match rx.recv_timeout(HANG) {
            Ok(Progress::Start(seed)) => current = Some(seed),
            Ok(Progress::Done(n, outcomes)) => {
                let [refused, census, accepted] = outcomes;
                eprintln!(
                    "fuzz {target}: {n} cases from base seed {base:#x}, no failure ({refused} \
                     inputs refused at the first checks, {census} later, {accepted} accepted)"
                );
                return Some(outcomes);
            }
            Ok(Progress::Failed(seed, what)) => {
                panic!("fuzz {target}: case {seed:#x}: {what}\n{}", replay(seed))
            }
            Err(RecvTimeoutError::Timeout) => {
                let seed = current.unwrap_or_default();
                panic!(
                    "fuzz {target}: case {seed:#x} hung for {HANG:?}\n{}",
                    replay(seed)
                )
            }
            Err(RecvTimeoutError::Disconnected) => panic!("fuzz {target}: the worker died"),
        }
    }
}

/// How far a target's inputs got: refused at the first checks (a file when opened or
/// planned), refused later (a file by the census), accepted.
type Outcomes = [u64; 3];

thread_local! {
    /// The outcomes of the cases run on this thread (each target runs on its own worker).
    static OUTCOMES: Cell<Outcomes> = const { Cell::new([0; 3]) };
}

fn count(outcome: usize) {
    OUTCOMES.with(|o| {
        let mut v = o.get();
        v[outcome] += 1;
        o.set(v);
    });
}

/// Asserts that a target's inputs were both refused and accepted: its mutations reach the
/// checks past the first ones, so the run tested more than the header check.
#[track_caller]
fn assert_reached_both(target: &str, outcomes: Option<Outcomes>) {
    if let Some([refused, later, accepted]) = outcomes {
        assert!(
            refused > 0 && accepted + later > 0,
            "fuzz {target}: {refused} refused at the first checks, {later} later, {accepted} \
             accepted: the mutations do not reach past the first checks"
        );
    }
}

/// `Ok` when `err` is one line naming `path`.
fn names_file(err: &Error, path: &Path) -> Result<(), String> {
    let text = err.to_string();
    if text.starts_with(&path.display().to_string()) && !text.contains('\n') {
        Ok(())
    } else {
        Err(format!("the error does not name the file: {text:?}"))
    }
}

/// Plans and censuses `table` in `db`, checking errors and the consistency of what is accepted.
fn exercise(db: &Path, table: &str) -> Result<(), String> {
    let named = |e: Error| names_file(&e, db);
    if let Err(e) = PageFile::open(db).and_then(|f| partitioner::schema::read_schema(&f)) {
        named(e)?;
    }
    let plan = match TablePlan::open(db, table) {
        Ok(plan) => plan,
        Err(e) => {
            count(0);
            return named(e);
        }
    };
    let h = &plan.header;
    let in_range = |p: &u32| (2..=h.page_count).contains(p);
    if !plan.leaves.windows(2).all(|w| w[0] < w[1]) || !plan.leaves.iter().all(in_range) {
        return Err(format!(
            "leaves unsorted or out of range: {:?}",
            plan.leaves
        ));
    }
    if plan
        .interior_pages
        .iter()
        .any(|p| plan.leaves.binary_search(p).is_ok())
    {
        return Err("a page is both a leaf and an interior page".into());
    }
    let extent_pages: u64 = plan.extents.iter().map(|e| u64::from(e.pages)).sum();
    let range_pages: u64 = plan.split(&[1, 2, 3]).iter().map(|r| r.pages()).sum();
    if extent_pages != plan.leaves.len() as u64 || range_pages != extent_pages {
        return Err("extents or ranges do not cover the leaves".into());
    }
    let wal_len = std::fs::metadata(wal_path(db)).map_or(0, |m| m.len());
    for &leaf in &plan.leaves {
        let (end, limit) = match plan.location(leaf) {
            PageLocation::Main(at) => (at + u64::from(h.page_size), h.file_size),
            PageLocation::Wal(at) => (at + u64::from(h.page_size), wal_len),
        };
        if end > limit {
            return Err(format!("page {leaf} located past the end of its file"));
        }
    }
    for column in &plan.table.columns {
        if let Err(e) = plan.column_default(column).and(plan.column_source(column)) {
            named(e)?;
        }
    }
    match plan.census() {
        Ok(c) if c.leaf_pages != plan.leaves.len() as u64 => {
            return Err("the census counts other leaves".into())
        }
        Ok(_) => count(2),
        Err(e) => {
            count(1);
            named(e)?
        }
    }
    plan.check_unchanged()
        .map_err(|e| format!("a second open saw other files: {e}"))
}

/// Writes `seed`'s files, as mutated, into `dir` and returns the database's path.
fn write_case(dir: &Path, db: &[u8], wal: &[u8]) -> std::path::PathBuf {
    let path = dir.join("case.db");
    std::fs::write(&path, db).unwrap();
    if wal.is_empty() {
        let _ = std::fs::remove_file(wal_path(&path));
    } else {
        std::fs::write(wal_path(&path), wal).unwrap();
    }
    path
}

fn pick<'a>(rng: &mut Rng, seeds: &[&'a DbSeed]) -> &'a DbSeed {
    seeds[rng.below(seeds.len() as u64) as usize]
}

fn header_case(seed: u64, _dir: &Path) -> Result<(), String> {
    let mut rng = rng_from(seed);
    let all: Vec<&DbSeed> = seeds().iter().collect();
    let s = pick(&mut rng, &all);
    let mut image = s.db.clone();
    mutate_db(&mut rng, &mut image, s.page_size());
    let bytes = &image[..image.len().min(100)];
    let size = match rng.below(5) {
        0 => rng.next_u64() >> rng.below(64),
        1 => rng.below(4096),
        2 => (1 + rng.below(5000)) * 512,
        _ => image.len() as u64,
    };
    let wal_pages = (rng.below(3) == 0).then(|| rng.next_u64() as u32 >> rng.below(32));
    let path = Path::new("fuzz-header.db");
    let header = match DbHeader::parse_with_wal(path, bytes, size, wal_pages) {
        Ok(h) => h,
        Err(e) => {
            count(0);
            return names_file(&e, path);
        }
    };
    count(2);
    if !(512..=65536).contains(&header.page_size) || !header.page_size.is_power_of_two() {
        return Err(format!("page size {} accepted", header.page_size));
    }
    if header.usable_size() < 480 {
        return Err("fewer than 480 usable bytes accepted".into());
    }
    let bytes_needed = u64::from(header.page_count) * u64::from(header.page_size);
    if wal_pages.is_none() && bytes_needed > size {
        return Err(format!(
            "{} pages accepted in {size} bytes",
            header.page_count
        ));
    }
    for page in [0, 1, 2, header.page_count, u32::MAX, rng.next_u64() as u32] {
        let _ = (header.unusable_page_reason(page), header.page_offset(page));
    }
    let _ = (header.lock_byte_page(), header.pending_byte_page());
    Ok(())
}

fn btree_case(seed: u64, dir: &Path) -> Result<(), String> {
    let mut rng = rng_from(seed);
    let all: Vec<&DbSeed> = seeds().iter().collect();
    let s = pick(&mut rng, &all);
    let mut db = s.db.clone();
    mutate_db(&mut rng, &mut db, s.page_size());
    // The WAL-mode seeds' files alone are valid databases too (their checkpointed state).
    let path = write_case(dir, &db, &[]);
    let table = if rng.below(8) == 0 { "u" } else { s.table };
    exercise(&path, table)
}

fn wal_case(seed: u64, dir: &Path) -> Result<(), String> {
    let mut rng = rng_from(seed);
    let with_log: Vec<&DbSeed> = seeds().iter().filter(|s| !s.wal.is_empty()).collect();
    let s = pick(&mut rng, &with_log);
    let mut wal = s.wal.clone();
    let db_pages = (s.db.len() / s.page_size()) as u32;
    mutate_wal(&mut rng, &mut wal, db_pages);
    let mut db = s.db.clone();
    if rng.below(8) == 0 {
        mutate_db(&mut rng, &mut db, s.page_size());
    }
    let path = write_case(dir, &db, &wal);
    exercise(&path, s.table)
}

/// Words, punctuation and literals `CREATE TABLE` statements are made of, edge cases first.
const VOCABULARY: &[&str] = &[
    "CREATE",
    "TABLE",
    "TEMP",
    "IF",
    "NOT",
    "EXISTS",
    "AS",
    "SELECT",
    "PRIMARY",
    "KEY",
    "INTEGER",
    "INT",
    "DECIMAL(15,2)",
    "REAL",
    "TEXT",
    "BLOB",
    "NUMERIC",
    "DEFAULT",
    "GENERATED",
    "ALWAYS",
    "STORED",
    "VIRTUAL",
    "WITHOUT",
    "ROWID",
    "STRICT",
    "CONSTRAINT",
    "UNIQUE",
    "CHECK",
    "FOREIGN",
    "REFERENCES",
    "COLLATE",
    "NOCASE",
    "DESC",
    "ASC",
    "NULL",
    "CURRENT_TIMESTAMP",
    "TRUE",
    "FALSE",
    "(",
    ")",
    ",",
    "+",
    "-",
    ".",
    ";",
    "\"q\"\"x\"",
    "[b r]",
    "`c``d`",
    "'s''t'",
    "x'ab'",
    "X'0'",
    "0x",
    "0x7fffffffffffffff",
    "0x8000000000000000",
    "0xFFFFFFFFFFFFFFFFF",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "1e999",
    "1e-999",
    "1_000",
    "1__0",
    ".5",
    "5.",
    "0.06",
    "00012",
    "'12abc'",
    "' 7 '",
    "'0x10'",
    "--c\n",
    "/* c */",
    "/*",
    "\"",
    "[",
    "'",
    "`",
    "é",
    "\u{1F600}",
    "\0",
    "e",
    "E+",
    "1e",
    "(((",
    ")))",
];

fn create_table_case(seed: u64, _dir: &Path) -> Result<(), String> {
    let mut rng = rng_from(seed);
    let mut sql = String::from(match rng.below(4) {
        0 => "",
        _ => "CREATE TABLE t(",
    });
    for _ in 0..rng.below(40) {
        let word = VOCABULARY[rng.below(VOCABULARY.len() as u64) as usize];
        sql.push_str(word);
        if rng.below(3) != 0 {
            sql.push(' ');
        }
    }
    if rng.below(20) == 0 {
        // Deep nesting, as a hostile schema may hold (SQLite itself stops at depth 1000).
        let depth = 1 + rng.below(200_000) as usize;
        let sign = ["", "-", "+"][rng.below(3) as usize];
        sql.push_str(&format!(
            "a DEFAULT {}1{}",
            format!("{sign}(").repeat(depth),
            ")".repeat(depth)
        ));
    }
    if rng.below(2) == 0 {
        sql.push(')');
    }
    let parsed = parse_create_table(&sql);
    count(if parsed.is_ok() { 2 } else { 0 });
    if let Ok(table) = parsed {
        for column in &table.columns {
            let affinity = Affinity::of_column(column, table.strict);
            let _ = DefaultValue::of_clause(column.default.as_ref(), affinity);
        }
        let _ = (
            table.rowid_alias(),
            table.record_position(rng.below(50) as usize),
        );
    }
    Ok(())
}

#[test]
fn header() {
    assert_reached_both("header", run("header", header_case));
}

#[test]
fn btree() {
    assert_reached_both("btree", run("btree", btree_case));
}

#[test]
fn wal() {
    assert_reached_both("wal", run("wal", wal_case));
}

#[test]
fn create_table() {
    assert_reached_both("create_table", run("create_table", create_table_case));
}

/// Writes the seed corpora into `CORESCAN_FUZZ_CORPUS` (what `fuzz/seed.sh` runs), or into a
/// scratch directory, and checks every target got inputs.
#[test]
fn write_seed_corpora() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = std::env::var_os("CORESCAN_FUZZ_CORPUS")
        .map_or_else(|| scratch.path().to_path_buf(), std::path::PathBuf::from);
    seeds::write_corpora(&dir);
    for target in ["header", "btree", "record", "wal"] {
        let inputs = std::fs::read_dir(dir.join(target)).unwrap().count();
        assert!(inputs > 0, "no {target} inputs under {}", dir.display());
    }
    eprintln!("wrote the seed corpora under {}", dir.display());
}

#[test]
fn the_seeds_are_valid() {
    let dir = tempfile::tempdir().unwrap();
    for s in seeds() {
        let path = write_case(dir.path(), &s.db, &s.wal);
        let plan = TablePlan::open(&path, s.table).unwrap_or_else(|e| panic!("{}: {e}", s.name));
        plan.census().unwrap();
        assert_eq!(plan.wal.is_some(), !s.wal.is_empty(), "{}", s.name);
    }
}

/// Found by `create_table`: a `DEFAULT` nested 100,000 levels deep (SQLite's own parser stops
/// at 1,000, but a hostile file can hold anything) overflowed the stack, aborting the process,
/// in both the clause parser and the evaluation of its signs. Both are loops now.
#[test]
fn regression_a_deeply_nested_default_does_not_overflow_the_stack() {
    for (open, depth, expected) in [
        ("(", 100_000, "Integer(7)"),
        ("+(", 100_000, "Integer(7)"),
        ("-(", 100_000, "Integer(7)"),
        ("-(", 100_001, "Integer(-7)"),
    ] {
        // `open` repeated, 7, and one `)` per `(`.
        let parens = open.matches('(').count() * depth;
        let sql = format!(
            "CREATE TABLE t(a INTEGER DEFAULT ({}7{}))",
            open.repeat(depth),
            ")".repeat(parens)
        );
        let table = parse_create_table(&sql).unwrap();
        let column = &table.columns[0];
        let value = DefaultValue::of_clause(
            column.default.as_ref(),
            Affinity::of_column(column, table.strict),
        )
        .unwrap();
        assert_eq!(format!("{value:?}"), expected, "{open} x {depth}");
    }
}
