//! Damaged files under every backend: each ends within seconds with one error naming the page,
//! never a hang (the `uring` backend once waited forever on its drop for completions it had
//! already reaped). The files are planned first and damaged after, so that the damage reaches
//! the scan rather than the planner.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use engine::q6::{run_q6, Q6Params};
use engine::{spread, Error, ExecutorSpec, IoBackend, IoChoice, ScanSettings, SqpollMode};
use partitioner::TablePlan;

use crate::fixture::{make_lineitem, test_dir};

/// How long one damaged scan may take before it counts as a hang.
const HANG: Duration = Duration::from_secs(20);

/// One configuration a damaged file must fail under.
#[derive(Clone)]
pub struct Config {
    /// What the configuration is called in messages.
    pub name: &'static str,
    /// How it reads.
    pub settings: ScanSettings,
    /// Its executors.
    pub executors: Vec<ExecutorSpec>,
}

/// Every backend: `dma`, `uring` with readahead 0 and the default, `uring` with SQPOLL on (one
/// executor, so that the other CPU is idle), `pread`, `mmap`.
pub fn every_backend(page_size: u32) -> Vec<Config> {
    let fixed = |io, readahead| ScanSettings {
        io: IoChoice::Fixed(io),
        readahead,
        ..ScanSettings::defaults(page_size)
    };
    let default = ScanSettings::defaults(page_size).readahead;
    let two = spread(2);
    vec![
        Config {
            name: "dma",
            settings: fixed(IoBackend::Dma, default),
            executors: two.clone(),
        },
        Config {
            name: "uring, readahead 0",
            settings: fixed(IoBackend::Uring, 0),
            executors: two.clone(),
        },
        Config {
            name: "uring",
            settings: fixed(IoBackend::Uring, default),
            executors: two.clone(),
        },
        Config {
            name: "uring, SQPOLL on",
            settings: ScanSettings {
                sqpoll: SqpollMode::On,
                ..fixed(IoBackend::Uring, default)
            },
            executors: spread(1),
        },
        Config {
            name: "pread",
            settings: fixed(IoBackend::Pread, default),
            executors: two.clone(),
        },
        Config {
            name: "mmap",
            settings: fixed(IoBackend::Mmap, default),
            executors: two,
        },
    ]
}

/// Runs Q6 on another thread and gives up after [`HANG`], so a hang fails the test instead of
/// blocking the suite.
pub fn run_with_timeout(
    plan: &TablePlan,
    config: &Config,
) -> Result<engine::Result<engine::q6::Q6Report>, String> {
    let (tx, rx) = mpsc::channel();
    let (plan, executors, settings) = (plan.clone(), config.executors.clone(), config.settings);
    std::thread::spawn(move || {
        let _ = tx.send(run_q6(&plan, &executors, &Q6Params::default(), &settings));
    });
    rx.recv_timeout(HANG)
        .map_err(|_| format!("{}: no answer after {HANG:?} (hung)", config.name))
}

/// Asserts that a scan of `plan` (made before the damage) fails under every backend with one
/// error naming page `victim`.
pub fn assert_every_backend_names(plan: &TablePlan, victim: u32, what: &str) {
    for config in every_backend(4096) {
        let ctx = format!("{what}, {}", config.name);
        let outcome = run_with_timeout(plan, &config).unwrap_or_else(|e| panic!("{what}: {e}"));
        let err = match outcome {
            Ok(r) => panic!("{ctx}: answered {} instead of failing", r.revenue),
            Err(e) => e,
        };
        if let Error::Config(why) = &err {
            // Only SQPOLL on a machine without an idle CPU may be refused up front.
            assert!(
                config.settings.sqpoll == SqpollMode::On && why.contains("idle CPU"),
                "{ctx}: {err}"
            );
            continue;
        }
        let text = err.to_string();
        assert!(
            matches!(err, Error::Corrupt { page, .. } if page == victim),
            "{ctx}: {text}"
        );
        assert!(!text.contains('\n'), "{ctx}: one line: {text}");
        assert!(text.contains(&format!("page {victim}")), "{ctx}: {text}");
    }
}

