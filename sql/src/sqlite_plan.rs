//! SQLite's own choice of loop for a query over one table ([`choose`]): whether its planner
//! reads the table in rowid order or through one of its indexes (which one, forwards or
//! backwards), in `EXPLAIN QUERY PLAN`'s words.
//!
//! The rows a query returns under `LIMIT`/`OFFSET` without `ORDER BY`, and the order of ties
//! under `ORDER BY`, are the order of that loop, so corescan must know it exactly. Rather
//! than re-derive it (the single-table part of `where.c`: its loops, their `LogEst` costs,
//! `wherePathSatisfiesOrderBy`, `sqlite_stat1` and `sqlite_stat4` estimates), corescan asks
//! the planner itself: the SQLite 3.54 library the binary already links (for `printf`), on a
//! copy of the table's schema in memory. The copy has the table's `CREATE TABLE`, every
//! `CREATE INDEX` on it (the automatic `UNIQUE`/`PRIMARY KEY` indexes come with the table)
//! and the table's rows of `sqlite_stat1` and `sqlite_stat4`, loaded as `ANALYZE` loads them
//! (`ANALYZE sqlite_schema`, as the `sqlite3` shell's `.fullschema` does); no row of the
//! table. Without statistics SQLite's planner uses fixed estimates, not the table's size,
//! and with them only the statistics, so its choice on the copy is its choice on the file.
//!
//! The copy runs only the file's `CREATE TABLE`/`CREATE INDEX` statements (checked before
//! they run, on a connection that can attach no database) and `EXPLAIN` of the query: the
//! database file is never opened by SQLite here.
//!
//! Which loop ran comes from the bytecode (`EXPLAIN`): the b-tree cursor opened with
//! `OpenRead` that the loop steps with `Next` (forwards) or `Prev` (backwards), named by its
//! root page in the copy's schema. The report shows `EXPLAIN QUERY PLAN`'s lines.

use rusqlite::limits::Limit;
use rusqlite::{params_from_iter, Connection};

use partitioner::{StoredValue, TablePlan};

/// How SQLite's planner reads the table for a query.
#[derive(Debug, Clone, PartialEq)]
pub struct SqliteChoice {
    /// `EXPLAIN QUERY PLAN`'s lines, indented two spaces per level.
    pub lines: Vec<String>,
    /// The loop.
    pub access: Access,
    /// Whether SQLite sorts for `GROUP BY` (`USE TEMP B-TREE FOR GROUP BY`); when it does
    /// not, a grouped query's groups come in the loop's order.
    pub sorts_groups: bool,
    /// Whether the loop leaves after its first row (the min/max optimization's early out).
    pub first_row_only: bool,
}

/// The loop SQLite runs over the table.
#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    /// The table's b-tree in rowid order (a full scan, or a rowid range or point).
    Rowid {
        /// Descending rowid order.
        backward: bool,
    },
    /// An index, in its key order: the rows of equal keys by rowid.
    Index {
        /// The index's name.
        name: String,
        /// The index walked from its last entry.
        backward: bool,
        /// Its key columns, in order (the rowid follows them).
        key: Vec<KeyColumn>,
        /// The fields of each entry: its columns, key and other, and the rowid.
        fields: usize,
        /// A partial index (`CREATE INDEX ... WHERE`): only the rows its `WHERE` admits.
        partial: bool,
        /// A `UNIQUE` index (also one behind a `UNIQUE` or `PRIMARY KEY` constraint): no two
        /// entries with the same key unless it holds a NULL.
        unique: bool,
    },
    /// `MULTI-INDEX OR`: for each term of an `OR` in turn (`INDEX 1`, `INDEX 2`, ...), the
    /// rows its own loop finds, each row once (where an earlier term's loop found it).
    MultiOr(Vec<OrBranch>),
    /// Anything else: described by `EXPLAIN QUERY PLAN`'s line.
    Other(String),
}

/// The loop of one term of a `MULTI-INDEX OR`, forwards.
#[derive(Debug, Clone, PartialEq)]
pub enum OrBranch {
    /// The table's b-tree, in rowid order (`SEARCH t USING INTEGER PRIMARY KEY`).
    Rowid,
    /// An index, in its key order, the rows of equal keys by rowid.
    Index {
        /// The index's name.
        name: String,
        /// Its key columns, in order.
        key: Vec<KeyColumn>,
        /// The fields of each entry: its columns, key and other, and the rowid.
        fields: usize,
    },
}

