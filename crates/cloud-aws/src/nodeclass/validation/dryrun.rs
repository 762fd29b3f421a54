//! The launch a node of the class would get, built with the launch path's own builders (user
//! data, launch template, CreateFleet request) for one instance of the chosen type and
//! offering, registering with the chosen NodePool's labels and taints, then sent as dry runs.

use std::collections::BTreeMap;
use std::time::Instant;

use aws_sdk_ec2::config::retry::RetryConfig;
use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_aws_model::launch::{AllocationStrategy, FleetOverride, LaunchInput, launch_tags};
use nodewright_aws_model::placement::LaunchPlacement;
use nodewright_aws_model::userdata::{UserDataError, generate, registration_taints};
use nodewright_core::model::CapacityType;
use nodewright_core::time::Timestamp;

use super::run_instances::run_instances_request;
use super::{
    CLUSTER_CIDR_RESOLUTION_FAILED, Call, Choice, LAUNCH_CONFIGURATION_INVALID, PoolDemand,
    USER_DATA_SIZE_LIMIT_EXCEEDED, Verdict, cache_key, choose_launch, classify,
    cluster_cidr_missing, outcome, with_validation,
};
use crate::cloud::AwsCloud;
use crate::error::AwsError;
use crate::launch::ClusterInfo;
use crate::launch::fleet::{FleetCall, SdkFleet, TemplateConfig};
use crate::launch::template::{self, TemplateSpec};
use crate::launch::userdata::BaseConfig;
use crate::nodeclass::ResolvedNodeClass;
use crate::nodeclass::conditions::VALIDATION_SUCCEEDED;
use nodewright_aws_model::class_input::node_class_input;

/// A dry run's answer: any success EC2 sends back instead of `DryRunOperation` (a peer that
/// ignores the flag) counts as a pass too.
fn answer<T, E, R>(call: Call, r: Result<T, aws_sdk_ec2::error::SdkError<E, R>>) -> Verdict
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match r {
        Ok(_) => Verdict::Passed,
        Err(e) => classify(call, &AwsError::from_sdk(call.operation(), e)),
    }
}

/// One attempt per dry run: a throttled check is retried on the next reconcile rather than
/// adding to the throttling now.
fn no_retries() -> aws_sdk_ec2::config::Builder {
    aws_sdk_ec2::config::Builder::default().retry_config(RetryConfig::disabled())
}

fn condition_true(resolved: &ResolvedNodeClass, type_: &str) -> bool {
    resolved
        .status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// The subnet to launch into in `zone`: the first there (most free addresses).
fn subnet_in<'a>(resolved: &'a ResolvedNodeClass, zone: &str) -> Option<&'a str> {
    resolved
        .subnets
        .iter()
        .find(|s| s.zone == zone)
        .map(|s| s.id.as_str())
}

impl AwsCloud {
    /// Brings `resolved`'s `ValidationSucceeded` (and `Ready`) up to date with what a launch
    /// from `class` would meet, one that a NodePool of `pools` (those using the class) could
    /// make. Only a class whose own checks passed is looked at; its verdict is cached for
    /// [`super::TTL`] per class and key.
    pub async fn validate_launch(
        &self,
        class: &EC2NodeClass,
        resolved: &mut ResolvedNodeClass,
        pools: &[PoolDemand],
        now: Timestamp,
    ) {
        let previous = class
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        // First, as upstream: without the CIDR no AL2023 node can join, whatever else holds.
        // A CIDR EKS did not give at start is asked for again here.
        let family = node_class_input(class).map(|i| i.ami_family).ok();
        let cluster = match family {
            Some(f) => self.cluster_for(f).await,
            None => self.launch.cluster(),
        };
        if let Some(why) = family.and_then(|f| cluster_cidr_missing(f, &cluster)) {
            tracing::info!(nodeclass = %class.metadata.name.as_deref().unwrap_or(""), "{why}");
            let conds = resolved.status.conditions.clone().unwrap_or_default();
            resolved.status.conditions = Some(with_validation(
                &conds,
                &Err((CLUSTER_CIDR_RESOLUTION_FAILED.to_string(), why)),
                &previous,
                class.metadata.generation,
                now,
            ));
            return;
        }
        if !condition_true(resolved, VALIDATION_SUCCEEDED) {
            return;
        }
        let verdict = self.launch_verdict(class, resolved, pools, &cluster).await;
        if let Verdict::Undecided { message } | Verdict::Failed { message, .. } = &verdict {
            tracing::info!(nodeclass = %class.metadata.name.as_deref().unwrap_or(""), "{message}");
        }
        let validated = outcome(verdict, &previous);
        let conds = resolved.status.conditions.clone().unwrap_or_default();
        resolved.status.conditions = Some(with_validation(
            &conds,
            &validated,
            &previous,
            class.metadata.generation,
            now,
        ));
    }

