//! The configuration of one launch template: the class's network, profile, metadata and block
//! devices, and user data generated for the claim's labels and taints and the instance type's
//! pod count and kube-reserved, so the kubelet reserves what the scheduler assumed.

use std::collections::BTreeMap;

use nodewright_api::aws::v1::{EC2NodeClass, KubeletConfiguration};
use nodewright_aws_model::AmiFamily;
use nodewright_aws_model::reservations;
use nodewright_aws_model::resources::EFA;
use nodewright_aws_model::userdata::{BootstrapInput, KubeletSettings, generate};
use nodewright_cloud::CloudError;
use nodewright_core::labels;
use nodewright_core::model::{CapacityType, InstanceType};
use nodewright_core::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, format_amount};
use nodewright_core::taints::Taint;

use super::template::{self, CLUSTER_TAG, TemplateSpec};
use crate::nodeclass::{ResolvedAmi, ResolvedNodeClass};

/// How a new node reaches the cluster's API server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterInfo {
    /// `https://...`; required by every family but Custom.
    pub endpoint: String,
    /// The cluster CA, base64.
    pub ca_bundle: Option<String>,
    /// The service CIDR; AL2023's nodeadm requires it.
    pub service_cidr: Option<String>,
    /// Why the service CIDR is not known (EKS could not say), for the error of an AL2023
    /// launch.
    pub service_cidr_unknown: Option<String>,
}

/// What every template of one launch shares.
pub struct BaseConfig<'a> {
    pub class: &'a EC2NodeClass,
    pub resolved: &'a ResolvedNodeClass,
    pub family: AmiFamily,
    pub cluster_name: &'a str,
    pub cluster: &'a ClusterInfo,
    pub node_labels: BTreeMap<String, String>,
    /// Registration taints (claim taints, startup taints, unregistered).
    pub taints: Vec<Taint>,
    /// The claim's tenancy, placement group and partition.
    pub placement: nodewright_aws_model::placement::LaunchPlacement,
}

fn invalid(class: &str, reason: impl std::fmt::Display) -> CloudError {
    CloudError::InvalidRequest(format!("EC2NodeClass {class}: {reason}"))
}

fn kubelet_settings(k: Option<&KubeletConfiguration>) -> KubeletSettings {
    let Some(k) = k else {
        return KubeletSettings::default();
    };
    KubeletSettings {
        cluster_dns: k.cluster_dns.clone().unwrap_or_default(),
        max_pods: k.max_pods,
        pods_per_core: k.pods_per_core,
        system_reserved: k.system_reserved.clone().unwrap_or_default(),
        kube_reserved: k.kube_reserved.clone().unwrap_or_default(),
        eviction_hard: k.eviction_hard.clone().unwrap_or_default(),
        eviction_soft: k.eviction_soft.clone().unwrap_or_default(),
        eviction_soft_grace_period: k.eviction_soft_grace_period.clone().unwrap_or_default(),
        eviction_max_pod_grace_period: k.eviction_max_pod_grace_period,
        image_gc_high_threshold_percent: k.image_gc_high_threshold_percent,
        image_gc_low_threshold_percent: k.image_gc_low_threshold_percent,
        cpu_cfs_quota: k.cpu_cfs_quota,
    }
}

/// `connectionTracking` in the template's form.
fn connection_tracking(
    c: Option<&nodewright_api::aws::v1::ConnectionTracking>,
) -> Result<Option<template::ConnectionTrackingSpec>, String> {
    let Some(c) = c else {
        return Ok(None);
    };
    let secs = |field: &str, v: Option<i64>| {
        v.map(|n| {
            i32::try_from(n).map_err(|_| format!("spec.connectionTracking.{field}: out of range"))
        })
        .transpose()
    };
    Ok(Some(template::ConnectionTrackingSpec {
        tcp_established_timeout: secs("tcpEstablishedTimeout", c.tcp_established_timeout)?,
        udp_stream_timeout: secs("udpStreamTimeout", c.udp_stream_timeout)?,
        udp_timeout: secs("udpTimeout", c.udp_timeout)?,
    }))
}

