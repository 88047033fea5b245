//! [`ExactSum`]: an exact accumulator for sums of doubles and integers (a "superaccumulator"),
//! rounded once at the end, so a sum does not depend on the order of its terms, and so not on
//! how the table was split over executors.
//!
//! Every finite double is an integer multiple of 2^-1074 below 2^1024, so the sum of up to
//! 2^64 of them is an integer of at most 2,175 bits in units of 2^-1088 (the offset keeps the
//! limbs 32-bit aligned). The limbs hold 32 bits each in an `i64`, so additions need no carry
//! propagation until about 2^30 of them have accumulated.
//!
//! The common terms take a shorter path first: a double between about 2^-32 and 2^42 whose
//! lowest mantissa bit is worth at least 2^-[`FIXED_BITS`] is an integer in units of
//! 2^-[`FIXED_BITS`] below 2^126, and is added to one `i128` (a fixed-point window over the
//! limbs). When that addition would overflow, the window is added to the limbs and starts
//! again from the term; any other term goes to the limbs directly. Both parts are exact, so
//! the sum is too, and it does not depend on which terms took which path.
//!
//! The limbs are allocated only when a term needs them: a sum whose terms all fit the window
//! (prices, quantities, most measurements) is 32 bytes with no heap allocation, which matters
//! when a grouped query keeps millions of them.

/// Number of 32-bit limbs (2,240 bits).
const LIMBS: usize = 70;
/// The weight of bit 0 of limb 0 is 2^-OFFSET.
const OFFSET: i32 = 1088;
/// Additions between carry propagations (each adds less than 2^32 to a limb).
const NORMALIZE_EVERY: u32 = 1 << 30;
/// The fixed-point window's unit is 2^-FIXED_BITS.
const FIXED_BITS: i32 = 84;
/// The biased exponent of a double whose mantissa (53 bits, hidden bit included) is shifted
/// by 0 bits into the window: `2^(E - 1075)` is the mantissa's unit.
const FIXED_LOWEST_EXP: u64 = (1075 - FIXED_BITS) as u64;
/// The largest shift into the window: a shifted mantissa stays below 2^126, so a term fits an
/// `i128` with room for its sign (the window's own overflow is checked on every addition).
const FIXED_MAX_SHIFT: u64 = 126 - 53;

/// An exact sum of doubles and integers.
#[derive(Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ExactSum {
    /// The fixed-point window: part of the sum, in units of 2^-FIXED_BITS.
    fixed: i128,
    /// The wide accumulator, allocated by the first term that does not fit the window.
    #[serde(with = "wide")]
    limbs: Option<Box<[i64; LIMBS]>>,
    pending: u32,
    pos_inf: bool,
    neg_inf: bool,
}

/// The wide accumulator in serde's data model: its limbs as a sequence (serde derives arrays
/// of at most 32 elements only).
mod wide {
    use serde::{de::Error, Deserialize, Deserializer, Serialize, Serializer};

    use super::LIMBS;

    pub fn serialize<S: Serializer>(
        limbs: &Option<Box<[i64; LIMBS]>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        limbs.as_deref().map(|l| &l[..]).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Box<[i64; LIMBS]>>, D::Error> {
        Option::<Vec<i64>>::deserialize(d)?
            .map(|v| {
                let n = v.len();
                <Box<[i64; LIMBS]>>::try_from(v.into_boxed_slice())
                    .map_err(|_| D::Error::invalid_length(n, &"the accumulator's limbs"))
            })
            .transpose()
    }
}

impl std::fmt::Debug for ExactSum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ExactSum({})", self.to_f64())
    }
}

/// Two sums are equal when their exact values (and infinities) are, however the value is held.
impl PartialEq for ExactSum {
    fn eq(&self, other: &Self) -> bool {
        (self.pos_inf, self.neg_inf) == (other.pos_inf, other.neg_inf)
            && self.canonical() == other.canonical()
    }
}

impl Eq for ExactSum {}

impl ExactSum {
    /// Adds `magnitude * 2^(bit - OFFSET)` with the given sign: three limb additions, no
    /// branch on the data (the carries wait for [`ExactSum::normalize`]).
    #[inline]
    fn add_scaled(&mut self, magnitude: u64, bit: usize, negative: bool) {
        if self.pending >= NORMALIZE_EVERY {
            self.normalize();
        }
        self.pending += 1;
        let (k, r) = (bit / 32, bit % 32);
        let shifted = u128::from(magnitude) << r;
        let sign = if negative { -1 } else { 1 };
        let limbs = self.limbs_mut();
        let limbs: &mut [i64; 3] = (&mut limbs[k..k + 3]).try_into().expect("3 limbs");
        limbs[0] += sign * (shifted as u32 as i64);
        limbs[1] += sign * ((shifted >> 32) as u32 as i64);
        limbs[2] += sign * ((shifted >> 64) as u32 as i64);
    }

