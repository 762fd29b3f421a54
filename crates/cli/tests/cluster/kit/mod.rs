//! The end-to-end suite's kit: a real control plane per test (`scripts/cluster`), the built
//! `nodewright` binary run against it as a separate process, `kubectl` for what a user types,
//! a kube client for what the tests read, and a wait that says what it waited for.

#![allow(dead_code)]

pub mod cluster;
pub mod controller;
pub mod manifests;
pub mod moto;
pub mod read;
pub mod tty;
pub mod wait;

pub use cluster::ControlPlane;
pub use manifests::inflate;
pub use wait::{eventually, pods_running};

use std::path::PathBuf;

/// The repository's root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

/// Every line of a controller's log is a JSON object whose fields are plain values: no Rust
/// debug text such as `Some("...")` or `None` where a value belongs.
pub fn assert_clean_log(log: &str) {
    for (i, line) in log.lines().enumerate() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            panic!("log line {} is not JSON: {line}", i + 1);
        };
        for (k, field) in v.as_object().into_iter().flatten() {
            if let Some(s) = field.as_str() {
                assert!(
                    !s.starts_with("Some(") && s != "None",
                    "log line {} field {k} holds debug text: {line}",
                    i + 1
                );
            }
        }
    }
}

pub use nodewright_testkit::port::free_port;
