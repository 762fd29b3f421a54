//! Invalid EC2NodeClasses: what the launch template carries: tags, kubelet settings, block
//! devices, network interfaces, metadata options, connection tracking and cpu options.

use super::*;

/// Tags, kubelet, block devices, network interfaces, metadata, connection tracking and cpu options.
pub(super) fn launch_rows() -> Vec<Row> {
    let primary = json!({"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"});
    vec![
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
