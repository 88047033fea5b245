//! SQLite's `SCAN t USING COVERING INDEX i`, run as SQLite runs it: the index's entries are
//! the rows. Where SQLite's loop reads only an index, forwards (whole, or the range of its
//! first key column a `WHERE` bounds: `SEARCH t USING COVERING INDEX i (x>?)`), and every
//! column the query reads is one of the index's key columns or the rowid, corescan scans the
//! index's leaves (those that can hold the range) in place of the table's
//! ([`partitioner::TablePlan::index_scan`]), cut across the executors in key order as a
//! table's leaves are, with readahead and every backend; the `WHERE` still decides each
//! entry. Each entry's place in the index is its key wherever a table's row uses its rowid
//! ([`partitioner::plan::IndexScan`]), so the rows come, tie and merge in the index's order:
//! no sort of the table's rows into that order, no arrival ranks.
//!
//! The query's columns are moved to their positions in the index's records (the key
//! columns, then the rowid). The rest of the plan is the one made for the scan in rowid
//! order followed into the index's order ([`crate::index_order`]), with two changes for
//! plain rows: the index's order needs no sort keys, and the query's `ORDER BY` is kept only
//! where SQLite sorts (`USE TEMP B-TREE FOR ... ORDER BY`), its ties in the index's order.
//!
//! Layering: below the statement planner ([`crate::plan`]), beside [`crate::index_order`].

use engine::query::ir::{ColumnRead, SortKey};
use partitioner::TablePlan;

use super::sqlite_plan::{Access, KeySource, SqliteChoice};

/// A loop SQLite runs over a covering index alone, forwards: the candidate for a scan of the
/// index in place of the table ([`columns_in_index`] decides).
#[derive(Debug, Clone)]
pub(crate) struct Covering {
    /// The index.
    pub name: String,
    /// Its key columns' table column names, in order (`None` for an expression).
    key: Vec<Option<String>>,
    /// The fields of each entry (the key columns, then the rowid).
    pub fields: usize,
    /// A plain query's `ORDER BY` under the index scan: the one written where SQLite sorts,
    /// none where the index delivers it. `None` for grouped queries, whose order the plan
    /// made for the table scan keeps.
    pub rows_order: Option<Vec<SortKey>>,
}

/// The covering scan SQLite's `choice` runs, if it runs one: `SCAN` or `SEARCH ... USING
/// COVERING INDEX`, forwards. `rows` says whether the query
/// gives plain rows, with `written` its `ORDER BY` as written; `bignull` that it orders NULLs
/// against the index's order (`ASC NULLS LAST`), which SQLite's loop gives by visiting the
/// NULL entries in a loop of their own after the others (`WHERE_BIGNULL_SORT`): the rows
/// are then sorted by `written`, ties in the index's order, which is the same.
pub(crate) fn covering_scan(
    choice: &SqliteChoice,
    rows: bool,
    written: &[SortKey],
    bignull: bool,
) -> Option<Covering> {
    let Access::Index {
        name,
        backward: false,
        key,
        fields,
        ..
    } = &choice.access
    else {
        return None;
    };
    // The whole index, or a range of it (`SEARCH`), whose entries the WHERE then picks from
    // the whole index's in the same order (where the range holds too many to read their rows
    // by rowid: see the planner).
    let covered = format!("USING COVERING INDEX {name}");
    let scans = choice.lines.iter().any(|l| {
        let l = l.trim_start();
        (l.starts_with("SCAN ") || l.starts_with("SEARCH "))
            && l.split_once(&covered)
                .is_some_and(|(_, rest)| rest.is_empty() || rest.starts_with(' '))
    });
    if !scans || choice.first_row_only || key.len() + 1 != *fields {
        return None;
    }
    let sorts = choice
        .lines
        .iter()
        .any(|l| l.contains("TEMP B-TREE FOR") && l.contains("ORDER BY"));
    Some(Covering {
        name: name.clone(),
        key: key
            .iter()
            .map(|k| match &k.source {
                KeySource::Column(c) => Some(c.clone()),
                KeySource::Expression(_) => None,
            })
            .collect(),
        fields: *fields,
        rows_order: rows.then(|| {
            if sorts || bignull {
                written.to_vec()
            } else {
                Vec::new()
            }
        }),
    })
}

/// The query's column reads moved to the positions of the index's records, or `None` when
/// one reads something the index does not hold (another column, a `VIRTUAL` column, the
/// `_file` of several files).
pub(crate) fn columns_in_index(
    table: &TablePlan,
    covering: &Covering,
    columns: &[ColumnRead],
) -> Option<Vec<ColumnRead>> {
    let def = &table.definition;
    let rowid_field = covering.fields.checked_sub(1)?;
    columns
        .iter()
        .map(|read| match read {
            ColumnRead::Rowid => Some(ColumnRead::Record {
                position: rowid_field,
                default: Err("an index entry without its rowid".into()),
                real_affinity: false,
            }),
            ColumnRead::Record {
                position,
                default,
                real_affinity,
            } => {
                let column =
                    (0..def.columns.len()).find(|&c| def.record_position(c) == Some(*position))?;
                let name = &def.columns[column].name;
                let field = covering
                    .key
                    .iter()
                    .position(|k| k.as_ref().is_some_and(|k| k.eq_ignore_ascii_case(name)))?;
                (field < rowid_field).then(|| ColumnRead::Record {
                    position: field,
                    default: default.clone(),
                    real_affinity: *real_affinity,
                })
            }
            ColumnRead::File | ColumnRead::Virtual { .. } => None,
        })
        .collect()
}
