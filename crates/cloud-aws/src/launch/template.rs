//! Launch templates: one per distinct configuration (image, user data, security groups,
//! instance profile, metadata options, block devices, tags), named
//! `karpenter.k8s.aws/<hash of the configuration>` so equal configurations share one template
//! and a changed one gets a new name. Templates are created when missing and remembered, so a
//! second launch with the same configuration makes no template calls at all.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::builders::RequestLaunchTemplateDataBuilder;
use aws_sdk_ec2::types::{
    CapacityReservationPreference, CapacityReservationTarget,
    ConnectionTrackingSpecificationRequest, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateCapacityReservationSpecificationRequest, LaunchTemplateCpuOptionsRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceMetadataTagsState,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, LaunchTemplatePlacementRequest,
    LaunchTemplateTagSpecificationRequest, LaunchTemplatesMonitoringRequest, MarketType,
    NestedVirtualizationSpecification, RequestLaunchTemplateData, ResourceType, Tag,
    TagSpecification, Tenancy, VolumeType,
};
use nodewright_api::aws::common::{BlockDeviceMapping, IntOrString, MetadataOptions};
use nodewright_api::quantity::parse_units;
use nodewright_aws_model::AmiFamily;
use nodewright_aws_model::placement::LaunchPlacement;
use nodewright_aws_model::reservations::{ReservationTarget, ReservationType};

use nodewright_api::stable_hash::fnv1a64;

mod cache;
pub use cache::{TemplateCache, delete_class_templates};

/// Name prefix of every template this controller creates.
pub const NAME_PREFIX: &str = "karpenter.k8s.aws/";
/// Tag carrying the cluster name on templates, so they can be found per cluster.
pub const CLUSTER_TAG: &str = "karpenter.k8s.aws/cluster";

const GI: i64 = 1 << 30;

/// One EBS block device of a template.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockDeviceSpec {
    pub device_name: String,
    pub volume_size_gib: Option<i32>,
    pub volume_type: Option<String>,
    pub encrypted: Option<bool>,
    pub delete_on_termination: Option<bool>,
    pub iops: Option<i32>,
    pub throughput: Option<i32>,
    pub kms_key_id: Option<String>,
    pub snapshot_id: Option<String>,
    /// MiB/s at which a volume from a snapshot is filled (`volumeInitializationRate`).
    pub volume_initialization_rate: Option<i32>,
}

/// Instance metadata service options, defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataSpec {
    pub http_endpoint: String,
    pub http_protocol_ipv6: String,
    pub http_put_response_hop_limit: i32,
    pub http_tokens: String,
}

/// Everything a template holds. Equal specs give equal names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateSpec {
    pub image_id: String,
    /// Base64.
    pub user_data: String,
    pub instance_profile: Option<String>,
    /// Sorted.
    pub security_group_ids: Vec<String>,
    pub metadata: MetadataSpec,
    pub block_devices: Vec<BlockDeviceSpec>,
    pub detailed_monitoring: bool,
    /// `associatePublicIPAddress` and `ipPrefixCount`: when either is set the template defines
    /// the primary network interface, and the security groups move into it.
    pub primary_interface: Option<PrimaryInterface>,
    /// EFA interfaces, one per network card, when the claim requests
    /// `vpc.amazonaws.com/efa`: they replace the primary interface (0: none).
    pub efa_interfaces: u32,
    /// The class's `networkInterfaces`: when set, exactly these interfaces (they take
    /// precedence over the generated EFA ones).
    pub class_interfaces: Vec<ClassInterface>,
    /// `cpuOptions.nestedVirtualization` (`enabled`/`disabled`).
    pub nested_virtualization: Option<String>,
    /// `connectionTracking`, on every interface the template defines.
    pub connection_tracking: Option<ConnectionTrackingSpec>,
    /// The capacity reservation setting, when the class selects reservations.
    pub capacity_reservation: Option<ReservationTarget>,
    /// Tenancy, placement group and partition; `None` for shared tenancy outside a group
    /// (no `Placement` block, so such templates keep their names).
    pub placement: Option<LaunchPlacement>,
    /// On the template itself and on the network interfaces it creates.
    pub tags: BTreeMap<String, String>,
}

impl TemplateSpec {
    /// `karpenter.k8s.aws/<FNV-1a 64 of the spec>`: the debug form lists every field in a
    /// fixed order, with maps and sets sorted.
    pub fn name(&self) -> String {
        format!("{NAME_PREFIX}{}", fnv1a64(format!("{self:?}").as_bytes()))
    }
}

/// Idle timeouts (seconds) of tracked connections on the node's interfaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionTrackingSpec {
    pub tcp_established_timeout: Option<i32>,
    pub udp_stream_timeout: Option<i32>,
    pub udp_timeout: Option<i32>,
}

