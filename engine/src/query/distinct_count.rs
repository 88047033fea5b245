//! `count(DISTINCT x)` without `GROUP BY`, in bounded memory: the query runs as `GROUP BY x`.
//!
//! An aggregate without `GROUP BY` is one group, so its `DISTINCT` state (every distinct
//! value seen, [`super::aggregate::AggState::Distinct`]) has no budget to spill under: 1.5M
//! distinct keys held about 280 MB whatever `--memory` said. The number of distinct values of
//! `x` is the number of groups of `GROUP BY x` whose key is not NULL, and a grouped query's
//! groups are bounded: each executor's group table spills sorted runs to the scratch
//! directory past its share of the budget ([`super::group_spill`]), and the merge cuts the
//! key space into slices merged on their own threads ([`super::group_merge`]). So a query
//! whose aggregates are `count(DISTINCT x)` (one `x`, under one collation) and plain
//! `count(*)`/`count(y)` is scanned as that grouped query ([`DistinctCount::inner`]), its
//! groups are counted without being kept ([`super::group_merge::GroupQuery::tally`]: the
//! plain counts merged across groups), and the query's one group is finished from the counts
//! as before (`HAVING`, the output columns, `LIMIT`).
//!
//! The answer is the same: `DISTINCT` and `GROUP BY` compare values alike (by the
//! aggregate's collation; `1` and `1.0` equal), NULL is one group and counts for nothing,
//! and the rows reach the same expressions (the key first, then the plain counts' arguments,
//! on every row that passes `WHERE`), so a failing row fails the query either way.
//!
//! Layering: beside the merge ([`super::merge`]); the runs ([`super::run`],
//! [`super::files`]) ask it whether a plan qualifies before they scan.

use super::aggregate::AggState;
use super::group_merge::{GroupQuery, Run};
use super::groups::Group;
use super::ir::{AggFunc, QueryPlan, Shape};
use super::merge::{group_runs, MergeError, MergedRows, Partial};

/// A query whose aggregates are `count(DISTINCT x)` and plain counts, without `GROUP BY`.
#[derive(Debug, Clone)]
pub struct DistinctCount {
    /// The query as planned.
    outer: QueryPlan,
    /// The same rows grouped by `x`, with the plain counts.
    inner: QueryPlan,
}

impl DistinctCount {
    /// `plan` as a grouped count, if it is one: no `GROUP BY`, no window, no `LIMIT 0`,
    /// every aggregate a `count` without `FILTER` or `ORDER BY`, and at least one of them
    /// `count(DISTINCT x)`, all of one `x` and one collation.
    pub fn of(plan: &QueryPlan) -> Option<DistinctCount> {
        let Shape::Groups {
            keys, aggregates, ..
        } = &plan.shape
        else {
            return None;
        };
        if !keys.is_empty()
            || plan.windows.is_some()
            || plan.distinct
            || plan.limit == Some(0)
            || plan.arrival.is_some()
        {
            return None;
        }
        let counts = aggregates.iter().all(|a| {
            matches!(a.func, AggFunc::Count | AggFunc::CountStar)
                && a.filter.is_none()
                && a.order_by.is_empty()
                && a.second.is_none()
        });
        let mut distinct = aggregates.iter().filter(|a| a.distinct);
        let first = distinct.next()?;
        let key = first.arg.clone()?;
        if !counts
            || first.func != AggFunc::Count
            || distinct.any(|a| {
                a.func != AggFunc::Count
                    || a.arg.as_ref() != Some(&key)
                    || a.collation != first.collation
            })
        {
            return None;
        }
        let inner = QueryPlan {
            shape: Shape::Groups {
                keys: vec![(key, first.collation)],
                aggregates: aggregates.iter().filter(|a| !a.distinct).cloned().collect(),
                having: None,
                outputs: Vec::new(),
            },
            order_by: Vec::new(),
            limit: None,
            offset: 0,
            ..plan.clone()
        };
        Some(DistinctCount {
            outer: plan.clone(),
            inner,
        })
    }

    /// The plan to scan: the query's rows grouped by `x`.
    pub fn inner(&self) -> QueryPlan {
        self.inner.clone()
    }

