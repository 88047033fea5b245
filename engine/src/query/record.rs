//! The general record decoder: the needed columns of a table-leaf record, as [`ValueRef`]s
//! borrowed from the page (or the assembled payload of a record that spills onto overflow
//! pages). Columns the query does not read are skipped by the sizes their serial types imply,
//! and the header walk stops at the last needed column.

use partitioner::format::{read_be_int, read_varint, serial_type_size};

use crate::value::ValueRef;

use super::ir::ColumnRead;

/// Whether a record could be decoded from the bytes given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// Every needed column was read.
    Done,
    /// A needed column (or the header) lies beyond the bytes given.
    NeedMore,
}

/// Which record positions fill which slots.
#[derive(Debug, Clone)]
pub struct RecordDecoder {
    /// `(record position, slot, real affinity)`, sorted by position.
    needed: Vec<(usize, usize, bool)>,
    /// The slots that hold the rowid.
    rowid_slots: Vec<usize>,
}

impl RecordDecoder {
    /// A decoder for the [`ColumnRead::Record`] slots of `columns`.
    pub fn new(columns: &[ColumnRead]) -> Self {
        let mut needed: Vec<(usize, usize, bool)> = columns
            .iter()
            .enumerate()
            .filter_map(|(slot, c)| match c {
                ColumnRead::Record {
                    position,
                    real_affinity,
                    ..
                } => Some((*position, slot, *real_affinity)),
                _ => None,
            })
            .collect();
        needed.sort_unstable();
        let rowid_slots = columns
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c, ColumnRead::Rowid))
            .map(|(i, _)| i)
            .collect();
        RecordDecoder {
            needed,
            rowid_slots,
        }
    }

    /// Fills the record slots of `slots` from `payload` (`complete`: the whole payload).
    /// Positions beyond the record's last column are left `None` (the caller reads the
    /// column's default).
    pub fn decode<'a>(
        &self,
        payload: &'a [u8],
        complete: bool,
        slots: &mut [Option<ValueRef<'a>>],
    ) -> Result<Decoded, String> {
        self.walk(payload, complete, |slot, v| {
            slots[slot] = v;
            Ok(())
        })
    }

    /// The row's slots of `columns` (this decoder's plan columns) from the record `payload`
    /// of the cell `rowid`: record columns (their defaults when the record ends before them),
    /// the rowid, and NULL for virtual columns (computed by the caller). `slots` has one
    /// entry per column.
    #[inline]
    pub fn decode_row<'a>(
        &self,
        payload: &'a [u8],
        complete: bool,
        columns: &'a [ColumnRead],
        rowid: i64,
        slots: &mut [ValueRef<'a>],
    ) -> Result<Decoded, String> {
        for &i in &self.rowid_slots {
            slots[i] = ValueRef::Integer(rowid);
        }
        self.walk(payload, complete, |slot, v| {
            slots[slot] = match v {
                Some(v) => v,
                None => match &columns[slot] {
                    ColumnRead::Record { default, .. } => match default {
                        Ok(d) => d.as_ref(),
                        Err(why) => return Err(why.clone()),
                    },
                    _ => ValueRef::Null,
                },
            };
            Ok(())
        })
    }

    /// Walks the record header up to the last needed column, handing each needed column's
    /// value (`None`: the record ends before it) to `put`.
    #[inline]
    fn walk<'a>(
        &self,
        payload: &'a [u8],
        complete: bool,
        mut put: impl FnMut(usize, Option<ValueRef<'a>>) -> Result<(), String>,
    ) -> Result<Decoded, String> {
        let need_more = || {
            if complete {
                Err("record runs past its payload".to_string())
            } else {
                Ok(Decoded::NeedMore)
            }
        };
        if self.needed.is_empty() {
            return Ok(Decoded::Done);
        }
        let Some((header_len, n)) = read_varint(payload) else {
            return need_more();
        };
        let header_len = header_len as usize;
        if header_len < n || (complete && header_len > payload.len()) {
            return Err(format!("record header size {header_len} is invalid"));
        }
        let header = &payload[..header_len.min(payload.len())];
        let mut pos = n;
        let mut body = header_len;
        let mut column = 0usize;
        for &(want, slot, real) in &self.needed {
            // Walk the header up to `want`.
            loop {
                if pos >= header_len {
                    // The record ends before this column (ALTER TABLE ADD COLUMN).
                    put(slot, None)?;
                    break;
                }
                // One-byte serial types (every type but long text and blobs) skip the
                // varint loop.
                let (serial, k) = match header.get(pos) {
                    Some(&b) if b < 0x80 => (u64::from(b), 1),
                    _ => {
                        let Some(sk) = read_varint(&header[pos.min(header.len())..]) else {
                            return need_more();
                        };
                        sk
                    }
                };
                if pos + k > header_len {
                    return Err("record header's last serial type runs past the header".into());
                }
                let size = serial_type_size(serial)
                    .ok_or_else(|| format!("column {column} has reserved serial type {serial}"))?
                    as usize;
                if column == want {
                    let Some(bytes) = body
                        .checked_add(size)
                        .and_then(|end| payload.get(body..end))
                    else {
                        return need_more();
                    };
                    put(slot, Some(value(serial, bytes, real)))?;
                    pos += k;
                    body += size;
                    column += 1;
                    break;
                }
                pos += k;
                body = body
                    .checked_add(size)
                    .ok_or_else(|| "record body size overflows".to_string())?;
                column += 1;
            }
        }
        Ok(Decoded::Done)
    }
}

/// The value of serial type `serial` stored in `bytes` (exactly its size).
fn value(serial: u64, bytes: &[u8], real_affinity: bool) -> ValueRef<'_> {
    let int = |i: i64| {
        if real_affinity {
            ValueRef::Real(i as f64)
        } else {
            ValueRef::Integer(i)
        }
    };
    match serial {
        0 => ValueRef::Null,
        8 => int(0),
        9 => int(1),
        1..=6 => int(read_be_int(bytes)),
        7 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(bytes);
            let r = f64::from_bits(u64::from_be_bytes(b));
            // SQLite reads a stored NaN as NULL.
            if r.is_nan() {
                ValueRef::Null
            } else {
                ValueRef::Real(r)
            }
        }
        s if s % 2 == 1 => ValueRef::Text(bytes),
        _ => ValueRef::Blob(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    fn read(position: usize) -> ColumnRead {
        ColumnRead::Record {
            position,
            default: Ok(Value::Null),
            real_affinity: false,
        }
    }

    #[test]
    fn decodes_needed_columns_only() {
        // Record (NULL, 7, 'hi', 1.5): header 5 bytes: len, 0, 1, 17, 7.
        let mut rec = vec![5u8, 0, 1, 17, 7, 7, b'h', b'i'];
        rec.extend_from_slice(&1.5f64.to_be_bytes());
        let d = RecordDecoder::new(&[read(3), read(1), read(2), read(9)]);
        let mut slots = vec![None; 4];
        assert_eq!(d.decode(&rec, true, &mut slots), Ok(Decoded::Done));
        assert_eq!(
            slots,
            vec![
                Some(ValueRef::Real(1.5)),
                Some(ValueRef::Integer(7)),
                Some(ValueRef::Text(b"hi")),
                None
            ]
        );
        assert_eq!(
            d.decode(&rec[..9], false, &mut slots),
            Ok(Decoded::NeedMore)
        );
        assert!(d.decode(&rec[..9], true, &mut slots).is_err());
    }
}
