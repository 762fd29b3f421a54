//! A moto server of the test's own (so no other test's instances show up in its cloud),
//! started from the venv `scripts/moto` installs, and the AWS objects an EC2NodeClass selects,
//! created by `aws_world.py` with boto3 from the same venv.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{free_port, repo_root};

pub struct Moto {
    child: Child,
    pub url: String,
    venv: PathBuf,
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
        let child = Command::new(venv.join("bin/moto_server"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION", "true")
            .env("MOTO_ENABLE_AMI_VALIDATION", "true")
            .env("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("moto_server starts (scripts/moto installs it)");
        let url = format!("http://127.0.0.1:{port}");
        let mut moto = Moto { child, url, venv };
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
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
