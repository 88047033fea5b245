//! Expression resolution: `sqlparser` expressions to the engine's [`Expr`], with each
//! expression's affinity and collation worked out as SQLite does (`sqlite3ExprAffinity`,
//! `sqlite3ExprCollSeq`, `sqlite3BinaryCompareCollSeq`), so every comparison's conversion is
//! fixed at planning.

use std::collections::HashMap;

use engine::datatype3::{comparison_affinity, Affinity, Collation};
use engine::query::ir::{AggFunc, AggSpec, ArithOp, CmpOp, ColumnRead, Expr, Function};
use engine::value::Value;
use partitioner::create_table::Generated;
use partitioner::TablePlan;
use sqlparser::ast::{self, BinaryOperator, UnaryOperator};

use super::error::{invalid, unsupported, SqlError};
use super::source::text_at;

/// A resolved expression with the affinity and collation SQLite gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Typed {
    /// The expression.
    pub expr: Expr,
    /// Its affinity (a column's, a `CAST`'s), if any.
    pub affinity: Option<Affinity>,
    /// Its collation, if any, and whether it was written (`COLLATE`) rather than declared.
    pub collation: Option<(Collation, bool)>,
}

impl Typed {
    fn plain(expr: Expr) -> Typed {
        Typed {
            expr,
            affinity: None,
            collation: None,
        }
    }

    /// This expression under an explicit `COLLATE`, when `collation` is one.
    pub fn collated(self, collation: Option<Collation>) -> Typed {
        match collation {
            Some(c) => Typed {
                collation: Some((c, true)),
                ..self
            },
            None => self,
        }
    }

    /// The collation of an ordering or grouping by this expression.
    pub fn collation(&self) -> Collation {
        self.collation.map_or(Collation::Binary, |c| c.0)
    }
}

/// The collation of a comparison of `l` with `r` (`sqlite3BinaryCompareCollSeq`).
pub(super) fn binary_collation(l: &Typed, r: &Typed) -> Collation {
    match (l.collation, r.collation) {
        (Some((c, true)), _) => c,
        (_, Some((c, true))) => c,
        (Some((c, _)), _) => c,
        (_, Some((c, _))) => c,
        _ => Collation::Binary,
    }
}

/// The explicit collation of an operator's operands, which its result carries.
fn carried_collation(l: &Typed, r: &Typed) -> Option<(Collation, bool)> {
    first_explicit([l, r])
}

/// The first explicit collation among an expression's operands, in SQLite's order of them
/// (its left operand, then its right one or its list), which the expression carries: every
/// operator, whatever its result, is marked `EP_Collate` when an operand is, and
/// `sqlite3ExprCollSeq` walks down the marked operands to the `COLLATE` (the differential
/// tester's run seed 1796129852002950112: `b || ((b COLLATE NOCASE) IN (r))` orders under
/// NOCASE).
fn first_explicit<'a>(operands: impl IntoIterator<Item = &'a Typed>) -> Option<(Collation, bool)> {
    operands
        .into_iter()
        .find_map(|t| t.collation.filter(|c| c.1))
}

/// Where an expression is evaluated.
pub enum Stage<'a> {
    /// Over a decoded record.
    Row,
    /// Over a group: its keys, then its aggregates.
    Group(&'a mut GroupContext),
}

/// The group stage's slots: keys (row-stage expressions) and aggregates collected while
/// resolving.
#[derive(Debug, Default)]
pub struct GroupContext {
    /// The group keys.
    pub keys: Vec<Typed>,
    /// The aggregates found so far.
    pub aggregates: Vec<AggSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum SlotKey {
    Rowid,
    Column(usize),
}

/// Resolves names against one table and allocates the row stage's slots.
pub struct Resolver<'t> {
    table: &'t TablePlan,
    qualifiers: Vec<String>,
    /// The row stage's slots.
    pub columns: Vec<ColumnRead>,
    slot_of: HashMap<SlotKey, usize>,
    /// Virtual columns being resolved (a cycle guard).
    resolving: Vec<usize>,
    /// The SQL text being resolved (the query, or a generated column's expression).
    source: String,
    /// Result-column aliases and their expressions: SQLite resolves a name that is no column
    /// to one in `WHERE`, `GROUP BY`, `HAVING` and `ORDER BY` (not in the result list).
    pub aliases: Vec<(String, ast::Expr)>,
    /// Whether [`Self::aliases`] apply (off while the result list itself is resolved).
    pub aliases_enabled: bool,
    alias_depth: usize,
}

const MAX_DEPTH: usize = 200;

fn ident_name(parts: &ast::ObjectName) -> Result<Vec<String>, SqlError> {
    parts
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => Ok(i.value.clone()),
            other => unsupported(format!("name {other}")),
        })
        .collect()
}