/// One key column of an index.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyColumn {
    /// What the column holds: a table column by name, or the text of an expression.
    pub source: KeySource,
    /// `DESC` in the index.
    pub descending: bool,
    /// The collation's name (`BINARY`, `NOCASE`, `RTRIM`, or one SQLite does not know).
    pub collation: String,
}

/// What an index key column holds.
#[derive(Debug, Clone, PartialEq)]
pub enum KeySource {
    /// A table column (its declared name).
    Column(String),
    /// An expression (index on expressions), from its `CREATE INDEX` statement.
    Expression(Box<sqlparser::ast::Expr>),
}

/// Why SQLite's choice could not be learnt.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ChoiceError(String);

impl From<rusqlite::Error> for ChoiceError {
    fn from(e: rusqlite::Error) -> Self {
        ChoiceError(e.to_string())
    }
}

/// SQLite's choice for `sql` (one `SELECT` from `table`'s table, whose subqueries may read
/// the tables of `others`), or `None` when the table has no index (its loop is then always in
/// rowid order).
pub fn choose(
    table: &TablePlan,
    sql: &str,
    others: &[TablePlan],
) -> Result<Option<SqliteChoice>, ChoiceError> {
    if table.indexes.is_empty() {
        return Ok(None);
    }
    ask(table, sql, others).map(Some)
}

/// [`choose`] asked of SQLite even for a table without an index (whose loop is a scan of the
/// table, forward or backward, which may still deliver a `GROUP BY` that holds the rowid).
pub fn ask(
    table: &TablePlan,
    sql: &str,
    others: &[TablePlan],
) -> Result<SqliteChoice, ChoiceError> {
    let db = replica(table, others)?;
    let lines = outer_lines(query_plan(&db, sql)?);
    // The statement's bytecode, prepared once for the loop and the first-row test.
    let ops = statement_ops(&db, sql)?;
    // SQLite 3.5x may run an uncorrelated `EXISTS` as a loop of the statement's own
    // (`SCAN t EXISTS USING COVERING INDEX ...`, outside the table's loop): its cursor on the
    // same table's b-trees cannot be told apart from the table's loop in the bytecode, so the
    // order of the rows is not known (found by the differential tester: the EXISTS loop's
    // index was taken for the table's).
    // A loop over another table is told apart by its b-trees (`loop_of`); one named by the
    // table's name or an alias may be over the table's own.
    let exists_loop = |l: &str| {
        let t = l.trim_start();
        let over = t.split_whitespace().nth(1).unwrap_or("");
        (t.starts_with("SCAN ") || t.starts_with("SEARCH "))
            && t.contains(" EXISTS")
            && !others.iter().any(|o| {
                o.table.name.eq_ignore_ascii_case(over)
                    && !o.table.name.eq_ignore_ascii_case(&table.table.name)
            })
    };
    let access = if let Some(l) = lines
        .iter()
        .find(|l| l.trim_start().starts_with("MULTI-INDEX OR") || exists_loop(l))
    {
        let other = Access::Other(l.trim().to_string());
        match lines.iter().any(|l| exists_loop(l)) {
            true => other,
            false => or_branches(&db, &lines, table)?.map_or(other, Access::MultiOr),
        }
    } else {
        loop_of(&db, &ops, table)?
    };
    let sorts_groups = lines
        .iter()
        .any(|l| l.contains("USE TEMP B-TREE FOR GROUP BY"));
    let first_row_only = stops_after_first_row(&ops);
    Ok(SqliteChoice {
        lines,
        access,
        sorts_groups,
        first_row_only,
    })
}

/// `EXPLAIN QUERY PLAN`'s lines for `sql` over `table` (all of them, indented two spaces per
/// level), from SQLite's planner on the copy of the table's schema and statistics.
pub(crate) fn plan_lines(table: &TablePlan, sql: &str) -> Result<Vec<String>, ChoiceError> {
    query_plan(&replica(table, &[])?, sql)
}

