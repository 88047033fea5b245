//! The query IR: a single-table scan query after planning, with every column resolved to a
//! slot of the decoded row and every comparison's affinity and collation fixed.
//!
//! A query runs in up to two stages. The **row stage** evaluates expressions over the columns
//! decoded from one record ([`QueryPlan::columns`]): the filter, the projection of a plain
//! query, the group keys and aggregate arguments of a grouped one. The **group stage** (grouped
//! queries only) evaluates `HAVING`, the output columns and `ORDER BY` over one group's slots:
//! its keys followed by its finished aggregates. In both stages [`Expr::Column`] indexes the
//! stage's slots.

use crate::datatype3::{Affinity, Collation};
use crate::value::Value;

/// A resolved expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Slot `i` of the current stage (a decoded column, or a group key or aggregate).
    Column(usize),
    /// A constant.
    Literal(Value),
    /// `-x`.
    Negate(Box<Expr>),
    /// `NOT x` (three-valued).
    Not(Box<Expr>),
    /// `~x`.
    BitNot(Box<Expr>),
    /// `x + - * / % y`, `x & | << >> y`.
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    /// `x || y`.
    Concat(Box<Expr>, Box<Expr>),
    /// A comparison with its affinity and collation fixed at planning.
    Compare {
        /// The operator.
        op: CmpOp,
        /// Left operand.
        left: Box<Expr>,
        /// Right operand.
        right: Box<Expr>,
        /// The comparison affinity (`datatype3::comparison_affinity`).
        affinity: Option<Affinity>,
        /// The collating sequence.
        collation: Collation,
    },
    /// `x AND y` (three-valued).
    And(Box<Expr>, Box<Expr>),
    /// `x OR y` (three-valued).
    Or(Box<Expr>, Box<Expr>),
    /// `x IS NULL` (`negated`: `x IS NOT NULL`).
    IsNull(Box<Expr>, bool),
    /// `x [NOT] IN (list)`.
    InList {
        /// The left operand.
        expr: Box<Expr>,
        /// The list, each with the affinity of its comparison with `expr`.
        list: Vec<(Expr, Option<Affinity>)>,
        /// `NOT IN`.
        negated: bool,
        /// The collating sequence (the left operand's).
        collation: Collation,
    },
    /// `x IN (list)` of integer literals compared without an affinity, as
    /// [`crate::query::fold`] rewrites a long [`Expr::InList`] of them: the values sorted and
    /// distinct, so a row's test is a binary search (`rowid IN (...)` of thousands of
    /// rowids, found in an index).
    InIntegers {
        /// The left operand.
        expr: Box<Expr>,
        /// The values, ascending, each once.
        values: std::sync::Arc<[i64]>,
    },
    /// `x [NOT] IN (SELECT ...)` of an uncorrelated subquery whose rows were computed before
    /// the scan: the set SQLite builds of them ([`crate::query::in_set`]).
    InSet {
        /// The left operand.
        expr: Box<Expr>,
        /// The subquery's values under the comparison's affinity and collation.
        set: std::sync::Arc<crate::query::in_set::InSet>,
        /// `NOT IN`.
        negated: bool,
    },
    /// Fails with this message where it is evaluated: an uncorrelated subquery whose
    /// computation failed, which SQLite computes only where it is first used (`OP_Once`), so
    /// its error is the statement's only if that happens.
    Raise(std::sync::Arc<str>),
    /// `x [NOT] LIKE/GLOB pattern [ESCAPE e]`.
    Like {
        /// The matched value.
        expr: Box<Expr>,
        /// The pattern.
        pattern: Box<Expr>,
        /// The escape character, if any.
        escape: Option<Box<Expr>>,
        /// `NOT LIKE`.
        negated: bool,
        /// GLOB (case-sensitive, `*?[...]`) rather than LIKE.
        glob: bool,
    },
    /// `CASE [operand] WHEN ... THEN ... [ELSE ...] END`.
    Case {
        /// The operand compared with each `WHEN` value, if any.
        operand: Option<Box<Expr>>,
        /// `WHEN` and `THEN` pairs, with the affinity and collation of the operand's
        /// comparison with each `WHEN` value.
        whens: Vec<(Expr, Expr, Option<Affinity>, Collation)>,
        /// `ELSE`.
        otherwise: Option<Box<Expr>>,
    },
    /// `CAST(x AS type)`, as the type's affinity.
    Cast(Box<Expr>, Affinity),
    /// A scalar function call.
    Function(Function, Vec<Expr>),
    /// A comparison, arithmetic or `||` one operand of which held a subquery, as SQLite
    /// codes it (`exprComputeOperands`): `first`, the other operand, is computed first, and
    /// when it is NULL so is the value, without computing the subquery's side (whose
    /// failure then never happens); otherwise `expr` (which computes `first` again: operands
    /// have no side effects).
    NullFirst {
        /// The operand computed first (the one without the subquery).
        first: Box<Expr>,
        /// The operator over both operands.
        expr: Box<Expr>,
    },
    /// An `AND` or `OR` (`expr`, its operands as written) one operand of which holds a
    /// subquery, as SQLite codes it (`exprCodeTargetAndOr`, and `exprEvalRhsFirst` in jump
    /// code): the operand without the subquery is computed first (the right one when only the
    /// left holds a subquery, `right_first`), and when it decides the answer (false for
    /// `AND`, true for `OR`) the other is never computed, so its failure never happens. A
    /// plain `AND`/`OR` value computes both.
    ShortCircuit {
        /// The `AND` or `OR`.
        expr: Box<Expr>,
        /// Whether the right operand is computed first.
        right_first: bool,
    },
}

