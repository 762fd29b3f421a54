//! The `apiextensions.k8s.io/v1` CustomResourceDefinition wrapper around a kind's schemas:
//! v1 (stored) and v1beta1, converted by the controller's webhook.

use serde_json::{Value, json};

use crate::schema::{self, Schema};

pub struct CrdNames {
    pub group: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
}

/// Everything that differs between our CRDs.
pub struct Crd {
    pub names: CrdNames,
    /// The root `openAPIV3Schema`.
    pub schema: Value,
    pub printer_columns: Value,
    /// `{status: {}}` plus an optional scale subresource.
    pub subresources: Value,
    /// The v1beta1 schema served beside v1 through the conversion webhook.
    pub v1beta1: Value,
}

/// The Service the CRDs send conversion reviews to as printed: the chart's, installed as
/// `nodewright` in namespace `nodewright`. The controller points them at itself (and adds its
/// certificate) when it starts, so another release name or namespace works too.
pub const WEBHOOK_SERVICE: &str = "nodewright";
pub const WEBHOOK_NAMESPACE: &str = "nodewright";
/// The webhook's port (Karpenter's `WEBHOOK_PORT` default) and path.
pub const WEBHOOK_PORT: u16 = 8443;
pub const WEBHOOK_PATH: &str = "/convert";

/// `spec.conversion` of every CRD: a webhook, reviewed as `apiextensions.k8s.io/v1`.
pub fn conversion() -> Value {
    json!({
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {
                "name": WEBHOOK_SERVICE,
                "namespace": WEBHOOK_NAMESPACE,
                "port": WEBHOOK_PORT,
                "path": WEBHOOK_PATH,
            }},
        },
    })
}

/// The root `openAPIV3Schema` around a kind's `spec` and `status` schemas.
pub fn root_schema(kind: &str, spec: Schema, status: Schema) -> Value {
    schema::object()
        .description(&format!("{kind} is the Schema for the {kind}s API"))
        .prop("apiVersion", schema::string())
        .prop("kind", schema::string())
        .prop("metadata", schema::object())
        .prop("spec", spec)
        .prop("status", status)
        .required(&["spec"])
        .into_value()
}

impl Crd {
    pub fn to_value(&self) -> Value {
        let n = &self.names;
        let mut names = json!({
            "categories": n.categories,
            "kind": n.kind,
            "listKind": format!("{}List", n.kind),
            "plural": n.plural,
            "singular": n.singular,
        });
        if !n.short_names.is_empty() {
            names["shortNames"] = json!(n.short_names);
        }
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{}.{}", n.plural, n.group)},
            "spec": {
                "group": n.group,
                "names": names,
                "scope": "Cluster",
                "conversion": conversion(),
                "versions": [{
                    "name": "v1",
                    "served": true,
                    "storage": true,
                    "additionalPrinterColumns": self.printer_columns,
                    "schema": {"openAPIV3Schema": self.schema},
                    "subresources": self.subresources,
                }, {
                    "name": "v1beta1",
                    "served": true,
                    "storage": false,
                    "additionalPrinterColumns": self.printer_columns,
                    "schema": {"openAPIV3Schema": self.v1beta1},
                    "subresources": {"status": {}},
                }],
            },
        })
    }
}

/// A printer column; `priority` 1 shows only with `-o wide`.
pub fn column(name: &str, type_: &str, json_path: &str, priority: u32) -> Value {
    let mut c = json!({"jsonPath": json_path, "name": name, "type": type_});
    if priority > 0 {
        c["priority"] = json!(priority);
    }
    c
}
