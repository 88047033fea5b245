//! Dropping a scan's handle frees its CPUs: the executors stop at their next read. One test
//! in its own binary, because [`engine::running_executors`] counts every scan of the process.

use std::path::Path;
use std::time::{Duration, Instant};

use engine::{IoBackend, IoChoice, Placement, ScanOptions};
use rusqlite::Connection;

/// How long the executors may take to stop after the handle is dropped.
const FREED_WITHIN: Duration = Duration::from_millis(50);

fn wait_until_idle(limit: Duration) -> Duration {
    let start = Instant::now();
    while engine::running_executors() > 0 {
        assert!(
            start.elapsed() < limit * 20,
            "executors still running after {:?}",
            start.elapsed()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    start.elapsed()
}

#[test]
fn a_dropped_handle_frees_its_cpus_within_50_ms() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("seam-cancel");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("big.db");
    let conn = Connection::open(&db).unwrap();
    // About 40 MB: long enough that no scan below finishes on its own within the test's window.
    conn.execute_batch(
        "PRAGMA journal_mode=OFF; CREATE TABLE u(id INTEGER PRIMARY KEY, k INTEGER, pad TEXT);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400000)
         INSERT INTO u SELECT i, i % 1000, printf('%.80c', 'x') FROM n;",
    )
    .unwrap();
    drop(conn);
    for io in [IoBackend::Dma, IoBackend::Pread, IoBackend::Mmap] {
        let options = ScanOptions {
            io: Some(IoChoice::Fixed(io)),
            ..ScanOptions::default()
        };
        for sql in [
            // Streamed: the executors wait on a full channel once the caller stops reading.
            "SELECT id, pad FROM u",
            // Collected: the executors are busy aggregating, nothing comes until the end.
            "SELECT k, count(*), sum(length(pad)) FROM u GROUP BY k",
            // Streamed but selective: no row for the caller to refuse, the executors scan on.
            "SELECT id FROM u WHERE pad = 'nothing'",
        ] {
            let spec = corescan_sql::scan_spec(&db, sql)
                .unwrap()
                .with_placement(Placement::Cores(2))
                .with_options(options);
            let mut scan = engine::scan(spec).unwrap();
            if sql.contains("id, pad") {
                assert!(scan.next().unwrap().is_ok());
            }
            // Let the executors get going.
            std::thread::sleep(Duration::from_millis(20));
            assert!(
                engine::running_executors() > 0,
                "{io} {sql}: the scan ended before it could be dropped; make the table larger"
            );
            drop(scan);
            let took = wait_until_idle(FREED_WITHIN);
            assert!(
                took <= FREED_WITHIN,
                "{io} {sql}: executors ran {took:?} after the drop"
            );
        }
    }
}
