//! Amazon Linux 2: a MIME archive of the user's parts followed by a shell part that runs
//! `/etc/eks/bootstrap.sh`. bootstrap.sh reads `--flag value`, never `--flag=value`.

use std::net::IpAddr;

use super::mime::{self, MimePart};
use super::{BootstrapInput, UserDataError, kubelet_extra_args};

const SHELL: &str = "text/x-shellscript; charset=\"us-ascii\"";

/// `s` single-quoted for bash.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The user's parts: a MIME archive's own parts, or the whole text as one shell part.
pub(super) fn user_parts(input: &BootstrapInput) -> Result<Vec<MimePart>, UserDataError> {
    match input.custom_user_data() {
        None => Ok(Vec::new()),
        Some(u) if mime::is_mime(u) => mime::parse(u),
        Some(u) => Ok(vec![MimePart::new(SHELL, u)]),
    }
}

fn bootstrap_script(input: &BootstrapInput) -> String {
    let mut s = String::from(
        "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n",
    );
    s.push_str(&format!(
        "/etc/eks/bootstrap.sh {} --apiserver-endpoint {}",
        sq(&input.cluster_name),
        sq(&input.cluster_endpoint)
    ));
    if let Some(ca) = &input.ca_bundle {
        s.push_str(&format!(" --b64-cluster-ca {}", sq(ca)));
    }
    if let Some(dns) = input.dns_ip() {
        if dns.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv6()) {
            s.push_str(" \\\n--ip-family ipv6");
        }
        s.push_str(&format!(" \\\n--dns-cluster-ip {}", sq(dns)));
    }
    if input.kubelet.max_pods.is_some() {
        s.push_str(" \\\n--use-max-pods false");
    }
    let args = kubelet_extra_args(input);
    if !args.is_empty() {
        s.push_str(&format!(
            " \\\n--kubelet-extra-args {}",
            sq(&args.join(" "))
        ));
    }
    if input.instance_store_raid0 {
        s.push_str(" \\\n--local-disks raid0");
    }
    s.push('\n');
    s
}

pub(super) fn script(input: &BootstrapInput) -> Result<String, UserDataError> {
    let mut parts = user_parts(input)?;
    parts.push(MimePart::new(SHELL, &bootstrap_script(input)));
    Ok(mime::serialize(&parts))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{decode, full};
    use super::super::{BootstrapInput, generate};
    use super::*;
    use crate::nodeclass::AmiFamily;

    fn parts_of(input: &BootstrapInput) -> Vec<MimePart> {
        let doc = decode(&generate(input).unwrap());
        assert!(
            doc.starts_with("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"")
        );
        mime::parse(&doc).unwrap()
    }

    #[test]
    fn bootstrap_carries_every_flag() {
        let parts = parts_of(&full(AmiFamily::AL2));
        assert_eq!(parts.len(), 1);
        let s = &parts[0].content;
        assert_eq!(parts[0].content_type, SHELL);
        assert!(s.starts_with("#!/bin/bash -xe\n"));
        for want in [
            "/etc/eks/bootstrap.sh 'prod' --apiserver-endpoint 'https://ABC.gr7.us-west-2.eks.amazonaws.com' --b64-cluster-ca 'Q0FCVU5ETEU='",
            "--dns-cluster-ip '10.100.0.10'",
            "--use-max-pods false",
            "--local-disks raid0",
            "--node-labels=\"karpenter.sh/nodepool=default,team=web\"",
            "--register-with-taints=\"dedicated=gpu:NoSchedule,cni-not-ready=:NoSchedule,karpenter.sh/unregistered=:NoExecute\"",
            "--max-pods=42",
            "--pods-per-core=4",
            "--system-reserved=\"cpu=100m,memory=200Mi\"",
            "--kube-reserved=\"memory=300Mi\"",
            "--eviction-hard=\"memory.available<5%\"",
            "--eviction-soft=\"nodefs.available<15%\"",
            "--eviction-soft-grace-period=\"nodefs.available=1m30s\"",
            "--eviction-max-pod-grace-period=60",
            "--image-gc-high-threshold=85",
            "--image-gc-low-threshold=70",
            "--cpu-cfs-quota=false",
        ] {
            assert!(s.contains(want), "missing {want} in\n{s}");
        }
        assert!(!s.contains("--ip-family"));
        let extra = s.split("--kubelet-extra-args '").nth(1).unwrap();
        assert!(extra.contains("--max-pods=42 --pods-per-core=4"), "{extra}");
    }

    #[test]
    fn minimal_input_has_no_optional_flags_and_ipv6_dns_sets_family() {
        let mut i = BootstrapInput::new(AmiFamily::AL2, "c", "https://e");
        let s = parts_of(&i)[0].content.clone();
        for absent in [
            "--b64-cluster-ca",
            "--dns-cluster-ip",
            "--use-max-pods",
            "--kubelet-extra-args",
            "--local-disks",
        ] {
            assert!(!s.contains(absent), "{absent} in {s}");
        }
        i.kubelet.cluster_dns = vec!["fd00:10:96::a".into()];
        let s = parts_of(&i)[0].content.clone();
        assert!(s.contains("--ip-family ipv6"));
        assert!(s.contains("--dns-cluster-ip 'fd00:10:96::a'"));
    }

    #[test]
    fn user_script_is_wrapped_and_comes_first() {
        let mut i = full(AmiFamily::AL2);
        i.user_data = Some("#!/bin/bash\necho user-step\n".into());
        let parts = parts_of(&i);
        assert_eq!(parts.len(), 2);
        assert_eq!(
            parts[0],
            MimePart::new(SHELL, "#!/bin/bash\necho user-step")
        );
        assert!(parts[1].content.contains("/etc/eks/bootstrap.sh"));
    }

    #[test]
    fn user_mime_parts_are_kept_in_order() {
        let mut i = full(AmiFamily::AL2);
        i.user_data = Some(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"==B==\"\n\n--==B==\nContent-Type: text/cloud-config\n\npackages: [jq]\n--==B==\nContent-Type: text/x-shellscript\n\necho two\n--==B==--\n"
                .into(),
        );
        let parts = parts_of(&i);
        assert_eq!(parts.len(), 3);
        assert_eq!(
            parts[0],
            MimePart::new("text/cloud-config", "packages: [jq]")
        );
        assert_eq!(parts[1], MimePart::new("text/x-shellscript", "echo two"));
        assert!(parts[2].content.contains("/etc/eks/bootstrap.sh"));
    }

    #[test]
    fn broken_user_mime_is_an_error() {
        let mut i = full(AmiFamily::AL2);
        i.user_data = Some("MIME-Version: 1.0\nContent-Type: multipart/mixed\n\nx".into());
        assert!(matches!(generate(&i), Err(UserDataError::Mime(_))));
    }
}
