//! The one seeded random generator (SplitMix64) every part of nodewright draws from: the
//! simulator's faults and arrivals, the simulated cloud's ids and errors, the benchmarks'
//! workloads and the controller's test-only fault injection. Small, fast, and the same
//! sequence for the same seed on every platform.
//!
//! Offers the generator only; what is drawn from it, and with which seed, is the caller's.

/// A SplitMix64 generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator that draws the sequence of `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 11) as u128 * n as u128) >> 53) as usize
    }

    /// One of `items`, uniformly; `items` must not be empty.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// An exponentially distributed wait, in hours, for an event with `rate` per hour.
    pub fn exponential_hours(&mut self, rate: f64) -> Option<f64> {
        if rate <= 0.0 {
            return None;
        }
        Some(-(1.0 - self.unit()).ln() / rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let a: Vec<u64> = (0..5)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..5)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..5)
            .scan(Rng::new(8), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn chance_tracks_its_probability() {
        let mut r = Rng::new(1);
        let hits = (0..10_000).filter(|_| r.chance(0.25)).count();
        assert!((2_200..2_800).contains(&hits), "{hits}");
        assert!(!Rng::new(1).chance(0.0));
    }

    #[test]
    fn below_stays_below() {
        let mut r = Rng::new(3);
        assert!((0..1000).all(|_| r.below(7) < 7));
    }
}