/// The collation a `COLLATE` clause names.
pub(crate) fn collation_named(name: &ast::ObjectName) -> Result<Collation, SqlError> {
    let name = ident_name(name)?.join(".");
    Collation::from_name(&name)
        .ok_or_else(|| SqlError::Invalid(format!("no such collation sequence: {name}")))
}

impl<'t> Resolver<'t> {
    /// A resolver for `table`, which the query may also call `alias`.
    pub fn new(table: &'t TablePlan, alias: Option<&str>, sql: &str) -> Self {
        let mut qualifiers = vec![table.table.name.to_ascii_lowercase()];
        if let Some(a) = alias {
            qualifiers.push(a.to_ascii_lowercase());
        }
        Resolver {
            table,
            qualifiers,
            columns: Vec::new(),
            slot_of: HashMap::new(),
            resolving: Vec::new(),
            source: sql.to_string(),
            aliases: Vec::new(),
            aliases_enabled: false,
            alias_depth: 0,
        }
    }

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
        let parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::SQLiteDialect {})
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

    /// Resolves `e` in `stage`.
    pub fn resolve(
        &mut self,
        e: &ast::Expr,
        stage: &mut Stage<'_>,
        depth: usize,
    ) -> Result<Typed, SqlError> {
        if depth > MAX_DEPTH {
            return invalid("expression nested too deeply");
        }
        if let Stage::Group(ctx) = stage {
            // A subexpression equal to a group key reads the key; one without columns is a
            // constant; anything else is taken apart.
            let saved = (self.columns.len(), self.slot_of.clone());
            if let Ok(t) = self.resolve(e, &mut Stage::Row, depth + 1) {
                if let Some(i) = ctx.keys.iter().position(|k| k.expr == t.expr) {
                    let k = &ctx.keys[i];
                    return Ok(Typed {
                        expr: Expr::Column(i),
                        affinity: k.affinity,
                        collation: k.collation,
                    });
                }
                if !uses_slots(&t.expr) {
                    return Ok(t);
                }
            }
            // Forget slots allocated only for the attempt.
            self.columns.truncate(saved.0);
            self.slot_of = saved.1;
        }
        let d = depth + 1;
        if let ast::Expr::Identifier(i) = e {
            if let Some(aliased) = self.alias_of(&i.value) {
                if self.alias_depth > 8 {
                    return invalid(format!("alias {} refers to itself", i.value));
                }
                self.alias_depth += 1;
                let r = self.resolve(&aliased, stage, d);
                self.alias_depth -= 1;
                return r;
            }
        }
        Ok(match e {
            ast::Expr::Identifier(i) => match stage {
                Stage::Row => self.column(std::slice::from_ref(i))?,
                Stage::Group(_) => return bare_column(&i.value),
            },
            ast::Expr::CompoundIdentifier(parts) => match stage {
                Stage::Row => self.column(parts)?,
                Stage::Group(_) => {
                    return bare_column(&parts.last().map(|p| p.value.clone()).unwrap_or_default())
                }
            },
            ast::Expr::Value(v) => Typed::plain(Expr::Literal(self.literal_at(v, false)?)),
            ast::Expr::Nested(x) => self.resolve(x, stage, d)?,
            ast::Expr::UnaryOp { op, expr } => {
                // sqlparser binds COLLATE tighter than a sign: `-1 COLLATE x` is SQLite's
                // `(-1) COLLATE x`, so that `-9223372036854775808 COLLATE NOCASE` is the
                // smallest integer, not the negated real 9223372036854775808.0 (run seed
                // 1796142816714926668).
                if let (UnaryOperator::Minus, ast::Expr::Collate { expr: x, collation }) =
                    (op, expr.as_ref())
                {
                    let rotated = ast::Expr::Collate {
                        expr: Box::new(ast::Expr::UnaryOp {
                            op: UnaryOperator::Minus,
                            expr: x.clone(),
                        }),
                        collation: collation.clone(),
                    };
                    return self.resolve(&rotated, stage, d);
                }
                if let (UnaryOperator::Minus, ast::Expr::Value(v)) = (op, expr.as_ref()) {
                    if matches!(
                        v.value,
                        ast::Value::Number(..) | ast::Value::HexStringLiteral(_)
                    ) {
                        return Ok(Typed::plain(Expr::Literal(self.literal_at(v, true)?)));
                    }
                }
                // sqlparser parses the operand of `~` at the precedence of binary `+`, so it
                // takes in `*`, `/`, `%` and `||`; SQLite's `~` binds tighter than any binary
                // operator: `~a || b` is `(~a) || b` (the differential tester's default seed).
                if let (
                    UnaryOperator::BitwiseNot,
                    ast::Expr::BinaryOp {
                        left,
                        op: inner,
                        right,
                    },
                ) = (op, expr.as_ref())
                {
                    if matches!(
                        inner,
                        BinaryOperator::Multiply
                            | BinaryOperator::Divide
                            | BinaryOperator::Modulo
                            | BinaryOperator::StringConcat
                    ) {
                        let rotated = ast::Expr::BinaryOp {
                            left: Box::new(ast::Expr::UnaryOp {
                                op: UnaryOperator::BitwiseNot,
                                expr: left.clone(),
                            }),
                            op: inner.clone(),
                            right: right.clone(),
                        };
                        return self.resolve(&rotated, stage, d);
                    }
                }
                let x = self.resolve(expr, stage, d)?;
                match op {
                    UnaryOperator::Minus => Typed {
                        expr: Expr::Negate(Box::new(x.expr)),
                        affinity: None,
                        collation: x.collation.filter(|c| c.1),
                    },
                    // Unary plus drops the affinity but keeps the collation.
                    UnaryOperator::Plus => Typed {
                        expr: x.expr,
                        affinity: None,
                        collation: x.collation,
                    },
                    UnaryOperator::Not => Typed {
                        collation: first_explicit([&x]),
                        ..Typed::plain(Expr::Not(Box::new(x.expr)))
                    },
                    UnaryOperator::BitwiseNot => Typed {
                        collation: first_explicit([&x]),
                        ..Typed::plain(Expr::BitNot(Box::new(x.expr)))
                    },
                    other => return unsupported(format!("operator {other}")),
                }
            }
            ast::Expr::BinaryOp { left, op, right } => {
                let l = self.resolve(left, stage, d)?;
                let r = self.resolve(right, stage, d)?;
                // An operand with an aggregate stays, even where a literal decides: which
                // aggregates the expressions name decides the row that shows a group's keys
                // (engine::query::key_row), as SQLite's AggInfo lists them all.
                let aggregates = matches!(op, BinaryOperator::And | BinaryOperator::Or)
                    && (super::aggregate::has_aggregate(left)
                        || super::aggregate::has_aggregate(right));
                if aggregates {
                    let (l, r) = (Box::new(l.expr), Box::new(r.expr));
                    Typed::plain(if *op == BinaryOperator::And {
                        Expr::And(l, r)
                    } else {
                        Expr::Or(l, r)
                    })
                } else {
                    let truth = (has_truth_value(left), has_truth_value(right));
                    binary(op, l, r, truth)?
                }
            }
            ast::Expr::IsNull(x) | ast::Expr::IsNotNull(x) if never_null_literal(x) => {
                // SQLite's parser answers these itself (sqlite3PExprIsNull): the integer
                // literal it writes is one an AND or OR then reduces by (see `and_or`).
                let not_null = matches!(e, ast::Expr::IsNotNull(_));
                Typed::plain(Expr::Literal(Value::Integer(i64::from(not_null))))
            }
            ast::Expr::IsNull(x) | ast::Expr::IsNotNull(x) => {
                let x = self.resolve(x, stage, d)?;
                Typed {
                    collation: first_explicit([&x]),
                    ..Typed::plain(Expr::IsNull(
                        Box::new(x.expr),
                        matches!(e, ast::Expr::IsNotNull(_)),
                    ))
                }
            }
            ast::Expr::IsDistinctFrom(a, b) | ast::Expr::IsNotDistinctFrom(a, b) => {
                let l = self.resolve(a, stage, d)?;
                let r = self.resolve(b, stage, d)?;
                let op = if matches!(e, ast::Expr::IsDistinctFrom(..)) {
                    CmpOp::IsNot
                } else {
                    CmpOp::Is
                };
                compare(op, l, r)
            }
            ast::Expr::IsTrue(_)
            | ast::Expr::IsFalse(_)
            | ast::Expr::IsNotTrue(_)
            | ast::Expr::IsNotFalse(_) => return unsupported("IS TRUE / IS FALSE"),
            ast::Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let x = self.resolve(expr, stage, d)?;
                let lo = self.resolve(low, stage, d)?;
                let hi = self.resolve(high, stage, d)?;
                let carried = first_explicit([&x, &lo, &hi]);
                let both = Expr::And(
                    Box::new(compare(CmpOp::Ge, x.clone(), lo).expr),
                    Box::new(compare(CmpOp::Le, x, hi).expr),
                );
                Typed {
                    collation: carried,
                    ..Typed::plain(if *negated {
                        Expr::Not(Box::new(both))
                    } else {
                        both
                    })
                }
            }
            ast::Expr::In {
                expr,
                target,
                negated,
                ..
            } => {
                let ast::InTarget::List(list) = target else {
                    return unsupported("subqueries (IN (SELECT ...))");
                };
                let x = self.resolve(expr, stage, d)?;
                let mut carried = first_explicit([&x]);
                let mut items = Vec::with_capacity(list.len());
                for item in list {
                    let t = self.resolve(item, stage, d)?;
                    carried = carried.or(first_explicit([&t]));
                    items.push((t.expr, comparison_affinity(x.affinity, None)));
                }
                Typed {
                    collation: carried,
                    ..Typed::plain(Expr::InList {
                        collation: x.collation(),
                        expr: Box::new(x.expr),
                        list: items,
                        negated: *negated,
                    })
                }
            }
            ast::Expr::Like {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            } => {
                if *any {
                    return unsupported("LIKE ANY");
                }
                let x = self.resolve(expr, stage, d)?;
                let p = self.resolve(pattern, stage, d)?;
                let escape = match escape_char {
                    Some(c) => Some(self.resolve(c, stage, d)?),
                    None => None,
                };
                // `x LIKE p ESCAPE e` is the call `like(p, x, e)` to SQLite.
                let carried = first_explicit([&p, &x].into_iter().chain(escape.as_ref()));
                Typed {
                    collation: carried,
                    ..Typed::plain(Expr::Like {
                        expr: Box::new(x.expr),
                        pattern: Box::new(p.expr),
                        escape: escape.map(|t| Box::new(t.expr)),
                        negated: *negated,
                        glob: false,
                    })
                }
            }
            ast::Expr::ILike { .. } => {
                return unsupported("ILIKE (SQLite's LIKE is already case-insensitive)")
            }
            ast::Expr::SimilarTo { .. } | ast::Expr::RLike { .. } => {
                return unsupported("SIMILAR TO / REGEXP")
            }
            ast::Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                let base = match operand {
                    Some(o) => Some(self.resolve(o, stage, d)?),
                    None => None,
                };
                let mut whens = Vec::with_capacity(conditions.len());
                // The result carries the first explicit COLLATE of its parts, in order.
                let mut carried = base.as_ref().and_then(|b| b.collation.filter(|c| c.1));
                for c in conditions {
                    let w = self.resolve(&c.condition, stage, d)?;
                    let t = self.resolve(&c.result, stage, d)?;
                    for part in [&w, &t] {
                        if carried.is_none() {
                            carried = part.collation.filter(|c| c.1);
                        }
                    }
                    let (affinity, collation) = match &base {
                        Some(b) => (
                            comparison_affinity(b.affinity, w.affinity),
                            binary_collation(b, &w),
                        ),
                        None => (None, Collation::Binary),
                    };
                    whens.push((w.expr, t.expr, affinity, collation));
                }
                let otherwise = match else_result {
                    Some(x) => {
                        let e = self.resolve(x, stage, d)?;
                        if carried.is_none() {
                            carried = e.collation.filter(|c| c.1);
                        }
                        Some(Box::new(e.expr))
                    }
                    None => None,
                };
                Typed {
                    expr: Expr::Case {
                        operand: base.map(|b| Box::new(b.expr)),
                        whens,
                        otherwise,
                    },
                    affinity: None,
                    collation: carried,
                }
            }
            ast::Expr::Cast {
                kind,
                expr,
                data_type,
                format,
                ..
            } => {
                if !matches!(kind, ast::CastKind::Cast) || format.is_some() {
                    return unsupported(format!("{e}"));
                }
                let x = self.resolve(expr, stage, d)?;
                let affinity = Affinity::of_declared_type(&data_type.to_string());
                Typed {
                    expr: Expr::Cast(Box::new(x.expr), affinity),
                    affinity: Some(affinity),
                    collation: x.collation,
                }
            }
            ast::Expr::Collate { expr, collation } => {
                let x = self.resolve(expr, stage, d)?;
                Typed {
                    expr: x.expr,
                    affinity: x.affinity,
                    collation: Some((collation_named(collation)?, true)),
                }
            }
            ast::Expr::Function(f) => self.function(f, stage, d)?,
            ast::Expr::Trim {
                trim_where,
                trim_what,
                expr,
                trim_characters,
            } => {
                if trim_where.is_some() || trim_what.is_some() {
                    return unsupported("TRIM(BOTH/LEADING/TRAILING ... FROM ...)");
                }
                let mut typed = vec![self.resolve(expr, stage, d)?];
                for c in trim_characters.iter().flatten() {
                    typed.push(self.resolve(c, stage, d)?);
                }
                if typed.len() > 2 {
                    return invalid("wrong number of arguments to function trim()");
                }
                special_function(Function::Trim, typed)
            }
            ast::Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let Some(from) = substring_from else {
                    return invalid("wrong number of arguments to function substr()");
                };
                let mut typed = vec![self.resolve(expr, stage, d)?, self.resolve(from, stage, d)?];
                if let Some(n) = substring_for {
                    typed.push(self.resolve(n, stage, d)?);
                }
                special_function(Function::Substr, typed)
            }
            ast::Expr::Subquery(_) | ast::Expr::Exists { .. } => return unsupported("subqueries"),
            other => return unsupported(format!("the expression {other}")),
        })
    }

    /// The expression of result alias `name`, when aliases apply and `name` is no column.
    fn alias_of(&self, name: &str) -> Option<ast::Expr> {
        if !self.aliases_enabled || self.names_a_column(name) {
            return None;
        }
        self.aliases
            .iter()
            .find(|(a, _)| a.eq_ignore_ascii_case(name))
            .map(|(_, e)| e.clone())
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

    /// A literal, telling `0x1F` (an integer) from `X'1F'` (a blob) by the source text, which
    /// the parser gives the same token.
    fn literal_at(&self, v: &ast::ValueWithSpan, negative: bool) -> Result<Value, SqlError> {
        if let ast::Value::HexStringLiteral(h) = &v.value {
            let written = text_at(&self.source, v.span.start);
            if written.is_some_and(|t| t.starts_with("0x") || t.starts_with("0X")) {
                return literal(&ast::Value::Number(format!("0x{h}"), false), negative);
            }
        }
        literal(&v.value, negative)
    }

    fn function(
        &mut self,
        f: &ast::Function,
        stage: &mut Stage<'_>,
        d: usize,
    ) -> Result<Typed, SqlError> {
        let name = ident_name(&f.name)?.join(".").to_ascii_lowercase();
        if f.over.is_some() {
            return unsupported(format!("window functions ({name}() OVER ...)"));
        }
        if f.filter.is_some() || !f.within_group.is_empty() || f.null_treatment.is_some() {
            return unsupported(format!("{name}() with FILTER or WITHIN GROUP"));
        }
        if !matches!(f.parameters, ast::FunctionArguments::None) {
            return unsupported(format!("{name}() with parameters"));
        }
        let (distinct, star, args): (bool, bool, Vec<&ast::Expr>) = match &f.args {
            ast::FunctionArguments::None => (false, false, Vec::new()),
            ast::FunctionArguments::Subquery(_) => return unsupported("subqueries"),
            ast::FunctionArguments::List(list) => {
                if !list.clauses.is_empty() {
                    return unsupported(format!("{name}() with ORDER BY or other clauses"));
                }
                let distinct = matches!(
                    list.duplicate_treatment,
                    Some(ast::DuplicateTreatment::Distinct)
                );
                let mut star = false;
                let mut args = Vec::new();
                for a in &list.args {
                    match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => args.push(e),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) => star = true,
                        other => return unsupported(format!("the function argument {other}")),
                    }
                }
                (distinct, star, args)
            }
        };
        let aggregate = match (name.as_str(), args.len(), star) {
            ("count", 0, _) => Some(AggFunc::CountStar),
            ("count", 1, false) => Some(AggFunc::Count),
            ("sum", 1, false) => Some(AggFunc::Sum),
            ("total", 1, false) => Some(AggFunc::Total),
            ("avg", 1, false) => Some(AggFunc::Avg),
            ("min", 1, false) => Some(AggFunc::Min),
            ("max", 1, false) => Some(AggFunc::Max),
            _ => None,
        };
        if let Some(func) = aggregate {
            let Stage::Group(ctx) = stage else {
                return invalid(format!("misuse of aggregate function {name}()"));
            };
            if distinct && func == AggFunc::CountStar {
                return invalid("DISTINCT aggregates must have exactly one argument");
            }
            let (arg, collation, carried) = match args.first() {
                Some(a) => {
                    let t = self.resolve(a, &mut Stage::Row, d)?;
                    let c = t.collation();
                    (Some(t.expr), c, t.collation.filter(|c| c.1))
                }
                None => (None, Collation::Binary, None),
            };
            let spec = AggSpec {
                func,
                arg,
                distinct,
                collation,
            };
            let keys = ctx.keys.len();
            let i = match ctx.aggregates.iter().position(|a| *a == spec) {
                Some(i) => i,
                None => {
                    ctx.aggregates.push(spec);
                    ctx.aggregates.len() - 1
                }
            };
            // The result carries its argument's explicit COLLATE (ORDER BY on it uses it).
            return Ok(Typed {
                expr: Expr::Column(keys + i),
                affinity: None,
                collation: carried,
            });
        }
        if star {
            return invalid(format!("wrong number of arguments to function {name}()"));
        }
        if distinct {
            return invalid(format!("DISTINCT is only for aggregates, not {name}()"));
        }
        let mut typed = Vec::with_capacity(args.len());
        for a in &args {
            typed.push(self.resolve(a, stage, d)?);
        }
        let n = typed.len();
        let first_collation = typed
            .iter()
            .find_map(|t| t.collation)
            .map_or(Collation::Binary, |c| c.0);
        let arity = |ok: bool| -> Result<(), SqlError> {
            if ok {
                Ok(())
            } else {
                invalid(format!("wrong number of arguments to function {name}()"))
            }
        };
        let func = match name.as_str() {
            "abs" => {
                arity(n == 1)?;
                Function::Abs
            }
            "coalesce" => {
                arity(n >= 2)?;
                Function::Coalesce
            }
            "ifnull" => {
                arity(n == 2)?;
                Function::Coalesce
            }
            "nullif" => {
                arity(n == 2)?;
                Function::NullIf(first_collation)
            }
            "length" => {
                arity(n == 1)?;
                Function::Length
            }
            "lower" => {
                arity(n == 1)?;
                Function::Lower
            }
            "upper" => {
                arity(n == 1)?;
                Function::Upper
            }
            "substr" | "substring" => {
                arity(n == 2 || n == 3)?;
                Function::Substr
            }
            "trim" => {
                arity(n == 1 || n == 2)?;
                Function::Trim
            }
            "ltrim" => {
                arity(n == 1 || n == 2)?;
                Function::LTrim
            }
            "rtrim" => {
                arity(n == 1 || n == 2)?;
                Function::RTrim
            }
            "round" => {
                arity(n == 1 || n == 2)?;
                Function::Round
            }
            "typeof" => {
                arity(n == 1)?;
                Function::TypeOf
            }
            "hex" => {
                arity(n == 1)?;
                Function::Hex
            }
            "instr" => {
                arity(n == 2)?;
                Function::Instr
            }
            "replace" => {
                arity(n == 3)?;
                Function::Replace
            }
            "min" => {
                arity(n >= 2)?;
                Function::Min(first_collation)
            }
            "max" => {
                arity(n >= 2)?;
                Function::Max(first_collation)
            }
            "date" => Function::Date,
            "time" => Function::Time,
            "datetime" => Function::DateTime,
            "julianday" => Function::JulianDay,
            "unixepoch" => Function::UnixEpoch,
            "timediff" => {
                arity(n == 2)?;
                Function::TimeDiff
            }
            // SQLite's keywords for the statement's time (keywords: no parentheses).
            "current_date" | "current_time" | "current_timestamp" => {
                if !matches!(f.args, ast::FunctionArguments::None) {
                    return invalid(format!("near \"(\": syntax error after {name}"));
                }
                match name.as_str() {
                    "current_date" => Function::Date,
                    "current_time" => Function::Time,
                    _ => Function::DateTime,
                }
            }
            "strftime" => {
                arity(n >= 1)?;
                Function::Strftime
            }
            "char" => Function::Char,
            // Planner hints that return their first argument: to the evaluator a one-argument
            // coalesce (a function call all the same: no affinity, no column collation).
            "likely" | "unlikely" => {
                arity(n == 1)?;
                Function::Coalesce
            }
            "likelihood" => {
                arity(n == 2)?;
                // resolve.c's exprProbability: a floating-point literal (not an integer, not
                // under a sign) of at most 1.0.
                if !is_probability(args[1]) {
                    return invalid(
                        "second argument to likelihood() must be a constant between 0.0 and 1.0",
                    );
                }
                typed.truncate(1);
                Function::Coalesce
            }
            _ => return invalid(format!("no such function: {name}")),
        };
        // A function's result has no affinity; `coalesce` and friends keep an explicit
        // collation of their arguments.
        let collation = typed.iter().find_map(|t| t.collation.filter(|c| c.1));
        Ok(Typed {
            expr: Expr::Function(func, typed.into_iter().map(|t| t.expr).collect()),
            affinity: None,
            collation,
        })
    }
}

