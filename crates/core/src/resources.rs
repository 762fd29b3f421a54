//! Resource quantities as integers.
//!
//! Units are fixed per resource so arithmetic is exact: `cpu` in millicores, `memory`,
//! `ephemeral-storage` and `hugepages-*` in bytes, `pods` and extended resources (for example
//! `nvidia.com/gpu`) as counts. Strings such as `"500m"` or `"2Gi"` are parsed once at the edge.
//!
//! Offers names, amounts and their arithmetic; parsing quantity strings is `api`'s.

use std::borrow::Cow;
use std::fmt;

/// CPU, in millicores.
pub const CPU: &str = "cpu";
/// Memory, in bytes.
pub const MEMORY: &str = "memory";
/// Pod slots, as a count.
pub const PODS: &str = "pods";
/// Ephemeral storage, in bytes.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// The pseudo-resource a NodePool limit uses to cap its node count.
pub const NODES: &str = "nodes";

/// A resource name. The well-known names are borrowed, so copying a pod's requests or a
/// node's allocatable copies one short list and no name.
type Name = Cow<'static, str>;

/// The names every list may hold, borrowed rather than owned.
const WELL_KNOWN: [&str; 5] = [CPU, MEMORY, PODS, EPHEMERAL_STORAGE, NODES];

fn name_of(name: &str) -> Name {
    match WELL_KNOWN.iter().find(|&&w| w == name) {
        Some(&w) => Cow::Borrowed(w),
        None => Cow::Owned(name.to_string()),
    }
}

/// A sparse list of resource amounts; absent means zero.
///
/// The amounts are kept sorted by name, each name once, so iterating gives the names in
/// order. A list holds a handful of names, and a scan of a short contiguous list is cheaper
/// than an ordered map's node and its name comparisons.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources(Vec<(Name, i64)>);

impl Resources {
    /// An empty list (every amount zero).
    pub fn new() -> Self {
        Self::default()
    }

    /// Builder form of [`Resources::set`].
    pub fn with(mut self, name: &str, amount: i64) -> Self {
        self.set(name, amount);
        self
    }

    /// Where `name` is listed.
    fn position(&self, name: &str) -> Option<usize> {
        self.0.iter().position(|(k, _)| k == name)
    }

    /// The amount of `name`; zero when absent.
    pub fn get(&self, name: &str) -> i64 {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map_or(0, |&(_, v)| v)
    }

    /// The cpu and memory amounts (0 when absent), in one pass over the list.
    pub(crate) fn cpu_and_memory(&self) -> (i64, i64) {
        let (mut cpu, mut memory) = (0, 0);
        for (name, amount) in &self.0 {
            match name.as_ref() {
                CPU => cpu = *amount,
                MEMORY => memory = *amount,
                _ => {}
            }
        }
        (cpu, memory)
    }

    /// Sets the amount of `name`; zero removes it.
    pub fn set(&mut self, name: &str, amount: i64) {
        match self.position(name) {
            Some(i) if amount == 0 => {
                self.0.remove(i);
            }
            // In place: the list is summed over every pod of a node, and a fresh name per
            // amount would be an allocation each time.
            Some(i) => self.0[i].1 = amount,
            None if amount == 0 => {}
            None => self.insert_new(name, amount),
        }
    }

    /// Lists `name`, not listed yet, in its place by name.
    fn insert_new(&mut self, name: &str, amount: i64) {
        let at = self.0.partition_point(|(k, _)| k.as_ref() < name);
        self.0.insert(at, (name_of(name), amount));
    }

    /// Sets an amount and keeps it even when it is zero. Limits need this: `cpu: 0` means
    /// "no cpu at all", while an absent limit means "unlimited".
    pub fn set_explicit(&mut self, name: &str, amount: i64) {
        match self.position(name) {
            Some(i) => self.0[i].1 = amount,
            None => self.insert_new(name, amount),
        }
    }

    /// True when `name` is listed, even with a zero amount.
    pub fn contains(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// Whether no resource has a non-zero amount.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every non-zero amount, with its resource name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), *v))
    }

    /// Adds every amount of `other` to this list.
    pub fn add(&mut self, other: &Resources) {
        for (k, v) in other.iter() {
            self.update(k, |a| a.saturating_add(v));
        }
    }

    /// Subtracts every amount of `other` from this list (the result may go negative).
    pub fn sub(&mut self, other: &Resources) {
        for (k, v) in other.iter() {
            self.update(k, |a| a.saturating_sub(v));
        }
    }

    /// Sets `name` to `f` of its amount, with one lookup when it is listed.
    fn update(&mut self, name: &str, f: impl FnOnce(i64) -> i64) {
        match self.position(name) {
            Some(i) => {
                let amount = f(self.0[i].1);
                if amount == 0 {
                    self.0.remove(i);
                } else {
                    self.0[i].1 = amount;
                }
            }
            None => self.set(name, f(0)),
        }
    }

    /// Element-wise maximum.
    pub fn max_with(&mut self, other: &Resources) {
        for (k, v) in other.iter() {
            if v > self.get(k) {
                self.set(k, v);
            }
        }
    }

