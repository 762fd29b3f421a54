//! The webhook's own certificate authority and serving certificate, made at start: the
//! authority goes to the CRDs as `caBundle`. Out of the cluster it lives in memory only (a
//! restarted process makes a new pair and points the CRDs at it again); in the cluster the
//! replicas share one through a Secret ([`super::secret`]).

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CertError {
    #[error("making the webhook certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("setting up TLS for the webhook: {0}")]
    Tls(#[from] rustls::Error),
    #[error("reading the webhook certificate: {0}")]
    Pem(#[from] rustls::pki_types::pem::Error),
}

/// A serving certificate and the authority that signed it.
#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    /// The authority's certificate: what the API server trusts (`caBundle`).
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving certificate's private key (PKCS#8).
    pub key_pem: String,
}

/// A fresh authority and a serving certificate for `names` (DNS names or IP addresses).
pub fn generate(names: &[String]) -> Result<Identity, CertError> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name
        .push(DnType::CommonName, "nodewright conversion webhook CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let mut leaf = CertificateParams::new(names.to_vec())?;
    leaf.distinguished_name.push(
        DnType::CommonName,
        names.first().map_or("nodewright", String::as_str),
    );
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    let leaf_key = KeyPair::generate()?;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;

    Ok(Identity {
        ca_pem: ca_cert.pem(),
        cert_pem: leaf_cert.pem(),
        key_pem: leaf_key.serialize_pem(),
    })
}

/// The certificate chain (serving certificate, then authority) and the key, as rustls takes
/// them.
fn chain_and_key(
    identity: &Identity,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), CertError> {
    let chain = vec![
        CertificateDer::from_pem_slice(identity.cert_pem.as_bytes())?,
        CertificateDer::from_pem_slice(identity.ca_pem.as_bytes())?,
    ];
    let key = PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes())?;
    Ok((chain, key))
}

/// The TLS server configuration for an identity (HTTP/1.1, as the API server calls).
pub fn server_config(identity: &Identity) -> Result<Arc<rustls::ServerConfig>, CertError> {
    let (chain, key) = chain_and_key(identity)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use rustls::client::danger::ServerCertVerifier;

    use super::*;

    #[test]
    fn a_certificate_for_every_name_signed_by_its_authority() {
        let id = generate(&["nodewright.ns.svc".into(), "127.0.0.1".into()]).unwrap();
        assert!(id.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let (chain, _) = chain_and_key(&id).unwrap();
        // rustls accepts the pair (the key matches the certificate).
        server_config(&id).unwrap();
        // The authority verifies the serving certificate for both names.
        let mut roots = rustls::RootCertStore::empty();
        roots.add(chain[1].clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        for name in ["nodewright.ns.svc", "127.0.0.1"] {
            let server = rustls::pki_types::ServerName::try_from(name).unwrap();
            verifier
                .verify_server_cert(
                    &chain[0],
                    &[],
                    &server,
                    &[],
                    rustls::pki_types::UnixTime::now(),
                )
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let other = rustls::pki_types::ServerName::try_from("elsewhere.example").unwrap();
        assert!(
            verifier
                .verify_server_cert(
                    &chain[0],
                    &[],
                    &other,
                    &[],
                    rustls::pki_types::UnixTime::now()
                )
                .is_err()
        );
    }

    #[test]
    fn a_damaged_identity_is_an_error_not_a_panic() {
        let mut id = generate(&["x".into()]).unwrap();
        id.key_pem = "garbage".into();
        assert!(server_config(&id).is_err());
    }
}