/// Arithmetic and bitwise operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `%`.
    Rem,
    /// `&`.
    BitAnd,
    /// `|`.
    BitOr,
    /// `<<`.
    ShiftLeft,
    /// `>>`.
    ShiftRight,
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `=`.
    Eq,
    /// `<>`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `IS` (NULL-safe equality).
    Is,
    /// `IS NOT`.
    IsNot,
}

impl CmpOp {
    /// The operator with its operands swapped: `a < b` is `b > a`.
    pub fn mirrored(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            other => other,
        }
    }
}

/// The scalar functions the evaluator implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// `abs(x)`.
    Abs,
    /// `coalesce(x, y, ...)` and `ifnull(x, y)`.
    Coalesce,
    /// `x IS [NOT] TRUE` / `x IS [NOT] FALSE` (SQLite's `TK_TRUTH`): 1 or 0 by the truth
    /// value of `x`, NULL counting as false for `IS TRUE`/`IS FALSE` and as true for their
    /// negations. As a condition (`WHERE`, `CASE WHEN`) it is SQLite's jump code on `x`
    /// itself, so an `AND`/`OR` inside stops at the operand that decides
    /// ([`crate::query::eval::holds`]).
    Truth {
        /// `IS [NOT] TRUE` (else `IS [NOT] FALSE`).
        is_true: bool,
        /// `IS NOT`.
        negated: bool,
    },
    /// `nullif(x, y)`, with its comparison's collation.
    NullIf(Collation),
    /// `length(x)`.
    Length,
    /// `lower(x)`.
    Lower,
    /// `upper(x)`.
    Upper,
    /// `substr(x, start[, length])`.
    Substr,
    /// `trim(x[, chars])`.
    Trim,
    /// `ltrim(x[, chars])`.
    LTrim,
    /// `rtrim(x[, chars])`.
    RTrim,
    /// `round(x[, digits])`.
    Round,
    /// `typeof(x)`.
    TypeOf,
    /// `hex(x)`.
    Hex,
    /// `instr(x, y)`.
    Instr,
    /// `replace(x, y, z)`.
    Replace,
    /// Multi-argument `min(x, y, ...)`, with the collation of its comparisons.
    Min(Collation),
    /// Multi-argument `max(x, y, ...)`.
    Max(Collation),
    /// `date(x, ...)`.
    Date,
    /// `time(x, ...)`.
    Time,
    /// `datetime(x, ...)`.
    DateTime,
    /// `strftime(format, x, ...)`.
    Strftime,
    /// `julianday(x, ...)`.
    JulianDay,
    /// `unixepoch(x, ...)`.
    UnixEpoch,
    /// `timediff(a, b)`: the time from `b` to `a` as `±YYYY-MM-DD HH:MM:SS.SSS`.
    TimeDiff,
    /// `char(x, ...)`: the text of the code points `x, ...`.
    Char,
    /// `quote(x)`: the SQL literal of `x`.
    Quote,
    /// `unicode(x)`: the code point of the first character.
    Unicode,
    /// `concat(x, ...)`.
    Concat,
    /// `concat_ws(separator, x, ...)`.
    ConcatWs,
    /// `octet_length(x)`.
    OctetLength,
    /// `unhex(x[, pass])`.
    Unhex,
    /// `zeroblob(n)`.
    ZeroBlob,
    /// `unistr(x)`.
    Unistr,
    /// A math function, or `sign`.
    Math(super::math::MathFunction),
    /// `printf(format, ...)` and `format(format, ...)`.
    Printf,
    /// A JSON function (`json_extract`, `->>`, `json_object`, ...). An argument that is itself
    /// a JSON call passes its JSON subtype (and SQLite's cached JSONB) on, as in SQLite.
    Json(super::json::JsonFunc),
}

impl Function {
    /// Whether a call can fail (an error, not NULL): `abs` overflows, results longer than
    /// SQLite's limit, `unistr`'s bad escapes.
    pub fn may_fail(self) -> bool {
        matches!(
            self,
            Function::Abs
                | Function::Json(_)
                | Function::Printf
                | Function::Concat
                | Function::ConcatWs
                | Function::ZeroBlob
                | Function::Unistr
        )
    }
}

/// Aggregate functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFunc {
    /// `count(*)`.
    CountStar,
    /// `count(x)`.
    Count,
    /// `sum(x)`: integer while every input is one (overflow is an error), else real.
    Sum,
    /// `total(x)`: always real, never an error.
    Total,
    /// `avg(x)`: real.
    Avg,
    /// `min(x)`.
    Min,
    /// `max(x)`.
    Max,
    /// `group_concat(x [, separator])`, `string_agg(x, separator)`: the text of the non-NULL
    /// inputs in row order, joined by the separator ([`AggSpec::separator`]).
    GroupConcat,
    /// `json_group_array(v)`, `json_group_object(k, v)` and their `jsonb_` forms: the JSON
    /// SQLite's `json.c` builds of every row's arguments in row order (NULLs included), each
    /// argument with the JSON subtype it carries ([`AggSpec::second`] is the object's value).
    Json(super::json::JsonGroupKind),
    /// A bare column (SQLite's "bare column" rule): a column read over a group outside its
    /// keys and aggregates shows its value in the row that shows the group's keys (the
    /// group's first row in rowid order, or the row its deciding `min()`/`max()` chose: see
    /// `super::key_row`). Its state is set when that row is chosen, never per row.
    Shown,
}

