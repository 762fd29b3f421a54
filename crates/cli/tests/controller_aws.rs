//! `nodewright controller --cloud-provider aws` as the built binary: offered by `--help`, and
//! refused with a way out when the binary was built without the AWS provider.

use std::process::{Command, Output};

fn nodewright(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .env_remove("AWS_REGION")
        .env_remove("AWS_ENDPOINT_URL")
        .output()
        .expect("runs")
}

#[test]
fn help_offers_the_aws_provider_and_its_endpoint_override() {
    let out = nodewright(&["controller", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--cloud-provider",
        "--aws-region",
        "--aws-endpoint-url",
        "--vm-memory-overhead-percent",
        "--reserved-enis",
        "--isolated-vpc",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
    assert!(help.contains("aws"), "{help}");
}

#[cfg(not(feature = "aws"))]
#[test]
fn without_the_feature_aws_is_refused_before_connecting() {
    let out = nodewright(&[
        "controller",
        "--cloud-provider",
        "aws",
        "--cluster-name",
        "c",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--features aws"), "{err}");
    assert!(
        !err.contains("kubeconfig"),
        "refused before reading kubeconfig: {err}"
    );
}