    /// The cached verdict for `class`, else a fresh one (cached unless undecided).
    async fn launch_verdict(
        &self,
        class: &EC2NodeClass,
        resolved: &ResolvedNodeClass,
        pools: &[PoolDemand],
        cluster: &ClusterInfo,
    ) -> Verdict {
        let name = class.metadata.name.clone().unwrap_or_default();
        let types = match self.instance_types_for(class, resolved).await {
            Ok(t) => t,
            Err(e) => {
                return Verdict::Undecided {
                    message: format!("listing the class's instance types: {e}"),
                };
            }
        };
        let Some(choice) = choose_launch(&types, &resolved.amis, pools) else {
            return Verdict::Undecided {
                message: "no instance type offered in the class's zones is served by its AMIs, so no launch could be checked".into(),
            };
        };
        if !pools.is_empty() && choice.pool.is_none() {
            tracing::info!(nodeclass = %name, "no NodePool using the class admits a launch it offers; validating with one the class alone allows");
        }
        let key = cache_key(
            class.metadata.uid.as_deref().unwrap_or(""),
            &resolved.hash,
            resolved,
            &choice.key(),
            &(cluster, self.settings.disable_dry_run),
        );
        if let Some(cached) = self.validation.get(&name, key, Instant::now()) {
            return cached;
        }
        let verdict = self.check_launch(class, resolved, &choice, cluster).await;
        self.validation
            .put(&name, key, verdict.clone(), Instant::now());
        verdict
    }

    /// Builds the launch `choice` describes (one instance of its type, image and offering)
    /// and, unless dry runs are off, dry-runs CreateFleet, CreateLaunchTemplate and
    /// RunInstances (upstream's order).
    async fn check_launch(
        &self,
        class: &EC2NodeClass,
        resolved: &ResolvedNodeClass,
        choice: &Choice<'_>,
        cluster: &ClusterInfo,
    ) -> Verdict {
        let (spec, tags) = match self.choice_template(class, resolved, choice, cluster) {
            Ok(t) => t,
            Err(verdict) => return verdict,
        };
        if self.settings.disable_dry_run {
            return Verdict::Passed;
        }
        let Some(subnet) = subnet_in(resolved, choice.zone) else {
            return Verdict::Undecided {
                message: format!("the class has no subnet in {}", choice.zone),
            };
        };
        let call = dry_run_fleet(class, choice, &spec, subnet, &tags);
        let fleet = SdkFleet::new(self.clients.clone())
            .request(&call)
            .dry_run(true)
            .customize()
            .config_override(no_retries())
            .send()
            .await;
        let fleet = answer(Call::CreateFleet, fleet);
        if fleet != Verdict::Passed {
            return fleet;
        }
        let created = template::create_request(&self.clients.ec2, &spec)
            .dry_run(true)
            .customize()
            .config_override(no_retries())
            .send()
            .await;
        let created = answer(Call::CreateLaunchTemplate, created);
        if created != Verdict::Passed {
            return created;
        }
        let data = template::request_data(&spec);
        let spot = choice.capacity_type == CapacityType::Spot;
        let it = &choice.instance_type.name;
        let run = run_instances_request(&self.clients.ec2, &data, it, subnet, &tags, spot)
            .dry_run(true)
            .customize()
            .config_override(no_retries())
            .send()
            .await;
        answer(Call::RunInstances, run)
    }

