//! Names: columns (qualified or not, case-insensitively), the rowid under its three names,
//! generated columns (their expressions resolved in place), result aliases, and the row
//! stage's slots they read.

use engine::datatype3::{Affinity, Collation};
use engine::query::ir::{AggFunc, AggSpec, ColumnRead, Expr};
use engine::value::Value;
use partitioner::create_table::Generated;
use sqlparser::ast;

use super::typed::Typed;
use super::{GroupContext, Resolver, SlotKey, Stage};
use crate::error::{invalid, unsupported, SqlError};

impl Resolver<'_> {
    /// The table's column names in declaration order (for `*`).
    pub fn star(&self) -> Vec<String> {
        self.table
            .definition
            .columns
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }

    /// The declared name of the column `e` refers to, when `e` is a plain column reference
    /// (SQLite names such an output column after the column).
    pub fn column_name(&self, e: &ast::Expr) -> Option<String> {
        let name = match e {
            ast::Expr::Identifier(i) => &i.value,
            ast::Expr::CompoundIdentifier(parts) => &parts.last()?.value,
            // `true`/`false` naming a column (see `Resolver::resolve`).
            ast::Expr::Value(v) => match v.value {
                ast::Value::Boolean(b) => super::bool_word(b),
                _ => return None,
            },
            _ => return None,
        };
        let def = &self.table.definition;
        match def
            .columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
        {
            Some(c) => Some(c.name.clone()),
            // The rowid is named after the INTEGER PRIMARY KEY column when there is one.
            None if is_rowid_name(name) => Some(
                def.rowid_alias()
                    .map_or_else(|| "rowid".to_string(), |i| def.columns[i].name.clone()),
            ),
            None => None,
        }
    }

    /// Whether `name` is one of the table's columns or the rowid, which wins over a result
    /// alias of the same name everywhere but in `ORDER BY` (`lookupName` looks at the table
    /// first, at the result set only when nothing matched).
    pub fn names_a_column(&self, name: &str) -> bool {
        is_rowid_name(name)
            || self
                .table
                .definition
                .columns
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// The expression of result alias `name`, when aliases apply and `name` is no column.
    pub(super) fn alias_of(&self, name: &str) -> Option<ast::Expr> {
        if !self.aliases_enabled || self.names_a_column(name) {
            return None;
        }
        self.aliases
            .iter()
            .find(|(a, _)| a.eq_ignore_ascii_case(name))
            .map(|(_, e)| e.clone())
    }

    /// A (possibly qualified) name in `stage`: a column of the row, or, over a group, an
    /// error (a group shows no column outside its keys and aggregates).
    pub(super) fn identifier(
        &mut self,
        parts: &[ast::Ident],
        stage: &mut Stage<'_>,
    ) -> Result<Typed, SqlError> {
        match stage {
            Stage::Row => self.column(parts),
            Stage::Group(ctx) => self.bare_column(parts, ctx),
            // The window stage reads a column through an input slot (`outside_window`).
            Stage::Window(_) => crate::error::invalid(format!(
                "column {} read outside its window stage input",
                parts.last().map_or("", |p| p.value.as_str())
            )),
        }
    }

    /// A column read over a group outside its keys and aggregates (SQLite's "bare column"):
    /// its value in the row that shows the group's keys, kept as an [`AggFunc::Shown`]
    /// aggregate. A generated `VIRTUAL` column whose expression can fail is refused: SQLite
    /// computes it only in the rows it loads, and an executor computes it in others too.
    fn bare_column(
        &mut self,
        parts: &[ast::Ident],
        ctx: &mut GroupContext,
    ) -> Result<Typed, SqlError> {
        let t = self.column(parts)?;
        let plain = matches!(&t.expr, Expr::Column(s) if match self.columns.get(*s) {
            Some(ColumnRead::Record { .. } | ColumnRead::Rowid | ColumnRead::File) => true,
            Some(ColumnRead::Virtual { expr, .. }) => !expr.may_fail(),
            None => false,
        });
        if !plain {
            return bare_column(&parts.last().map(|p| p.value.clone()).unwrap_or_default());
        }
        let spec = AggSpec::new(AggFunc::Shown, Some(t.expr));
        let i = match ctx.aggregates.iter().position(|a| *a == spec) {
            Some(i) => i,
            None => {
                ctx.aggregates.push(spec);
                ctx.aggregates.len() - 1
            }
        };
        // The column's affinity and collation, as SQLite's TK_AGG_COLUMN keeps them.
        Ok(Typed {
            expr: Expr::Column(ctx.keys.len() + i),
            affinity: t.affinity,
            collation: t.collation,
        })
    }

    /// The rowid, whatever the table's columns are named.
    pub(crate) fn rowid(&mut self) -> Result<Typed, SqlError> {
        let s = self.slot(SlotKey::Rowid, |_| Ok(ColumnRead::Rowid))?;
        Ok(Typed {
            expr: Expr::Column(s),
            affinity: Some(Affinity::Integer),
            collation: None,
        })
    }

    /// The rowid as an expression if the query reads it already (`None` otherwise: nothing
    /// is added to what the scan decodes).
    pub(crate) fn rowid_if_read(&self) -> Option<Expr> {
        self.slot_of.get(&SlotKey::Rowid).map(|&s| Expr::Column(s))
    }

    /// Whether slot `slot` reads the rowid or a stored column whose equal values are equal
    /// in every way (`BINARY` collation aside): an `INTEGER`, `REAL`, `NUMERIC` or `TEXT`
    /// affinity converts what it stores, so `1` and `1.0` (or `'1'`) never sit side by side
    /// as they can in a column without a type.
    pub(crate) fn slot_is_canonical(&self, slot: usize) -> bool {
        match self.columns.get(slot) {
            Some(ColumnRead::Rowid) => true,
            Some(ColumnRead::Record { position, .. }) => {
                let def = &self.table.definition;
                def.columns
                    .iter()
                    .enumerate()
                    .find(|(i, _)| def.record_position(*i) == Some(*position))
                    .is_some_and(|(_, c)| {
                        !matches!(Affinity::of_column(c, def.strict), Affinity::Blob)
                    })
            }
            _ => false,
        }
    }

    fn slot(
        &mut self,
        key: SlotKey,
        read: impl FnOnce(&mut Self) -> Result<ColumnRead, SqlError>,
    ) -> Result<usize, SqlError> {
        if let Some(&s) = self.slot_of.get(&key) {
            return Ok(s);
        }
        let r = read(self)?;
        self.columns.push(r);
        let s = self.columns.len() - 1;
        self.slot_of.insert(key, s);
        Ok(s)
    }

    fn column(&mut self, parts: &[ast::Ident]) -> Result<Typed, SqlError> {
        let (name, qualifier) = match parts {
            [c] => (c, None),
            [t, c] => (c, Some(&t.value)),
            [s, t, c] if s.value.eq_ignore_ascii_case("main") => (c, Some(&t.value)),
            _ => {
                let all: Vec<&str> = parts.iter().map(|p| p.value.as_str()).collect();
                return invalid(format!("no such column: {}", all.join(".")));
            }
        };
        if let Some(q) = qualifier {
            if !self.qualifiers.contains(&q.to_ascii_lowercase()) {
                return invalid(format!("no such column: {q}.{}", name.value));
            }
        }
        let table = self.table;
        let def = &table.definition;
        let Some(index) = def
            .columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(&name.value))
        else {
            if is_rowid_name(&name.value) {
                let s = self.slot(SlotKey::Rowid, |_| Ok(ColumnRead::Rowid))?;
                return Ok(Typed {
                    expr: Expr::Column(s),
                    affinity: Some(Affinity::Integer),
                    collation: None,
                });
            }
            if self.files && name.value.eq_ignore_ascii_case("_file") {
                let s = self.slot(SlotKey::File, |_| Ok(ColumnRead::File))?;
                return Ok(Typed {
                    expr: Expr::Column(s),
                    affinity: Some(Affinity::Text),
                    collation: Some((Collation::Binary, false)),
                });
            }
            // SQLite reads a double-quoted name that is no column as a string literal.
            if name.quote_style == Some('"') && qualifier.is_none() {
                return Ok(Typed::plain(Expr::Literal(Value::text(name.value.clone()))));
            }
            return invalid(format!("no such column: {}", name.value));
        };
        let col = &def.columns[index];
        let affinity = Affinity::of_column(col, def.strict);
        // Every column but the rowid has a collation, BINARY when it declares none, and
        // that counts in a comparison as much as a declared one.
        let collation = match &col.collation {
            _ if col.rowid_alias => None,
            None => Some((Collation::Binary, false)),
            Some(n) => Some((
                Collation::from_name(n)
                    .ok_or_else(|| SqlError::Invalid(format!("no such collation sequence: {n}")))?,
                false,
            )),
        };
        let slot = if col.rowid_alias {
            self.slot(SlotKey::Rowid, |_| Ok(ColumnRead::Rowid))?
        } else if col.generated == Some(Generated::Virtual) {
            self.slot(SlotKey::Column(index), |r| {
                r.virtual_column(index, affinity)
            })?
        } else {
            let position = def
                .record_position(index)
                .ok_or_else(|| SqlError::Invalid(format!("column {} is not stored", col.name)))?;
            let default = table
                .column_default(&col.name)
                .map(Value::from)
                .map_err(|e| e.to_string());
            self.slot(SlotKey::Column(index), |_| {
                Ok(ColumnRead::Record {
                    position,
                    default,
                    real_affinity: affinity == Affinity::Real,
                })
            })?
        };
        Ok(Typed {
            expr: Expr::Column(slot),
            affinity: Some(affinity),
            collation,
        })
    }

    fn virtual_column(&mut self, index: usize, affinity: Affinity) -> Result<ColumnRead, SqlError> {
        let col = &self.table.definition.columns[index];
        if self.resolving.contains(&index) {
            return invalid(format!("generated column loop on {}", col.name));
        }
        let Some(text) = col.generated_expr.clone() else {
            return invalid(format!(
                "generated column {} has no expression in its CREATE TABLE",
                col.name
            ));
        };
        let parsed = sqlparser::parser::Parser::new(&crate::dialect::Sqlite)
            .try_with_sql(&text)
            .and_then(|mut p| p.parse_expr())
            .map_err(|e| {
                SqlError::Invalid(format!(
                    "generated column {}: cannot parse its expression {text:?}: {e}",
                    col.name
                ))
            })?;
        self.resolving.push(index);
        let outer = std::mem::replace(&mut self.source, text);
        let r = self.resolve(&parsed, &mut Stage::Row, 0);
        self.source = outer;
        self.resolving.pop();
        Ok(ColumnRead::Virtual {
            expr: r?.expr,
            affinity,
        })
    }
}

/// The error for a generated column that can fail, read over a group outside its keys and aggregates.
fn bare_column<T>(name: &str) -> Result<T, SqlError> {
    unsupported(format!(
        "generated column {name} outside GROUP BY and outside an aggregate (a bare column \
         whose expression can fail)"
    ))
}

/// Whether `name` is one of the rowid's names.
fn is_rowid_name(name: &str) -> bool {
    ["rowid", "_rowid_", "oid"]
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
}
