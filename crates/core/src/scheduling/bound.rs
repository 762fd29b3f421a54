//! A lower bound on the cost of the new capacity, from the LP relaxation of covering the pods'
//! summed requests with fractional nodes.
//!
//! Primal: minimise `Σ price_t x_t` subject to `Σ alloc_t[r] x_t >= demand[r]` for every resource
//! and `Σ x_t >= k` (at least `k` nodes when hostname anti-affinity or hostname spread forces
//! them apart), `x >= 0`. By weak duality every `y >= 0` with `alloc_t·y + y_nodes <= price_t`
//! for all `t` proves `demand·y + k·y_nodes` as a lower bound. The search below only ever
//! reports the value of such a feasible `y`, so the bound is proven whatever the search quality.

use super::intern::FastSet;
use super::plan::Plan;
use super::setup::World;
use super::topology::Kind;
use crate::model::Snapshot;

/// One column of the LP: a NodePool's instance type.
struct Column {
    price: f64,
    alloc: Vec<f64>,
}

/// The dual value of direction `v` scaled to feasibility.
fn value(cols: &[Column], demand: &[f64], v: &[f64]) -> f64 {
    // y_r = v_r / demand_r, so demand·y = Σ v.
    let mut worst: f64 = 0.0;
    for c in cols {
        let mut load = 0.0;
        for r in 0..v.len() {
            if demand[r] > 0.0 {
                load += c.alloc[r] * v[r] / demand[r];
            }
        }
        if c.price > 0.0 {
            worst = worst.max(load / c.price);
        } else if load > 0.0 {
            return 0.0;
        }
    }
    if worst <= 0.0 {
        return 0.0;
    }
    v.iter().sum::<f64>() / worst
}

/// Best dual value found by a deterministic pattern search over directions.
pub(crate) fn dual_bound(prices_allocs: &[(f64, Vec<f64>)], demand: &[f64]) -> f64 {
    let cols: Vec<Column> = prices_allocs
        .iter()
        .map(|(p, a)| Column {
            price: *p,
            alloc: a.clone(),
        })
        .collect();
    let dims: Vec<usize> = (0..demand.len()).filter(|&r| demand[r] > 0.0).collect();
    if dims.is_empty() || cols.is_empty() {
        return 0.0;
    }
    let n = demand.len();
    let mut best_v = vec![0.0; n];
    let mut best = 0.0;
    for &d in &dims {
        let mut v = vec![0.0; n];
        v[d] = 1.0;
        let val = value(&cols, demand, &v);
        if val > best {
            best = val;
            best_v = v;
        }
    }
    if best == 0.0 {
        best_v = vec![0.0; n];
        for &d in &dims {
            best_v[d] = 1.0 / dims.len() as f64;
        }
        best = value(&cols, demand, &best_v);
    }
    let mut step: f64 = 0.5;
    while step > 1e-7 {
        let mut improved = false;
        for &i in &dims {
            for &j in &dims {
                if i == j || best_v[j] <= 0.0 {
                    continue;
                }
                let mut v = best_v.clone();
                let delta = step.min(v[j]);
                v[j] -= delta;
                v[i] += delta;
                let val = value(&cols, demand, &v);
                if val > best * (1.0 + 1e-12) {
                    best = val;
                    best_v = v;
                    improved = true;
                }
            }
        }
        if !improved {
            step /= 2.0;
        }
    }
    best
}

