//! The window stage's bookkeeping while a statement is resolved ([`WindowContext`]): its
//! input slots, its calls with their windows, and how SQLite nests the windows into passes
//! ([`WindowContext::finish`]); the `WINDOW` clause's named windows. A leaf below the
//! resolver ([`super::window`] resolves the calls into it).

use engine::datatype3::Collation;
use engine::query::ir::{Expr, Frame, SortKey, WindowCall, WindowPass};
use sqlparser::ast;

use crate::error::{invalid, SqlError};

/// The window stage's inputs and calls, collected while the output columns and `ORDER BY`
/// are resolved; [`WindowContext::finish`] groups the calls into SQLite's passes.
#[derive(Debug, Default)]
pub struct WindowContext {
    /// Row-stage expressions the stage reads: its input slots.
    pub inputs: Vec<Expr>,
    /// Every call, in the order SQLite resolves them (the result columns, then `ORDER BY`).
    pub(super) calls: Vec<CallEntry>,
    /// The `WINDOW` clause's windows, by name.
    pub named: Vec<(String, ast::WindowSpec)>,
    /// Whether an expression the stage evaluates itself (outside the calls) can fail.
    pub fallible_outside: bool,
    /// Calls now resolved are copies of a result column's, reached through an `ORDER BY`
    /// alias or position (`resolveAlias` duplicates the expression, and the duplicate's
    /// window is not linked to the statement's).
    pub copying: bool,
    /// A grouped statement's group stage (its keys, and its aggregates as they are found):
    /// SQLite's rewrite (`sqlite3WindowRewrite`) moves the `GROUP BY` and `HAVING` into the
    /// sub-select whose rows the windows read, so the inputs are then expressions over the
    /// group, not over the row.
    pub group: Option<super::group_context::GroupContext>,
}

/// One call with its window as SQLite compares windows (`sqlite3WindowCompare`).
#[derive(Debug)]
pub(super) struct CallEntry {
    pub(super) call: WindowCall,
    pub(super) partition: Vec<(usize, Collation)>,
    pub(super) order: Vec<SortKey>,
    /// The frame after `sqlite3WindowUpdate` (fixed for the ranking functions, `lag` and
    /// `lead`): windows differing in it are not one window to SQLite.
    pub(super) linked_frame: Frame,
    /// A copy through an alias or position (see [`WindowContext::copying`]).
    pub(super) copied: bool,
}

/// Result slots are numbered from this base until the stage is finished: inputs keep being
/// added while later calls are resolved, so a call's slot is `RESULT_BASE + call` and
/// [`renumber_results`] moves them after the inputs.
pub(super) const RESULT_BASE: usize = usize::MAX / 2;

impl WindowContext {
    /// A context for a statement whose `WINDOW` clause defines `named`.
    pub fn with_named(named: Vec<(String, ast::WindowSpec)>) -> Self {
        WindowContext {
            named,
            ..WindowContext::default()
        }
    }

    /// The input slot computing `e` (one per distinct expression).
    pub(super) fn input(&mut self, e: Expr) -> usize {
        match self.inputs.iter().position(|x| *x == e) {
            Some(i) => i,
            None => {
                self.inputs.push(e);
                self.inputs.len() - 1
            }
        }
    }

