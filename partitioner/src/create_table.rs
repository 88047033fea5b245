//! A parser for the `CREATE TABLE` statements stored in `sqlite_schema`, just deep enough to
//! list the columns and how each is stored.
//!
//! It understands SQLite's lexical rules (identifiers quoted as `"x"`, `[x]`, `` `x` `` or
//! `'x'`, doubled-quote escapes, `--` and `/* */` comments) and skips what is not a column:
//! table constraints (`CONSTRAINT`, `PRIMARY KEY (...)`, `UNIQUE`, `CHECK`, `FOREIGN KEY`),
//! parenthesised type arguments (`DECIMAL(15,2)`), and column constraints whose expressions
//! contain commas. Beyond names it records what changes a column's place in the record: a
//! `VIRTUAL` generated column is not stored at all, and an `INTEGER PRIMARY KEY` column is an
//! alias of the rowid, stored as NULL. It also keeps each column's `DEFAULT` clause
//! ([`DefaultClause`]), which is what SQLite reads from a record written before the column was
//! added by `ALTER TABLE ... ADD COLUMN`.
//!
//! `CREATE TABLE ... AS SELECT` is refused: SQLite never stores that form (it writes the
//! derived column list instead), so meeting it means another writer whose schema we cannot
//! read without running the query.

mod default_clause;
mod token;

pub use default_clause::{DefaultClause, Literal, Sign};
use token::{skip_group, tokenize, Token};

/// A parsed `CREATE TABLE` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTable {
    /// The schema qualifier (`main` in `CREATE TABLE main.t`), if written.
    pub schema: Option<String>,
    /// The table name, unquoted.
    pub name: String,
    /// The columns in declaration order.
    pub columns: Vec<ColumnDef>,
    /// Whether the table is declared `WITHOUT ROWID` (stored as an index b-tree).
    pub without_rowid: bool,
    /// Whether the table is declared `STRICT`.
    pub strict: bool,
}

/// One column of a [`CreateTable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    /// The column name, unquoted.
    pub name: String,
    /// The declared type as written, words joined by one space (`DECIMAL(15,2)`); empty when
    /// none was given.
    pub declared_type: String,
    /// Whether the column is the rowid alias (`INTEGER PRIMARY KEY`, not `DESC` in the column
    /// form, in a rowid table): its record slot holds NULL and its value is the rowid.
    pub rowid_alias: bool,
    /// How the column is generated, if it is a generated column.
    pub generated: Option<Generated>,
    /// The `DEFAULT` clause, if any: what SQLite reads for this column from a record written
    /// before `ALTER TABLE ... ADD COLUMN` added it (see [`crate::TablePlan::column_default`]).
    pub default: Option<DefaultClause>,
    /// The collating sequence named by the column's `COLLATE` clause, as written (the last one
    /// when several are given, as SQLite keeps); `None` means `BINARY`. Whether the name is a
    /// collation corescan can apply is for the comparison code to decide.
    pub collation: Option<String>,
    /// The expression of a generated column (`AS (expr)`), as SQL text without the outer
    /// parentheses, for computing a `VIRTUAL` column on read.
    pub generated_expr: Option<String>,
}

/// The storage of a generated column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generated {
    /// Computed when written and stored in the record.
    Stored,
    /// Computed when read; absent from the record (the default).
    Virtual,
}

impl CreateTable {
    /// The column names in declaration order.
    pub fn column_names(&self) -> Vec<String> {
        self.columns.iter().map(|c| c.name.clone()).collect()
    }

    /// The position of column `index` in the stored record, or `None` for a `VIRTUAL`
    /// generated column, which is not stored. Stored columns keep their declaration order with
    /// the virtual ones left out (SQLite's `sqlite3TableColumnToStorage`).
    pub fn record_position(&self, index: usize) -> Option<usize> {
        let is_virtual = |c: &ColumnDef| c.generated == Some(Generated::Virtual);
        if is_virtual(self.columns.get(index)?) {
            return None;
        }
        Some(
            self.columns[..index]
                .iter()
                .filter(|c| !is_virtual(c))
                .count(),
        )
    }

    /// The index of the rowid-alias column, if there is one.
    pub fn rowid_alias(&self) -> Option<usize> {
        self.columns.iter().position(|c| c.rowid_alias)
    }
}

