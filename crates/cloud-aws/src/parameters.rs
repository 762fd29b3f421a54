//! SSM parameter lookups behind a narrow trait. AMI aliases resolve through AWS's public
//! parameters under `/aws/service/...`, which only AWS itself can publish; the trait lets tests
//! (and air-gapped installs that mirror the parameters) serve them from elsewhere.

use async_trait::async_trait;

use crate::error::AwsError;

#[async_trait]
pub trait Parameters: Send + Sync {
    /// The value of parameter `name`, `None` when it does not exist.
    async fn get(&self, name: &str) -> Result<Option<String>, AwsError>;
}

/// Reads parameters from SSM. `prefix` is prepended to every name: empty against AWS; in
/// tests, a private path under which the public parameters were copied (SSM refuses writes
/// under `/aws/`).
#[derive(Clone, Debug)]
pub struct SsmParameters {
    client: aws_sdk_ssm::Client,
    prefix: String,
}

impl SsmParameters {
    pub fn new(client: aws_sdk_ssm::Client) -> Self {
        Self::with_prefix(client, "")
    }

    pub fn with_prefix(client: aws_sdk_ssm::Client, prefix: &str) -> Self {
        SsmParameters {
            client,
            prefix: prefix.trim_end_matches('/').to_string(),
        }
    }
}

#[async_trait]
impl Parameters for SsmParameters {
    async fn get(&self, name: &str) -> Result<Option<String>, AwsError> {
        let full = format!("{}{}", self.prefix, name);
        match self.client.get_parameter().name(&full).send().await {
            Ok(out) => Ok(out.parameter.and_then(|p| p.value)),
            Err(e) => {
                let e = AwsError::from_sdk("GetParameter", e);
                if e.is_not_found() { Ok(None) } else { Err(e) }
            }
        }
    }
}
