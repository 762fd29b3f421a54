//! Invalid EC2NodeClasses: one per validation rule, each the valid base with a few fields
//! changed.

use serde_json::{Value, json};

use super::Case;
use crate::json::with;
use crate::valid::ec2nodeclass;

/// Every EC2NodeClass case.
pub fn ec2nodeclass_cases() -> Vec<Case> {
    rows()
        .into_iter()
        .map(|r| Case::new(r.name, r.object, r.printed.unwrap_or(vec![r.rule])))
        .collect()
}

/// For each EC2NodeClass case, by name, an error the EC2NodeClass rules
/// (`nodewright_api::aws::validate::ec2nodeclass`) report when run on their own, as
/// `path: reason`. `validate` runs the CRD schema first and drops a rule's error at a path the
/// schema already rejected, so where the two word a check differently (`should match` against
/// `must match`, say) only the schema's wording is printed; this keeps the rules' own wording
/// tested.
pub fn ec2nodeclass_rule_errors() -> Vec<(String, String)> {
    rows()
        .into_iter()
        .map(|r| (r.name.to_string(), r.rule))
        .collect()
}

/// One case: the base with `changes` applied, the rules' own error, and what `validate` prints
/// when that is not just the rules' error.
struct Row {
    name: &'static str,
    object: Value,
    rule: String,
    printed: Option<Vec<String>>,
}

/// A case `validate` reports with just the rules' error.
fn row(name: &'static str, changes: Vec<(&str, Value)>, path: &str, reason: &str) -> Row {
    Row {
        name,
        object: with(ec2nodeclass(), &changes),
        rule: format!("{path}: {reason}"),
        printed: None,
    }
}

/// A case `validate` reports with `printed`: the schema's wording, or more errors.
fn row_printing(
    name: &'static str,
    changes: Vec<(&str, Value)>,
    path: &str,
    reason: &str,
    printed: &[&str],
) -> Row {
    Row {
        printed: Some(printed.iter().map(|e| e.to_string()).collect()),
        ..row(name, changes, path, reason)
    }
}

fn many(n: usize, item: Value) -> Value {
    Value::Array(vec![item; n])
}

fn tags(n: usize) -> Value {
    Value::Object((0..n).map(|i| (format!("k{i}"), json!("v"))).collect())
}

