//! The NodePool CRD (`nodepools.karpenter.sh`): status and scale subresources, category
//! `karpenter`.

use serde_json::{Value, json};

use super::envelope::{Crd, CrdNames, column, root_schema};
use super::shared::{self, DURATION_PATTERN, NILLABLE_DURATION_PATTERN};
use crate::schema::{self, Schema};
use crate::v1::nodepool::{CONSOLIDATION_POLICIES, DISRUPTION_REASONS, defaults};
use crate::validation::labels::{self, KeyContext};

pub const MSG_SCHEDULE_WITH_DURATION: &str = "'schedule' must be set with 'duration'";
pub const MSG_STATIC_TRANSITION: &str = "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes";
pub const MSG_STATIC_LIMITS: &str = "only 'limits.nodes' is supported on static NodePools";
pub const MSG_STATIC_WEIGHT: &str = "'weight' is not supported on static NodePools";
pub const MSG_GROUP_IMMUTABLE: &str = "nodeClassRef.group is immutable";
pub const MSG_KIND_IMMUTABLE: &str = "nodeClassRef.kind is immutable";

pub const BUDGET_NODES_PATTERN: &str = r"^((100|[0-9]{1,2})%|[0-9]+)$";
pub const BUDGET_SCHEDULE_PATTERN: &str =
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$";
pub const BUDGET_DURATION_PATTERN: &str = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$";

fn template_labels() -> Schema {
    let mut s = schema::map_of(
        schema::string()
            .max_length(63)
            .pattern(labels::LABEL_VALUE_PATTERN),
    )
    .max_properties(100)
    .description("Labels every NodeClaim and Node of this NodePool gets.");
    for rule in labels::key_rules(KeyContext::NodePool) {
        s = s.rule(&format!("self.all(x, {})", rule.cel("x")), &rule.message());
    }
    s
}

fn template() -> Schema {
    let metadata = schema::object()
        .prop(
            "annotations",
            schema::map_of(schema::string())
                .description("Annotations every NodeClaim and Node of this NodePool gets."),
        )
        .prop("labels", template_labels());
    let spec = schema::object()
        .prop(
            "expireAfter",
            schema::string()
                .pattern(NILLABLE_DURATION_PATTERN)
                .default(json!(defaults::EXPIRE_AFTER))
                .description("How long a node lives, counted from its NodeClaim's creation, before it is replaced; `Never` disables expiry."),
        )
        .prop(
            "nodeClassRef",
            shared::node_class_ref()
                .transition_rule("self.group == oldSelf.group", MSG_GROUP_IMMUTABLE)
                .transition_rule("self.kind == oldSelf.kind", MSG_KIND_IMMUTABLE)
                .description("The provider node class (for AWS, an EC2NodeClass) nodes are launched with."),
        )
        .prop(
            "requirements",
            shared::requirements(KeyContext::NodePool)
                .description("Constraints on node labels (instance type, zone, capacity type, ...) every launch satisfies."),
        )
        .prop(
            "startupTaints",
            shared::taints().description("Taints present at startup and expected to be removed by another agent; pods need not tolerate them."),
        )
        .prop("taints", shared::taints().description("Taints applied to every node; pods must tolerate them."))
        .prop(
            "terminationGracePeriod",
            schema::string()
                .pattern(DURATION_PATTERN)
                .description("The longest a node may take to drain once deletion starts; afterwards remaining pods are deleted. Unset waits forever."),
        )
        .required(&["nodeClassRef", "requirements"]);
    schema::object()
        .description("The NodeClaim every node of this NodePool is launched from.")
        .prop("metadata", metadata)
        .prop("spec", spec)
        .required(&["spec"])
}

fn budget() -> Schema {
    schema::object()
        .prop(
            "duration",
            schema::string()
                .pattern(BUDGET_DURATION_PATTERN)
                .description("How long the budget is active after each schedule hit (hours and minutes). Required with schedule."),
        )
        .prop(
            "nodes",
            schema::string()
                .pattern(BUDGET_NODES_PATTERN)
                .default(json!(defaults::BUDGET_NODES))
                .description("How many nodes may be disrupted at once: a count or a percentage of the NodePool's nodes (rounded up)."),
        )
        .prop(
            "reasons",
            schema::array(schema::string().enumerate(DISRUPTION_REASONS))
                .max_items(50)
                .list_type("set")
                .description("Disruption reasons the budget applies to; unset means all."),
        )
        .prop(
            "schedule",
            schema::string()
                .pattern(BUDGET_SCHEDULE_PATTERN)
                .description("Cron schedule (UTC) at which the budget becomes active. Required with duration; unset means always active."),
        )
        .required(&["nodes"])
}

