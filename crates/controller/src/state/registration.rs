//! Feeding each NodePool's registration health (core's [`registration_health`]): the
//! lifecycle records a claim that registered and a claim deleted for not launching or not
//! registering in time; the NodePool status writer reads the condition back.

use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_core::labels;
use nodewright_core::registration_health::{self as registration_health, Generations, Status};

use super::ClusterState;

impl ClusterState {
    /// The generations of `pool` and of the node class it names, as the record is keyed.
    pub fn registration_generations(&self, pool: &NodePool) -> Generations {
        let class = &pool.spec.template.spec.node_class_ref.name;
        (
            pool.metadata.generation,
            self.nodeclasses
                .get(class)
                .and_then(|c| c.metadata.generation),
        )
    }

    /// Records `claim`'s registration (`Ok`) or failure (`Err` with its reason) for its
    /// NodePool; a claim of no known pool is not recorded.
    pub fn record_registration(&mut self, claim: &NodeClaim, result: Result<(), String>) {
        let Some(pool) = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::NODEPOOL))
            .and_then(|p| self.nodepools.get(p))
        else {
            return;
        };
        let name = pool.metadata.name.clone().unwrap_or_default();
        let generations = self.registration_generations(pool);
        self.registration_health
            .entry(name)
            .or_default()
            .record(generations, result);
    }

    /// The condition `pool` should carry now.
    pub fn registration_status(&self, pool: &NodePool) -> Status {
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        self.registration_health
            .get(name)
            .map(|h| h.status(self.registration_generations(pool)))
            .unwrap_or(registration_health::Status::Unknown)
    }
}