fn rows() -> Vec<Row> {
    let primary = json!({"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"});
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
        // subnets
        row_printing(
            "subnet terms missing",
            vec![("/spec/subnetSelectorTerms", Value::Null)],
            "spec.subnetSelectorTerms",
            "required value",
            &["spec.subnetSelectorTerms: required field is missing"],
        ),
        row(
            "subnet terms empty",
            vec![("/spec/subnetSelectorTerms", json!([]))],
            "spec.subnetSelectorTerms",
            "subnetSelectorTerms cannot be empty",
        ),
        row_printing(
            "too many subnet terms",
            vec![(
                "/spec/subnetSelectorTerms",
                many(31, json!({"id": "subnet-1"})),
            )],
            "spec.subnetSelectorTerms",
            "too many: 31: must have at most 30 items",
            &["spec.subnetSelectorTerms: must have at most 30 items"],
        ),
        row(
            "empty subnet term",
            vec![("/spec/subnetSelectorTerms", json!([{}]))],
            "spec.subnetSelectorTerms[0]",
            "expected at least one, got none, ['tags', 'id']",
        ),
        row(
            "subnet id with tags",
            vec![(
                "/spec/subnetSelectorTerms",
                json!([{"id": "subnet-1", "tags": {"a": "b"}}]),
            )],
            "spec.subnetSelectorTerms[0]",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in subnetSelectorTerms",
        ),
        row_printing(
            "bad subnet id",
            vec![("/spec/subnetSelectorTerms", json!([{"id": "sn-1"}]))],
            "spec.subnetSelectorTerms[0].id",
            "should match 'subnet-[0-9a-z]+'",
            &[
                r#"spec.subnetSelectorTerms[0].id: invalid value "sn-1": must match 'subnet-[0-9a-z]+'"#,
            ],
        ),
        row(
            "empty selector tag value",
            vec![("/spec/subnetSelectorTerms", json!([{"tags": {"a": ""}}]))],
            "spec.subnetSelectorTerms[0].tags",
            "empty tag keys or values aren't supported",
        ),
        row_printing(
            "too many selector tags",
            vec![("/spec/subnetSelectorTerms", json!([{"tags": tags(21)}]))],
            "spec.subnetSelectorTerms[0].tags",
            "too many: 21: must have at most 20 items",
            &["spec.subnetSelectorTerms[0].tags: must have at most 20 properties"],
        ),
        // security groups
        row_printing(
            "sg terms missing",
            vec![("/spec/securityGroupSelectorTerms", Value::Null)],
            "spec.securityGroupSelectorTerms",
            "required value",
            &["spec.securityGroupSelectorTerms: required field is missing"],
        ),
        row(
            "sg terms empty",
            vec![("/spec/securityGroupSelectorTerms", json!([]))],
            "spec.securityGroupSelectorTerms",
            "securityGroupSelectorTerms cannot be empty",
        ),
        row_printing(
            "too many sg terms",
            vec![(
                "/spec/securityGroupSelectorTerms",
                many(31, json!({"id": "sg-1"})),
            )],
            "spec.securityGroupSelectorTerms",
            "too many: 31: must have at most 30 items",
            &["spec.securityGroupSelectorTerms: must have at most 30 items"],
        ),
        row(
            "empty sg term",
            vec![("/spec/securityGroupSelectorTerms", json!([{}]))],
            "spec.securityGroupSelectorTerms[0]",
            "expected at least one, got none, ['tags', 'id', 'name']",
        ),
        row(
            "sg id with tags",
            vec![(
                "/spec/securityGroupSelectorTerms",
                json!([{"id": "sg-1", "tags": {"a": "b"}}]),
            )],
            "spec.securityGroupSelectorTerms[0]",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in securityGroupSelectorTerms",
        ),
        row(
            "sg name with tags",
            vec![(
                "/spec/securityGroupSelectorTerms",
                json!([{"name": "n", "tags": {"a": "b"}}]),
            )],
            "spec.securityGroupSelectorTerms[0]",
            "'name' is mutually exclusive, cannot be set with a combination of other fields in securityGroupSelectorTerms",
        ),
        row_printing(
            "bad sg id",
            vec![(
                "/spec/securityGroupSelectorTerms",
                json!([{"id": "group-1"}]),
            )],
            "spec.securityGroupSelectorTerms[0].id",
            "should match 'sg-[0-9a-z]+'",
            &[
                r#"spec.securityGroupSelectorTerms[0].id: invalid value "group-1": must match 'sg-[0-9a-z]+'"#,
            ],
        ),
        // AMIs
        row_printing(
            "ami terms missing",
            vec![("/spec/amiSelectorTerms", Value::Null)],
            "spec.amiSelectorTerms",
            "required value",
            &["spec.amiSelectorTerms: required field is missing"],
        ),
        row_printing(
            "ami terms empty",
            vec![
                ("/spec/amiSelectorTerms", json!([])),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms",
            "too few: 0: must have at least 1 items",
            &["spec.amiSelectorTerms: must have at least 1 items"],
        ),
        row_printing(
            "too many ami terms",
            vec![
                ("/spec/amiSelectorTerms", many(31, json!({"id": "ami-1"}))),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms",
            "too many: 31: must have at most 30 items",
            &["spec.amiSelectorTerms: must have at most 30 items"],
        ),
        row(
            "empty ami term",
            vec![
                ("/spec/amiSelectorTerms", json!([{}])),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms[0]",
            "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
        ),
        row(
            "ami id with name",
            vec![
                (
                    "/spec/amiSelectorTerms",
                    json!([{"id": "ami-1", "name": "n"}]),
                ),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms[0]",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
        ),
        row(
            "alias with owner",
            vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "al2023@latest", "owner": "self"}]),
            )],
            "spec.amiSelectorTerms[0]",
            "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
        ),
        row(
            "alias with another term",
            vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "al2023@latest"}, {"name": "n"}]),
            )],
            "spec.amiSelectorTerms",
            "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
        ),
        row(
            "alias without version",
            vec![("/spec/amiSelectorTerms", json!([{"alias": "al2023"}]))],
            "spec.amiSelectorTerms[0].alias",
            "'alias' is improperly formatted, must match the format 'family@version'",
        ),
        row(
            "alias of unknown family",
            vec![
                (
                    "/spec/amiSelectorTerms",
                    json!([{"alias": "ubuntu@latest"}]),
                ),
                ("/spec/amiFamily", json!("Custom")),
            ],
            "spec.amiSelectorTerms[0].alias",
            "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",
        ),
        row(
            "pinned windows alias",
            vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "windows2022@v20240101"}]),
            )],
            "spec.amiSelectorTerms[0].alias",
            "windows families may only specify version 'latest'",
        ),
        row_printing(
            "alias too long",
            vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "al2023@v2024010100000000000000000"}]),
            )],
            "spec.amiSelectorTerms[0].alias",
            "too long: may not be more than 30 bytes",
            &["spec.amiSelectorTerms[0].alias: may not be longer than 30 characters"],
        ),
        row_printing(
            "bad ami id",
            vec![
                ("/spec/amiSelectorTerms", json!([{"id": "image-1"}])),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms[0].id",
            "should match 'ami-[0-9a-z]+'",
            &[
                r#"spec.amiSelectorTerms[0].id: invalid value "image-1": must match 'ami-[0-9a-z]+'"#,
            ],
        ),
        // capacity reservations and placement group
        row(
            "empty capacity reservation term",
            vec![("/spec/capacityReservationSelectorTerms", json!([{}]))],
            "spec.capacityReservationSelectorTerms[0]",
            "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
        ),
        row_printing(
            "too many capacity reservation terms",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                many(31, json!({"id": "cr-1"})),
            )],
            "spec.capacityReservationSelectorTerms",
            "too many: 31: must have at most 30 items",
            &["spec.capacityReservationSelectorTerms: must have at most 30 items"],
        ),
        row(
            "capacity reservation id with owner",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                json!([{"id": "cr-1", "ownerID": "123456789012"}]),
            )],
            "spec.capacityReservationSelectorTerms[0]",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in capacityReservationSelectorTerms",
        ),
        row_printing(
            "bad capacity reservation id",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                json!([{"id": "cr_1"}]),
            )],
            "spec.capacityReservationSelectorTerms[0].id",
            "should match '^cr-[0-9a-z]+$'",
            &[
                r#"spec.capacityReservationSelectorTerms[0].id: invalid value "cr_1": must match '^cr-[0-9a-z]+$'"#,
            ],
        ),
        row_printing(
            "bad owner id",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                json!([{"tags": {"a": "b"}, "ownerID": "1234"}]),
            )],
            "spec.capacityReservationSelectorTerms[0].ownerID",
            "should match '^[0-9]{12}$'",
            &[
                r#"spec.capacityReservationSelectorTerms[0].ownerID: invalid value "1234": must match '^[0-9]{12}$'"#,
            ],
        ),
        row_printing(
            "bad match criteria",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                json!([{"instanceMatchCriteria": "any"}]),
            )],
            "spec.capacityReservationSelectorTerms[0].instanceMatchCriteria",
            r#"unsupported value: "any": supported values: "open", "targeted""#,
            &[
                r#"spec.capacityReservationSelectorTerms[0].instanceMatchCriteria: unsupported value "any": supported values: "open", "targeted""#,
            ],
        ),
        row(
            "placement group with neither",
            vec![("/spec/placementGroupSelector", json!({}))],
            "spec.placementGroupSelector",
            "must specify exactly one of ['name', 'id']",
        ),
        row(
            "placement group with both",
            vec![(
                "/spec/placementGroupSelector",
                json!({"name": "a", "id": "pg-1"}),
            )],
            "spec.placementGroupSelector",
            "must specify exactly one of ['name', 'id']",
        ),
        row_printing(
            "bad placement group id",
            vec![("/spec/placementGroupSelector", json!({"id": "pg_1"}))],
            "spec.placementGroupSelector.id",
            "should match '^pg-[0-9a-z]+$'",
            &[
                r#"spec.placementGroupSelector.id: invalid value "pg_1": must match '^pg-[0-9a-z]+$'"#,
            ],
        ),
        row_printing(
            "negative ip prefix count",
            vec![("/spec/ipPrefixCount", json!(-1))],
            "spec.ipPrefixCount",
            "should be greater than or equal to 0",
            &["spec.ipPrefixCount: must be greater than or equal to 0"],
        ),
        // tags
        row(
            "empty tag key",
            vec![("/spec/tags", json!({"": "x"}))],
            "spec.tags",
            "empty tag keys aren't supported",
        ),
        row(
            "cluster-name tag",
            vec![("/spec/tags", json!({"eks:eks-cluster-name": "x"}))],
            "spec.tags[eks:eks-cluster-name]",
            "tag contains a restricted tag matching eks:eks-cluster-name",
        ),
        row(
            "cluster ownership tag",
            vec![("/spec/tags", json!({"kubernetes.io/cluster/c": "owned"}))],
            "spec.tags[kubernetes.io/cluster/c]",
            "tag contains a restricted tag matching kubernetes.io/cluster/",
        ),
        row(
            "nodepool tag",
            vec![("/spec/tags", json!({"karpenter.sh/nodepool": "x"}))],
            "spec.tags[karpenter.sh/nodepool]",
            "tag contains a restricted tag matching karpenter.sh/nodepool",
        ),
        row(
            "nodeclaim tag",
            vec![("/spec/tags", json!({"karpenter.sh/nodeclaim": "x"}))],
            "spec.tags[karpenter.sh/nodeclaim]",
            "tag contains a restricted tag matching karpenter.sh/nodeclaim",
        ),
        row(
            "nodeclass tag",
            vec![("/spec/tags", json!({"karpenter.k8s.aws/ec2nodeclass": "x"}))],
            "spec.tags[karpenter.k8s.aws/ec2nodeclass]",
            "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",
        ),
        // kubelet
        row_printing(
            "negative maxPods",
            vec![("/spec/kubelet/maxPods", json!(-1))],
            "spec.kubelet.maxPods",
            "should be greater than or equal to 0",
            &["spec.kubelet.maxPods: must be greater than or equal to 0"],
        ),
        row_printing(
            "negative podsPerCore",
            vec![("/spec/kubelet/podsPerCore", json!(-1))],
            "spec.kubelet.podsPerCore",
            "should be greater than or equal to 0",
            &["spec.kubelet.podsPerCore: must be greater than or equal to 0"],
        ),
        row(
            "unknown systemReserved key",
            vec![("/spec/kubelet/systemReserved", json!({"gpu": "1"}))],
            "spec.kubelet.systemReserved",
            "valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']",
        ),
        row(
            "negative kubeReserved",
            vec![("/spec/kubelet/kubeReserved", json!({"cpu": "-1"}))],
            "spec.kubelet.kubeReserved",
            "kubeReserved value cannot be a negative resource quantity",
        ),
        row_printing(
            "kubeReserved not a quantity",
            vec![("/spec/kubelet/kubeReserved", json!({"memory": "lots"}))],
            "spec.kubelet.kubeReserved[memory]",
            r"should match '^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$'",
            &[
                r#"spec.kubelet.kubeReserved[memory]: invalid value "lots": must match '^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$'"#,
            ],
        ),
        row(
            "unknown evictionHard signal",
            vec![("/spec/kubelet/evictionHard", json!({"memory.free": "1%"}))],
            "spec.kubelet.evictionHard",
            "valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",
        ),
        row_printing(
            "unknown evictionSoftGracePeriod signal",
            vec![
                (
                    "/spec/kubelet/evictionSoft",
                    json!({"memory.available": "1%"}),
                ),
                (
                    "/spec/kubelet/evictionSoftGracePeriod",
                    json!({"memory.available": "1m", "cpu": "1m"}),
                ),
            ],
            "spec.kubelet.evictionSoftGracePeriod",
            "valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",
            &[
                "spec.kubelet.evictionSoftGracePeriod: valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",
                "spec.kubelet: evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
            ],
        ),
        row_printing(
            "evictionHard not a threshold",
            vec![(
                "/spec/kubelet/evictionHard",
                json!({"memory.available": "101%"}),
            )],
            "spec.kubelet.evictionHard[memory.available]",
            r"should match '^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$'",
            &[
                r#"spec.kubelet.evictionHard[memory.available]: invalid value "101%": must match '^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$'"#,
            ],
        ),
        row(
            "evictionSoft without grace period",
            vec![(
                "/spec/kubelet/evictionSoft",
                json!({"memory.available": "1%"}),
            )],
            "spec.kubelet",
            "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
        ),
        row(
            "grace period without evictionSoft",
            vec![(
                "/spec/kubelet/evictionSoftGracePeriod",
                json!({"memory.available": "1m"}),
            )],
            "spec.kubelet",
            "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
        ),
        row_printing(
            "image GC high above 100",
            vec![("/spec/kubelet/imageGCHighThresholdPercent", json!(101))],
            "spec.kubelet.imageGCHighThresholdPercent",
            "should be less than or equal to 100",
            &["spec.kubelet.imageGCHighThresholdPercent: must be less than or equal to 100"],
        ),
        row_printing(
            "image GC low below 0",
            vec![("/spec/kubelet/imageGCLowThresholdPercent", json!(-1))],
            "spec.kubelet.imageGCLowThresholdPercent",
            "should be greater than or equal to 0",
            &["spec.kubelet.imageGCLowThresholdPercent: must be greater than or equal to 0"],
        ),
        row(
            "image GC high not above low",
            vec![
                ("/spec/kubelet/imageGCHighThresholdPercent", json!(50)),
                ("/spec/kubelet/imageGCLowThresholdPercent", json!(50)),
            ],
            "spec.kubelet",
            "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
        ),
        row(
            "registerWithTaints set",
            vec![("/spec/kubelet/registerWithTaints", json!([]))],
            "spec.kubelet.registerWithTaints",
            "registerWithTaints is managed by karpenter and cannot be set in spec.kubelet",
        ),
        // block devices
        row_printing(
            "too many block devices",
            vec![(
                "/spec/blockDeviceMappings",
                many(51, json!({"deviceName": "/dev/x"})),
            )],
            "spec.blockDeviceMappings",
            "too many: 51: must have at most 50 items",
            &["spec.blockDeviceMappings: must have at most 50 items"],
        ),
        row(
            "two root volumes",
            vec![(
                "/spec/blockDeviceMappings",
                many(2, json!({"rootVolume": true})),
            )],
            "spec.blockDeviceMappings",
            "must have only one blockDeviceMappings with rootVolume",
        ),
        row(
            "ebs without size or snapshot",
            vec![(
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"volumeType": "gp3"}}]),
            )],
            "spec.blockDeviceMappings[0].ebs",
            "snapshotID or volumeSize must be defined",
        ),
        row_printing(
            "volume too large",
            vec![(
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"volumeSize": "65T"}}]),
            )],
            "spec.blockDeviceMappings[0].ebs.volumeSize",
            r"should match '^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$'",
            &[
                r#"spec.blockDeviceMappings[0].ebs.volumeSize: invalid value "65T": must match '^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$'"#,
            ],
        ),
        row(
            "integer volume size",
            vec![(
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"volumeSize": 20}}]),
            )],
            "spec.blockDeviceMappings[0].ebs.volumeSize",
            "must be of type string, got integer",
        ),
        row_printing(
            "unknown volume type",
            vec![(
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"volumeSize": "20Gi", "volumeType": "gp4"}}]),
            )],
            "spec.blockDeviceMappings[0].ebs.volumeType",
            r#"unsupported value: "gp4": supported values: "standard", "io1", "io2", "gp2", "sc1", "st1", "gp3""#,
            &[
                r#"spec.blockDeviceMappings[0].ebs.volumeType: unsupported value "gp4": supported values: "standard", "io1", "io2", "gp2", "sc1", "st1", "gp3""#,
            ],
        ),
        row_printing(
            "initialization rate too low",
            vec![(
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"snapshotID": "snap-1", "volumeInitializationRate": 50}}]),
            )],
            "spec.blockDeviceMappings[0].ebs.volumeInitializationRate",
            "should be greater than or equal to 100",
            &[
                "spec.blockDeviceMappings[0].ebs.volumeInitializationRate: must be greater than or equal to 100",
            ],
        ),
        row(
            "initialization rate without snapshot",
            vec![(
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"volumeSize": "20Gi", "volumeInitializationRate": 200}}]),
            )],
            "spec.blockDeviceMappings[0].ebs",
            "volumeInitializationRate requires snapshotID",
        ),
        row_printing(
            "unknown instance store policy",
            vec![("/spec/instanceStorePolicy", json!("RAID1"))],
            "spec.instanceStorePolicy",
            r#"unsupported value: "RAID1": supported values: "RAID0""#,
            &[r#"spec.instanceStorePolicy: unsupported value "RAID1": supported values: "RAID0""#],
        ),
        // network interfaces
        row(
            "no primary interface",
            vec![(
                "/spec/networkInterfaces",
                json!([{"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "interface"}]),
            )],
            "spec.networkInterfaces",
            "must include the primary network interface (networkCardIndex 0, deviceIndex 0, interfaceType 'interface')",
        ),
        row(
            "duplicate interface",
            vec![("/spec/networkInterfaces", many(2, primary.clone()))],
            "spec.networkInterfaces",
            "networkCardIndex and deviceIndex pairs must be unique",
        ),
        row(
            "two efa-only on one card",
            vec![(
                "/spec/networkInterfaces",
                json!([primary.clone(), {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"}, {"networkCardIndex": 1, "deviceIndex": 1, "interfaceType": "efa-only"}]),
            )],
            "spec.networkInterfaces",
            "at most one 'efa-only' interface is allowed per network card",
        ),
        row_printing(
            "unknown interface type",
            vec![(
                "/spec/networkInterfaces",
                json!([primary.clone(), {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa"}]),
            )],
            "spec.networkInterfaces[1].interfaceType",
            r#"unsupported value: "efa": supported values: "interface", "efa-only""#,
            &[
                r#"spec.networkInterfaces[1].interfaceType: unsupported value "efa": supported values: "interface", "efa-only""#,
            ],
        ),
        row_printing(
            "negative card index",
            vec![(
                "/spec/networkInterfaces",
                json!([primary.clone(), {"networkCardIndex": -1, "deviceIndex": 0, "interfaceType": "interface"}]),
            )],
            "spec.networkInterfaces[1].networkCardIndex",
            "should be greater than or equal to 0",
            &["spec.networkInterfaces[1].networkCardIndex: must be greater than or equal to 0"],
        ),
        row_printing(
            "interface without device index",
            vec![(
                "/spec/networkInterfaces",
                json!([primary.clone(), {"networkCardIndex": 1, "interfaceType": "interface"}]),
            )],
            "spec.networkInterfaces[1].deviceIndex",
            "required value",
            &["spec.networkInterfaces[1].deviceIndex: required field is missing"],
        ),
        row_printing(
            "too many interfaces",
            vec![("/spec/networkInterfaces", many(151, primary.clone()))],
            "spec.networkInterfaces",
            "too many: 151: must have at most 150 items",
            &["spec.networkInterfaces: must have at most 150 items"],
        ),
        // metadata options
        row_printing(
            "unknown http endpoint",
            vec![("/spec/metadataOptions/httpEndpoint", json!("on"))],
            "spec.metadataOptions.httpEndpoint",
            r#"unsupported value: "on": supported values: "enabled", "disabled""#,
            &[
                r#"spec.metadataOptions.httpEndpoint: unsupported value "on": supported values: "enabled", "disabled""#,
            ],
        ),
        row_printing(
            "unknown ipv6 setting",
            vec![("/spec/metadataOptions/httpProtocolIPv6", json!("yes"))],
            "spec.metadataOptions.httpProtocolIPv6",
            r#"unsupported value: "yes": supported values: "enabled", "disabled""#,
            &[
                r#"spec.metadataOptions.httpProtocolIPv6: unsupported value "yes": supported values: "enabled", "disabled""#,
            ],
        ),
        row_printing(
            "hop limit 0",
            vec![("/spec/metadataOptions/httpPutResponseHopLimit", json!(0))],
            "spec.metadataOptions.httpPutResponseHopLimit",
            "should be greater than or equal to 1",
            &["spec.metadataOptions.httpPutResponseHopLimit: must be greater than or equal to 1"],
        ),
        row_printing(
            "hop limit 65",
            vec![("/spec/metadataOptions/httpPutResponseHopLimit", json!(65))],
            "spec.metadataOptions.httpPutResponseHopLimit",
            "should be less than or equal to 64",
            &["spec.metadataOptions.httpPutResponseHopLimit: must be less than or equal to 64"],
        ),
        row_printing(
            "unknown http tokens",
            vec![("/spec/metadataOptions/httpTokens", json!("maybe"))],
            "spec.metadataOptions.httpTokens",
            r#"unsupported value: "maybe": supported values: "required", "optional""#,
            &[
                r#"spec.metadataOptions.httpTokens: unsupported value "maybe": supported values: "required", "optional""#,
            ],
        ),
        // connection tracking, cpu options
        row(
            "empty connection tracking",
            vec![("/spec/connectionTracking", json!({}))],
            "spec.connectionTracking",
            "expected at least one, got none, ['tcpEstablishedTimeout', 'udpStreamTimeout', 'udpTimeout']",
        ),
        row_printing(
            "tcp timeout too short",
            vec![("/spec/connectionTracking/tcpEstablishedTimeout", json!(59))],
            "spec.connectionTracking.tcpEstablishedTimeout",
            "should be greater than or equal to 60",
            &["spec.connectionTracking.tcpEstablishedTimeout: must be greater than or equal to 60"],
        ),
        row_printing(
            "udp stream timeout too long",
            vec![("/spec/connectionTracking/udpStreamTimeout", json!(181))],
            "spec.connectionTracking.udpStreamTimeout",
            "should be less than or equal to 180",
            &["spec.connectionTracking.udpStreamTimeout: must be less than or equal to 180"],
        ),
        row_printing(
            "udp timeout too short",
            vec![("/spec/connectionTracking/udpTimeout", json!(29))],
            "spec.connectionTracking.udpTimeout",
            "should be greater than or equal to 30",
            &["spec.connectionTracking.udpTimeout: must be greater than or equal to 30"],
        ),
        row_printing(
            "unknown nested virtualization",
            vec![("/spec/cpuOptions/nestedVirtualization", json!("on"))],
            "spec.cpuOptions.nestedVirtualization",
            r#"unsupported value: "on": supported values: "enabled", "disabled""#,
            &[
                r#"spec.cpuOptions.nestedVirtualization: unsupported value "on": supported values: "enabled", "disabled""#,
            ],
        ),
    ]
}
