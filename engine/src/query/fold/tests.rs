//! The folding rules against SQLite itself (rusqlite's bundled SQLite is the oracle).

use rusqlite::types::ValueRef as SqlRef;
use rusqlite::Connection;

use super::*;
use crate::datatype3::{comparison_affinity, Collation};
use crate::query::eval::{eval, eval_ref};
use crate::query::ir::{ArithOp, CmpOp, Function};
use crate::value::ValueRef;

fn lit(v: Value) -> Expr {
    Expr::Literal(v)
}

fn b(e: Expr) -> Box<Expr> {
    Box::new(e)
}

fn from_sql(v: SqlRef<'_>) -> Value {
    match v {
        SqlRef::Null => Value::Null,
        SqlRef::Integer(i) => Value::Integer(i),
        SqlRef::Real(r) => Value::Real(r),
        SqlRef::Text(t) => Value::Text(t.to_vec()),
        SqlRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

fn sqlite_value(conn: &Connection, sql: &str) -> Result<Value, String> {
    conn.query_row(sql, [], |r| Ok(from_sql(r.get_ref(0)?)))
        .map_err(|e| e.to_string())
}

#[test]
fn constants_fold_to_the_values_sqlite_computes() {
    let conn = Connection::open_in_memory().unwrap();
    let cases: Vec<(&str, Expr)> = vec![
        (
            "date('1998-12-01', '-90 day')",
            Expr::Function(
                Function::Date,
                vec![lit(Value::text("1998-12-01")), lit(Value::text("-90 day"))],
            ),
        ),
        (
            "1 + 2 * 3",
            Expr::Arith(
                ArithOp::Add,
                b(lit(Value::Integer(1))),
                b(Expr::Arith(
                    ArithOp::Mul,
                    b(lit(Value::Integer(2))),
                    b(lit(Value::Integer(3))),
                )),
            ),
        ),
        (
            "9223372036854775807 + 1",
            Expr::Arith(
                ArithOp::Add,
                b(lit(Value::Integer(i64::MAX))),
                b(lit(Value::Integer(1))),
            ),
        ),
        (
            // The erroring branch is never taken: the whole CASE folds.
            "CASE WHEN 0 THEN abs(-9223372036854775808) ELSE 'x' || 1.5 END",
            Expr::Case {
                operand: None,
                whens: vec![(
                    lit(Value::Integer(0)),
                    Expr::Function(Function::Abs, vec![lit(Value::Integer(i64::MIN))]),
                    None,
                    Collation::Binary,
                )],
                otherwise: Some(b(Expr::Concat(
                    b(lit(Value::text("x"))),
                    b(lit(Value::Real(1.5))),
                ))),
            },
        ),
        (
            "'12abc' + 1 < 14",
            Expr::Compare {
                op: CmpOp::Lt,
                left: b(Expr::Arith(
                    ArithOp::Add,
                    b(lit(Value::text("12abc"))),
                    b(lit(Value::Integer(1))),
                )),
                right: b(lit(Value::Integer(14))),
                affinity: None,
                collation: Collation::Binary,
            },
        ),
        (
            "NULL AND 0",
            Expr::And(b(lit(Value::Null)), b(lit(Value::Integer(0)))),
        ),
        (
            "upper(substr('hello', 2, 3))",
            Expr::Function(
                Function::Upper,
                vec![Expr::Function(
                    Function::Substr,
                    vec![
                        lit(Value::text("hello")),
                        lit(Value::Integer(2)),
                        lit(Value::Integer(3)),
                    ],
                )],
            ),
        ),
    ];
    for (sql, e) in cases {
        let want = sqlite_value(&conn, &format!("SELECT {sql}")).unwrap();
        match fold(e) {
            Expr::Literal(v) => assert_eq!(v, want, "{sql}"),
            other => panic!("{sql} did not fold: {other:?}"),
        }
    }
}

#[test]
fn errors_stay_unfolded_and_surface_only_where_sqlite_raises_them() {
    let conn = Connection::open_in_memory().unwrap();
    let overflow = || Expr::Function(Function::Abs, vec![lit(Value::Integer(i64::MIN))]);
    // SQLite raises the error for the constant on its own...
    let err = sqlite_value(&conn, "SELECT abs(-9223372036854775808)").unwrap_err();
    assert!(err.contains("integer overflow"), "{err}");
    assert_eq!(fold(overflow()), overflow());
    assert!(eval(&fold(overflow()), &[]).is_err());
    // ...and, under a CASE that reads a column, only for the rows that reach it.
    conn.execute_batch("CREATE TABLE t(c); INSERT INTO t VALUES (0), (0);")
        .unwrap();
    let sql = "SELECT CASE WHEN c THEN abs(-9223372036854775808) ELSE 1 + 1 END FROM t";
    let want = sqlite_value(&conn, sql).unwrap();
    let e = fold(Expr::Case {
        operand: None,
        whens: vec![(Expr::Column(0), overflow(), None, Collation::Binary)],
        otherwise: Some(b(Expr::Arith(
            ArithOp::Add,
            b(lit(Value::Integer(1))),
            b(lit(Value::Integer(1))),
        ))),
    });
    let Expr::Case {
        whens, otherwise, ..
    } = &e
    else {
        panic!("the CASE reads a column: {e:?}");
    };
    assert_eq!(whens[0].1, overflow());
    assert_eq!(otherwise.as_deref(), Some(&lit(Value::Integer(2))));
    assert_eq!(eval(&e, &[ValueRef::Integer(0)]), Ok(want));
    let one_err = sqlite_value(
        &conn,
        "SELECT CASE WHEN 1 THEN abs(-9223372036854775808) END",
    );
    assert!(one_err.is_err());
    assert!(eval(&e, &[ValueRef::Integer(1)]).is_err());
}

#[test]
fn nodes_that_read_columns_keep_their_shape() {
    let e = Expr::Arith(
        ArithOp::Mul,
        b(Expr::Column(0)),
        b(Expr::Arith(
            ArithOp::Sub,
            b(lit(Value::Integer(1))),
            b(lit(Value::Real(0.25))),
        )),
    );
    assert_eq!(
        fold(e),
        Expr::Arith(ArithOp::Mul, b(Expr::Column(0)), b(lit(Value::Real(0.75))))
    );
}

/// Columns of every affinity.
const COLUMNS: [(&str, &str); 6] = [
    ("c_int", "INTEGER"),
    ("c_real", "REAL"),
    ("c_num", "DECIMAL(15,2)"),
    ("c_text", "VARCHAR(8)"),
    ("c_blob", "BLOB"),
    ("c_none", ""),
];

/// Stored values of every class, including text that looks like a number.
const STORED: [&str; 9] = [
    "NULL", "17", "24", "2.5", "'24'", "' 24 '", "'abc'", "'2.5'", "x'3234'",
];

/// Literals with their IR values: text that is and is not a number, and numbers.
fn literals() -> Vec<(&'static str, Value)> {
    vec![
        ("'24'", Value::text("24")),
        ("'24.0'", Value::text("24.0")),
        ("'2.5'", Value::text("2.5")),
        ("' 24 '", Value::text(" 24 ")),
        ("'1e1'", Value::text("1e1")),
        ("'abc'", Value::text("abc")),
        ("24", Value::Integer(24)),
        ("2.5", Value::Real(2.5)),
    ]
}

/// A comparison of a column with a literal, folded (so its literal is pre-converted), gives
/// SQLite's answer for every column affinity, stored value and operator; and a text literal
/// is converted exactly when the comparison is numeric and the text is a number.
#[test]
fn comparison_literals_are_pre_converted_only_where_exact() {
    let conn = Connection::open_in_memory().unwrap();
    let cols: Vec<String> = COLUMNS.iter().map(|(n, t)| format!("{n} {t}")).collect();
    conn.execute(&format!("CREATE TABLE t({})", cols.join(", ")), [])
        .unwrap();
    for s in STORED {
        let vals = vec![s; COLUMNS.len()].join(", ");
        conn.execute(&format!("INSERT INTO t VALUES ({vals})"), [])
            .unwrap();
    }
    let ops = [
        ("=", CmpOp::Eq),
        ("<", CmpOp::Lt),
        (">=", CmpOp::Ge),
        ("IS", CmpOp::Is),
    ];
    let mut converted = 0;
    for (col, decl) in COLUMNS {
        let col_affinity = partitioner::Affinity::of_declared_type(decl);
        let affinity = comparison_affinity(Some(col_affinity), None);
        for (row, _) in STORED.iter().enumerate() {
            let rowid = row + 1;
            let stored =
                sqlite_value(&conn, &format!("SELECT {col} FROM t WHERE rowid = {rowid}")).unwrap();
            for (lit_sql, lit_value) in literals() {
                for (op_sql, op) in ops {
                    let want = sqlite_value(
                        &conn,
                        &format!("SELECT {col} {op_sql} {lit_sql} FROM t WHERE rowid = {rowid}"),
                    )
                    .unwrap();
                    let e = fold(Expr::Compare {
                        op,
                        left: b(Expr::Column(0)),
                        right: b(lit(lit_value.clone())),
                        affinity,
                        collation: Collation::Binary,
                    });
                    let Expr::Compare { right, .. } = &e else {
                        panic!("reads a column: {e:?}");
                    };
                    let numeric = matches!(
                        affinity,
                        Some(Affinity::Numeric | Affinity::Integer | Affinity::Real)
                    );
                    let is_number_text = matches!(&lit_value, Value::Text(t)
                        if numeric_affinity_of_text(t).is_some());
                    if numeric && is_number_text {
                        assert!(!matches!(**right, Expr::Literal(Value::Text(_))));
                        converted += 1;
                    } else {
                        assert_eq!(**right, lit(lit_value.clone()));
                    }
                    let got = eval_ref(&e, &[stored.as_ref()]).map(|v| v.into_owned());
                    assert_eq!(
                        got,
                        Ok(want),
                        "{col} ({stored:?}) {op_sql} {lit_sql}, folded to {right:?}"
                    );
                }
            }
        }
    }
    assert!(converted > 0);
}
