//! The NodeClaim CRD (`nodeclaims.karpenter.sh`): status subresource, category `karpenter`,
//! immutable spec.

use serde_json::{Value, json};

use super::envelope::{Crd, CrdNames, column, root_schema};
use super::shared::{self, DURATION_PATTERN, NILLABLE_DURATION_PATTERN};
use crate::schema::{self, Schema};
use crate::v1::nodepool::defaults;
use crate::validation::labels::KeyContext;

pub const MSG_SPEC_IMMUTABLE: &str = "spec is immutable";

pub fn spec() -> Schema {
    schema::object()
        .description("The node this NodeClaim asks for. Immutable once created.")
        .prop(
            "expireAfter",
            schema::string()
                .pattern(NILLABLE_DURATION_PATTERN)
                .default(json!(defaults::EXPIRE_AFTER))
                .description("How long the node lives before it is replaced; `Never` disables expiry."),
        )
        .prop(
            "nodeClassRef",
            shared::node_class_ref().description("The provider node class the node is launched with."),
        )
        .prop(
            "requirements",
            shared::requirements(KeyContext::NodeClaim)
                .description("Constraints on the node's labels; the launch picks an instance type that satisfies them."),
        )
        .prop(
            "resources",
            schema::object()
                .description("Resources the node must have room for.")
                .prop(
                    "requests",
                    shared::resource_list().description("The pods' requests the node was launched for."),
                ),
        )
        .prop(
            "startupTaints",
            shared::taints().description("Taints present at startup and expected to be removed by another agent."),
        )
        .prop("taints", shared::taints().description("Taints applied to the node."))
        .prop(
            "terminationGracePeriod",
            schema::string()
                .pattern(DURATION_PATTERN)
                .description("The longest the node may take to drain once deletion starts."),
        )
        .required(&["nodeClassRef", "requirements"])
        .transition_rule("self == oldSelf", MSG_SPEC_IMMUTABLE)
}

pub fn status() -> Schema {
    schema::object()
        .description("The observed state of the NodeClaim.")
        .prop(
            "allocatable",
            shared::resource_list().description("Resources available to pods on the node."),
        )
        .prop(
            "capacity",
            shared::resource_list().description("The node's total resources."),
        )
        .prop("conditions", shared::conditions())
        .prop(
            "imageID",
            schema::string().description("The machine image the node runs."),
        )
        .prop(
            "lastPodEventTime",
            schema::string()
                .format("date-time")
                .description("When a pod was last bound to or removed from the node."),
        )
        .prop(
            "nodeName",
            schema::string().description("The name of the Node object."),
        )
        .prop(
            "providerID",
            schema::string().description("The cloud provider's ID of the instance."),
        )
}

pub fn nodeclaim_crd() -> Crd {
    Crd {
        names: CrdNames {
            group: "karpenter.sh",
            kind: "NodeClaim",
            plural: "nodeclaims",
            singular: "nodeclaim",
            short_names: &[],
            categories: &["karpenter"],
        },
        schema: root_schema("NodeClaim", spec(), status()),
        v1beta1: super::v1beta1::nodeclaim(
            &root_schema("NodeClaim", spec(), status()),
            &super::kubelet_schema(),
        ),
        printer_columns: json!([
            column(
                "Type",
                "string",
                ".metadata.labels.node\\.kubernetes\\.io/instance-type",
                0
            ),
            column(
                "Capacity",
                "string",
                ".metadata.labels.karpenter\\.sh/capacity-type",
                0
            ),
            column(
                "Zone",
                "string",
                ".metadata.labels.topology\\.kubernetes\\.io/zone",
                0
            ),
            column("Node", "string", ".status.nodeName", 0),
            column(
                "Ready",
                "string",
                ".status.conditions[?(@.type==\"Ready\")].status",
                0
            ),
            column("Age", "date", ".metadata.creationTimestamp", 0),
            column("ImageID", "string", ".status.imageID", 1),
            column("ID", "string", ".status.providerID", 1),
            column(
                "NodePool",
                "string",
                ".metadata.labels.karpenter\\.sh/nodepool",
                1
            ),
            column("NodeClass", "string", ".spec.nodeClassRef.name", 1),
            column(
                "Drifted",
                "string",
                ".status.conditions[?(@.type==\"Drifted\")].status",
                1
            ),
        ]),
        subresources: json!({"status": {}}),
    }
}

/// The v1 `openAPIV3Schema` of NodeClaim.
pub fn nodeclaim_schema() -> Value {
    nodeclaim_crd().schema
}
