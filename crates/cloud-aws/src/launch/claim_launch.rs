//! One claim's launch as the fleet calls see it: what the claim asks for, read once, and
//! the inputs, errors and CreateFleet calls built from it.

use std::collections::BTreeMap;

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_aws_model::AmiFamily;
use nodewright_aws_model::class_input::node_class_input;
use nodewright_aws_model::launch::{
    FleetOverride, FleetRequest, LaunchError, LaunchInput, few_types_on_demand_fallback,
    usable_offering,
};
use nodewright_aws_model::placement::{LaunchPlacement, Strategy};
use nodewright_aws_model::reservations;
use nodewright_aws_model::resources::EFA;
use nodewright_cloud::CloudError;
use nodewright_core::labels;
use nodewright_core::model::{CapacityType, InstanceType};
use nodewright_core::requirements::Requirement;
use nodewright_core::resources::Resources;
use nodewright_core::taints::Taint;

use super::described::reserved_target_type;
use super::{ClusterInfo, FleetCall, claim, fleet, fleet_context, insufficient, userdata};
use crate::nodeclass::ResolvedNodeClass;

/// What one claim's CreateFleet attempts share: the claim and its class, read once.
pub(super) struct ClaimLaunch<'a> {
    pub(super) claim: &'a NodeClaim,
    pub(super) class: &'a EC2NodeClass,
    pub(super) resolved: &'a ResolvedNodeClass,
    pub(super) cluster_name: &'a str,
    pub(super) name: String,
    pub(super) class_name: String,
    pub(super) nodepool: String,
    pub(super) family: AmiFamily,
    /// The class's instance types, before any attempt restricts them.
    pub(super) types: Vec<InstanceType>,
    pub(super) reqs: Vec<Requirement>,
    pub(super) requests: Resources,
    /// The taints the node registers with (claim taints, startup taints, unregistered).
    pub(super) taints: Vec<Taint>,
    pub(super) placement: LaunchPlacement,
    /// The placement group (and partition) capacity errors are cached for, if any.
    pub(super) ice_scope: Option<String>,
    pub(super) spread_group: Option<String>,
    pub(super) efa: bool,
}

