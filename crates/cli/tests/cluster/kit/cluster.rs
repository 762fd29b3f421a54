//! A real control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) for
//! one test, started by `scripts/cluster up` in a directory of its own and stopped when the
//! [`ControlPlane`] is dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Condvar, Mutex};

use super::repo_root;

/// `scripts/test` sets this: the suite runs and fails loudly. Without it (a plain
/// `cargo test`) every test here says it was skipped, since the control plane's first build
/// takes minutes.
pub const REQUIRE: &str = "NODEWRIGHT_REQUIRE_CLUSTER";

/// How many control planes run at once (`NODEWRIGHT_CLUSTER_SLOTS`, default 3): each takes
/// a good part of a core while it starts, but most of a test is waiting on timers (leases,
/// `consolidateAfter`, validation delays), so three share two cores well. `cargo test` runs
/// as many tests at once as the machine has cores unless `--test-threads` says more.
fn slots() -> usize {
    std::env::var("NODEWRIGHT_CLUSTER_SLOTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(3)
}

static TAKEN: Mutex<usize> = Mutex::new(0);
static FREED: Condvar = Condvar::new();

/// One of [`slots`] places; given back on drop.
struct Slot;

impl Slot {
    fn take() -> Slot {
        let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
        while *taken >= slots() {
            taken = FREED.wait(taken).unwrap_or_else(|e| e.into_inner());
        }
        *taken += 1;
        Slot
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        *TAKEN.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        FREED.notify_one();
    }
}

pub struct ControlPlane {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    /// Where `kubectl`, `helm` and the servers live.
    pub bin: PathBuf,
    _slot: Slot,
}

/// Options for [`ControlPlane::start_with`].
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The controller-manager's client QPS and burst (upstream's 20/30 when `None`).
    pub kcm_qps: Option<(u32, u32)>,
}

impl ControlPlane {
    /// A fresh control plane for `test`, or `None` (with a note) when the suite is not
    /// required and so skipped.
    pub fn start(test: &str) -> Option<ControlPlane> {
        Self::start_with(test, Options::default())
    }

    pub fn start_with(test: &str, options: Options) -> Option<ControlPlane> {
        if std::env::var(REQUIRE).as_deref() != Ok("1") {
            eprintln!(
                "skipping {test}: the real control plane runs under scripts/test ({REQUIRE}=1)"
            );
            return None;
        }
        let slot = Slot::take();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("cluster")
            .join(test);
        let mut up = Command::new(repo_root().join("scripts/cluster"));
        up.arg("up").arg(&dir);
        if let Some((qps, burst)) = options.kcm_qps {
            up.env("NODEWRIGHT_KCM_QPS", qps.to_string())
                .env("NODEWRIGHT_KCM_BURST", burst.to_string());
        }
        let out = up.output().expect("scripts/cluster runs");
        assert!(
            out.status.success(),
            "scripts/cluster up {} failed:\n{}{}",
            dir.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let bin = Command::new(repo_root().join("scripts/cluster"))
            .arg("build")
            .stderr(Stdio::inherit())
            .output()
            .expect("scripts/cluster build runs");
        let bin = PathBuf::from(String::from_utf8_lossy(&bin.stdout).trim());
        Some(ControlPlane {
            kubeconfig: dir.join("kubeconfig"),
            dir,
            bin,
            _slot: slot,
        })
    }

    /// A kube client with the admin's credentials.
    pub async fn client(&self) -> kube::Client {
        client_for(&self.kubeconfig).await
    }

    /// Runs `kubectl` (as the admin) and returns its output whatever its exit.
    pub fn kubectl_output(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.tool("kubectl", args, stdin)
    }

    /// Runs `kubectl` and returns its stdout; panics with its stderr if it fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        succeed("kubectl", args, self.kubectl_output(args, None))
    }

    /// `kubectl apply -f PATH` (a file or a directory, relative to the repository root).
    pub fn apply_path(&self, path: &str) -> String {
        let full = repo_root().join(path);
        self.kubectl(&["apply", "-f", &full.to_string_lossy()])
    }

    /// `kubectl apply -f -` with `yaml` on stdin.
    pub fn apply(&self, yaml: &str) -> Result<String, String> {
        let out = self.kubectl_output(&["apply", "-f", "-"], Some(yaml));
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Runs `helm` with this control plane's kubeconfig.
    pub fn helm(&self, args: &[&str]) -> Output {
        self.tool("helm", args, None)
    }

    fn tool(&self, name: &str, args: &[&str], stdin: Option<&str>) -> Output {
        run_tool(&self.bin.join(name), &self.kubeconfig, args, stdin)
    }

    /// The CRDs from the chart, as a user installs them.
    pub fn install_crds(&self) {
        self.apply_path("charts/nodewright/crds");
        // Established before anything of theirs is created. `kubectl wait` fails at once,
        // rather than waiting, on a CRD the apiserver has not given any condition yet
        // (".status.conditions accessor error"), so that answer is asked again.
        let args = [
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/nodepools.karpenter.sh",
            "crd/nodeclaims.karpenter.sh",
            "crd/ec2nodeclasses.karpenter.k8s.aws",
        ];
        for _ in 0..20 {
            let out = self.kubectl_output(&args, None);
            let no_conditions_yet = String::from_utf8_lossy(&out.stderr).contains("accessor error");
            if out.status.success() || !no_conditions_yet {
                succeed("kubectl", &args, out);
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        self.kubectl(&args);
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("scripts/cluster"))
            .arg("down")
            .arg(&self.dir)
            .status();
    }
}

pub fn run_tool(tool: &Path, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut cmd = Command::new(tool);
    cmd.args(args)
        .env("KUBECONFIG", kubeconfig)
        // helm keeps its caches and config here, not in the user's home.
        .env("HELM_CACHE_HOME", kubeconfig.with_file_name("helm-cache"))
        .env("HELM_CONFIG_HOME", kubeconfig.with_file_name("helm-config"))
        .env("HELM_DATA_HOME", kubeconfig.with_file_name("helm-data"))
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{} runs: {e}", tool.display()));
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin piped")
            .write_all(input.as_bytes())
            .expect("stdin written");
    }
    child.wait_with_output().expect("tool finishes")
}

pub fn succeed(name: &str, args: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "{name} {} failed:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub async fn client_for(kubeconfig: &Path) -> kube::Client {
    let raw = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig reads");
    let config =
        kube::Config::from_custom_kubeconfig(raw, &kube::config::KubeConfigOptions::default())
            .await
            .expect("kubeconfig loads");
    kube::Client::try_from(config).expect("client builds")
}
