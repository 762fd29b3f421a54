//! A fixed-width bitset over instance-type indices.

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Bitset {
    words: Vec<u64>,
}

impl Bitset {
    pub(crate) fn empty(bits: usize) -> Self {
        Bitset {
            words: vec![0; bits.div_ceil(64)],
        }
    }

    pub(crate) fn insert(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub(crate) fn remove(&mut self, i: usize) {
        self.words[i / 64] &= !(1 << (i % 64));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// Indices of set bits, ascending.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
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
        let mut a = Bitset::empty(130);
        for i in [3, 64, 129] {
            a.insert(i);
        }
        a.remove(64);
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![3, 129]);
        assert!(!a.is_empty());
        assert!(Bitset::empty(10).is_empty());
    }
}
