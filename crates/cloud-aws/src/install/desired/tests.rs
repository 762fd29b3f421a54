//! The names, trust, policy and Helm command `install aws` wants for one cluster.

use super::*;

fn inputs() -> Inputs {
    Inputs {
        cluster: "demo".into(),
        partition: "aws".into(),
        region: "us-west-2".into(),
        account: "111122223333".into(),
        oidc_issuer: Some("https://oidc.eks.us-west-2.amazonaws.com/id/ABC".into()),
        identity: Identity::Irsa,
        node_access: NodeAccess::AccessEntry,
        namespace: "karpenter".into(),
        service_account: "karpenter".into(),
    }
}

#[test]
fn names_follow_karpenters_and_respect_aws_limits() {
    let n = names("demo").unwrap();
    assert_eq!(n.node_role, "KarpenterNodeRole-demo");
    assert_eq!(n.controller_role, "KarpenterControllerRole-demo");
    assert_eq!(n.queue, "demo");
    assert_eq!(n.rules[1].0, "demo-SpotInterruption");
    assert!(
        n.policies
            .iter()
            .any(|(g, p)| g == "NodeLifecycle" && p == "KarpenterControllerNodeLifecyclePolicy")
    );
    let long = "c".repeat(41);
    let e = names(&long).unwrap_err();
    assert!(
        e.contains("KarpenterControllerRole-") && e.contains("limit is 64"),
        "{e}"
    );
    assert!(names("a b").unwrap_err().contains("letters, digits"));
}

#[test]
fn irsa_trusts_exactly_the_service_account() {
    let t = controller_role_trust(&inputs()).unwrap();
    let s = &t["Statement"][0];
    assert_eq!(
        s["Principal"]["Federated"],
        "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/ABC"
    );
    assert_eq!(
        s["Condition"]["StringEquals"]["oidc.eks.us-west-2.amazonaws.com/id/ABC:sub"],
        "system:serviceaccount:karpenter:karpenter"
    );
    let mut no_issuer = inputs();
    no_issuer.oidc_issuer = None;
    assert!(
        controller_role_trust(&no_issuer)
            .unwrap_err()
            .contains("pod-identity")
    );
}

#[test]
fn the_policy_has_no_placeholder_left() {
    let i = inputs();
    let n = names("demo").unwrap();
    for (group, _) in &n.policies {
        let text = controller_policy(&i, &n, group).to_string();
        assert!(!text.contains("${"), "{group}: {text}");
        assert!(text.contains("Statement"), "{group}");
    }
    let text = controller_policy(&i, &n, "Interruption").to_string();
    assert!(
        text.contains("arn:aws:sqs:us-west-2:111122223333:demo"),
        "{text}"
    );
    let text = controller_policy(&i, &n, "IAMIntegration").to_string();
    assert!(text.contains("role/KarpenterNodeRole-demo"), "{text}");
}

#[test]
fn the_helm_command_names_the_role_and_queue() {
    let i = inputs();
    let cmd = helm_command(&i, &names("demo").unwrap());
    assert!(cmd.contains("settings.interruptionQueue=demo"), "{cmd}");
    assert!(
        cmd.contains("role-arn\"=arn:aws:iam::111122223333:role/KarpenterControllerRole-demo"),
        "{cmd}"
    );
}

fn repo_file(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// docs/IAM.md shows the statements this file holds, group by group (its `## Group`
/// headings), so the page and the policies made cannot drift apart.
#[test]
fn the_policy_file_is_the_one_docs_iam_md_shows() {
    let page = repo_file("docs/IAM.md");
    let mut shown: serde_json::Map<String, Value> = serde_json::Map::new();
    let (mut group, mut block): (Option<String>, Option<String>) = (None, None);
    for line in page.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            group = h.split([':', ' ']).next().map(str::to_string);
        } else if line.trim() == "```json" {
            block = Some(String::new());
        } else if line.trim() == "```" && block.is_some() {
            let v: Value = serde_json::from_str(&block.take().unwrap()).unwrap();
            let list = shown
                .entry(group.clone().unwrap())
                .or_insert_with(|| json!([]));
            match v {
                Value::Array(items) => list.as_array_mut().unwrap().extend(items),
                one => list.as_array_mut().unwrap().push(one),
            }
        } else if let Some(b) = block.as_mut() {
            b.push_str(line);
            b.push('\n');
        }
    }
    let file: Value = serde_json::from_str(CONTROLLER_POLICY).unwrap();
    assert_eq!(Value::Object(shown), file);
}

/// The Terraform module reads the same policy file and names what the command names.
#[test]
fn the_terraform_module_names_what_the_command_makes() {
    let tf = repo_file("deploy/terraform/main.tf");
    assert!(tf.contains("templatefile(\"${path.module}/../controller-policy.json\""));
    for name in [
        "KarpenterNodeRole-${var.cluster_name}",
        "KarpenterNodeInstanceProfile-${var.cluster_name}",
        "KarpenterControllerRole-${var.cluster_name}",
        "KarpenterController${each.key}Policy",
        "\"${var.cluster_name}-${each.key}\"",
        "message_retention_seconds = 300",
        "sqs_managed_sse_enabled   = true",
        "\"EC2InterruptionPolicy\"",
        "\"EC2_LINUX\"",
    ] {
        assert!(tf.contains(name), "{name} not in main.tf");
    }
    for p in NODE_POLICIES {
        assert!(tf.contains(&format!("\"{p}\"")), "{p} not in main.tf");
    }
    for (suffix, source, detail) in EVENT_RULES {
        let line = format!("{suffix} ");
        let row = tf
            .lines()
            .find(|l| l.trim_start().starts_with(&line))
            .unwrap_or_else(|| panic!("no rule {suffix} in main.tf"));
        assert!(row.contains(source) && row.contains(detail), "{row}");
    }
}