/// A function the parser gives a syntax of its own (`substr`, `trim`), typed as any function:
/// no affinity, and the first explicit `COLLATE` of its arguments carried into its result
/// (the tester's run seed 1796116005243764172: `ORDER BY substr(s COLLATE NOCASE, ...)`).
fn special_function(func: Function, typed: Vec<Typed>) -> Typed {
    let collation = typed.iter().find_map(|t| t.collation.filter(|c| c.1));
    Typed {
        expr: Expr::Function(func, typed.into_iter().map(|t| t.expr).collect()),
        affinity: None,
        collation,
    }
}

/// Whether `e` is a probability to `likelihood()`: a floating-point literal token (with a
/// `.` or an exponent) whose value is at most 1.0.
fn is_probability(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Nested(x) => is_probability(x),
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(s, _) => {
                let float =
                    !s.starts_with("0x") && !s.starts_with("0X") && s.contains(['.', 'e', 'E']);
                float && s.parse::<f64>().is_ok_and(|r| r <= 1.0)
            }
            _ => false,
        },
        _ => false,
    }
}

/// Whether `e` is a number, text or blob literal, under any unary `+` or `-` and parentheses:
/// what SQLite's parser knows is never NULL (`sqlite3PExprIsNull`; a `"quoted"` name is an
/// identifier there, and NULL, TRUE and FALSE are not among them).
fn never_null_literal(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::UnaryOp {
            op: UnaryOperator::Plus | UnaryOperator::Minus,
            expr,
        }
        | ast::Expr::Nested(expr) => never_null_literal(expr),
        ast::Expr::Value(v) => matches!(
            v.value,
            ast::Value::Number(..)
                | ast::Value::SingleQuotedString(_)
                | ast::Value::HexStringLiteral(_)
        ),
        _ => false,
    }
}

