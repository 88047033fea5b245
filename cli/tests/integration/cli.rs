//! The command line's error contract: one `error:` line naming the file, exit status 1;
//! usage errors exit 2; never a panic message.

use std::path::Path;

use crate::{corescan, corescan_in, scratch_dir, tiny_db};

#[test]
fn version_and_help() {
    let run = corescan(["--version"]);
    assert_eq!(run.status, 0);
    assert_eq!(
        run.stdout.trim(),
        format!("corescan {}", env!("CARGO_PKG_VERSION"))
    );
    let run = corescan(["--help"]);
    assert_eq!(run.status, 0);
    assert!(
        run.stdout.contains("gen") && run.stdout.contains("explain"),
        "{}",
        run.stdout
    );
    let run = corescan(["gen", "--help"]);
    assert!(
        run.status == 0 && run.stdout.contains("--scale-factor"),
        "{}",
        run.stdout
    );
}

#[test]
fn usage_errors_exit_2() {
    corescan(["frobnicate"]).assert_usage_error();
    // No subcommand: one line naming the subcommands, not the help text.
    for sub in [&[][..], &["bench"], &["topology"]] {
        let run = corescan(sub);
        run.assert_usage_error();
        assert!(run.stderr.contains("requires a subcommand"), "{run:?}");
    }
    corescan(["explain"]).assert_usage_error();
    corescan(["explain", "x.db", "--no-such-flag"]).assert_usage_error();
}

/// The options of `corescan SUB... --help` that take a value: `(long name, value name)`.
fn value_options(sub: &[&str]) -> Vec<String> {
    let run = corescan(sub.iter().copied().chain(["--help"]));
    assert_eq!(run.status, 0, "{run:?}");
    let mut names = Vec::new();
    for line in run.stdout.lines() {
        let line = line.trim_start();
        if !line.starts_with('-') {
            continue;
        }
        let Some(at) = line.find("--") else { continue };
        let mut words = line[at + 2..].split_whitespace();
        if let (Some(name), Some(value)) = (words.next(), words.next()) {
            if value.starts_with('<') && name != "help" {
                names.push(name.to_string());
            }
        }
    }
    names
}

