//! The decoder's text window for a batched query ([`decoder_window`]): when the filter's
//! conjuncts bound a text column between two ten-byte text constants (TPC-H Q6's
//! `l_shipdate >= '1994-01-01' AND l_shipdate < '1995-01-01'`), the decoder drops the rows
//! whose ten-byte text lies outside the bounds before they reach the batch (six rows in
//! seven for Q6).
//!
//! A dropped row must be one the filter rejects, under SQLite's rules:
//!
//! - the comparisons are BINARY, and each constant stays text under the comparison's
//!   affinity, so a ten-byte text value that stays text compares bytewise, and one outside
//!   `[lo, hi)` fails a bound;
//! - under a numeric affinity a text value that reads as a number becomes one, and a number
//!   is below every text: it fails a lower bound (`>=`, `>`, `=`) whatever its bytes, so one
//!   is required then; every bound on the column follows the same affinity rule;
//! - an upper bound is always required (the window cannot leave its top open);
//! - the filter is a conjunction of infallible terms (the batch's filter), so failing one
//!   conjunct rejects the row, whatever the others say and in any order.
//!
//! The kernel's own filter still judges every row that reaches it.

use crate::datatype3::{Affinity, Collation};
use crate::decode::TextWindow;
use crate::value::Value;

use super::eval::maybe_number;
use super::ir::{CmpOp, Expr};

/// Ten bytes as a number, so bounds are ordered and stepped as the decoder orders texts.
fn key(t: &[u8; TextWindow::LEN]) -> u128 {
    t.iter().fold(0u128, |k, &b| (k << 8) | u128::from(b))
}

fn bytes(k: u128) -> [u8; TextWindow::LEN] {
    let mut t = [0u8; TextWindow::LEN];
    for (i, b) in t.iter_mut().enumerate() {
        *b = (k >> (8 * (TextWindow::LEN - 1 - i))) as u8;
    }
    t
}

/// One past the largest ten-byte text.
const END: u128 = 1 << (8 * TextWindow::LEN);

/// The filter's conjuncts.
fn conjuncts<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::And(a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        other => out.push(other),
    }
}

/// One conjunct's bound on a slot.
struct Bound {
    /// The row is kept when `lower <= key < upper` (keys of ten-byte texts).
    lower: u128,
    upper: u128,
    /// The conjunct rejects every number (`>=`, `>`, `=`, `IS` against text).
    rejects_numbers: bool,
    /// The comparison's affinity leaves text values text.
    text_stays: bool,
}

/// The bound conjunct `e` puts on slot `slot`, if it is a BINARY comparison with a ten-byte
/// text constant that stays text.
fn bound(e: &Expr, slot: usize) -> Option<Bound> {
    let Expr::Compare {
        op,
        left,
        right,
        affinity,
        collation,
    } = e
    else {
        return None;
    };
    let (op, constant) = match (&**left, &**right) {
        (Expr::Column(s), Expr::Literal(Value::Text(c))) if *s == slot => (*op, c),
        (Expr::Literal(Value::Text(c)), Expr::Column(s)) if *s == slot => (
            match op {
                CmpOp::Lt => CmpOp::Gt,
                CmpOp::Le => CmpOp::Ge,
                CmpOp::Gt => CmpOp::Lt,
                CmpOp::Ge => CmpOp::Le,
                other => *other,
            },
            c,
        ),
        _ => return None,
    };
    let c: &[u8; TextWindow::LEN] = constant.as_slice().try_into().ok()?;
    let text_stays = matches!(affinity, None | Some(Affinity::Text | Affinity::Blob));
    if *collation != Collation::Binary || (!text_stays && maybe_number(c)) {
        return None;
    }
    let k = key(c);
    let (lower, upper) = match op {
        CmpOp::Ge => (k, END),
        CmpOp::Gt => (k + 1, END),
        CmpOp::Lt => (0, k),
        CmpOp::Le => (0, k + 1),
        CmpOp::Eq | CmpOp::Is => (k, k + 1),
        CmpOp::Ne | CmpOp::IsNot => return None,
    };
    Some(Bound {
        lower,
        upper,
        rejects_numbers: matches!(op, CmpOp::Ge | CmpOp::Gt | CmpOp::Eq | CmpOp::Is),
        text_stays,
    })
}

/// The window for a batched query whose filter is `filter`, over the plan slots that
/// `needed` maps to the decoder's slots (record columns only), if its conjuncts bound one
/// column from above bytewise (and from below, under a numeric affinity: see the module
/// docs).
pub fn decoder_window(
    filter: Option<&Expr>,
    needed: impl Fn(usize) -> Option<usize>,
) -> Option<TextWindow> {
    windowed(filter, needed).map(|(_, w)| w)
}

/// [`decoder_window`] with the plan slot it bounds.
fn windowed(
    filter: Option<&Expr>,
    needed: impl Fn(usize) -> Option<usize>,
) -> Option<(usize, TextWindow)> {
    let mut terms = Vec::new();
    conjuncts(filter?, &mut terms);
    let slots = terms.iter().filter_map(|t| match t {
        Expr::Compare { left, right, .. } => match (&**left, &**right) {
            (Expr::Column(s), Expr::Literal(_)) | (Expr::Literal(_), Expr::Column(s)) => Some(*s),
            _ => None,
        },
        _ => None,
    });
    for slot in slots {
        let Some(decoder_slot) = needed(slot) else {
            continue;
        };
        let bounds: Vec<Bound> = terms.iter().filter_map(|t| bound(t, slot)).collect();
        let Some(first) = bounds.first() else {
            continue;
        };
        // One rule for every bound: all bytewise for every text, or all under a numeric
        // affinity with one that rejects the texts that read as numbers.
        let text_stays = first.text_stays;
        if bounds.iter().any(|b| b.text_stays != text_stays)
            || (!text_stays && !bounds.iter().any(|b| b.rejects_numbers))
        {
            continue;
        }
        let lo = bounds.iter().map(|b| b.lower).max().unwrap_or(0);
        let hi = bounds.iter().map(|b| b.upper).min().unwrap_or(END);
        if hi >= END {
            // No upper bound among ten-byte texts: the window cannot leave its top open.
            continue;
        }
        // An empty window drops every ten-byte text.
        let (lo, hi) = if lo >= hi { (0, 0) } else { (lo, hi) };
        return Some((
            slot,
            TextWindow {
                slot: decoder_slot,
                lo: bytes(lo),
                hi: bytes(hi),
                sep: None,
            },
        ));
    }
    None
}

