//! The schema table (`sqlite_schema`, rooted at page 1) and `CREATE TABLE` parsing.
//!
//! [`read_schema`] walks the schema b-tree like any table (it can have interior pages, and long
//! `CREATE` statements spill onto overflow pages) and decodes each row's record:
//! `(type, name, tbl_name, rootpage, sql)`. [`find_table`] picks one table by name, ASCII
//! case-insensitively as SQLite does, and refuses what cannot be scanned as a rowid table b-tree:
//! views, indexes, virtual tables and `WITHOUT ROWID` tables.

use crate::btree::{table_page_header, walk_table, LeafCheck, PageSet};
use crate::cell::{follow_overflow_chain, TableLeafCell};
use crate::create_table::{parse_create_table, CreateTable};
use crate::error::{Error, Result};
use crate::format::{read_be_int, read_varint, serial_type_size};
use crate::pager::PageFile;

/// One table from `sqlite_schema`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// The table's name as written in the schema.
    pub name: String,
    /// The root page of its b-tree.
    pub root_page: u32,
    /// The `CREATE TABLE` statement.
    pub sql: String,
    /// Column names in declaration order, unquoted.
    pub columns: Vec<String>,
}

impl TableSchema {
    /// The 0-based position of column `name` (case-insensitive) in declaration order, if the
    /// table has it. This is also its position in the record unless the table has `VIRTUAL`
    /// generated columns; [`crate::TablePlan::column`] accounts for those.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(name))
    }

    /// Parses [`TableSchema::sql`] again for the details beyond column names.
    pub fn definition(&self) -> Result<CreateTable, String> {
        parse_create_table(&self.sql)
    }
}

/// One row of `sqlite_schema`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaEntry {
    /// `table`, `index`, `view` or `trigger`.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The table the object belongs to (its own name for a table).
    pub tbl_name: String,
    /// The root page of its b-tree; 0 for views, triggers and virtual tables.
    pub root_page: u32,
    /// The `CREATE` statement; `None` for automatic indexes.
    pub sql: Option<String>,
    /// The schema leaf page the row was read from (for error messages).
    pub page: u32,
}

/// A decoded record value, borrowing text and blobs from the payload.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a [u8]),
    Blob(&'a [u8]),
}

impl Value<'_> {
    fn to_stored(self) -> StoredValue {
        match self {
            Value::Null => StoredValue::Null,
            Value::Int(i) => StoredValue::Integer(i),
            Value::Real(r) => StoredValue::Real(r),
            Value::Text(t) => StoredValue::Text(String::from_utf8_lossy(t).into_owned()),
            Value::Blob(b) => StoredValue::Blob(b.to_vec()),
        }
    }
}

/// A value of a row read from one of SQLite's own tables, owned.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredValue {
    /// NULL.
    Null,
    /// An integer.
    Integer(i64),
    /// A real.
    Real(f64),
    /// Text (invalid UTF-8 replaced).
    Text(String),
    /// A blob.
    Blob(Vec<u8>),
}

/// The rows `ANALYZE` (or `PRAGMA optimize`) wrote about one table to `sqlite_stat1`
/// (`tbl, idx, stat`) and `sqlite_stat4` (`tbl, idx, neq, nlt, ndlt, sample`), as stored: what
/// SQLite's planner reads to choose between a table's indexes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlannerStats {
    /// The table's `sqlite_stat1` rows.
    pub stat1: Vec<Vec<StoredValue>>,
    /// The table's `sqlite_stat4` rows.
    pub stat4: Vec<Vec<StoredValue>>,
}

/// Decodes a record: header size, serial types, then the values they describe.
fn decode_record(payload: &[u8]) -> Result<Vec<Value<'_>>, String> {
    let (header_len, mut at) = read_varint(payload).ok_or("record header size is cut off")?;
    let header_len = usize::try_from(header_len)
        .ok()
        .filter(|&n| n <= payload.len() && n >= at)
        .ok_or_else(|| format!("record header size {header_len} exceeds the record"))?;
    let mut body = header_len;
    let mut values = Vec::new();
    while at < header_len {
        let (serial, n) = payload
            .get(at..header_len)
            .and_then(read_varint)
            .ok_or("record header is cut off")?;
        at += n;
        let size = serial_type_size(serial)
            .ok_or_else(|| format!("reserved serial type {serial} in a record"))?;
        let bytes = usize::try_from(size)
            .ok()
            .and_then(|size| payload.get(body..body.checked_add(size)?))
            .ok_or("a record value runs past the record")?;
        body += bytes.len();
        values.push(match serial {
            0 => Value::Null,
            1..=6 => Value::Int(read_be_int(bytes)),
            7 => Value::Real(f64::from_bits(read_be_int(bytes) as u64)),
            8 => Value::Int(0),
            9 => Value::Int(1),
            n if n % 2 == 1 => Value::Text(bytes),
            _ => Value::Blob(bytes),
        });
    }
    Ok(values)
}

