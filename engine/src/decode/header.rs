//! The record-header walk of the decoder's fast path: sixteen one-byte serial types turned into
//! the body offsets of their columns at once.
//!
//! A record header whose first sixteen serial types are single bytes (every type below 128:
//! integers, reals, NULL, the constants 0 and 1, and texts and blobs shorter than 58 bytes, which
//! is most rows of most tables) has its body sizes and their running sum computed with SSE2, which
//! every x86-64 CPU has, so nothing is chosen at run time: each lane maps its type to a size with
//! compares and masks (no per-byte branch, no table), the sizes are widened to 16-bit lanes and
//! summed by three shift-and-add steps. Other targets take the scalar loop over a size table,
//! which gives the same answer (the tests compare the two on every one-byte type).

use partitioner::format::serial_type_size;

/// How many serial types one walk covers.
pub(super) const LANES: usize = 16;

/// What one walk found: each column's body offset from the start of the body, and where the
/// last column's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Offsets {
    /// `starts[c]`: the sum of the body sizes of columns `0..c`.
    pub starts: [u16; LANES],
    /// The sum of all sixteen sizes (of the kept ones: see [`keep_mask`]).
    pub end: u32,
}

/// The mask that keeps the first `walk` (at most [`LANES`]) types and reads the rest as NULL
/// (size 0), so that whatever follows the needed types in the header or the body is ignored.
pub(super) fn keep_mask(walk: usize) -> [u8; LANES] {
    let mut mask = [0u8; LANES];
    mask[..walk.min(LANES)].fill(0xff);
    mask
}

/// Body offsets of the columns whose one-byte serial types are `types` (lanes outside `keep`
/// read as NULL); `None` when a kept type is not a one-byte one (the first byte of a longer
/// varint) or is reserved (10, 11): the general walk decides those.
#[inline(always)]
pub(super) fn offsets(types: &[u8; LANES], keep: &[u8; LANES]) -> Option<Offsets> {
    #[cfg(target_arch = "x86_64")]
    {
        sse2::offsets(types, keep)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        scalar(types, keep)
    }
}

/// The portable walk: one size-table lookup per type.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
pub(super) fn scalar(types: &[u8; LANES], keep: &[u8; LANES]) -> Option<Offsets> {
    let mut starts = [0u16; LANES];
    let mut end = 0u32;
    for ((start, &t), &k) in starts.iter_mut().zip(types).zip(keep) {
        let t = t & k;
        if t >= 0x80 {
            return None;
        }
        let size = serial_type_size(u64::from(t))?;
        *start = end as u16;
        end += size as u32;
    }
    Some(Offsets { starts, end })
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::*;

    use super::{Offsets, LANES};

    /// The SSE2 walk; see the module documentation.
    #[inline(always)]
    pub(super) fn offsets(types: &[u8; LANES], keep: &[u8; LANES]) -> Option<Offsets> {
        // SAFETY: SSE2 is part of the x86-64 baseline, so these instructions exist on every
        // CPU this code runs on; the loads and stores are unaligned ones of exactly 16 bytes
        // within the arrays given (and the 32-byte array below).
        unsafe {
            let t = _mm_and_si128(
                _mm_loadu_si128(types.as_ptr().cast()),
                _mm_loadu_si128(keep.as_ptr().cast()),
            );
            // Signed compares are right once no lane has its top bit set, which is checked
            // before any size is used.
            let above = |k: i8| _mm_cmpgt_epi8(t, _mm_set1_epi8(k));
            let (g4, g5, g7, g9, g11) = (above(4), above(5), above(7), above(9), above(11));
            let long_varint = _mm_cmplt_epi8(t, _mm_setzero_si128());
            let reserved = _mm_andnot_si128(g11, g9);
            if _mm_movemask_epi8(_mm_or_si128(long_varint, reserved)) != 0 {
                return None;
            }
            // 0..=4 -> itself, 5 -> 6, 6 and 7 -> 8, 8 and 9 -> 0, 12 and up -> (t - 12) / 2.
            let small = _mm_andnot_si128(g4, t);
            let six = _mm_and_si128(_mm_andnot_si128(g5, g4), _mm_set1_epi8(6));
            let eight = _mm_and_si128(_mm_andnot_si128(g7, g5), _mm_set1_epi8(8));
            let halved = _mm_srli_epi16::<1>(_mm_sub_epi8(t, _mm_set1_epi8(12)));
            let text = _mm_and_si128(_mm_and_si128(halved, _mm_set1_epi8(0x7f)), g11);
            let sizes = _mm_or_si128(_mm_or_si128(small, six), _mm_or_si128(eight, text));
            // Running sums in 16-bit lanes (sixteen sizes of at most 57 exceed a byte).
            let zero = _mm_setzero_si128();
            let lo = _mm_unpacklo_epi8(sizes, zero);
            let hi = _mm_unpackhi_epi8(sizes, zero);
            let scan = |v: __m128i| {
                let v = _mm_add_epi16(v, _mm_slli_si128::<2>(v));
                let v = _mm_add_epi16(v, _mm_slli_si128::<4>(v));
                _mm_add_epi16(v, _mm_slli_si128::<8>(v))
            };
            let lo_sums = scan(lo);
            let carry = _mm_shufflehi_epi16::<0xff>(lo_sums);
            let carry = _mm_unpackhi_epi64(carry, carry);
            let hi_sums = _mm_add_epi16(scan(hi), carry);
            let end = _mm_extract_epi16::<7>(hi_sums) as u32;
            // Inclusive sums minus each lane's own size: where each body starts.
            let mut starts = [0u16; LANES];
            _mm_storeu_si128(starts.as_mut_ptr().cast(), _mm_sub_epi16(lo_sums, lo));
            _mm_storeu_si128(
                starts.as_mut_ptr().add(8).cast(),
                _mm_sub_epi16(hi_sums, hi),
            );
            Some(Offsets { starts, end })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vector_walk_agrees_with_the_size_table_on_every_one_byte_type() {
        // Every type in every lane, with neighbours that vary, under every keep mask.
        for t in 0u8..=255 {
            for lane in 0..LANES {
                let mut types = [0u8; LANES];
                for (i, ty) in types.iter_mut().enumerate() {
                    *ty = [1u8, 7, 57, 0, 9, 127, 5, 6][(i + t as usize) % 8];
                }
                types[lane] = t;
                for walk in [0, 1, lane, lane + 1, LANES] {
                    let keep = keep_mask(walk);
                    assert_eq!(
                        offsets(&types, &keep),
                        scalar(&types, &keep),
                        "type {t} in lane {lane}, walk {walk}"
                    );
                }
            }
        }
    }

    #[test]
    fn offsets_are_running_sums_of_sqlite_body_sizes() {
        // integer 1 byte, real, NULL, text of 10 bytes (33), 0, blob of 3 bytes (18), int 6.
        let mut types = [0u8; LANES];
        types[..7].copy_from_slice(&[1, 7, 0, 33, 8, 18, 5]);
        let o = offsets(&types, &keep_mask(7)).unwrap();
        assert_eq!(&o.starts[..8], &[0, 1, 9, 9, 19, 19, 22, 28]);
        assert_eq!(o.end, 28);
        // A reserved type or a multi-byte varint is left to the general walk, unless masked.
        types[2] = 10;
        assert_eq!(offsets(&types, &keep_mask(7)), None);
        assert!(offsets(&types, &keep_mask(2)).is_some());
        types[2] = 0x81;
        assert_eq!(offsets(&types, &keep_mask(3)), None);
    }
}