impl<'a> ClaimLaunch<'a> {
    /// Reads the claim's requirements, requests and taints and the class's AMI family; any
    /// that cannot be read fails the launch before AWS is asked anything.
    pub(super) fn new(
        claim: &'a NodeClaim,
        class: &'a EC2NodeClass,
        resolved: &'a ResolvedNodeClass,
        types: Vec<InstanceType>,
        cluster_name: &'a str,
    ) -> Result<Self, CloudError> {
        let reqs = claim::requirements(claim)?;
        // Tenancy, placement group and partition are the claim's, not per instance type.
        let placement = LaunchPlacement::new(&reqs, resolved.placement_group.as_ref());
        // A spread group's per-zone limit closes the whole zone for the group, not one type.
        let spread_group = resolved
            .placement_group
            .as_ref()
            .filter(|g| g.strategy == Strategy::Spread)
            .map(|g| g.id.clone());
        let requests = claim::requests(claim)?;
        let (taints, startup_taints) = claim::taints(claim)?;
        let family = node_class_input(class)
            .map_err(crate::cloud::AwsCloudError::from)?
            .ami_family;
        let nodepool = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::NODEPOOL))
            .cloned()
            .unwrap_or_default();
        Ok(ClaimLaunch {
            claim,
            class,
            resolved,
            cluster_name,
            name: claim::name(claim).to_string(),
            class_name: class.metadata.name.clone().unwrap_or_default(),
            nodepool,
            family,
            types,
            ice_scope: placement.ice_scope(),
            taints: nodewright_aws_model::userdata::registration_taints(&taints, &startup_taints),
            placement,
            spread_group,
            // Upstream attaches EFA interfaces only to claims that ask for EFA.
            efa: requests.get(EFA) > 0,
            reqs,
            requests,
        })
    }

    /// What every launch template of this claim shares, for joining `cluster`.
    pub(super) fn base<'b>(&'b self, cluster: &'b ClusterInfo) -> userdata::BaseConfig<'b> {
        userdata::BaseConfig {
            class: self.class,
            resolved: self.resolved,
            family: self.family,
            cluster_name: self.cluster_name,
            cluster,
            node_labels: claim::node_labels(self.claim, &self.reqs),
            taints: self.taints.clone(),
            placement: self.placement.clone(),
        }
    }

    /// The planner's input for one attempt over `types` and the `subnets` chosen per zone.
    pub(super) fn input(
        &self,
        types: &[InstanceType],
        subnets: BTreeMap<String, String>,
    ) -> LaunchInput {
        let mut input = LaunchInput {
            nodeclaim: self.name.clone(),
            nodepool: self.nodepool.clone(),
            nodeclass: self.class_name.clone(),
            cluster_name: self.cluster_name.to_string(),
            instance_types: types.to_vec(),
            requirements: self.reqs.clone(),
            requests: self.requests.clone(),
            subnets,
            user_tags: self.class.spec.tags.clone().unwrap_or_default(),
            node_name: self.claim.status.as_ref().and_then(|s| s.node_name.clone()),
        };
        // One launch uses one kind of reservation (and one capacity block).
        let mut narrowed = input.instance_types.clone();
        reservations::narrow_reserved_for_launch(
            &mut narrowed,
            &self.resolved.capacity_reservations,
            |it, o| usable_offering(&input, it, o),
        );
        input.instance_types = narrowed;
        input
    }

    /// The error for a launch the planner refused; `failed` are the offerings earlier
    /// attempts found without capacity.
    pub(super) fn plan_error(
        &self,
        e: LaunchError,
        failed: Vec<(String, String, String)>,
    ) -> CloudError {
        match e {
            e if e.is_insufficient_capacity() => insufficient(&self.name, &e.to_string(), failed),
            e @ LaunchError::RestrictedTag { .. } => CloudError::InvalidRequest(format!(
                "EC2NodeClass {}: spec.tags: {e}",
                self.class_name
            )),
            e => CloudError::InvalidRequest(e.to_string()),
        }
    }

    /// Warns when a claim flexible to spot launches on-demand over fewer instance types than
    /// upstream recommends.
    pub(super) fn warn_few_types_on_demand(
        &self,
        capacity_type: CapacityType,
        configs: &[fleet::TemplateConfig],
    ) {
        let overrides: Vec<FleetOverride> =
            configs.iter().flat_map(|c| c.overrides.clone()).collect();
        if let Some(n) = few_types_on_demand_fallback(&self.reqs, capacity_type, &overrides) {
            tracing::warn!(
                nodeclaim = %self.name,
                instance_types = n,
                recommended = nodewright_aws_model::launch::ON_DEMAND_FALLBACK_WARN_TYPES,
                "at least {} instance types are recommended when flexible to spot but launching on-demand; this launch has {n}",
                nodewright_aws_model::launch::ON_DEMAND_FALLBACK_WARN_TYPES,
            );
        }
    }

    /// The CreateFleet call for `plan` over the launch templates `configs`.
    pub(super) fn fleet_call(
        &self,
        plan: &FleetRequest,
        configs: Vec<fleet::TemplateConfig>,
    ) -> FleetCall {
        FleetCall {
            capacity_type: plan.capacity_type,
            default_target_capacity_type: reserved_target_type(
                plan.capacity_type,
                plan.default_target_capacity_type,
                &plan.overrides,
                self.resolved,
            ),
            allocation_strategy: plan.allocation_strategy,
            total_target_capacity: plan.total_target_capacity,
            configs,
            tags: plan.tags.clone(),
            context: fleet_context(self.claim, self.class),
        }
    }
}
