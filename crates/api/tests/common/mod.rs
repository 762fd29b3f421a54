//! Helpers shared by the integration tests: fixture paths and document loading.

#![allow(dead_code)]

use std::path::PathBuf;

use nodewright_api::document::{Document, read_documents};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixture(rel: &str) -> PathBuf {
    repo_root().join("fixtures").join(rel)
}

pub fn docs(rel: &str) -> Vec<Document> {
    read_documents(&fixture(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}
