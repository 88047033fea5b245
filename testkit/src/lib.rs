//! # testkit: what every crate's tests share
//!
//! One deterministic random-number generator, [`Rng`], for fixtures, fuzzers and the
//! differential tester, so that a failure replays from the seed it prints.
//!
//! It is a crate of its own, with no dependencies, because the tests that need it sit at every
//! level of the workspace: `partitioner` and `engine` tests cannot depend on `bench` or the
//! binary (which depend on them), and a file included with `#[path]` would compile into each
//! test crate separately. It is only ever a dev-dependency.
//!
//! ```
//! let mut rng = testkit::Rng::new(7);
//! let page_size = *rng.pick(&[512u32, 1024, 4096]);
//! assert!(rng.below(10) < 10 && page_size >= 512);
//! // The same seed, the same sequence.
//! assert_eq!(testkit::Rng::new(7).next_u64(), testkit::Rng::new(7).next_u64());
//! ```
#![deny(missing_docs)]

/// SplitMix64's increment, 2^64 divided by the golden ratio.
pub const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function: the value a SplitMix64 generator returns when its state has
/// just become `z`. A good 64-bit mixer on its own (`mix64(base + n * GOLDEN_GAMMA)` is the
/// seed of case `n` of a run, reachable without generating cases `0..n`).
pub fn mix64(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A deterministic random-number generator for tests.
///
/// [`Rng::new`] is SplitMix64 (Steele, Lea and Flood), the generator for new tests: every seed,
/// zero included, gives a full-period sequence. Two other streams exist because existing tests
/// depend on their exact sequences (fixtures whose contents tests were written against, and
/// seeds printed by fuzzers for replay): Marsaglia's xorshift64 ([`Rng::xorshift64`]) and
/// xorshift64* ([`Rng::xorshift64_star`]). Each is bit for bit the generator it replaced, and
/// the helpers ([`Rng::below`], [`Rng::pick`], [`Rng::percent`]) are the same over all three.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
    stream: Stream,
}

/// Which sequence an [`Rng`] produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    SplitMix64,
    XorShift64,
    XorShift64Star,
}

impl Rng {
    /// SplitMix64 from `seed`: the generator for new tests.
    pub fn new(seed: u64) -> Rng {
        Rng {
            state: seed,
            stream: Stream::SplitMix64,
        }
    }

    /// Marsaglia's xorshift64 (shifts 13, 7, 17) from `state`, returning each new state. Zero
    /// is its one fixed point: a zero `state` would repeat zero forever, so it is refused.
    pub fn xorshift64(state: u64) -> Rng {
        assert_ne!(state, 0, "xorshift64 from state 0 yields only zeros");
        Rng {
            state,
            stream: Stream::XorShift64,
        }
    }

    /// xorshift64* (shifts 12, 25, 27, then a multiplication) from `state`, nonzero as for
    /// [`Rng::xorshift64`].
    pub fn xorshift64_star(state: u64) -> Rng {
        assert_ne!(state, 0, "xorshift64* from state 0 yields only zeros");
        Rng {
            state,
            stream: Stream::XorShift64Star,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        match self.stream {
            Stream::SplitMix64 => {
                self.state = self.state.wrapping_add(GOLDEN_GAMMA);
                mix64(self.state)
            }
            Stream::XorShift64 => {
                self.state ^= self.state << 13;
                self.state ^= self.state >> 7;
                self.state ^= self.state << 17;
                self.state
            }
            Stream::XorShift64Star => {
                self.state ^= self.state >> 12;
                self.state ^= self.state << 25;
                self.state ^= self.state >> 27;
                self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
            }
        }
    }

    /// A number in `0..n` (the next value modulo `n`; 0 when `n` is 0). The modulo's slight
    /// bias towards small numbers does not matter to a test, and every recorded sequence was
    /// drawn this way.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An index into something `len` long: [`Rng::below`] for `usize`.
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// One of `items` (which must not be empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// True with probability `p`/100.
    pub fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first outputs of each stream, as the generators they replaced produced them (the
    /// query tests' SplitMix64, the fixtures' xorshift64, the decoder tests' xorshift64*): a
    /// change here would silently change every fixture and every recorded seed.
    #[test]
    fn every_stream_keeps_its_sequence() {
        let mut s = Rng::new(0);
        assert_eq!(s.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(s.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let mut x = Rng::xorshift64(1);
        assert_eq!(x.next_u64(), 0x4082_2041);
        assert_eq!(x.next_u64(), 0x1000_4106_0c01_1441);
        let mut star = Rng::xorshift64_star(1);
        assert_eq!(star.next_u64(), 0x47e4_ce4b_896c_dd1d);
        assert_eq!(star.next_u64(), 0xabcf_a6a8_e079_651d);
    }

    #[test]
    fn helpers_stay_in_range() {
        let mut r = Rng::new(42);
        for n in 1..100 {
            assert!(r.below(n) < n);
        }
        assert_eq!(r.below(0), 0);
        let items = [1, 2, 3];
        assert!(items.contains(r.pick(&items)));
        assert!((0..1000).filter(|_| r.percent(30)).count() > 200);
    }
}
