//! A NodePool's own kubelet settings: a `karpenter.sh/v1beta1` NodePool carried `kubelet` in
//! its template; in v1 it belongs to the EC2NodeClass, so the conversion keeps it in the
//! NodePool's `compatibility.karpenter.sh/v1beta1-kubelet-conversion` annotation. As upstream's
//! AWS provider does, those settings win over the class's `kubelet` for that pool's nodes: in
//! the instance types the pool is offered (max pods, reserved resources) and in what its nodes
//! launch with.

use std::borrow::Cow;

use nodewright_api::aws::v1::{EC2NodeClass, KubeletConfiguration};
use nodewright_api::convert::KUBELET_COMPATIBILITY_ANNOTATION;
use nodewright_api::v1::nodepool::NodePool;
use tracing::warn;

/// The annotation's text on `pool`, if any.
pub fn annotation(pool: &NodePool) -> Option<&str> {
    pool.metadata
        .annotations
        .as_ref()?
        .get(KUBELET_COMPATIBILITY_ANNOTATION)
        .map(String::as_str)
}

/// `class` as `pool`'s nodes use it: with the pool's kubelet settings when it carries them.
/// An annotation that does not read as kubelet settings is logged and the class is used as
/// it is.
pub fn class_for<'a>(class: &'a EC2NodeClass, pool: Option<&NodePool>) -> Cow<'a, EC2NodeClass> {
    let Some(text) = pool.and_then(annotation) else {
        return Cow::Borrowed(class);
    };
    match serde_json::from_str::<KubeletConfiguration>(text) {
        Ok(kubelet) => {
            let mut c = class.clone();
            c.spec.kubelet = Some(kubelet);
            Cow::Owned(c)
        }
        Err(e) => {
            let name = pool
                .and_then(|p| p.metadata.name.as_deref())
                .unwrap_or_default();
            warn!(nodepool = %name, error = %e, "annotation {KUBELET_COMPATIBILITY_ANNOTATION} is not kubelet settings; the EC2NodeClass's are used");
            Cow::Borrowed(class)
        }
    }
}

#[cfg(test)]
mod tests {
    use nodewright_testkit::k8s;
    use serde_json::json;

    use super::*;

    fn pool(annotation: Option<&str>) -> NodePool {
        let mut v = k8s::nodepool("old");
        if let Some(a) = annotation {
            v["metadata"]["annotations"] = json!({KUBELET_COMPATIBILITY_ANNOTATION: a});
        }
        serde_json::from_value(v).unwrap()
    }

    fn class() -> EC2NodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "d"},
            "spec": {"kubelet": {"maxPods": 20}}
        }))
        .unwrap()
    }

    #[test]
    fn the_pools_kubelet_wins_and_a_bad_one_is_ignored() {
        let c = class();
        let max_pods = |c: &EC2NodeClass| c.spec.kubelet.as_ref().and_then(|k| k.max_pods);
        assert_eq!(max_pods(&class_for(&c, None)), Some(20));
        assert_eq!(max_pods(&class_for(&c, Some(&pool(None)))), Some(20));
        let p = pool(Some(r#"{"maxPods":110,"systemReserved":{"cpu":"100m"}}"#));
        let own = class_for(&c, Some(&p));
        assert_eq!(max_pods(&own), Some(110));
        assert_eq!(
            own.spec
                .kubelet
                .as_ref()
                .unwrap()
                .system_reserved
                .as_ref()
                .unwrap()["cpu"],
            "100m"
        );
        let bad = pool(Some("{not json"));
        assert_eq!(max_pods(&class_for(&c, Some(&bad))), Some(20));
    }
}
