//! The AWS provider's flags and settings, cluster facts, queue, region and versions.

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
