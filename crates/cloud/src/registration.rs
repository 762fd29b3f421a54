//! What a provider's registration hooks say about one claim whose Node has appeared: labels
//! only the running instance can tell (the placement-group partition EC2 chose), or that the
//! provider cannot tell yet and registration must wait.

use std::collections::BTreeMap;

/// The result of running a provider's registration hooks for one claim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registration {
    /// Labels the claim and its Node gain; labels the claim already carries win.
    pub labels: BTreeMap<String, String>,
    /// Why the Node must stay unregistered for now (`None`: nothing is pending).
    pub pending: Option<String>,
}

impl Registration {
    /// Nothing to add and nothing to wait for.
    pub fn done() -> Self {
        Registration::default()
    }

    /// Registration must wait; `why` becomes the condition's message.
    pub fn pending(why: impl Into<String>) -> Self {
        Registration {
            labels: BTreeMap::new(),
            pending: Some(why.into()),
        }
    }

    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }
}
