//! A row whose evaluation fails is [`Error::Eval`], naming the file, the leaf page that holds
//! the row, its rowid and SQLite's own message: a failing expression, not a damaged file
//! ([`Error::Corrupt`]). Both ways an executor reports one are checked: a plain query keeps the
//! failing row in its place (streamed or collected), a grouped one fails when its page is done.

use std::path::Path;

use engine::query::ir::{AggFunc, AggSpec, ColumnRead, Expr, Function, QueryPlan, Shape};
use engine::query::{run_query, run_query_streaming, QueryError};
use engine::{spread, Error, IoBackend, IoChoice, ScanSettings};
use partitioner::cell::TableLeafCell;
use partitioner::format::BtreePageHeader;
use partitioner::TablePlan;

use crate::fixture::test_dir;

/// The row whose value has no absolute value in 64 bits.
const BAD_ROWID: i64 = 1_777;

/// `t(a INTEGER)`: 3,000 rows with `a = rowid`, but `a = -9223372036854775808` at
/// [`BAD_ROWID`], on 1 KiB pages (a dozen leaves, so two executors each get some).
fn table(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("t.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "PRAGMA page_size=1024; CREATE TABLE t(a INTEGER);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
         INSERT INTO t(rowid, a) SELECT i, i FROM n;",
    )
    .unwrap();
    conn.execute(
        "UPDATE t SET a = ?1 WHERE rowid = ?2",
        (i64::MIN, BAD_ROWID),
    )
    .unwrap();
    path
}

/// SQLite's error for `sql` (which must fail), as `sqlite3_errmsg` gives it.
fn sqlite_error(path: &Path, sql: &str) -> String {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn.prepare(sql).unwrap();
    let mut rows = stmt.query([]).unwrap();
    loop {
        match rows.next() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("SQLite ran {sql} without an error"),
            Err(rusqlite::Error::SqliteFailure(_, Some(message))) => return message,
            Err(e) => panic!("{sql}: {e:?}"),
        }
    }
}

/// The rowids of table-leaf page `page` of the file.
fn rowids_on(path: &Path, page: u32, page_size: u32) -> Vec<i64> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; page_size as usize];
    let file = std::fs::File::open(path).unwrap();
    file.read_exact_at(&mut buf, u64::from(page - 1) * u64::from(page_size))
        .unwrap();
    let header = BtreePageHeader::parse(&buf, 0).unwrap();
    assert!(header.is_table_leaf(), "page {page}");
    (0..usize::from(header.cell_count))
        .map(|i| {
            let at = header.header_len + 2 * i;
            let cell = usize::from(u16::from_be_bytes([buf[at], buf[at + 1]]));
            TableLeafCell::parse(&buf, cell, page_size).unwrap().rowid
        })
        .collect()
}

/// `abs(a)` over the table's one column.
fn abs_a() -> Expr {
    Expr::Function(Function::Abs, vec![Expr::Column(0)])
}

/// A plan over `t(a)` with `shape` and no `WHERE`.
fn plan(shape: Shape, names: &[&str]) -> QueryPlan {
    QueryPlan {
        columns: vec![ColumnRead::Record {
            position: 0,
            default: Ok(engine::value::Value::Null),
            real_affinity: false,
        }],
        constant_terms: Vec::new(),
        filter: None,
        shape,
        order_by: Vec::new(),
        backward: false,
        limit: None,
        offset: 0,
        names: names.iter().map(|n| n.to_string()).collect(),
        distinct: false,
        windows: None,
        arrival: None,
    }
}

/// Asserts `got` is SQLite's `message` at [`BAD_ROWID`], as an [`Error::Eval`] naming the page
/// that holds the row, displayed on one line with the file, page, rowid and message.
#[track_caller]
fn assert_eval(what: &str, got: Result<(), QueryError>, table: &TablePlan, message: &str) {
    let err = match got {
        Err(QueryError::Scan(err)) => err,
        other => panic!("{what}: expected a scan error, got {other:?}"),
    };
    let Error::Eval {
        ref path,
        page,
        rowid,
        message: ref said,
        ..
    } = err
    else {
        panic!("{what}: expected Error::Eval, got {err:?}");
    };
    assert_eq!((rowid, said.as_str()), (BAD_ROWID, message), "{what}");
    assert_eq!(path, &table.path, "{what}");
    assert!(
        rowids_on(path, page, table.header.page_size).contains(&BAD_ROWID),
        "{what}: page {page} does not hold rowid {BAD_ROWID}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}: page {page}: rowid {BAD_ROWID}: {message}",
            path.display()
        ),
        "{what}"
    );
}

#[test]
fn a_failing_row_is_an_eval_error_naming_page_and_rowid() {
    let dir = test_dir("eval-row");
    let path = table(&dir);
    let table = TablePlan::open(&path, "t").unwrap();
    assert!(table.leaves.len() > 4, "{} leaves", table.leaves.len());
    let settings = ScanSettings {
        io: IoChoice::Fixed(IoBackend::Pread),
        ..ScanSettings::defaults(table.header.page_size)
    };
    let executors = spread(2);

    // A plain projection: the failing row kept in its place (a marked row).
    let message = sqlite_error(&path, "SELECT abs(a) FROM t");
    assert_eq!(message, "integer overflow");
    let rows = plan(
        Shape::Rows {
            outputs: vec![abs_a()],
        },
        &["abs(a)"],
    );
    let streamed = run_query_streaming(&table, rows.clone(), &settings, &executors, |_| Ok(()));
    assert_eval("streamed", streamed.map(drop), &table, &message);
    let collected = run_query(&table, rows, &settings, &executors);
    assert_eval("collected", collected.map(drop), &table, &message);

    // A grouped query whose WHERE fails: the executor reports it when the page is done.
    let message = sqlite_error(&path, "SELECT count(*) FROM t WHERE abs(a) > 0");
    let count = QueryPlan {
        filter: Some(Expr::Compare {
            op: engine::query::ir::CmpOp::Gt,
            left: Box::new(abs_a()),
            right: Box::new(Expr::Literal(engine::value::Value::Integer(0))),
            collation: engine::datatype3::Collation::Binary,
            affinity: None,
        }),
        ..plan(
            Shape::Groups {
                keys: Vec::new(),
                aggregates: vec![AggSpec {
                    func: AggFunc::CountStar,
                    arg: None,
                    distinct: false,
                    collation: engine::datatype3::Collation::Binary,
                    separator: None,
                    second: None,
                    filter: None,
                    order_by: Vec::new(),
                }],
                having: None,
                outputs: vec![Expr::Column(0)],
            },
            &["count(*)"],
        )
    };
    let grouped = run_query(&table, count, &settings, &executors);
    assert_eval("grouped", grouped.map(drop), &table, &message);
}