/// Damages leaf page `victim` of `path` as `what` says.
fn damage_leaf(path: &Path, victim: u32, what: &str) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let base = u64::from(victim - 1) * 4096;
    let mut page = vec![0u8; 4096];
    f.read_exact_at(&mut page, base).unwrap();
    match what {
        "bad page type" => page[0] = 0x42,
        "cell count larger than the page" => page[3..5].copy_from_slice(&[0xff, 0xff]),
        "cell pointer outside the page" => page[8..10].copy_from_slice(&0xfff0u16.to_be_bytes()),
        "huge record header" => {
            // The first cell: payload size and rowid varints, then the record header's size.
            let cell = usize::from(u16::from_be_bytes([page[8], page[9]]));
            let mut at = cell;
            for _ in 0..2 {
                while page[at] & 0x80 != 0 {
                    at += 1;
                }
                at += 1;
            }
            page[at..at + 5].copy_from_slice(&[0x8f, 0xff, 0xff, 0xff, 0x7f]);
        }
        other => panic!("unknown damage {other}"),
    }
    f.write_all_at(&page, base).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn damaged_leaf_pages_fail_under_every_backend_without_hanging() {
    for (i, what) in [
        "bad page type",
        "cell count larger than the page",
        "cell pointer outside the page",
        "huge record header",
    ]
    .into_iter()
    .enumerate()
    {
        let dir = test_dir(&format!("damaged-{i}"));
        let path = dir.join("li.db");
        make_lineitem(&path, 5_000, 4096);
        let plan = TablePlan::open(&path, "lineitem").unwrap();
        // Early in the first range, so that reads after it are in flight when it fails.
        let victim = plan.leaves[2];
        damage_leaf(&path, victim, what);
        assert_every_backend_names(&plan, victim, what);
    }
}

/// A table whose Q6 columns come after a long comment, so every row's needed columns are on
/// its overflow pages (three per row at 4 KiB pages).
fn make_overflowing_lineitem(path: &Path, rows: u32) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA page_size=4096; PRAGMA journal_mode=OFF;
         CREATE TABLE lineitem (l_comment TEXT, l_quantity INTEGER, l_extendedprice REAL,
           l_discount REAL, l_shipdate TEXT);",
    )
    .unwrap();
    let mut stmt = conn
        .prepare("INSERT INTO lineitem VALUES (?1, 10, 1000.5, 0.06, '1994-03-01')")
        .unwrap();
    for i in 0..rows {
        stmt.execute([format!("{i:05}").repeat(2_000)]).unwrap();
    }
}

/// The first overflow page of the first cell of leaf page `leaf`.
fn first_overflow(path: &Path, leaf: u32) -> u32 {
    let f = std::fs::File::open(path).unwrap();
    let mut page = vec![0u8; 4096];
    f.read_exact_at(&mut page, u64::from(leaf - 1) * 4096)
        .unwrap();
    let cell = usize::from(u16::from_be_bytes([page[8], page[9]]));
    partitioner::cell::TableLeafCell::parse(&page, cell, 4096)
        .unwrap()
        .first_overflow
        .expect("the fixture's rows spill")
}

/// Sets the next-page pointer of overflow page `page` of `path`.
fn point_overflow_page(path: &Path, page: u32, next: u32) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&next.to_be_bytes(), u64::from(page - 1) * 4096)
        .unwrap();
    f.sync_all().unwrap();
}

