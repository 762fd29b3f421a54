//! How new nodes reach the cluster: the API server endpoint, the CA bundle and the service
//! CIDR. They come from the operator's settings (`CLUSTER_ENDPOINT`, `CLUSTER_CA_BUNDLE`), the
//! controller's own Kubernetes client configuration, and EKS `DescribeCluster`, read at start
//! and asked again while the service CIDR is unknown ([`facts`]).
//!
//! Order, per fact:
//! - endpoint: `CLUSTER_ENDPOINT`, else the EKS endpoint, else the address the controller uses;
//! - CA bundle: `CLUSTER_CA_BUNDLE`, else the controller's own root certificates, else EKS;
//! - service CIDR: EKS only (`serviceIpv4Cidr`, else `serviceIpv6Cidr`). AL2023's nodeadm
//!   cannot do without it, so when EKS could not say, the reason is kept and a launch of an
//!   AL2023 node fails with it.

pub mod facts;

use crate::AwsClients;
use crate::error::AwsError;
use crate::launch::ClusterInfo;

pub use facts::ClusterFacts;

/// What the operator and the controller's own client configuration already know.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KnownClusterFacts {
    /// `CLUSTER_NAME`: the EKS cluster to describe.
    pub name: String,
    /// `CLUSTER_ENDPOINT`, when set.
    pub endpoint: Option<String>,
    /// `CLUSTER_CA_BUNDLE` (base64 PEM), when set.
    pub ca_bundle: Option<String>,
    /// The controller's own root certificates as a base64 PEM bundle, when its client
    /// configuration carries any (kubeconfig `certificate-authority-data`, in-cluster `ca.crt`).
    pub client_ca_bundle: Option<String>,
    /// The API server address the controller itself talks to.
    pub api_server: String,
}

/// What EKS `DescribeCluster` says about the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EksClusterFacts {
    pub endpoint: Option<String>,
    /// `certificateAuthority.data`: already a base64 PEM bundle.
    pub ca_bundle: Option<String>,
    /// `kubernetesNetworkConfig.serviceIpv4Cidr`, else `serviceIpv6Cidr`.
    pub service_cidr: Option<String>,
    /// The cluster's ARN: the resource ARC zonal shifts are asked about.
    pub arn: Option<String>,
    /// The control plane's Kubernetes version (`1.32`): what `EKS_CONTROL_PLANE` reads
    /// instead of asking the API server.
    pub version: Option<String>,
}

/// Calls EKS `DescribeCluster(name)`.
pub async fn describe_cluster(
    clients: &AwsClients,
    name: &str,
) -> Result<EksClusterFacts, AwsError> {
    let out = clients
        .eks
        .describe_cluster()
        .name(name)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("DescribeCluster", e))?;
    let Some(cluster) = out.cluster else {
        return Err(AwsError::new(
            "DescribeCluster",
            format!("no cluster {name} in the response"),
        ));
    };
    let non_empty = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_string);
    let network = cluster.kubernetes_network_config.as_ref();
    Ok(EksClusterFacts {
        endpoint: non_empty(cluster.endpoint.as_deref()),
        ca_bundle: non_empty(
            cluster
                .certificate_authority
                .as_ref()
                .and_then(|c| c.data.as_deref()),
        ),
        service_cidr: non_empty(network.and_then(|n| n.service_ipv4_cidr.as_deref()))
            .or_else(|| non_empty(network.and_then(|n| n.service_ipv6_cidr.as_deref()))),
        arn: non_empty(cluster.arn.as_deref()),
        version: non_empty(cluster.version.as_deref()),
    })
}

/// Combines what is known with what EKS said (or why it could not say).
pub fn combine(known: &KnownClusterFacts, eks: &Result<EksClusterFacts, AwsError>) -> ClusterInfo {
    let facts = eks.as_ref().ok();
    let endpoint = known
        .endpoint
        .clone()
        .filter(|e| !e.is_empty())
        .or_else(|| facts.and_then(|f| f.endpoint.clone()))
        .unwrap_or_else(|| known.api_server.trim_end_matches('/').to_string());
    let ca_bundle = known
        .ca_bundle
        .clone()
        .filter(|c| !c.is_empty())
        .or_else(|| known.client_ca_bundle.clone())
        .or_else(|| facts.and_then(|f| f.ca_bundle.clone()));
    let service_cidr = facts.and_then(|f| f.service_cidr.clone());
    let service_cidr_unknown = match (eks, &service_cidr) {
        (_, Some(_)) => None,
        (Ok(_), None) => Some(format!(
            "EKS DescribeCluster for CLUSTER_NAME={} returned no serviceIpv4Cidr or serviceIpv6Cidr",
            known.name
        )),
        (Err(e), None) => Some(format!(
            "EKS DescribeCluster for CLUSTER_NAME={} failed ({e}); the controller needs \
             eks:DescribeCluster on that cluster",
            known.name
        )),
    };
    ClusterInfo {
        endpoint,
        ca_bundle,
        service_cidr,
        service_cidr_unknown,
    }
}

