//! The CustomResourceDefinitions `nodewright crds` prints: NodePool, NodeClaim and
//! EC2NodeClass, stored as v1 and served as v1 and v1beta1 (converted by the controller's
//! webhook), with upstream's schemas, defaults, CEL rules, printer columns, names and
//! subresources.

pub mod ec2nodeclass;
pub mod envelope;
pub mod nodeclaim;
pub mod nodepool;
pub mod shared;
pub mod v1beta1;

pub use ec2nodeclass::ec2nodeclass_crd;
pub use envelope::{Crd, CrdNames, WEBHOOK_NAMESPACE, WEBHOOK_PATH, WEBHOOK_PORT, WEBHOOK_SERVICE};
pub use nodeclaim::{nodeclaim_crd, nodeclaim_schema};
pub use nodepool::{nodepool_crd, nodepool_schema};

use serde_json::Value;

/// Every CRD `nodewright crds` prints, with the file name it has under `charts/nodewright/crds/`
/// and `charts/nodewright-crd/templates/`.
pub fn all() -> Vec<(&'static str, Value)> {
    vec![
        ("karpenter.sh_nodepools.yaml", nodepool_crd().to_value()),
        ("karpenter.sh_nodeclaims.yaml", nodeclaim_crd().to_value()),
        (
            "karpenter.k8s.aws_ec2nodeclasses.yaml",
            ec2nodeclass_crd().to_value(),
        ),
    ]
}

/// The kubelet schema of the v1 EC2NodeClass, which v1beta1 NodePools and NodeClaims carried.
fn kubelet_schema() -> Value {
    crate::aws::crd::ec2nodeclass_schema()["properties"]["spec"]["properties"]["kubelet"].clone()
}

/// One CRD as a YAML document (starting with `---`).
pub fn to_yaml(crd: &Value) -> String {
    let body = serde_yaml::to_string(crd).unwrap_or_default();
    format!("---\n{body}")
}

/// All CRDs as one multi-document YAML stream.
pub fn all_yaml() -> String {
    all().iter().map(|(_, v)| to_yaml(v)).collect()
}
