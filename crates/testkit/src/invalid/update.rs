//! Updates: a stored object, its replacement, and the errors of the update rules (immutable
//! fields, forbidden transitions). Each new object is valid on its own, so only the update rules
//! decide; an update they allow has no errors.

use serde_json::{Value, json};

use super::Case;
use crate::json::set;
use crate::valid::{ec2nodeclass, nodeclaim, nodepool};

/// Every update case, NodePools first, then NodeClaims, then EC2NodeClasses.
pub fn update_cases() -> Vec<Case> {
    let pool_ref = "/spec/template/spec/nodeClassRef";
    let with_profile = set(
        set(ec2nodeclass(), "/spec/role", Value::Null),
        "/spec/instanceProfile",
        json!("profile"),
    );
    let swap = "spec: changing from 'instanceProfile' to 'role' is not supported. You must delete and recreate this node class if you want to change this.";
    vec![
        update(
            "nodepool nodeClassRef group changed",
            nodepool(),
            set(
                nodepool(),
                &format!("{pool_ref}/group"),
                json!("example.com"),
            ),
            &["spec.template.spec.nodeClassRef: nodeClassRef.group is immutable"],
        ),
        update(
            "nodepool nodeClassRef kind changed",
            nodepool(),
            set(nodepool(), &format!("{pool_ref}/kind"), json!("Other")),
            &["spec.template.spec.nodeClassRef: nodeClassRef.kind is immutable"],
        ),
        update(
            "nodepool nodeClassRef name changed",
            nodepool(),
            set(nodepool(), &format!("{pool_ref}/name"), json!("other")),
            &[],
        ),
        update(
            "nodepool dynamic to static",
            nodepool(),
            set(nodepool(), "/spec/replicas", json!(1)),
            &[
                "spec: Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes",
            ],
        ),
        update(
            "nodepool static replicas changed",
            set(nodepool(), "/spec/replicas", json!(1)),
            set(nodepool(), "/spec/replicas", json!(2)),
            &[],
        ),
        update(
            "nodeclaim spec changed",
            nodeclaim(),
            set(nodeclaim(), "/spec/expireAfter", json!("1h")),
            &["spec: spec is immutable"],
        ),
        update(
            "nodeclaim labels changed",
            nodeclaim(),
            set(nodeclaim(), "/metadata/labels", json!({"a": "b"})),
            &[],
        ),
        update(
            "ec2nodeclass unchanged",
            ec2nodeclass(),
            ec2nodeclass(),
            &[],
        ),
        update(
            "ec2nodeclass role changed",
            ec2nodeclass(),
            set(ec2nodeclass(), "/spec/role", json!("OtherRole")),
            &["spec.role: immutable field changed"],
        ),
        update(
            "ec2nodeclass role to instanceProfile",
            ec2nodeclass(),
            with_profile.clone(),
            &[swap],
        ),
        update(
            "ec2nodeclass instanceProfile to role",
            with_profile,
            ec2nodeclass(),
            &[swap],
        ),
    ]
}

fn update(name: &str, old: Value, new: Value, errors: &[&str]) -> Case {
    Case {
        name: name.to_string(),
        object: new,
        old: Some(old),
        errors: errors.iter().map(|e| e.to_string()).collect(),
    }
}
