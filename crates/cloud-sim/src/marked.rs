//! The simulated cloud's catalog as offered at the moment, per class: the class's catalog
//! with the offerings inside their insufficient-capacity window marked unavailable. The last
//! marked copy is kept with the set of offerings that marked it, so every snapshot taken
//! while capacity did not change shares one copy instead of cloning the whole catalog.

use std::sync::Arc;

use nodewright_aws_model::NodeClassInput;
use nodewright_core::model::{CapacityType, InstanceType};

/// An offering by instance type, zone and capacity type.
pub type OfferingKey = (String, String, CapacityType);

/// The last marked catalog of each class input.
#[derive(Default)]
pub struct MarkedCatalogs {
    entries: Vec<Entry>,
}

struct Entry {
    input: NodeClassInput,
    /// The unmarked catalog the copy was made from.
    base: Arc<Vec<InstanceType>>,
    /// Sorted: what was unavailable when the copy was made.
    unavailable: Vec<OfferingKey>,
    types: Arc<Vec<InstanceType>>,
}

impl MarkedCatalogs {
    /// `base` (the catalog of `input`) with the offerings in `unavailable` marked; the copy
    /// made last for `input` when both are unchanged since.
    pub fn get(
        &mut self,
        input: &NodeClassInput,
        base: &Arc<Vec<InstanceType>>,
        mut unavailable: Vec<OfferingKey>,
    ) -> Arc<Vec<InstanceType>> {
        // Nothing to mark: the catalog itself is what is offered.
        if unavailable.is_empty() {
            return base.clone();
        }
        unavailable.sort_unstable();
        unavailable.dedup();
        // A handful of distinct classes at most: a list searched by equality is enough.
        let pos = self.entries.iter().position(|e| &e.input == input);
        if let Some(e) = pos.map(|p| &self.entries[p])
            && Arc::ptr_eq(&e.base, base)
            && e.unavailable == unavailable
        {
            return e.types.clone();
        }
        let types = Arc::new(mark(base, &unavailable));
        let entry = Entry {
            input: input.clone(),
            base: base.clone(),
            unavailable,
            types: types.clone(),
        };
        match pos {
            Some(p) => self.entries[p] = entry,
            None => self.entries.push(entry),
        }
        types
    }
}

/// A copy of `types` with the offerings in `unavailable` (sorted) not available.
fn mark(types: &[InstanceType], unavailable: &[OfferingKey]) -> Vec<InstanceType> {
    let mut out = types.to_vec();
    for it in &mut out {
        for o in &mut it.offerings {
            let key = (it.name.as_str(), o.zone.as_str(), o.capacity_type);
            let found = unavailable
                .binary_search_by(|(t, z, c)| (t.as_str(), z.as_str(), *c).cmp(&key))
                .is_ok();
            if found {
                o.available = false;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