/// One aggregate of a grouped query.
#[derive(Debug, Clone, PartialEq)]
pub struct AggSpec {
    /// The function.
    pub func: AggFunc,
    /// Its argument (row stage), `None` for `count(*)`.
    pub arg: Option<Expr>,
    /// `DISTINCT`: each distinct argument value counts once.
    pub distinct: bool,
    /// The collation deciding `DISTINCT` equality and `min`/`max` order.
    pub collation: Collation,
    /// `group_concat`'s separator, a constant (`None`: the default `,`; a NULL separator
    /// joins with nothing).
    pub separator: Option<Value>,
    /// A second argument (row stage): `json_group_object`'s value, `arg` being its label.
    pub second: Option<Expr>,
    /// `FILTER (WHERE c)` (row stage): a row where `c` does not hold is not added at all.
    /// Kept here by JSON aggregates (which add a NULL as `null`), aggregates with `ORDER
    /// BY`, and one-argument `min()`/`max()` without `DISTINCT` (a passing NULL can decide
    /// which row shows the group: [`super::key_row`]); the other aggregates skip NULL
    /// inputs, so their filter is a `CASE WHEN c THEN x END` argument instead.
    pub filter: Option<Expr>,
    /// `ORDER BY` inside the call (row stage; SQLite 3.44+): the order the rows are added in
    /// (ties in scan order), for the aggregates whose value depends on it (`group_concat`,
    /// `string_agg`, the JSON aggregates, `sum`'s overflow). Empty: scan order.
    pub order_by: Vec<SortKey>,
}

impl AggSpec {
    /// `func(arg)` with nothing else: no `DISTINCT`, `FILTER`, separator, second argument or
    /// `ORDER BY`, under `BINARY`.
    pub fn new(func: AggFunc, arg: Option<Expr>) -> AggSpec {
        AggSpec {
            func,
            arg,
            distinct: false,
            collation: crate::datatype3::Collation::Binary,
            separator: None,
            second: None,
            filter: None,
            order_by: Vec::new(),
        }
    }

    /// The row-stage expressions the aggregate evaluates: its arguments, its filter and its
    /// `ORDER BY` terms.
    pub fn exprs(&self) -> impl Iterator<Item = &Expr> {
        self.arg
            .iter()
            .chain(&self.second)
            .chain(&self.filter)
            .chain(self.order_by.iter().map(|k| &k.expr))
    }

    /// The row-stage expressions the aggregate evaluates, to edit in place.
    pub fn exprs_mut(&mut self) -> impl Iterator<Item = &mut Expr> {
        self.arg
            .iter_mut()
            .chain(&mut self.second)
            .chain(&mut self.filter)
            .chain(self.order_by.iter_mut().map(|k| &mut k.expr))
    }
}

/// Where a decoded column's value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnRead {
    /// The value at this record position; `default` is what a record ending before it holds
    /// (rows written before `ALTER TABLE ... ADD COLUMN`), or why it cannot be known.
    Record {
        /// 0-based position in the record.
        position: usize,
        /// The column's default, or the message to fail with if a record lacks the column.
        default: Result<Value, String>,
        /// The column has REAL affinity: SQLite stores integral reals of such a column as
        /// integers and reads them back as reals.
        real_affinity: bool,
    },
    /// The cell's rowid (`rowid`, or an `INTEGER PRIMARY KEY` column).
    Rowid,
    /// The hidden `_file` column of a table over several files: the path of the file the row
    /// was read from, as listed. Replaced by that text in each file's plan
    /// ([`crate::query::bind_to_file`]) before the file is read; NULL in any other plan.
    File,
    /// A `VIRTUAL` generated column: its expression over the other slots (which precede it),
    /// converted by the column's affinity.
    Virtual {
        /// The expression (row stage, over earlier slots only).
        expr: Expr,
        /// The column's affinity.
        affinity: Affinity,
    },
}

/// One `ORDER BY` term.
#[derive(Debug, Clone, PartialEq)]
pub struct SortKey {
    /// The expression: row stage for a plain query, group stage for a grouped one.
    pub expr: Expr,
    /// `DESC`.
    pub descending: bool,
    /// Whether NULLs come first (SQLite's default: first for `ASC`, last for `DESC`).
    pub nulls_first: bool,
    /// The collation of the ordering.
    pub collation: Collation,
}

/// What the query computes.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// One output row per matching record.
    Rows {
        /// The output columns (row stage).
        outputs: Vec<Expr>,
    },
    /// One output row per group (one group in all when there are no keys).
    Groups {
        /// Group keys (row stage) with the collation that decides their equality and order.
        keys: Vec<(Expr, Collation)>,
        /// The aggregates; in the group stage they follow the keys as slots.
        aggregates: Vec<AggSpec>,
        /// `HAVING` (group stage).
        having: Option<Expr>,
        /// The output columns (group stage).
        outputs: Vec<Expr>,
    },
}