/// `a AND b` or `a OR b` as SQLite codes it (`sqlite3ExprSimplifiedAndOr`): an integer literal
/// that decides the result stands for the whole (`x OR 1` is `1`, `x` never computed), one
/// that drops out leaves the truth value of the other operand (`1 AND x` is `NOT NOT x`).
/// Otherwise both operands are computed for a value and the engine's jump code decides in a
/// condition. Only literals written as such count (operands are built bottom-up, so a reduced
/// operand is seen as SQLite's reduction sees it); a constant that folds later does not, nor
/// an operand whose flag says SQLite does not mark it ([`has_truth_value`]).
fn and_or(and: bool, (a, a_marked): (Expr, bool), (b, b_marked): (Expr, bool)) -> Expr {
    let literal = |e: &Expr, marked: bool| match e {
        Expr::Literal(Value::Integer(i)) if marked => Some(*i != 0),
        _ => None,
    };
    let boolean = |e: Expr| match literal(&e, true) {
        Some(t) => Expr::Literal(Value::Integer(i64::from(t))),
        None => Expr::Not(Box::new(Expr::Not(Box::new(e)))),
    };
    let (la, lb) = (literal(&a, a_marked), literal(&b, b_marked));
    if la == Some(true) || lb == Some(false) {
        boolean(if and { b } else { a })
    } else if lb == Some(true) || la == Some(false) {
        boolean(if and { a } else { b })
    } else if and {
        Expr::And(Box::new(a), Box::new(b))
    } else {
        Expr::Or(Box::new(a), Box::new(b))
    }
}