fn text(v: Option<&Value<'_>>) -> Option<String> {
    match v {
        Some(Value::Text(t)) => Some(String::from_utf8_lossy(t).into_owned()),
        _ => None,
    }
}

/// Reads every row of `sqlite_schema`.
pub fn read_schema(file: &PageFile) -> Result<Vec<SchemaEntry>> {
    let mut entries = Vec::new();
    for_each_row(file, 1, |page, _rowid, values| {
        let root_page = match values.get(3) {
            Some(Value::Int(n)) => u32::try_from(*n).ok(),
            None | Some(Value::Null) => Some(0),
            _ => None,
        };
        let name = text(values.get(1)).unwrap_or_default();
        let root_page = root_page.ok_or_else(|| {
            file.corrupt(
                page,
                format!("schema entry {name:?} has an invalid root page"),
            )
        })?;
        entries.push(SchemaEntry {
            kind: text(values.first()).unwrap_or_default(),
            tbl_name: text(values.get(2)).unwrap_or_default(),
            name,
            root_page,
            sql: text(values.get(4)),
            page,
        });
        Ok(())
    })?;
    Ok(entries)
}

/// Calls `f` with every row of the table b-tree rooted at `root` (its leaf page, rowid and
/// record values), in rowid order, with the checks of a scan: for small tables read whole
/// (the schema, `sqlite_stat1`).
fn for_each_row(
    file: &PageFile,
    root: u32,
    mut f: impl FnMut(u32, i64, &[Value<'_>]) -> Result<()>,
) -> Result<()> {
    let tree = walk_table(file, root, LeafCheck::All)?;
    let usable = file.header().usable_size();
    let mut seen = PageSet::new(file.header().page_count);
    for &p in tree.leaves.iter().chain(&tree.interior_pages) {
        seen.insert(p);
    }
    let (mut page, mut scratch) = (file.page_buffer(), file.page_buffer());
    for &leaf in &tree.leaves {
        file.read_page(leaf, &mut page)?;
        let header = table_page_header(file, leaf, &page)?;
        let offset = crate::btree::btree_header_offset(leaf);
        for i in 0..usize::from(header.cell_count) {
            let cell_at = header
                .cell_offset(&page, offset, i, usable as usize)
                .map_err(|what| file.corrupt(leaf, what))?;
            let cell =
                TableLeafCell::parse(&page, cell_at, usable).map_err(|w| file.corrupt(leaf, w))?;
            let mut payload = cell.local(&page).to_vec();
            follow_overflow_chain(
                file,
                leaf,
                &cell,
                &mut seen,
                Some(&mut payload),
                &mut scratch,
            )?;
            let values = decode_record(&payload)
                .map_err(|w| file.corrupt(leaf, format!("row {}: {w}", cell.rowid)))?;
            f(leaf, cell.rowid, &values)?;
        }
    }
    Ok(())
}

/// The row counts `ANALYZE` wrote to `sqlite_stat1` (`PRAGMA optimize` too), by table name as
/// the statistics spell it: the first number of each table's `stat`, from its row without an
/// index (a table without indexes) or its largest index's (an index has a row per table row,
/// a partial index fewer). Empty without a `sqlite_stat1` table; rows that do not parse are
/// passed over, as SQLite passes them over (`analysisLoader` reads what it can).
pub fn read_stat1(file: &PageFile, entries: &[SchemaEntry]) -> Result<Vec<(String, u64)>> {
    let Some(stat) = entries
        .iter()
        .find(|e| e.kind == "table" && e.name.eq_ignore_ascii_case("sqlite_stat1"))
    else {
        return Ok(Vec::new());
    };
    let mut counts: Vec<(String, u64, bool)> = Vec::new();
    for_each_row(file, stat.root_page, |_page, _rowid, values| {
        let (Some(tbl), Some(Value::Text(stat))) = (text(values.first()), values.get(2)) else {
            return Ok(());
        };
        let Some(n) = std::str::from_utf8(stat)
            .ok()
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
        else {
            return Ok(());
        };
        let table_row = matches!(values.get(1), None | Some(Value::Null));
        match counts
            .iter_mut()
            .find(|(t, ..)| t.eq_ignore_ascii_case(&tbl))
        {
            Some(entry) if table_row => *entry = (tbl, n, true),
            Some((_, count, false)) => *count = (*count).max(n),
            Some(_) => {}
            None => counts.push((tbl, n, table_row)),
        }
        Ok(())
    })?;
    Ok(counts.into_iter().map(|(t, n, _)| (t, n)).collect())
}

/// The statistics rows about table `name` (ASCII case-insensitive) in `sqlite_stat1` and
/// `sqlite_stat4`, when the file has those tables ([`PlannerStats`]).
pub fn read_planner_stats(
    file: &PageFile,
    entries: &[SchemaEntry],
    name: &str,
) -> Result<PlannerStats> {
    let mut stats = PlannerStats::default();
    for (table, rows) in [
        ("sqlite_stat1", &mut stats.stat1),
        ("sqlite_stat4", &mut stats.stat4),
    ] {
        let Some(entry) = entries
            .iter()
            .find(|e| e.kind == "table" && e.name.eq_ignore_ascii_case(table))
        else {
            continue;
        };
        for_each_row(file, entry.root_page, |_page, _rowid, values| {
            if matches!(values.first(), Some(Value::Text(t)) if t.eq_ignore_ascii_case(name.as_bytes()))
            {
                rows.push(values.iter().map(|v| v.to_stored()).collect());
            }
            Ok(())
        })?;
    }
    Ok(stats)
}

/// The indexes of table `name` (ASCII case-insensitive) among `entries`: `CREATE INDEX`
/// statements and the automatic indexes behind `UNIQUE` and `PRIMARY KEY` (no `sql`).
pub fn table_indexes(entries: &[SchemaEntry], name: &str) -> Vec<SchemaEntry> {
    entries
        .iter()
        .filter(|e| e.kind == "index" && e.tbl_name.eq_ignore_ascii_case(name))
        .cloned()
        .collect()
}

/// How many table names an error message lists before eliding the rest.
const LISTED_TABLES: usize = 20;

/// Finds table `name` (ASCII case-insensitive) among `entries` and parses its definition.
pub fn find_table(file: &PageFile, entries: &[SchemaEntry], name: &str) -> Result<TableSchema> {
    let matches = |e: &&SchemaEntry| e.name.eq_ignore_ascii_case(name);
    let Some(entry) = entries.iter().filter(matches).find(|e| e.kind == "table") else {
        if let Some(other) = entries.iter().find(matches) {
            return Err(file.invalid(format!(
                "{:?} is {} {}, not a table",
                other.name,
                if other.kind == "index" { "an" } else { "a" },
                other.kind
            )));
        }
        let tables: Vec<&str> = entries
            .iter()
            .filter(|e| e.kind == "table")
            .map(|e| e.name.as_str())
            .collect();
        let listed = if tables.is_empty() {
            "the database has no tables".to_string()
        } else if tables.len() > LISTED_TABLES {
            format!(
                "tables: {}, and {} more",
                tables[..LISTED_TABLES].join(", "),
                tables.len() - LISTED_TABLES
            )
        } else {
            format!("tables: {}", tables.join(", "))
        };
        return Err(Error::NoSuchTable {
            path: file.path().to_path_buf(),
            what: format!("no table named {name:?} ({listed})"),
        });
    };
    let table = &entry.name;
    let sql = entry
        .sql
        .clone()
        .ok_or_else(|| file.corrupt(entry.page, format!("table {table:?} has no CREATE TABLE")))?;
    let is_virtual = sql
        .split_whitespace()
        .take(2)
        .map(str::to_ascii_uppercase)
        .eq(["CREATE", "VIRTUAL"]);
    if is_virtual {
        return Err(file.invalid(format!(
            "table {table:?} is a virtual table; it has no b-tree to scan"
        )));
    }
    if entry.root_page == 0 {
        return Err(file.corrupt(
            entry.page,
            format!("table {table:?} has root page 0 but is not a virtual table"),
        ));
    }
    let definition = parse_create_table(&sql).map_err(|w| {
        file.invalid(format!(
            "table {table:?}: cannot read its CREATE TABLE statement: {w}"
        ))
    })?;
    if definition.without_rowid {
        return Err(file.invalid(format!(
            "table {table:?} is a WITHOUT ROWID table (stored as an index b-tree); only rowid \
             tables can be scanned"
        )));
    }
    if entry.root_page == 1 {
        return Err(file.corrupt(
            entry.page,
            format!("table {table:?} claims root page 1, which is the schema's root"),
        ));
    }
    Ok(TableSchema {
        name: entry.name.clone(),
        root_page: entry.root_page,
        sql,
        columns: definition.column_names(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_decode_each_serial_type() {
        // header: size 6, types NULL, int8, 9 (=1), text(3), real; body: 0x2a "abc" 8 bytes.
        let mut rec = vec![6, 0, 1, 9, 19, 7, 0x2a, b'a', b'b', b'c'];
        rec.extend_from_slice(&1.5f64.to_be_bytes());
        let v = decode_record(&rec).unwrap();
        assert_eq!(
            v,
            [
                Value::Null,
                Value::Int(42),
                Value::Int(1),
                Value::Text(b"abc"),
                Value::Real(1.5)
            ]
        );
    }

    #[test]
    fn broken_records_are_errors() {
        assert!(decode_record(&[]).is_err());
        assert!(decode_record(&[9, 1]).is_err()); // header longer than the record
        assert!(decode_record(&[2, 19, b'a']).is_err()); // text runs past the end
        assert!(decode_record(&[2, 10]).is_err()); // reserved serial type
        assert!(decode_record(&[3, 0x81]).is_err()); // varint cut by the header end
        assert!(decode_record(&[0]).is_err()); // header size smaller than itself
    }
}
