//! [`AwsCloud`]: the provider object the controller holds. It owns the SDK clients, the
//! parameter lookup and the caches (instance types, prices) and offers the building blocks
//! of the `CloudProvider` contract.

use std::sync::Arc;
use std::time::SystemTime;

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_aws_model::Settings;
use nodewright_core::model::InstanceType;
use nodewright_core::time::Timestamp;

use crate::clients::AwsClients;
use crate::error::AwsError;
use crate::instance_types::InstanceTypeProvider;
use crate::nodeclass::{self, NodeClassContext, ResolvedNodeClass};
use crate::parameters::{Parameters, SsmParameters};
use crate::pricing::{AwsPriceSource, PriceSource, PricingProvider};
use nodewright_aws_model::class_input::{ClassInputError, node_class_input};

/// Operator settings of the AWS provider.
#[derive(Clone, Debug, PartialEq)]
pub struct AwsSettings {
    /// `CLUSTER_NAME`.
    pub cluster_name: String,
    /// The cluster's Kubernetes version (`1.32`), for AMI alias parameters.
    pub kubernetes_version: String,
    /// `VM_MEMORY_OVERHEAD_PERCENT`, `RESERVED_ENIS`.
    pub model: Settings,
    /// `ISOLATED_VPC`: no Pricing API calls.
    pub isolated_vpc: bool,
    /// `DISABLE_DRY_RUN`: node class validation sends no authorization dry runs.
    pub disable_dry_run: bool,
    /// `ENABLE_ZONAL_SHIFT`: ARC zonal shifts close zones to launches and terminations.
    pub enable_zonal_shift: bool,
    /// `FEATURE_GATES`' `ReservedCapacity`: offerings of capacity reservations. Off, the
    /// classes' reservations are neither offered nor launched into.
    pub reserved_capacity: bool,
    /// The sooner of `AMI_REFRESH_INTERVAL` and `SUBNET_REFRESH_INTERVAL`: how long a class's
    /// images and subnets, resolved once, are reused for launches.
    pub resolve_every: std::time::Duration,
}

/// Errors of [`AwsCloud`]'s building blocks.
#[derive(Debug, thiserror::Error)]
pub enum AwsCloudError {
    #[error(transparent)]
    Api(#[from] AwsError),
    #[error(transparent)]
    ClassInput(#[from] ClassInputError),
}

impl From<AwsCloudError> for nodewright_cloud::CloudError {
    fn from(e: AwsCloudError) -> Self {
        match e {
            AwsCloudError::Api(e) => e.into(),
            AwsCloudError::ClassInput(e) => nodewright_cloud::CloudError::NodeClassNotReady {
                name: e.class.clone(),
                reason: e.to_string(),
            },
        }
    }
}

pub fn now() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    Timestamp(ms)
}

pub struct AwsCloud {
    pub clients: AwsClients,
    pub settings: AwsSettings,
    pub parameters: Arc<dyn Parameters>,
    pub instance_types: InstanceTypeProvider,
    pub pricing: PricingProvider,
    pub launch: crate::launch::LaunchState,
    /// Where launch and termination failures and batches are reported (the controller's
    /// metrics).
    pub observer: crate::observe::Observer,
    /// Spaces CreateTags calls after registration (see [`crate::tagging`]).
    pub tag_pacer: crate::tagging::Pacer,
    /// Merges concurrent DescribeInstances and TerminateInstances calls.
    pub instance_batchers: crate::instance_batch::InstanceBatchers,
    pub placement_groups: nodeclass::placement::PlacementGroups,
    /// Node class launch verdicts (dry runs), kept 30 minutes.
    pub validation: nodeclass::validation::ValidationCache,
    /// The zones ARC last said are shifted (see [`crate::zonal_shift`]).
    pub zonal_shifts: crate::zonal_shift::ZonalShifts,
}

impl AwsCloud {
    /// A provider calling AWS for everything; on-demand prices start from the embedded table.
    pub fn new(clients: AwsClients, settings: AwsSettings) -> Self {
        let parameters: Arc<dyn Parameters> = Arc::new(SsmParameters::new(clients.ssm.clone()));
        let prices: Arc<dyn PriceSource> = Arc::new(AwsPriceSource::new(clients.clone()));
        Self::with_parts(clients, settings, parameters, prices)
    }

