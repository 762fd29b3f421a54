//! Launching one instance for a NodeClaim: launch templates per resolved configuration,
//! a CreateFleet `instant` request over the allowed offerings, and fallback past offerings
//! that report insufficient capacity.
//!
//! The planning (filtering types, choosing the capacity type, laying out overrides, tags, user
//! data) is `nodewright-aws-model`'s; this module gathers its inputs from the class, the claim
//! and EC2, makes the templates exist, calls CreateFleet, and feeds capacity errors back into
//! the unavailable-offerings cache before planning again.

pub mod batch;
pub mod claim;
mod claim_launch;
mod described;
mod errors;
pub mod failures;
pub mod fleet;
pub mod resolved;
mod state;
pub mod template;
pub(crate) mod userdata;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_aws_model::ice::{FleetError, SPOT_ROLE_MISSING_CODE};
use nodewright_aws_model::launch::{FleetOverride, FleetRequest, LaunchError, plan_launch};
use nodewright_aws_model::subnets::{Deduction, SubnetInfo};
use nodewright_cloud::{CloudError, Instance, Launched};
use nodewright_core::labels::aws;
use nodewright_core::model::{CapacityType, InstanceType};
use nodewright_core::time::Timestamp;

use crate::cloud::{AwsCloud, now};
use crate::error::AwsError;
use crate::nodeclass::{ResolvedAmi, ResolvedNodeClass};

pub use batch::BatchingFleet;
use claim_launch::ClaimLaunch;
pub(crate) use described::ami_serves;
use described::{describe, launched};
use errors::{
    insufficient, is_missing_template, is_stale_resolution, matching_override, not_ready_reason,
    note_failed, nothing_launched,
};
pub use failures::FailureKind;
pub use fleet::{FleetApi, FleetCall, FleetFailure, FleetInstance, FleetOutcome, SdkFleet};
pub use state::LaunchState;
pub use template::{TemplateCache, TemplateSpec};
pub use userdata::ClusterInfo;

/// At most this many CreateFleet calls per launch; each one after the first follows capacity
/// errors that removed at least one offering.
const MAX_ATTEMPTS: usize = 8;

impl AwsCloud {
    /// The same provider with CreateFleet sent through `fleet` (as is: wrap it in a
    /// [`BatchingFleet`] to keep batching).
    pub fn with_fleet_api(mut self, fleet: Arc<dyn FleetApi>) -> Self {
        self.launch.fleet = fleet;
        self
    }

    /// The same provider with nodes joining the cluster at `cluster` (endpoint, CA, service
    /// CIDR), which every family's user data but Custom needs; EKS is never asked.
    pub fn with_cluster_info(mut self, cluster: ClusterInfo) -> Self {
        self.launch.cluster = crate::cluster::ClusterFacts::fixed(cluster);
        self
    }

    /// The same provider with nodes joining the cluster as `facts` say, which may ask EKS
    /// again for a service CIDR it did not give yet.
    pub fn with_cluster_facts(mut self, facts: crate::cluster::ClusterFacts) -> Self {
        self.launch.cluster = facts;
        self
    }

    /// How nodes of `family` reach the cluster. Only AL2023 needs the service CIDR, so only
    /// for it is EKS asked again (within [`crate::cluster::ClusterFacts`]'s window) while the
    /// CIDR is unknown.
    pub async fn cluster_for(&self, family: nodewright_aws_model::AmiFamily) -> ClusterInfo {
        if family == nodewright_aws_model::AmiFamily::AL2023 {
            self.launch
                .cluster
                .current_with_service_cidr(&self.clients)
                .await
        } else {
            self.launch.cluster()
        }
    }

