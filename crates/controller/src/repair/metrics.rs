//! Node repair's own family, as upstream's `node.health` exports it:
//! `karpenter_nodeclaims_unhealthy_disrupted_total{condition, nodepool, capacity_type,
//! image_id}`, a repair by the condition (in snake case) that was unhealthy too long. The
//! repair also counts in `karpenter_nodeclaims_disrupted_total` with reason `unhealthy`.

use prometheus_client::registry::Registry;

use crate::metrics::{Counters, registered};

pub struct RepairMetrics {
    unhealthy_disrupted: Counters,
}

impl RepairMetrics {
    pub(crate) fn register(r: &mut Registry) -> Self {
        RepairMetrics {
            unhealthy_disrupted: registered(
                r,
                "karpenter_nodeclaims_unhealthy_disrupted",
                "NodeClaims node repair replaced because a node condition stayed unhealthy past its toleration, by condition, NodePool, capacity type and image.",
            ),
        }
    }

    /// Node repair deleted a claim whose Node's `condition` stayed unhealthy too long.
    pub fn nodeclaim_unhealthy_disrupted(
        &self,
        condition: &str,
        nodepool: &str,
        capacity_type: &str,
        image_id: &str,
    ) {
        self.unhealthy_disrupted
            .get_or_create(&vec![
                ("condition", condition.to_owned()),
                ("nodepool", nodepool.to_owned()),
                ("capacity_type", capacity_type.to_owned()),
                ("image_id", image_id.to_owned()),
            ])
            .inc();
    }
}
