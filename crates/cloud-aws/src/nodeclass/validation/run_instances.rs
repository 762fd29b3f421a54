//! A `RunInstances` request equivalent to launching one instance from a launch template: the
//! template's data (as the launch path builds it) moved field by field into RunInstances'
//! shapes, with the instance type, the subnet and the instance and volume tags CreateFleet
//! would add. EC2 authorizes RunInstances for every instance CreateFleet launches, so this is
//! the call whose permissions the class needs.

use std::collections::BTreeMap;

use aws_sdk_ec2::operation::run_instances::builders::RunInstancesFluentBuilder;
use aws_sdk_ec2::types::{
    BlockDeviceMapping, CapacityReservationSpecification, CpuOptionsRequest, EbsBlockDevice,
    HttpTokensState, IamInstanceProfileSpecification, InstanceMarketOptionsRequest,
    InstanceMetadataEndpointState, InstanceMetadataOptionsRequest, InstanceMetadataProtocolState,
    InstanceMetadataTagsState, InstanceNetworkInterfaceSpecification, InstanceType,
    LaunchTemplateCapacityReservationSpecificationRequest,
    LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplatePlacementRequest, MarketType,
    Placement, RequestLaunchTemplateData, ResourceType, RunInstancesMonitoringEnabled,
    TagSpecification,
};

use crate::launch::fleet::tag_spec;

/// The interfaces of `data` in RunInstances' form; the primary one (device 0 on card 0) is
/// put in `subnet`.
fn interfaces(
    data: &RequestLaunchTemplateData,
    subnet: &str,
) -> Vec<InstanceNetworkInterfaceSpecification> {
    data.network_interfaces()
        .iter()
        .map(|n| {
            let primary =
                n.device_index().unwrap_or(0) == 0 && n.network_card_index().unwrap_or(0) == 0;
            InstanceNetworkInterfaceSpecification::builder()
                .set_device_index(n.device_index())
                .set_network_card_index(n.network_card_index())
                .set_associate_public_ip_address(n.associate_public_ip_address())
                .set_delete_on_termination(n.delete_on_termination())
                .set_interface_type(n.interface_type().map(str::to_string))
                .set_ipv4_prefix_count(n.ipv4_prefix_count())
                .set_ipv6_address_count(n.ipv6_address_count())
                .set_groups(Some(n.groups().to_vec()))
                .set_connection_tracking_specification(
                    n.connection_tracking_specification().cloned(),
                )
                .set_subnet_id(primary.then(|| subnet.to_string()))
                .build()
        })
        .collect()
}

fn block_devices(data: &RequestLaunchTemplateData) -> Vec<BlockDeviceMapping> {
    data.block_device_mappings()
        .iter()
        .map(|b| {
            let ebs = b.ebs().map(|e| {
                EbsBlockDevice::builder()
                    .set_volume_size(e.volume_size())
                    .set_volume_type(e.volume_type().cloned())
                    .set_encrypted(e.encrypted())
                    .set_delete_on_termination(e.delete_on_termination())
                    .set_iops(e.iops())
                    .set_throughput(e.throughput())
                    .set_kms_key_id(e.kms_key_id().map(str::to_string))
                    .set_snapshot_id(e.snapshot_id().map(str::to_string))
                    .set_volume_initialization_rate(e.volume_initialization_rate())
                    .build()
            });
            BlockDeviceMapping::builder()
                .set_device_name(b.device_name().map(str::to_string))
                .set_ebs(ebs)
                .build()
        })
        .collect()
}

