//! `nodewright install aws --node-access aws-auth` on a real API server with moto for AWS: the
//! node role it makes is mapped in `kube-system/aws-auth` beside the entries already there, a
//! dry run and a second install write nothing, and `uninstall aws` takes out only its entry.

use std::process::Command;

use serde_yaml::Value;

use crate::kit::ControlPlane;
use crate::kit::moto::Moto;

const CLUSTER: &str = "aws-auth-demo";
const ACCOUNT_ROLE: &str = "arn:aws:iam::123456789012:role";

/// A managed node group's role, mapped before nodewright came.
const AWS_AUTH: &str = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: aws-auth, namespace: kube-system}
data:
  mapRoles: |
    - rolearn: arn:aws:iam::123456789012:role/eks-node-group
      username: system:node:{{EC2PrivateDNSName}}
      groups: [system:bootstrappers, system:nodes]
"#;

fn nodewright(cp: &ControlPlane, moto: &Moto, verb: &str, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args([
            verb,
            "aws",
            "--cluster-name",
            CLUSTER,
            "--node-access",
            "aws-auth",
        ])
        .args(extra)
        .arg("--kubeconfig")
        .arg(&cp.kubeconfig)
        .env_remove("AWS_PROFILE")
        .env("AWS_ENDPOINT_URL", &moto.url)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .output()
        .expect("nodewright runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "nodewright {verb} aws failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The role ARNs `kube-system/aws-auth` maps, in order.
fn mapped(cp: &ControlPlane) -> Vec<String> {
    let text = cp.kubectl(&[
        "get",
        "configmap",
        "-n",
        "kube-system",
        "aws-auth",
        "-o",
        "jsonpath={.data.mapRoles}",
    ]);
    let roles: Vec<Value> = serde_yaml::from_str(&text).expect("mapRoles is a YAML list");
    roles
        .iter()
        .map(|r| r["rolearn"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_maps_the_node_role_in_aws_auth_and_uninstall_unmaps_it() {
    let Some(cp) = ControlPlane::start("install-aws-auth") else {
        return;
    };
    let moto = Moto::start(cp.dir.join("moto.log")).await;
    moto.boto(&format!(
        "iam = boto3.client('iam', **kw)\n\
         role = iam.create_role(RoleName='eks', AssumeRolePolicyDocument='{{}}')['Role']['Arn']\n\
         boto3.client('eks', **kw).create_cluster(name='{CLUSTER}', roleArn=role, \
         resourcesVpcConfig={{'subnetIds': ['subnet-1']}})"
    ));
    cp.apply(AWS_AUTH).unwrap();
    let group = format!("{ACCOUNT_ROLE}/eks-node-group");
    let ours = format!("{ACCOUNT_ROLE}/KarpenterNodeRole-{CLUSTER}");
    let step =
        |verb: &str| format!("{verb:<7} aws-auth mapRoles entry kube-system/aws-auth {ours}");

    let plan = nodewright(&cp, &moto, "install", &["--dry-run"]);
    println!("$ nodewright install aws --dry-run ...\n{plan}");
    assert!(
        plan.contains(&format!("{} (node role mapped)\n", step("update"))),
        "{plan}"
    );
    assert_eq!(mapped(&cp), vec![group.clone()], "a dry run wrote");

    let made = nodewright(&cp, &moto, "install", &[]);
    println!("$ nodewright install aws ...\n{made}");
    assert!(made.contains(&step("update")), "{made}");
    assert_eq!(mapped(&cp), vec![group.clone(), ours.clone()]);

    let again = nodewright(&cp, &moto, "install", &[]);
    assert!(again.contains(&format!("{}\n", step("ok"))), "{again}");
    assert_eq!(mapped(&cp), vec![group.clone(), ours.clone()]);

    let removed = nodewright(&cp, &moto, "uninstall", &[]);
    println!("$ nodewright uninstall aws ...\n{removed}");
    assert!(
        removed.contains(&format!("{}\n", step("delete"))),
        "{removed}"
    );
    assert_eq!(mapped(&cp), vec![group]);
}