    /// A provider with its parameter lookup and price source chosen by the caller (tests,
    /// mirrored parameters).
    pub fn with_parts(
        clients: AwsClients,
        settings: AwsSettings,
        parameters: Arc<dyn Parameters>,
        prices: Arc<dyn PriceSource>,
    ) -> Self {
        let embedded = nodewright_aws_model::catalog::embedded()
            .map(|c| c.on_demand_prices().clone())
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "embedded catalog unreadable; no fallback prices");
                Default::default()
            });
        let pricing =
            PricingProvider::new(&clients.region, prices, embedded, settings.isolated_vpc);
        let observer = crate::observe::Observer::default();
        AwsCloud {
            launch: crate::launch::LaunchState::new(&clients, &observer, settings.resolve_every),
            instance_batchers: crate::instance_batch::InstanceBatchers::new(&clients, &observer),
            placement_groups: nodeclass::placement::PlacementGroups::new(Arc::new(
                nodeclass::placement::SdkPlacementGroups::new(clients.clone()),
            )),
            instance_types: InstanceTypeProvider::new(clients.clone()),
            clients,
            settings,
            parameters,
            pricing,
            observer,
            validation: Default::default(),
            tag_pacer: Default::default(),
            zonal_shifts: Default::default(),
        }
    }

    /// The same provider with placement groups looked up through `source` instead of EC2.
    pub fn with_placement_group_source(
        mut self,
        source: Arc<dyn nodeclass::placement::PlacementGroupSource>,
    ) -> Self {
        self.placement_groups = nodeclass::placement::PlacementGroups::new(source);
        self
    }

    pub fn region(&self) -> &str {
        &self.clients.region
    }

    /// Resolves `class` (subnets, security groups, AMIs, instance profile) at `now`.
    pub async fn resolve_node_class(
        &self,
        class: &EC2NodeClass,
        now: Timestamp,
    ) -> Result<ResolvedNodeClass, AwsError> {
        let ctx = NodeClassContext {
            clients: &self.clients,
            parameters: self.parameters.as_ref(),
            cluster: &self.settings.cluster_name,
            kubernetes_version: &self.settings.kubernetes_version,
            placement_groups: &self.placement_groups,
        };
        nodeclass::reconcile(&ctx, class, now).await
    }

    /// The instance types a NodePool using `class` may launch, zones limited to `resolved`'s
    /// subnets, priced from the current prices, sorted by name; with a `reserved` offering per
    /// selected capacity reservation. Availability from the ICE cache
    /// is the launch path's to apply.
    pub async fn instance_types_for(
        &self,
        class: &EC2NodeClass,
        resolved: &ResolvedNodeClass,
    ) -> Result<Vec<InstanceType>, AwsCloudError> {
        let input = node_class_input(class)?;
        let discovered = self.instance_types.discovered().await?;
        let prices = self.pricing.prices().await;
        let zones = resolved.zones();
        let mut types = discovered.instance_types(
            self.region(),
            &self.settings.model,
            &input,
            &zones,
            prices.book(),
        );
        if self.settings.reserved_capacity && !resolved.capacity_reservations.is_empty() {
            let names: Vec<String> = zones.into_iter().map(|z| z.name).collect();
            nodewright_aws_model::reservations::add_reserved_offerings(
                &mut types,
                &resolved.capacity_reservations,
                &names,
                now().unix_seconds(),
            );
        }
        if let Some(group) = &resolved.placement_group {
            nodewright_aws_model::placement::apply_placement_group(&mut types, group, |n| {
                discovered.info(n)
            });
        }
        Ok(types)
    }
}
