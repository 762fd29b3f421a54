//! One error type for every AWS call: which operation, the service's error code when it sent
//! one, and whether retrying may help. It converts into the controller's closed
//! [`CloudError`].

use std::fmt::Debug;

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use nodewright_cloud::CloudError;
use thiserror::Error;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{operation} failed: {message}")]
pub struct AwsError {
    pub operation: String,
    /// The AWS error code (`InvalidSubnetID.NotFound`, `Throttling` ...), when the service
    /// answered with one.
    pub code: Option<String>,
    pub message: String,
    pub retryable: bool,
}

/// Error codes that mean "slow down", whatever the HTTP status.
const THROTTLING_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "TooManyRequestsException",
    "ServiceUnavailable",
    "InternalError",
    "InternalFailure",
];

impl AwsError {
    pub fn new(operation: &str, message: impl Into<String>) -> Self {
        AwsError {
            operation: operation.to_string(),
            code: None,
            message: message.into(),
            retryable: false,
        }
    }

    pub fn with_code(mut self, code: &str) -> Self {
        self.code = Some(code.to_string());
        self
    }

    /// The call failed because the named thing does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code.as_deref().is_some_and(|c| {
            c.ends_with(".NotFound")
                || c.ends_with("NotFound")
                || c == "NoSuchEntity"
                || c == "ParameterNotFound"
        })
    }

    /// Converts an SDK error of any service.
    pub fn from_sdk<E, R>(operation: &str, err: SdkError<E, R>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: Debug,
    {
        let transport = matches!(
            err,
            SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_)
        );
        let code = err.code().map(str::to_string);
        let message = match (err.code(), err.message()) {
            (Some(c), Some(m)) => format!("{c}: {m}"),
            (Some(c), None) => c.to_string(),
            (None, Some(m)) => m.to_string(),
            (None, None) => format!("{}", aws_sdk_ec2::error::DisplayErrorContext(&err)),
        };
        let throttled = code
            .as_deref()
            .is_some_and(|c| THROTTLING_CODES.contains(&c));
        AwsError {
            operation: operation.to_string(),
            code,
            message,
            retryable: transport || throttled,
        }
    }
}

impl From<AwsError> for CloudError {
    fn from(e: AwsError) -> Self {
        CloudError::Api {
            operation: e.operation,
            message: e.message,
            retryable: e.retryable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_codes() {
        let e = AwsError::new("DescribeSubnets", "x").with_code("InvalidSubnetID.NotFound");
        assert!(e.is_not_found());
        assert!(
            AwsError::new("GetRole", "x")
                .with_code("NoSuchEntity")
                .is_not_found()
        );
        assert!(
            !AwsError::new("GetRole", "x")
                .with_code("AccessDenied")
                .is_not_found()
        );
        let c: CloudError = AwsError::new("DescribeSubnets", "boom").into();
        assert!(!c.is_retryable());
    }
}