    /// The query's answer from the partials of [`DistinctCount::inner`]'s scan (on up to
    /// `threads` threads), with the figures of its groups.
    pub fn merge(&self, partials: Vec<Partial>, threads: usize) -> Result<MergedRows, MergeError> {
        let inner = GroupQuery::of(&self.inner).expect("a grouped plan");
        let (runs, mut stats) =
            group_runs(partials, &inner.collations).map_err(MergeError::Spill)?;
        let tally = inner.tally(runs, threads).map_err(MergeError::Eval)?;
        stats.groups = tally.groups;
        let Shape::Groups { aggregates, .. } = &self.outer.shape else {
            unreachable!("DistinctCount::of takes grouped plans")
        };
        let mut plain = tally.states.into_iter();
        let states = aggregates
            .iter()
            .map(|a| match a.distinct {
                true => Some(AggState::Count(
                    i64::try_from(tally.keyed).unwrap_or(i64::MAX),
                )),
                false => plain.next(),
            })
            .collect::<Option<_>>()
            .expect("a state per plain count");
        let one = Group {
            keys: Default::default(),
            keys_rowid: i64::MIN,
            states,
        };
        let outer = GroupQuery::of(&self.outer).expect("a grouped plan");
        let merged = outer
            .merge(vec![Run::Memory(vec![one])], 1)
            .map_err(MergeError::Eval)?;
        Ok(MergedRows {
            rows: merged.rows,
            groups: Some(stats),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype3::Collation;
    use crate::query::ir::{AggSpec, ColumnRead, Expr};

    fn count(arg: Option<usize>, distinct: bool, collation: Collation) -> AggSpec {
        AggSpec {
            func: if arg.is_some() {
                AggFunc::Count
            } else {
                AggFunc::CountStar
            },
            arg: arg.map(Expr::Column),
            distinct,
            collation,
            separator: None,
            second: None,
            filter: None,
            order_by: Vec::new(),
        }
    }

    fn plan(keys: usize, aggregates: Vec<AggSpec>) -> QueryPlan {
        QueryPlan {
            columns: vec![ColumnRead::Rowid, ColumnRead::Rowid],
            constant_terms: Vec::new(),
            filter: None,
            shape: Shape::Groups {
                keys: (0..keys)
                    .map(|k| (Expr::Column(k), Collation::Binary))
                    .collect(),
                outputs: (0..aggregates.len())
                    .map(|a| Expr::Column(keys + a))
                    .collect(),
                aggregates,
                having: None,
            },
            order_by: Vec::new(),
            backward: false,
            limit: None,
            offset: 0,
            names: Vec::new(),
            distinct: false,
            windows: None,
            arrival: None,
        }
    }

    #[test]
    fn counts_of_one_distinct_argument_run_grouped_by_it() {
        let nocase = Collation::NoCase;
        let p = plan(
            0,
            vec![
                count(Some(1), true, nocase),
                count(None, false, Collation::Binary),
                count(Some(0), false, Collation::Binary),
                count(Some(1), true, nocase),
            ],
        );
        let c = DistinctCount::of(&p).expect("qualifies");
        let Shape::Groups {
            keys, aggregates, ..
        } = &c.inner().shape
        else {
            panic!("grouped")
        };
        assert_eq!(keys, &vec![(Expr::Column(1), nocase)]);
        // The plain counts, in order.
        assert_eq!(aggregates.len(), 2);
        assert!(aggregates.iter().all(|a| !a.distinct));
        assert_eq!(aggregates[0].func, AggFunc::CountStar);
    }

    #[test]
    fn other_aggregates_keep_the_one_group() {
        let b = Collation::Binary;
        // Two DISTINCT arguments, two collations, GROUP BY, sum(DISTINCT), no DISTINCT.
        let cases = [
            plan(0, vec![count(Some(0), true, b), count(Some(1), true, b)]),
            plan(
                0,
                vec![
                    count(Some(0), true, b),
                    count(Some(0), true, Collation::NoCase),
                ],
            ),
            plan(1, vec![count(Some(0), true, b)]),
            plan(
                0,
                vec![AggSpec {
                    func: AggFunc::Sum,
                    ..count(Some(0), true, b)
                }],
            ),
            plan(
                0,
                vec![
                    count(Some(0), true, b),
                    AggSpec {
                        func: AggFunc::Sum,
                        ..count(Some(0), false, b)
                    },
                ],
            ),
            plan(0, vec![count(Some(0), false, b)]),
        ];
        for p in &cases {
            assert!(DistinctCount::of(p).is_none(), "{p:?}");
        }
        let mut limited = plan(0, vec![count(Some(0), true, b)]);
        assert!(DistinctCount::of(&limited).is_some());
        limited.limit = Some(0);
        assert!(DistinctCount::of(&limited).is_none());
    }
}
