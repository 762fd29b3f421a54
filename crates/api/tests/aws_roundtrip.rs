//! YAML → types → YAML keeps every field, for the seed manifests and for an object that uses
//! every v1 field (plus fields the types do not know).

use nodewright_api::aws::{v1, v1alpha1, v1beta1};
use nodewright_api::document::{Document, read_documents};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn seeds(file: &str) -> Vec<Document> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/seed-manifests")
        .join(file);
    read_documents(&path).expect("seed manifest reads")
}

fn seed(file: &str, kind: &str) -> Value {
    seeds(file)
        .into_iter()
        .find(|d| d.kind() == kind)
        .expect("seed has the kind")
        .value
}

/// Through the types and back, both as JSON values and through YAML text.
fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) {
    let typed: T = serde_json::from_value(value.clone()).expect("deserializes");
    let back = serde_json::to_value(&typed).expect("serializes");
    assert_eq!(&back, value, "JSON round trip");
    let yaml = serde_yaml::to_string(&typed).expect("to yaml");
    let again: T = serde_yaml::from_str(&yaml).expect("from yaml");
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        *value,
        "YAML round trip"
    );
}

#[test]
fn v1beta1_seed_round_trips() {
    round_trip::<v1beta1::EC2NodeClass>(&seed("02-ec2nodeclass-v1beta1.yaml", "EC2NodeClass"));
}

#[test]
fn v1alpha1_seed_round_trips() {
    round_trip::<v1alpha1::AWSNodeTemplate>(&seed(
        "03-provisioner-v1alpha5.yaml",
        "AWSNodeTemplate",
    ));
}

#[test]
fn v1_seed_round_trips() {
    round_trip::<v1::EC2NodeClass>(&seed("04-nodepool-ec2nodeclass-v1.yaml", "EC2NodeClass"));
}

const FULL_V1: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: full
  labels: {team: a}
  annotations: {note: x}
spec:
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: c, env: "*"}
    - id: subnet-0abc
  securityGroupSelectorTerms:
    - id: sg-0abc
    - name: my-sg
    - tags: {a: b}
  capacityReservationSelectorTerms:
    - id: cr-0123
    - tags: {team: x}
      ownerID: "123456789012"
      instanceMatchCriteria: targeted
  placementGroupSelector: {name: pg}
  associatePublicIPAddress: false
  ipPrefixCount: 2
  amiSelectorTerms:
    - alias: al2023@v20240807
  amiFamily: AL2023
  userData: |
    #!/bin/bash
    echo hi
  role: KarpenterNodeRole
  tags: {team: a, Name: n}
  kubelet:
    clusterDNS: ["10.0.0.10"]
    maxPods: 110
    podsPerCore: 10
    systemReserved: {cpu: 100m, memory: 100Mi, ephemeral-storage: 1Gi, pid: "100"}
    kubeReserved: {cpu: 200m, memory: 100Mi}
    evictionHard: {memory.available: 5%, nodefs.available: 10%}
    evictionSoft: {memory.available: 500Mi}
    evictionSoftGracePeriod: {memory.available: 1m}
    evictionMaxPodGracePeriod: 60
    imageGCHighThresholdPercent: 85
    imageGCLowThresholdPercent: 80
    cpuCFSQuota: true
    shutdownGracePeriod: 30s
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs:
        deleteOnTermination: true
        encrypted: true
        iops: 3000
        kmsKeyID: arn:aws:kms:us-west-2:111122223333:key/1
        snapshotID: snap-0123
        throughput: 125
        volumeInitializationRate: 200
        volumeSize: 100Gi
        volumeType: gp3
  instanceStorePolicy: RAID0
  networkInterfaces:
    - {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}
    - {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}
  detailedMonitoring: true
  metadataOptions:
    httpEndpoint: enabled
    httpProtocolIPv6: disabled
    httpPutResponseHopLimit: 1
    httpTokens: required
  connectionTracking: {tcpEstablishedTimeout: 432000, udpStreamTimeout: 180, udpTimeout: 30}
  context: ctx
  cpuOptions: {nestedVirtualization: enabled}
  futureField: {kept: true}
