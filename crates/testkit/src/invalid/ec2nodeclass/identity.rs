//! Invalid EC2NodeClasses: the node role or instance profile, and the AMI family.

use super::*;

/// The role or instance profile, and `amiFamily` with its aliases.
pub(super) fn identity_rows() -> Vec<Row> {
    vec![
        // role / instanceProfile
        row(
            "both role and profile",
            vec![("/spec/instanceProfile", json!("p"))],
            "spec",
            "must specify exactly one of ['role', 'instanceProfile']",
        ),
        row(
            "neither role nor profile",
            vec![("/spec/role", Value::Null)],
            "spec",
            "must specify exactly one of ['role', 'instanceProfile']",
        ),
        row(
            "empty role",
            vec![("/spec/role", json!(""))],
            "spec.role",
            "role cannot be empty",
        ),
        row(
            "empty profile",
            vec![
                ("/spec/role", Value::Null),
                ("/spec/instanceProfile", json!("")),
            ],
            "spec.instanceProfile",
            "instanceProfile cannot be empty",
        ),
        // amiFamily and aliases
        row_printing(
            "unknown family",
            vec![("/spec/amiFamily", json!("Ubuntu"))],
            "spec.amiFamily",
            r#"unsupported value: "Ubuntu": supported values: "AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025""#,
            &[
                r#"spec.amiFamily: unsupported value "Ubuntu": supported values: "AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025""#,
                "spec: if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",
            ],
        ),
        row(
            "family disagrees with al2023 alias",
            vec![("/spec/amiFamily", json!("AL2"))],
            "spec",
            "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",
        ),
        row(
            "family disagrees with al2 alias",
            vec![
                ("/spec/amiSelectorTerms", json!([{"alias": "al2@latest"}])),
                ("/spec/amiFamily", json!("Bottlerocket")),
            ],
            "spec",
            "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias",
        ),
        row(
            "family disagrees with bottlerocket alias",
            vec![
                (
                    "/spec/amiSelectorTerms",
                    json!([{"alias": "bottlerocket@latest"}]),
                ),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec",
            "if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias",
        ),
        row(
            "family disagrees with windows2019 alias",
            vec![
                (
                    "/spec/amiSelectorTerms",
                    json!([{"alias": "windows2019@latest"}]),
                ),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec",
            "if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias",
        ),
        row(
            "family disagrees with windows2022 alias",
            vec![
                (
                    "/spec/amiSelectorTerms",
                    json!([{"alias": "windows2022@latest"}]),
                ),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec",
            "if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias",
        ),
        row(
            "family disagrees with windows2025 alias",
            vec![
                (
                    "/spec/amiSelectorTerms",
                    json!([{"alias": "windows2025@latest"}]),
                ),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec",
            "if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias",
        ),
        row(
            "no alias and no family",
            vec![("/spec/amiSelectorTerms", json!([{"id": "ami-0123"}]))],
            "spec",
            "must specify amiFamily if amiSelectorTerms does not contain an alias",
        ),
    ]
}