    /// The launch template and tags a launch of `choice` would get, built as the launch path
    /// builds them; a failed verdict when the class's configuration cannot make them.
    fn choice_template(
        &self,
        class: &EC2NodeClass,
        resolved: &ResolvedNodeClass,
        choice: &Choice<'_>,
        cluster: &ClusterInfo,
    ) -> Result<(TemplateSpec, BTreeMap<String, String>), Verdict> {
        let (it, ami, capacity_type) = (choice.instance_type, choice.ami, choice.capacity_type);
        let name = class.metadata.name.clone().unwrap_or_default();
        let family = node_class_input(class).map_err(invalid)?.ami_family;
        let base = BaseConfig {
            class,
            resolved,
            family,
            cluster_name: &self.settings.cluster_name,
            cluster,
            // What a claim of the chosen pool would register with, as upstream's validation
            // launch carries: they are part of the user data and its size.
            node_labels: choice.pool.map(|p| p.labels.clone()).unwrap_or_default(),
            taints: choice
                .pool
                .map(|p| p.taints.clone())
                .unwrap_or_else(|| registration_taints(&[], &[])),
            placement: LaunchPlacement::new(&[], resolved.placement_group.as_ref()),
        };
        let bootstrap = base.bootstrap(it, capacity_type).map_err(invalid)?;
        match generate(&bootstrap) {
            Ok(_) => {}
            Err(e @ UserDataError::TooLarge { .. }) => {
                return Err(Verdict::Failed {
                    reason: USER_DATA_SIZE_LIMIT_EXCEEDED,
                    message: format!("EC2NodeClass {name}: {e}"),
                });
            }
            Err(e) => return Err(invalid(format!("EC2NodeClass {name}: {e}"))),
        }
        let tags = launch_tags(&LaunchInput {
            nodeclass: name.clone(),
            nodepool: choice.nodepool().unwrap_or_default().to_string(),
            cluster_name: self.settings.cluster_name.clone(),
            user_tags: class.spec.tags.clone().unwrap_or_default(),
            ..Default::default()
        })
        .map_err(invalid)?;
        let spec = base
            .template(ami, it, capacity_type, &tags, false, None)
            .map_err(invalid)?;
        Ok((spec, tags))
    }
}

/// A launch the class's configuration cannot make.
fn invalid(e: impl std::fmt::Display) -> Verdict {
    Verdict::Failed {
        reason: LAUNCH_CONFIGURATION_INVALID,
        message: e.to_string(),
    }
}

/// CreateFleet for one instance of `choice` from template `spec` in `subnet`, targeting the
/// choice's capacity type with the allocation strategy a launch would use.
fn dry_run_fleet(
    class: &EC2NodeClass,
    choice: &Choice<'_>,
    spec: &TemplateSpec,
    subnet: &str,
    tags: &BTreeMap<String, String>,
) -> FleetCall {
    let (target, strategy) = match choice.capacity_type {
        CapacityType::Spot => ("spot", AllocationStrategy::PriceCapacityOptimized),
        _ => ("on-demand", AllocationStrategy::LowestPrice),
    };
    FleetCall {
        capacity_type: choice.capacity_type,
        default_target_capacity_type: target,
        allocation_strategy: strategy,
        total_target_capacity: 1,
        configs: vec![TemplateConfig {
            template_name: spec.name(),
            overrides: vec![FleetOverride {
                instance_type: choice.instance_type.name.clone(),
                zone: choice.zone.to_string(),
                subnet_id: subnet.to_string(),
                priority: choice.price,
                reservation_id: None,
                image_id: Some(choice.ami.id.clone()),
            }],
        }],
        tags: tags.clone(),
        context: class.spec.context.clone(),
    }
}
