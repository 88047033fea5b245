//! The record-header walk of the decoder's fast path: sixteen one-byte serial types turned into
//! the body offsets of their columns at once.
//!
//! A record header whose first sixteen serial types are single bytes (every type below 128:
//! integers, reals, NULL, the constants 0 and 1, and texts and blobs shorter than 58 bytes, which
//! is most rows of most tables) has its body sizes and their running sum computed with SSE2, which
//! every x86-64 CPU has: each lane maps its type to a size with
//! compares and masks (no per-byte branch, no table), the sizes are widened to 16-bit lanes and
//! summed by three shift-and-add steps. A CPU with AVX2 (detected at run time) runs the
//! decoder's page loop compiled for it, with a table shuffle for the sizes and one 256-bit
//! running sum. Other targets take the scalar loop over a size table, which gives the same
//! answer (the tests compare all three on every one-byte type).

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

/// A header walk: the body offsets of the columns whose one-byte serial types are `types`
/// (lanes outside `keep` read as NULL), or `None` when a kept type is not a one-byte one (the
/// first byte of a longer varint) or is reserved (10, 11): the general walk decides those.
pub(super) trait Walk {
    /// The walk.
    fn offsets(types: &[u8; LANES], keep: &[u8; LANES]) -> Option<Offsets>;

    /// One offset instead of all of them: the sum of the body sizes of the lanes in `within`
    /// (a subset of `keep`), or `None` under the same conditions as [`Walk::offsets`] (a kept
    /// type that is not a one-byte one). Cheaper than the running sums: one vector sum.
    fn sum(types: &[u8; LANES], keep: &[u8; LANES], within: &[u8; LANES]) -> Option<u32>;
}

/// The walk every CPU of the target can run: SSE2 on x86-64, the size table elsewhere.
pub(super) struct Baseline;

impl Walk for Baseline {
    #[inline(always)]
    fn offsets(types: &[u8; LANES], keep: &[u8; LANES]) -> Option<Offsets> {
        #[cfg(target_arch = "x86_64")]
        {
            sse2::offsets(types, keep)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            scalar(types, keep)
        }
    }

    #[inline(always)]
    fn sum(types: &[u8; LANES], keep: &[u8; LANES], within: &[u8; LANES]) -> Option<u32> {
        #[cfg(target_arch = "x86_64")]
        {
            sse2::sum(types, keep, within)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            scalar_sum(types, keep, within)
        }
    }
}

/// The AVX2 walk (a table shuffle for the sizes, one 256-bit running sum); only for code
/// compiled with AVX2 enabled, run on a CPU that has it ([`has_avx2`]).
#[cfg(target_arch = "x86_64")]
pub(super) struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Walk for Avx2 {
    #[inline(always)]
    fn offsets(types: &[u8; LANES], keep: &[u8; LANES]) -> Option<Offsets> {
        // SAFETY: `Avx2` is only named inside functions compiled for AVX2, which run only
        // once `has_avx2` said the CPU has it.
        unsafe { avx2::offsets(types, keep) }
    }

    #[inline(always)]
    fn sum(types: &[u8; LANES], keep: &[u8; LANES], within: &[u8; LANES]) -> Option<u32> {
        // SAFETY: as for `offsets`.
        unsafe { avx2::sum(types, keep, within) }
    }
}

/// Whether this CPU has AVX2 (detected once by the standard library, then a cached load).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn has_avx2() -> bool {
    std::is_x86_feature_detected!("avx2")
}