/// The primary interface, when the template must define it: for a public-IP choice, prefix
/// delegation, connection tracking (set per interface) or an IPv6 address (IPv6 clusters).
fn primary_interface(
    public_ip: Option<bool>,
    prefixes: Option<i64>,
    tracked: bool,
    ipv6: bool,
) -> Result<Option<template::PrimaryInterface>, String> {
    if public_ip.is_none() && prefixes.is_none() && !tracked && !ipv6 {
        return Ok(None);
    }
    let ipv4_prefix_count = prefixes
        .map(|n| i32::try_from(n).map_err(|_| "spec.ipPrefixCount: out of range".to_string()))
        .transpose()?;
    Ok(Some(template::PrimaryInterface {
        associate_public_ip_address: public_ip,
        ipv4_prefix_count,
        ipv6_address_count: ipv6.then_some(1),
    }))
}

/// Whether the cluster runs IPv6: its service CIDR, or else the kubelet's cluster DNS
/// address, is IPv6.
fn ipv6_cluster(cluster: &ClusterInfo, kubelet: Option<&KubeletConfiguration>) -> bool {
    match &cluster.service_cidr {
        Some(cidr) => cidr.contains(':'),
        None => kubelet
            .and_then(|k| k.cluster_dns.as_ref())
            .and_then(|d| d.first())
            .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
            .is_some_and(|ip| ip.is_ipv6()),
    }
}

/// `networkInterfaces` in the template's form.
fn class_interfaces(
    list: Option<&[nodewright_api::aws::v1::NetworkInterface]>,
) -> Result<Vec<template::ClassInterface>, String> {
    list.unwrap_or(&[])
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let index = |field: &str, v: Option<i64>| {
                i32::try_from(v.unwrap_or(0))
                    .map_err(|_| format!("spec.networkInterfaces[{i}].{field}: out of range"))
            };
            Ok(template::ClassInterface {
                network_card_index: index("networkCardIndex", n.network_card_index)?,
                device_index: index("deviceIndex", n.device_index)?,
                efa_only: n.interface_type.as_deref() == Some("efa-only"),
            })
        })
        .collect()
}

