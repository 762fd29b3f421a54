//! `nodewright install aws` / `uninstall aws` as the built binary: refused with a way out
//! when built without the AWS provider; with it, against moto (`scripts/moto`), a dry run
//! prints the plan, an install prints what it made and the `helm install` it implies, a second
//! install changes nothing, and an uninstall removes it.

use std::process::{Command, Output};

fn nodewright(args: &[&str], endpoint: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nodewright"));
    c.args(args)
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_PROFILE")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing");
    if let Some(url) = endpoint {
        c.env("AWS_ENDPOINT_URL", url);
    }
    c.output().expect("runs")
}

#[cfg(not(feature = "aws"))]
#[test]
fn without_the_feature_install_aws_says_how_to_get_it() {
    let out = nodewright(&["install", "aws", "--cluster-name", "c"], None);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--features aws"), "{err}");
}

#[cfg(feature = "aws")]
mod with_moto {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use super::nodewright;

    /// The moto server, or a visible skip (a failure under `NODEWRIGHT_REQUIRE_MOTO=1`).
    fn moto() -> Option<String> {
        match std::env::var("NODEWRIGHT_MOTO_URL") {
            Ok(u) if !u.is_empty() => Some(u),
            _ => {
                assert!(
                    std::env::var("NODEWRIGHT_REQUIRE_MOTO").as_deref() != Ok("1"),
                    "NODEWRIGHT_MOTO_URL is not set but NODEWRIGHT_REQUIRE_MOTO=1"
                );
                eprintln!("skipping: no moto server (run through scripts/moto)");
                None
            }
        }
    }

    /// EKS CreateCluster, as its REST call.
    fn create_cluster(url: &str, name: &str) {
        let addr = url.trim_start_matches("http://");
        let body = format!(
            r#"{{"name":"{name}","roleArn":"arn:aws:iam::123456789012:role/eks","resourcesVpcConfig":{{"subnetIds":["subnet-1"]}}}}"#
        );
        let mut s = TcpStream::connect(addr).unwrap();
        write!(
            s,
            "POST /clusters HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/eks/aws4_request, SignedHeaders=host, Signature=0\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
            "{answer}"
        );
    }

    fn text(out: &std::process::Output) -> String {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    #[test]
    fn install_plans_makes_reports_and_removes() {
        let Some(url) = moto() else { return };
        let cluster = format!("cli-{}", std::process::id());
        create_cluster(&url, &cluster);
        let args = |verb: &'static str, dry: bool| {
            let mut a = vec![
                verb,
                "aws",
                "--cluster-name",
                cluster.as_str(),
                "--node-access",
                "none",
            ];
            if dry {
                a.push("--dry-run");
            }
            a
        };

        let plan = nodewright(&args("install", true), Some(&url));
        let t = text(&plan);
        assert!(plan.status.success(), "{t}");
        assert!(t.starts_with("dry run: nothing was written\n"), "{t}");
        assert!(
            t.contains(&format!("create  iam role KarpenterNodeRole-{cluster}\n")),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "create  eventbridge rule {cluster}-SpotInterruption\n"
            )),
            "{t}"
        );
        assert!(
            !t.contains("helm"),
            "a dry run prints no install command: {t}"
        );

        let made = nodewright(&args("install", false), Some(&url));
        let t = text(&made);
        assert!(made.status.success(), "{t}");
        assert!(t.contains(&format!("create  sqs queue {cluster}\n")), "{t}");
        assert!(
            t.contains(&format!("  spec.role: KarpenterNodeRole-{cluster}\n")),
            "{t}"
        );
        assert!(
            t.contains(&format!("--set settings.interruptionQueue={cluster}")),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "role-arn\"=arn:aws:iam::123456789012:role/KarpenterControllerRole-{cluster}"
            )),
            "{t}"
        );

        let again = nodewright(&args("install", false), Some(&url));
        let t = text(&again);
        assert!(again.status.success(), "{t}");
        let changed: Vec<&str> = t
            .lines()
            .take_while(|l| !l.is_empty())
            .filter(|l| !l.starts_with("ok "))
            .collect();
        assert!(changed.is_empty(), "{changed:?}");

        let removed = nodewright(&args("uninstall", false), Some(&url));
        let t = text(&removed);
        assert!(removed.status.success(), "{t}");
        assert!(
            t.contains(&format!("delete  iam role KarpenterNodeRole-{cluster}\n")),
            "{t}"
        );
        assert!(t.contains(&format!("delete  sqs queue {cluster}\n")), "{t}");
    }

    #[test]
    fn an_unknown_cluster_is_named_in_the_error() {
        let Some(url) = moto() else { return };
        let out = nodewright(
            &["install", "aws", "--cluster-name", "no-such-cluster"],
            Some(&url),
        );
        assert!(!out.status.success());
        let t = text(&out);
        assert!(
            t.contains("eks cluster no-such-cluster: ResourceNotFoundException"),
            "{t}"
        );
    }
}
