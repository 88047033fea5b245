//! `corescan gen` and `bench::gen::generate`.

use std::path::Path;

use bench::gen::{generate, partial_path, GenError, GenOptions, TableSelection};
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator,
    PartSuppGenerator, RegionGenerator, SupplierGenerator,
};

use crate::{corescan, open, tiny_db, TINY_SF};

fn count(path: &Path, table: &str) -> u64 {
    let n: i64 = open(path)
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap();
    n as u64
}

fn tpchgen_count(table: &str, sf: f64) -> u64 {
    (match table {
        "REGION" => RegionGenerator::new(sf, 1, 1).iter().count(),
        "NATION" => NationGenerator::new(sf, 1, 1).iter().count(),
        "PART" => PartGenerator::new(sf, 1, 1).iter().count(),
        "SUPPLIER" => SupplierGenerator::new(sf, 1, 1).iter().count(),
        "PARTSUPP" => PartSuppGenerator::new(sf, 1, 1).iter().count(),
        "CUSTOMER" => CustomerGenerator::new(sf, 1, 1).iter().count(),
        "ORDERS" => OrderGenerator::new(sf, 1, 1).iter().count(),
        "LINEITEM" => LineItemGenerator::new(sf, 1, 1).iter().count(),
        _ => unreachable!(),
    }) as u64
}

/// Hundredths from SQLite's text form of a stored decimal (`24`, `0.07`, `17954.5`).
fn hundredths(text: &str) -> i64 {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let frac = format!("{frac:0<2}");
    assert!(frac.len() == 2, "{text} has more than two decimals");
    int.parse::<i64>().unwrap() * 100 + frac.parse::<i64>().unwrap()
}

#[test]
fn lineitem_only_row_count_matches_tpchgen() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("li.db");
    let mut opts = GenOptions::new(&out);
    opts.scale_factor = 0.003;
    opts.tables = TableSelection::Lineitem;
    let summary = generate(&opts, false).unwrap();
    let expected = tpchgen_count("LINEITEM", 0.003);
    assert!(expected > 10_000, "{expected}");
    assert_eq!(summary.rows("lineitem"), Some(expected));
    assert_eq!(count(&out, "LINEITEM"), expected);
    let tables: Vec<String> = open(&out)
        .prepare("SELECT name FROM sqlite_schema")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(tables, ["LINEITEM"]);
    assert_eq!(summary.file_size, std::fs::metadata(&out).unwrap().len());
    assert!(!partial_path(&out).exists());
}

#[test]
fn all_tables_row_counts_match_tpchgen() {
    let db = tiny_db();
    let mut total = 0;
    for table in [
        "REGION", "NATION", "PART", "SUPPLIER", "PARTSUPP", "CUSTOMER", "ORDERS", "LINEITEM",
    ] {
        assert_eq!(count(db, table), tpchgen_count(table, TINY_SF), "{table}");
        total += count(db, table);
    }
    // The progress bar's estimate is exact but for LINEITEM (four lines per order on average).
    let estimate = bench::gen::estimated_rows(TINY_SF, TableSelection::All);
    assert!(
        estimate.abs_diff(total) * 100 < total,
        "estimate {estimate}, rows {total}"
    );
}

#[test]
fn schema_is_the_common_tpch_layout() {
    let conn = open(tiny_db());
    let mut stmt = conn
        .prepare("SELECT name, type, pk FROM pragma_table_info('LINEITEM')")
        .unwrap();
    let cols: Vec<(String, String, i64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let names: Vec<&str> = cols.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "L_ORDERKEY",
            "L_PARTKEY",
            "L_SUPPKEY",
            "L_LINENUMBER",
            "L_QUANTITY",
            "L_EXTENDEDPRICE",
            "L_DISCOUNT",
            "L_TAX",
            "L_RETURNFLAG",
            "L_LINESTATUS",
            "L_SHIPDATE",
            "L_COMMITDATE",
            "L_RECEIPTDATE",
            "L_SHIPINSTRUCT",
            "L_SHIPMODE",
            "L_COMMENT"
        ]
    );
    for (name, decl, pk) in &cols {
        assert_eq!(*pk, 0, "{name} is part of a primary key");
        let expected = match name.as_str() {
            "L_QUANTITY" | "L_EXTENDEDPRICE" | "L_DISCOUNT" | "L_TAX" => "DECIMAL(15,2)",
            "L_SHIPDATE" | "L_COMMITDATE" | "L_RECEIPTDATE" => "DATE",
            n if n.ends_with("KEY") || n == "L_LINENUMBER" => "INTEGER",
            _ => "",
        };
        if !expected.is_empty() {
            assert_eq!(decl, expected, "{name}");
        } else {
            assert!(
                decl.starts_with("CHAR(") || decl.starts_with("VARCHAR("),
                "{name} {decl}"
            );
        }
    }
}

