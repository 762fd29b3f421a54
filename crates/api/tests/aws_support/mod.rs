//! The invalid-object table shared by the offline-validation and CRD-schema tests: a valid
//! base EC2NodeClass and, per rule, the change that breaks it with the expected error.

#![allow(dead_code)]

use serde_json::{Value, json};

pub fn base() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "KarpenterNodeRole",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
        }
    })
}

pub fn parse(v: &Value) -> nodewright_api::aws::v1::EC2NodeClass {
    serde_json::from_value(v.clone()).expect("test object deserializes")
}

/// Sets (or, with `Value::Null`, removes) the field at a JSON pointer, creating parents.
pub fn set(v: &mut Value, pointer: &str, new: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let mut cur = v;
    for part in parent.split('/').skip(1) {
        cur = cur
            .as_object_mut()
            .unwrap()
            .entry(part.to_string())
            .or_insert_with(|| json!({}));
    }
    let obj = cur.as_object_mut().unwrap();
    if new.is_null() {
        obj.remove(key);
    } else {
        obj.insert(key.to_string(), new);
    }
}

pub fn many(n: usize, item: Value) -> Value {
    Value::Array(vec![item; n])
}

pub fn tags(n: usize) -> Value {
    Value::Object((0..n).map(|i| (format!("k{i}"), json!("v"))).collect())
}

