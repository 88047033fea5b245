//! Window function calls (`f(...) OVER (...)`), resolved in the window stage
//! ([`Stage::Window`]) as SQLite's `window.c` plans them: each call's arguments, partition
//! and order keys become input slots of the stage (computed by the scan for every row), its
//! window (a `WINDOW` clause's, a base window's extended, or its own) one of the stage's
//! passes, and the call a slot after the inputs. An expression around the calls is evaluated
//! by the stage itself, over input slots holding the columns it reads, as SQLite's outer
//! query evaluates it on the rows it returns.

use std::ops::ControlFlow;

use engine::datatype3::Collation;
use engine::query::ir::{
    AggFunc, AggSpec, Expr, Frame, FrameBound, FrameUnits, SortKey, WindowCall, WindowFunc,
};
use engine::value::Value;
use sqlparser::ast;

use super::typed::Typed;
use super::window_context::{find_named, named_window, CallEntry, WindowContext, RESULT_BASE};
use super::{sort_key, Resolver, Stage};
use crate::error::{invalid, unsupported, SqlError};

impl Resolver<'_> {
    /// Whether `e` calls a window function (also through a result alias).
    pub(crate) fn has_window(&self, e: &ast::Expr) -> bool {
        // A subquery's windows are its own.
        let e = &*super::outside_subqueries(e);
        let mut aliased = Vec::new();
        let found = ast::visit_expressions(e, |x| match x {
            ast::Expr::Function(f) if f.over.is_some() => ControlFlow::Break(()),
            ast::Expr::Identifier(i) => {
                if let Some(a) = self.alias_of(&i.value) {
                    aliased.push(a);
                }
                ControlFlow::Continue(())
            }
            _ => ControlFlow::Continue(()),
        })
        .is_break();
        found
            || aliased.iter().any(|a| {
                ast::visit_expressions(&*super::outside_subqueries(a), |x| match x {
                    ast::Expr::Function(f) if f.over.is_some() => ControlFlow::Break(()),
                    _ => ControlFlow::Continue(()),
                })
                .is_break()
            })
    }

    /// `e`, which calls no window function, in the window stage: resolved over the row, its
    /// columns then read from input slots.
    pub(super) fn outside_window(
        &mut self,
        e: &ast::Expr,
        ctx: &mut WindowContext,
        depth: usize,
    ) -> Result<Typed, SqlError> {
        let mut t = self.resolve_input(e, ctx, depth)?;
        ctx.fallible_outside |= t.expr.may_fail();
        t.expr.visit_mut(&mut |x| {
            if let Expr::Column(i) = x {
                *x = Expr::Column(ctx.input(Expr::Column(*i)));
            }
        });
        Ok(t)
    }

    /// A row-stage expression as an input slot.
    fn input_of(
        &mut self,
        e: &ast::Expr,
        ctx: &mut WindowContext,
        d: usize,
    ) -> Result<(usize, Typed), SqlError> {
        if self.has_window(e) {
            return unsupported("window functions inside a window function's arguments or window");
        }
        let t = self.resolve_input(e, ctx, d)?;
        Ok((ctx.input(t.expr.clone()), t))
    }

    /// `e` as the window stage's sub-select computes it: over the row, or over the group
    /// when the statement is grouped ([`WindowContext::group`]).
    fn resolve_input(
        &mut self,
        e: &ast::Expr,
        ctx: &mut WindowContext,
        d: usize,
    ) -> Result<Typed, SqlError> {
        match ctx.group.as_mut() {
            Some(group) => self.resolve(e, &mut Stage::Group(group), d),
            None => self.resolve(e, &mut Stage::Row, d),
        }
    }

    /// `name(args) [FILTER (WHERE c)] OVER window`: a slot of the window stage.
    pub(super) fn window_call(
        &mut self,
        f: &ast::Function,
        name: &str,
        args: &[&ast::Expr],
        (distinct, star): (bool, bool),
        ctx: &mut WindowContext,
        d: usize,
    ) -> Result<Typed, SqlError> {
        let over = f.over.as_ref().expect("a window call has OVER");
        let n = args.len();
        let arity = |ok: bool| -> Result<(), SqlError> {
            if ok && !star {
                Ok(())
            } else {
                invalid(format!("wrong number of arguments to function {name}()"))
            }
        };
        let func = match name {
            "row_number" => arity(n == 0).map(|_| WindowFunc::RowNumber),
            "rank" => arity(n == 0).map(|_| WindowFunc::Rank),
            "dense_rank" => arity(n == 0).map(|_| WindowFunc::DenseRank),
            "percent_rank" => arity(n == 0).map(|_| WindowFunc::PercentRank),
            "cume_dist" => arity(n == 0).map(|_| WindowFunc::CumeDist),
            "ntile" => arity(n == 1).map(|_| WindowFunc::Ntile),
            "lag" => arity((1..=3).contains(&n)).map(|_| WindowFunc::Lag),
            "lead" => arity((1..=3).contains(&n)).map(|_| WindowFunc::Lead),
            "first_value" => arity(n == 1).map(|_| WindowFunc::FirstValue),
            "last_value" => arity(n == 1).map(|_| WindowFunc::LastValue),
            "nth_value" => arity(n == 2).map(|_| WindowFunc::NthValue),
            _ => {
                let agg = match (name, n, star) {
                    ("count", 0, _) => AggFunc::CountStar,
                    ("count", 1, false) => AggFunc::Count,
                    ("sum", 1, false) => AggFunc::Sum,
                    ("total", 1, false) => AggFunc::Total,
                    ("avg", 1, false) => AggFunc::Avg,
                    ("min", 1, false) => AggFunc::Min,
                    ("max", 1, false) => AggFunc::Max,
                    ("group_concat", 1 | 2, false) | ("string_agg", 2, false) => {
                        AggFunc::GroupConcat
                    }
                    ("count" | "sum" | "total" | "avg" | "min" | "max", _, _)
                    | ("group_concat" | "string_agg", _, _) => {
                        return invalid(format!("wrong number of arguments to function {name}()"))
                    }
                    _ => {
                        return unsupported(format!(
                            "{name}() as a window function (corescan's window functions: \
                             row_number, rank, dense_rank, percent_rank, cume_dist, ntile, \
                             lag, lead, first_value, last_value, nth_value and count, sum, \
                             total, avg, min, max, group_concat over windows)"
                        ))
                    }
                };
                Ok(WindowFunc::Aggregate(Box::new(AggSpec::new(agg, None))))
            }
        }?;
        if distinct {
            return invalid("DISTINCT is not supported for window functions");
        }
        let aggregate = matches!(func, WindowFunc::Aggregate(_));
        if f.filter.is_some() && !aggregate {
            return invalid("FILTER clause may only be used with aggregate window functions");
        }
        let mut func = func;
        let mut slots = Vec::with_capacity(n);
        // The result carries an argument's explicit COLLATE, as any function's does
        // (an ORDER BY on it sorts under it).
        let mut carried = None;
        for (k, a) in args.iter().enumerate() {
            if let WindowFunc::Aggregate(spec) = &mut func {
                if k == 1 {
                    // group_concat's separator: a constant.
                    let t = self.resolve(a, &mut Stage::Row, d)?;
                    if super::uses_slots(&t.expr) {
                        return unsupported(format!(
                            "{name}() with a separator that is not a constant"
                        ));
                    }
                    spec.separator =
                        Some(engine::query::eval::eval(&t.expr, &[]).map_err(SqlError::Invalid)?);
                    continue;
                }
                let (slot, t) = self.input_of(a, ctx, d)?;
                spec.collation = t.collation();
                carried = carried.or(t.collation.filter(|c| c.1));
                slots.push(slot);
                continue;
            }
            let (slot, t) = self.input_of(a, ctx, d)?;
            carried = carried.or(t.collation.filter(|c| c.1));
            slots.push(slot);
        }
        let filter = match &f.filter {
            Some(c) => {
                if self.has_window(c) {
                    return unsupported("window functions inside FILTER");
                }
                let c = self.resolve_input(c, ctx, d)?;
                Some(ctx.input(Expr::Case {
                    operand: None,
                    whens: vec![(
                        c.expr,
                        Expr::Literal(Value::Integer(1)),
                        None,
                        Collation::Binary,
                    )],
                    otherwise: Some(Box::new(Expr::Literal(Value::Integer(0)))),
                }))
            }
            None => None,
        };
        let spec = self.window_spec(over, ctx)?;
        let (partition, order, frame) = self.resolve_window(&spec, ctx, d)?;
        // The ranking functions, lag and lead ignore the frame.
        let frame = if aggregate
            || matches!(
                func,
                WindowFunc::FirstValue | WindowFunc::LastValue | WindowFunc::NthValue
            ) {
            frame
        } else {
            default_frame()
        };
        let linked_frame = fixed_frame(&func).unwrap_or_else(|| frame.clone());
        let call = ctx.calls.len();
        ctx.calls.push(CallEntry {
            call: WindowCall {
                func,
                args: slots,
                filter,
                frame,
            },
            partition,
            order,
            linked_frame,
            copied: ctx.copying,
        });
        Ok(Typed {
            expr: Expr::Column(RESULT_BASE + call),
            affinity: None,
            collation: carried,
        })
    }

    /// The window a call's `OVER` names or writes, a named base window extended.
    fn window_spec(
        &self,
        over: &ast::WindowType,
        ctx: &WindowContext,
    ) -> Result<ast::WindowSpec, SqlError> {
        match over {
            ast::WindowType::NamedWindow(name) => find_named(&ctx.named, name).cloned(),
            ast::WindowType::WindowSpec(spec) => named_window(&ctx.named, spec.clone()),
        }
    }

    /// A window's partition keys, order and frame, their expressions as input slots.
    #[allow(clippy::type_complexity)]
    fn resolve_window(
        &mut self,
        spec: &ast::WindowSpec,
        ctx: &mut WindowContext,
        d: usize,
    ) -> Result<(Vec<(usize, Collation)>, Vec<SortKey>, Frame), SqlError> {
        let mut partition = Vec::with_capacity(spec.partition_by.len());
        for e in &spec.partition_by {
            let (slot, t) = self.input_of(e, ctx, d)?;
            partition.push((slot, t.collation()));
        }
        let mut order = Vec::with_capacity(spec.order_by.len());
        for term in &spec.order_by {
            let (slot, t) = self.input_of(&term.expr, ctx, d)?;
            order.push(sort_key(
                term,
                Typed {
                    expr: Expr::Column(slot),
                    ..t
                },
            )?);
        }
        let frame = match &spec.window_frame {
            None => default_frame(),
            Some(w) => self.frame(w, order.len(), d)?,
        };
        Ok((partition, order, frame))
    }

    /// A written frame, checked as SQLite checks it.
    fn frame(
        &mut self,
        w: &ast::WindowFrame,
        order_terms: usize,
        d: usize,
    ) -> Result<Frame, SqlError> {
        let units = match w.units {
            ast::WindowFrameUnits::Rows => FrameUnits::Rows,
            ast::WindowFrameUnits::Range => FrameUnits::Range,
            ast::WindowFrameUnits::Groups => FrameUnits::Groups,
        };
        let end = w
            .end_bound
            .clone()
            .unwrap_or(ast::WindowFrameBound::CurrentRow);
        use ast::WindowFrameBound as B;
        let bad = matches!(
            (&w.start_bound, &end),
            (B::Following(None), _)
                | (_, B::Preceding(None))
                | (B::CurrentRow, B::Preceding(Some(_)))
                | (B::Following(Some(_)), B::Preceding(_) | B::CurrentRow)
        );
        if bad {
            return invalid("unsupported frame specification");
        }
        let offsets = matches!(w.start_bound, B::Preceding(Some(_)) | B::Following(Some(_)))
            || matches!(end, B::Preceding(Some(_)) | B::Following(Some(_)));
        if units == FrameUnits::Range && offsets && order_terms != 1 {
            return invalid(
                "RANGE with offset PRECEDING/FOLLOWING requires one ORDER BY expression",
            );
        }
        let start = self.bound(&w.start_bound, units, "starting", d)?;
        let end = self.bound(&end, units, "ending", d)?;
        Ok(Frame { units, start, end })
    }

    /// One frame bound, its offset a constant checked as SQLite's `windowCheckValue` does.
    fn bound(
        &mut self,
        b: &ast::WindowFrameBound,
        units: FrameUnits,
        which: &str,
        d: usize,
    ) -> Result<FrameBound, SqlError> {
        use ast::WindowFrameBound as B;
        let offset = |r: &mut Self, e: &ast::Expr| -> Result<Value, SqlError> {
            // A string offset reaches here as an INTERVAL without a unit.
            let e = match e {
                ast::Expr::Interval(ast::Interval {
                    value,
                    leading_field: None,
                    leading_precision: None,
                    last_field: None,
                    fractional_seconds_precision: None,
                }) => value.as_ref(),
                other => other,
            };
            let t = r.resolve(e, &mut Stage::Row, d)?;
            if super::uses_slots(&t.expr) {
                return unsupported(format!("a frame {which} offset that is not a constant"));
            }
            let v = engine::query::eval::eval(&t.expr, &[]).map_err(SqlError::Invalid)?;
            let v = engine::datatype3::apply_column_affinity(
                v.as_ref(),
                engine::datatype3::Affinity::Numeric,
            );
            let ok = match (&v, units) {
                (Value::Integer(i), _) => *i >= 0,
                (Value::Real(r), FrameUnits::Range) => *r >= 0.0,
                _ => false,
            };
            if !ok {
                let what = if units == FrameUnits::Range {
                    "number"
                } else {
                    "integer"
                };
                return invalid(format!(
                    "frame {which} offset must be a non-negative {what}"
                ));
            }
            Ok(v)
        };
        Ok(match b {
            B::CurrentRow => FrameBound::CurrentRow,
            B::Preceding(None) => FrameBound::UnboundedPreceding,
            B::Following(None) => FrameBound::UnboundedFollowing,
            B::Preceding(Some(e)) => FrameBound::Preceding(offset(self, e)?),
            B::Following(Some(e)) => FrameBound::Following(offset(self, e)?),
        })
    }
}