/// Splits `tokens` at commas that are not inside parentheses.
fn split_top_level(tokens: &[Token]) -> Vec<&[Token]> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, t) in tokens.iter().enumerate() {
        match t {
            Token::Punct('(') => depth += 1,
            Token::Punct(')') => depth = depth.saturating_sub(1),
            Token::Punct(',') if depth == 0 => {
                parts.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}

/// Words that end a column's type name and start its constraints.
const CONSTRAINT_WORDS: &[&str] = &[
    "CONSTRAINT",
    "PRIMARY",
    "NOT",
    "NULL",
    "UNIQUE",
    "CHECK",
    "DEFAULT",
    "COLLATE",
    "REFERENCES",
    "GENERATED",
    "AS",
];

/// Words that start a table constraint rather than a column definition.
const TABLE_CONSTRAINT_WORDS: &[&str] = &["CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN"];

fn is_any_kw(t: &Token, words: &[&str]) -> bool {
    words.iter().any(|w| t.is_kw(w))
}

/// Parses one column definition: name, optional type, then constraints.
fn parse_column(item: &[Token]) -> Result<ColumnDef, String> {
    let name = item
        .first()
        .and_then(Token::ident)
        .ok_or("a column definition does not start with a name")?
        .to_string();
    let mut i = 1;
    let mut type_words: Vec<String> = Vec::new();
    while let Some(t) = item.get(i) {
        if is_any_kw(t, CONSTRAINT_WORDS) {
            break;
        }
        match t {
            Token::Punct('(') => {
                let end = skip_group(item, i)?;
                let args: String = item[i..end].iter().map(Token::text).collect();
                match type_words.last_mut() {
                    Some(last) => last.push_str(&args),
                    None => type_words.push(args),
                }
                i = end;
            }
            Token::Punct(_) => return Err(format!("unexpected {} in column {name}", t.text())),
            _ => {
                let word = t
                    .ident()
                    .ok_or_else(|| format!("unexpected {} in column {name}", t.text()))?;
                type_words.push(word.to_string());
                i += 1;
            }
        }
    }
    let mut column = ColumnDef {
        name,
        declared_type: type_words.join(" "),
        rowid_alias: false,
        generated: None,
        default: None,
        collation: None,
        generated_expr: None,
    };
    let mut primary_key = false;
    while let Some(t) = item.get(i) {
        if t.is_kw("PRIMARY") && item.get(i + 1).is_some_and(|t| t.is_kw("KEY")) {
            primary_key = true;
            // The documented quirk: `INTEGER PRIMARY KEY DESC` is not a rowid alias.
            column.rowid_alias = !item.get(i + 2).is_some_and(|t| t.is_kw("DESC"));
            i += 2;
        } else if t.is_kw("DEFAULT") {
            let (clause, end) = default_clause::parse_default(item, i + 1)?;
            column.default = Some(clause);
            i = end;
        } else if t.is_kw("COLLATE") {
            let name = item
                .get(i + 1)
                .and_then(Token::ident)
                .ok_or_else(|| format!("COLLATE without a name in column {}", column.name))?;
            column.collation = Some(name.to_string());
            i += 2;
        } else if t.is_kw("AS") {
            // `[GENERATED ALWAYS] AS (expr) [STORED | VIRTUAL]`.
            let end = match item.get(i + 1) {
                Some(Token::Punct('(')) => {
                    let end = skip_group(item, i + 1)?;
                    column.generated_expr = Some(tokens_to_sql(&item[i + 2..end - 1]));
                    end
                }
                _ => i + 1,
            };
            column.generated = Some(if item.get(end).is_some_and(|t| t.is_kw("STORED")) {
                Generated::Stored
            } else {
                Generated::Virtual
            });
            i = end;
        } else if matches!(t, Token::Punct('(')) {
            i = skip_group(item, i)?;
        } else {
            i += 1;
        }
    }
    column.rowid_alias &= primary_key && column.declared_type.eq_ignore_ascii_case("INTEGER");
    Ok(column)
}

/// Tokens as SQL text again: one space between tokens, none inside the two-character
/// operators the tokenizer splits (`||`, `<=`, `>=`, `<>`, `!=`, `==`, `<<`, `>>`).
fn tokens_to_sql(tokens: &[Token]) -> String {
    let mut out = String::new();
    for (k, t) in tokens.iter().enumerate() {
        if k > 0 {
            let joined = match (&tokens[k - 1], t) {
                (Token::Punct(a), Token::Punct(b)) => matches!(
                    (a, b),
                    ('|', '|')
                        | ('<', '=')
                        | ('>', '=')
                        | ('<', '>')
                        | ('!', '=')
                        | ('=', '=')
                        | ('<', '<')
                        | ('>', '>')
                ),
                _ => false,
            };
            if !joined {
                out.push(' ');
            }
        }
        out.push_str(&t.text());
    }
    out
}

/// For a `PRIMARY KEY (col)` table constraint naming exactly one column, that column's name.
fn single_primary_key_column(item: &[Token]) -> Option<String> {
    let at = item.iter().position(|t| t.is_kw("PRIMARY"))?;
    if !item.get(at + 1)?.is_kw("KEY") || item.get(at + 2) != Some(&Token::Punct('(')) {
        return None;
    }
    let end = skip_group(item, at + 2).ok()?;
    let inner = item.get(at + 3..end - 1)?;
    let parts = split_top_level(inner);
    match parts.as_slice() {
        [one] => one.first()?.ident().map(str::to_string),
        _ => None,
    }
}

/// Parses a `CREATE TABLE` statement as stored in `sqlite_schema`.
pub fn parse_create_table(sql: &str) -> Result<CreateTable, String> {
    let tokens = tokenize(sql)?;
    let mut i = 0;
    let expect = |i: usize, kw: &str| tokens.get(i).is_some_and(|t| t.is_kw(kw));
    if !expect(i, "CREATE") {
        return Err("the statement does not start with CREATE".to_string());
    }
    i += 1;
    if expect(i, "TEMP") || expect(i, "TEMPORARY") {
        i += 1;
    }
    if expect(i, "VIRTUAL") {
        return Err("a virtual table has no b-tree of its own".to_string());
    }
    if !expect(i, "TABLE") {
        return Err("not a CREATE TABLE statement".to_string());
    }
    i += 1;
    if expect(i, "IF") && expect(i + 1, "NOT") && expect(i + 2, "EXISTS") {
        i += 3;
    }
    let first = tokens
        .get(i)
        .and_then(Token::ident)
        .ok_or("missing table name")?
        .to_string();
    i += 1;
    let (schema, name) = if tokens.get(i) == Some(&Token::Punct('.')) {
        let name = tokens
            .get(i + 1)
            .and_then(Token::ident)
            .ok_or("missing table name after the schema name")?
            .to_string();
        i += 2;
        (Some(first), name)
    } else {
        (None, first)
    };
    if expect(i, "AS") {
        return Err("CREATE TABLE ... AS SELECT is not supported (no column list)".to_string());
    }
    if tokens.get(i) != Some(&Token::Punct('(')) {
        return Err("expected ( after the table name".to_string());
    }
    let end = skip_group(&tokens, i)?;
    let body = &tokens[i + 1..end - 1];
    let mut columns = Vec::new();
    let mut pk_column = None;
    for item in split_top_level(body) {
        let Some(first) = item.first() else {
            return Err("empty column definition".to_string());
        };
        if is_any_kw(first, TABLE_CONSTRAINT_WORDS) {
            if let Some(col) = single_primary_key_column(item) {
                pk_column = Some(col);
            }
            continue;
        }
        columns.push(parse_column(item)?);
    }
    if columns.is_empty() {
        return Err("the table has no columns".to_string());
    }
    let options = &tokens[end..];
    let without_rowid = options
        .windows(2)
        .any(|w| w[0].is_kw("WITHOUT") && w[1].is_kw("ROWID"));
    let strict = options.iter().any(|t| t.is_kw("STRICT"));
    if let Some(pk) = pk_column {
        if let Some(c) = columns
            .iter_mut()
            .find(|c| c.name.eq_ignore_ascii_case(&pk))
        {
            c.rowid_alias = c.declared_type.eq_ignore_ascii_case("INTEGER");
        }
    }
    if without_rowid {
        columns.iter_mut().for_each(|c| c.rowid_alias = false);
    }
    Ok(CreateTable {
        schema,
        name,
        columns,
        without_rowid,
        strict,
    })
}

#[cfg(test)]
mod tests;
