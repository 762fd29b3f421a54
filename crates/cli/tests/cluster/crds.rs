//! The CRDs on the real kube-apiserver: `nodewright crds` applies as printed, and for every
//! seed manifest and every invalid fixture the apiserver accepts exactly when
//! `nodewright validate` does.

use std::io::Write;
use std::process::{Command, Stdio};

use kube::api::{Api, DynamicObject, PostParams};
use nodewright_testkit::invalid::{self, Case};
use nodewright_testkit::valid;
use serde_json::Value;

use std::time::Duration;

use crate::kit::controller::Launch;
use crate::kit::read::{ec2nodeclass_resource, nodeclaim_resource, nodepool_resource};
use crate::kit::{ControlPlane, eventually, repo_root};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn printed_crds_apply_and_are_established() {
    let Some(cp) = ControlPlane::start("crds-apply") else {
        return;
    };
    let printed = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .arg("crds")
        .output()
        .expect("nodewright crds runs");
    assert!(printed.status.success());
    cp.apply(&String::from_utf8_lossy(&printed.stdout))
        .unwrap_or_else(|e| panic!("the apiserver refused the CRDs: {e}"));
    cp.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/nodepools.karpenter.sh",
        "crd/nodeclaims.karpenter.sh",
        "crd/ec2nodeclasses.karpenter.k8s.aws",
    ]);
    // The v1 seed manifests are accepted as written.
    cp.apply_path("fixtures/seed-manifests/04-nodepool-ec2nodeclass-v1.yaml");
    let got = cp.kubectl(&["get", "nodepools,ec2nodeclasses", "-o", "name"]);
    assert!(got.contains("nodepool.karpenter.sh/default"), "{got}");
    assert!(
        got.contains("ec2nodeclass.karpenter.k8s.aws/default"),
        "{got}"
    );
}

