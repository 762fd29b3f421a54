//! Nodes and NodeClaims as core's model, converted once when the index takes a new copy
//! rather than by every snapshot: the provisioner's and the disruption loop's passes each
//! took a snapshot of every Node and claim, often at the same moment, and at 2,000 Nodes the
//! two conversions were some 45 MiB of the controller's peak heap (`docs/reliability-log.md`).
//! Each snapshot now shares the one conversion (`Arc`), as it shares the pods' models.
//!
//! Label and annotation maps equal between objects are held once ([`Shared`]): claims
//! launched as one instance type in one zone carry the same labels, and the claims and Nodes
//! of one NodePool the same annotations.
//!
//! A Node's labels are held here alone: the index's copy of a Node that converted has none
//! (see `ClusterState::put_node`).
//!
//! A Node's heartbeat (see [`super::heartbeat`]) keeps its conversion: the model then carries
//! the `resourceVersion` of the copy it was made from, which names the same content, and that
//! is all core reads it for (its caches' key).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use nodewright_api::v1::nodeclaim::NodeClaim as ApiClaim;
use nodewright_core::model::{Node, NodeClaim, Shared};

use super::convert;

/// An object's conversion, or why it did not convert (the snapshot reports it).
pub type Converted<T> = Result<Arc<T>, String>;

/// The conversions of the index's Nodes and observed NodeClaims, by key.
#[derive(Clone, Debug, Default)]
pub(super) struct Models {
    nodes: BTreeMap<String, Converted<Node>>,
    claims: BTreeMap<String, Converted<NodeClaim>>,
    /// One copy of each label or annotation map the conversions hold.
    maps: Shared<BTreeMap<String, String>>,
}

impl Models {
    pub(super) fn put_node(&mut self, key: &str, n: &api::Node) {
        let converted = convert::node(n).map(|mut m| {
            self.maps.share(&mut m.annotations);
            Arc::new(m)
        });
        self.nodes.insert(key.to_owned(), converted);
    }

    pub(super) fn put_claim(&mut self, key: &str, c: &ApiClaim) {
        let converted = convert::nodeclaim(c).map(|mut m| {
            self.maps.share(&mut m.labels);
            self.maps.share(&mut m.annotations);
            Arc::new(m)
        });
        self.claims.insert(key.to_owned(), converted);
    }

    pub(super) fn remove_node(&mut self, key: &str) {
        self.nodes.remove(key);
    }

    pub(super) fn remove_claim(&mut self, key: &str) {
        self.claims.remove(key);
    }

    pub(super) fn clear_nodes(&mut self) {
        self.nodes.clear();
    }

    pub(super) fn clear_claims(&mut self) {
        self.claims.clear();
    }

    /// The Node at `key` as converted when the index took it; `n`, its copy in the index,
    /// is converted afresh only if it has no conversion (which the index does not allow), in
    /// which case `n` holds its own labels.
    pub(super) fn node(&self, key: &str, n: &api::Node) -> Converted<Node> {
        match self.nodes.get(key) {
            Some(c) => c.clone(),
            None => convert::node(n).map(Arc::new),
        }
    }

    /// The labels of the Node at `key` as its conversion holds them; `None` when it has no
    /// conversion or did not convert.
    pub(super) fn node_labels(&self, key: &str) -> Option<&BTreeMap<String, String>> {
        match self.nodes.get(key)? {
            Ok(n) => Some(&n.labels),
            Err(_) => None,
        }
    }

    /// The observed NodeClaim at `key`, as [`Models::node`].
    pub(super) fn claim(&self, key: &str, c: &ApiClaim) -> Converted<NodeClaim> {
        match self.claims.get(key) {
            Some(m) => m.clone(),
            None => convert::nodeclaim(c).map(Arc::new),
        }
    }
}