status:
  subnets: [{id: subnet-0abc, zone: us-west-2a, zoneID: usw2-az1}]
  securityGroups: [{id: sg-0abc, name: my-sg}]
  capacityReservations:
    - availabilityZone: us-west-2a
      endTime: "2026-01-01T00:00:00Z"
      id: cr-0123
      instanceMatchCriteria: targeted
      instanceType: m5.large
      ownerID: "123456789012"
      reservationType: capacity-block
      interruptible: false
      state: expiring
  amis:
    - id: ami-0123
      name: al2023
      deprecated: false
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
  instanceProfile: profile
  conditions:
    - type: Ready
      status: "True"
      lastTransitionTime: "2026-01-01T00:00:00Z"
      observedGeneration: 3
      reason: Ready
      message: ""
"#;

#[test]
fn every_v1_field_round_trips() {
    let value: Value = serde_yaml::from_str(FULL_V1).unwrap();
    round_trip::<v1::EC2NodeClass>(&value);
    let nc: v1::EC2NodeClass = serde_json::from_value(value).unwrap();
    // Fields the types model are typed, the rest is kept aside rather than lost.
    let kubelet = nc.spec.kubelet.as_ref().unwrap();
    assert_eq!(kubelet.max_pods, Some(110));
    assert_eq!(kubelet.extra["shutdownGracePeriod"], "30s");
    assert_eq!(nc.spec.extra["futureField"]["kept"], true);
    assert_eq!(nc.spec.resolved_ami_family().as_deref(), Some("AL2023"));
}

#[test]
fn numeric_volume_size_keeps_its_form() {
    let value: Value = serde_yaml::from_str(
        "spec:\n  blockDeviceMappings:\n    - deviceName: /dev/xvda\n      ebs: {volumeSize: 20}\n",
    )
    .unwrap();
    round_trip::<v1beta1::EC2NodeClass>(&value);
}

#[test]
fn every_v1beta1_field_round_trips() {
    let value: Value = serde_yaml::from_str(
        r#"
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: b}
spec:
  subnetSelectorTerms: [{tags: {a: b}}, {id: subnet-1}]
  securityGroupSelectorTerms: [{name: sg}, {id: sg-1}]
  associatePublicIPAddress: true
  amiSelectorTerms: [{tags: {a: b}, name: n, owner: self}, {id: ami-1}]
  amiFamily: Ubuntu
  userData: x
  instanceProfile: p
  tags: {a: b}
  blockDeviceMappings: [{deviceName: /dev/sda1, rootVolume: true, ebs: {volumeSize: 20Gi, snapshotID: snap-1}}]
  instanceStorePolicy: RAID0
  detailedMonitoring: false
  metadataOptions: {httpEndpoint: disabled, httpPutResponseHopLimit: 2}
  context: c
status:
  subnets: [{id: subnet-1, zone: a}]
  securityGroups: [{id: sg-1}]
  amis: [{id: ami-1, name: n, requirements: [{key: k, operator: Exists}]}]
  instanceProfile: p
  conditions: [{type: Ready, status: "False", lastTransitionTime: "2024-01-01T00:00:00Z", reason: R, message: m}]
"#,
    )
    .unwrap();
    round_trip::<v1beta1::EC2NodeClass>(&value);
}

#[test]
fn every_v1alpha1_field_round_trips() {
    let value: Value = serde_yaml::from_str(
        r#"
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: a}
spec:
  subnetSelector: {aws-ids: "subnet-1,subnet-2"}
  securityGroupSelector: {karpenter.sh/discovery: c}
  amiSelector: {aws::name: n, aws::owners: self}
  amiFamily: AL2
  userData: x
  instanceProfile: p
  tags: {a: b}
  context: c
  launchTemplate: lt
  metadataOptions: {httpTokens: optional}
  blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 100Gi, iops: 3000, throughput: 125}}]
  detailedMonitoring: true
status:
  subnets: [{id: subnet-1, zone: a}]
  securityGroups: [{id: sg-1, name: n}]
  amis: [{id: ami-1, name: n, requirements: []}]
"#,
    )
    .unwrap();
    round_trip::<v1alpha1::AWSNodeTemplate>(&value);
}

#[test]
fn converted_objects_round_trip_as_v1() {
    use nodewright_api::aws::convert;
    let old: v1beta1::EC2NodeClass =
        serde_json::from_value(seed("02-ec2nodeclass-v1beta1.yaml", "EC2NodeClass")).unwrap();
    let v1_value = serde_json::to_value(convert::from_v1beta1(&old, None).object).unwrap();
    assert_eq!(v1_value["apiVersion"], "karpenter.k8s.aws/v1");
    round_trip::<v1::EC2NodeClass>(&v1_value);
}
