//! The parts of an EC2NodeClass that shape instance types (AMI family, kubelet, block devices,
//! instance-store policy), read into `aws-model`'s parsed form. Quantities are parsed here,
//! once; a value that does not parse is reported, not guessed.

use crate::{AmiFamily, BlockDevice, EvictionSignal, NetworkInterface, NodeClassInput};
use nodewright_api::aws::common::IntOrString;
use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::quantity::{parse_resource, parse_units};
use thiserror::Error;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("EC2NodeClass {class}: {field}: {reason}")]
pub struct ClassInputError {
    pub class: String,
    pub field: String,
    pub reason: String,
}

fn signal(text: &str) -> Result<EvictionSignal, String> {
    if let Some(p) = text.strip_suffix('%') {
        return p
            .trim()
            .parse::<f64>()
            .map(EvictionSignal::Percent)
            .map_err(|e| e.to_string());
    }
    parse_units(text)
        .map(EvictionSignal::Bytes)
        .map_err(|e| e.to_string())
}

/// `class` as the instance-type formulas read it. Without an AMI family (none set, no alias)
/// the class is read as AL2023, the family of the default alias.
pub fn node_class_input(class: &EC2NodeClass) -> Result<NodeClassInput, ClassInputError> {
    let name = class.metadata.name.clone().unwrap_or_default();
    let fail = |field: &str, reason: String| ClassInputError {
        class: name.clone(),
        field: field.to_string(),
        reason,
    };
    let spec = &class.spec;
    let family = match spec.resolved_ami_family() {
        None => AmiFamily::AL2023,
        Some(f) => AmiFamily::from_name(&f)
            .ok_or_else(|| fail("spec.amiFamily", format!("unknown family {f:?}")))?,
    };
    let mut input = NodeClassInput::new(family);
    if let Some(k) = &spec.kubelet {
        input.max_pods = k
            .max_pods
            .map(|v| {
                u32::try_from(v).map_err(|_| fail("spec.kubelet.maxPods", "out of range".into()))
            })
            .transpose()?;
        input.pods_per_core = k
            .pods_per_core
            .map(|v| {
                u32::try_from(v)
                    .map_err(|_| fail("spec.kubelet.podsPerCore", "out of range".into()))
            })
            .transpose()?;
        for (field, src, dst) in [
            ("kubeReserved", &k.kube_reserved, &mut input.kube_reserved),
            (
                "systemReserved",
                &k.system_reserved,
                &mut input.system_reserved,
            ),
        ] {
            for (res, q) in src.iter().flatten() {
                let v = parse_resource(res, q)
                    .map_err(|e| fail(&format!("spec.kubelet.{field}.{res}"), e.to_string()))?;
                dst.insert(res.clone(), v);
            }
        }
        if let Some(h) = &k.eviction_hard {
            if let Some(m) = h.get("memory.available") {
                input.eviction_hard_memory = Some(
                    signal(m).map_err(|e| fail("spec.kubelet.evictionHard.memory.available", e))?,
                );
            }
            if let Some(n) = h.get("nodefs.available") {
                input.eviction_hard_nodefs = Some(
                    signal(n).map_err(|e| fail("spec.kubelet.evictionHard.nodefs.available", e))?,
                );
            }
        }
    }
    for (i, b) in spec.block_device_mappings.iter().flatten().enumerate() {
        let size = match b.ebs.as_ref().and_then(|e| e.volume_size.as_ref()) {
            None => None,
            // A bare number is GiB, as EC2 reads it.
            Some(IntOrString::Int(g)) => Some(g * (1 << 30)),
            Some(IntOrString::String(s)) => Some(parse_units(s).map_err(|e| {
                fail(
                    &format!("spec.blockDeviceMappings[{i}].ebs.volumeSize"),
                    e.to_string(),
                )
            })?),
        };
        input.block_device_mappings.push(BlockDevice {
            device_name: b.device_name.clone().unwrap_or_default(),
            volume_size: size,
            root_volume: b.root_volume.unwrap_or(false),
        });
    }
    input.instance_store_raid0 = spec.instance_store_policy.as_deref() == Some("RAID0");
    input.nested_virtualization = spec
        .cpu_options
        .as_ref()
        .and_then(|c| c.nested_virtualization.as_deref())
        == Some("enabled");
    input.connection_tracking = spec.connection_tracking.is_some();
    for (i, n) in spec.network_interfaces.iter().flatten().enumerate() {
        let index = |field: &str, v: Option<i64>| {
            u32::try_from(v.unwrap_or(0)).map_err(|_| {
                fail(
                    &format!("spec.networkInterfaces[{i}].{field}"),
                    "must be between 0 and 4294967295".into(),
                )
            })
        };
        input.network_interfaces.push(NetworkInterface {
            network_card_index: index("networkCardIndex", n.network_card_index)?,
            device_index: index("deviceIndex", n.device_index)?,
            efa_only: n.interface_type.as_deref() == Some("efa-only"),
        });
    }
    Ok(input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_api::aws::common::{BlockDevice as ApiDevice, BlockDeviceMapping};
    use nodewright_api::aws::v1::{EC2NodeClassSpec, KubeletConfiguration};

    #[test]
    fn kubelet_and_devices_are_parsed() {
        let class = EC2NodeClass {
            spec: EC2NodeClassSpec {
                ami_family: Some("Bottlerocket".into()),
                kubelet: Some(KubeletConfiguration {
                    max_pods: Some(58),
                    pods_per_core: Some(4),
                    kube_reserved: Some([("cpu".to_string(), "250m".to_string())].into()),
                    eviction_hard: Some(
                        [("memory.available".to_string(), "5%".to_string())].into(),
                    ),
                    ..Default::default()
                }),
                block_device_mappings: Some(vec![BlockDeviceMapping {
                    device_name: Some("/dev/xvdb".into()),
                    ebs: Some(ApiDevice {
                        volume_size: Some(IntOrString::String("20Gi".into())),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            ..Default::default()
        };
        let i = node_class_input(&class).unwrap();
        assert_eq!(i.ami_family, AmiFamily::Bottlerocket);
        assert_eq!((i.max_pods, i.pods_per_core), (Some(58), Some(4)));
        assert_eq!(i.kube_reserved["cpu"], 250);
        assert_eq!(i.eviction_hard_memory, Some(EvictionSignal::Percent(5.0)));
        assert_eq!(i.block_device_mappings[0].volume_size, Some(20 << 30));
    }

    #[test]
    fn launch_settings_that_narrow_instance_types_are_read() {
        let class: EC2NodeClass = serde_yaml::from_str(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: hpc}\nspec:\n  cpuOptions: {nestedVirtualization: enabled}\n  connectionTracking: {udpTimeout: 30}\n  networkInterfaces:\n    - {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}\n    - {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}\n",
        )
        .unwrap();
        let i = node_class_input(&class).unwrap();
        assert!(i.nested_virtualization && i.connection_tracking);
        assert_eq!(
            i.network_interfaces,
            [
                NetworkInterface {
                    network_card_index: 0,
                    device_index: 0,
                    efa_only: false
                },
                NetworkInterface {
                    network_card_index: 1,
                    device_index: 0,
                    efa_only: true
                }
            ]
        );
        let plain = node_class_input(&EC2NodeClass::default()).unwrap();
        assert!(!plain.nested_virtualization && !plain.connection_tracking);
        assert!(plain.network_interfaces.is_empty());
    }

    #[test]
    fn bad_quantity_names_the_field() {
        let mut class = EC2NodeClass::default();
        class.metadata.name = Some("default".into());
        class.spec.kubelet = Some(KubeletConfiguration {
            system_reserved: Some([("memory".to_string(), "lots".to_string())].into()),
            ..Default::default()
        });
        let e = node_class_input(&class).unwrap_err();
        assert_eq!(e.field, "spec.kubelet.systemReserved.memory");
        assert_eq!(e.class, "default");
    }
}
