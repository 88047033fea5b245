//! A lossless rendering of result rows, so that the rendered path's rows (formatted in the
//! executors' threads, as `corescan query` formats them) can be compared value for value.

use engine::query::RowRender;
use engine::value::{Value, ValueRef};

/// A [`RowRender`] that writes every value with its storage class, so the rendered path's rows
/// decode back to the values they were made from.
pub(super) struct Lossless;

impl RowRender for Lossless {
    fn render(&self, row: &[ValueRef<'_>], out: &mut Vec<u8>) {
        out.extend_from_slice(&(row.len() as u32).to_le_bytes());
        for v in row {
            match *v {
                ValueRef::Null => out.push(0),
                ValueRef::Integer(i) => {
                    out.push(1);
                    out.extend_from_slice(&i.to_le_bytes());
                }
                ValueRef::Real(r) => {
                    out.push(2);
                    out.extend_from_slice(&r.to_bits().to_le_bytes());
                }
                ValueRef::Text(t) | ValueRef::Blob(t) => {
                    out.push(if matches!(v, ValueRef::Text(_)) { 3 } else { 4 });
                    out.extend_from_slice(&(t.len() as u32).to_le_bytes());
                    out.extend_from_slice(t);
                }
            }
        }
    }
}

impl Lossless {
    /// One row from the bytes [`Lossless::render`] wrote for it (all of them: a row handed
    /// over with another's bytes, or cut short, fails here).
    pub(super) fn decode(mut bytes: &[u8]) -> Vec<Value> {
        let mut take = |n: usize| -> &[u8] {
            assert!(bytes.len() >= n, "a rendered row cut short");
            let (head, rest) = bytes.split_at(n);
            bytes = rest;
            head
        };
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
        let count = u32::from_le_bytes(take(4).try_into().unwrap());
        let mut row = Vec::with_capacity(count as usize);
        for _ in 0..count {
            row.push(match take(1)[0] {
                0 => Value::Null,
                1 => Value::Integer(word(take(8)) as i64),
                2 => Value::Real(f64::from_bits(word(take(8)))),
                tag @ (3 | 4) => {
                    let len = u32::from_le_bytes(take(4).try_into().unwrap()) as usize;
                    let data = take(len).to_vec();
                    if tag == 3 {
                        Value::Text(data)
                    } else {
                        Value::Blob(data)
                    }
                }
                other => panic!("a rendered value with tag {other}"),
            });
        }
        assert!(
            bytes.is_empty(),
            "a rendered row with bytes after its values"
        );
        row
    }
}