    /// Deletes this cluster's launch templates that no launch used for `idle`: run
    /// periodically (upstream keeps a template a minute after its last use). The first call
    /// after a start also picks up templates an earlier process created.
    pub async fn delete_unused_launch_templates(
        &self,
        idle: std::time::Duration,
    ) -> Result<Vec<String>, CloudError> {
        if !self
            .launch
            .hydrated
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let hydrated = self
                .launch
                .templates
                .hydrate(&self.clients, &self.settings.cluster_name)
                .await;
            if let Err(e) = hydrated {
                // Try again on the next call.
                self.launch
                    .hydrated
                    .store(false, std::sync::atomic::Ordering::SeqCst);
                return Err(e.into());
            }
        }
        Ok(self
            .launch
            .templates
            .delete_unused(&self.clients, idle)
            .await?)
    }

    /// The instance an earlier process launched for `claim` and died before recording (a
    /// crash, a lost response, a leader change between CreateFleet and the claim's status
    /// write), so a claim is launched at most once. Only claims created before this process
    /// started launching are looked up: any later one was created, and so launched, here.
    async fn launched_before(
        &self,
        claim: &NodeClaim,
        name: &str,
    ) -> Result<Option<Instance>, CloudError> {
        let created = claim
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second());
        if created.is_some_and(|c| c > self.launch.started.unix_seconds()) {
            return Ok(None);
        }
        Ok(
            crate::instances::for_claim(&self.clients, &self.settings.cluster_name, name)
                .await?
                .map(|i| i.instance),
        )
    }

    /// Launches one instance for the claim (launch templates, CreateFleet, ICE fallback).
    pub async fn launch(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Launched, CloudError> {
        let name = claim::name(claim);
        let class = class.ok_or_else(|| CloudError::NodeClassNotReady {
            name: claim.spec.node_class_ref.name.clone(),
            reason: format!("nodeclaim {name} references a node class that does not exist"),
        })?;
        let resolved = self.ready_resolution(class).await?;
        let types = self.instance_types_for(class, &resolved).await?;
        let launch = ClaimLaunch::new(claim, class, &resolved, types, &self.settings.cluster_name)?;
        let cluster = self.cluster_for(launch.family).await;
        let base = launch.base(&cluster);
        if let Some(found) = self.launched_before(claim, name).await? {
            tracing::info!(nodeclaim = %name, provider_id = %found.provider_id, "taking over the instance an earlier process launched for this claim");
            return describe(
                found,
                None,
                &launch.types,
                &resolved,
                self.region(),
                launch.efa,
            );
        }
        self.launch_with_fallback(&launch, &base).await
    }

    /// The class resolved against AWS (cached for a while), or why it cannot launch yet.
    async fn ready_resolution(
        &self,
        class: &EC2NodeClass,
    ) -> Result<Arc<ResolvedNodeClass>, CloudError> {
        let resolved = self.launch.resolved.get(self, class).await?;
        if !resolved.is_ready() {
            return Err(CloudError::NodeClassNotReady {
                name: class.metadata.name.clone().unwrap_or_default(),
                reason: not_ready_reason(&resolved),
            });
        }
        Ok(resolved)
    }

    /// Plans and calls CreateFleet until an instance launches, each attempt without the
    /// offerings earlier ones found without capacity; at most [`MAX_ATTEMPTS`] calls.
    async fn launch_with_fallback(
        &self,
        launch: &ClaimLaunch<'_>,
        base: &userdata::BaseConfig<'_>,
    ) -> Result<Launched, CloudError> {
        let mut failed: Vec<(String, String, String)> = Vec::new();
        let mut retried_missing_template = false;
        let mut attempt = 0;
        while attempt < MAX_ATTEMPTS {
            attempt += 1;
            let now = now();
            let (types, plan, deduction) = match self.plan_attempt(launch, now) {
                Ok(p) => p,
                Err(e) => return Err(launch.plan_error(e, failed)),
            };
            let call = self
                .prepare_fleet_call(launch, base, &types, &plan, &deduction)
                .await?;
            let outcome = match self.create_fleet(&call, &deduction).await {
                Ok(o) => o,
                Err(e) if is_missing_template(&e) && !retried_missing_template => {
                    // A template deleted behind our back: forget it and build it again, once.
                    retried_missing_template = true;
                    for c in &call.configs {
                        self.launch.templates.forget(&c.template_name);
                    }
                    attempt -= 1;
                    continue;
                }
                Err(e) => {
                    if is_stale_resolution(&e) {
                        self.launch.resolved.clear().await;
                    }
                    return Err(e.into());
                }
            };
            self.observer
                .fleet_errors(&call, &outcome.errors, launch.resolved);
            let marked = self.record_failures(
                &call,
                &outcome.errors,
                launch.ice_scope.as_deref(),
                launch.spread_group.as_deref(),
                now,
                &mut failed,
            );
            if let Some(instance) = outcome.instances.first() {
                return self.take_launched(launch, &call, instance, &types, now);
            }
            if !marked {
                return Err(nothing_launched(&outcome.errors));
            }
            tracing::info!(
                nodeclaim = %launch.name,
                failed = failed.len(),
                "offerings without capacity marked unavailable; launching with the rest"
            );
        }
        Err(insufficient(
            &launch.name,
            &format!("no instance after {MAX_ATTEMPTS} CreateFleet calls"),
            failed,
        ))
    }

    /// Plans one attempt at `now` over the claim's types less full reservations, unavailable
    /// offerings and shifted zones, and deducts the addresses the plan is predicted to take.
    fn plan_attempt(
        &self,
        launch: &ClaimLaunch<'_>,
        now: Timestamp,
    ) -> Result<(Vec<InstanceType>, FleetRequest, Deduction), LaunchError> {
        let mut types = launch.types.clone();
        self.launch
            .reservations()
            .restrict(&mut types, now.unix_seconds());
        let subnets = subnet_infos(launch.resolved);
        // Choosing subnets, planning and deducting the prediction happen under one lock,
        // so launches alongside this one see its deduction before they choose.
        let mut addresses = self.launch.addresses();
        let chosen = {
            let cache = self.launch.unavailable();
            cache.apply_in(&mut types, launch.ice_scope.as_deref(), now);
            crate::zonal_shift::shifts::close_shifted_offerings(&mut types, &self.shifted_zones());
            addresses.zonal_subnets(&subnets, &cache, now)
        };
        let input = launch.input(&types, chosen);
        let plan = plan_launch(&input)?;
        let deduction = addresses.deduct(&subnets, &input.subnets, &plan.predicted_ips, now);
        Ok((types, plan, deduction))
    }

    /// The CreateFleet call for `plan`, its launch templates made to exist; when they cannot
    /// be, the addresses the plan was predicted to take are given back.
    async fn prepare_fleet_call(
        &self,
        launch: &ClaimLaunch<'_>,
        base: &userdata::BaseConfig<'_>,
        types: &[InstanceType],
        plan: &FleetRequest,
        deduction: &Deduction,
    ) -> Result<FleetCall, CloudError> {
        let configs = match self
            .templates_for(
                base,
                types,
                plan.capacity_type,
                &plan.overrides,
                &plan.tags,
                launch.efa,
            )
            .await
        {
            Ok(c) => c,
            Err(e) => {
                self.launch.addresses().settle(deduction, &BTreeSet::new());
                return Err(e);
            }
        };
        launch.warn_few_types_on_demand(plan.capacity_type, &configs);
        Ok(launch.fleet_call(plan, configs))
    }

    /// Sends `call`, then settles the attempt's predicted addresses against the subnets it
    /// launched into.
    async fn create_fleet(
        &self,
        call: &FleetCall,
        deduction: &Deduction,
    ) -> Result<FleetOutcome, AwsError> {
        let result = self.launch.fleet.create_fleet(call).await;
        let launched_into = match &result {
            Ok(o) => launched_subnets(call, o),
            Err(_) => BTreeSet::new(),
        };
        self.launch.addresses().settle(deduction, &launched_into);
        result
    }

    /// The claim's result for the instance `call` launched, with the launch's placement
    /// labels; a reserved instance is counted against its reservation.
    fn take_launched(
        &self,
        launch: &ClaimLaunch<'_>,
        call: &FleetCall,
        instance: &FleetInstance,
        types: &[InstanceType],
        now: Timestamp,
    ) -> Result<Launched, CloudError> {
        let mut out = launched(
            call,
            instance,
            types,
            launch.resolved,
            self.region(),
            now,
            launch.efa,
        )?;
        for (key, value) in launch.placement.labels() {
            out.labels.insert(key.to_string(), value);
        }
        if let Some(id) = out.labels.get(aws::CAPACITY_RESERVATION_ID) {
            self.launch.reservations().launched(id);
        }
        Ok(out)
    }

    /// Caches what the errors say about capacity; true when at least one offering (or a whole
    /// capacity type, or a zone of the spread group `spread_group`) was marked.
    fn record_failures(
        &self,
        call: &FleetCall,
        errors: &[FleetFailure],
        scope: Option<&str>,
        spread_group: Option<&str>,
        now: Timestamp,
        failed: &mut Vec<(String, String, String)>,
    ) -> bool {
        let mut cache = self.launch.unavailable();
        let mut marked = false;
        for e in errors {
            let Some(o) = matching_override(call, e) else {
                if e.code == SPOT_ROLE_MISSING_CODE {
                    // Not about one offering: spot as a whole is out until the role exists.
                    cache.mark_capacity_type(CapacityType::Spot, now);
                    marked = true;
                } else {
                    tracing::warn!(code = %e.code, message = %e.message, "CreateFleet error for no known override");
                }
                continue;
            };
            let kind = failures::classify(
                &e.code,
                &e.message,
                call.capacity_type,
                spread_group.is_some(),
                o.reservation_id.is_some(),
            );
            match (kind, spread_group, o.reservation_id.as_deref()) {
                (FailureKind::SpreadZoneFull, Some(group), _) => {
                    tracing::info!(placement_group = %group, zone = %o.zone, code = %e.code, "spread placement group is full in this zone");
                    cache.mark_group_zone(group, &o.zone, now);
                }
                (FailureKind::ReservationFull, _, Some(id)) => {
                    // Upstream marks the reservation, not the offering: another reservation
                    // of the same type and zone may still have room.
                    self.launch.reservations().exhausted(id);
                }
                (FailureKind::SpotRoleMissing, _, _) => {
                    cache.mark_capacity_type(CapacityType::Spot, now);
                }
                (FailureKind::Offering, _, _) => {
                    let fe = FleetError {
                        code: e.code.clone(),
                        capacity_type: call.capacity_type,
                        instance_type: o.instance_type.clone(),
                        zone: o.zone.clone(),
                        subnet_id: Some(o.subnet_id.clone()),
                    };
                    cache.record_in(&fe, scope, now);
                }
                _ => {
                    tracing::warn!(code = %e.code, message = %e.message, instance_type = %o.instance_type, zone = %o.zone, "CreateFleet error");
                    continue;
                }
            }
            marked = true;
            note_failed(failed, o, call.capacity_type);
        }
        marked
    }

    /// One launch template per (image, max pods, kube-reserved) group of the overrides' types,
    /// with the launch's placement (tenancy, group, partition), each made to exist.
    async fn templates_for(
        &self,
        base: &userdata::BaseConfig<'_>,
        types: &[InstanceType],
        capacity_type: CapacityType,
        overrides: &[FleetOverride],
        tags: &BTreeMap<String, String>,
        efa: bool,
    ) -> Result<Vec<fleet::TemplateConfig>, CloudError> {
        let mut groups: BTreeMap<String, (TemplateSpec, Vec<FleetOverride>)> = BTreeMap::new();
        let mut order: Vec<String> = Vec::new();
        let mut no_image: Vec<String> = Vec::new();
        for (o, it, ami) in with_images(overrides, types, &base.resolved.amis, &mut no_image) {
            let spec = base.template(
                ami,
                it,
                capacity_type,
                tags,
                efa,
                o.reservation_id.as_deref(),
            )?;
            let key = spec.name();
            if !groups.contains_key(&key) {
                order.push(key.clone());
            }
            groups
                .entry(key)
                .or_insert_with(|| (spec, Vec::new()))
                .1
                .push(o);
        }
        if groups.is_empty() {
            return Err(CloudError::InvalidRequest(format!(
                "no instance types satisfy requirements of amis (types without an image: {})",
                no_image
                    .iter()
                    .take(10)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let mut configs = Vec::new();
        for key in order {
            let (spec, overrides) = groups.remove(&key).unwrap_or_else(|| unreachable!());
            let template_name = self
                .launch
                .templates
                .ensure(&self.clients, &spec)
                .await
                .map_err(CloudError::from)?;
            // The size of the user data rendered for the class (before base64), upstream's
            // karpenter_ec2nodeclasses_userdata_bytes, measured as its template is made.
            if let Some(raw) = nodewright_aws_model::userdata::base64::decode(&spec.user_data) {
                let class = base.class.metadata.name.as_deref().unwrap_or_default();
                self.observer.user_data_rendered(class, raw.len());
            }
            configs.push(fleet::TemplateConfig {
                template_name,
                overrides,
            });
        }
        Ok(configs)
    }
}

/// Set on a claim whose NodePool's minValues were relaxed to place it.
const MIN_VALUES_RELAXED_ANNOTATION: &str = "karpenter.sh/nodeclaim-min-values-relaxed";

/// The class's `context` for CreateFleet, left out (as upstream does) when the claim's
/// minValues were relaxed: the reserved capacity a context names was chosen for the full
/// flexibility the relaxed claim no longer has.
fn fleet_context(claim: &NodeClaim, class: &EC2NodeClass) -> Option<String> {
    let relaxed = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MIN_VALUES_RELAXED_ANNOTATION))
        .is_some_and(|v| v == "true");
    class.spec.context.clone().filter(|_| !relaxed)
}

/// The class's subnets with their counted free addresses.
pub(crate) fn subnet_infos(resolved: &ResolvedNodeClass) -> Vec<SubnetInfo> {
    resolved
        .subnets
        .iter()
        .map(|s| SubnetInfo {
            id: s.id.clone(),
            zone: s.zone.clone(),
            available_ips: s.available_ips,
        })
        .collect()
}

/// The subnets CreateFleet launched into: each instance's own, else its override's.
fn launched_subnets(call: &FleetCall, outcome: &FleetOutcome) -> BTreeSet<String> {
    outcome
        .instances
        .iter()
        .filter_map(|i| {
            i.subnet_id.clone().or_else(|| {
                call.overrides()
                    .find(|o| {
                        o.instance_type == i.instance_type
                            && i.zone.as_deref().is_none_or(|z| z == o.zone)
                    })
                    .map(|o| o.subnet_id.clone())
            })
        })
        .collect()
}

/// Each override whose type some image serves, with the type and that image (the first
/// that serves it), its `image_id` set; the names of types no image serves go to `no_image`.
fn with_images<'a>(
    overrides: &[FleetOverride],
    types: &'a [InstanceType],
    amis: &'a [ResolvedAmi],
    no_image: &mut Vec<String>,
) -> Vec<(FleetOverride, &'a InstanceType, &'a ResolvedAmi)> {
    let mut out = Vec::new();
    for o in overrides {
        let Some(it) = types.iter().find(|t| t.name == o.instance_type) else {
            continue;
        };
        let Some(ami) = amis.iter().find(|a| ami_serves(a, it)) else {
            no_image.push(o.instance_type.clone());
            continue;
        };
        let mut o = o.clone();
        o.image_id = Some(ami.id.clone());
        out.push((o, it, ami));
    }
    out
}

#[cfg(test)]
mod tests;
