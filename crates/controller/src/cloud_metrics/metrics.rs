//! The cloud's instance types and offerings as gauges (upstream's
//! `karpenter_cloudprovider_instance_type_*` families), replaced as a whole on each refresh
//! so a type or offering the cloud no longer lists leaves no stale series; and each NodePool's
//! cost at those prices (`karpenter_nodepools_cost_total`, replaced the same way, so a deleted
//! NodePool's series goes) with the claims that could not be priced
//! (`karpenter_nodepools_cost_tracker_errors_total`). The two families of an instance type,
//! and the two of an offering, share one label set rather than copy it each.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use prometheus_client::registry::Registry;

use crate::metrics::{Counters, Gauges, Shared, SharedGauges, Snapshot, registered};

/// An instance type's series: its name.
type TypeGauges = SharedGauges<[(&'static str, String); 1]>;
/// An offering's series: instance type, capacity type, zone.
type OfferingGauges = SharedGauges<[(&'static str, String); 3]>;

/// What one refresh publishes: per instance type its cores and memory, and per
/// (instance type, capacity type, zone) whether it can be launched and its price.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OfferingRows {
    /// Instance type → (vCPU cores, memory bytes).
    pub types: BTreeMap<String, (f64, f64)>,
    /// (instance type, capacity type, zone) → (available, US dollars per hour).
    pub offerings: BTreeMap<(String, String, String), (bool, f64)>,
}

pub struct OfferingMetrics {
    cpu_cores: TypeGauges,
    memory_bytes: TypeGauges,
    available: OfferingGauges,
    price: OfferingGauges,
    cost: Gauges,
    cost_errors: Counters,
    snapshot: Snapshot,
    /// The [`fingerprint`] of the rows last published. A refresh finds the same catalog
    /// nearly every minute, and replacing its thousands of series was 5% of the controller's
    /// CPU in a profile of the whole-loop benchmark.
    published: Mutex<Option<u64>>,
}

impl OfferingMetrics {
    pub(crate) fn register(r: &mut Registry, snapshot: &Snapshot) -> Self {
        let cost_errors = registered(
            r,
            "karpenter_nodepools_cost_tracker_errors",
            "NodeClaims a cost refresh could not price (their offering is unknown or has no price), by NodePool.",
        );
        OfferingMetrics {
            cpu_cores: registered(
                r,
                "karpenter_cloudprovider_instance_type_cpu_cores",
                "vCPUs of each instance type the cloud provider offers.",
            ),
            memory_bytes: registered(
                r,
                "karpenter_cloudprovider_instance_type_memory_bytes",
                "Memory of each instance type the cloud provider offers, in bytes.",
            ),
            available: registered(
                r,
                "karpenter_cloudprovider_instance_type_offering_available",
                "1 where an offering (instance type, capacity type, zone) can be launched now, 0 where it cannot.",
            ),
            price: registered(
                r,
                "karpenter_cloudprovider_instance_type_offering_price_estimate",
                "The hourly price this controller uses for each offering (instance type, capacity type, zone).",
            ),
            cost: registered(
                r,
                "karpenter_nodepools_cost_total",
                "What a NodePool's running NodeClaims cost per hour at the prices this controller knows, in the cloud provider's unit; an estimate, not a bill.",
            ),
            cost_errors,
            snapshot: snapshot.clone(),
            published: Mutex::new(None),
        }
    }

    /// Replaces every NodePool's cost with `costs` (NodePool → price per hour).
    pub fn set_costs(&self, costs: &BTreeMap<String, f64>) {
        let _guard = self.snapshot.hold();
        self.cost.clear();
        for (pool, cost) in costs {
            self.cost
                .get_or_create(&vec![("nodepool", pool.clone())])
                .set(*cost);
        }
    }

    /// `n` claims of `nodepool` that could not be priced.
    pub fn cost_tracking_errors(&self, nodepool: &str, n: u64) {
        self.cost_errors
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .inc_by(n);
    }

    /// Replaces every instance-type and offering series with `rows`, unless they are what was
    /// published last; true when it replaced them.
    pub fn set(&self, rows: &OfferingRows) -> bool {
        let print = fingerprint(rows);
        let mut published = self.published.lock().unwrap_or_else(|e| e.into_inner());
        if *published == Some(print) {
            return false;
        }
        *published = Some(print);
        let _guard = self.snapshot.hold();
        let m = self;
        for f in [&m.cpu_cores, &m.memory_bytes] {
            f.clear();
        }
        for f in [&m.available, &m.price] {
            f.clear();
        }
        for (it, (cores, bytes)) in &rows.types {
            let labels = Shared(Arc::new([("instance_type", it.clone())]));
            m.cpu_cores.get_or_create(&labels).set(*cores);
            m.memory_bytes.get_or_create(&labels).set(*bytes);
        }
        for ((it, capacity_type, zone), (available, price)) in &rows.offerings {
            let labels = Shared(Arc::new([
                ("instance_type", it.clone()),
                ("capacity_type", capacity_type.clone()),
                ("zone", zone.clone()),
            ]));
            m.available
                .get_or_create(&labels)
                .set(if *available { 1.0 } else { 0.0 });
            m.price.get_or_create(&labels).set(*price);
        }
        true
    }
}

/// A hash of every name, amount, availability and price in `rows` (prices and amounts by
/// their bits), for telling a refresh that changed nothing without keeping a copy of a
/// catalog's rows.
fn fingerprint(rows: &OfferingRows) -> u64 {
    let mut h = DefaultHasher::new();
    for (it, (cores, bytes)) in &rows.types {
        (it, cores.to_bits(), bytes.to_bits()).hash(&mut h);
    }
    for (key, (available, price)) in &rows.offerings {
        (key, available, price.to_bits()).hash(&mut h);
    }
    (rows.types.len(), rows.offerings.len()).hash(&mut h);
    h.finish()
}