/// A planned query.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryPlan {
    /// The row stage's slots: what to decode from each record.
    pub columns: Vec<ColumnRead>,
    /// The `WHERE` terms (split at its top-level `AND`s) that read no column and are
    /// deterministic: SQLite tests them once, in order, before the scan (`sqlite3WhereBegin`
    /// codes them with `sqlite3ExprIfFalse` to the loop's end), so one that fails fails the
    /// query even on an empty table, and one that is false or NULL leaves no row without any
    /// other expression computed. Not part of [`QueryPlan::filter`].
    pub constant_terms: Vec<Expr>,
    /// `WHERE` (row stage): the terms that read a column.
    pub filter: Option<Expr>,
    /// Rows or groups.
    pub shape: Shape,
    /// `ORDER BY`; ties (and a plain query without `ORDER BY`) keep rowid order, grouped ones
    /// group-key order.
    pub order_by: Vec<SortKey>,
    /// A plain query whose `ORDER BY` SQLite's planner satisfies with the full scan run
    /// backwards (`ORDER BY rowid DESC`): its rows come in descending rowid order, with the
    /// scan order's rules from the last row (no sorter: `WHERE` computed from the last row
    /// down until the `LIMIT` is reached, the output columns of the rows the `OFFSET` skips
    /// never computed). [`QueryPlan::order_by`] is then empty.
    pub backward: bool,
    /// `LIMIT` (`None`: no limit).
    pub limit: Option<u64>,
    /// `OFFSET`.
    pub offset: u64,
    /// The output column names.
    pub names: Vec<String>,
    /// `SELECT DISTINCT`: a grouped query whose keys are its output columns, its groups in
    /// the order of their first rows (ties of `ORDER BY` too), not in key order; the keys
    /// shown are the first row's.
    pub distinct: bool,
    /// Window functions (`OVER`): the query's rows (its [`Shape::Rows`] outputs, in SQLite's
    /// loop order) are the window stage's input, and the stage gives the result; the plan's
    /// own `ORDER BY` is then only the loop's order, and its `LIMIT` none.
    pub windows: Option<Box<WindowStage>>,
    /// A grouped query whose rows SQLite's loop delivers in an index's order, where that order
    /// shows in the result (which of equal values a `min()` keeps, the row a bare column
    /// comes from, the order `group_concat` lists): each row's place in that order, used
    /// wherever the rowid decides which row came first. `None`: rowid order.
    pub arrival: Option<Arrival>,
}

/// The order in which SQLite's loop over an index meets the table's rows: each row's place
/// in the index's key order (walked forwards or backwards), by rowid
/// ([`QueryPlan::arrival`]). A grouped query's states keep the place where they otherwise
/// keep the rowid (the first row of a group, a `min()`'s row, `group_concat`'s order), so
/// that every "first" is the loop's first, on every executor and in every merge.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    /// What SQLite reads, for messages (`index "ix_user"`).
    pub index: String,
    /// Each listed row's place, by rowid.
    places: Places,
    /// How many rows the index lists.
    len: usize,
}

/// [`Arrival`]'s places.
#[derive(Debug, Clone, PartialEq)]
enum Places {
    /// Rowids from `first` on, most of them listed (a table's rowids usually are): the place
    /// of rowid `first + i` at `i`, or [`NOT_LISTED`].
    Dense {
        first: i64,
        places: std::sync::Arc<Vec<i64>>,
    },
    /// The listed rowids in ascending order, each with its place.
    Sparse(std::sync::Arc<Vec<(i64, i64)>>),
}

/// A rowid the index does not list, in [`Places::Dense`].
const NOT_LISTED: i64 = -1;

impl Arrival {
    /// The order of `rowids`, listed as the loop meets them; `Err` with the rowid when one
    /// is listed twice (a damaged index).
    pub fn new(index: String, rowids: &[i64]) -> Result<Arrival, i64> {
        let len = rowids.len();
        let (Some(&low), Some(&high)) = (rowids.iter().min(), rowids.iter().max()) else {
            return Ok(Arrival {
                index,
                places: Places::Sparse(Default::default()),
                len,
            });
        };
        // A table array of at most twice the rows' count: 8 bytes a rowid, found directly.
        let span = (high as i128 - low as i128 + 1) as u128;
        if span <= 2 * len as u128 + 1024 {
            let mut places = vec![NOT_LISTED; span as usize];
            for (at, &rowid) in rowids.iter().enumerate() {
                let slot = &mut places[(rowid - low) as usize];
                if *slot != NOT_LISTED {
                    return Err(rowid);
                }
                *slot = at as i64;
            }
            return Ok(Arrival {
                index,
                places: Places::Dense {
                    first: low,
                    places: std::sync::Arc::new(places),
                },
                len,
            });
        }
        let mut places: Vec<(i64, i64)> = rowids
            .iter()
            .enumerate()
            .map(|(at, &rowid)| (rowid, at as i64))
            .collect();
        places.sort_unstable();
        if let Some(w) = places.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(w[0].0);
        }
        Ok(Arrival {
            index,
            places: Places::Sparse(std::sync::Arc::new(places)),
            len,
        })
    }

    /// The place of the row `rowid` in the loop's order, or an error when the index does not
    /// list it (the table holds a row its index lacks: SQLite's loop would never meet it).
    #[inline]
    pub fn place(&self, rowid: i64) -> Result<i64, String> {
        let found = match &self.places {
            Places::Dense { first, places } => rowid
                .checked_sub(*first)
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| places.get(i).copied())
                .filter(|&p| p != NOT_LISTED),
            Places::Sparse(places) => places
                .binary_search_by_key(&rowid, |p| p.0)
                .ok()
                .map(|i| places[i].1),
        };
        found.ok_or_else(|| {
            format!(
                "database disk image is malformed: row {rowid} is missing from index {:?}, \
                 which SQLite reads the table through",
                self.index
            )
        })
    }

    /// How many rows the index lists.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the index lists no row.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The window stage of a query with window functions, run on the coordinator over every row
/// of the scan ([`crate::query::over`]). Its slots are the scan's output columns (the
/// *inputs*: the columns, partition and order keys and arguments the stage reads), then one
/// per window function call, in [`WindowStage::calls`]' order.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowStage {
    /// The distinct windows, in the order SQLite computes them: the last written first, each
    /// from the rows in the order the one before left them (a stable sort by its partition
    /// and order keys), so the result's rows come in the first window's order.
    pub passes: Vec<WindowPass>,
    /// How many input slots precede the calls' results.
    pub inputs: usize,
    /// The output columns (over the stage's slots).
    pub outputs: Vec<Expr>,
    /// `ORDER BY` (over the stage's slots); ties keep the first window's order.
    pub order_by: Vec<SortKey>,
    /// `LIMIT`.
    pub limit: Option<u64>,
    /// `OFFSET`.
    pub offset: u64,
}

