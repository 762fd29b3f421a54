//! Invalid NodeClaims: the rules a NodeClaim shares with a NodePool's template, at the
//! NodeClaim's own paths.

use serde_json::json;

use super::{Case, req, taint};
use crate::json::set;
use crate::valid::nodeclaim as nc;

/// Every NodeClaim case.
pub fn nodeclaim_cases() -> Vec<Case> {
    let case = |name, object, errors: &[&str]| {
        Case::new(name, object, errors.iter().map(|e| e.to_string()).collect())
    };
    vec![
        case(
            "karpenter.sh domain",
            set(
                nc(),
                "/spec/requirements/0",
                req("karpenter.sh/foo", "Exists", &[]),
            ),
            &["spec.requirements[0].key: label domain \"karpenter.sh\" is restricted"],
        ),
        case(
            "hostname",
            set(
                nc(),
                "/spec/requirements/0",
                req("kubernetes.io/hostname", "In", &["a"]),
            ),
            &[
                "spec.requirements[0].key: label domain \"kubernetes.io\" is restricted",
                "spec.requirements[0].key: label \"kubernetes.io/hostname\" is restricted",
            ],
        ),
        case(
            "name empty",
            set(nc(), "/spec/nodeClassRef/name", json!("")),
            &["spec.nodeClassRef.name: name may not be empty"],
        ),
        case(
            "taint duplicate",
            set(
                set(
                    nc(),
                    "/spec/taints",
                    json!([taint("example.com/a", None, "NoExecute")]),
                ),
                "/spec/startupTaints",
                json!([taint("example.com/a", None, "NoExecute")]),
            ),
            &["spec.startupTaints[0]: duplicate taint key/effect pair \"example.com/a:NoExecute\""],
        ),
    ]
}
