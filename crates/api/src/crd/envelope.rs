//! The `apiextensions.k8s.io/v1` CustomResourceDefinition wrapper around a v1 schema.

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
                "versions": [{
                    "name": "v1",
                    "served": true,
                    "storage": true,
                    "additionalPrinterColumns": self.printer_columns,
                    "schema": {"openAPIV3Schema": self.schema},
                    "subresources": self.subresources,
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