/// One window's partitions and order (`OVER (PARTITION BY ... ORDER BY ...)`) and the calls
/// over it.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowPass {
    /// `PARTITION BY`: input slots, each with the collation deciding its equality.
    pub partition: Vec<(usize, Collation)>,
    /// `ORDER BY`: keys whose expressions are input slots ([`Expr::Column`]).
    pub order: Vec<SortKey>,
    /// The calls over this window: indexes into [`WindowStage::calls`]' order, i.e. their
    /// result slots are `inputs + index`.
    pub calls: Vec<(usize, WindowCall)>,
}

/// A window frame (`ROWS|RANGE|GROUPS BETWEEN start AND end`).
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// The units.
    pub units: FrameUnits,
    /// The start.
    pub start: FrameBound,
    /// The end.
    pub end: FrameBound,
}

/// A frame's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameUnits {
    /// `ROWS`.
    Rows,
    /// `RANGE` (offsets on the one `ORDER BY` value).
    Range,
    /// `GROUPS` (of peers).
    Groups,
}

/// One end of a frame.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameBound {
    /// `UNBOUNDED PRECEDING`.
    UnboundedPreceding,
    /// `n PRECEDING` (a non-negative number, checked at planning).
    Preceding(Value),
    /// `CURRENT ROW`.
    CurrentRow,
    /// `n FOLLOWING`.
    Following(Value),
    /// `UNBOUNDED FOLLOWING`.
    UnboundedFollowing,
}

/// One window function call.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowCall {
    /// The function.
    pub func: WindowFunc,
    /// Its arguments, as input slots.
    pub args: Vec<usize>,
    /// `FILTER (WHERE ...)` of an aggregate: an input slot holding 1 where the row counts.
    pub filter: Option<usize>,
    /// The frame (windows that differ only in their frames share a pass: their rows come in
    /// the same order).
    pub frame: Frame,
}

/// The window functions.
#[derive(Debug, Clone, PartialEq)]
pub enum WindowFunc {
    /// `row_number()`.
    RowNumber,
    /// `rank()`.
    Rank,
    /// `dense_rank()`.
    DenseRank,
    /// `percent_rank()`.
    PercentRank,
    /// `cume_dist()`.
    CumeDist,
    /// `ntile(n)`.
    Ntile,
    /// `lag(x [, offset [, default]])`.
    Lag,
    /// `lead(x [, offset [, default]])`.
    Lead,
    /// `first_value(x)`.
    FirstValue,
    /// `last_value(x)`.
    LastValue,
    /// `nth_value(x, n)`.
    NthValue,
    /// An aggregate over the frame (its [`AggSpec::arg`] unused: the argument is
    /// [`WindowCall::args`]).
    Aggregate(Box<AggSpec>),
}

impl Expr {
    /// Calls `f` with every slot the expression reads, in pre-order, left to right.
    pub fn visit_slots(&self, f: &mut impl FnMut(usize)) {
        self.visit(&mut |e| {
            if let Expr::Column(i) = e {
                f(*i);
            }
        });
    }

    /// A condition that computes `e` and holds whatever its value, `(e IS NULL) OR 1` (the
    /// jump code tests the left operand first): where SQLite computes a value only for its
    /// errors (a constant at the statement's start, a sorted subquery's result columns).
    pub fn computing(e: Expr) -> Expr {
        Expr::Or(
            Box::new(Expr::IsNull(Box::new(e), false)),
            Box::new(Expr::Literal(Value::Integer(1))),
        )
    }

    /// Whether computing the expression can fail on some row (a function's error: `abs` of
    /// the smallest integer, a result over SQLite's length limit, a bad escape; a `LIKE` with
    /// an `ESCAPE` or a pattern not written as a literal, or a literal pattern too long for
    /// SQLite, [`super::like::pattern_too_long`]). Columns, literals, operators,
    /// comparisons, `CASE` and `CAST` never fail of themselves.
    pub fn may_fail(&self) -> bool {
        let mut fails = false;
        self.visit(&mut |e| {
            fails |= match e {
                Expr::Function(f, _) => f.may_fail(),
                Expr::Raise(_) => true,
                Expr::Like {
                    pattern, escape, ..
                } => {
                    escape.is_some()
                        || match &**pattern {
                            Expr::Literal(p) => super::like::pattern_too_long(p.as_ref()),
                            _ => true,
                        }
                }
                _ => false,
            }
        });
        fails
    }

    /// Calls `f` with every expression below this one, then with this one (post-order), each
    /// mutably: a rewrite of the leaves (slots renumbered) sees every one.
    pub fn visit_mut(&mut self, f: &mut impl FnMut(&mut Expr)) {
        match self {
            Expr::Column(_) | Expr::Literal(_) | Expr::Raise(_) => {}
            Expr::Negate(x)
            | Expr::Not(x)
            | Expr::BitNot(x)
            | Expr::IsNull(x, _)
            | Expr::Cast(x, _)
            | Expr::InIntegers { expr: x, .. }
            | Expr::InSet { expr: x, .. }
            | Expr::ShortCircuit { expr: x, .. } => x.visit_mut(f),
            Expr::Arith(_, a, b)
            | Expr::Concat(a, b)
            | Expr::And(a, b)
            | Expr::Or(a, b)
            | Expr::NullFirst {
                first: a, expr: b, ..
            }
            | Expr::Compare {
                left: a, right: b, ..
            } => {
                a.visit_mut(f);
                b.visit_mut(f);
            }
            Expr::InList { expr, list, .. } => {
                expr.visit_mut(f);
                list.iter_mut().for_each(|(x, _)| x.visit_mut(f));
            }
            Expr::Like {
                expr,
                pattern,
                escape,
                ..
            } => {
                expr.visit_mut(f);
                pattern.visit_mut(f);
                escape.iter_mut().for_each(|x| x.visit_mut(f));
            }
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => {
                operand.iter_mut().for_each(|x| x.visit_mut(f));
                for (w, t, _, _) in whens {
                    w.visit_mut(f);
                    t.visit_mut(f);
                }
                otherwise.iter_mut().for_each(|x| x.visit_mut(f));
            }
            Expr::Function(_, args) => args.iter_mut().for_each(|x| x.visit_mut(f)),
        }
        f(self);
    }

