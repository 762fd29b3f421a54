//! Each NodePool's instance types by name, for the lookups a planning round and its
//! simulations make: a node's offering price, a drift check's instance type, a replacement's
//! options.

use crate::model::{InstanceType, Snapshot};
use crate::scheduling::intern::FastMap;

/// Each NodePool's instance types by name, so a type is found without a scan of the
/// NodePool's list. A name listed twice keeps its first entry, as a scan would find.
pub(super) struct TypeIndex<'a> {
    by_pool: FastMap<&'a str, FastMap<&'a str, &'a InstanceType>>,
}

impl<'a> TypeIndex<'a> {
    pub(super) fn new(s: &'a Snapshot) -> TypeIndex<'a> {
        let by_pool = s
            .instance_types
            .iter()
            .map(|(pool, its)| {
                let mut m: FastMap<&str, &InstanceType> = FastMap::default();
                m.reserve(its.len());
                for it in its.iter() {
                    m.entry(it.name.as_str()).or_insert(it);
                }
                (pool.as_str(), m)
            })
            .collect();
        TypeIndex { by_pool }
    }

    pub(super) fn get(&self, pool: &str, name: &str) -> Option<&'a InstanceType> {
        self.by_pool.get(pool)?.get(name).copied()
    }
}
