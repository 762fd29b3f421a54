//! The Go harness that runs upstream Karpenter's scheduler (`bench/karpenter`), kept running
//! as a child process: one input path per line in, one interchange output document per line out.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;

/// Where the harness binary is: `--karpenter`, else `NODEWRIGHT_KARPENTER_BENCH`, else what
/// `scripts/bench-karpenter build` (run from the repository root) builds or finds cached.
pub fn locate(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("NODEWRIGHT_KARPENTER_BENCH") {
        return Ok(PathBuf::from(p));
    }
    let script = Path::new("scripts/bench-karpenter");
    if !script.is_file() {
        bail!(
            "no Karpenter harness: run from the repository root (where scripts/bench-karpenter \
             builds it), or pass --karpenter PATH"
        );
    }
    let out = Command::new("bash")
        .arg(script)
        .arg("build")
        .stderr(Stdio::inherit())
        .output()
        .context("running scripts/bench-karpenter build")?;
    if !out.status.success() {
        bail!("scripts/bench-karpenter build failed ({})", out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().last() {
        Some(line) if !line.trim().is_empty() => Ok(PathBuf::from(line.trim())),
        _ => bail!("scripts/bench-karpenter build printed no path"),
    }
}

pub struct Harness {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Harness {
    pub fn start(binary: &Path) -> anyhow::Result<Self> {
        let mut child = Command::new(binary)
            .arg("-serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdin = child.stdin.take().context("harness stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("harness stdout")?);
        Ok(Harness {
            child,
            stdin,
            stdout,
        })
    }

    /// Upstream's plan for the input at `path`: one solve on a fresh scheduler.
    pub fn solve(&mut self, path: &Path) -> anyhow::Result<Value> {
        writeln!(self.stdin, "{}", path.display()).context("writing to the harness")?;
        self.stdin.flush()?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!(
                "the Karpenter harness exited while solving {}",
                path.display()
            );
        }
        let v: Value = serde_json::from_str(&line).context("reading the harness's answer")?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            bail!("Karpenter harness: {e}");
        }
        Ok(v)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // Closing stdin ends its loop; wait so no process outlives the command.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