    /// Calls `f` with the expression and every expression below it, in pre-order.
    pub fn visit(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Column(_) | Expr::Literal(_) | Expr::Raise(_) => {}
            Expr::Negate(x)
            | Expr::Not(x)
            | Expr::BitNot(x)
            | Expr::IsNull(x, _)
            | Expr::Cast(x, _)
            | Expr::InIntegers { expr: x, .. }
            | Expr::InSet { expr: x, .. }
            | Expr::ShortCircuit { expr: x, .. } => x.visit(f),
            Expr::Arith(_, a, b)
            | Expr::Concat(a, b)
            | Expr::And(a, b)
            | Expr::Or(a, b)
            | Expr::NullFirst { first: a, expr: b } => {
                a.visit(f);
                b.visit(f);
            }
            Expr::Compare { left, right, .. } => {
                left.visit(f);
                right.visit(f);
            }
            Expr::InList { expr, list, .. } => {
                expr.visit(f);
                for (x, _) in list {
                    x.visit(f);
                }
            }
            Expr::Like {
                expr,
                pattern,
                escape,
                ..
            } => {
                expr.visit(f);
                pattern.visit(f);
                if let Some(x) = escape {
                    x.visit(f);
                }
            }
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => {
                if let Some(x) = operand {
                    x.visit(f);
                }
                for (w, t, _, _) in whens {
                    w.visit(f);
                    t.visit(f);
                }
                if let Some(x) = otherwise {
                    x.visit(f);
                }
            }
            Expr::Function(_, args) => {
                for x in args {
                    x.visit(f);
                }
            }
        }
    }

    /// Whether the expression reads no slot: its value is the same on every row.
    pub fn reads_no_slot(&self) -> bool {
        let mut reads = false;
        self.visit_slots(&mut |_| reads = true);
        !reads
    }

    /// Replaces every slot read `Column(i)` for which `with(i)` gives an expression by it
    /// (the hidden `_file` column by its file's path, say).
    pub fn replace_slots(&mut self, with: &mut impl FnMut(usize) -> Option<Expr>) {
        match self {
            Expr::Column(i) => {
                if let Some(e) = with(*i) {
                    *self = e;
                }
            }
            Expr::Literal(_) | Expr::Raise(_) => {}
            Expr::Negate(x) | Expr::Not(x) | Expr::BitNot(x) | Expr::IsNull(x, _) => {
                x.replace_slots(with)
            }
            Expr::Cast(x, _) | Expr::ShortCircuit { expr: x, .. } => x.replace_slots(with),
            Expr::Arith(_, a, b)
            | Expr::Concat(a, b)
            | Expr::And(a, b)
            | Expr::Or(a, b)
            | Expr::NullFirst { first: a, expr: b } => {
                a.replace_slots(with);
                b.replace_slots(with);
            }
            Expr::Compare { left, right, .. } => {
                left.replace_slots(with);
                right.replace_slots(with);
            }
            Expr::InIntegers { expr, .. } | Expr::InSet { expr, .. } => expr.replace_slots(with),
            Expr::InList { expr, list, .. } => {
                expr.replace_slots(with);
                for (x, _) in list {
                    x.replace_slots(with);
                }
            }
            Expr::Like {
                expr,
                pattern,
                escape,
                ..
            } => {
                expr.replace_slots(with);
                pattern.replace_slots(with);
                if let Some(x) = escape {
                    x.replace_slots(with);
                }
            }
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => {
                if let Some(x) = operand {
                    x.replace_slots(with);
                }
                for (w, t, _, _) in whens {
                    w.replace_slots(with);
                    t.replace_slots(with);
                }
                if let Some(x) = otherwise {
                    x.replace_slots(with);
                }
            }
            Expr::Function(_, args) => {
                for x in args {
                    x.replace_slots(with);
                }
            }
        }
    }
}

/// The most values of a rowid `IN` list read as seeks ([`QueryPlan::rowid_ranges`]); a longer
/// list is left to the filter.
pub const MAX_ROWID_RANGES: usize = 100_000;

impl QueryPlan {
    /// How many rows a per-executor top-k must keep: `LIMIT + OFFSET`, or `None` for all.
    pub fn keep(&self) -> Option<u64> {
        self.limit.map(|l| l.saturating_add(self.offset))
    }

    /// How many rows at most the `WHERE` admits by rowid: the rowids its
    /// [`QueryPlan::rowid_ranges`] span (`None` when it bounds none).
    pub fn seek_rows(&self) -> Option<u64> {
        self.rowid_ranges().map(|ranges| {
            ranges.iter().fold(0u64, |n, &(lo, hi)| {
                n.saturating_add((hi as i128 - lo as i128 + 1).clamp(0, u64::MAX as i128) as u64)
            })
        })
    }

