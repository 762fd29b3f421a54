//! Work a provider does on an instance once its claim has registered (upstream's
//! `nodeclaim.tagging`): only then is the Node's name known, so only then can the instance be
//! named after it. The controller finds the claims that still need it and writes the
//! provider's marker annotations once the provider is done, so each instance is tagged once.

/// A registered claim's instance, as the post-registration hook sees it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RegisteredInstance {
    pub nodeclaim: String,
    /// The claim's `status.nodeName`.
    pub node_name: String,
    pub provider_id: String,
}