impl BaseConfig<'_> {
    fn class_name(&self) -> String {
        self.class.metadata.name.clone().unwrap_or_default()
    }

    /// The user data for a node of type `it` with capacity type `capacity_type`.
    pub fn bootstrap(
        &self,
        it: &InstanceType,
        capacity_type: CapacityType,
    ) -> Result<BootstrapInput, CloudError> {
        if self.family != AmiFamily::Custom && self.cluster.endpoint.is_empty() {
            return Err(invalid(
                &self.class_name(),
                "the cluster endpoint is not configured, so nodes could not join",
            ));
        }
        if self.family == AmiFamily::AL2023 && self.cluster.service_cidr.is_none() {
            let why = self
                .cluster
                .service_cidr_unknown
                .as_deref()
                .unwrap_or("no source for it is configured");
            return Err(invalid(
                &self.class_name(),
                format!(
                    "amiFamily AL2023 needs the cluster's service CIDR, which is unknown: {why}"
                ),
            ));
        }
        let spec = &self.class.spec;
        let mut input = BootstrapInput::new(self.family, self.cluster_name, &self.cluster.endpoint);
        input.ca_bundle = self.cluster.ca_bundle.clone();
        input.cluster_cidr = self.cluster.service_cidr.clone();
        input.labels = self.node_labels.clone();
        input.labels.insert(
            labels::CAPACITY_TYPE.into(),
            capacity_type.as_str().to_string(),
        );
        input.taints = self.taints.clone();
        input.kubelet = kubelet_settings(spec.kubelet.as_ref());
        // The pod count and kube-reserved the scheduler computed for this type, so the node's
        // allocatable matches what pods were packed against.
        let pods = it.capacity.get(PODS);
        if pods > 0 {
            input.kubelet.max_pods = Some(pods);
        }
        for res in [CPU, MEMORY, EPHEMERAL_STORAGE] {
            let v = it.overhead.kube_reserved.get(res);
            if v > 0 {
                input
                    .kubelet
                    .kube_reserved
                    .insert(res.to_string(), format_amount(res, v));
            }
        }
        input.instance_store_raid0 = spec.instance_store_policy.as_deref() == Some("RAID0");
        input.user_data = spec.user_data.clone();
        Ok(input)
    }

    /// The template for type `it` launched from `ami`; with `efa` (the claim requests
    /// `vpc.amazonaws.com/efa`) it gets one EFA interface per EFA the type has.
    pub fn template(
        &self,
        ami: &ResolvedAmi,
        it: &InstanceType,
        capacity_type: CapacityType,
        launch_tags: &BTreeMap<String, String>,
        efa: bool,
        reservation_id: Option<&str>,
    ) -> Result<TemplateSpec, CloudError> {
        let class = self.class_name();
        let spec = &self.class.spec;
        let user_data =
            generate(&self.bootstrap(it, capacity_type)?).map_err(|e| invalid(&class, e))?;
        if let Some(w) = &user_data.warning {
            tracing::warn!(ec2nodeclass = %class, "{w}");
        }
        let mut security_group_ids: Vec<String> = self
            .resolved
            .security_groups
            .iter()
            .map(|g| g.id.clone())
            .collect();
        security_group_ids.sort();
        security_group_ids.dedup();
        let connection_tracking = connection_tracking(spec.connection_tracking.as_ref())
            .map_err(|e| invalid(&class, e))?;
        let block_devices =
            template::block_devices(self.family, spec.block_device_mappings.as_deref())
                .map_err(|e| invalid(&class, e))?;
        // Templates are shared by claims, so they carry the launch tags minus the claim's own.
        let mut tags: BTreeMap<String, String> = launch_tags
            .iter()
            .filter(|(k, _)| {
                k.as_str() != nodewright_cloud::tags::NODECLAIM
                    && k.as_str() != nodewright_cloud::tags::NAME
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        tags.insert(CLUSTER_TAG.into(), self.cluster_name.to_string());
        Ok(TemplateSpec {
            image_id: ami.id.clone(),
            user_data: user_data.base64,
            instance_profile: self.resolved.instance_profile.clone(),
            security_group_ids,
            metadata: template::metadata(spec.metadata_options.as_ref()),
            block_devices,
            detailed_monitoring: spec.detailed_monitoring.unwrap_or(false),
            primary_interface: primary_interface(
                spec.associate_public_ip_address,
                spec.ip_prefix_count,
                connection_tracking.is_some(),
                ipv6_cluster(self.cluster, spec.kubelet.as_ref()),
            )
            .map_err(|e| invalid(&class, e))?,
            class_interfaces: class_interfaces(spec.network_interfaces.as_deref())
                .map_err(|e| invalid(&class, e))?,
            nested_virtualization: spec
                .cpu_options
                .as_ref()
                .and_then(|c| c.nested_virtualization.clone()),
            connection_tracking,
            placement: (!self.placement.is_default()).then(|| self.placement.clone()),
            capacity_reservation: reservations::target(
                !self.resolved.capacity_reservations.is_empty(),
                capacity_type,
                reservation_id.and_then(|id| {
                    self.resolved
                        .capacity_reservations
                        .iter()
                        .find(|r| r.id == id)
                }),
            ),
            efa_interfaces: if efa {
                u32::try_from(it.capacity.get(EFA)).unwrap_or(0)
            } else {
                0
            },
            tags,
        })
    }
}

#[cfg(test)]
mod tests;