#[test]
fn overflow_chains_that_loop_or_leave_the_file_fail_under_every_backend() {
    let dir = test_dir("overflow-chains");
    let path = dir.join("li.db");
    make_overflowing_lineitem(&path, 40);
    let sound = TablePlan::open(&path, "lineitem").unwrap();
    // The fixture is sound and really needs its chains: SQLite's answer, 40 rows matched.
    let r = run_q6(
        &sound,
        &spread(1),
        &Q6Params::default(),
        &ScanSettings::defaults(4096),
    )
    .unwrap();
    assert_eq!((r.rows_matched, r.revenue.as_str()), (40, "2401.2000"));
    assert!(
        r.overflow_pages_read >= 80,
        "{} overflow pages",
        r.overflow_pages_read
    );

    let leaf = sound.leaves[sound.leaves.len() / 2];
    let first = first_overflow(&path, leaf);
    let cases = [
        // A cycle: the first overflow page points to itself.
        (first, "overflow chain that loops", "already in use"),
        // Past the end of the file.
        (0x00ff_ffff, "overflow chain past the end", "past the end"),
        // Page 1, the schema root.
        (1, "overflow chain into page 1", "page 1"),
    ];
    for (next, what, says) in cases {
        point_overflow_page(&path, first, next);
        assert_every_backend_names(&sound, first, what);
        // The one error says what is wrong with the chain.
        let err = run_q6(
            &sound,
            &spread(1),
            &Q6Params::default(),
            &ScanSettings::defaults(4096),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(says), "{what}: {err}");
    }
}

/// A leaf-parent page of `path` (4 KiB pages) made a leaf, after the scan was planned: the
/// executor reading it says so, the others stop or finish, and nobody waits at the start gate
/// for it (a cold scan's executors wait for each other's parents before their leaves).
#[test]
fn a_damaged_leaf_parent_read_by_an_executor_fails_under_every_backend() {
    let dir = test_dir("damaged-parent");
    let path = dir.join("li.db");
    make_lineitem(&path, 20_000, 4096);
    let mut plan = TablePlan::open_for_scan(&path, "lineitem").unwrap();
    let parents = plan
        .leaf_parents
        .as_mut()
        .map(|p| {
            p.set_min_parents_per_share(1);
            p.pages().to_vec()
        })
        .expect("a table deep enough to leave its leaf-parent level to the scan");
    assert!(parents.len() >= 2, "{} parents", parents.len());
    // The first parent of each executor's share in turn (two executors, or one with SQPOLL).
    for victim in [parents[0], parents[parents.len() - 1]] {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let at = u64::from(victim - 1) * 4096;
        let mut kind = [0u8];
        f.read_exact_at(&mut kind, at).unwrap();
        assert_eq!(kind[0], 0x05, "page {victim} is an interior table page");
        f.write_all_at(&[0x0d], at).unwrap();
        f.sync_all().unwrap();
        for config in every_backend(4096) {
            let ctx = format!("parent {victim} made a leaf, {}", config.name);
            let started = std::time::Instant::now();
            let outcome = run_with_timeout(&plan, &config).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            // The failed executor arrived at the gate as it failed: nobody waited the gate's
            // 2 s limit for it.
            let took = started.elapsed();
            assert!(took < Duration::from_millis(1500), "{ctx}: {took:?}");
            let err = match outcome {
                Ok(r) => panic!("{ctx}: answered {} instead of failing", r.revenue),
                Err(Error::Config(why)) if config.settings.sqpoll == SqpollMode::On => {
                    assert!(why.contains("idle CPU"), "{ctx}: {why}");
                    continue;
                }
                Err(e) => e,
            };
            let text = err.to_string();
            assert!(
                matches!(&err, Error::Plan(e) if e.page() == Some(victim)),
                "{ctx}: {text}"
            );
            assert!(
                text.starts_with(&path.display().to_string()),
                "{ctx}: {text}"
            );
            assert!(text.contains("same depth"), "{ctx}: {text}");
            assert!(!text.contains('\n'), "{ctx}: one line: {text}");
        }
        f.write_all_at(&[0x05], at).unwrap();
        f.sync_all().unwrap();
    }
    // Repaired, the same plan scans: the damage, not the plan, made it fail.
    let r = run_q6(
        &plan,
        &spread(2),
        &Q6Params::default(),
        &ScanSettings::defaults(4096),
    );
    assert!(r.is_ok(), "{r:?}");
}
