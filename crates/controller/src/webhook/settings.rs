//! The webhook's settings, and where the API server reaches it: a Service in the cluster
//! (`KARPENTER_SERVICE` in `SYSTEM_NAMESPACE`, as Karpenter v1.0's chart set them) or, for a
//! controller run outside the cluster, an https URL (`WEBHOOK_URL`, nodewright's own).

use clap::ArgAction;

use crate::settings::SettingsError;

#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct WebhookSettings {
    /// Turns the conversion webhook off: v1beta1 requests then fail while nothing converts.
    #[arg(long, env = "DISABLE_WEBHOOK", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub disable_webhook: bool,
    /// The port the conversion webhook serves TLS on.
    #[arg(long, env = "WEBHOOK_PORT", default_value_t = 8443)]
    pub webhook_port: u16,
    /// The Service in front of the webhook, which the CRDs' conversion is pointed at.
    #[arg(long, env = "KARPENTER_SERVICE", default_value = "")]
    pub karpenter_service: String,
    /// The namespace of that Service (the chart sets the pod's own).
    #[arg(long, env = "SYSTEM_NAMESPACE", default_value = "")]
    pub system_namespace: String,
    /// An https URL the CRDs' conversion calls instead of a Service, for a controller run
    /// outside the cluster (e.g. https://127.0.0.1:8443/convert).
    #[arg(long, env = "WEBHOOK_URL", default_value = "")]
    pub webhook_url: String,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        WebhookSettings {
            disable_webhook: false,
            webhook_port: 8443,
            karpenter_service: String::new(),
            system_namespace: String::new(),
            webhook_url: String::new(),
        }
    }
}

/// Where the API server sends conversion reviews.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Service {
        name: String,
        namespace: String,
        port: u16,
    },
    Url {
        url: String,
        host: String,
    },
}

impl Target {
    /// The names the serving certificate must cover.
    pub fn names(&self) -> Vec<String> {
        match self {
            Target::Service {
                name, namespace, ..
            } => vec![
                name.clone(),
                format!("{name}.{namespace}"),
                format!("{name}.{namespace}.svc"),
                format!("{name}.{namespace}.svc.cluster.local"),
            ],
            Target::Url { host, .. } => vec![host.clone()],
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Service {
                name,
                namespace,
                port,
            } => write!(f, "service {namespace}/{name}:{port}"),
            Target::Url { url, .. } => f.write_str(url),
        }
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> SettingsError {
    SettingsError::Invalid {
        field,
        reason: reason.into(),
    }
}

impl WebhookSettings {
    /// Where the webhook is reached, or `None` when it does not run: turned off, or nothing
    /// says where the API server could reach it.
    pub fn target(&self) -> Result<Option<Target>, SettingsError> {
        let (service, url) = (self.karpenter_service.trim(), self.webhook_url.trim());
        if self.disable_webhook {
            return Ok(None);
        }
        if !service.is_empty() && !url.is_empty() {
            return Err(invalid(
                "WEBHOOK_URL",
                "set either KARPENTER_SERVICE (a Service in the cluster) or WEBHOOK_URL, not both",
            ));
        }
        if self.webhook_port == 0 {
            return Err(invalid("WEBHOOK_PORT", "must be a port number above 0"));
        }
        if !url.is_empty() {
            return url_host(url)
                .map(|host| Some(Target::Url { url: url.to_string(), host }))
                .ok_or_else(|| {
                    invalid(
                        "WEBHOOK_URL",
                        format!("{url:?} is not an https URL with a host (e.g. https://127.0.0.1:8443/convert)"),
                    )
                });
        }
        if service.is_empty() {
            return Ok(None);
        }
        let namespace = self.system_namespace.trim();
        if namespace.is_empty() {
            return Err(invalid(
                "SYSTEM_NAMESPACE",
                "required with KARPENTER_SERVICE: the namespace of the webhook's Service",
            ));
        }
        Ok(Some(Target::Service {
            name: service.to_string(),
            namespace: namespace.to_string(),
            port: self.webhook_port,
        }))
    }
}

/// The host of an https URL: a name, an IPv4 address or a bracketed IPv6 address.
fn url_host(url: &str) -> Option<String> {
    let rest = url.strip_prefix("https://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.0,
        None => authority.split(':').next()?,
    };
    (!host.is_empty() && !authority.contains('@')).then(|| host.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(f: impl FnOnce(&mut WebhookSettings)) -> Result<Option<Target>, String> {
        let mut s = WebhookSettings::default();
        f(&mut s);
        s.target().map_err(|e| e.to_string())
    }

    #[test]
    fn where_the_webhook_is_reached() {
        assert_eq!(with(|_| {}), Ok(None), "nothing names a way in");
        assert_eq!(
            with(|s| s.webhook_url = "https://127.0.0.1:9443/convert".into()),
            Ok(Some(Target::Url {
                url: "https://127.0.0.1:9443/convert".into(),
                host: "127.0.0.1".into()
            }))
        );
        assert_eq!(
            with(|s| s.webhook_url = "https://[::1]:9443".into())
                .unwrap()
                .unwrap()
                .names(),
            ["::1"]
        );
        let svc = with(|s| {
            s.karpenter_service = "karpenter".into();
            s.system_namespace = "kube-system".into();
        });
        assert_eq!(
            svc.unwrap().unwrap().names()[2],
            "karpenter.kube-system.svc"
        );
        assert_eq!(
            with(|s| {
                s.karpenter_service = "karpenter".into();
                s.system_namespace = "kube-system".into();
                s.disable_webhook = true;
            }),
            Ok(None)
        );
    }

    #[test]
    fn refusals_name_the_setting() {
        let err = with(|s| s.webhook_url = "http://127.0.0.1:9443".into()).unwrap_err();
        assert!(
            err.contains("WEBHOOK_URL") && err.contains("https URL"),
            "{err}"
        );
        let err = with(|s| s.karpenter_service = "karpenter".into()).unwrap_err();
        assert!(err.contains("SYSTEM_NAMESPACE"), "{err}");
        let err = with(|s| {
            s.karpenter_service = "k".into();
            s.webhook_url = "https://x".into();
        })
        .unwrap_err();
        assert!(err.contains("not both"), "{err}");
    }
}
