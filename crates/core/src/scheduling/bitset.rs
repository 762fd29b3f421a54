//! A fixed-width bitset over instance-type indices.

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bitset {
    words: Vec<u64>,
}

impl Bitset {
    pub fn empty(bits: usize) -> Self {
        Bitset {
            words: vec![0; bits.div_ceil(64)],
        }
    }

    pub fn full(bits: usize) -> Self {
        let mut b = Self::empty(bits);
        for i in 0..bits {
            b.insert(i);
        }
        b
    }

    pub fn insert(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub fn remove(&mut self, i: usize) {
        self.words[i / 64] &= !(1 << (i % 64));
    }

    pub fn contains(&self, i: usize) -> bool {
        self.words[i / 64] & (1 << (i % 64)) != 0
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn and_with(&mut self, other: &Bitset) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= *b;
        }
    }

    /// Indices of set bits, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let t = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(wi * 64 + t)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations() {
        let mut a = Bitset::full(130);
        assert_eq!(a.count(), 130);
        a.remove(64);
        let mut b = Bitset::empty(130);
        b.insert(3);
        b.insert(64);
        b.insert(129);
        a.and_with(&b);
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![3, 129]);
        assert!(!a.is_empty());
        assert!(Bitset::empty(10).is_empty());
    }
}
