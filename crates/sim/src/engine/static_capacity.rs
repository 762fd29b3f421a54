//! Static NodePools (`spec.replicas`) keep their size, as the controller's static capacity
//! loop keeps them: core's [`static_capacity::plan`] says how many claims to create (any type
//! the pool admits, launched in the provider's order) and which to drain.

use nodewright_core::static_capacity;

use super::launch::replacement_options;
use super::*;

impl Engine<'_> {
    pub(super) fn static_capacity(&mut self) {
        if self.cluster.nodepools.iter().all(|p| p.replicas.is_none()) {
            return;
        }
        let plan = static_capacity::plan(self.cluster.view(self.now));
        for scale in plan {
            let Some(pool) = self.cluster.nodepool(&scale.nodepool).cloned() else {
                continue;
            };
            let types = self
                .cluster
                .catalog
                .get(&pool.name)
                .map(|its| static_capacity::instance_types(&pool, its))
                .unwrap_or_default();
            let options = replacement_options(
                &self.cluster,
                &pool.name,
                &types,
                &pool.template.requirements,
            );
            if scale.create > 0 && options.is_empty() {
                self.log(
                    "static-capacity",
                    format!("NodePool {}: no instance type satisfies it", pool.name),
                );
            }
            if !options.is_empty() {
                let request = ClaimRequest {
                    nodepool: pool.name.clone(),
                    requirements: pool
                        .template
                        .requirements
                        .iter()
                        .map(|r| r.to_string())
                        .collect(),
                    requirement_list: pool.template.requirements.clone(),
                    requests: Default::default(),
                    options,
                    pods: Vec::new(),
                };
                for _ in 0..scale.create {
                    self.create_claim(&request, format!("NodePool {} replicas", pool.name));
                }
            }
            for name in scale.delete {
                self.drain(&name, format!("NodePool {} scaled down", pool.name));
            }
        }
    }
}