    /// The inclusive ranges of rowids (ascending, disjoint) outside which no row can satisfy
    /// the `WHERE` clause, from its top-level `AND` terms that compare the rowid (or an
    /// `INTEGER PRIMARY KEY`) with an integer literal (`=`, `IS`, `<`, `<=`, `>`, `>=`,
    /// `BETWEEN`, either way round) or list it in an `IN` list of integer literals (one
    /// range per value, at most [`MAX_ROWID_RANGES`]); `None` when no term bounds it. A row the filter accepts makes every such term true, so
    /// its rowid is in the range: a scan may skip the leaves outside it, as SQLite's planner
    /// seeks to the range instead of scanning the table. (Terms with a real or text literal
    /// are not used: the range only ever narrows what is read; the filter still decides.)
    pub fn rowid_ranges(&self) -> Option<Vec<(i64, i64)>> {
        let mut terms = Vec::new();
        let mut stack: Vec<&Expr> = self.filter.iter().collect();
        while let Some(e) = stack.pop() {
            match e {
                Expr::And(a, b) => stack.extend([a.as_ref(), b.as_ref()]),
                other => terms.push(other),
            }
        }
        let is_rowid = |e: &Expr| matches!(e, Expr::Column(i) if matches!(self.columns.get(*i), Some(ColumnRead::Rowid)));
        let (mut lo, mut hi, mut bounded) = (i64::MIN, i64::MAX, false);
        // The values of the `IN` lists, each list's intersected with the others'.
        let mut points: Option<Vec<i64>> = None;
        for term in terms {
            if let Expr::InIntegers { expr, values } = term {
                if is_rowid(expr) && values.len() <= MAX_ROWID_RANGES {
                    points = Some(match points {
                        None => values.to_vec(),
                        Some(p) => p
                            .into_iter()
                            .filter(|v| values.binary_search(v).is_ok())
                            .collect(),
                    });
                }
                continue;
            }
            if let Expr::InList {
                expr,
                list,
                negated: false,
                ..
            } = term
            {
                let values: Option<Vec<i64>> = list
                    .iter()
                    .map(|(v, _)| match v {
                        Expr::Literal(Value::Integer(n)) => Some(*n),
                        _ => None,
                    })
                    .collect();
                if let (true, Some(mut values)) = (is_rowid(expr), values) {
                    if values.len() <= MAX_ROWID_RANGES {
                        values.sort_unstable();
                        values.dedup();
                        points = Some(match points {
                            None => values,
                            Some(p) => p
                                .into_iter()
                                .filter(|v| values.binary_search(v).is_ok())
                                .collect(),
                        });
                    }
                }
                continue;
            }
            let Expr::Compare {
                op, left, right, ..
            } = term
            else {
                continue;
            };
            // rowid OP n, or n OP rowid with the operator mirrored.
            let (op, n) = match (left.as_ref(), right.as_ref()) {
                (l, Expr::Literal(Value::Integer(n))) if is_rowid(l) => (*op, *n),
                (Expr::Literal(Value::Integer(n)), r) if is_rowid(r) => (op.mirrored(), *n),
                _ => continue,
            };
            let (l, h) = match op {
                CmpOp::Eq | CmpOp::Is => (n, n),
                CmpOp::Lt => match n.checked_sub(1) {
                    Some(h) => (i64::MIN, h),
                    None => return Some(Vec::new()),
                },
                CmpOp::Le => (i64::MIN, n),
                CmpOp::Gt => match n.checked_add(1) {
                    Some(l) => (l, i64::MAX),
                    None => return Some(Vec::new()),
                },
                CmpOp::Ge => (n, i64::MAX),
                _ => continue,
            };
            (lo, hi, bounded) = (lo.max(l), hi.min(h), true);
        }
        match points {
            Some(p) => Some(
                p.into_iter()
                    .filter(|v| (lo..=hi).contains(v))
                    .map(|v| (v, v))
                    .collect(),
            ),
            None if lo > hi => Some(Vec::new()),
            None => bounded.then(|| vec![(lo, hi)]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan reading the rowid (slot 0) and a record column (slot 1), filtered by `filter`.
    fn plan(filter: Option<Expr>) -> QueryPlan {
        QueryPlan {
            columns: vec![
                ColumnRead::Rowid,
                ColumnRead::Record {
                    position: 0,
                    default: Ok(Value::Null),
                    real_affinity: false,
                },
            ],
            constant_terms: Vec::new(),
            filter,
            shape: Shape::Rows {
                outputs: vec![Expr::Column(0)],
            },
            order_by: Vec::new(),
            backward: false,
            limit: None,
            offset: 0,
            names: vec!["rowid".into()],
            distinct: false,
            windows: None,
            arrival: None,
        }
    }

    #[test]
    fn arrival_places_rows_in_the_loops_order() {
        // An index listing rows 7, 3, 9 in that order.
        let a = Arrival::new("ix".into(), &[7, 3, 9]).unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a.place(7), Ok(0));
        assert_eq!(a.place(3), Ok(1));
        assert_eq!(a.place(9), Ok(2));
        let missing = a.place(4).unwrap_err();
        assert!(
            missing.contains("row 4 is missing from index \"ix\""),
            "{missing}"
        );
        assert_eq!(Arrival::new("ix".into(), &[5, 2, 5]), Err(5));
        assert!(Arrival::new("ix".into(), &[]).unwrap().is_empty());
        // Rowids spread too far apart for a table array: the same places by search.
        let sparse = Arrival::new("ix".into(), &[1 << 40, -3, 12, i64::MAX]).unwrap();
        assert!(matches!(sparse.places, Places::Sparse(_)));
        assert!(matches!(a.places, Places::Dense { .. }));
        for (at, rowid) in [1 << 40, -3, 12, i64::MAX].into_iter().enumerate() {
            assert_eq!(sparse.place(rowid), Ok(at as i64));
        }
        assert!(sparse.place(13).is_err() && sparse.place(i64::MIN).is_err());
        assert!(a.place(i64::MIN).is_err() && a.place(i64::MAX).is_err());
        assert_eq!(
            Arrival::new("ix".into(), &[i64::MIN, i64::MAX, i64::MIN]),
            Err(i64::MIN)
        );
    }

    fn cmp(op: CmpOp, left: Expr, right: Expr) -> Expr {
        Expr::Compare {
            op,
            left: Box::new(left),
            right: Box::new(right),
            affinity: Some(Affinity::Numeric),
            collation: Collation::Binary,
        }
    }

    fn int(n: i64) -> Expr {
        Expr::Literal(Value::Integer(n))
    }

    fn and(a: Expr, b: Expr) -> Expr {
        Expr::And(Box::new(a), Box::new(b))
    }

    #[test]
    fn seek_rows_count_the_rowids_the_ranges_span() {
        let rowid = || Expr::Column(0);
        let rows = |f: Option<Expr>| plan(f).seek_rows();
        assert_eq!(rows(None), None);
        assert_eq!(rows(Some(cmp(CmpOp::Eq, rowid(), int(7)))), Some(1));
        let between = and(
            cmp(CmpOp::Ge, rowid(), int(10)),
            cmp(CmpOp::Le, rowid(), int(20)),
        );
        assert_eq!(rows(Some(between)), Some(11));
        assert_eq!(rows(Some(cmp(CmpOp::Gt, rowid(), int(i64::MAX)))), Some(0));
        // Every rowid: saturated, not wrapped.
        assert_eq!(
            rows(Some(cmp(CmpOp::Ge, rowid(), int(i64::MIN)))),
            Some(u64::MAX)
        );
    }

    #[test]
    fn rowid_range_comes_from_top_level_integer_comparisons_only() {
        let rowid = || Expr::Column(0);
        let range = |f: Expr| plan(Some(f)).rowid_ranges();
        assert_eq!(plan(None).rowid_ranges(), None);
        assert_eq!(range(cmp(CmpOp::Eq, rowid(), int(7))), Some(vec![(7, 7)]));
        assert_eq!(range(cmp(CmpOp::Is, int(7), rowid())), Some(vec![(7, 7)]));
        assert_eq!(
            range(cmp(CmpOp::Lt, rowid(), int(7))),
            Some(vec![(i64::MIN, 6)])
        );
        assert_eq!(
            range(cmp(CmpOp::Lt, int(7), rowid())),
            Some(vec![(8, i64::MAX)])
        );
        assert_eq!(
            range(cmp(CmpOp::Ge, int(7), rowid())),
            Some(vec![(i64::MIN, 7)])
        );
        // Nothing below the smallest rowid or above the largest.
        assert_eq!(range(cmp(CmpOp::Lt, rowid(), int(i64::MIN))), Some(vec![]));
        assert_eq!(range(cmp(CmpOp::Gt, rowid(), int(i64::MAX))), Some(vec![]));
        // BETWEEN, nested ANDs, and a term on another column beside them.
        let other = cmp(CmpOp::Gt, Expr::Column(1), int(100));
        let between = and(
            cmp(CmpOp::Ge, rowid(), int(10)),
            cmp(CmpOp::Le, rowid(), int(20)),
        );
        assert_eq!(
            range(and(other.clone(), between.clone())),
            Some(vec![(10, 20)])
        );
        let tighter = and(between.clone(), cmp(CmpOp::Gt, int(15), rowid()));
        assert_eq!(range(tighter), Some(vec![(10, 14)]));
        // Not used: OR, NOT, <>, a real or text literal, another column, a computed rowid.
        let or = Expr::Or(Box::new(between.clone()), Box::new(other.clone()));
        assert_eq!(range(or), None);
        assert_eq!(range(Expr::Not(Box::new(between))), None);
        assert_eq!(range(cmp(CmpOp::Ne, rowid(), int(7))), None);
        let real = Expr::Literal(Value::Real(7.5));
        assert_eq!(range(cmp(CmpOp::Lt, rowid(), real)), None);
        let text = Expr::Literal(Value::Text(b"7".to_vec()));
        assert_eq!(range(cmp(CmpOp::Eq, rowid(), text)), None);
        assert_eq!(range(other), None);
        let sum = Expr::Arith(ArithOp::Add, Box::new(rowid()), Box::new(int(1)));
        assert_eq!(range(cmp(CmpOp::Eq, sum, int(7))), None);
        // IN lists of integers: one range per value, sorted, intersected with the bounds
        // and with each other; a list with another literal is left to the filter.
        let list = |values: &[Expr]| Expr::InList {
            expr: Box::new(rowid()),
            list: values.iter().map(|v| (v.clone(), None)).collect(),
            negated: false,
            collation: Collation::Binary,
        };
        let in_list = list(&[int(30), int(5), int(30), int(12)]);
        assert_eq!(
            range(in_list.clone()),
            Some(vec![(5, 5), (12, 12), (30, 30)])
        );
        let above = cmp(CmpOp::Gt, rowid(), int(5));
        assert_eq!(
            range(and(in_list.clone(), above)),
            Some(vec![(12, 12), (30, 30)])
        );
        assert_eq!(
            range(and(in_list.clone(), list(&[int(12), int(40)]))),
            Some(vec![(12, 12)])
        );
        assert_eq!(range(list(&[])), Some(vec![]));
        assert_eq!(
            range(list(&[int(1), Expr::Literal(Value::Real(2.0))])),
            None
        );
        let not_in = match in_list {
            Expr::InList {
                expr,
                list,
                collation,
                ..
            } => Expr::InList {
                expr,
                list,
                negated: true,
                collation,
            },
            _ => unreachable!(),
        };
        assert_eq!(range(not_in), None);
    }
}
