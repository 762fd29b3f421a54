//! Windows: one `<powershell>` block, the user's commands first, then
//! `Start-EKSBootstrap.ps1` with the cluster and kubelet arguments.

use super::{BootstrapInput, kubelet_extra_args};

/// `s` single-quoted for PowerShell, where a quote is escaped by doubling it.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The user's script without its own `<powershell>` tags, which cannot nest.
fn user_script(input: &BootstrapInput) -> Option<String> {
    let u = input.custom_user_data()?;
    let stripped = u.replace("<powershell>", "").replace("</powershell>", "");
    let trimmed = stripped.trim_matches('\n');
    (!trimmed.trim().is_empty()).then(|| trimmed.to_string())
}

pub(super) fn script(input: &BootstrapInput) -> String {
    let mut s = String::from("<powershell>\n");
    if let Some(u) = user_script(input) {
        s.push_str(&u);
        s.push('\n');
    }
    s.push_str(
        "[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n",
    );
    s.push_str(&format!(
        "& $EKSBootstrapScriptFile -EKSClusterName {} -APIServerEndpoint {}",
        sq(&input.cluster_name),
        sq(&input.cluster_endpoint)
    ));
    if let Some(ca) = &input.ca_bundle {
        s.push_str(&format!(" -Base64ClusterCA {}", sq(ca)));
    }
    let args = kubelet_extra_args(input);
    if !args.is_empty() {
        s.push_str(&format!(" -KubeletExtraArgs {}", sq(&args.join(" "))));
    }
    if let Some(dns) = input.dns_ip() {
        s.push_str(&format!(" -DNSClusterIP {}", sq(dns)));
    }
    s.push_str("\n</powershell>");
    s
}

#[cfg(test)]
mod tests {
    use super::super::generate;
    use super::super::testutil::{decode, full};
    use crate::nodeclass::AmiFamily;

    #[test]
    fn powershell_block_with_user_commands_then_bootstrap() {
        let mut i = full(AmiFamily::Windows2022);
        i.user_data = Some("<powershell>\nWrite-Host 'user step'\n</powershell>".into());
        let s = decode(&generate(&i).unwrap());
        assert!(
            s.starts_with("<powershell>\nWrite-Host 'user step'\n[string]$EKSBootstrapScriptFile"),
            "{s}"
        );
        assert!(s.ends_with("\n</powershell>"));
        assert_eq!(s.matches("<powershell>").count(), 1);
        for want in [
            "& $EKSBootstrapScriptFile -EKSClusterName 'prod' -APIServerEndpoint 'https://ABC.gr7.us-west-2.eks.amazonaws.com' -Base64ClusterCA 'Q0FCVU5ETEU='",
            "-KubeletExtraArgs '--node-labels=\"karpenter.sh/nodepool=default,team=web\" --register-with-taints=\"dedicated=gpu:NoSchedule,cni-not-ready=:NoSchedule,karpenter.sh/unregistered=:NoExecute\" --max-pods=42",
            "--eviction-hard=\"memory.available<5%\"",
            "--cpu-cfs-quota=false'",
            "-DNSClusterIP '10.100.0.10'",
        ] {
            assert!(s.contains(want), "missing {want} in\n{s}");
        }
    }

    #[test]
    fn no_user_data_no_optional_arguments() {
        let i = super::super::BootstrapInput::new(AmiFamily::Windows2019, "c", "https://e");
        let s = decode(&generate(&i).unwrap());
        assert_eq!(
            s,
            "<powershell>\n[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n& $EKSBootstrapScriptFile -EKSClusterName 'c' -APIServerEndpoint 'https://e'\n</powershell>"
        );
    }
}