/// `nodewright validate -f -` on one document: `Ok` when it passes, else its output.
fn validate(doc: &Value) -> Result<(), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["validate", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nodewright validate runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(doc).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The API of `doc`'s kind; `None` for a kind the CRDs do not serve.
fn api_for(client: &kube::Client, doc: &Value) -> Option<Api<DynamicObject>> {
    let resource = match doc["kind"].as_str() {
        Some("NodePool") => nodepool_resource(),
        Some("NodeClaim") => nodeclaim_resource(),
        Some("EC2NodeClass") => ec2nodeclass_resource(),
        _ => return None,
    };
    Some(Api::all_with(client.clone(), &resource))
}

fn dynamic(doc: &Value) -> DynamicObject {
    serde_json::from_value(doc.clone()).expect("an object")
}

/// The apiserver's verdict on creating `doc` (server-side dry run: every schema and CEL
/// rule runs, nothing is stored).
async fn apiserver_create(client: &kube::Client, doc: &Value) -> Result<(), String> {
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let Some(api) = api_for(client, doc) else {
        return Err(format!("the server does not serve kind {}", doc["kind"]));
    };
    api.create(&dry, &dynamic(doc))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The apiserver's verdict on replacing `old` (stored for real, then deleted) with `new`.
async fn apiserver_update(client: &kube::Client, old: &Value, new: &Value) -> Result<(), String> {
    let api = api_for(client, old).expect("an update case of a served kind");
    let name = old["metadata"]["name"].as_str().unwrap().to_string();
    let stored = api
        .create(&PostParams::default(), &dynamic(old))
        .await
        .unwrap_or_else(|e| panic!("the old object of an update case is stored: {e}"));
    let mut replacement = dynamic(new);
    replacement.metadata.resource_version = stored.metadata.resource_version.clone();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let verdict = api
        .replace(&name, &dry, &replacement)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string());
    api.delete(&name, &Default::default()).await.unwrap();
    // Gone (no finalizers on these) before the next case stores an object of that name.
    for _ in 0..100 {
        if api.get_opt(&name).await.ok().flatten().is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    verdict
}

/// Every document of the YAML files in `dir` (relative to the repository root).
fn documents(dir: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(repo_root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, d) in serde_yaml::Deserializer::from_str(&text).enumerate() {
            let v: Value = serde::Deserialize::deserialize(d).unwrap();
            if !v.is_null() {
                out.push((format!("{}#{i}", f.display()), v));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apiserver_accepts_exactly_what_validate_accepts() {
    let Some(cp) = ControlPlane::start("crds-validate") else {
        return;
    };
    cp.install_crds();
    let client = cp.client().await;
    let mut disagreements = Vec::new();
    let mut checked = 0;

    // The valid bases, every invalid case, and the v1 manifests of the seeds and fixtures
    // (v1beta1 objects go through the conversion webhook, which `webhook.rs` runs; v1alpha5
    // kinds have no CRD).
    let mut creates: Vec<(String, Value, bool)> = vec![
        ("valid nodepool".into(), valid::nodepool(), true),
        ("valid nodeclaim".into(), valid::nodeclaim(), true),
        ("valid ec2nodeclass".into(), valid::ec2nodeclass(), true),
    ];
    for (kind, cases) in [
        ("NodePool", invalid::nodepool_cases()),
        ("NodeClaim", invalid::nodeclaim_cases()),
        ("EC2NodeClass", invalid::ec2nodeclass_cases()),
    ] {
        for Case { name, object, .. } in cases {
            creates.push((format!("{kind}: {name}"), object, false));
        }
    }
    for dir in [
        "fixtures/seed-manifests",
        "fixtures/invalid",
        "fixtures/roundtrip",
    ] {
        for (name, doc) in documents(dir) {
            let v1 = matches!(
                doc["apiVersion"].as_str(),
                Some("karpenter.sh/v1" | "karpenter.k8s.aws/v1")
            );
            if v1 {
                let ok = validate(&doc).is_ok();
                creates.push((name, doc, ok));
            }
        }
    }
    // NodePools the apiserver stores but the controller's runtime rules refuse, as upstream
    // splits them: checked below on the running controller.
    let mut runtime_only: Vec<(String, Value, String)> = Vec::new();
    for (name, doc, expect_valid) in &creates {
        let ours = validate(doc);
        let theirs = apiserver_create(&client, doc).await;
        checked += 1;
        match (&ours, &theirs) {
            (Err(e), Ok(())) if doc["kind"] == "NodePool" && !*expect_valid => {
                runtime_only.push((name.clone(), doc.clone(), e.clone()));
            }
            // Upstream runs no validation of a NodeClaim's spec after it is stored (the
            // controller writes claims itself); `validate` holds a claim to its NodePool
            // template's rules, so it alone refuses duplicate taints.
            (Err(_), Ok(())) if name == "NodeClaim: taint duplicate" => {}
            _ if ours.is_ok() != *expect_valid || ours.is_ok() != theirs.is_ok() => {
                disagreements.push(format!("{name}: validate {ours:?}, apiserver {theirs:?}"));
            }
            _ => {}
        }
    }
    for Case {
        name,
        object,
        old,
        errors,
    } in invalid::update_cases()
    {
        let old = old.expect("an update case has an old object");
        let theirs = apiserver_update(&client, &old, &object).await;
        checked += 1;
        if errors.is_empty() != theirs.is_ok() {
            disagreements.push(format!(
                "update {name}: validate {errors:?}, apiserver {theirs:?}"
            ));
        }
    }
    // Each runtime-only refusal is what the controller reports on the stored NodePool.
    let mut ctl = Launch::sim(&cp, "nodewright").start();
    ctl.wait_ready().await;
    for (i, (name, mut doc, ours)) in runtime_only.into_iter().enumerate() {
        let pool = format!("runtime-{i}");
        doc["metadata"]["name"] = Value::from(pool.clone());
        let api = api_for(&client, &doc).unwrap();
        api.create(&PostParams::default(), &dynamic(&doc))
            .await
            .unwrap_or_else(|e| panic!("{name}: stored: {e}"));
        let reason = ours
            .lines()
            .next()
            .and_then(|l| l.rsplit_once(": "))
            .map(|(_, r)| r.to_string())
            .unwrap_or_default();
        let verdict = eventually(
            Duration::from_secs(30),
            &format!("{name}: ValidationSucceeded on {pool}"),
            || {
                let api = api.clone();
                let pool = pool.clone();
                async move {
                    let v = serde_json::to_value(api.get(&pool).await.ok()?).ok()?;
                    let c = v["status"]["conditions"]
                        .as_array()?
                        .iter()
                        .find(|c| c["type"] == "ValidationSucceeded")?
                        .clone();
                    Some(c)
                }
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
        checked += 1;
        let message = verdict["message"].as_str().unwrap_or_default();
        if verdict["status"] != "False" || !message.contains(&reason) {
            disagreements.push(format!(
                "{name}: validate {ours:?}, the controller's ValidationSucceeded {verdict}"
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {checked} objects judged differently:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    assert!(checked > 170, "only {checked} objects checked");
}
