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
        .prop(
            "expireAfter",
            schema::string()
                .pattern(NILLABLE_DURATION_PATTERN)
                .default(json!(defaults::EXPIRE_AFTER)),
        )
        .prop("nodeClassRef", shared::node_class_ref())
        .prop("requirements", shared::requirements(KeyContext::NodeClaim))
        .prop(
            "resources",
            schema::object().prop("requests", shared::resource_list()),
        )
        .prop("startupTaints", shared::taints())
        .prop("taints", shared::taints())
        .prop(
            "terminationGracePeriod",
            schema::string().pattern(DURATION_PATTERN),
        )
        .required(&["nodeClassRef", "requirements"])
        .transition_rule("self == oldSelf", MSG_SPEC_IMMUTABLE)
}

pub fn status() -> Schema {
    schema::object()
        .prop("allocatable", shared::resource_list())
        .prop("capacity", shared::resource_list())
        .prop("conditions", shared::conditions())
        .prop("imageID", schema::string())
        .prop("lastPodEventTime", schema::string().format("date-time"))
        .prop("nodeName", schema::string())
        .prop("providerID", schema::string())
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
