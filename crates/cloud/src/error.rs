//! The closed set of failures a cloud reports. The controller branches on the variant
//! (retry, mark an offering unavailable, treat as deleted), never on message text.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum CloudError {
    /// No allowed offering had capacity. `offerings` lists `(instance type, zone, capacity
    /// type)` that failed so the caller can mark them unavailable.
    #[error("insufficient capacity: {message}")]
    InsufficientCapacity {
        message: String,
        offerings: Vec<(String, String, String)>,
    },
    /// The instance does not exist (or is terminated).
    #[error("instance {provider_id} not found")]
    NotFound { provider_id: String },
    /// The claim's node class is missing or not ready; launching cannot succeed until it is.
    #[error("node class {name} is not ready: {reason}")]
    NodeClassNotReady { name: String, reason: String },
    /// The request cannot succeed as written (no instance type satisfies the requirements, a
    /// malformed provider id ...). Retrying the same request will not help.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A cloud API call failed. `retryable` is true for throttling and server errors.
    #[error("{operation} failed: {message}")]
    Api {
        operation: String,
        message: String,
        retryable: bool,
    },
}

impl CloudError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, CloudError::NotFound { .. })
    }

    pub fn is_retryable(&self) -> bool {
        match self {
            CloudError::Api { retryable, .. } => *retryable,
            CloudError::InsufficientCapacity { .. } | CloudError::NodeClassNotReady { .. } => true,
            CloudError::NotFound { .. } | CloudError::InvalidRequest(_) => false,
        }
    }
}