fn bare_column<T>(name: &str) -> Result<T, SqlError> {
    unsupported(format!(
        "column {name} outside GROUP BY and outside an aggregate (SQLite takes it from an \
         arbitrary row of the group)"
    ))
}

fn is_rowid_name(name: &str) -> bool {
    ["rowid", "_rowid_", "oid"]
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
}

/// Whether `e` reads any slot (the engine's own test, which constant folding uses).
pub fn uses_slots(e: &Expr) -> bool {
    engine::query::fold::reads_slots(e)
}

fn compare(op: CmpOp, l: Typed, r: Typed) -> Typed {
    let affinity = comparison_affinity(l.affinity, r.affinity);
    let collation = binary_collation(&l, &r);
    let carried = carried_collation(&l, &r);
    Typed {
        collation: carried,
        ..Typed::plain(Expr::Compare {
            op,
            left: Box::new(l.expr),
            right: Box::new(r.expr),
            affinity,
            collation,
        })
    }
}

/// Whether SQLite's parser may have marked `e` always true or false (`EP_IsTrue`,
/// `EP_IsFalse`), which decides an `AND`/`OR` it is an operand of ([`and_or`]): only an
/// integer token that fits in 32 bits (`sqlite3ExprAlloc` with `sqlite3GetInt32`) is, among the
/// literals; `-1` is a negation of one and `9223372036854775807` too large (run seed
/// 1796149705910795367: `(NULL LIKE '%' ESCAPE 'ab') OR -1` computes the LIKE, and fails).
/// Other operands that plan to an integer (a reduced `AND`/`OR`, `IS NULL` of a literal,
/// `TRUE`) are the nodes SQLite marks.
pub(super) fn has_truth_value(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Nested(x) => has_truth_value(x),
        ast::Expr::UnaryOp {
            op: UnaryOperator::Plus | UnaryOperator::Minus,
            ..
        } => false,
        // A COLLATE or a function call (`likely(1)`) is a node of its own, never marked (run
        // seed 1796152070066248454: `(9223372036854775807 COLLATE BINARY) OR (x LIKE '%'
        // ESCAPE '')` computes the LIKE).
        ast::Expr::Collate { .. } | ast::Expr::Function(_) => false,
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => int32_token(n),
            // `0x1F` (an integer; `X'1F'` plans to a blob, never a truth value).
            ast::Value::HexStringLiteral(h) => int32_token(&format!("0x{h}")),
            _ => true,
        },
        _ => true,
    }
}

