//! One identity for every replica in the cluster: the API server trusts one `caBundle`, and the
//! Service may send a review to any replica. The first replica to start makes the identity
//! and stores it in a Secret (`<service>-cert` in the Service's namespace, keys `ca.crt`,
//! `tls.crt`, `tls.key`); the others, and later restarts, read it from there.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use thiserror::Error;
use tracing::{info, warn};

use super::cert::{self, CertError, Identity};

#[derive(Debug, Error)]
pub enum SecretError {
    #[error("the webhook certificate Secret {namespace}/{name}: {source}")]
    Kube {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error("the webhook certificate Secret {namespace}/{name} kept changing while it was read")]
    Contended { namespace: String, name: String },
}

/// The Secret's name for a Service.
pub fn secret_name(service: &str) -> String {
    format!("{service}-cert")
}

const KEYS: [&str; 3] = ["ca.crt", "tls.crt", "tls.key"];

/// The identity a Secret holds, if it holds a whole one.
pub fn identity_of(secret: &Secret) -> Option<Identity> {
    let data = secret.data.as_ref()?;
    let text = |k: &str| String::from_utf8(data.get(k)?.0.clone()).ok();
    let id = Identity {
        ca_pem: text(KEYS[0])?,
        cert_pem: text(KEYS[1])?,
        key_pem: text(KEYS[2])?,
    };
    cert::server_config(&id).ok().map(|_| id)
}

fn data_of(id: &Identity) -> BTreeMap<String, ByteString> {
    [&id.ca_pem, &id.cert_pem, &id.key_pem]
        .iter()
        .zip(KEYS)
        .map(|(v, k)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect()
}

/// The identity stored for `service` in `namespace`, made (for `names`) and stored if there is
/// none or the one there is damaged.
pub async fn load_or_create(
    client: kube::Client,
    namespace: &str,
    service: &str,
    names: &[String],
) -> Result<Identity, SecretError> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let name = secret_name(service);
    let kube = |source| SecretError::Kube {
        namespace: namespace.to_string(),
        name: name.clone(),
        source,
    };
    for _ in 0..5 {
        let existing = api.get_opt(&name).await.map_err(kube)?;
        if let Some(id) = existing.as_ref().and_then(identity_of) {
            return Ok(id);
        }
        let id = cert::generate(names)?;
        let mut secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.to_string()),
                ..Default::default()
            },
            data: Some(data_of(&id)),
            ..Default::default()
        };
        let written = match existing {
            None => api.create(&PostParams::default(), &secret).await,
            Some(old) => {
                warn!(secret = %name, "the webhook certificate Secret is incomplete or damaged; replacing it");
                secret.metadata.resource_version = old.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &secret).await
            }
        };
        match written {
            Ok(_) => {
                info!(secret = %name, "stored a new webhook certificate");
                return Ok(id);
            }
            // Another replica wrote first: read what it wrote.
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(kube(e)),
        }
    }
    Err(SecretError::Contended {
        namespace: namespace.to_string(),
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_holds_an_identity_whole_or_not_at_all() {
        let id = cert::generate(&["svc.ns.svc".into()]).unwrap();
        let mut secret = Secret {
            data: Some(data_of(&id)),
            ..Default::default()
        };
        assert_eq!(identity_of(&secret), Some(id));
        secret.data.as_mut().unwrap().remove("tls.key");
        assert_eq!(identity_of(&secret), None);
        secret
            .data
            .as_mut()
            .unwrap()
            .insert("tls.key".into(), ByteString(b"junk".to_vec()));
        assert_eq!(identity_of(&secret), None);
        assert_eq!(identity_of(&Secret::default()), None);
    }
}
