//! A moto server of the test's own (so no other test's instances show up in its cloud),
//! started from the venv `scripts/moto` installs, and the AWS objects an EC2NodeClass selects,
//! created by `aws_world.py` with boto3 from the same venv.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{free_port, repo_root};

pub struct Moto {
    child: Child,
    pub url: String,
    venv: PathBuf,
    /// Where moto writes the requests it records (see [`Moto::record`]).
    recording: PathBuf,
}

/// What `aws_world.py` created: ids the test's manifests and assertions name.
#[derive(Debug)]
pub struct World {
    pub raw: Value,
}

impl World {
    pub fn get(&self, key: &str) -> String {
        self.raw[key]
            .as_str()
            .unwrap_or_else(|| panic!("the world has no {key}: {}", self.raw))
            .to_string()
    }
}

fn venv() -> PathBuf {
    std::env::var_os("NODEWRIGHT_MOTO_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/moto-venv"))
}

impl Moto {
    pub async fn start(log: PathBuf) -> Moto {
        let venv = venv();
        let port = free_port();
        let out = std::fs::File::create(&log).expect("moto log");
        let recording = log.with_file_name("moto-recording.jsonl");
        let child = Command::new(venv.join("bin/moto_server"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION", "true")
            .env("MOTO_ENABLE_AMI_VALIDATION", "true")
            .env("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
            .env("MOTO_RECORDER_FILEPATH", &recording)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("moto_server starts (scripts/moto installs it)");
        let url = format!("http://127.0.0.1:{port}");
        let mut moto = Moto {
            child,
            url,
            venv,
            recording,
        };
        for _ in 0..200 {
            if super::controller::http_get(&format!("{}/", moto.url))
                .await
                .is_some()
            {
                return moto;
            }
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!("moto_server exited: {status}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("moto_server did not answer on {}", moto.url);
    }

    /// Runs `aws_world.py CLUSTER`: a VPC with a tagged subnet per zone, a tagged security
    /// group, the node role, an image, the EKS cluster and the interruption queue.
    pub fn world(&self, cluster: &str) -> World {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cluster/aws_world.py");
        let out = Command::new(self.venv.join("bin/python"))
            .arg(script)
            .arg(&self.url)
            .arg(cluster)
            .output()
            .expect("python runs");
        assert!(
            out.status.success(),
            "aws_world.py failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        World {
            raw: serde_json::from_slice(&out.stdout).expect("aws_world.py prints JSON"),
        }
    }

    /// Runs a boto3 snippet with `ec2`, `sqs` and `json` bound; returns what it prints as JSON.
    pub fn boto(&self, code: &str) -> Value {
        let program = format!(
            "import boto3, json\nkw = dict(endpoint_url={url:?}, region_name='us-east-1', aws_access_key_id='testing', aws_secret_access_key='testing')\nec2 = boto3.client('ec2', **kw)\nsqs = boto3.client('sqs', **kw)\n{code}\n",
            url = self.url
        );
        let out = Command::new(self.venv.join("bin/python"))
            .args(["-c", &program])
            .output()
            .expect("python runs");
        assert!(
            out.status.success(),
            "boto3 failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// The cluster's instances as EC2 reports them: id, state, type, zone and tags.
    pub fn instances(&self, cluster: &str) -> Vec<Value> {
        let v = self.boto(&format!(
            "out = []\nfor r in ec2.describe_instances(Filters=[{{'Name': 'tag-key', 'Values': ['kubernetes.io/cluster/{cluster}']}}])['Reservations']:\n    for i in r['Instances']:\n        out.append({{'id': i['InstanceId'], 'state': i['State']['Name'], 'type': i['InstanceType'], 'zone': i['Placement']['AvailabilityZone'], 'subnet': i.get('SubnetId'), 'tags': {{t['Key']: t['Value'] for t in i.get('Tags', [])}}}})\nprint(json.dumps(out))"
        ));
        v.as_array().cloned().unwrap_or_default()
    }

    /// Records every request from now on (moto's recorder), for [`Moto::sdk_actions`].
    pub fn record(&self) {
        self.boto(&format!(
            "import urllib.request\nurllib.request.urlopen(urllib.request.Request({:?}, method='POST'))",
            format!("{}/moto-api/recorder/start-recording", self.url)
        ));
    }

    /// The IAM actions (`ec2:DescribeInstances`) of the recorded requests aws-sdk-rust made
    /// (the controller's and its node agent's; the test's own boto3 calls are left out).
    pub fn sdk_actions(&self) -> BTreeSet<String> {
        let text = std::fs::read_to_string(&self.recording).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| {
                header(e, "user-agent").contains("aws-sdk-rust")
                    || header(e, "x-amz-user-agent").contains("aws-sdk-rust")
            })
            .map(|e| iam_action(&e))
            .collect()
    }
}

/// A recorded request's header, by lower-case name.
fn header(entry: &Value, name: &str) -> String {
    entry["headers"]
        .as_object()
        .into_iter()
        .flatten()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| v.as_str())
        .unwrap_or_default()
        .to_string()
}

/// The IAM action a recorded request needs: the signing service from its credential scope
/// and the operation from `X-Amz-Target` (JSON protocols), the `Action` of a query body, or
/// the route of a REST call. A REST route not known here comes back as `service:METHOD path`,
/// which no policy allows, so a new kind of call is noticed.
fn iam_action(entry: &Value) -> String {
    let auth = header(entry, "authorization");
    let service = auth
        .split("Credential=")
        .nth(1)
        .and_then(|c| c.split('/').nth(3))
        .unwrap_or("unknown")
        .to_string();
    let target = header(entry, "x-amz-target");
    if let Some((_, op)) = target.rsplit_once('.') {
        return format!("{service}:{op}");
    }
    let mut body = entry["body"].as_str().unwrap_or_default().to_string();
    if entry["body_encoded"].as_bool() == Some(true) {
        body = base64_decode(&body);
    }
    if let Some(op) = body.split('&').find_map(|kv| kv.strip_prefix("Action=")) {
        return format!("{service}:{op}");
    }
    let method = entry["method"].as_str().unwrap_or_default();
    let url = entry["url"].as_str().unwrap_or_default();
    let path = url
        .split("://")
        .nth(1)
        .and_then(|r| r.split_once('/'))
        .map_or("", |(_, p)| p);
    let path = path.split('?').next().unwrap_or_default();
    let op = match (
        service.as_str(),
        method,
        path.split('/').next().unwrap_or_default(),
    ) {
        ("eks", "GET", "clusters") => "DescribeCluster",
        ("arc-zonal-shift", "GET", "managedresources") => "GetManagedResource",
        _ => return format!("{service}:{method} /{path}"),
    };
    format!("{service}:{op}")
}

/// Standard base64, as moto encodes a binary body.
fn base64_decode(text: &str) -> String {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for v in text.bytes().filter_map(value) {
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every action of the controller's IAM policy (`deploy/controller-policy.json`).
pub fn policy_actions() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo_root().join("deploy/controller-policy.json"))
        .expect("the controller policy");
    let policy: Value = serde_json::from_str(&text).expect("the policy is JSON");
    let mut out = BTreeSet::new();
    let mut stack = vec![&policy];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("Action", Value::String(a)) => drop(out.insert(a.clone())),
                        ("Action", Value::Array(a)) => {
                            out.extend(a.iter().filter_map(Value::as_str).map(String::from))
                        }
                        _ => stack.push(x),
                    }
                }
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    out
}

/// Fails naming each action the recorded SDK calls made that the policy does not allow.
/// `sts:GetCallerIdentity` needs no permission.
pub fn assert_policy_allows(actions: &BTreeSet<String>) {
    let policy = policy_actions();
    let missing: Vec<&String> = actions
        .iter()
        .filter(|a| !policy.contains(*a) && a.as_str() != "sts:GetCallerIdentity")
        .collect();
    assert!(
        missing.is_empty(),
        "calls deploy/controller-policy.json does not allow: {missing:?} (made: {actions:?})"
    );
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