/// The decoder's window and the filter the batch then applies: the same conjuncts, the
/// window's bounds last, since the rows that reach the batch mostly pass them (reordering
/// the batch's conjuncts is free: they cannot fail, and a row is kept only when all are
/// true). `None` without a window.
pub fn window_and_filter(
    filter: Option<&Expr>,
    needed: impl Fn(usize) -> Option<usize>,
) -> Option<(TextWindow, Expr)> {
    let (slot, window) = windowed(filter, needed)?;
    let mut terms = Vec::new();
    conjuncts(filter?, &mut terms);
    let (bounds, others): (Vec<&Expr>, Vec<&Expr>) =
        terms.into_iter().partition(|t| bound(t, slot).is_some());
    let reordered = others
        .into_iter()
        .chain(bounds)
        .cloned()
        .reduce(|a, b| Expr::And(Box::new(a), Box::new(b)))?;
    Some((window, reordered))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(op: CmpOp, column_left: bool, c: &str, affinity: Option<Affinity>) -> Expr {
        let (col, lit) = (
            Box::new(Expr::Column(1)),
            Box::new(Expr::Literal(Value::text(c))),
        );
        let (left, right) = if column_left { (col, lit) } else { (lit, col) };
        Expr::Compare {
            op,
            left,
            right,
            affinity,
            collation: Collation::Binary,
        }
    }

    fn and(a: Expr, b: Expr) -> Expr {
        Expr::And(Box::new(a), Box::new(b))
    }

    fn window(e: &Expr) -> Option<(Vec<u8>, Vec<u8>)> {
        decoder_window(Some(e), |s| (s == 1).then_some(0)).map(|w| (w.lo.to_vec(), w.hi.to_vec()))
    }

    #[test]
    fn windows_only_where_sqlite_compares_bytewise() {
        let num = Some(Affinity::Numeric);
        let q6 = and(
            and(
                cmp(CmpOp::Ge, true, "1994-01-01", num),
                cmp(CmpOp::Lt, true, "1995-01-01", num),
            ),
            Expr::Column(0),
        );
        assert_eq!(
            window(&q6),
            Some((b"1994-01-01".to_vec(), b"1995-01-01".to_vec()))
        );
        // The batch tests the other conjuncts first.
        let (_, reordered) = window_and_filter(Some(&q6), |s| (s == 1).then_some(0)).unwrap();
        let mut terms = Vec::new();
        conjuncts(&reordered, &mut terms);
        assert_eq!(terms[0], &Expr::Column(0));
        assert_eq!(terms.len(), 3);
        // `>` and `<=` step to the next ten-byte text; constants on the left flip.
        let e = and(
            cmp(CmpOp::Lt, false, "1994-01-01", None),
            cmp(CmpOp::Ge, false, "1994-12-31", None),
        );
        assert_eq!(
            window(&e),
            Some((b"1994-01-02".to_vec(), b"1994-12-32".to_vec()))
        );
        // Under a numeric affinity, an upper bound alone keeps texts that read as numbers.
        assert_eq!(window(&cmp(CmpOp::Le, true, "1998-09-02", num)), None);
        assert_eq!(
            window(&cmp(CmpOp::Le, true, "1998-09-02", None)),
            Some((vec![0; 10], b"1998-09-03".to_vec()))
        );
        // No upper bound; another length; a constant that is a number; mixed rules; OR.
        assert_eq!(window(&cmp(CmpOp::Ge, true, "1994-01-01", None)), None);
        assert_eq!(window(&cmp(CmpOp::Lt, true, "1994-01-0", None)), None);
        assert_eq!(
            window(&and(
                cmp(CmpOp::Ge, true, "1000000000", num),
                cmp(CmpOp::Lt, true, "2000000000", num)
            )),
            None
        );
        assert_eq!(
            window(&and(
                cmp(CmpOp::Ge, true, "1994-01-01", None),
                cmp(CmpOp::Lt, true, "1995-01-01", num)
            )),
            None
        );
        let or = Expr::Or(
            Box::new(cmp(CmpOp::Ge, true, "1994-01-01", None)),
            Box::new(cmp(CmpOp::Lt, true, "1995-01-01", None)),
        );
        assert_eq!(window(&or), None);
        let mut nocase = cmp(CmpOp::Lt, true, "1995-01-01", None);
        if let Expr::Compare { collation, .. } = &mut nocase {
            *collation = Collation::NoCase;
        }
        assert_eq!(window(&nocase), None);
        // Bounds that exclude each other drop every ten-byte text.
        let e = and(
            cmp(CmpOp::Ge, true, "1995-01-01", num),
            cmp(CmpOp::Lt, true, "1994-01-01", num),
        );
        assert_eq!(window(&e), Some((vec![0; 10], vec![0; 10])));
        // The top text: `> all-0xff` leaves nothing, `<= all-0xff` has no top.
        let k = key(&[0xff; 10]);
        assert_eq!(k + 1, END);
        assert_eq!(bytes(key(b"1994-01-01")), *b"1994-01-01");
    }
}