impl ConnectionTrackingSpec {
    fn request(&self) -> ConnectionTrackingSpecificationRequest {
        ConnectionTrackingSpecificationRequest::builder()
            .set_tcp_established_timeout(self.tcp_established_timeout)
            .set_udp_stream_timeout(self.udp_stream_timeout)
            .set_udp_timeout(self.udp_timeout)
            .build()
    }
}

/// The primary network interface's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrimaryInterface {
    pub associate_public_ip_address: Option<bool>,
    pub ipv4_prefix_count: Option<i32>,
    /// One IPv6 address in IPv6 clusters, so pods can be addressed.
    pub ipv6_address_count: Option<i32>,
}

/// One `networkInterfaces` entry of the class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassInterface {
    pub network_card_index: i32,
    pub device_index: i32,
    /// `efa-only`: an EFA device without an IP address (else a plain ENA interface).
    pub efa_only: bool,
}

impl ClassInterface {
    fn is_primary(&self) -> bool {
        self.network_card_index == 0 && self.device_index == 0
    }
}

/// The class's interfaces: each takes the security groups; the primary one takes the public
/// address choice, prefixes and IPv6 address; all but `efa-only` ones take connection
/// tracking, which EC2 does not support on EFA-only interfaces.
fn class_interfaces(
    spec: &TemplateSpec,
) -> Vec<LaunchTemplateInstanceNetworkInterfaceSpecificationRequest> {
    let primary = spec.primary_interface.as_ref();
    spec.class_interfaces
        .iter()
        .map(|n| {
            let mut b = LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .network_card_index(n.network_card_index)
                .device_index(n.device_index)
                .delete_on_termination(true)
                .set_groups(Some(spec.security_group_ids.clone()));
            if n.efa_only {
                b = b.interface_type("efa-only");
            } else {
                b = b.set_connection_tracking_specification(
                    spec.connection_tracking.as_ref().map(|c| c.request()),
                );
            }
            if n.is_primary()
                && let Some(p) = primary
            {
                b = b
                    .set_associate_public_ip_address(p.associate_public_ip_address)
                    .set_ipv4_prefix_count(p.ipv4_prefix_count)
                    .set_ipv6_address_count(p.ipv6_address_count);
            }
            b.build()
        })
        .collect()
}

/// `metadataOptions` with upstream's v1 defaults (hop limit 1, tokens required).
pub fn metadata(options: Option<&MetadataOptions>) -> MetadataSpec {
    let o = options.cloned().unwrap_or_default().with_defaults(1);
    MetadataSpec {
        http_endpoint: o.http_endpoint.unwrap_or_else(|| "enabled".into()),
        http_protocol_ipv6: o.http_protocol_ipv6.unwrap_or_else(|| "disabled".into()),
        http_put_response_hop_limit: o
            .http_put_response_hop_limit
            .and_then(|h| i32::try_from(h).ok())
            .unwrap_or(1),
        http_tokens: o.http_tokens.unwrap_or_else(|| "required".into()),
    }
}

fn gp3(device: &str, gib: i32) -> BlockDeviceSpec {
    BlockDeviceSpec {
        device_name: device.into(),
        volume_size_gib: Some(gib),
        volume_type: Some("gp3".into()),
        encrypted: Some(true),
        delete_on_termination: Some(true),
        ..Default::default()
    }
}

/// The class's block devices, or the family's defaults (none for Custom: the image's own).
pub fn block_devices(
    family: AmiFamily,
    mappings: Option<&[BlockDeviceMapping]>,
) -> Result<Vec<BlockDeviceSpec>, String> {
    let Some(mappings) = mappings.filter(|m| !m.is_empty()) else {
        return Ok(match family {
            AmiFamily::AL2 | AmiFamily::AL2023 => vec![gp3("/dev/xvda", 20)],
            AmiFamily::Bottlerocket => vec![gp3("/dev/xvda", 4), gp3("/dev/xvdb", 20)],
            AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
                vec![gp3("/dev/sda1", 50)]
            }
            AmiFamily::Custom => Vec::new(),
        });
    };
    let mut out = Vec::new();
    for (i, m) in mappings.iter().enumerate() {
        let ebs = m.ebs.clone().unwrap_or_default();
        let size = match &ebs.volume_size {
            None => None,
            Some(IntOrString::Int(g)) => Some(*g),
            Some(IntOrString::String(s)) => {
                let bytes = parse_units(s)
                    .map_err(|e| format!("spec.blockDeviceMappings[{i}].ebs.volumeSize: {e}"))?;
                // EC2 takes whole GiB; round up so the volume is never smaller than asked.
                Some((bytes + GI - 1) / GI)
            }
        };
        let int = |field: &str, v: Option<i64>| -> Result<Option<i32>, String> {
            v.map(|v| {
                i32::try_from(v)
                    .map_err(|_| format!("spec.blockDeviceMappings[{i}].ebs.{field}: out of range"))
            })
            .transpose()
        };
        out.push(BlockDeviceSpec {
            device_name: m.device_name.clone().unwrap_or_default(),
            volume_size_gib: int("volumeSize", size)?,
            volume_type: ebs.volume_type.clone(),
            encrypted: ebs.encrypted,
            delete_on_termination: ebs.delete_on_termination,
            iops: int("iops", ebs.iops)?,
            throughput: int("throughput", ebs.throughput)?,
            kms_key_id: ebs.kms_key_id.clone(),
            snapshot_id: ebs.snapshot_id.clone(),
            volume_initialization_rate: int(
                "volumeInitializationRate",
                ebs.volume_initialization_rate,
            )?,
        });
    }
    Ok(out)
}