/// Resolves the cluster facts: asks EKS once (whatever is already set, since the service CIDR
/// is only there) and combines. A failed call is logged and kept as the reason the service CIDR
/// is unknown; only AL2023 launches need it.
pub async fn resolve(clients: &AwsClients, known: &KnownClusterFacts) -> ClusterInfo {
    let eks = describe_cluster(clients, &known.name).await;
    if let Err(e) = &eks {
        tracing::warn!(cluster = %known.name, error = %e, "EKS DescribeCluster failed; AL2023 nodes cannot be launched without the service CIDR");
    }
    combine(known, &eks)
}

/// DER certificates as one base64-encoded PEM bundle, the form user data carries.
pub fn pem_bundle(der_certs: &[Vec<u8>]) -> Option<String> {
    use nodewright_aws_model::userdata::base64::encode;
    if der_certs.is_empty() {
        return None;
    }
    let mut pem = String::new();
    for der in der_certs {
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        let body = encode(der);
        for line in body.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).unwrap_or_default());
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    Some(encode(pem.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_aws_model::userdata::base64::decode;

    fn known() -> KnownClusterFacts {
        KnownClusterFacts {
            name: "prod".into(),
            api_server: "https://10.0.0.1:443/".into(),
            ..Default::default()
        }
    }

    fn eks() -> EksClusterFacts {
        EksClusterFacts {
            endpoint: Some("https://ABC.gr7.us-west-2.eks.amazonaws.com".into()),
            ca_bundle: Some("RUtTIENB".into()),
            service_cidr: Some("172.20.0.0/16".into()),
            arn: None,
            version: None,
        }
    }

    #[test]
    fn eks_fills_what_is_not_set() {
        let info = combine(&known(), &Ok(eks()));
        assert_eq!(info.endpoint, "https://ABC.gr7.us-west-2.eks.amazonaws.com");
        assert_eq!(info.ca_bundle.as_deref(), Some("RUtTIENB"));
        assert_eq!(info.service_cidr.as_deref(), Some("172.20.0.0/16"));
        assert_eq!(info.service_cidr_unknown, None);
    }

    #[test]
    fn settings_then_the_clients_own_ca_win_over_eks() {
        let mut k = known();
        k.client_ca_bundle = Some("T1dO".into());
        assert_eq!(combine(&k, &Ok(eks())).ca_bundle.as_deref(), Some("T1dO"));
        k.ca_bundle = Some("U0VU".into());
        k.endpoint = Some("https://set.example".into());
        let info = combine(&k, &Ok(eks()));
        assert_eq!(info.ca_bundle.as_deref(), Some("U0VU"));
        assert_eq!(info.endpoint, "https://set.example");
    }

    #[test]
    fn a_failed_call_keeps_its_reason_and_falls_back_for_the_endpoint() {
        let err = AwsError::new("DescribeCluster", "AccessDeniedException: no")
            .with_code("AccessDeniedException");
        let info = combine(&known(), &Err(err));
        assert_eq!(info.endpoint, "https://10.0.0.1:443");
        assert_eq!(info.service_cidr, None);
        let why = info.service_cidr_unknown.unwrap();
        assert!(why.contains("CLUSTER_NAME=prod"), "{why}");
        assert!(why.contains("AccessDeniedException"), "{why}");
        assert!(why.contains("eks:DescribeCluster"), "{why}");
    }

    #[test]
    fn a_response_without_a_cidr_says_so() {
        let mut facts = eks();
        facts.service_cidr = None;
        let why = combine(&known(), &Ok(facts)).service_cidr_unknown.unwrap();
        assert!(why.contains("serviceIpv4Cidr"), "{why}");
    }

    #[test]
    fn der_certificates_become_a_base64_pem_bundle() {
        assert_eq!(pem_bundle(&[]), None);
        let der: Vec<u8> = (0..100u8).collect();
        let bundle = pem_bundle(&[der.clone(), vec![1, 2, 3]]).unwrap();
        let pem = String::from_utf8(decode(&bundle).unwrap()).unwrap();
        assert_eq!(pem.matches("-----BEGIN CERTIFICATE-----\n").count(), 2);
        let first: String = pem
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with("-----END"))
            .collect();
        assert!(pem.lines().all(|l| l.len() <= 64 || l.starts_with("-----")));
        assert_eq!(decode(&first).unwrap(), der);
    }
}
