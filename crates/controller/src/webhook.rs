//! The conversion webhook. The CRDs serve `v1beta1` beside `v1` (stored), and the API server
//! asks this process to convert between them (`nodewright_api::versions` does the work). At
//! start the process makes its own certificate authority and serving certificate
//! ([`cert`]), serves ConversionReviews over TLS on `WEBHOOK_PORT` ([`server`], [`review`]),
//! and points the CRDs' conversion at itself with that authority as `caBundle` ([`inject`]),
//! checking again every minute, since applying the CRDs anew (a CRD chart upgrade) resets
//! them.

pub mod cert;
pub mod inject;
pub mod review;
pub mod secret;
pub mod server;
pub mod settings;

pub use settings::{Target, WebhookSettings};

use std::net::SocketAddr;

use thiserror::Error;

use crate::supervise::Supervisor;

#[derive(Debug, Error)]
pub enum WebhookError {
    #[error(transparent)]
    Cert(#[from] cert::CertError),
    #[error(transparent)]
    Secret(#[from] secret::SecretError),
}

/// Makes (or, in the cluster, fetches) the identity, then runs the server and the CRD upkeep
/// as two of the process's loops.
pub async fn start(
    loops: &mut Supervisor,
    client: kube::Client,
    target: Target,
    addr: SocketAddr,
) -> Result<(), WebhookError> {
    let identity = match &target {
        Target::Service {
            name, namespace, ..
        } => secret::load_or_create(client.clone(), namespace, name, &target.names()).await?,
        Target::Url { .. } => cert::generate(&target.names())?,
    };
    let tls = cert::server_config(&identity)?;
    loops.spawn("conversion webhook", move || {
        let tls = tls.clone();
        async move {
            if let Err(e) = server::bind_and_serve(addr, tls).await {
                tracing::warn!(%addr, error = %e, "conversion webhook stopped");
            }
        }
    });
    let want = inject::conversion(&target, &identity.ca_pem);
    loops.spawn("conversion webhook configuration", move || {
        inject::keep(client.clone(), want.clone())
    });
    tracing::info!(%addr, reached_at = %target, "serving the conversion webhook");
    Ok(())
}