/// One EFA interface per network card. Card 0's is the primary interface (device 0); the
/// others take device 1, so the primary card keeps precedence (for a public address).
fn efa_interfaces(
    spec: &TemplateSpec,
) -> Vec<LaunchTemplateInstanceNetworkInterfaceSpecificationRequest> {
    let public_ip = spec
        .primary_interface
        .as_ref()
        .and_then(|p| p.associate_public_ip_address);
    let ipv6 = spec
        .primary_interface
        .as_ref()
        .and_then(|p| p.ipv6_address_count);
    (0..spec.efa_interfaces)
        .map(|card| {
            let card = i32::try_from(card).unwrap_or(i32::MAX);
            LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .network_card_index(card)
                .device_index(if card == 0 { 0 } else { 1 })
                .interface_type("efa")
                .delete_on_termination(true)
                .set_associate_public_ip_address(public_ip)
                .set_ipv6_address_count(ipv6.filter(|_| card == 0))
                .set_groups(Some(spec.security_group_ids.clone()))
                .set_connection_tracking_specification(
                    spec.connection_tracking.as_ref().map(|c| c.request()),
                )
                .build()
        })
        .collect()
}

fn tag_list(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// The SDK form of `spec`.
pub fn request_data(spec: &TemplateSpec) -> RequestLaunchTemplateData {
    let data = RequestLaunchTemplateData::builder().image_id(&spec.image_id);
    let mut data = with_network(data, spec)
        .metadata_options(metadata_options(&spec.metadata))
        .monitoring(
            LaunchTemplatesMonitoringRequest::builder()
                .enabled(spec.detailed_monitoring)
                .build(),
        )
        .tag_specifications(
            LaunchTemplateTagSpecificationRequest::builder()
                .resource_type(ResourceType::NetworkInterface)
                .set_tags(Some(tag_list(&spec.tags)))
                .build(),
        );
    if !spec.user_data.is_empty() {
        data = data.user_data(&spec.user_data);
    }
    if let Some(nv) = &spec.nested_virtualization {
        data = data.cpu_options(
            LaunchTemplateCpuOptionsRequest::builder()
                .nested_virtualization(NestedVirtualizationSpecification::from(nv.as_str()))
                .build(),
        );
    }
    if let Some(target) = &spec.capacity_reservation {
        data = data
            .capacity_reservation_specification(reservation_specification(target))
            .set_instance_market_options(reservation_market(target));
    }
    if let Some(p) = &spec.placement {
        data = data.placement(placement_request(p));
    }
    if let Some(p) = &spec.instance_profile {
        data = data.iam_instance_profile(
            LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                .name(p)
                .build(),
        );
    }
    for b in &spec.block_devices {
        data = data.block_device_mappings(block_device_mapping(b));
    }
    data.build()
}

/// `data` with the template's network interfaces (the class's, EFA's or a primary one), or
/// with its security groups when it has none.
fn with_network(
    data: RequestLaunchTemplateDataBuilder,
    spec: &TemplateSpec,
) -> RequestLaunchTemplateDataBuilder {
    match &spec.primary_interface {
        _ if !spec.class_interfaces.is_empty() => {
            data.set_network_interfaces(Some(class_interfaces(spec)))
        }
        _ if spec.efa_interfaces > 0 => data.set_network_interfaces(Some(efa_interfaces(spec))),
        // EC2 refuses groups both on the template and in its interfaces.
        Some(nic) => data.network_interfaces(
            LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .device_index(0)
                .network_card_index(0)
                .delete_on_termination(true)
                .set_associate_public_ip_address(nic.associate_public_ip_address)
                .set_ipv4_prefix_count(nic.ipv4_prefix_count)
                .set_ipv6_address_count(nic.ipv6_address_count)
                .set_groups(Some(spec.security_group_ids.clone()))
                .set_connection_tracking_specification(
                    spec.connection_tracking.as_ref().map(|c| c.request()),
                )
                .build(),
        ),
        None => data.set_security_group_ids(Some(spec.security_group_ids.clone())),
    }
}

/// The SDK form of the instance metadata service options; instance tags stay off.
fn metadata_options(m: &MetadataSpec) -> LaunchTemplateInstanceMetadataOptionsRequest {
    LaunchTemplateInstanceMetadataOptionsRequest::builder()
        .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::from(
            m.http_endpoint.as_str(),
        ))
        .http_protocol_ipv6(LaunchTemplateInstanceMetadataProtocolIpv6::from(
            m.http_protocol_ipv6.as_str(),
        ))
        .http_put_response_hop_limit(m.http_put_response_hop_limit)
        .http_tokens(LaunchTemplateHttpTokensState::from(m.http_tokens.as_str()))
        .instance_metadata_tags(LaunchTemplateInstanceMetadataTagsState::Disabled)
        .build()
}

