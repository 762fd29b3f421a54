//! Conversion of older karpenter.sh generations to v1, and of whole inputs (several objects at
//! once, because a NodePool's kubelet settings move into the node class it references).
//!
//! Nothing is dropped silently: whatever has no v1 home is named in a warning.

pub mod documents;
pub mod v1alpha5;
pub mod v1beta1;

pub use documents::{ConvertOptions, Item, Outcome, convert_documents};

/// Where a v1beta1 NodePool's kubelet settings are kept when they cannot move into an
/// EC2NodeClass of the same input (upstream's conversion webhook uses the same annotation).
pub const KUBELET_COMPATIBILITY_ANNOTATION: &str =
    "compatibility.karpenter.sh/v1beta1-kubelet-conversion";

/// The AWS node class group and kind every v1 NodePool of ours references by default.
pub const DEFAULT_NODE_CLASS_GROUP: &str = "karpenter.k8s.aws";
pub const DEFAULT_NODE_CLASS_KIND: &str = "EC2NodeClass";

/// Maps old node class kinds to their v1 names.
pub fn node_class_kind(kind: &str) -> &str {
    match kind {
        "AWSNodeTemplate" => DEFAULT_NODE_CLASS_KIND,
        other => other,
    }
}