    /// The limbs, allocated (zero) on first use.
    fn limbs_mut(&mut self) -> &mut [i64; LIMBS] {
        self.limbs.get_or_insert_with(|| Box::new([0; LIMBS]))
    }

    /// `x` in units of the fixed-point window, when it is a term the window takes: a normal
    /// double whose lowest mantissa bit is worth at least 2^-[`FIXED_BITS`] and which stays
    /// below 2^126 units (zero, subnormals, infinities and NaN are not: their exponent field is
    /// 0 or 0x7ff).
    #[inline(always)]
    pub fn window_term(x: f64) -> Option<i128> {
        let bits = x.to_bits();
        let shift = ((bits >> 52) & 0x7ff).wrapping_sub(FIXED_LOWEST_EXP);
        if shift > FIXED_MAX_SHIFT {
            return None;
        }
        // The signed mantissa in 54 bits (negated by the sign bit without a branch), then
        // shifted into the window.
        let mantissa = ((bits & ((1 << 52) - 1)) | (1 << 52)) as i64;
        let sign = (bits as i64) >> 63;
        Some(i128::from((mantissa ^ sign) - sign) << shift)
    }

    /// The sum of window terms whose total is `fixed` ([`Self::window_term`]).
    pub fn from_window(fixed: i128) -> ExactSum {
        ExactSum {
            fixed,
            ..ExactSum::default()
        }
    }

    /// The sum in units of the window, when the window alone holds it (no limbs, no
    /// infinity).
    pub fn only_window(&self) -> Option<i128> {
        (self.limbs.is_none() && !self.pos_inf && !self.neg_inf).then_some(self.fixed)
    }

    /// Adds a double (an infinity is remembered; NaN never reaches here: SQLite has none).
    #[inline(always)]
    pub fn add_f64(&mut self, x: f64) {
        if let Some(term) = Self::window_term(x) {
            match self.fixed.checked_add(term) {
                Some(sum) => self.fixed = sum,
                None => {
                    self.flush_fixed();
                    self.fixed = term;
                }
            }
            return;
        }
        self.add_f64_limbs(x);
    }

    /// Adds the fixed-point window to the limbs and empties it.
    fn flush_fixed(&mut self) {
        let (m, negative) = (self.fixed.unsigned_abs(), self.fixed < 0);
        let at = (OFFSET - FIXED_BITS) as usize;
        let (low, high) = (m as u64, (m >> 64) as u64);
        if low != 0 {
            self.add_scaled(low, at, negative);
        }
        if high != 0 {
            self.add_scaled(high, at + 64, negative);
        }
        self.fixed = 0;
    }

    /// Adds a double to the limbs.
    #[inline(never)]
    fn add_f64_limbs(&mut self, x: f64) {
        if x.is_infinite() {
            if x > 0.0 {
                self.pos_inf = true;
            } else {
                self.neg_inf = true;
            }
            return;
        }
        if x == 0.0 || x.is_nan() {
            return;
        }
        let bits = x.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as i32;
        let frac = bits & ((1 << 52) - 1);
        let (mantissa, e) = if exp == 0 {
            (frac, -1074)
        } else {
            (frac | (1 << 52), exp - 1075)
        };
        self.add_scaled(mantissa, (e + OFFSET) as usize, x < 0.0);
    }

    /// Adds an integer, exactly.
    pub fn add_i64(&mut self, i: i64) {
        if i != 0 {
            self.add_scaled(i.unsigned_abs(), OFFSET as usize, i < 0);
        }
    }

    /// Adds a 128-bit integer, exactly (a sum of integers).
    pub fn add_i128(&mut self, i: i128) {
        let (m, negative) = (i.unsigned_abs(), i < 0);
        let (low, high) = (m as u64, (m >> 64) as u64);
        if low != 0 {
            self.add_scaled(low, OFFSET as usize, negative);
        }
        if high != 0 {
            self.add_scaled(high, OFFSET as usize + 64, negative);
        }
    }