/// Which capacity reservations an instance may use: none at all, or only the targeted one.
fn reservation_specification(
    target: &ReservationTarget,
) -> LaunchTemplateCapacityReservationSpecificationRequest {
    match target {
        ReservationTarget::None => LaunchTemplateCapacityReservationSpecificationRequest::builder()
            .capacity_reservation_preference(CapacityReservationPreference::None)
            .build(),
        ReservationTarget::Only { id, .. } => {
            LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_preference(
                    CapacityReservationPreference::CapacityReservationsOnly,
                )
                .capacity_reservation_target(
                    CapacityReservationTarget::builder()
                        .capacity_reservation_id(id)
                        .build(),
                )
                .build()
        }
    }
}

/// The market a targeted reservation's instances launch in: capacity blocks and
/// interruptible reservations have their own; a default reservation needs none.
fn reservation_market(
    target: &ReservationTarget,
) -> Option<LaunchTemplateInstanceMarketOptionsRequest> {
    let ReservationTarget::Only {
        reservation_type,
        interruptible,
        ..
    } = target
    else {
        return None;
    };
    let market = match (reservation_type, interruptible) {
        (ReservationType::CapacityBlock, _) => MarketType::CapacityBlock,
        (ReservationType::Default, true) => MarketType::InterruptibleCapacityReservation,
        (ReservationType::Default, false) => return None,
    };
    Some(
        LaunchTemplateInstanceMarketOptionsRequest::builder()
            .market_type(market)
            .build(),
    )
}

/// The SDK form of the claim's tenancy, placement group and partition.
fn placement_request(p: &LaunchPlacement) -> LaunchTemplatePlacementRequest {
    LaunchTemplatePlacementRequest::builder()
        .tenancy(Tenancy::from(p.tenancy))
        .set_group_id(p.group_id.clone())
        .set_partition_number(p.partition.and_then(|n| i32::try_from(n).ok()))
        .build()
}

/// The SDK form of one EBS block device.
fn block_device_mapping(b: &BlockDeviceSpec) -> LaunchTemplateBlockDeviceMappingRequest {
    let ebs = LaunchTemplateEbsBlockDeviceRequest::builder()
        .set_volume_size(b.volume_size_gib)
        .set_volume_type(b.volume_type.as_deref().map(VolumeType::from))
        .set_encrypted(b.encrypted)
        .set_delete_on_termination(b.delete_on_termination)
        .set_iops(b.iops)
        .set_throughput(b.throughput)
        .set_kms_key_id(b.kms_key_id.clone())
        .set_snapshot_id(b.snapshot_id.clone())
        .set_volume_initialization_rate(b.volume_initialization_rate)
        .build();
    LaunchTemplateBlockDeviceMappingRequest::builder()
        .device_name(&b.device_name)
        .ebs(ebs)
        .build()
}

/// The CreateLaunchTemplate request for `spec`, unsent (launches send it; node class
/// validation sends it as a dry run).
pub fn create_request(
    ec2: &aws_sdk_ec2::Client,
    spec: &TemplateSpec,
) -> aws_sdk_ec2::operation::create_launch_template::builders::CreateLaunchTemplateFluentBuilder {
    ec2.create_launch_template()
        .launch_template_name(spec.name())
        .launch_template_data(request_data(spec))
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::LaunchTemplate)
                .set_tags(Some(tag_list(&spec.tags)))
                .build(),
        )
}

#[cfg(test)]
mod tests;
