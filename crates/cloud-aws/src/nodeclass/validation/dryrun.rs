//! The launch a node of the class would get, built with the launch path's own builders (user
//! data, launch template, CreateFleet request) for one on-demand instance of a type the class
//! can launch, then sent as dry runs.

use std::collections::BTreeMap;
use std::time::Instant;

use aws_sdk_ec2::config::retry::RetryConfig;
use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_aws_model::launch::{AllocationStrategy, FleetOverride, LaunchInput, launch_tags};
use nodewright_aws_model::placement::LaunchPlacement;
use nodewright_aws_model::userdata::{UserDataError, generate, registration_taints};
use nodewright_core::model::{CapacityType, InstanceType};
use nodewright_core::time::Timestamp;

use super::run_instances::run_instances_request;
use super::{
    CLUSTER_CIDR_RESOLUTION_FAILED, Call, LAUNCH_CONFIGURATION_INVALID,
    USER_DATA_SIZE_LIMIT_EXCEEDED, Verdict, cache_key, choose_instance_type, classify,
    cluster_cidr_missing, outcome, with_validation,
};
use crate::class_input::node_class_input;
use crate::cloud::AwsCloud;
use crate::error::AwsError;
use crate::launch::fleet::{FleetCall, SdkFleet, TemplateConfig};
use crate::launch::template;
use crate::launch::userdata::BaseConfig;
use crate::nodeclass::conditions::VALIDATION_SUCCEEDED;
use crate::nodeclass::{ResolvedAmi, ResolvedNodeClass};

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

/// The subnet to launch `it` into: the first (most free addresses) in a zone offering it
/// on demand.
fn subnet_for<'a>(
    resolved: &'a ResolvedNodeClass,
    it: &InstanceType,
) -> Option<(&'a str, &'a str, f64)> {
    resolved.subnets.iter().find_map(|s| {
        it.offerings
            .iter()
            .find(|o| o.zone == s.zone && o.capacity_type == CapacityType::OnDemand)
            .map(|o| (s.id.as_str(), s.zone.as_str(), o.price))
    })
}

impl AwsCloud {
    /// Brings `resolved`'s `ValidationSucceeded` (and `Ready`) up to date with what a launch
    /// from `class` would meet. Only a class whose own checks passed is looked at; its
    /// verdict is cached for [`super::TTL`] per class and key.
    pub async fn validate_launch(
        &self,
        class: &EC2NodeClass,
        resolved: &mut ResolvedNodeClass,
        now: Timestamp,
    ) {
        let previous = class
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        // First, as upstream: without the CIDR no AL2023 node can join, whatever else holds.
        let family = node_class_input(class).map(|i| i.ami_family);
        if let Some(why) = family
            .ok()
            .and_then(|f| cluster_cidr_missing(f, self.launch.cluster()))
        {
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
        let verdict = self.launch_verdict(class, resolved).await;
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
    async fn launch_verdict(&self, class: &EC2NodeClass, resolved: &ResolvedNodeClass) -> Verdict {
        let name = class.metadata.name.clone().unwrap_or_default();
        let types = match self.instance_types_for(class, resolved).await {
            Ok(t) => t,
            Err(e) => {
                return Verdict::Undecided {
                    message: format!("listing the class's instance types: {e}"),
                };
            }
        };
        let Some((it, ami)) = choose_instance_type(&types, &resolved.amis) else {
            return Verdict::Undecided {
                message: "no instance type offered on demand in the class's zones is served by its AMIs, so no launch could be checked".into(),
            };
        };
        let key = cache_key(
            class.metadata.uid.as_deref().unwrap_or(""),
            &resolved.hash,
            resolved,
            &it.name,
            &(self.launch.cluster(), self.settings.disable_dry_run),
        );
        if let Some(cached) = self.validation.get(&name, key, Instant::now()) {
            return cached;
        }
        let verdict = self.check_launch(class, resolved, it, ami).await;
        self.validation
            .put(&name, key, verdict.clone(), Instant::now());
        verdict
    }

    /// Builds the launch for one on-demand `it` from `ami` and, unless dry runs are off,
    /// dry-runs CreateFleet, CreateLaunchTemplate and RunInstances (upstream's order).
    async fn check_launch(
        &self,
        class: &EC2NodeClass,
        resolved: &ResolvedNodeClass,
        it: &InstanceType,
        ami: &ResolvedAmi,
    ) -> Verdict {
        let name = class.metadata.name.clone().unwrap_or_default();
        let invalid = |e: &dyn std::fmt::Display| Verdict::Failed {
            reason: LAUNCH_CONFIGURATION_INVALID,
            message: e.to_string(),
        };
        let family = match node_class_input(class) {
            Ok(i) => i.ami_family,
            Err(e) => return invalid(&e),
        };
        let base = BaseConfig {
            class,
            resolved,
            family,
            cluster_name: &self.settings.cluster_name,
            cluster: self.launch.cluster(),
            node_labels: BTreeMap::new(),
            taints: registration_taints(&[], &[]),
            placement: LaunchPlacement::new(&[], resolved.placement_group.as_ref()),
        };
        let bootstrap = match base.bootstrap(it, CapacityType::OnDemand) {
            Ok(b) => b,
            Err(e) => return invalid(&e),
        };
        match generate(&bootstrap) {
            Ok(_) => {}
            Err(e @ UserDataError::TooLarge { .. }) => {
                return Verdict::Failed {
                    reason: USER_DATA_SIZE_LIMIT_EXCEEDED,
                    message: format!("EC2NodeClass {name}: {e}"),
                };
            }
            Err(e) => return invalid(&format!("EC2NodeClass {name}: {e}")),
        }
        let tags = match launch_tags(&LaunchInput {
            nodeclass: name.clone(),
            cluster_name: self.settings.cluster_name.clone(),
            user_tags: class.spec.tags.clone().unwrap_or_default(),
            ..Default::default()
        }) {
            Ok(t) => t,
            Err(e) => return invalid(&e),
        };
        let spec = match base.template(ami, it, CapacityType::OnDemand, &tags, false, None) {
            Ok(s) => s,
            Err(e) => return invalid(&e),
        };
        if self.settings.disable_dry_run {
            return Verdict::Passed;
        }
        let Some((subnet, zone, price)) = subnet_for(resolved, it) else {
            return Verdict::Undecided {
                message: format!(
                    "{} is offered on demand in none of the class's zones",
                    it.name
                ),
            };
        };
        let call = FleetCall {
            capacity_type: CapacityType::OnDemand,
            default_target_capacity_type: "on-demand",
            allocation_strategy: AllocationStrategy::LowestPrice,
            total_target_capacity: 1,
            configs: vec![TemplateConfig {
                template_name: spec.name(),
                overrides: vec![FleetOverride {
                    instance_type: it.name.clone(),
                    zone: zone.to_string(),
                    subnet_id: subnet.to_string(),
                    priority: price,
                    reservation_id: None,
                    image_id: Some(ami.id.clone()),
                }],
            }],
            tags: tags.clone(),
            context: class.spec.context.clone(),
        };
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
        let run = run_instances_request(&self.clients.ec2, &data, &it.name, subnet, &tags)
            .dry_run(true)
            .customize()
            .config_override(no_retries())
            .send()
            .await;
        answer(Call::RunInstances, run)
    }
}
