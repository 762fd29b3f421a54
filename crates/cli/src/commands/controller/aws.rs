//! `--cloud-provider aws`: the AWS provider built from the operator settings Karpenter's AWS
//! provider reads (`CLUSTER_NAME`, `VM_MEMORY_OVERHEAD_PERCENT`, `RESERVED_ENIS`,
//! `ISOLATED_VPC`, `DISABLE_DRY_RUN`, `ENABLE_ZONAL_SHIFT`, `EKS_CONTROL_PLANE`, the refresh
//! intervals, the `ReservedCapacity` gate), the region and an optional endpoint override,
//! with its instance types and prices refreshed in the background.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use nodewright_cloud::{CloudProvider, InterruptionSource};
use nodewright_cloud_aws::cluster::{self, KnownClusterFacts};
use nodewright_cloud_aws::interruption::{QueueOptions, SqsInterruptionQueue};
use nodewright_cloud_aws::refresh::{self, RefreshIntervals};
use nodewright_cloud_aws::{AwsClients, AwsCloud, AwsSettings, ClientOptions};
use nodewright_controller::settings::Settings;

use super::AwsArgs;

/// The region from `--aws-region`/`AWS_REGION`, else `AWS_DEFAULT_REGION`.
pub fn region(args: &AwsArgs, default_region: Option<String>) -> anyhow::Result<String> {
    args.aws_region
        .clone()
        .or(default_region)
        .filter(|r| !r.trim().is_empty())
        .context("no AWS region: set AWS_REGION (or pass --aws-region)")
}

pub fn client_options(args: &AwsArgs, region: &str) -> ClientOptions {
    ClientOptions {
        region: region.to_string(),
        endpoint_url: args
            .aws_endpoint_url
            .clone()
            .filter(|u| !u.trim().is_empty()),
        credentials: None,
    }
}

/// `1.32` from the API server's version parts (`"1"`, `"32+"` on some managed clusters).
pub fn kubernetes_version(major: &str, minor: &str) -> anyhow::Result<String> {
    let digits = |s: &str| -> String { s.chars().take_while(char::is_ascii_digit).collect() };
    let (major, minor) = (digits(major), digits(minor));
    anyhow::ensure!(
        !major.is_empty() && !minor.is_empty(),
        "the API server reported no usable version"
    );
    Ok(format!("{major}.{minor}"))
}

pub fn aws_settings(settings: &Settings, kubernetes_version: &str) -> AwsSettings {
    AwsSettings {
        cluster_name: settings.cluster_name.clone(),
        kubernetes_version: kubernetes_version.to_string(),
        model: nodewright_aws_model::Settings {
            vm_memory_overhead_percent: settings.vm_memory_overhead_percent,
            reserved_enis: settings.reserved_enis,
        },
        isolated_vpc: settings.isolated_vpc,
        disable_dry_run: settings.disable_dry_run,
        enable_zonal_shift: settings.enable_zonal_shift,
        reserved_capacity: settings.feature_gates.reserved_capacity,
        resolve_every: settings
            .ami_refresh_interval
            .min(settings.subnet_refresh_interval),
    }
}

/// What the settings and the controller's own client configuration say about how nodes reach
/// the API server: `CLUSTER_ENDPOINT`, `CLUSTER_CA_BUNDLE`, the client's root certificates and
/// address. EKS DescribeCluster fills in the rest at start (and the service CIDR later, if
/// EKS did not give it then).
pub fn known_cluster_facts(settings: &Settings, config: &kube::Config) -> KnownClusterFacts {
    KnownClusterFacts {
        name: settings.cluster_name.clone(),
        endpoint: Some(settings.cluster_endpoint.clone()).filter(|e| !e.is_empty()),
        ca_bundle: Some(settings.cluster_ca_bundle.clone()).filter(|c| !c.is_empty()),
        client_ca_bundle: config.root_cert.as_deref().and_then(cluster::pem_bundle),
        api_server: config.cluster_url.to_string(),
    }
}

/// Launch templates no launch used for this long are deleted.
const TEMPLATE_IDLE: Duration = Duration::from_secs(60);