/// (what is broken, changes as (pointer, value), expected path, expected message).
pub type Case = (
    &'static str,
    Vec<(&'static str, Value)>,
    &'static str,
    &'static str,
);

pub fn cases() -> Vec<Case> {
    let primary = json!({"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"});
    vec![
        // role / instanceProfile
        (
            "both role and profile",
            vec![("/spec/instanceProfile", json!("p"))],
            "spec",
            "must specify exactly one of ['role', 'instanceProfile']",
        ),
        (
            "neither role nor profile",
            vec![("/spec/role", Value::Null)],
            "spec",
            "must specify exactly one of ['role', 'instanceProfile']",
        ),
        (
            "empty role",
            vec![("/spec/role", json!(""))],
            "spec.role",
            "role cannot be empty",
        ),
        (
            "empty profile",
            vec![
                ("/spec/role", Value::Null),
                ("/spec/instanceProfile", json!("")),
            ],
            "spec.instanceProfile",
            "instanceProfile cannot be empty",
        ),
        // amiFamily and aliases
        (
            "unknown family",
            vec![("/spec/amiFamily", json!("Ubuntu"))],
            "spec.amiFamily",
            r#"unsupported value: "Ubuntu": supported values: "AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025""#,
        ),
        (
            "family disagrees with al2023 alias",
            vec![("/spec/amiFamily", json!("AL2"))],
            "spec",
            "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",
        ),
        (
            "family disagrees with al2 alias",
            vec![
                ("/spec/amiSelectorTerms", json!([{"alias": "al2@latest"}])),
                ("/spec/amiFamily", json!("Bottlerocket")),
            ],
            "spec",
            "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias",
        ),
        (
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
        (
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
        (
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
        (
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
        (
            "no alias and no family",
            vec![("/spec/amiSelectorTerms", json!([{"id": "ami-0123"}]))],
            "spec",
            "must specify amiFamily if amiSelectorTerms does not contain an alias",
        ),
        // subnets
        (
            "subnet terms missing",
            vec![("/spec/subnetSelectorTerms", Value::Null)],
            "spec.subnetSelectorTerms",
            "required value",
        ),
        (
            "subnet terms empty",
            vec![("/spec/subnetSelectorTerms", json!([]))],
            "spec.subnetSelectorTerms",
            "subnetSelectorTerms cannot be empty",
        ),
        (
            "too many subnet terms",
            vec![(
                "/spec/subnetSelectorTerms",
                many(31, json!({"id": "subnet-1"})),
            )],
            "spec.subnetSelectorTerms",
            "too many: 31: must have at most 30 items",
        ),
        (
            "empty subnet term",
            vec![("/spec/subnetSelectorTerms", json!([{}]))],
            "spec.subnetSelectorTerms[0]",
            "expected at least one, got none, ['tags', 'id']",
        ),
        (
            "subnet id with tags",
            vec![(
                "/spec/subnetSelectorTerms",
                json!([{"id": "subnet-1", "tags": {"a": "b"}}]),
            )],
            "spec.subnetSelectorTerms[0]",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in subnetSelectorTerms",
        ),
        (
            "bad subnet id",
            vec![("/spec/subnetSelectorTerms", json!([{"id": "sn-1"}]))],
            "spec.subnetSelectorTerms[0].id",
            "should match 'subnet-[0-9a-z]+'",
        ),
        (
            "empty selector tag value",
            vec![("/spec/subnetSelectorTerms", json!([{"tags": {"a": ""}}]))],
            "spec.subnetSelectorTerms[0].tags",
            "empty tag keys or values aren't supported",
        ),
        (
            "too many selector tags",
            vec![("/spec/subnetSelectorTerms", json!([{"tags": tags(21)}]))],
            "spec.subnetSelectorTerms[0].tags",
            "too many: 21: must have at most 20 items",
        ),
        // security groups
        (
            "sg terms missing",
            vec![("/spec/securityGroupSelectorTerms", Value::Null)],
            "spec.securityGroupSelectorTerms",
            "required value",
        ),
        (
            "sg terms empty",
            vec![("/spec/securityGroupSelectorTerms", json!([]))],
            "spec.securityGroupSelectorTerms",
            "securityGroupSelectorTerms cannot be empty",
        ),
        (
            "too many sg terms",
            vec![(
                "/spec/securityGroupSelectorTerms",
                many(31, json!({"id": "sg-1"})),
            )],
            "spec.securityGroupSelectorTerms",
            "too many: 31: must have at most 30 items",
        ),
        (
            "empty sg term",
            vec![("/spec/securityGroupSelectorTerms", json!([{}]))],
            "spec.securityGroupSelectorTerms[0]",
            "expected at least one, got none, ['tags', 'id', 'name']",
        ),
        (
            "sg id with tags",
            vec![(
                "/spec/securityGroupSelectorTerms",
                json!([{"id": "sg-1", "tags": {"a": "b"}}]),
            )],
            "spec.securityGroupSelectorTerms[0]",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in securityGroupSelectorTerms",
        ),
        (
            "sg name with tags",
            vec![(
                "/spec/securityGroupSelectorTerms",
                json!([{"name": "n", "tags": {"a": "b"}}]),
            )],
            "spec.securityGroupSelectorTerms[0]",
            "'name' is mutually exclusive, cannot be set with a combination of other fields in securityGroupSelectorTerms",
        ),
        (
            "bad sg id",
            vec![(
                "/spec/securityGroupSelectorTerms",
                json!([{"id": "group-1"}]),
            )],
            "spec.securityGroupSelectorTerms[0].id",
            "should match 'sg-[0-9a-z]+'",
        ),
        // AMIs
        (
            "ami terms missing",
            vec![("/spec/amiSelectorTerms", Value::Null)],
            "spec.amiSelectorTerms",
            "required value",
        ),
        (
            "ami terms empty",
            vec![
                ("/spec/amiSelectorTerms", json!([])),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms",
            "too few: 0: must have at least 1 items",
        ),
        (
            "too many ami terms",
            vec![
                ("/spec/amiSelectorTerms", many(31, json!({"id": "ami-1"}))),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms",
            "too many: 31: must have at most 30 items",
        ),
        (
            "empty ami term",
            vec![
                ("/spec/amiSelectorTerms", json!([{}])),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms[0]",
            "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
        ),
        (
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
        (
            "alias with owner",
            vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "al2023@latest", "owner": "self"}]),
            )],
            "spec.amiSelectorTerms[0]",
            "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
        ),
        (
            "alias with another term",
            vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "al2023@latest"}, {"name": "n"}]),
            )],
            "spec.amiSelectorTerms",
            "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
        ),
        (
            "alias without version",
            vec![("/spec/amiSelectorTerms", json!([{"alias": "al2023"}]))],
            "spec.amiSelectorTerms[0].alias",
            "'alias' is improperly formatted, must match the format 'family@version'",
        ),
        (
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
        (
            "pinned windows alias",
            vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "windows2022@v20240101"}]),
            )],
            "spec.amiSelectorTerms[0].alias",
            "windows families may only specify version 'latest'",
        ),
        (
            "alias too long",
            vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "al2023@v2024010100000000000000000"}]),
            )],
            "spec.amiSelectorTerms[0].alias",
            "too long: may not be more than 30 bytes",
        ),
        (
            "bad ami id",
            vec![
                ("/spec/amiSelectorTerms", json!([{"id": "image-1"}])),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms[0].id",
            "should match 'ami-[0-9a-z]+'",
        ),
        // capacity reservations and placement group
        (
            "empty capacity reservation term",
            vec![("/spec/capacityReservationSelectorTerms", json!([{}]))],
            "spec.capacityReservationSelectorTerms[0]",
            "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
        ),
        (
            "too many capacity reservation terms",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                many(31, json!({"id": "cr-1"})),
            )],
            "spec.capacityReservationSelectorTerms",
            "too many: 31: must have at most 30 items",
        ),
        (
            "capacity reservation id with owner",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                json!([{"id": "cr-1", "ownerID": "123456789012"}]),
            )],
            "spec.capacityReservationSelectorTerms[0]",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in capacityReservationSelectorTerms",
        ),
        (
            "bad capacity reservation id",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                json!([{"id": "cr_1"}]),
            )],
            "spec.capacityReservationSelectorTerms[0].id",
            "should match '^cr-[0-9a-z]+$'",
        ),
        (
            "bad owner id",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                json!([{"tags": {"a": "b"}, "ownerID": "1234"}]),
            )],
            "spec.capacityReservationSelectorTerms[0].ownerID",
            "should match '^[0-9]{12}$'",
        ),
        (
            "bad match criteria",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                json!([{"instanceMatchCriteria": "any"}]),
            )],
            "spec.capacityReservationSelectorTerms[0].instanceMatchCriteria",
            r#"unsupported value: "any": supported values: "open", "targeted""#,
        ),
        (
            "placement group with neither",
            vec![("/spec/placementGroupSelector", json!({}))],
            "spec.placementGroupSelector",
            "must specify exactly one of ['name', 'id']",
        ),
        (
            "placement group with both",
            vec![(
                "/spec/placementGroupSelector",
                json!({"name": "a", "id": "pg-1"}),
            )],
            "spec.placementGroupSelector",
            "must specify exactly one of ['name', 'id']",
        ),
        (
            "bad placement group id",
            vec![("/spec/placementGroupSelector", json!({"id": "pg_1"}))],
            "spec.placementGroupSelector.id",
            "should match '^pg-[0-9a-z]+$'",
        ),
        (
            "negative ip prefix count",
            vec![("/spec/ipPrefixCount", json!(-1))],
            "spec.ipPrefixCount",
            "should be greater than or equal to 0",
        ),
        // tags
        (
            "empty tag key",
            vec![("/spec/tags", json!({"": "x"}))],
            "spec.tags",
            "empty tag keys aren't supported",
        ),
        (
            "cluster-name tag",
            vec![("/spec/tags", json!({"eks:eks-cluster-name": "x"}))],
            "spec.tags[eks:eks-cluster-name]",
            "tag contains a restricted tag matching eks:eks-cluster-name",
        ),
        (
            "cluster ownership tag",
            vec![("/spec/tags", json!({"kubernetes.io/cluster/c": "owned"}))],
            "spec.tags[kubernetes.io/cluster/c]",
            "tag contains a restricted tag matching kubernetes.io/cluster/",
        ),
        (
            "nodepool tag",
            vec![("/spec/tags", json!({"karpenter.sh/nodepool": "x"}))],
            "spec.tags[karpenter.sh/nodepool]",
            "tag contains a restricted tag matching karpenter.sh/nodepool",
        ),
        (
            "nodeclaim tag",
            vec![("/spec/tags", json!({"karpenter.sh/nodeclaim": "x"}))],
            "spec.tags[karpenter.sh/nodeclaim]",
            "tag contains a restricted tag matching karpenter.sh/nodeclaim",
        ),
        (
            "nodeclass tag",
            vec![("/spec/tags", json!({"karpenter.k8s.aws/ec2nodeclass": "x"}))],
            "spec.tags[karpenter.k8s.aws/ec2nodeclass]",
            "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",
        ),
        // kubelet
        (
            "negative maxPods",
            vec![("/spec/kubelet/maxPods", json!(-1))],
            "spec.kubelet.maxPods",
            "should be greater than or equal to 0",
        ),
        (
            "negative podsPerCore",
            vec![("/spec/kubelet/podsPerCore", json!(-1))],
            "spec.kubelet.podsPerCore",
            "should be greater than or equal to 0",
        ),
        (
            "unknown systemReserved key",
            vec![("/spec/kubelet/systemReserved", json!({"gpu": "1"}))],
            "spec.kubelet.systemReserved",
            "valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']",
        ),
        (
            "negative kubeReserved",
            vec![("/spec/kubelet/kubeReserved", json!({"cpu": "-1"}))],
            "spec.kubelet.kubeReserved",
            "kubeReserved value cannot be a negative resource quantity",
        ),
        (
            "kubeReserved not a quantity",
            vec![("/spec/kubelet/kubeReserved", json!({"memory": "lots"}))],
            "spec.kubelet.kubeReserved[memory]",
            r"should match '^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$'",
        ),
        (
            "unknown evictionHard signal",
            vec![("/spec/kubelet/evictionHard", json!({"memory.free": "1%"}))],
            "spec.kubelet.evictionHard",
            "valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",
        ),
        (
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
        ),
        (
            "evictionHard not a threshold",
            vec![(
                "/spec/kubelet/evictionHard",
                json!({"memory.available": "101%"}),
            )],
            "spec.kubelet.evictionHard[memory.available]",
            r"should match '^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$'",
        ),
        (
            "evictionSoft without grace period",
            vec![(
                "/spec/kubelet/evictionSoft",
                json!({"memory.available": "1%"}),
            )],
            "spec.kubelet",
            "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
        ),
        (
            "grace period without evictionSoft",
            vec![(
                "/spec/kubelet/evictionSoftGracePeriod",
                json!({"memory.available": "1m"}),
            )],
            "spec.kubelet",
            "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
        ),
        (
            "image GC high above 100",
            vec![("/spec/kubelet/imageGCHighThresholdPercent", json!(101))],
            "spec.kubelet.imageGCHighThresholdPercent",
            "should be less than or equal to 100",
        ),
        (
            "image GC low below 0",
            vec![("/spec/kubelet/imageGCLowThresholdPercent", json!(-1))],
            "spec.kubelet.imageGCLowThresholdPercent",
            "should be greater than or equal to 0",
        ),
        (
            "image GC high not above low",
            vec![
                ("/spec/kubelet/imageGCHighThresholdPercent", json!(50)),
                ("/spec/kubelet/imageGCLowThresholdPercent", json!(50)),
            ],
            "spec.kubelet",
            "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
        ),
        (
            "registerWithTaints set",
            vec![("/spec/kubelet/registerWithTaints", json!([]))],
            "spec.kubelet.registerWithTaints",
            "registerWithTaints is managed by karpenter and cannot be set in spec.kubelet",
        ),
        // block devices
        (
            "too many block devices",
            vec![(
                "/spec/blockDeviceMappings",
                many(51, json!({"deviceName": "/dev/x"})),
            )],
            "spec.blockDeviceMappings",
            "too many: 51: must have at most 50 items",
        ),
        (
            "two root volumes",
            vec![(
                "/spec/blockDeviceMappings",
                many(2, json!({"rootVolume": true})),
            )],
            "spec.blockDeviceMappings",
            "must have only one blockDeviceMappings with rootVolume",
        ),
        (
            "ebs without size or snapshot",
            vec![(
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"volumeType": "gp3"}}]),
            )],
            "spec.blockDeviceMappings[0].ebs",
            "snapshotID or volumeSize must be defined",
        ),
        (
            "volume too large",
            vec![(
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"volumeSize": "65T"}}]),
            )],
            "spec.blockDeviceMappings[0].ebs.volumeSize",
            r"should match '^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$'",
        ),
        (
            "integer volume size",
            vec![(
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"volumeSize": 20}}]),
            )],
            "spec.blockDeviceMappings[0].ebs.volumeSize",
            "must be of type string, got integer",
        ),
        (
            "unknown volume type",
            vec![(
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"volumeSize": "20Gi", "volumeType": "gp4"}}]),
            )],
            "spec.blockDeviceMappings[0].ebs.volumeType",
            r#"unsupported value: "gp4": supported values: "standard", "io1", "io2", "gp2", "sc1", "st1", "gp3""#,
        ),
        (
            "initialization rate too low",
            vec![(
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"snapshotID": "snap-1", "volumeInitializationRate": 50}}]),
            )],
            "spec.blockDeviceMappings[0].ebs.volumeInitializationRate",
            "should be greater than or equal to 100",
        ),
        (
            "initialization rate without snapshot",
            vec![(
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"volumeSize": "20Gi", "volumeInitializationRate": 200}}]),
            )],
            "spec.blockDeviceMappings[0].ebs",
            "volumeInitializationRate requires snapshotID",
        ),
        (
            "unknown instance store policy",
            vec![("/spec/instanceStorePolicy", json!("RAID1"))],
            "spec.instanceStorePolicy",
            r#"unsupported value: "RAID1": supported values: "RAID0""#,
        ),
        // network interfaces
        (
            "no primary interface",
            vec![(
                "/spec/networkInterfaces",
                json!([{"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "interface"}]),
            )],
            "spec.networkInterfaces",
            "must include the primary network interface (networkCardIndex 0, deviceIndex 0, interfaceType 'interface')",
        ),
        (
            "duplicate interface",
            vec![("/spec/networkInterfaces", many(2, primary.clone()))],
            "spec.networkInterfaces",
            "networkCardIndex and deviceIndex pairs must be unique",
        ),
        (
            "two efa-only on one card",
            vec![(
                "/spec/networkInterfaces",
                json!([primary.clone(), {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"}, {"networkCardIndex": 1, "deviceIndex": 1, "interfaceType": "efa-only"}]),
            )],
            "spec.networkInterfaces",
            "at most one 'efa-only' interface is allowed per network card",
        ),
        (
            "unknown interface type",
            vec![(
                "/spec/networkInterfaces",
                json!([primary.clone(), {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa"}]),
            )],
            "spec.networkInterfaces[1].interfaceType",
            r#"unsupported value: "efa": supported values: "interface", "efa-only""#,
        ),
        (
            "negative card index",
            vec![(
                "/spec/networkInterfaces",
                json!([primary.clone(), {"networkCardIndex": -1, "deviceIndex": 0, "interfaceType": "interface"}]),
            )],
            "spec.networkInterfaces[1].networkCardIndex",
            "should be greater than or equal to 0",
        ),
        (
            "interface without device index",
            vec![(
                "/spec/networkInterfaces",
                json!([primary.clone(), {"networkCardIndex": 1, "interfaceType": "interface"}]),
            )],
            "spec.networkInterfaces[1].deviceIndex",
            "required value",
        ),
        (
            "too many interfaces",
            vec![("/spec/networkInterfaces", many(151, primary.clone()))],
            "spec.networkInterfaces",
            "too many: 151: must have at most 150 items",
        ),
        // metadata options
        (
            "unknown http endpoint",
            vec![("/spec/metadataOptions/httpEndpoint", json!("on"))],
            "spec.metadataOptions.httpEndpoint",
            r#"unsupported value: "on": supported values: "enabled", "disabled""#,
        ),
        (
            "unknown ipv6 setting",
            vec![("/spec/metadataOptions/httpProtocolIPv6", json!("yes"))],
            "spec.metadataOptions.httpProtocolIPv6",
            r#"unsupported value: "yes": supported values: "enabled", "disabled""#,
        ),
        (
            "hop limit 0",
            vec![("/spec/metadataOptions/httpPutResponseHopLimit", json!(0))],
            "spec.metadataOptions.httpPutResponseHopLimit",
            "should be greater than or equal to 1",
        ),
        (
            "hop limit 65",
            vec![("/spec/metadataOptions/httpPutResponseHopLimit", json!(65))],
            "spec.metadataOptions.httpPutResponseHopLimit",
            "should be less than or equal to 64",
        ),
        (
            "unknown http tokens",
            vec![("/spec/metadataOptions/httpTokens", json!("maybe"))],
            "spec.metadataOptions.httpTokens",
            r#"unsupported value: "maybe": supported values: "required", "optional""#,
        ),
        // connection tracking, cpu options
        (
            "empty connection tracking",
            vec![("/spec/connectionTracking", json!({}))],
            "spec.connectionTracking",
            "expected at least one, got none, ['tcpEstablishedTimeout', 'udpStreamTimeout', 'udpTimeout']",
        ),
        (
            "tcp timeout too short",
            vec![("/spec/connectionTracking/tcpEstablishedTimeout", json!(59))],
            "spec.connectionTracking.tcpEstablishedTimeout",
            "should be greater than or equal to 60",
        ),
        (
            "udp stream timeout too long",
            vec![("/spec/connectionTracking/udpStreamTimeout", json!(181))],
            "spec.connectionTracking.udpStreamTimeout",
            "should be less than or equal to 180",
        ),
        (
            "udp timeout too short",
            vec![("/spec/connectionTracking/udpTimeout", json!(29))],
            "spec.connectionTracking.udpTimeout",
            "should be greater than or equal to 30",
        ),
        (
            "unknown nested virtualization",
            vec![("/spec/cpuOptions/nestedVirtualization", json!("on"))],
            "spec.cpuOptions.nestedVirtualization",
            r#"unsupported value: "on": supported values: "enabled", "disabled""#,
        ),
    ]
}

/// The base object with a case's changes applied.
pub fn apply(changes: &[(&str, Value)]) -> Value {
    let mut v = base();
    for (pointer, value) in changes {
        set(&mut v, pointer, value.clone());
    }
    v
}