    /// The passes in the order they run, and where each call's result is among the stage's
    /// results (`remap[call]`), as SQLite nests its windows (`sqlite3WindowRewrite`):
    ///
    /// - the statement's window is its first call's; every call whose window equals it
    ///   (same partition, order and frame once fixed) is computed with it, last of all;
    /// - the other calls move into a sub-select that is rewritten the same way (first
    ///   call's window, then the rest further in), so the last window written runs first;
    /// - a copy made through an alias or position never joins the statement's window, and a
    ///   call moved in that equals one moved before it (the same function, arguments,
    ///   `FILTER` and window) is that call.
    pub fn finish(&self) -> (Vec<WindowPass>, Vec<usize>) {
        let n = self.calls.len();
        let mut remap: Vec<usize> = (0..n).collect();
        let same_window = |a: &CallEntry, b: &CallEntry| {
            a.partition == b.partition && a.order == b.order && a.linked_frame == b.linked_frame
        };
        let mut layers: Vec<Vec<usize>> = Vec::new();
        let mut pending: Vec<usize> = (0..n).collect();
        let mut outer = true;
        while !pending.is_empty() {
            let linkable = |c: usize| !(outer && self.calls[c].copied);
            let Some(head) = pending.iter().copied().find(|&c| linkable(c)) else {
                outer = false;
                continue;
            };
            let (layer, rest): (Vec<usize>, Vec<usize>) = pending
                .iter()
                .partition(|&&c| linkable(c) && same_window(&self.calls[c], &self.calls[head]));
            // A call moved in that equals one moved in before it is that call.
            let mut moved: Vec<usize> = Vec::with_capacity(rest.len());
            for c in rest {
                let same = moved.iter().copied().find(|&d| {
                    let (a, b) = (&self.calls[c], &self.calls[d]);
                    a.call == b.call && same_window(a, b)
                });
                match same {
                    Some(d) => remap[c] = d,
                    None => moved.push(c),
                }
            }
            layers.push(layer);
            pending = moved;
            outer = false;
        }
        // Final result positions: the surviving calls, in their order.
        let mut position = vec![usize::MAX; n];
        let mut next = 0;
        for (c, p) in position.iter_mut().enumerate() {
            if remap[c] == c {
                *p = next;
                next += 1;
            }
        }
        let remap: Vec<usize> = (0..n).map(|c| position[remap[c]]).collect();
        let passes = layers
            .into_iter()
            .rev()
            .map(|layer| {
                let head = &self.calls[layer[0]];
                WindowPass {
                    partition: head.partition.clone(),
                    order: head.order.clone(),
                    calls: layer
                        .iter()
                        .map(|&c| (remap[c], self.calls[c].call.clone()))
                        .collect(),
                }
            })
            .collect();
        (passes, remap)
    }
}

/// Moves the calls' provisional slots in `e` after the inputs, each call where `remap` puts
/// its result.
pub fn renumber_results(e: &mut Expr, inputs: usize, remap: &[usize]) {
    e.visit_mut(&mut |x| {
        if let Expr::Column(i) = x {
            if *i >= RESULT_BASE {
                *i = inputs + remap[*i - RESULT_BASE];
            }
        }
    });
}

/// The window functions that are no aggregates.
const WINDOW_ONLY: &[&str] = &[
    "row_number",
    "rank",
    "dense_rank",
    "percent_rank",
    "cume_dist",
    "ntile",
    "lag",
    "lead",
    "first_value",
    "last_value",
    "nth_value",
];

/// Whether `name` is a window function that is no aggregate (`row_number`, `lag`...).
pub(crate) fn is_window_only(name: &str) -> bool {
    WINDOW_ONLY.contains(&name)
}

/// `OVER (base ...)`: the named window `base` with the call's own `ORDER BY` and frame, which
/// may add what the base lacks but not replace it (`sqlite3WindowChain`).
fn extend(
    base: ast::WindowSpec,
    spec: &ast::WindowSpec,
    name: &str,
) -> Result<ast::WindowSpec, SqlError> {
    if !spec.partition_by.is_empty() {
        return invalid(format!(
            "cannot override PARTITION clause of window: {name}"
        ));
    }
    if !spec.order_by.is_empty() && !base.order_by.is_empty() {
        return invalid(format!("cannot override ORDER BY clause of window: {name}"));
    }
    if base.window_frame.is_some() {
        return invalid(format!(
            "cannot override frame specification of window: {name}"
        ));
    }
    Ok(ast::WindowSpec {
        window_name: None,
        partition_by: base.partition_by,
        order_by: if spec.order_by.is_empty() {
            base.order_by
        } else {
            spec.order_by.clone()
        },
        window_frame: spec.window_frame.clone(),
    })
}

/// The window `name` of the `WINDOW` clause.
pub(super) fn find_named<'n>(
    named: &'n [(String, ast::WindowSpec)],
    name: &ast::Ident,
) -> Result<&'n ast::WindowSpec, SqlError> {
    match named
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(&name.value))
    {
        Some((_, s)) => Ok(s),
        None => invalid(format!("no such window: {}", name.value)),
    }
}

/// `spec` with its base window (`OVER (base ORDER BY ...)`), if it names one, from `named`.
pub(crate) fn named_window(
    named: &[(String, ast::WindowSpec)],
    spec: ast::WindowSpec,
) -> Result<ast::WindowSpec, SqlError> {
    match &spec.window_name {
        None => Ok(spec),
        Some(base_name) => {
            let base = find_named(named, base_name)?.clone();
            extend(base, &spec, &base_name.value)
        }
    }
}