/// The frame `sqlite3WindowUpdate` gives the ranking functions, `lag` and `lead` whatever
/// the window says (`None`: the function keeps its window's).
fn fixed_frame(func: &WindowFunc) -> Option<Frame> {
    use FrameBound::{CurrentRow, Following, UnboundedFollowing, UnboundedPreceding};
    let (units, start, end) = match func {
        WindowFunc::RowNumber | WindowFunc::Lag => {
            (FrameUnits::Rows, UnboundedPreceding, CurrentRow)
        }
        WindowFunc::Rank | WindowFunc::DenseRank => {
            (FrameUnits::Range, UnboundedPreceding, CurrentRow)
        }
        WindowFunc::PercentRank => (FrameUnits::Groups, CurrentRow, UnboundedFollowing),
        WindowFunc::CumeDist => (
            FrameUnits::Groups,
            Following(Value::Integer(1)),
            UnboundedFollowing,
        ),
        WindowFunc::Ntile => (FrameUnits::Rows, CurrentRow, UnboundedFollowing),
        WindowFunc::Lead => (FrameUnits::Rows, UnboundedPreceding, UnboundedFollowing),
        _ => return None,
    };
    Some(Frame { units, start, end })
}

/// The frame of a window that writes none: `RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT
/// ROW` (the whole partition when there is no `ORDER BY`: every row is then a peer).
fn default_frame() -> Frame {
    Frame {
        units: FrameUnits::Range,
        start: FrameBound::UnboundedPreceding,
        end: FrameBound::CurrentRow,
    }
}
