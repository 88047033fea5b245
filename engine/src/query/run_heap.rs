//! A binary min-heap of run (or cursor) numbers, ordered by a comparison the caller gives:
//! what the k-way merges of sorted runs keep ([`super::sort`]'s rows, [`super::group_merge`]'s
//! groups), so that the runs' heads stay where the runs hold them and only numbers move.

/// Makes `heap` a heap under `less` (`less(a, b)`: run `a`'s head comes before run `b`'s).
pub(super) fn heapify(heap: &mut [usize], mut less: impl FnMut(usize, usize) -> bool) {
    for at in (0..heap.len() / 2).rev() {
        sift_down(heap, at, &mut less);
    }
}

/// Moves the entry at `at` down to its place under `less`.
pub(super) fn sift_down(
    heap: &mut [usize],
    mut at: usize,
    mut less: impl FnMut(usize, usize) -> bool,
) {
    let len = heap.len();
    loop {
        let (left, right) = (2 * at + 1, 2 * at + 2);
        let mut least = at;
        if left < len && less(heap[left], heap[least]) {
            least = left;
        }
        if right < len && less(heap[right], heap[least]) {
            least = right;
        }
        if least == at {
            return;
        }
        heap.swap(at, least);
        at = least;
    }
}

/// Puts the top run back in its place after its head changed: or, when `exhausted` (the run
/// has no head left), takes it off the heap.
pub(super) fn advance_top(
    heap: &mut Vec<usize>,
    exhausted: bool,
    less: impl FnMut(usize, usize) -> bool,
) {
    if exhausted {
        let last = heap.pop().expect("the top run is on the heap");
        if heap.is_empty() {
            return;
        }
        heap[0] = last;
    }
    sift_down(heap, 0, less);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_is_always_the_least_head() {
        // Runs' heads as values; each step takes the top, advances it by 10 until past 60.
        let mut heads = [35, 3, 17, 8, 50, 1, 22];
        let mut heap: Vec<usize> = (0..heads.len()).collect();
        heapify(&mut heap, |a, b| (heads[a], a) < (heads[b], b));
        let mut out = Vec::new();
        while let Some(&top) = heap.first() {
            out.push(heads[top]);
            heads[top] += 10;
            let exhausted = heads[top] > 60;
            advance_top(&mut heap, exhausted, |a, b| (heads[a], a) < (heads[b], b));
        }
        let mut sorted = out.clone();
        sorted.sort();
        assert_eq!(out, sorted);
        assert_eq!(out.len(), 3 + 6 + 5 + 6 + 2 + 6 + 4);
    }
}