/// Whether the number token `n` is what `sqlite3GetInt32` reads whole: decimal digits, or
/// `0x` and hex digits, of a value below 2^31.
fn int32_token(n: &str) -> bool {
    let n = n.to_ascii_lowercase();
    if let Some(hex) = n.strip_prefix("0x") {
        let digits = hex.trim_start_matches('0');
        return !hex.is_empty()
            && hex.bytes().all(|c| c.is_ascii_hexdigit())
            && digits.len() <= 8
            && u32::from_str_radix(if digits.is_empty() { "0" } else { digits }, 16)
                .is_ok_and(|u| u < 0x8000_0000);
    }
    !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) && n.parse::<i32>().is_ok()
}

fn binary(op: &BinaryOperator, l: Typed, r: Typed, truth: (bool, bool)) -> Result<Typed, SqlError> {
    let carried = carried_collation(&l, &r);
    let arith = |o: ArithOp, l: Typed, r: Typed| Typed {
        expr: Expr::Arith(o, Box::new(l.expr), Box::new(r.expr)),
        affinity: None,
        collation: carried,
    };
    Ok(match op {
        BinaryOperator::Plus => arith(ArithOp::Add, l, r),
        BinaryOperator::Minus => arith(ArithOp::Sub, l, r),
        BinaryOperator::Multiply => arith(ArithOp::Mul, l, r),
        BinaryOperator::Divide => arith(ArithOp::Div, l, r),
        BinaryOperator::Modulo => arith(ArithOp::Rem, l, r),
        BinaryOperator::BitwiseAnd => arith(ArithOp::BitAnd, l, r),
        BinaryOperator::BitwiseOr => arith(ArithOp::BitOr, l, r),
        BinaryOperator::PGBitwiseShiftLeft => arith(ArithOp::ShiftLeft, l, r),
        BinaryOperator::PGBitwiseShiftRight => arith(ArithOp::ShiftRight, l, r),
        BinaryOperator::StringConcat => Typed {
            expr: Expr::Concat(Box::new(l.expr), Box::new(r.expr)),
            affinity: None,
            collation: carried,
        },
        BinaryOperator::Eq => compare(CmpOp::Eq, l, r),
        BinaryOperator::NotEq => compare(CmpOp::Ne, l, r),
        BinaryOperator::Lt => compare(CmpOp::Lt, l, r),
        BinaryOperator::LtEq => compare(CmpOp::Le, l, r),
        BinaryOperator::Gt => compare(CmpOp::Gt, l, r),
        BinaryOperator::GtEq => compare(CmpOp::Ge, l, r),
        BinaryOperator::Is => compare(CmpOp::Is, l, r),
        BinaryOperator::IsNot => compare(CmpOp::IsNot, l, r),
        BinaryOperator::And => Typed {
            collation: carried,
            ..Typed::plain(and_or(true, (l.expr, truth.0), (r.expr, truth.1)))
        },
        BinaryOperator::Or => Typed {
            collation: carried,
            ..Typed::plain(and_or(false, (l.expr, truth.0), (r.expr, truth.1)))
        },
        // `x GLOB p` is the call `glob(p, x)` to SQLite.
        BinaryOperator::Glob => Typed {
            collation: carried_collation(&r, &l),
            ..Typed::plain(Expr::Like {
                expr: Box::new(l.expr),
                pattern: Box::new(r.expr),
                escape: None,
                negated: false,
                glob: true,
            })
        },
        other => return unsupported(format!("operator {other}")),
    })
}