#[test]
fn decimals_are_integer_or_real_and_dates_are_text() {
    let conn = open(tiny_db());
    let types = |col: &str| -> Vec<String> {
        conn.prepare(&format!(
            "SELECT DISTINCT typeof({col}) FROM LINEITEM ORDER BY 1"
        ))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    };
    assert_eq!(types("L_EXTENDEDPRICE"), ["integer", "real"]);
    assert_eq!(types("L_DISCOUNT"), ["integer", "real"]);
    assert_eq!(types("L_TAX"), ["integer", "real"]);
    assert_eq!(types("L_QUANTITY"), ["integer"]);
    for date in ["L_SHIPDATE", "L_COMMITDATE", "L_RECEIPTDATE"] {
        assert_eq!(types(date), ["text"]);
        let malformed: i64 = conn
            .query_row(
                &format!(
                    "SELECT count(*) FROM LINEITEM
                     WHERE {date} NOT GLOB '[12][0-9][0-9][0-9]-[01][0-9]-[0-3][0-9]'"
                ),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(malformed, 0, "{date}");
    }
    // A whole price is an integer, a fractional one the nearest double.
    let (whole, frac): (i64, i64) = conn
        .query_row(
            "SELECT sum(typeof(L_EXTENDEDPRICE) = 'integer' AND L_EXTENDEDPRICE = round(L_EXTENDEDPRICE)),
                    sum(typeof(L_EXTENDEDPRICE) = 'real' AND L_EXTENDEDPRICE <> round(L_EXTENDEDPRICE))
             FROM LINEITEM",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(whole + frac, tpchgen_count("LINEITEM", TINY_SF) as i64);
}

#[test]
fn stored_values_equal_the_generated_ones() {
    let conn = open(tiny_db());
    let mut stmt = conn
        .prepare(
            "SELECT L_ORDERKEY, L_LINENUMBER, CAST(L_QUANTITY AS TEXT),
                    CAST(L_EXTENDEDPRICE AS TEXT), CAST(L_DISCOUNT AS TEXT), CAST(L_TAX AS TEXT),
                    L_SHIPDATE, L_COMMITDATE, L_RECEIPTDATE, L_COMMENT
             FROM LINEITEM ORDER BY rowid",
        )
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    for g in LineItemGenerator::new(TINY_SF, 1, 1).iter() {
        let r = rows.next().unwrap().expect("as many rows as generated");
        assert_eq!(r.get::<_, i64>(0).unwrap(), g.l_orderkey);
        assert_eq!(r.get::<_, i64>(1).unwrap(), i64::from(g.l_linenumber));
        assert_eq!(
            hundredths(&r.get::<_, String>(2).unwrap()),
            g.l_quantity * 100
        );
        assert_eq!(
            hundredths(&r.get::<_, String>(3).unwrap()),
            g.l_extendedprice.0
        );
        assert_eq!(hundredths(&r.get::<_, String>(4).unwrap()), g.l_discount.0);
        assert_eq!(hundredths(&r.get::<_, String>(5).unwrap()), g.l_tax.0);
        assert_eq!(r.get::<_, String>(6).unwrap(), g.l_shipdate.to_string());
        assert_eq!(r.get::<_, String>(7).unwrap(), g.l_commitdate.to_string());
        assert_eq!(r.get::<_, String>(8).unwrap(), g.l_receiptdate.to_string());
        assert_eq!(r.get::<_, String>(9).unwrap(), g.l_comment);
    }
    assert!(rows.next().unwrap().is_none(), "more rows than generated");
}

#[test]
fn page_size_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    for ps in [512u32, 65536] {
        let out = dir.path().join(format!("p{ps}.db"));
        let run = corescan([
            "gen".as_ref(),
            out.as_os_str(),
            "--scale-factor=0.0005".as_ref(),
            "--tables=lineitem".as_ref(),
            format!("--page-size={ps}").as_ref(),
        ]);
        assert_eq!(run.status, 0, "{}", run.stderr);
        assert!(run.stdout.contains("LINEITEM"), "{}", run.stdout);
        let got: u32 = open(&out)
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        assert_eq!(got, ps);
        assert_eq!(std::fs::metadata(&out).unwrap().len() % u64::from(ps), 0);
    }
}

#[test]
fn refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("exists.db");
    std::fs::write(&out, b"precious").unwrap();
    let args = |force: bool| {
        let mut a = vec![
            "gen".into(),
            out.clone().into_os_string(),
            "-s".into(),
            "0.0005".into(),
        ];
        if force {
            a.push("--force".into());
        }
        a
    };
    let run = corescan(args(false));
    run.assert_error(&[out.to_str().unwrap(), "already exists", "--force"]);
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");

    let err = generate(&GenOptions::new(&out), false).unwrap_err();
    assert!(matches!(err, GenError::Exists(_)), "{err}");

    let run = corescan(args(true));
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(count(&out, "LINEITEM") > 0);
    assert!(!partial_path(&out).exists());
}