/// RunInstances for one `instance_type` instance in `subnet` from template data `data`, with
/// `tags` on the instance and its volumes; a `spot` instance when set. Unsent.
pub fn run_instances_request(
    ec2: &aws_sdk_ec2::Client,
    data: &RequestLaunchTemplateData,
    instance_type: &str,
    subnet: &str,
    tags: &BTreeMap<String, String>,
    spot: bool,
) -> RunInstancesFluentBuilder {
    let req = ec2
        .run_instances()
        .min_count(1)
        .max_count(1)
        .instance_type(InstanceType::from(instance_type))
        .set_image_id(data.image_id().map(str::to_string))
        .set_user_data(data.user_data().map(str::to_string));
    let req = if data.network_interfaces().is_empty() {
        req.subnet_id(subnet)
            .set_security_group_ids(Some(data.security_group_ids().to_vec()))
    } else {
        req.set_network_interfaces(Some(interfaces(data, subnet)))
    };
    let devices = block_devices(data);
    req.set_iam_instance_profile(data.iam_instance_profile().map(instance_profile))
        .set_metadata_options(data.metadata_options().map(metadata_options))
        .set_monitoring(data.monitoring().map(|m| {
            RunInstancesMonitoringEnabled::builder()
                .enabled(m.enabled().unwrap_or(false))
                .build()
        }))
        .set_block_device_mappings(Some(devices).filter(|d| !d.is_empty()))
        .set_placement(data.placement().map(placement))
        .set_cpu_options(data.cpu_options().map(|c| {
            CpuOptionsRequest::builder()
                .set_nested_virtualization(c.nested_virtualization().cloned())
                .build()
        }))
        .set_capacity_reservation_specification(
            data.capacity_reservation_specification()
                .map(capacity_reservation),
        )
        .set_instance_market_options(market_type(data, spot).map(|market| {
            InstanceMarketOptionsRequest::builder()
                .market_type(market)
                .build()
        }))
        .set_tag_specifications(Some(tag_specifications(data, tags)))
}

/// The template's instance profile in RunInstances' form.
fn instance_profile(
    p: &LaunchTemplateIamInstanceProfileSpecificationRequest,
) -> IamInstanceProfileSpecification {
    IamInstanceProfileSpecification::builder()
        .set_arn(p.arn().map(str::to_string))
        .set_name(p.name().map(str::to_string))
        .build()
}

/// The template's instance metadata options in RunInstances' form.
fn metadata_options(
    m: &LaunchTemplateInstanceMetadataOptionsRequest,
) -> InstanceMetadataOptionsRequest {
    InstanceMetadataOptionsRequest::builder()
        .set_http_endpoint(
            m.http_endpoint()
                .map(|v| InstanceMetadataEndpointState::from(v.as_str())),
        )
        .set_http_protocol_ipv6(
            m.http_protocol_ipv6()
                .map(|v| InstanceMetadataProtocolState::from(v.as_str())),
        )
        .set_http_put_response_hop_limit(m.http_put_response_hop_limit())
        .set_http_tokens(m.http_tokens().map(|v| HttpTokensState::from(v.as_str())))
        .set_instance_metadata_tags(
            m.instance_metadata_tags()
                .map(|v| InstanceMetadataTagsState::from(v.as_str())),
        )
        .build()
}

/// The template's tenancy, placement group and partition in RunInstances' form.
fn placement(p: &LaunchTemplatePlacementRequest) -> Placement {
    Placement::builder()
        .set_tenancy(p.tenancy().cloned())
        .set_group_id(p.group_id().map(str::to_string))
        .set_partition_number(p.partition_number())
        .build()
}

/// The template's capacity reservation preference and target in RunInstances' form.
fn capacity_reservation(
    c: &LaunchTemplateCapacityReservationSpecificationRequest,
) -> CapacityReservationSpecification {
    CapacityReservationSpecification::builder()
        .set_capacity_reservation_preference(c.capacity_reservation_preference().cloned())
        .set_capacity_reservation_target(c.capacity_reservation_target().cloned())
        .build()
}

/// The market the instance launches in: spot when `spot`, else the template's.
fn market_type(data: &RequestLaunchTemplateData, spot: bool) -> Option<MarketType> {
    // A spot launch is asked for by CreateFleet's target capacity type, not by the template;
    // the RunInstances it stands for carries it as the market type, so EC2 checks the
    // permissions of a spot launch (upstream's validation does the same).
    if spot {
        Some(MarketType::Spot)
    } else {
        data.instance_market_options()
            .and_then(|m| m.market_type().cloned())
    }
}

/// The template's tag specifications, then `tags` on the instance and its volumes.
fn tag_specifications(
    data: &RequestLaunchTemplateData,
    tags: &BTreeMap<String, String>,
) -> Vec<TagSpecification> {
    data.tag_specifications()
        .iter()
        .map(|t| {
            TagSpecification::builder()
                .set_resource_type(t.resource_type().cloned())
                .set_tags(Some(t.tags().to_vec()))
                .build()
        })
        .chain(
            [ResourceType::Instance, ResourceType::Volume]
                .into_iter()
                .map(|resource| tag_spec(resource, tags)),
        )
        .collect()
}

#[cfg(test)]
mod tests;