/// The bound for the pods `plan` puts on new claims.
pub(crate) fn lower_bound(w: &World, s: &Snapshot, plan: &Plan) -> f64 {
    if plan.new_claims.is_empty() {
        return 0.0;
    }
    // The few pods on new claims are found by one pass over the pods, each key written into
    // one buffer; a key listed twice names its last pod, as an index by key would.
    let mut wanted: FastSet<&str> = plan
        .new_claims
        .iter()
        .flat_map(|c| c.pods.iter().map(String::as_str))
        .collect();
    let mut on_new = vec![false; s.pods.len()];
    let mut key = String::new();
    for (i, p) in s.pods.iter().enumerate().rev() {
        if wanted.is_empty() {
            break;
        }
        key.clear();
        key.push_str(&p.namespace);
        key.push('/');
        key.push_str(&p.name);
        if wanted.remove(key.as_str()) {
            on_new[i] = true;
        }
    }
    let r = w.names.len();
    let mut demand = vec![0.0; r + 1];
    // Pods on new claims per group whose constraint they carry and whose selector they match:
    // each new node holds at most one (anti-affinity) or maxSkew (hostname spread) of them.
    let mut apart: Vec<u64> = vec![0; w.groups.len()];
    for c in &w.classes {
        let n = c.pods.iter().filter(|&&p| on_new[p]).count() as u64;
        if n == 0 {
            continue;
        }
        for (d, &q) in demand.iter_mut().zip(&c.requests) {
            *d += q as f64 * n as f64;
        }
        for &g in &c.anti_affinity {
            let grp = &w.groups[g];
            if grp.def.key == w.hostname && grp.matches(&c.namespace, &c.labels) {
                apart[g] += n;
            }
        }
        for &(g, anyway) in &c.spreads {
            let grp = &w.groups[g];
            if !anyway && grp.def.key == w.hostname && grp.matches(&c.namespace, &c.labels) {
                apart[g] += n;
            }
        }
    }
    let mut forced_nodes: u64 = 1;
    for (g, &n) in apart.iter().enumerate() {
        let per_node = match w.groups[g].def.kind {
            Kind::Spread { max_skew, .. } => max_skew.max(1) as u64,
            _ => 1,
        };
        forced_nodes = forced_nodes.max(n.div_ceil(per_node));
    }
    // Any pod on new capacity needs at least one node.
    demand[r] = forced_nodes as f64;
    let mut cols = Vec::new();
    // Only instance types a NodePool may launch, at the cheapest offering it allows: anything
    // looser is still a bound, but a needlessly weak one.
    for (pi, p) in w.pools.iter().enumerate() {
        for (ii, it) in p.its.iter().enumerate() {
            if it.base_price == f64::MAX || it.reqs.intersects(&p.reqs, &w.interner).is_err() {
                continue;
            }
            let Some((price, _)) = w.offering(pi, ii, &p.reqs) else {
                continue;
            };
            let mut a: Vec<f64> = it.alloc.iter().map(|&x| x.max(0) as f64).collect();
            a.push(1.0);
            cols.push((price, a));
        }
    }
    dual_bound(&cols, &demand)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{instance_type, offering};

    #[test]
    fn single_resource_bound_is_exact() {
        // Two types: 2 cpu for $1, 4 cpu for $1.5. Demand 8 cpu: best fractional cost 3.0.
        let cols = vec![(1.0, vec![2.0]), (1.5, vec![4.0])];
        let b = dual_bound(&cols, &[8.0]);
        assert!((b - 3.0).abs() < 1e-6, "{b}");
    }

    #[test]
    fn two_resources_mix() {
        // cpu-heavy $1 (4 cpu, 1 mem) and mem-heavy $1 (1 cpu, 4 mem); demand 5 cpu and 5 mem:
        // one of each covers it exactly, and the LP optimum is 2.
        let cols = vec![(1.0, vec![4.0, 1.0]), (1.0, vec![1.0, 4.0])];
        let b = dual_bound(&cols, &[5.0, 5.0]);
        assert!((b - 2.0).abs() < 1e-4, "{b}");
        assert!(b <= 2.0 + 1e-9);
    }

    #[test]
    fn node_count_dimension() {
        // Ten pods that must be apart, each tiny: at least 10 nodes of the $1 type.
        let cols = vec![(1.0, vec![100.0, 1.0])];
        let b = dual_bound(&cols, &[1.0, 10.0]);
        assert!((b - 10.0).abs() < 1e-6, "{b}");
    }

    use std::sync::Arc;

    use crate::labels;
    use crate::model::{CapacityType, InstanceType, NodePool, Pod, PodTemplate};
    use crate::requirements::Requirement;
    use crate::resources::{CPU, MEMORY, PODS, Resources};
    use crate::scheduling::{Options, Plan, solve};

    /// The plan for `pods` pods of 1000m and 1 GiB, with NodePool `od` (limited to `pool_reqs`)
    /// launching only type `a`: 2000m, 4 GiB, 10 pods, offered at `offers`.
    fn plan_of(pods: usize, offers: &[(CapacityType, f64)], pool_reqs: Vec<Requirement>) -> Plan {
        let it = InstanceType {
            requirements: vec![Requirement::single(labels::INSTANCE_TYPE, "a")],
            ..instance_type(
                "a",
                Resources::new()
                    .with(CPU, 2000)
                    .with(MEMORY, 4 << 30)
                    .with(PODS, 10),
                offers
                    .iter()
                    .map(|&(ct, price)| offering("z", ct, price))
                    .collect(),
            )
        };
        let mut pool = NodePool {
            name: "od".into(),
            ready: true,
            ..NodePool::default()
        };
        pool.template.requirements = pool_reqs;
        let pod = |i: usize| Pod {
            namespace: "default".into(),
            name: format!("p{i}"),
            uid: format!("p{i}"),
            template: Arc::new(PodTemplate {
                requests: Resources::new()
                    .with(CPU, 1000)
                    .with(MEMORY, 1 << 30)
                    .with(PODS, 1),
                ..PodTemplate::default()
            }),
            ..Pod::default()
        };
        let s = Snapshot {
            nodepools: vec![pool],
            instance_types: [("od".to_string(), Arc::new(vec![it]))]
                .into_iter()
                .collect(),
            pods: (0..pods).map(pod).map(Into::into).collect(),
            ..Snapshot::default()
        };
        solve(&s, &Options::default())
    }

    #[test]
    fn bound_prices_only_what_the_nodepool_may_launch() {
        let plan = plan_of(
            1,
            &[(CapacityType::Spot, 0.1), (CapacityType::OnDemand, 1.0)],
            vec![Requirement::single(labels::CAPACITY_TYPE, "on-demand")],
        );
        assert!((plan.cost - 1.0).abs() < 1e-9, "{}", plan.cost);
        // The spot offering the NodePool forbids must not pull the bound down to 0.1.
        assert!(
            (plan.lower_bound - 1.0).abs() < 1e-6,
            "{}",
            plan.lower_bound
        );
    }

    #[test]
    fn the_bound_counts_every_pod_the_plan_puts_on_new_nodes() {
        let plan = plan_of(3, &[(CapacityType::OnDemand, 1.0)], vec![]);
        assert!((plan.cost - 2.0).abs() < 1e-9, "{}", plan.cost);
        // Three 1000m pods on 2000m nodes at $1: one and a half nodes' worth.
        assert!(
            (plan.lower_bound - 1.5).abs() < 1e-6,
            "{}",
            plan.lower_bound
        );
    }
}