/// The walk for the tests: the best this CPU runs.
#[cfg(test)]
fn offsets(types: &[u8; LANES], keep: &[u8; LANES]) -> Option<Offsets> {
    Baseline::offsets(types, keep)
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

/// The portable [`Walk::sum`].
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
pub(super) fn scalar_sum(
    types: &[u8; LANES],
    keep: &[u8; LANES],
    within: &[u8; LANES],
) -> Option<u32> {
    let o = scalar(types, keep)?;
    let mut sum = 0;
    for ((&t, &k), &w) in types.iter().zip(keep).zip(within) {
        sum += serial_type_size(u64::from(t & k & w))? as u32;
    }
    debug_assert!(sum <= o.end);
    Some(sum)
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::*;

    use super::{Offsets, LANES};

    /// The body size of each kept lane's type, or `None` when a kept type is not a one-byte
    /// one.
    #[inline(always)]
    fn sizes(types: &[u8; LANES], keep: &[u8; LANES]) -> Option<__m128i> {
        // SAFETY: SSE2 is part of the x86-64 baseline, so these instructions exist on every
        // CPU this code runs on; the loads are unaligned ones of exactly 16 bytes within the
        // arrays given.
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
            Some(_mm_or_si128(
                _mm_or_si128(small, six),
                _mm_or_si128(eight, text),
            ))
        }
    }

    /// The SSE2 [`super::Walk::sum`]: one sum of absolute differences against zero.
    #[inline(always)]
    pub(super) fn sum(
        types: &[u8; LANES],
        keep: &[u8; LANES],
        within: &[u8; LANES],
    ) -> Option<u32> {
        let sizes = sizes(types, keep)?;
        // SAFETY: SSE2 (see `sizes`); the load is of exactly the 16-byte array.
        unsafe {
            let kept = _mm_and_si128(sizes, _mm_loadu_si128(within.as_ptr().cast()));
            let s = _mm_sad_epu8(kept, _mm_setzero_si128());
            Some(_mm_cvtsi128_si32(_mm_add_epi32(s, _mm_unpackhi_epi64(s, s))) as u32)
        }
    }

    /// The SSE2 walk; see the module documentation.
    #[inline(always)]
    pub(super) fn offsets(types: &[u8; LANES], keep: &[u8; LANES]) -> Option<Offsets> {
        let sizes = sizes(types, keep)?;
        // SAFETY: SSE2 (see `sizes`); the stores are unaligned ones of 16 bytes within the
        // 32-byte array below.
        unsafe {
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

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{Offsets, LANES};

    /// The body size of each kept lane's type (a table shuffle), or `None` when a kept type is
    /// not a one-byte one. Like everything here, always inlined, and only into functions
    /// compiled for AVX2, where its intrinsics become single instructions (a function of its
    /// own with the feature enabled would not be inlined into the page loop).
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2.
    #[inline(always)]
    unsafe fn sizes(types: &[u8; LANES], keep: &[u8; LANES]) -> Option<__m128i> {
        // SAFETY (of the loads): unaligned ones of exactly the arrays' sizes.
        unsafe {
            let t = _mm_and_si128(
                _mm_loadu_si128(types.as_ptr().cast()),
                _mm_loadu_si128(keep.as_ptr().cast()),
            );
            // A top bit (a longer varint) or a reserved type (`t | 1 == 11`: 10 or 11).
            let reserved = _mm_cmpeq_epi8(_mm_or_si128(t, _mm_set1_epi8(1)), _mm_set1_epi8(11));
            if _mm_movemask_epi8(_mm_or_si128(t, reserved)) != 0 {
                return None;
            }
            // Types below 16 through a table, the others (texts and blobs) as (t - 12) / 2.
            let table = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0, 0, 0, 1, 1);
            let small = _mm_shuffle_epi8(table, t);
            let halved = _mm_srli_epi16::<1>(_mm_sub_epi8(t, _mm_set1_epi8(12)));
            let large = _mm_and_si128(halved, _mm_set1_epi8(0x7f));
            Some(_mm_blendv_epi8(
                small,
                large,
                _mm_cmpgt_epi8(t, _mm_set1_epi8(15)),
            ))
        }
    }

    /// The AVX2 [`super::Walk::sum`]: one sum of absolute differences against zero.
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2.
    #[inline(always)]
    pub(super) unsafe fn sum(
        types: &[u8; LANES],
        keep: &[u8; LANES],
        within: &[u8; LANES],
    ) -> Option<u32> {
        // SAFETY: the caller's CPU has AVX2; the load is of exactly the 16-byte array.
        unsafe {
            let sizes = sizes(types, keep)?;
            let kept = _mm_and_si128(sizes, _mm_loadu_si128(within.as_ptr().cast()));
            let s = _mm_sad_epu8(kept, _mm_setzero_si128());
            Some(_mm_cvtsi128_si32(_mm_add_epi32(s, _mm_unpackhi_epi64(s, s))) as u32)
        }
    }

    /// The AVX2 walk; see [`super::Avx2`]. Always inlined, and only into functions compiled
    /// for AVX2, where its intrinsics become single instructions (a function of its own with
    /// the feature enabled would not be inlined into the page loop).
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2.
    #[inline(always)]
    pub(super) unsafe fn offsets(types: &[u8; LANES], keep: &[u8; LANES]) -> Option<Offsets> {
        // SAFETY (of the store): unaligned, of exactly the array's size; the CPU has AVX2.
        unsafe {
            let sizes = sizes(types, keep)?;
            // Running sums of the sixteen sizes in 16-bit lanes: within each half, then the
            // low half's total added to every lane of the high half.
            let wide = _mm256_cvtepu8_epi16(sizes);
            let v = _mm256_add_epi16(wide, _mm256_slli_si256::<2>(wide));
            let v = _mm256_add_epi16(v, _mm256_slli_si256::<4>(v));
            let v = _mm256_add_epi16(v, _mm256_slli_si256::<8>(v));
            let last = _mm256_shuffle_epi32::<0xee>(_mm256_shufflehi_epi16::<0xff>(v));
            let sums = _mm256_add_epi16(v, _mm256_permute2x128_si256::<0x08>(last, last));
            let mut starts = [0u16; LANES];
            _mm256_storeu_si256(starts.as_mut_ptr().cast(), _mm256_sub_epi16(sums, wide));
            let end = _mm256_extract_epi16::<15>(sums) as u16 as u32;
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
                    let want = scalar(&types, &keep);
                    assert_eq!(
                        Baseline::offsets(&types, &keep),
                        want,
                        "type {t} in lane {lane}, walk {walk}"
                    );
                    #[cfg(target_arch = "x86_64")]
                    if has_avx2() {
                        // SAFETY: the CPU has AVX2.
                        let avx2 = unsafe { avx2::offsets(&types, &keep) };
                        assert_eq!(avx2, want, "AVX2: type {t} in lane {lane}, walk {walk}");
                    }
                    // One sum: every lane's offset is the sum of the lanes before it.
                    for upto in 0..=walk.min(LANES) {
                        let within = keep_mask(upto);
                        let want = want
                            .map(|o| o.starts.get(upto).map_or(o.end, |&start| u32::from(start)));
                        let got = Baseline::sum(&types, &keep, &within);
                        assert_eq!(got, want, "sum to {upto}: type {t} in lane {lane}");
                        assert_eq!(scalar_sum(&types, &keep, &within), want);
                        #[cfg(target_arch = "x86_64")]
                        if has_avx2() {
                            // SAFETY: the CPU has AVX2.
                            let avx2 = unsafe { avx2::sum(&types, &keep, &within) };
                            assert_eq!(avx2, want, "AVX2 sum to {upto}: type {t} in lane {lane}");
                        }
                    }
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