/// The interruption queue's poll settings when `INTERRUPTION_QUEUE` names one.
pub fn interruption_queue(settings: &Settings) -> Option<QueueOptions> {
    let name = settings.interruption_queue.trim();
    (!name.is_empty()).then(|| QueueOptions::new(name))
}

/// The SDK clients, the cluster's Kubernetes version and the region. With
/// `EKS_CONTROL_PLANE` the version is EKS's (`DescribeCluster`), as upstream reads it there.
async fn connect(
    settings: &Settings,
    args: &AwsArgs,
    config: &kube::Config,
) -> anyhow::Result<(AwsClients, String, String)> {
    let region = region(args, std::env::var("AWS_DEFAULT_REGION").ok())?;
    let clients = AwsClients::new(&client_options(args, &region)).await;
    let version = if settings.eks_control_plane {
        let eks = cluster::describe_cluster(&clients, &settings.cluster_name)
            .await
            .context("EKS_CONTROL_PLANE: reading the Kubernetes version with DescribeCluster")?;
        eks_version(eks.version.as_deref())?
    } else {
        let client = kube::Client::try_from(config.clone())?;
        let info = client
            .apiserver_version()
            .await
            .context("reading the Kubernetes version from the API server")?;
        kubernetes_version(&info.major, &info.minor)?
    };
    Ok((clients, version, region))
}

/// `1.32` from DescribeCluster's `version` (`"1.32"`).
pub fn eks_version(version: Option<&str>) -> anyhow::Result<String> {
    let v = version.context("EKS_CONTROL_PLANE: DescribeCluster gave no version")?;
    let (major, minor) = v.split_once('.').with_context(|| {
        format!("EKS_CONTROL_PLANE: DescribeCluster's version {v:?} is not major.minor")
    })?;
    kubernetes_version(major, minor)
}

/// The provider alone, without the cluster facts launches need and without background
/// tasks: enough to list and look up instances (the node agent).
pub async fn provider(
    settings: &Settings,
    args: &AwsArgs,
    config: &kube::Config,
) -> anyhow::Result<Arc<dyn CloudProvider>> {
    let (clients, version, _) = connect(settings, args, config).await?;
    Ok(Arc::new(AwsCloud::new(
        clients,
        aws_settings(settings, &version),
    )))
}

/// Builds the provider and starts its background tasks: instance type and price refresh,
/// and the cleanup of unused launch templates. Also returns the interruption queue when
/// `INTERRUPTION_QUEUE` is set; its SQS calls go to the same endpoint as the rest.
pub async fn start(
    settings: &Settings,
    args: &AwsArgs,
    config: &kube::Config,
) -> anyhow::Result<(Arc<dyn CloudProvider>, Option<Arc<dyn InterruptionSource>>)> {
    let (clients, version, region) = connect(settings, args, config).await?;
    tracing::info!(region = %region, kubernetes = %version, endpoint = args.aws_endpoint_url.as_deref().unwrap_or("the regional endpoints"), "starting the AWS provider");
    let facts = cluster::ClusterFacts::resolve(
        &clients,
        known_cluster_facts(settings, config),
        cluster::facts::ASK_AGAIN_EVERY,
    )
    .await;
    let info = facts.current();
    tracing::info!(endpoint = %info.endpoint, service_cidr = info.service_cidr.as_deref().unwrap_or("unknown"), ca_bundle = info.ca_bundle.is_some(), "cluster facts for node user data");
    let cloud = Arc::new(
        AwsCloud::new(clients, aws_settings(settings, &version)).with_cluster_facts(facts),
    );
    refresh::spawn(cloud.clone(), RefreshIntervals::default());
    let templates = cloud.clone();
    tokio::spawn(refresh::every(TEMPLATE_IDLE, move || {
        let cloud = templates.clone();
        async move {
            if let Err(e) = cloud.delete_unused_launch_templates(TEMPLATE_IDLE).await {
                tracing::warn!(error = %e, "deleting unused launch templates failed");
            }
        }
    }));
    let interruption = interruption_queue(settings).map(|options| {
        tracing::info!(queue = %options.name, "handling interruption messages");
        Arc::new(SqsInterruptionQueue::new(cloud.clone(), options)) as Arc<dyn InterruptionSource>
    });
    Ok((cloud, interruption))
}

#[cfg(test)]
mod tests;
