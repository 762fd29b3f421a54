//! The CreateFleet call behind a narrow trait: [`FleetApi`] takes plain data ([`FleetCall`])
//! and returns plain data ([`FleetOutcome`]). [`SdkFleet`] sends it through aws-sdk-rust; a
//! test double can wrap it to report capacity errors a test peer never produces.

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, FleetType, InstanceType as SdkInstanceType,
    OnDemandOptionsRequest, ResourceType, SpotAllocationStrategy, SpotOptionsRequest, Tag,
    TagSpecification, TargetCapacitySpecificationRequest,
};
use nodewright_aws_model::launch::{AllocationStrategy, FleetOverride};
use nodewright_core::model::CapacityType;

use crate::AwsClients;
use crate::error::AwsError;

/// One launch template and the (instance type, zone) overrides launched from it.
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateConfig {
    pub template_name: String,
    pub overrides: Vec<FleetOverride>,
}

/// An instant CreateFleet for one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetCall {
    pub capacity_type: CapacityType,
    pub default_target_capacity_type: &'static str,
    pub allocation_strategy: AllocationStrategy,
    pub total_target_capacity: u32,
    pub configs: Vec<TemplateConfig>,
    /// Tags for the instance, its volumes and the fleet.
    pub tags: BTreeMap<String, String>,
    /// The class's `context`.
    pub context: Option<String>,
}

impl FleetCall {
    pub fn overrides(&self) -> impl Iterator<Item = &FleetOverride> {
        self.configs.iter().flat_map(|c| &c.overrides)
    }
}

/// A launched instance as CreateFleet reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetInstance {
    pub instance_id: String,
    pub instance_type: String,
    pub subnet_id: Option<String>,
    pub zone: Option<String>,
}

/// One override CreateFleet could not launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetFailure {
    pub code: String,
    pub message: String,
    pub instance_type: Option<String>,
    pub subnet_id: Option<String>,
    pub zone: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetOutcome {
    pub instances: Vec<FleetInstance>,
    pub errors: Vec<FleetFailure>,
}

#[async_trait]
pub trait FleetApi: Send + Sync {
    async fn create_fleet(&self, call: &FleetCall) -> Result<FleetOutcome, AwsError>;
}

/// CreateFleet through aws-sdk-rust.
#[derive(Clone, Debug)]
pub struct SdkFleet {
    clients: AwsClients,
}

impl SdkFleet {
    pub fn new(clients: AwsClients) -> Self {
        SdkFleet { clients }
    }
}

/// `tags` as one tag specification for `resource`.
pub(crate) fn tag_spec(
    resource: ResourceType,
    tags: &BTreeMap<String, String>,
) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(resource)
        .set_tags(Some(
            tags.iter()
                .map(|(k, v)| Tag::builder().key(k).value(v).build())
                .collect(),
        ))
        .build()
}

/// The request's `LaunchTemplateConfigs`: one per template, each override naming its type,
/// subnet, zone, priority and (as upstream sends it) the image its template launches.
pub fn template_configs(call: &FleetCall) -> Vec<FleetLaunchTemplateConfigRequest> {
    call.configs
        .iter()
        .map(|config| {
            let spec = FleetLaunchTemplateSpecificationRequest::builder()
                .launch_template_name(&config.template_name)
                .version("$Latest")
                .build();
            let overrides = config
                .overrides
                .iter()
                .map(|o| {
                    FleetLaunchTemplateOverridesRequest::builder()
                        .instance_type(SdkInstanceType::from(o.instance_type.as_str()))
                        .subnet_id(&o.subnet_id)
                        .availability_zone(&o.zone)
                        .priority(o.priority)
                        .set_image_id(o.image_id.clone())
                        .build()
                })
                .collect();
            FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(spec)
                .set_overrides(Some(overrides))
                .build()
        })
        .collect()
}

impl SdkFleet {
    /// The CreateFleet request for `call`, unsent (launches send it; node class validation
    /// sends it as a dry run).
    pub fn request(
        &self,
        call: &FleetCall,
    ) -> aws_sdk_ec2::operation::create_fleet::builders::CreateFleetFluentBuilder {
        let mut req = self
            .clients
            .ec2
            .create_fleet()
            .r#type(FleetType::Instant)
            .target_capacity_specification(
                TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(call.total_target_capacity as i32)
                    .default_target_capacity_type(DefaultTargetCapacityType::from(
                        call.default_target_capacity_type,
                    ))
                    .build(),
            )
            .set_context(call.context.clone());
        for resource in [
            ResourceType::Instance,
            ResourceType::Volume,
            ResourceType::Fleet,
        ] {
            req = req.tag_specifications(tag_spec(resource, &call.tags));
        }
        if call.default_target_capacity_type == "reserved-capacity" {
            // Interruptible reservations are reached through reserved-capacity options.
            req = req.reserved_capacity_options(
                aws_sdk_ec2::types::ReservedCapacityOptionsRequest::builder()
                    .reservation_types(
                        aws_sdk_ec2::types::FleetReservationType::InterruptibleCapacityReservation,
                    )
                    .build(),
            );
        }
        req = match call.capacity_type {
            CapacityType::Spot => req.spot_options(
                SpotOptionsRequest::builder()
                    .allocation_strategy(SpotAllocationStrategy::from(
                        call.allocation_strategy.as_str(),
                    ))
                    .build(),
            ),
            _ => req.on_demand_options(
                OnDemandOptionsRequest::builder()
                    .allocation_strategy(FleetOnDemandAllocationStrategy::from(
                        call.allocation_strategy.as_str(),
                    ))
                    .build(),
            ),
        };
        req.set_launch_template_configs(Some(template_configs(call)))
    }
}

#[async_trait]
impl FleetApi for SdkFleet {
    async fn create_fleet(&self, call: &FleetCall) -> Result<FleetOutcome, AwsError> {
        let out = self
            .request(call)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("CreateFleet", e))?;

        let mut outcome = FleetOutcome::default();
        for i in out.instances() {
            let o = i
                .launch_template_and_overrides()
                .and_then(|l| l.overrides());
            let instance_type = i
                .instance_type()
                .or_else(|| o.and_then(|o| o.instance_type()))
                .map(|t| t.as_str().to_string())
                .unwrap_or_default();
            for id in i.instance_ids() {
                outcome.instances.push(FleetInstance {
                    instance_id: id.clone(),
                    instance_type: instance_type.clone(),
                    subnet_id: o.and_then(|o| o.subnet_id()).map(str::to_string),
                    zone: o.and_then(|o| o.availability_zone()).map(str::to_string),
                });
            }
        }
        for e in out.errors() {
            let o = e
                .launch_template_and_overrides()
                .and_then(|l| l.overrides());
            outcome.errors.push(FleetFailure {
                code: e.error_code().unwrap_or_default().to_string(),
                message: e.error_message().unwrap_or_default().to_string(),
                instance_type: o
                    .and_then(|o| o.instance_type())
                    .map(|t| t.as_str().to_string()),
                subnet_id: o.and_then(|o| o.subnet_id()).map(str::to_string),
                zone: o.and_then(|o| o.availability_zone()).map(str::to_string),
            });
        }
        Ok(outcome)
    }
}