fn disruption() -> Schema {
    schema::object()
        .default(json!({"consolidateAfter": defaults::CONSOLIDATE_AFTER}))
        .prop(
            "budgets",
            schema::array(budget())
                .max_items(50)
                .list_type("atomic")
                .default(json!([{"nodes": defaults::BUDGET_NODES}]))
                .description("Limits on how many nodes may be disrupted at once; the most restrictive active budget wins.")
                .rule(
                    "self.all(x, has(x.schedule) == has(x.duration))",
                    MSG_SCHEDULE_WITH_DURATION,
                ),
        )
        .prop(
            "consolidateAfter",
            schema::string()
                .pattern(NILLABLE_DURATION_PATTERN)
                .description("How long a node must stay consolidatable before it is consolidated; `Never` disables consolidation."),
        )
        .prop(
            "consolidationPolicy",
            schema::string()
                .enumerate(CONSOLIDATION_POLICIES)
                .default(json!(defaults::CONSOLIDATION_POLICY))
                .description("Which nodes consolidation may remove or replace."),
        )
        .required(&["consolidateAfter"])
        .description("When and how nodes of this NodePool are voluntarily disrupted.")
}

pub fn spec() -> Schema {
    schema::object()
        .description("How this NodePool launches and disrupts nodes.")
        .prop("disruption", disruption())
        .prop(
            "limits",
            shared::resource_list().description("Upper bounds on the total resources (and `nodes`) of this NodePool's nodes."),
        )
        .prop(
            "replicas",
            schema::int64()
                .minimum(0)
                .description("Alpha: keep exactly this many nodes (static capacity) instead of following pod demand."),
        )
        .prop("template", template())
        .prop(
            "weight",
            schema::int32()
                .minimum(1)
                .maximum(100)
                .description("Priority among NodePools; higher is tried first. Unset is 0."),
        )
        .required(&["template"])
        .transition_rule("has(self.replicas) == has(oldSelf.replicas)", MSG_STATIC_TRANSITION)
        .rule(
            "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",
            MSG_STATIC_LIMITS,
        )
        .rule("!has(self.replicas) || !has(self.weight)", MSG_STATIC_WEIGHT)
}

pub fn status() -> Schema {
    schema::object()
        .description("The observed state of the NodePool.")
        .prop("conditions", shared::conditions())
        .prop(
            "nodeClassObservedGeneration",
            schema::int64().description("The node class generation the status was computed from."),
        )
        .prop(
            "nodes",
            schema::int64().description("The number of nodes of this NodePool."),
        )
        .prop(
            "resources",
            shared::resource_list()
                .description("Total capacity of this NodePool's nodes, plus the `nodes` count."),
        )
}

pub fn nodepool_crd() -> Crd {
    Crd {
        names: CrdNames {
            group: "karpenter.sh",
            kind: "NodePool",
            plural: "nodepools",
            singular: "nodepool",
            short_names: &[],
            categories: &["karpenter"],
        },
        schema: root_schema("NodePool", spec(), status()),
        v1beta1: super::v1beta1::nodepool(
            &root_schema("NodePool", spec(), status()),
            &super::kubelet_schema(),
        ),
        printer_columns: json!([
            column(
                "NodeClass",
                "string",
                ".spec.template.spec.nodeClassRef.name",
                0
            ),
            column("Nodes", "string", ".status.nodes", 0),
            column(
                "Ready",
                "string",
                ".status.conditions[?(@.type==\"Ready\")].status",
                0
            ),
            column("Age", "date", ".metadata.creationTimestamp", 0),
            column("Weight", "integer", ".spec.weight", 1),
            column("CPU", "string", ".status.resources.cpu", 1),
            column("Memory", "string", ".status.resources.memory", 1),
        ]),
        subresources: json!({
            "status": {},
            "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.nodes"},
        }),
    }
}

/// The v1 `openAPIV3Schema` of NodePool.
pub fn nodepool_schema() -> Value {
    nodepool_crd().schema
}
