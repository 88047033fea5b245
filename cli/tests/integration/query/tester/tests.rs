//! The tester's own promises: which configurations a check runs, that the rendered path's
//! encoding is lossless, and that a wrong answer fails naming the configuration.

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};

use engine::query::RowRender;
use engine::value::Value;

use super::lossless::Lossless;
use super::{Axis, Cores, Io, QueryTester, RowPath, Window};
use crate::query::fixture;

#[test]
fn the_default_is_the_full_product_and_a_span_rotates_the_rest() {
    let db = fixture();
    let all = QueryTester::new(db, "SELECT 1").configurations();
    assert_eq!(all.len(), 5 * 3 * 3 * 2);
    assert_eq!(
        all.iter()
            .map(|c| c.to_string())
            .collect::<HashSet<_>>()
            .len(),
        all.len(),
        "distinct configurations, each described differently"
    );
    // Spanning the core counts: three runs per query, and over a few queries every value of
    // the other axes.
    let mut seen = HashSet::new();
    for k in 0..40 {
        let sql = format!("SELECT {k}");
        let configs = QueryTester::new(db, &sql)
            .paths(&RowPath::ALL)
            .span(&[Axis::Cores])
            .configurations();
        let cores: HashSet<_> = configs.iter().map(|c| format!("{:?}", c.cores)).collect();
        assert_eq!((configs.len(), cores.len()), (3, 3), "{sql}");
        seen.extend(
            configs
                .iter()
                .map(|c| format!("{:?} {:?} {:?}", c.io, c.window, c.path)),
        );
        // The same SQL, the same configurations.
        let again = QueryTester::new(db, &sql)
            .paths(&RowPath::ALL)
            .span(&[Axis::Cores])
            .configurations();
        assert_eq!(configs, again);
    }
    for io in Io::ALL {
        assert!(
            seen.iter().any(|s| s.starts_with(&format!("{io:?} "))),
            "{io:?}"
        );
    }
    for window in Window::ALL {
        assert!(
            seen.iter().any(|s| s.contains(&format!(" {window:?} "))),
            "{window:?}"
        );
    }
    for path in RowPath::ALL {
        assert!(
            seen.iter().any(|s| s.ends_with(&format!(" {path:?}"))),
            "{path:?}"
        );
    }
    // Restricted values, and no span at all: one configuration among them.
    let one = QueryTester::new(db, "SELECT 2")
        .io(&[Io::Mmap])
        .cores(&[Cores::Oversubscribed])
        .span(&[])
        .configurations();
    assert_eq!(one.len(), 1);
    assert_eq!((one[0].io, one[0].cores), (Io::Mmap, Cores::Oversubscribed));
    assert_eq!(Cores::Oversubscribed.executors().len(), 3);
}

#[test]
fn rendered_rows_decode_to_their_values() {
    let row = [
        Value::Null,
        Value::Integer(i64::MIN),
        Value::Real(-0.0),
        Value::Real(f64::INFINITY),
        Value::Text(b"caf\xc3\xa9".to_vec()),
        Value::Text(Vec::new()),
        Value::Blob(vec![0, 255, 3]),
    ];
    let mut bytes = Vec::new();
    let refs: Vec<_> = row.iter().map(Value::as_ref).collect();
    Lossless.render(&refs, &mut bytes);
    let back = Lossless::decode(&bytes);
    assert_eq!(back.len(), row.len());
    for (a, b) in row.iter().zip(&back) {
        match (a, b) {
            (Value::Real(x), Value::Real(y)) => assert_eq!(x.to_bits(), y.to_bits()),
            _ => assert_eq!(a, b),
        }
    }
    // Two rows' bytes handed over as one row fail.
    let mut two = bytes.clone();
    two.extend_from_slice(&bytes);
    assert!(catch_unwind(|| Lossless::decode(&two)).is_err());
}

#[test]
fn a_given_answer_is_checked_and_a_wrong_one_names_the_configuration() {
    let db = fixture();
    let sql = "SELECT id, 'x', 2.5 FROM t WHERE id IN (1, 2) ORDER BY id";
    let rows = |a: i64, b: i64| -> super::Answer {
        let row = |id| {
            vec![
                Value::Integer(id),
                Value::Text(b"x".to_vec()),
                Value::Real(2.5),
            ]
        };
        Ok((
            vec!["id".into(), "'x'".into(), "2.5".into()],
            vec![row(a), row(b)],
        ))
    };
    QueryTester::new(db, sql)
        .expect(rows(1, 2))
        .paths(&RowPath::ALL)
        .span(&[Axis::Path])
        .check();
    let wrong = catch_unwind(AssertUnwindSafe(|| {
        QueryTester::new(db, sql)
            .expect(rows(1, 4))
            .span(&[])
            .check();
    }));
    let message = *wrong
        .expect_err("a wrong answer fails")
        .downcast::<String>()
        .unwrap();
    assert!(
        message.contains(sql) && message.contains("executor(s) on CPUs") && message.contains("io "),
        "{message}"
    );
}
