//! The SDK clients the provider calls, built once from a region, an optional endpoint override
//! (moto in tests, a VPC endpoint in isolated clusters) and credentials from the default chain.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_ec2::config::Credentials;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};

/// Where and as whom to call AWS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientOptions {
    pub region: String,
    /// Sends every call to this URL instead of the regional AWS endpoints.
    pub endpoint_url: Option<String>,
    /// Fixed credentials instead of the default chain (environment, profile, web identity,
    /// container and instance metadata).
    pub credentials: Option<StaticCredentials>,
}

#[derive(Clone, PartialEq, Eq)]
pub struct StaticCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

impl ClientOptions {
    pub fn new(region: &str) -> Self {
        ClientOptions {
            region: region.to_string(),
            endpoint_url: None,
            credentials: None,
        }
    }
}

/// The region whose Pricing API endpoint serves `region`'s prices: the API lives in only a few
/// regions.
pub fn pricing_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else {
        "us-east-1"
    }
}

/// The shared SDK configuration for `options`: rustls, the region, the endpoint override and
/// the credentials (resolved lazily, on the first call).
pub async fn sdk_config(options: &ClientOptions) -> SdkConfig {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(options.region.clone()))
        .http_client(http);
    if let Some(url) = &options.endpoint_url {
        loader = loader.endpoint_url(url.clone());
    }
    if let Some(c) = &options.credentials {
        loader = loader.credentials_provider(Credentials::new(
            c.access_key_id.clone(),
            c.secret_access_key.clone(),
            None,
            None,
            "nodewright-static",
        ));
    }
    loader.load().await
}

/// One client per service, sharing one HTTPS connection pool. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AwsClients {
    pub region: String,
    pub ec2: aws_sdk_ec2::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub iam: aws_sdk_iam::Client,
    pub pricing: aws_sdk_pricing::Client,
    pub eks: aws_sdk_eks::Client,
    pub sqs: aws_sdk_sqs::Client,
    /// ARC zonal shift, asked only with `ENABLE_ZONAL_SHIFT`.
    pub arc: aws_sdk_arczonalshift::Client,
}

impl AwsClients {
    /// Loads the shared configuration and builds the clients.
    pub async fn new(options: &ClientOptions) -> Self {
        Self::from_config(&options.region, &sdk_config(options).await)
    }

    /// Clients from an already loaded configuration. The Pricing client is pointed at the
    /// region that serves `region`'s prices.
    pub fn from_config(region: &str, config: &SdkConfig) -> Self {
        let pricing = aws_sdk_pricing::config::Builder::from(config)
            .region(Region::new(pricing_region(region)))
            .build();
        AwsClients {
            region: region.to_string(),
            ec2: aws_sdk_ec2::Client::new(config),
            ssm: aws_sdk_ssm::Client::new(config),
            iam: aws_sdk_iam::Client::new(config),
            pricing: aws_sdk_pricing::Client::from_conf(pricing),
            eks: aws_sdk_eks::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
            arc: aws_sdk_arczonalshift::Client::new(config),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pricing_endpoint_regions() {
        assert_eq!(pricing_region("us-west-2"), "us-east-1");
        assert_eq!(pricing_region("ap-southeast-1"), "ap-south-1");
        assert_eq!(pricing_region("eu-west-1"), "eu-central-1");
        assert_eq!(pricing_region("cn-north-1"), "cn-northwest-1");
        assert_eq!(pricing_region("sa-east-1"), "us-east-1");
    }
}
