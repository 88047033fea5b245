//! Live databases: scans while a real writer *process* (SQLite through rusqlite, started as
//! `corescan bench live-writer`) commits transactions that keep the Q6 answer invariant and
//! checkpoints aggressively, in WAL and rollback-journal mode, with every backend. Every scan
//! must answer, with the invariant's answer (a torn read shows as another revenue); the
//! writer must see no error and `PRAGMA integrity_check` must stay `ok`.
//!
//! The long run is `live::soak` (ignored by default):
//! `cargo test -p corescan --test integration live::soak -- --ignored --nocapture`.

use std::path::{Path, PathBuf};

use bench::experiments::live::{Journal, WriterOptions, WriterProcess};
use bench::oracle;
use engine::q6::Q6Params;
use rusqlite::Connection;
use serde_json::Value;

use crate::{corescan, scratch_dir, tiny_db};

/// A private copy of the tiny generated database (its journal mode is changed).
fn tiny_copy(name: &str) -> PathBuf {
    let db = scratch_dir(name).join("live.db");
    std::fs::copy(tiny_db(), &db).unwrap();
    db
}

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_corescan"))
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Runs `corescan bench live` and checks every tally and the writer's report.
fn live_run(db: &Path, scans: u32) {
    let run = corescan([
        "bench".as_ref(),
        "live".as_ref(),
        db.as_os_str(),
        "--scans".as_ref(),
        scans.to_string().as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(run.status, 0, "stderr: {}", run.stderr);
    let results = json(&run.stdout);
    let journals = results.as_array().unwrap();
    assert_eq!(journals.len(), 2, "both journal modes ran");
    for j in journals {
        let journal = j["journal"].as_str().unwrap();
        let protocol = if journal == "wal" {
            "wal-read-mark"
        } else {
            "rollback-shared"
        };
        let tallies = j["tallies"].as_array().unwrap();
        assert_eq!(tallies.len(), 4, "every backend ran: {j}");
        for t in tallies {
            let what = format!("{journal} / {}: {t}", t["backend"]);
            assert_eq!(t["answered"], scans, "{what}");
            assert_eq!(t["refused"], 0, "{what}");
            assert_eq!(t["wrong"], 0, "a torn read: {what}");
            assert_eq!(t["protocols"][protocol], scans, "{what}");
        }
        let w = &j["writer"];
        assert_eq!(w["errors"].as_array().unwrap().len(), 0, "writer: {w}");
        assert_eq!(w["integrity"], "ok", "writer: {w}");
        assert!(w["commits"].as_u64().unwrap() > 20, "writer: {w}");
        if journal == "wal" {
            assert!(w["checkpoints"].as_u64().unwrap() > 0, "writer: {w}");
        } else {
            // Every commit needs EXCLUSIVE, which each scan's SHARED lock holds off.
            assert!(w["wait_s"].as_f64().unwrap() > 0.0, "writer: {w}");
        }
    }
    let conn = Connection::open(db).unwrap();
    let ok: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}

#[test]
fn every_scan_answers_from_one_committed_state_while_a_writer_process_commits() {
    live_run(&tiny_copy("live-bench"), 8);
}

#[test]
#[ignore = "a long soak (100 scans per journal mode and backend); run it with --ignored"]
fn soak() {
    live_run(&tiny_copy("live-soak"), 100);
}

/// `corescan q6` and `explain` processes while the writer process commits.
fn commands_during_writes(journal: Journal) {
    let db = tiny_copy(&format!("live-cli-{}", journal.name()));
    bench::experiments::live::writer::set_journal_mode(&db, journal).unwrap();
    let expected = oracle::q6(&db, "lineitem", &Q6Params::default())
        .unwrap()
        .revenue();
    let opts = WriterOptions {
        journal,
        rate: 400,
        autocheckpoint: 4,
        checkpoint_every: 10,
    };
    let writer = WriterProcess::start(exe(), &db, &opts).unwrap();
    let protocol = match journal {
        Journal::Wal => "wal-read-mark",
        Journal::Delete => "rollback-shared",
    };
    for io in ["dma", "uring", "pread", "mmap"] {
        let run = corescan([
            "q6".as_ref(),
            db.as_os_str(),
            "--io".as_ref(),
            io.as_ref(),
            "--json".as_ref(),
        ]);
        assert_eq!(run.status, 0, "{io}: {}", run.stderr);
        let r = json(&run.stdout);
        assert_eq!(r["revenue"], expected.as_str(), "{io}: {r}");
        assert_eq!(r["snapshot"]["protocol"], protocol, "{io}: {r}");
        assert_eq!(r["snapshot"]["attempts"], 1, "{io}: {r}");
        // The general query path takes the same locks: Q6 as SQL, its report on stderr.
        let sql = bench::text::q6_sql(
            "lineitem",
            &Q6Params::default(),
            bench::text::Q6Select::Revenue,
        );
        let run = corescan([
            "query".as_ref(),
            db.as_os_str(),
            sql.as_ref(),
            "--io".as_ref(),
            io.as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            "--report".as_ref(),
        ]);
        assert_eq!(run.status, 0, "query {io}: {}", run.stderr);
        let rows = json(&run.stdout);
        let got = rows[0]["revenue"].as_f64().unwrap();
        let want: f64 = expected.parse().unwrap();
        assert!(
            (got - want).abs() <= want.abs() * 1e-12,
            "query {io}: {got} vs {want}"
        );
        let report = json(run.stderr.lines().last().unwrap());
        assert_eq!(
            report["snapshot"]["protocol"], protocol,
            "query {io}: {report}"
        );
    }
    let run = corescan(["explain".as_ref(), db.as_os_str(), "--json".as_ref()]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(json(&run.stdout)["snapshot"]["protocol"], protocol);
    let stats = writer.stop().unwrap();
    assert!(stats.errors.is_empty(), "{stats:?}");
    assert_eq!(stats.integrity, "ok");
    assert!(stats.commits > 0, "{stats:?}");
}

#[test]
fn q6_and_explain_processes_answer_while_a_wal_writer_commits() {
    commands_during_writes(Journal::Wal);
}

#[test]
fn q6_and_explain_processes_answer_while_a_rollback_journal_writer_commits() {
    commands_during_writes(Journal::Delete);
}

/// A WAL database whose log holds committed transactions, with its `-shm` index as the last
/// connection left it (copied while that connection was open): nobody holds the dead-man
/// switch, so the index is unreliable; and the same without an `-shm` at all.
#[test]
fn a_log_without_a_live_index_is_read_as_sqlite_reads_it_and_nothing_is_written() {
    let dir = scratch_dir("live-unreliable");
    let db = dir.join("src.db");
    std::fs::copy(tiny_db(), &db).unwrap();
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
         UPDATE LINEITEM SET L_DISCOUNT = 0.06 WHERE rowid % 7 = 0;
         INSERT INTO LINEITEM SELECT * FROM LINEITEM WHERE rowid % 5 = 0;",
    )
    .unwrap();
    let expected = oracle::q6_on(&conn, "LINEITEM", &Q6Params::default())
        .unwrap()
        .revenue();
    for (name, with_shm, protocol) in [
        ("unreliable", true, "wal-unreliable-shm"),
        ("no-shm", false, "verify-retry"),
    ] {
        let sub = dir.join(name);
        std::fs::create_dir_all(&sub).unwrap();
        let copy = sub.join("live.db");
        let mut suffixes = vec!["", "-wal"];
        if with_shm {
            suffixes.push("-shm");
        }
        let mut before = Vec::new();
        for s in &suffixes {
            let to = PathBuf::from(format!("{}{s}", copy.display()));
            std::fs::copy(format!("{}{s}", db.display()), &to).unwrap();
            before.push((to.clone(), std::fs::read(&to).unwrap()));
        }
        let run = corescan([
            "q6".as_ref(),
            copy.as_os_str(),
            "--io".as_ref(),
            "pread".as_ref(),
            "--json".as_ref(),
        ]);
        assert_eq!(run.status, 0, "{name}: {}", run.stderr);
        let r = json(&run.stdout);
        assert_eq!(r["revenue"], expected.as_str(), "{name}: {r}");
        assert_eq!(r["snapshot"]["protocol"], protocol, "{name}: {r}");
        if !with_shm {
            let notice = r["io"]["notice"].as_str().unwrap_or_default();
            assert!(
                notice.contains("snapshot:") && notice.contains("-shm"),
                "{r}"
            );
        }
        for (p, bytes) in &before {
            assert_eq!(&std::fs::read(p).unwrap(), bytes, "{} changed", p.display());
        }
        let names = std::fs::read_dir(&sub).unwrap().count();
        assert_eq!(names, suffixes.len(), "{name}: a file was created");
    }
    drop(conn);
}
