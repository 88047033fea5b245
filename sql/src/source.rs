//! Positions in the query's SQL text, as the parser reports them (1-based line and column), and
//! the text from one on: how an output column is named after the expression as written.
//! Layering: imports nothing from the crate.

use sqlparser::tokenizer::Location;

/// The text of `sql` from a parser location on.
pub(crate) fn text_at(sql: &str, at: Location) -> Option<&str> {
    sql.get(offset_of(sql, at)?..)
}

/// The byte offset of a 1-based line and character column.
pub(crate) fn offset_of(sql: &str, at: Location) -> Option<usize> {
    if at.line == 0 {
        return None;
    }
    let mut line = 1u64;
    let mut col = 1u64;
    for (i, c) in sql.char_indices() {
        if line == at.line && col == at.column {
            return Some(i);
        }
        if c == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
    }
    (line == at.line && col == at.column).then_some(sql.len())
}