/// A literal's value (`negative`: it was written after a unary minus).
pub fn literal(v: &ast::Value, negative: bool) -> Result<Value, SqlError> {
    Ok(match v {
        ast::Value::Number(text, _) => {
            let t = text.as_str();
            if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                if hex.len() > 16 {
                    return invalid(format!("hex literal too big: {t}"));
                }
                let u = u64::from_str_radix(hex, 16)
                    .map_err(|_| SqlError::Invalid(format!("malformed hex literal {t}")))?;
                let i = u as i64;
                return Ok(Value::Integer(if negative { i.wrapping_neg() } else { i }));
            }
            let signed = if negative {
                format!("-{t}")
            } else {
                t.to_string()
            };
            if t.bytes().all(|b| b.is_ascii_digit()) {
                if let Ok(i) = signed.parse::<i64>() {
                    return Ok(Value::Integer(i));
                }
            }
            Value::Real(partitioner::numeric_text::atof(signed.as_bytes()).1)
        }
        ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => {
            let v = Value::text(s.clone());
            if negative {
                return Ok(engine::query::eval::arith(
                    ArithOp::Sub,
                    engine::value::ValueRef::Integer(0),
                    v.as_ref(),
                ));
            }
            v
        }
        ast::Value::HexStringLiteral(h) => {
            if h.len() % 2 != 0 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                return invalid(format!("malformed blob literal X'{h}'"));
            }
            let blob = Value::Blob(
                (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap_or(0))
                    .collect(),
            );
            if negative {
                return Ok(engine::query::eval::arith(
                    ArithOp::Sub,
                    engine::value::ValueRef::Integer(0),
                    blob.as_ref(),
                ));
            }
            blob
        }
        ast::Value::Boolean(b) => Value::Integer(i64::from(*b)),
        ast::Value::Null => Value::Null,
        ast::Value::Placeholder(p) => return unsupported(format!("parameters ({p})")),
        other => return unsupported(format!("the literal {other}")),
    })
}