    /// Adds another sum.
    pub fn merge(&mut self, other: &ExactSum) {
        self.pos_inf |= other.pos_inf;
        self.neg_inf |= other.neg_inf;
        if other.limbs.is_none() {
            // Window to window, as one more window term.
            match self.fixed.checked_add(other.fixed) {
                Some(sum) => self.fixed = sum,
                None => {
                    self.flush_fixed();
                    self.fixed = other.fixed;
                }
            }
            return;
        }
        self.flush_fixed();
        self.normalize();
        let mut o = other.clone();
        o.flush_fixed();
        o.normalize();
        if let Some(theirs) = &o.limbs {
            for (a, b) in self.limbs_mut().iter_mut().zip(theirs.iter()) {
                *a += *b;
            }
        }
        self.pending = 2;
        self.normalize();
    }

    /// The exact value in limbs, carries propagated (one representation per value).
    fn canonical(&self) -> [i64; LIMBS] {
        let mut n = self.clone();
        n.flush_fixed();
        n.normalize();
        n.limbs.map_or([0; LIMBS], |l| *l)
    }

    /// Propagates carries: every limb but the top one ends in `0..2^32`.
    fn normalize(&mut self) {
        self.pending = 0;
        let Some(limbs) = self.limbs.as_mut() else {
            return;
        };
        let mut carry = 0i64;
        for l in limbs.iter_mut() {
            let v = *l + carry;
            carry = v >> 32;
            *l = v & 0xffff_ffff;
        }
        limbs[LIMBS - 1] += carry << 32;
    }

    /// The sum rounded once to the nearest double (ties to even); +-infinity when it overflows
    /// or an infinity was added, NaN when both infinities were.
    pub fn to_f64(&self) -> f64 {
        match (self.pos_inf, self.neg_inf) {
            (true, true) => return f64::NAN,
            (true, false) => return f64::INFINITY,
            (false, true) => return f64::NEG_INFINITY,
            _ => {}
        }
        if self.limbs.is_none() {
            // The window alone: `as` rounds an i128 to the nearest double (ties to even), and
            // scaling by 2^-FIXED_BITS is exact (the result stays a normal double).
            return self.fixed as f64 * f64::from_bits(((1023 - FIXED_BITS) as u64) << 52);
        }
        let mut n = self.clone();
        n.flush_fixed();
        n.normalize();
        let mut limbs = *n.limbs.expect("allocated above");
        let negative = limbs[LIMBS - 1] < 0;
        if negative {
            for l in limbs.iter_mut() {
                *l = -*l;
            }
            n.limbs = Some(Box::new(limbs));
            n.normalize();
            limbs = *n.limbs.expect("still allocated");
        }
        let Some(top) = limbs.iter().rposition(|&l| l != 0) else {
            return 0.0;
        };
        // Highest set bit, over the whole number.
        let hb = top * 32 + 63 - (limbs[top] as u64).leading_zeros() as usize;
        let bit = |i: usize| -> u64 { ((limbs[i / 32] as u64) >> (i % 32)) & 1 };
        let magnitude = if hb <= 66 {
            // Below 2^-1022 (or barely above): every term was a multiple of 2^-1074, so the
            // sum is an exact multiple too and fits in a double's 53 bits.
            let mut m = 0u64;
            for i in (14..=hb).rev() {
                m = (m << 1) | bit(i);
            }
            m as f64 * f64::from_bits(1)
        } else {
            // The top 64 bits, with any lower set bit folded into bit 0 (a sticky bit below
            // the rounding position, so u64 -> f64 rounds as the exact value would).
            let low = hb - 63;
            let mut m = 0u64;
            for i in (low..=hb).rev() {
                m = (m << 1) | bit(i);
            }
            let sticky = (0..low).any(|i| bit(i) != 0);
            if sticky {
                m |= 1;
            }
            ldexp(m as f64, low as i32 - OFFSET)
        };
        if negative {
            -magnitude
        } else {
            magnitude
        }
    }
}