/// Whether the statement's loop leaves after its first row: the min/max optimization's
/// early out (`sqlite3WhereMinMaxOptEarlyOut`: a `Goto` from the loop's body past its `Next`
/// or `Prev`), taken where the loop's order delivers `min(x)`/`max(x)` first (an index on
/// `x`, or a `WHERE` that makes `x` one value: `x IS NULL`, `x = 5`).
fn stops_after_first_row(ops: &[Op]) -> bool {
    ops.iter().any(|next| {
        matches!(next.opcode.as_str(), "Next" | "Prev")
            && ops.iter().any(|g| {
                g.opcode == "Goto" && (next.p2..next.addr).contains(&g.addr) && g.p2 > next.addr
            })
    })
}

/// One instruction of a statement's bytecode (`EXPLAIN`).
struct Op {
    addr: i64,
    opcode: String,
    p1: i64,
    p2: i64,
}

/// The bytecode of `sql` without its subqueries' subroutines (`OP_BeginSubrtn` ...
/// `OP_Return`): their loops are not the statement's.
fn statement_ops(db: &Connection, sql: &str) -> Result<Vec<Op>, ChoiceError> {
    let mut stmt = db.prepare(&format!("EXPLAIN {sql}"))?;
    let ops: Vec<Op> = stmt
        .query_map([], |row| {
            Ok(Op {
                addr: row.get(0)?,
                opcode: row.get(1)?,
                p1: row.get(2)?,
                p2: row.get(3)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let mut outside = vec![true; ops.len()];
    for (i, op) in ops.iter().enumerate() {
        if op.opcode == "BeginSubrtn" {
            if let Some(end) = ops[i..]
                .iter()
                .position(|o| o.opcode == "Return" && o.p1 == op.p2)
            {
                outside[i..=i + end].iter_mut().for_each(|o| *o = false);
            }
        }
    }
    Ok(ops
        .into_iter()
        .zip(outside)
        .filter_map(|(op, keep)| keep.then_some(op))
        .collect())
}

/// `EXPLAIN QUERY PLAN`'s lines without those of the statement's subqueries (a `SCALAR
/// SUBQUERY` or `LIST SUBQUERY` line and the lines below it), which run apart from its loop.
fn outer_lines(lines: Vec<String>) -> Vec<String> {
    let depth = |l: &str| l.len() - l.trim_start().len();
    let mut inside: Option<usize> = None;
    let mut kept = Vec::with_capacity(lines.len());
    for l in lines {
        let d = depth(&l);
        if let Some(at) = inside {
            if d > at {
                continue;
            }
            inside = None;
        }
        let t = l.trim_start();
        if t.contains("SUBQUERY ") && (t.contains("SCALAR") || t.contains("LIST")) {
            inside = Some(d);
            continue;
        }
        kept.push(l);
    }
    kept
}

/// Whether `statement` (from the file's schema) is a `CREATE TABLE` or `CREATE [UNIQUE]
/// INDEX`: the only statements the copy runs.
fn is_create(statement: &str, what: &str) -> bool {
    let words: Vec<String> = statement
        .split(|c: char| c.is_whitespace() || c == '(' || c == '"' || c == '[' || c == '`')
        .filter(|w| !w.is_empty())
        .take(3)
        .map(str::to_ascii_uppercase)
        .collect();
    match words.as_slice() {
        [c, w, ..] if c == "CREATE" && w == what => true,
        [c, u, w] if c == "CREATE" && u == "UNIQUE" && w == what => true,
        _ => false,
    }
}

/// The in-memory copy of the schemas and statistics of `table` and of `others` (the tables
/// the statement's subqueries read).
fn replica(table: &TablePlan, others: &[TablePlan]) -> Result<Connection, ChoiceError> {
    let db = Connection::open_in_memory()?;
    // The statements come from the file: they can name no other database.
    db.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
    let mut copied: Vec<&TablePlan> = vec![table];
    for o in others {
        if !copied
            .iter()
            .any(|c| c.table.name.eq_ignore_ascii_case(&o.table.name))
        {
            copied.push(o);
        }
    }
    for table in &copied {
        create_table(&db, table)?;
    }
    if copied
        .iter()
        .any(|t| !t.stats.stat1.is_empty() || !t.stats.stat4.is_empty())
    {
        // Creates sqlite_stat1 (and sqlite_stat4), analyses nothing (the copy has no rows).
        db.execute_batch("ANALYZE sqlite_schema")?;
        for table in &copied {
            insert(&db, "sqlite_stat1", 3, &table.stats.stat1)?;
            insert(&db, "sqlite_stat4", 6, &table.stats.stat4)?;
        }
        // Loads them as opening the file would.
        db.execute_batch("ANALYZE sqlite_schema")?;
    }
    Ok(db)
}

/// Runs `table`'s `CREATE TABLE` and `CREATE INDEX` statements in the copy.
fn create_table(db: &Connection, table: &TablePlan) -> Result<(), ChoiceError> {
    let create = &table.table.sql;
    if !is_create(create, "TABLE") {
        return Err(ChoiceError(format!(
            "the table's schema entry is no CREATE TABLE: {create}"
        )));
    }
    db.execute(create, [])?;
    for index in &table.indexes {
        let Some(sql) = &index.sql else { continue };
        if !is_create(sql, "INDEX") {
            return Err(ChoiceError(format!(
                "index {:?}'s schema entry is no CREATE INDEX: {sql}",
                index.name
            )));
        }
        db.execute(sql, [])?;
    }
    Ok(())
}

fn insert(
    db: &Connection,
    table: &str,
    width: usize,
    rows: &[Vec<StoredValue>],
) -> Result<(), ChoiceError> {
    if rows.is_empty() {
        return Ok(());
    }
    let marks = vec!["?"; width].join(", ");
    let mut stmt = db.prepare(&format!("INSERT INTO {table} VALUES ({marks})"))?;
    for row in rows {
        let values = (0..width).map(|i| match row.get(i) {
            None | Some(StoredValue::Null) => rusqlite::types::Value::Null,
            Some(StoredValue::Integer(v)) => rusqlite::types::Value::Integer(*v),
            Some(StoredValue::Real(v)) => rusqlite::types::Value::Real(*v),
            Some(StoredValue::Text(v)) => rusqlite::types::Value::Text(v.clone()),
            Some(StoredValue::Blob(v)) => rusqlite::types::Value::Blob(v.clone()),
        });
        stmt.execute(params_from_iter(values))?;
    }
    Ok(())
}

/// `EXPLAIN QUERY PLAN`'s lines for `sql`, indented by depth.
fn query_plan(db: &Connection, sql: &str) -> Result<Vec<String>, ChoiceError> {
    let mut stmt = db.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
    let rows = stmt.query_map([], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, String>(3)?,
        ))
    })?;
    let mut depth_of: Vec<(i64, usize)> = Vec::new();
    let mut lines = Vec::new();
    for row in rows {
        let (id, parent, detail) = row?;
        let depth = depth_of
            .iter()
            .find(|(i, _)| *i == parent)
            .map_or(0, |(_, d)| d + 1);
        depth_of.push((id, depth));
        lines.push(format!("{}{detail}", "  ".repeat(depth)));
    }
    Ok(lines)
}

/// The loop of `sql`'s bytecode over the table: the `OpenRead` cursor that a `Next` or
/// `Prev` steps (an `IN` list's or a sorter's cursors are opened otherwise), or the table's
/// or index's single cursor of a loop that steps nothing (a point seek, `min()` by an index).
fn loop_of(db: &Connection, ops: &[Op], table: &TablePlan) -> Result<Access, ChoiceError> {
    let ops: Vec<(&str, i64, i64)> = ops
        .iter()
        .map(|o| (o.opcode.as_str(), o.p1, o.p2))
        .collect();
    // The b-trees of the table (itself and its indexes): a subquery's IN list read from
    // another table's index is stepped in the loop too.
    let names = object_names(db)?;
    let own: Vec<i64> = names
        .iter()
        .filter(|(_, _, _, t)| t.eq_ignore_ascii_case(&table.table.name))
        .map(|(r, ..)| *r)
        .collect();
    // cursor -> root page, for the cursors opened on the table's b-trees.
    let opened: Vec<(i64, i64)> = ops
        .iter()
        .filter(|(op, _, root)| *op == "OpenRead" && own.contains(root))
        .map(|(_, p1, p2)| (*p1, *p2))
        .collect();
    let stepped = ops.iter().rev().find_map(|(op, p1, _)| {
        let forwards = match *op {
            "Next" => true,
            "Prev" => false,
            _ => return None,
        };
        opened
            .iter()
            .find(|(c, _)| c == p1)
            .map(|&(_, root)| (root, !forwards))
    });
    let (root, backward) = match stepped {
        Some(s) => s,
        None => {
            // No loop: one seek. Its cursor: the index's if one is open, else the table's.
            let mut roots: Vec<i64> = opened.iter().map(|&(_, r)| r).collect();
            roots.dedup();
            // Only the table's own cursors count: a sorter under `ORDER BY ... LIMIT` also
            // starts at its `Last` entry (tester table seed 8348502656852254988).
            let starts_last = ops.iter().any(|(op, p1, _)| {
                matches!(*op, "Last" | "SeekLT" | "SeekLE") && opened.iter().any(|(c, _)| c == p1)
            });
            match roots.as_slice() {
                [] => return Ok(Access::Rowid { backward: false }),
                [one] => (*one, starts_last),
                _ => {
                    match roots.iter().find(|r| {
                        names
                            .iter()
                            .any(|(root, kind, ..)| root == *r && kind == "index")
                    }) {
                        Some(r) => (*r, starts_last),
                        None => (roots[0], starts_last),
                    }
                }
            }
        }
    };
    let Some((_, kind, name, _)) = names.iter().find(|(r, ..)| *r == root) else {
        return Err(ChoiceError(format!(
            "SQLite's loop reads root page {root}, which its copy of the schema does not list"
        )));
    };
    if kind == "table" {
        if !name.eq_ignore_ascii_case(&table.table.name) {
            return Err(ChoiceError(format!("SQLite's loop reads table {name:?}")));
        }
        return Ok(Access::Rowid { backward });
    }
    let (key, fields) = key_columns(db, name, table)?;
    let (partial, unique): (bool, bool) = db.query_row(
        "SELECT partial, \"unique\" FROM pragma_index_list(?1) WHERE name = ?2",
        [&table.table.name, name],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    Ok(Access::Index {
        key,
        fields,
        partial,
        unique,
        name: name.clone(),
        backward,
    })
}

/// The loops of a `MULTI-INDEX OR` (`lines` holding one, and no other loop): under it,
/// `INDEX 1`, `INDEX 2`, ... each over one `SEARCH` of the table, by its integer primary key
/// or through an index named in full. `None` for anything else (a nested `OR`, a `SCAN`, a
/// second `MULTI-INDEX OR`, another table's loop).
fn or_branches(
    db: &Connection,
    lines: &[String],
    table: &TablePlan,
) -> Result<Option<Vec<OrBranch>>, ChoiceError> {
    let depth = |l: &str| l.len() - l.trim_start().len();
    let Some(at) = lines
        .iter()
        .position(|l| l.trim_start().starts_with("MULTI-INDEX OR"))
    else {
        return Ok(None);
    };
    let top = depth(&lines[at]);
    let under: Vec<&String> = lines[at + 1..]
        .iter()
        .take_while(|l| depth(l) > top)
        .collect();
    // Outside it, only sorters (`USE TEMP B-TREE FOR ...`).
    let outside = lines[..at].iter().chain(&lines[at + 1 + under.len()..]);
    if outside
        .clone()
        .any(|l| !l.trim_start().starts_with("USE TEMP B-TREE FOR"))
    {
        return Ok(None);
    }
    if !under.len().is_multiple_of(2) {
        return Ok(None);
    }
    let mut branches = Vec::new();
    for (i, pair) in under.chunks(2).enumerate() {
        let (head, body) = (pair[0].trim_start(), pair[1].trim_start());
        if head != format!("INDEX {}", i + 1) || depth(pair[1]) <= depth(pair[0]) {
            return Ok(None);
        }
        // (The table, by its name or its alias: no other loop runs.)
        let Some((_, rest)) = body.strip_prefix("SEARCH ").and_then(|r| r.split_once(' ')) else {
            return Ok(None);
        };
        if rest.starts_with("USING INTEGER PRIMARY KEY (") {
            branches.push(OrBranch::Rowid);
            continue;
        }
        let Some(index) = rest
            .strip_prefix("USING COVERING INDEX ")
            .or_else(|| rest.strip_prefix("USING INDEX "))
            .and_then(|r| r.split_once(' '))
            .map(|(index, _)| index)
        else {
            return Ok(None);
        };
        if !table.indexes.iter().any(|i| i.name == index) {
            return Ok(None);
        }
        let (key, fields) = key_columns(db, index, table)?;
        branches.push(OrBranch::Index {
            name: index.to_string(),
            key,
            fields,
        });
    }
    Ok((branches.len() >= 2).then_some(branches))
}

/// `(rootpage, type, name, tbl_name)` of the copy's schema.
fn object_names(db: &Connection) -> Result<Vec<(i64, String, String, String)>, ChoiceError> {
    let mut stmt = db.prepare("SELECT rootpage, type, name, tbl_name FROM sqlite_schema")?;
    let rows = stmt
        .query_map([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// One row of `PRAGMA index_xinfo`: `cid`, column name, `desc`, collation, `key`.
type XinfoRow = (i64, Option<String>, bool, Option<String>, bool);

/// Index `name`'s key columns (`PRAGMA index_xinfo`), an expression's text taken from its
/// `CREATE INDEX` statement, and the number of fields of its entries.
fn key_columns(
    db: &Connection,
    name: &str,
    table: &TablePlan,
) -> Result<(Vec<KeyColumn>, usize), ChoiceError> {
    let mut stmt = db.prepare("SELECT cid, name, desc, coll, key FROM pragma_index_xinfo(?1)")?;
    let rows: Vec<XinfoRow> = stmt
        .query_map([name], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    let fields = rows.len();
    let mut expressions: Option<Vec<sqlparser::ast::Expr>> = None;
    let mut key = Vec::new();
    for (position, (cid, column, descending, collation, is_key)) in rows.into_iter().enumerate() {
        if !is_key {
            break;
        }
        let source = match (cid, column) {
            (-2, _) => {
                let texts = match &mut expressions {
                    Some(t) => t,
                    None => expressions.insert(index_expressions(table, name)?),
                };
                KeySource::Expression(Box::new(texts.get(position).cloned().ok_or_else(|| {
                    ChoiceError(format!("index {name:?}: key column {position} not found"))
                })?))
            }
            (_, Some(column)) => KeySource::Column(column),
            (_, None) => {
                return Err(ChoiceError(format!(
                    "index {name:?}: key column {position} has no name"
                )))
            }
        };
        key.push(KeyColumn {
            source,
            descending,
            collation: collation.unwrap_or_else(|| "BINARY".into()),
        });
    }
    Ok((key, fields))
}

/// The key columns of index `name`'s `CREATE INDEX` statement, each without its `COLLATE`
/// and `ASC`/`DESC` (which `PRAGMA index_xinfo` gives).
fn index_expressions(
    table: &TablePlan,
    name: &str,
) -> Result<Vec<sqlparser::ast::Expr>, ChoiceError> {
    use sqlparser::ast::{Expr, Statement};
    let sql = table
        .indexes
        .iter()
        .find(|i| i.name.eq_ignore_ascii_case(name))
        .and_then(|i| i.sql.as_deref())
        .ok_or_else(|| ChoiceError(format!("index {name:?} has no CREATE INDEX")))?;
    let statements =
        crate::dialect::parse(sql).map_err(|e| ChoiceError(format!("index {name:?}: {e}")))?;
    let Some(Statement::CreateIndex(create)) = statements.first() else {
        return Err(ChoiceError(format!("index {name:?}: no CREATE INDEX")));
    };
    Ok(create
        .columns
        .iter()
        .map(|c| {
            let mut e = &c.column.expr;
            while let Expr::Collate { expr, .. } = e {
                e = expr;
            }
            e.clone()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_create_statements_qualify() {
        assert!(is_create("CREATE TABLE t(a)", "TABLE"));
        assert!(is_create("create  unique index \"i\" on t(a)", "INDEX"));
        assert!(is_create("CREATE INDEX[i]ON t(a)", "INDEX"));
        assert!(!is_create("ATTACH 'x' AS y", "TABLE"));
        assert!(!is_create("CREATE VIEW v AS SELECT 1", "TABLE"));
        assert!(!is_create("CREATE TABLE t(a)", "INDEX"));
    }
}