    /// True when every positive amount requested here is available in `available`.
    /// Resources not requested are not compared, as the kube-scheduler does.
    pub fn fits_in(&self, available: &Resources) -> bool {
        self.iter().all(|(k, v)| v <= 0 || available.get(k) >= v)
    }

    /// The names of requested resources that `available` cannot cover.
    pub fn shortfall(&self, available: &Resources) -> Vec<String> {
        self.iter()
            .filter(|&(k, v)| v > 0 && available.get(k) < v)
            .map(|(k, _)| k.to_string())
            .collect()
    }
}

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in self.iter() {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{k}={}", format_amount(k, v))?;
        }
        Ok(())
    }
}

/// Human form of an amount in its canonical unit: `1500m`, `2Gi`, `3`.
pub fn format_amount(name: &str, amount: i64) -> String {
    const GI: i64 = 1 << 30;
    const MI: i64 = 1 << 20;
    if name == CPU {
        if amount % 1000 == 0 {
            format!("{}", amount / 1000)
        } else {
            format!("{amount}m")
        }
    } else if name == MEMORY || name == EPHEMERAL_STORAGE || name.starts_with("hugepages-") {
        if amount != 0 && amount % GI == 0 {
            format!("{}Gi", amount / GI)
        } else if amount != 0 && amount % MI == 0 {
            format!("{}Mi", amount / MI)
        } else {
            format!("{amount}")
        }
    } else {
        format!("{amount}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_memory_are_what_get_reads() {
        let lists = [
            Resources::new(),
            Resources::new().with(CPU, 250),
            Resources::new().with(MEMORY, 1 << 20),
            Resources::new()
                .with("ephemeral-storage", 7)
                .with(CPU, 500)
                .with(MEMORY, 3)
                .with(PODS, 1)
                .with("nvidia.com/gpu", 2),
        ];
        for r in &lists {
            assert_eq!(r.cpu_and_memory(), (r.get(CPU), r.get(MEMORY)), "{r:?}");
        }
    }

    #[test]
    fn fits_compares_only_requested_resources() {
        let req = Resources::new().with(CPU, 500).with(MEMORY, 1 << 30);
        let avail = Resources::new().with(CPU, 1000).with(MEMORY, 2 << 30);
        assert!(req.fits_in(&avail));
        let gpu = req.clone().with("nvidia.com/gpu", 1);
        assert!(!gpu.fits_in(&avail));
        assert_eq!(gpu.shortfall(&avail), vec!["nvidia.com/gpu".to_string()]);
    }

    #[test]
    fn arithmetic_updates_listed_and_new_amounts() {
        let mut a = Resources::new().with(CPU, 500).with(MEMORY, 100);
        a.add(&Resources::new().with(CPU, 250).with(PODS, 2));
        assert_eq!(
            a,
            Resources::new()
                .with(CPU, 750)
                .with(MEMORY, 100)
                .with(PODS, 2)
        );
        a.sub(
            &Resources::new()
                .with(MEMORY, 100)
                .with(EPHEMERAL_STORAGE, 5),
        );
        assert_eq!(
            a,
            Resources::new()
                .with(CPU, 750)
                .with(PODS, 2)
                .with(EPHEMERAL_STORAGE, -5)
        );
        assert!(!a.contains(MEMORY), "a zero is dropped, not kept");
        a.set(CPU, i64::MAX);
        a.add(&Resources::new().with(CPU, 1));
        assert_eq!(a.get(CPU), i64::MAX, "saturates");
        a.set(PODS, 0);
        assert!(!a.contains(PODS));
    }

    #[test]
    fn names_come_in_order_whatever_order_they_were_set_in() {
        let forward = Resources::new()
            .with("nvidia.com/gpu", 1)
            .with(PODS, 3)
            .with(CPU, 2)
            .with("hugepages-2Mi", 4)
            .with(MEMORY, 5)
            .with(EPHEMERAL_STORAGE, 6);
        let mut backward = Resources::new();
        for (k, v) in forward.iter().collect::<Vec<_>>().into_iter().rev() {
            backward.set(k, v);
        }
        let names: Vec<&str> = forward.iter().map(|(k, _)| k).collect();
        assert_eq!(
            names,
            [
                CPU,
                EPHEMERAL_STORAGE,
                "hugepages-2Mi",
                MEMORY,
                "nvidia.com/gpu",
                PODS
            ]
        );
        assert_eq!(forward, backward);
        assert_eq!(format!("{forward:?}"), format!("{backward:?}"));
        let mut limits = Resources::new();
        limits.set_explicit(CPU, 0);
        limits.set_explicit("example.com/dongle", 0);
        limits.set_explicit(CPU, 7);
        assert_eq!(
            limits.iter().collect::<Vec<_>>(),
            [(CPU, 7), ("example.com/dongle", 0)]
        );
    }

    #[test]
    fn arithmetic_drops_zeroes() {
        let mut a = Resources::new().with(CPU, 500);
        a.sub(&Resources::new().with(CPU, 500));
        assert!(a.is_empty());
        assert_eq!(
            format!("{}", Resources::new().with(CPU, 1500).with(MEMORY, 2 << 30)),
            "cpu=1500m, memory=2Gi"
        );
    }
}