#[test]
fn a_stale_partial_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.db");
    std::fs::write(partial_path(&out), b"left over by an interrupted run").unwrap();
    let run = corescan([
        "gen".as_ref(),
        out.as_os_str(),
        "--scale-factor=0.0005".as_ref(),
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(count(&out, "ORDERS") > 0);
    assert!(!partial_path(&out).exists());
}

#[test]
fn bad_scale_factors_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.db");
    // Out of range or not a number: usage errors (exit 2, one line naming the option).
    for sf in ["0", "-1", "-0.5", "nan", "inf", "0.0", "abc", "", "1x"] {
        let run = corescan([
            "gen".as_ref(),
            out.as_os_str(),
            "--scale-factor".as_ref(),
            sf.as_ref(),
        ]);
        run.assert_usage_error();
        assert!(run.stderr.contains("--scale-factor"), "{}", run.stderr);
    }
    assert!(!out.exists() && !partial_path(&out).exists());
}

#[test]
fn bad_page_sizes_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.db");
    for ps in ["0", "256", "1000", "4097", "131072", "big", "-4096", "4k"] {
        let run = corescan([
            "gen".as_ref(),
            out.as_os_str(),
            "--page-size".as_ref(),
            ps.as_ref(),
        ]);
        run.assert_usage_error();
        assert!(
            run.stderr.contains("--page-size") && run.stderr.contains(ps),
            "{}",
            run.stderr
        );
    }
    let run = corescan(["gen".as_ref(), out.as_os_str(), "--tables=orders".as_ref()]);
    run.assert_usage_error();
    assert!(!out.exists() && !partial_path(&out).exists());
}

#[test]
fn unwritable_destination_names_the_file_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("no-such-dir").join("x.db");
    let run = corescan([
        "gen".as_ref(),
        out.as_os_str(),
        "--scale-factor=0.0005".as_ref(),
    ]);
    run.assert_error(&["no-such-dir"]);
    assert!(!partial_path(&out).exists());
}

#[test]
fn an_interrupted_run_leaves_no_finished_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("killed.db");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_corescan"))
        .args([
            "gen".as_ref(),
            out.as_os_str(),
            "--scale-factor=0.5".as_ref(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !partial_path(&out).exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        partial_path(&out).exists(),
        "the run was interrupted while writing"
    );
    assert!(!out.exists(), "an interrupted run must not leave OUT.db");
}

#[test]
fn shards_hold_the_whole_database_and_q6_over_them_is_its_answer() {
    let dir = crate::scratch_dir("gen-shards");
    let out = dir.join("t.db");
    let run = corescan([
        "gen",
        out.to_str().unwrap(),
        "--scale-factor",
        &TINY_SF.to_string(),
        "--shards",
        "3",
        "--force",
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let shards: Vec<_> = (0..3).map(|k| dir.join(format!("t-{k}.db"))).collect();
    assert!(run.stdout.starts_with("wrote 3 shards"), "{}", run.stdout);
    assert!(
        !dir.join("t.db.whole").exists(),
        "the whole database is removed"
    );
    let whole = tiny_db();
    for table in ["LINEITEM", "ORDERS"] {
        let counts: Vec<u64> = shards.iter().map(|s| count(s, table)).collect();
        assert_eq!(
            counts.iter().sum::<u64>(),
            count(whole, table),
            "{table}: {counts:?}"
        );
        assert!(counts.iter().all(|&c| c > 0), "{table}: {counts:?}");
    }
    // Each order's line items are in its shard; the other tables only in the first.
    for s in &shards {
        let orphans: i64 = open(s)
            .query_row(
                "SELECT count(*) FROM lineitem WHERE l_orderkey NOT IN (SELECT o_orderkey FROM orders)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(orphans, 0, "{}", s.display());
    }
    assert_eq!(count(&shards[0], "NATION"), 25);
    let tables: i64 = open(&shards[1])
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 2);
    // Q6 over the shards, named by a glob, is Q6 over the whole file.
    let q6 = |args: &[&str]| {
        let run = corescan([&["q6", "--json"], args].concat());
        assert_eq!(run.status, 0, "{}", run.stderr);
        let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        (v["revenue"].clone(), v["rows_matched"].clone(), v)
    };
    let pattern = format!("{}/t-*.db", dir.display());
    let (revenue, matched, report) = q6(&[&pattern]);
    let (want_revenue, want_matched, _) = q6(&[whole.to_str().unwrap()]);
    assert_eq!((revenue, matched), (want_revenue, want_matched));
    assert_eq!(report["files"]["files"], 3, "{report}");
    // Shards are not overwritten without --force.
    let again = corescan(["gen", out.to_str().unwrap(), "-s", "0.001", "--shards", "3"]);
    again.assert_error(&["t-0.db", "already exists"]);
}
