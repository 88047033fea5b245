//! Cutting a sorted list of leaf pages into extents (runs of consecutive pages) and into
//! contiguous, disjoint per-executor ranges.

/// A run of consecutive page numbers: `first_page ..= first_page + pages - 1`.
/// The unit of coalesced I/O: adjacent pages of one extent can be read with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Extent {
    /// The first page (1-based).
    pub first_page: u32,
    /// How many pages the run holds (at least 1).
    pub pages: u32,
}

impl Extent {
    /// The last page of the run.
    pub fn last_page(&self) -> u32 {
        // Saturating: a malformed extent must not panic (pages is at least 1 when built here).
        self.first_page.saturating_add(self.pages.saturating_sub(1))
    }
}

/// The leaf pages one executor scans: a contiguous slice of the table's leaf list (by page
/// number, or in b-tree order for [`crate::TablePlan::split_in_key_order`]), expressed as
/// extents in the list's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafRange {
    /// Position of this range among the ranges of one split (0-based).
    pub index: usize,
    /// The extents of the range, in the order of the list it was cut from (ascending page
    /// order for a split by page number).
    pub extents: Vec<Extent>,
}

impl LeafRange {
    /// Number of leaf pages in the range.
    pub fn pages(&self) -> u64 {
        self.extents.iter().map(|e| u64::from(e.pages)).sum()
    }
    /// The first page of the range, if it is not empty.
    pub fn first_page(&self) -> Option<u32> {
        self.extents.first().map(|e| e.first_page)
    }
    /// The last page of the range, if it is not empty.
    pub fn last_page(&self) -> Option<u32> {
        self.extents.last().map(Extent::last_page)
    }
}

/// Groups distinct page numbers into runs of consecutive pages, keeping their order (a page
/// joins the run before it only when it is that run's next page number).
pub fn extents_of(pages: &[u32]) -> Vec<Extent> {
    let mut extents: Vec<Extent> = Vec::new();
    for &page in pages {
        match extents.last_mut() {
            Some(e) if u64::from(e.first_page) + u64::from(e.pages) == u64::from(page) => {
                e.pages += 1;
            }
            _ => extents.push(Extent {
                first_page: page,
                pages: 1,
            }),
        }
    }
    extents
}

/// How many of `total` items each weight gets: proportional shares rounded by the largest
/// remainder method, so the shares sum to `total` exactly.
///
/// Ties in the remainder go to the earlier weight, so equal weights yield shares that differ
/// by at most one, larger first. A zero weight gets nothing. When every weight is zero they
/// are treated as equal (no weight information is not a reason to scan nothing); an empty
/// slice yields no shares.
pub fn proportional_shares(total: u64, weights: &[u32]) -> Vec<u64> {
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    if weights.is_empty() {
        return Vec::new();
    }
    if sum == 0 {
        return proportional_shares(total, &vec![1; weights.len()]);
    }
    let total128 = u128::from(total);
    let mut shares: Vec<u64> = Vec::with_capacity(weights.len());
    let mut remainders: Vec<(u128, usize)> = Vec::with_capacity(weights.len());
    for (i, &w) in weights.iter().enumerate() {
        let exact = total128 * u128::from(w);
        // exact / sum <= total, so it fits in u64.
        shares.push((exact / sum) as u64);
        remainders.push((exact % sum, i));
    }
    let given: u64 = shares.iter().sum();
    // Fewer leftovers than weights with a non-zero remainder, so zero weights get none.
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in remainders.iter().take((total - given) as usize) {
        shares[i] += 1;
    }
    shares
}

/// Cuts distinct `leaves` (in the order they are to be read) into `weights.len()` contiguous ranges whose page counts are
/// [`proportional_shares`] of the weights. Extents are cut where a range boundary falls inside
/// them.
pub fn split_leaves(leaves: &[u32], weights: &[u32]) -> Vec<LeafRange> {
    let shares = proportional_shares(leaves.len() as u64, weights);
    let mut start = 0usize;
    shares
        .iter()
        .enumerate()
        .map(|(index, &n)| {
            let end = start + n as usize;
            let range = LeafRange {
                index,
                extents: extents_of(leaves.get(start..end).unwrap_or(&[])),
            };
            start = end;
            range
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_group_consecutive_pages() {
        let e = extents_of(&[2, 3, 4, 7, 9, 10, u32::MAX]);
        let runs: Vec<(u32, u32)> = e.iter().map(|e| (e.first_page, e.pages)).collect();
        assert_eq!(runs, [(2, 3), (7, 1), (9, 2), (u32::MAX, 1)]);
        assert_eq!(e[0].last_page(), 4);
        assert!(extents_of(&[]).is_empty());
    }

    #[test]
    fn shares_follow_the_largest_remainder() {
        assert_eq!(proportional_shares(10, &[1, 1, 1]), [4, 3, 3]);
        assert_eq!(proportional_shares(10, &[1, 3]), [3, 7]); // 2.5 / 7.5: tie to the first
        assert_eq!(proportional_shares(7, &[0, 2, 0, 1]), [0, 5, 0, 2]);
        assert_eq!(proportional_shares(5, &[0, 0]), [3, 2]);
        assert!(proportional_shares(5, &[]).is_empty());
        assert_eq!(proportional_shares(0, &[1, 2]), [0, 0]);
        assert_eq!(
            proportional_shares(u64::from(u32::MAX), &[u32::MAX, u32::MAX, 1]),
            [2_147_483_647, 2_147_483_647, 1]
        );
    }

    #[test]
    fn leaves_in_key_order_keep_their_order() {
        // Leaves 7, 8, then 3, 4, 5, then 9 in key order: runs consecutive in the file and in
        // the order, listed in the order; the ranges are slices of the order.
        let e = extents_of(&[7, 8, 3, 4, 5, 9]);
        let runs: Vec<(u32, u32)> = e.iter().map(|e| (e.first_page, e.pages)).collect();
        assert_eq!(runs, [(7, 2), (3, 3), (9, 1)]);
        let r = split_leaves(&[7, 8, 3, 4, 5, 9], &[1, 1]);
        let pages = |r: &LeafRange| -> Vec<u32> {
            r.extents
                .iter()
                .flat_map(|e| e.first_page..=e.last_page())
                .collect()
        };
        assert_eq!(pages(&r[0]), [7, 8, 3]);
        assert_eq!(pages(&r[1]), [4, 5, 9]);
    }

    #[test]
    fn ranges_cut_extents_at_boundaries() {
        let r = split_leaves(&[1, 2, 3, 4, 5, 8], &[1, 1]);
        assert_eq!(
            r[0].extents,
            [Extent {
                first_page: 1,
                pages: 3
            }]
        );
        assert_eq!(
            r[1].extents,
            [
                Extent {
                    first_page: 4,
                    pages: 2
                },
                Extent {
                    first_page: 8,
                    pages: 1
                }
            ]
        );
        assert_eq!(
            (r[1].index, r[1].first_page(), r[1].last_page()),
            (1, Some(4), Some(8))
        );
    }
}
