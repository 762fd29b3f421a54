//! The built `nodewright` binary as a process of its own, as an operator runs it out of the
//! cluster: `nodewright controller` (or `nodewright node-agent`) with a kubeconfig, its log
//! in a file the test can read, its metrics and health on free ports of 127.0.0.1.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{ControlPlane, free_port};

pub struct Controller {
    child: Option<Child>,
    pub name: String,
    pub log: PathBuf,
    pub metrics_port: u16,
    pub health_port: u16,
}

/// What to run: `nodewright ARGS...` with this environment.
pub struct Launch {
    pub name: String,
    pub kubeconfig: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub log_dir: PathBuf,
}

impl Launch {
    /// `nodewright controller --cloud-provider sim` on `cp`, as the admin, electing a leader
    /// in `default` as an out-of-cluster controller does.
    pub fn sim(cp: &ControlPlane, name: &str) -> Launch {
        Launch {
            name: name.into(),
            kubeconfig: cp.kubeconfig.clone(),
            args: [
                "controller",
                "--cloud-provider",
                "sim",
                "--cluster-name",
                "e2e",
                "--leader-election-namespace",
                "default",
            ]
            .map(String::from)
            .to_vec(),
            env: Vec::new(),
            log_dir: cp.dir.clone(),
        }
    }

    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.into());
        self
    }

    /// Sets `--flag value`, replacing the value the launch already has for it.
    pub fn flag(mut self, flag: &str, value: &str) -> Self {
        match self.args.iter().position(|a| a == flag) {
            Some(i) if i + 1 < self.args.len() => self.args[i + 1] = value.into(),
            _ => self.args.extend([flag.to_string(), value.to_string()]),
        }
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    pub fn kubeconfig(mut self, path: &Path) -> Self {
        self.kubeconfig = path.to_path_buf();
        self
    }

    pub fn start(self) -> Controller {
        let metrics_port = free_port();
        let health_port = free_port();
        // Each start gets a log of its own, so a restarted process does not overwrite the
        // log of the one it replaced.
        let mut n = 0;
        let log = loop {
            let p = self.log_dir.join(format!("{}-{n}.log", self.name));
            if !p.exists() {
                break p;
            }
            n += 1;
        };
        let out = File::create(&log).expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nodewright"));
        cmd.args(&self.args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("METRICS_PORT", metrics_port.to_string())
            .env("HEALTH_PROBE_PORT", health_port.to_string())
            .env("LISTEN_ADDRESS", "127.0.0.1")
            .env("HOSTNAME", &self.name)
            .env_remove("AWS_REGION")
            .env_remove("AWS_ENDPOINT_URL")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log handle"))
            .stderr(out);
        let child = cmd.spawn().expect("nodewright starts");
        Controller {
            child: Some(child),
            name: self.name,
            log,
            metrics_port,
            health_port,
        }
    }
}

impl Controller {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// How the process ended, once it has ended on its own; `None` while it runs.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// `/readyz` answers 200 (every watch has listed).
    pub async fn wait_ready(&mut self) {
        let url = format!("http://127.0.0.1:{}/readyz", self.health_port);
        let name = self.name.clone();
        let log = self.log.clone();
        super::eventually(Duration::from_secs(60), &format!("{name} ready"), || {
            let url = url.clone();
            async move { (http_get(&url).await.map(|(s, _)| s) == Some(200)).then_some(()) }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", std::fs::read_to_string(&log).unwrap_or_default()));
    }

    /// The text of `/metrics`.
    pub async fn metrics(&self) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.metrics_port);
        http_get(&url).await.map(|(_, b)| b).unwrap_or_default()
    }

    /// SIGTERM, as the kubelet stops a pod; waits up to 20 s for the exit.
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        for _ in 0..200 {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill();
        None
    }

    /// SIGKILL: the process gets no chance to clean up.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A plain HTTP/1.1 GET on 127.0.0.1: (status, body), or `None` when nothing answers.
pub async fn http_get(url: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut stream =
        tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(host))
            .await
            .ok()?
            .ok()?;
    let request = format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Some((status, if chunked { dechunk(body) } else { body.into() }))
}

/// The body of a chunked HTTP/1.1 response.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}