#[test]
fn every_bad_option_value_is_one_usage_error_line() {
    // A path that cannot exist: if a bad value got past parsing, the run fails with status 1
    // (and the assertion names the option) instead of writing anything.
    let db = "/nonexistent/corescan/x.db";
    // Run in a scratch directory, so a relative output path taking a bad value writes nothing
    // here, and check it stays empty.
    let cwd = scratch_dir("cli-option-values");
    let subcommands: [&[&str]; 8] = [
        &["gen", db],
        &["explain", db],
        &["q6", db],
        &["topology", "detect"],
        &["bench", "scale", db],
        &["bench", "sweep", db],
        &["bench", "seed-report", db],
        &["bench", "compare", db],
    ];
    // Free-text options (names and paths), where any of the values below is acceptable.
    let free_text = ["table", "topology", "xml", "synthetic", "out", "output"];
    let mut checked = 0;
    for sub in subcommands {
        let help_path: Vec<&str> = sub.iter().copied().filter(|a| *a != db).collect();
        let options = value_options(&help_path);
        assert!(!options.is_empty(), "{sub:?} lists no options");
        for option in options.iter().filter(|o| !free_text.contains(&o.as_str())) {
            for value in ["-1", "-0.06", "not-a-value"] {
                let flag = format!("--{option}");
                let args = sub.iter().copied().chain([flag.as_str(), value]);
                let run = corescan_in(Some(&cwd), args, &[]);
                assert_eq!(run.status, 2, "{sub:?} {flag} {value}: {run:?}");
                run.assert_usage_error();
                assert!(
                    run.stderr.contains(&flag) && run.stderr.contains(value),
                    "{sub:?} {flag} {value}: {}",
                    run.stderr
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 60, "only {checked} option values checked");
    assert_eq!(
        std::fs::read_dir(&cwd).unwrap().count(),
        0,
        "a file was written"
    );
}

#[test]
fn the_issue_examples_are_one_line() {
    let db = "/nonexistent/corescan/x.db";
    let run = corescan(["q6", db, "--discount", "-0.06"]);
    run.assert_usage_error();
    assert!(
        run.stderr.contains("--discount") && run.stderr.contains("between 0.00 and 1.00"),
        "{}",
        run.stderr
    );
    let run = corescan(["q6", db, "--cores", "0"]);
    run.assert_usage_error();
    assert!(run.stderr.contains("--cores"), "{}", run.stderr);
    // A value given with `=` and an unknown option are one line too.
    corescan(["q6", db, "--discount=-0.06"]).assert_usage_error();
    corescan(["q6", db, "--no-such-option"]).assert_usage_error();
    corescan(["q6", db, "--io"]).assert_usage_error();
}

#[test]
fn missing_file() {
    let path = "/nonexistent/corescan/missing.db";
    corescan(["explain", path]).assert_error(&[path]);
}

#[test]
fn unknown_table() {
    let db = tiny_db();
    let run = corescan([
        "explain".as_ref(),
        db.as_os_str(),
        "--table=NO_SUCH_TABLE".as_ref(),
    ]);
    run.assert_error(&[db.to_str().unwrap(), "NO_SUCH_TABLE"]);
}

#[test]
fn not_a_database() {
    let dir = scratch_dir("cli-corrupt");
    let cases: [(&str, Vec<u8>); 3] = [
        (
            "text.db",
            b"this is not a database, just some text\n".repeat(200),
        ),
        ("short.db", b"SQLite format 3\0".to_vec()),
        ("directory.db", Vec::new()),
    ];
    for (name, bytes) in cases {
        let path = dir.join(name);
        if name == "directory.db" {
            std::fs::create_dir(&path).unwrap();
        } else {
            std::fs::write(&path, bytes).unwrap();
        }
        corescan(["explain".as_ref(), path.as_os_str()]).assert_error(&[path.to_str().unwrap()]);
    }
}

/// Copies the tiny database and damages it with `damage(bytes, page_size)`.
fn damaged_copy(name: &str, damage: impl FnOnce(&mut Vec<u8>, usize)) -> std::path::PathBuf {
    let path = scratch_dir(&format!("cli-{name}")).join(format!("{name}.db"));
    let mut bytes = std::fs::read(tiny_db()).unwrap();
    let page_size = usize::from(u16::from_be_bytes([bytes[16], bytes[17]]));
    damage(&mut bytes, page_size);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn lineitem_root(path: &Path) -> usize {
    let root: i64 = crate::open(path)
        .query_row(
            "SELECT rootpage FROM sqlite_schema WHERE name = 'LINEITEM'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    root as usize
}

#[test]
fn corrupt_files_name_the_file() {
    let root = lineitem_root(tiny_db());
    let cases = [
        // The root page's type byte is not a b-tree page type.
        damaged_copy("bad-root-type", |b, ps| b[(root - 1) * ps] = 0x42),
        // The root page's cell pointers point past the page.
        damaged_copy("bad-cell-pointer", |b, ps| {
            let at = (root - 1) * ps + 12;
            b[at] = 0xff;
            b[at + 1] = 0xff;
        }),
        // Truncated in the middle of the table.
        damaged_copy("truncated", |b, ps| b.truncate(b.len() / 2 / ps * ps)),
        // An impossible page size.
        damaged_copy("bad-page-size", |b, _| {
            b[16] = 0x03;
            b[17] = 0x00;
        }),
        // Damaged magic string.
        damaged_copy("bad-magic", |b, _| b[0] = b'X'),
    ];
    for path in cases {
        corescan(["explain".as_ref(), path.as_os_str()]).assert_error(&[path.to_str().unwrap()]);
    }
}

#[test]
fn print_sql_is_the_q6_text_every_engine_runs() {
    let db = tiny_db();
    let run = corescan([
        "q6".as_ref(),
        db.as_os_str(),
        "--print-sql".as_ref(),
        "--discount=0.07".as_ref(),
    ]);
    assert_eq!(run.status, 0, "{run:?}");
    let sql = run.stdout.trim();
    let params = engine::q6::Q6Params::parse("1994-01-01", "0.07", "24").unwrap();
    assert_eq!(
        sql,
        bench::text::q6_sql("LINEITEM", &params, bench::text::Q6Select::Revenue)
    );
    // SQLite running that text gives the oracle's answer (as a float).
    let revenue: f64 = crate::open(db).query_row(sql, [], |r| r.get(0)).unwrap();
    let exact = bench::oracle::q6(db, "LINEITEM", &params).unwrap();
    assert!(exact.rows_matched > 0);
    let want = exact.revenue_ten_thousandths as f64 / 10_000.0;
    assert!((revenue - want).abs() < 1e-6 * want, "{revenue} vs {want}");
}

/// corescan keeps hwloc from loading its I/O-discovery plugins (OpenCL, OpenGL, PCI: they pull in
/// libOpenCL and libX11, about 130 ms of a cold start), which it never asks for; a
/// `HWLOC_PLUGINS_BLACKLIST` the user sets wins. hwloc says what it loads when
/// `HWLOC_PLUGINS_VERBOSE` is set.
#[test]
fn hwloc_io_plugins_are_not_loaded_unless_the_user_asks() {
    let db = tiny_db();
    let args = ["q6".as_ref(), db.as_os_str(), "--cores=1".as_ref()];
    let verdicts = |env: &[(&str, &str)]| -> Vec<(String, bool)> {
        let run = crate::corescan_with_env(args, env);
        assert_eq!(run.status, 0, "{run:?}");
        let lines: Vec<&str> = run.stderr.lines().collect();
        // "Plugin dlforeach found `<dir>/hwloc_gl'", then "Plugin `hwloc_gl' is blacklisted ...".
        lines
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                let found = l.split("dlforeach found `").nth(1)?.trim_end_matches('\'');
                let name = found
                    .rsplit('/')
                    .next()?
                    .trim_end_matches(".so")
                    .to_string();
                let skipped = lines
                    .get(i + 1)
                    .is_some_and(|next| next.contains("is blacklisted"));
                Some((name, skipped))
            })
            .filter(|(name, _)| {
                ["hwloc_opencl", "hwloc_gl", "hwloc_pci", "hwloc_xml_libxml"]
                    .contains(&name.as_str())
            })
            .collect()
    };
    let ours = verdicts(&[("HWLOC_PLUGINS_VERBOSE", "1")]);
    assert!(
        !ours.is_empty(),
        "hwloc found none of its I/O plugins: is libhwloc-plugins installed (scripts/setup)?"
    );
    assert!(ours.iter().all(|(_, skipped)| *skipped), "{ours:?}");
    let theirs = verdicts(&[
        ("HWLOC_PLUGINS_VERBOSE", "1"),
        ("HWLOC_PLUGINS_BLACKLIST", "hwloc_pci"),
    ]);
    for (name, skipped) in &theirs {
        assert_eq!(*skipped, name == "hwloc_pci", "{theirs:?}");
    }
}

/// With hwloc's libxml2 plugin left out, an XML machine description is still read (by hwloc's
/// built-in XML code) and planned exactly as the machine it was exported from.
#[test]
fn an_hwloc_xml_machine_is_read_without_the_libxml_plugin() {
    let dir = crate::scratch_dir("hwloc-xml");
    let xml = dir.join("this-machine.xml");
    let export = partitioner::topology::MachineSource::ThisMachine
        .export_xml()
        .unwrap();
    std::fs::write(&xml, export).unwrap();
    let detect = |args: &[&std::ffi::OsStr]| {
        let run = crate::corescan_with_env(args, &[("HWLOC_PLUGINS_VERBOSE", "1")]);
        assert_eq!(run.status, 0, "{run:?}");
        assert!(
            run.stderr.contains("hwloc_xml_libxml' is blacklisted"),
            "the libxml plugin was loaded: {}",
            run.stderr
        );
        // Everything but where the description came from and what only this machine tells
        // (its CPU model and memory, from sysinfo).
        run.stdout
            .lines()
            .filter(|l| {
                !["#", "source =", "cpu_model =", "memory_bytes ="]
                    .iter()
                    .any(|p| l.starts_with(p))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let from_xml = detect(&[
        "topology".as_ref(),
        "detect".as_ref(),
        "--xml".as_ref(),
        xml.as_os_str(),
    ]);
    let here = detect(&["topology".as_ref(), "detect".as_ref()]);
    assert!(from_xml.contains("[[executor]]"), "{from_xml}");
    assert_eq!(from_xml, here);
}

/// A database whose table and column names carry an ESC sequence (it would turn the terminal
/// red) and a newline (it would forge a second line): every error line shows them as escapes,
/// on one line, whichever command and error reaches them.
#[test]
fn names_from_a_hostile_file_are_escaped_in_error_lines() {
    let dir = crate::scratch_dir("hostile-names");
    let db = dir.join("hostile.db");
    let table = "ev\x1b[31mil\nname";
    let column = "co\x1b[1ml\nx";
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE \"{table}\"(\"{column}\" INTEGER, b TEXT); \
         INSERT INTO \"{table}\" VALUES (1, 'x');"
    ))
    .unwrap();
    drop(conn);
    let db = db.to_str().unwrap();
    let shown_table = r"ev\u{1b}[31mil\nname";
    let shown_column = r"co\u{1b}[1ml\nx";
    let check = |args: &[&str], needles: &[&str]| {
        let run = corescan(args);
        run.assert_error(needles);
        assert!(
            !run.stderr.contains('\x1b'),
            "{args:?}: raw ESC in {:?}",
            run.stderr
        );
    };
    // A missing table: the message lists the file's tables.
    check(
        &["query", db, "SELECT * FROM missing"],
        &["missing", shown_table],
    );
    check(&["explain", db, "--table", "missing"], &[shown_table]);
    check(&["q6", db], &["lineitem", shown_table]);
    // Wrong columns: Q6's are missing, and the message lists the table's.
    check(
        &["q6", db, "--table", table],
        &["l_quantity", shown_table, shown_column],
    );
    let select = format!("SELECT nope FROM \"{table}\"");
    check(&["query", db, &select], &["no such column: nope"]);
}

/// A row whose evaluation fails is SQLite's message, with the file, page and rowid that hold
/// the row: one line, like every error.
#[test]
fn a_failing_row_names_its_page_and_rowid() {
    let dir = crate::scratch_dir("failing-row");
    let db = dir.join("t.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE t(a INTEGER); INSERT INTO t(rowid, a) VALUES (1, 1), (2, 2);
         INSERT INTO t(rowid, a) VALUES (3, -9223372036854775807 - 1), (4, 4);",
    )
    .unwrap();
    let sql = "SELECT abs(a) FROM t";
    let sqlite = conn
        .prepare(sql)
        .unwrap()
        .query_map([], |r| r.get::<_, i64>(0))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap_err();
    assert!(sqlite.to_string().contains("integer overflow"), "{sqlite}");
    // Page 2 is the table's one leaf (page 1 holds the schema).
    let db = db.to_str().unwrap();
    corescan(["query", db, sql])
        .assert_error(&[&format!("{db}: page 2: rowid 3: integer overflow")]);
}

/// Starts `corescan ARGS` with its output into a pipe, reads its first line, closes the pipe
/// (as `| head -1` does), and returns the exit status and stderr.
pub fn closed_after_one_line(args: &[&str]) -> (Option<i32>, String) {
    use std::io::{BufRead, Read};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_corescan"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start corescan");
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().expect("its stdout"))
        .read_line(&mut first)
        .expect("its first line");
    assert!(!first.is_empty(), "{args:?} wrote nothing");
    // The reader (and the pipe's read end) is dropped here.
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("its stderr")
        .read_to_string(&mut stderr)
        .expect("its stderr");
    let status = child.wait().expect("corescan ends");
    (status.code(), stderr)
}

/// `corescan query ... | head -1` ends quietly with status 0, as `sqlite3` does, in every
/// output mode (the rows are more than a pipe holds, so a write fails after the reader left);
/// a write that fails otherwise is one error line.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let db = tiny_db().to_str().unwrap().to_string();
    for format in ["csv", "json", "jsonl", "line"] {
        let (status, stderr) =
            closed_after_one_line(&["query", &db, "SELECT * FROM lineitem", "--format", format]);
        assert_eq!(status, Some(0), "{format}: {stderr}");
        assert_eq!(stderr, "", "{format}");
    }
    if Path::new("/dev/full").exists() {
        let out = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let run = std::process::Command::new(env!("CARGO_BIN_EXE_corescan"))
            .args(["query", &db, "SELECT * FROM lineitem", "--format", "csv"])
            .stdout(out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.starts_with("error: writing the result: No space left on device")
                && stderr.lines().count() == 1,
            "{stderr}"
        );
    } else {
        eprintln!("SKIPPED the /dev/full half: no /dev/full here");
    }
}
