//! One table's columns over several files: the same rule as a local scan of many files
//! (`corescan_sql::union_table`): the first file's columns, then those only later files have,
//! matched by name ASCII case-insensitively; a column some files lack reads NULL there.
//!
//! Layering: above [`crate::error`].

use partitioner::create_table::{parse_create_table, CreateTable};

use crate::error::Error;

/// The definition of `table` whose `CREATE TABLE` statements, in file order, are `sqls`.
pub fn merge_definitions(table: &str, sqls: &[String]) -> Result<CreateTable, Error> {
    let parse = |sql: &str| {
        parse_create_table(sql).map_err(|e| {
            Error::Cluster(format!(
                "table {table:?}: cannot read its CREATE TABLE: {e}"
            ))
        })
    };
    let [first, rest @ ..] = sqls else {
        return Err(Error::Cluster(format!("table {table:?}: no file holds it")));
    };
    let mut base = parse(first)?;
    for sql in rest {
        for column in parse(sql)?.columns {
            if base
                .columns
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(&column.name))
            {
                continue;
            }
            if column.rowid_alias || column.generated.is_some() {
                return Err(Error::Cluster(format!(
                    "table {table:?}: column {:?} is {} in some files, and earlier files have no \
                     such column",
                    column.name,
                    if column.rowid_alias {
                        "the INTEGER PRIMARY KEY (the rowid)"
                    } else {
                        "a generated column"
                    }
                )));
            }
            base.columns.push(column);
        }
    }
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_columns_are_added_once() {
        let def = merge_definitions(
            "t",
            &[
                "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT)".into(),
                "CREATE TABLE t(id INTEGER PRIMARY KEY, A TEXT, b REAL)".into(),
            ],
        )
        .unwrap();
        let names: Vec<&str> = def.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["id", "a", "b"]);
        let e = merge_definitions(
            "t",
            &[
                "CREATE TABLE t(a)".into(),
                "CREATE TABLE t(id INTEGER PRIMARY KEY, a)".into(),
            ],
        )
        .unwrap_err();
        assert!(e.to_string().contains("INTEGER PRIMARY KEY"), "{e}");
    }
}
