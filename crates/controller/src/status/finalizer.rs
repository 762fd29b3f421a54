//! The EC2NodeClass finalizer (`karpenter.k8s.aws/termination`), as upstream's class
//! termination controller keeps it: every class carries it; a class being deleted keeps it
//! while any NodeClaim names the class (their instances were launched with its templates and
//! instance profile, and a claim still launching needs them), then the cloud provider removes
//! what it made for the class and the finalizer goes, letting the API server delete it.

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use tracing::{info, warn};

use super::{StatusController, Written, record};
use crate::events::ObjectRef;
use crate::state::lock;
use crate::write::MetaPatch;

pub const FINALIZER: &str = "karpenter.k8s.aws/termination";

/// What one class needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Live and without the finalizer: add it.
    Add,
    /// Being deleted while these NodeClaims name it: wait.
    Wait(Vec<String>),
    /// Being deleted, no NodeClaim names it: clean up, then release the finalizer.
    Finalize,
    /// Nothing to do.
    Done,
}

fn has_finalizer(class: &EC2NodeClass) -> bool {
    class
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

/// The step for `class` given every NodeClaim of the cluster.
pub fn step<'a>(class: &EC2NodeClass, claims: impl IntoIterator<Item = &'a NodeClaim>) -> Step {
    let deleting = class.metadata.deletion_timestamp.is_some();
    match (deleting, has_finalizer(class)) {
        (false, true) | (true, false) => Step::Done,
        (false, false) => Step::Add,
        (true, true) => {
            let name = class.metadata.name.as_deref().unwrap_or_default();
            let mut users: Vec<String> = claims
                .into_iter()
                .filter(|c| {
                    let r = &c.spec.node_class_ref;
                    r.name == name && r.kind == "EC2NodeClass"
                })
                .filter_map(|c| c.metadata.name.clone())
                .collect();
            users.sort();
            if users.is_empty() {
                Step::Finalize
            } else {
                Step::Wait(users)
            }
        }
    }
}

/// The finalizer patch: the class's finalizers with ours added or taken out, guarded by the
/// version read so a concurrent change to the list is not overwritten.
fn finalizers_patch(class: &EC2NodeClass, add: bool) -> MetaPatch {
    let mut finalizers: Vec<String> = class
        .metadata
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != FINALIZER)
        .collect();
    if add {
        finalizers.push(FINALIZER.to_string());
    }
    MetaPatch {
        finalizers: Some(finalizers),
        resource_version: class.metadata.resource_version.clone(),
        ..MetaPatch::default()
    }
}

impl StatusController {
    pub(super) async fn finalize_nodeclasses(&self, out: &mut Written) {
        let steps: Vec<(EC2NodeClass, Step)> = {
            let s = lock(&self.state);
            s.nodeclasses
                .values()
                .map(|c| (c.clone(), step(c, s.nodeclaims.values().map(|c| &**c))))
                .filter(|(_, st)| *st != Step::Done)
                .collect()
        };
        for (class, st) in steps {
            let name = class.metadata.name.clone().unwrap_or_default();
            match st {
                Step::Done => {}
                Step::Add => {
                    let patch = finalizers_patch(&class, true);
                    let r = self.writer.patch_nodeclass_meta(&name, &patch).await;
                    if record(out, "EC2NodeClass", &name, r) {
                        out.nodeclass_finalizer.push(name);
                    }
                }
                Step::Wait(claims) => {
                    info!(ec2nodeclass = %name, nodeclaims = ?claims, "EC2NodeClass deletion waits for its NodeClaims to terminate");
                    let mut class_ref = ObjectRef::ec2nodeclass(&name);
                    if let Some(uid) = &class.metadata.uid {
                        class_ref = class_ref.with_uid(uid.clone());
                    }
                    self.events
                        .publish(super::events::waiting_on_nodeclaim_termination(
                            class_ref, &claims,
                        ));
                }
                Step::Finalize => match self.cloud.finalize_node_class(&class).await {
                    Ok(removed) => {
                        info!(ec2nodeclass = %name, removed = ?removed, "EC2NodeClass cleaned up");
                        let patch = finalizers_patch(&class, false);
                        let r = self.writer.patch_nodeclass_meta(&name, &patch).await;
                        if record(out, "EC2NodeClass", &name, r) {
                            out.nodeclass_finalized.push(name);
                        }
                    }
                    Err(e) => {
                        warn!(ec2nodeclass = %name, error = %e, "cleaning up a deleted EC2NodeClass failed; tried again next pass");
                        out.errors
                            .push(format!("finalizing EC2NodeClass {name}: {e}"));
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_testkit::json::merge;
    use nodewright_testkit::k8s;
    use serde_json::json;

    fn class(deleting: bool, finalizers: &[&str]) -> EC2NodeClass {
        let mut v = json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default", "resourceVersion": "7", "finalizers": finalizers},
            "spec": {"role": "node-role", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}
        });
        if deleting {
            v["metadata"]["deletionTimestamp"] = "2026-12-02T10:00:00Z".into();
        }
        serde_json::from_value(v).unwrap()
    }

    fn claim(name: &str, class: &str) -> NodeClaim {
        let class = json!({"spec": {"nodeClassRef": {"name": class}}});
        serde_json::from_value(merge(k8s::nodeclaim(name), class)).unwrap()
    }

    #[test]
    fn a_live_class_gets_the_finalizer_once() {
        assert_eq!(step(&class(false, &[]), []), Step::Add);
        assert_eq!(step(&class(false, &[FINALIZER]), []), Step::Done);
        let p = finalizers_patch(&class(false, &["other"]), true);
        assert_eq!(p.finalizers, Some(vec!["other".into(), FINALIZER.into()]));
        assert_eq!(p.resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn a_deleted_class_waits_for_the_claims_naming_it() {
        let claims = [
            claim("b-1", "default"),
            claim("a-1", "default"),
            claim("x", "other"),
        ];
        assert_eq!(
            step(&class(true, &[FINALIZER]), &claims),
            Step::Wait(vec!["a-1".into(), "b-1".into()])
        );
        assert_eq!(
            step(&class(true, &[FINALIZER]), &claims[2..]),
            Step::Finalize
        );
        // Another controller's finalizer is left alone; ours is not there to release.
        assert_eq!(step(&class(true, &["other"]), []), Step::Done);
        let p = finalizers_patch(&class(true, &["other", FINALIZER]), false);
        assert_eq!(p.finalizers, Some(vec!["other".to_string()]));
    }
}
