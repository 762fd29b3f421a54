//! Points the CRDs' conversion at this webhook: `spec.conversion` of each CRD is made a
//! webhook whose client config names the [`Target`] and carries the authority's certificate as
//! `caBundle`. Checked at start and every minute after, and patched only when it differs.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use kube::api::{Api, Patch, PatchParams};
use nodewright_api::crd::WEBHOOK_PATH;
use serde_json::{Value, json};
use tracing::{info, warn};

use super::Target;

/// The CRDs whose versions the webhook converts.
pub const CRDS: &[&str] = &[
    "nodepools.karpenter.sh",
    "nodeclaims.karpenter.sh",
    "ec2nodeclasses.karpenter.k8s.aws",
];

const EVERY: Duration = Duration::from_secs(60);

/// The `spec.conversion` every CRD should have.
pub fn conversion(target: &Target, ca_pem: &str) -> Value {
    let ca = serde_json::to_value(ByteString(ca_pem.as_bytes().to_vec())).unwrap_or_default();
    let client_config = match target {
        Target::Service {
            name,
            namespace,
            port,
        } => json!({
            "service": {"name": name, "namespace": namespace, "port": port, "path": WEBHOOK_PATH},
            "caBundle": ca,
        }),
        Target::Url { url, .. } => json!({"url": url, "caBundle": ca}),
    };
    json!({
        "strategy": "Webhook",
        "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client_config},
    })
}

/// Whether `crd` already converts as `want` says (compared as typed values, so defaults the
/// API server fills in and the order of fields do not count as a difference).
pub fn up_to_date(crd: &CustomResourceDefinition, want: &Value) -> bool {
    let want: Option<CustomResourceConversion> = serde_json::from_value(want.clone()).ok();
    crd.spec.conversion.as_ref() == want.as_ref()
}

/// A merge patch that makes `spec.conversion` exactly `want`: the way in not taken (a URL
/// or a Service) is removed.
pub fn patch(want: &Value) -> Value {
    let mut want = want.clone();
    if let Some(cc) = want
        .pointer_mut("/webhook/clientConfig")
        .and_then(Value::as_object_mut)
    {
        for key in ["service", "url"] {
            cc.entry(key).or_insert(Value::Null);
        }
    }
    json!({"spec": {"conversion": want}})
}

/// Makes one CRD convert as `want`; `Ok(true)` when it had to be patched.
pub async fn ensure(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    want: &Value,
) -> Result<bool, kube::Error> {
    let crd = api.get(name).await?;
    if up_to_date(&crd, want) {
        return Ok(false);
    }
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch(want)))
        .await?;
    Ok(true)
}

/// Keeps every CRD pointed at this webhook, until the process stops.
pub async fn keep(client: kube::Client, want: Value) {
    let api: Api<CustomResourceDefinition> = Api::all(client);
    loop {
        for name in CRDS {
            match ensure(&api, name, &want).await {
                Ok(true) => info!(crd = name, "pointed the CRD's conversion at this webhook"),
                Ok(false) => {}
                Err(e) => {
                    warn!(crd = name, error = %e, "cannot point the CRD's conversion at this webhook")
                }
            }
        }
        tokio::time::sleep(EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd_with(conversion: Value) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "nodepools.karpenter.sh"},
            "spec": {"group": "karpenter.sh", "scope": "Cluster", "versions": [],
                     "names": {"kind": "NodePool", "plural": "nodepools"},
                     "conversion": conversion},
        }))
        .unwrap()
    }

    #[test]
    fn a_service_or_a_url_with_the_authority() {
        let svc = Target::Service {
            name: "karpenter".into(),
            namespace: "kube-system".into(),
            port: 8443,
        };
        let want = conversion(&svc, "PEM");
        assert_eq!(
            want["webhook"]["clientConfig"]["caBundle"], "UEVN",
            "base64 of PEM"
        );
        assert_eq!(
            want["webhook"]["clientConfig"]["service"]["path"],
            "/convert"
        );
        let url = Target::Url {
            url: "https://127.0.0.1:9443/convert".into(),
            host: "127.0.0.1".into(),
        };
        let p = patch(&conversion(&url, "PEM"));
        assert_eq!(
            p["spec"]["conversion"]["webhook"]["clientConfig"]["service"],
            Value::Null
        );
        assert_eq!(
            p["spec"]["conversion"]["webhook"]["clientConfig"]["url"],
            "https://127.0.0.1:9443/convert"
        );
    }

    #[test]
    fn only_a_difference_is_patched() {
        let svc = Target::Service {
            name: "nodewright".into(),
            namespace: "nodewright".into(),
            port: 8443,
        };
        let want = conversion(&svc, "PEM");
        assert!(up_to_date(&crd_with(want.clone()), &want));
        assert!(!up_to_date(&crd_with(conversion(&svc, "OTHER")), &want));
        // As printed by `nodewright crds`: the Service without a caBundle.
        let printed = nodewright_api::crd::nodepool_crd().to_value()["spec"]["conversion"].clone();
        assert!(!up_to_date(&crd_with(printed), &want));
    }
}