/// `x * 2^e`, in steps that cannot underflow or lose bits for the values [`ExactSum`] makes.
fn ldexp(mut x: f64, mut e: i32) -> f64 {
    let pow2 = |k: i32| f64::from_bits(((k + 1023) as u64) << 52);
    while e > 1000 {
        x *= pow2(1000);
        e -= 1000;
    }
    while e < -1000 {
        x *= pow2(-1000);
        e += 1000;
    }
    x * pow2(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(xs: &[f64]) -> f64 {
        let mut s = ExactSum::default();
        for &x in xs {
            s.add_f64(x);
        }
        s.to_f64()
    }

    #[test]
    fn exact_and_order_independent() {
        assert_eq!(sum(&[0.1, 0.2]), 0.30000000000000004);
        assert_eq!(sum(&[1e100, 1.0, -1e100]), 1.0);
        assert_eq!(sum(&[0.1; 10]), 1.0);
        assert_eq!(sum(&[]), 0.0);
        assert_eq!(sum(&[-2.5, 1.0]), -1.5);
        assert_eq!(sum(&[5e-324, 5e-324]), 1e-323);
        assert_eq!(sum(&[f64::MAX, f64::MAX]), f64::INFINITY);
        assert_eq!(sum(&[f64::MAX, f64::MAX, -f64::MAX]), f64::MAX);
        assert_eq!(sum(&[1.0, f64::EPSILON / 2.0]), 1.0);
        assert_eq!(
            sum(&[1.0, f64::EPSILON / 2.0, f64::EPSILON / 1e10]),
            1.0 + f64::EPSILON
        );
        let mut a = ExactSum::default();
        a.add_i64(i64::MAX);
        a.add_i64(i64::MAX);
        a.add_i64(i64::MIN);
        assert_eq!(a.to_f64(), i64::MAX as f64);
        let (mut l, mut r) = (ExactSum::default(), ExactSum::default());
        l.add_f64(0.1);
        r.add_f64(0.7);
        r.add_i64(-3);
        l.merge(&r);
        let mut all = ExactSum::default();
        all.add_i64(-3);
        all.add_f64(0.7);
        all.add_f64(0.1);
        assert_eq!(l.to_f64(), all.to_f64());
    }

    /// Against exact rational arithmetic: terms `n * 2^e` with `e` in `-60..20` are integers
    /// in units of 2^-60, summed exactly in an `i128`; the correctly rounded double of that
    /// sum is `i128 as f64` (round to nearest, ties to even) scaled by a power of two (exact).
    /// The terms mix signs and magnitudes 2^80 apart, so a naive or compensated double sum
    /// would lose bits; every split of the terms into two merged halves must agree too.
    #[test]
    fn matches_exact_rational_sums() {
        let mut rng = testkit::Rng::xorshift64(0x9e37_79b9_7f4a_7c15);
        for round in 0..300 {
            let len = 1 + (rng.next_u64() % 400) as usize;
            let mut terms = Vec::with_capacity(len);
            let mut exact: i128 = 0;
            let mut ints = Vec::new();
            for _ in 0..len {
                let n = (rng.next_u64() >> 34) as i64 - (1 << 29);
                let e = (rng.next_u64() % 80) as i32 - 60;
                let x = n as f64 * 2f64.powi(e);
                assert_eq!(x * 2f64.powi(-e), n as f64, "term is exact");
                terms.push(x);
                exact += i128::from(n) << (e + 60);
                if round % 3 == 0 {
                    let i = (rng.next_u64() >> 20) as i64 - (1 << 43);
                    ints.push(i);
                    exact += i128::from(i) << 60;
                }
            }
            let want = exact as f64 * 2f64.powi(-60);
            let mut all = ExactSum::default();
            for &x in &terms {
                all.add_f64(x);
            }
            for &i in &ints {
                all.add_i64(i);
            }
            assert_eq!(all.to_f64(), want, "round {round}");
            let cut = (rng.next_u64() as usize) % (len + 1);
            let (mut l, mut r) = (ExactSum::default(), ExactSum::default());
            terms[..cut].iter().for_each(|&x| l.add_f64(x));
            terms[cut..].iter().rev().for_each(|&x| r.add_f64(x));
            r.add_i128(ints.iter().map(|&i| i128::from(i)).sum());
            l.merge(&r);
            assert_eq!(l.to_f64(), want, "round {round}, split at {cut}");
        }
    }

    /// The fixed-point window: terms at both of its edges and just outside them, window
    /// overflows (flushed to the limbs and restarted), and signs, against exact sums of the
    /// mantissas in an `i128` (one unit per round, so scaling the sum is exact).
    #[test]
    fn window_edges_and_overflows_are_exact() {
        let full = (1u64 << 53) - 1;
        // Mantissa units 2^-85 .. 2^-9: the window takes 2^-84 .. 2^-11.
        let mut rng = testkit::Rng::xorshift64(0x2545_f491_4f6c_dd1d);
        for unit in -85..=-9 {
            let mut terms = Vec::new();
            let mut exact: i128 = 0;
            for k in 0..5000 {
                let m = if k % 7 == 0 {
                    full
                } else {
                    (rng.next_u64() >> 11) | (1 << 52)
                };
                let negative = k % 5 == 3;
                let x = m as f64 * 2f64.powi(unit);
                terms.push(if negative { -x } else { x });
                exact += if negative {
                    -i128::from(m)
                } else {
                    i128::from(m)
                };
            }
            // From a unit of 2^-42 on, the running sum leaves the window's range (2^43).
            let want = exact as f64 * 2f64.powi(unit);
            assert_eq!(sum(&terms), want, "unit 2^{unit}");
            let (mut l, mut r) = (ExactSum::default(), ExactSum::default());
            terms[..1234].iter().for_each(|&x| l.add_f64(x));
            terms[1234..].iter().for_each(|&x| r.add_f64(x));
            l.merge(&r);
            assert_eq!(l.to_f64(), want, "unit 2^{unit}, merged");
        }
        // One term at the top of the window plus one below it: the window overflows at once.
        let top = full as f64 * 2f64.powi(-11);
        assert_eq!(sum(&[top; 3]), 3.0 * top);
        assert_eq!(sum(&[-top, -top, -top, top]), -2.0 * top);
        // Huge, tiny, subnormal and zero terms beside window terms.
        assert_eq!(sum(&[1e300, 0.5, -1e300, 1e-300, -1e-300]), 0.5);
        assert_eq!(sum(&[5e-324, 0.25, -0.0, 0.0, -5e-324]), 0.25);
        assert_eq!(sum(&[0.1, f64::INFINITY, 0.2]), f64::INFINITY);
        assert!(sum(&[0.1, f64::INFINITY, f64::NEG_INFINITY]).is_nan());
        assert_eq!(sum(&[f64::MAX, 1.0, -f64::MAX]), 1.0);
    }

    /// Sums whose terms all fit the window never allocate the limbs, and round as the limbs
    /// do: the same terms with a term that forces the limbs (then cancelled) give the same
    /// double, also when two window-only sums are merged and when their windows overflow.
    #[test]
    fn window_only_sums_allocate_nothing_and_round_alike() {
        let mut rng = testkit::Rng::xorshift64(0x5851_f42d_4c95_7f2d);
        for round in 0..200 {
            let len = 1 + (rng.next_u64() % 300) as usize;
            // Terms up to 2^32 in magnitude, whose sums stay inside the window (2^43).
            let scale = 2f64.powi((rng.next_u64() % 20) as i32 - 40);
            let terms: Vec<f64> = (0..len)
                .map(|_| ((rng.next_u64() >> 11) as f64 - 2f64.powi(52)) * scale / 3.0)
                .collect();
            let (mut window, mut wide) = (ExactSum::default(), ExactSum::default());
            wide.add_f64(1e300);
            for &x in &terms {
                window.add_f64(x);
                wide.add_f64(x);
            }
            wide.add_f64(-1e300);
            assert!(
                window.limbs.is_none(),
                "round {round}: the window held every term"
            );
            assert!(wide.limbs.is_some());
            assert_eq!(
                window.to_f64().to_bits(),
                wide.to_f64().to_bits(),
                "round {round}"
            );
            assert_eq!(window, wide);
            let cut = (rng.next_u64() as usize) % (len + 1);
            let (mut l, mut r) = (ExactSum::default(), ExactSum::default());
            terms[..cut].iter().for_each(|&x| l.add_f64(x));
            terms[cut..].iter().for_each(|&x| r.add_f64(x));
            l.merge(&r);
            assert_eq!(
                l.to_f64().to_bits(),
                wide.to_f64().to_bits(),
                "round {round}"
            );
        }
        // Two windows near the top of their range: merging them overflows the window.
        let top = ((1u64 << 53) - 1) as f64 * 2f64.powi(-11);
        let (mut l, mut r) = (ExactSum::default(), ExactSum::default());
        for _ in 0..1000 {
            l.add_f64(top);
            r.add_f64(top);
        }
        l.merge(&r);
        assert_eq!(l.to_f64(), 2000.0 * top);
        assert_eq!(ExactSum::default().to_f64().to_bits(), 0.0f64.to_bits());
    }

    #[test]
    fn i128_terms_and_lazy_carries() {
        let mut s = ExactSum::default();
        s.add_i128(i128::MAX);
        s.add_i128(-i128::MAX);
        s.add_f64(0.5);
        assert_eq!(s.to_f64(), 0.5);
        let mut s = ExactSum::default();
        s.add_i128(i128::from(i64::MAX) * 3);
        assert_eq!(s.to_f64(), (i128::from(i64::MAX) * 3) as f64);
        // Many additions to the same limbs, then a carry normalization in between.
        let mut s = ExactSum {
            pending: NORMALIZE_EVERY - 5,
            ..ExactSum::default()
        };
        for _ in 0..10 {
            s.add_f64(-(u32::MAX as f64) * 4.0);
        }
        assert_eq!(s.to_f64(), -(u32::MAX as f64) * 40.0);
    }
}
