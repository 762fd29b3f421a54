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
mod tests {
    use clap::Parser;

    use super::super::{Args, Provider};
    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(flags: &[&str]) -> Args {
        let mut argv = vec!["nodewright"];
        argv.extend_from_slice(flags);
        Cli::try_parse_from(argv).expect("parses").args
    }

    #[test]
    fn aws_flags_map_onto_the_provider_settings() {
        let args = parse(&[
            "--cloud-provider",
            "aws",
            "--cluster-name",
            "prod",
            "--aws-region",
            "eu-west-1",
            "--aws-endpoint-url",
            "http://127.0.0.1:5000",
            "--vm-memory-overhead-percent",
            "0.1",
            "--reserved-enis",
            "2",
            "--isolated-vpc",
            "--disable-dry-run",
            "--enable-zonal-shift",
            "--feature-gates=ReservedCapacity=false",
            "--ami-refresh-interval=5m",
            "--subnet-refresh-interval=2m",
        ]);
        assert_eq!(args.cloud_provider, Provider::Aws);
        let region = region(&args.aws, Some("us-east-2".into())).unwrap();
        assert_eq!(region, "eu-west-1");
        let options = client_options(&args.aws, &region);
        assert_eq!(
            options.endpoint_url.as_deref(),
            Some("http://127.0.0.1:5000")
        );
        assert_eq!(options.region, "eu-west-1");
        let s = aws_settings(&args.settings, "1.32");
        assert_eq!(s.cluster_name, "prod");
        assert_eq!(s.kubernetes_version, "1.32");
        assert_eq!(s.model.vm_memory_overhead_percent, 0.1);
        assert_eq!(s.model.reserved_enis, 2);
        assert!(s.isolated_vpc);
        assert!(s.disable_dry_run);
        assert!(s.enable_zonal_shift);
        assert!(!s.reserved_capacity);
        assert_eq!(
            s.resolve_every,
            Duration::from_secs(120),
            "the sooner interval"
        );
        let defaults = aws_settings(
            &parse(&["--cloud-provider", "aws", "--cluster-name", "c"]).settings,
            "1.32",
        );
        assert!(!defaults.disable_dry_run, "dry runs are on by default");
        assert!(!defaults.enable_zonal_shift, "ARC is not asked by default");
        assert!(
            defaults.reserved_capacity,
            "ReservedCapacity is on by default"
        );
        assert_eq!(defaults.resolve_every, Duration::from_secs(60));
    }

    #[test]
    fn eks_versions_read_as_the_api_servers() {
        assert_eq!(eks_version(Some("1.29")).unwrap(), "1.29");
        assert!(
            eks_version(None)
                .unwrap_err()
                .to_string()
                .contains("no version")
        );
        assert!(eks_version(Some("129")).is_err());
    }

    #[test]
    fn cluster_facts_from_the_settings_and_the_client_configuration() {
        let mut args = parse(&["--cloud-provider", "aws", "--cluster-name", "c"]);
        let mut config = kube::Config::new("https://10.0.0.1:6443/".parse().unwrap());
        let bare = known_cluster_facts(&args.settings, &config);
        assert_eq!(bare.name, "c");
        assert_eq!(bare.api_server, "https://10.0.0.1:6443/");
        assert_eq!(
            (bare.endpoint, bare.ca_bundle, bare.client_ca_bundle),
            (None, None, None)
        );
        config.root_cert = Some(vec![vec![1, 2, 3]]);
        args.settings.cluster_endpoint = "https://ABC.gr7.us-west-2.eks.amazonaws.com".into();
        args.settings.cluster_ca_bundle = "LS0t".into();
        let set = known_cluster_facts(&args.settings, &config);
        assert_eq!(
            set.endpoint.as_deref(),
            Some("https://ABC.gr7.us-west-2.eks.amazonaws.com")
        );
        assert_eq!(set.ca_bundle.as_deref(), Some("LS0t"));
        assert_eq!(set.client_ca_bundle, cluster::pem_bundle(&[vec![1, 2, 3]]));
    }

    #[test]
    fn the_interruption_queue_is_polled_only_when_named() {
        let args = parse(&["--cloud-provider", "aws", "--cluster-name", "c"]);
        assert_eq!(interruption_queue(&args.settings), None);
        let args = parse(&[
            "--cloud-provider",
            "aws",
            "--cluster-name",
            "c",
            "--interruption-queue",
            "Karpenter-prod",
        ]);
        let q = interruption_queue(&args.settings).unwrap();
        assert_eq!(q.name, "Karpenter-prod");
        assert_eq!(q.wait, Duration::from_secs(20));
    }

    #[test]
    fn the_region_falls_back_and_is_required() {
        let none = AwsArgs::default();
        assert_eq!(
            region(&none, Some("ap-south-1".into())).unwrap(),
            "ap-south-1"
        );
        let e = region(&none, None).unwrap_err();
        assert!(e.to_string().contains("AWS_REGION"), "{e}");
        assert_eq!(client_options(&none, "us-east-1").endpoint_url, None);
    }

    #[test]
    fn kubernetes_versions_from_the_api_server() {
        assert_eq!(kubernetes_version("1", "32").unwrap(), "1.32");
        assert_eq!(kubernetes_version("1", "31+").unwrap(), "1.31");
        assert!(kubernetes_version("", "").is_err());
    }
}
