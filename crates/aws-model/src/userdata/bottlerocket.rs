//! Bottlerocket: the user's TOML settings with `settings.kubernetes` filled in from the
//! cluster and the NodeClass. Cluster identity and kubelet values replace the user's, node
//! labels are merged (ours win), node taints are the claim's, and RAID0 adds a bootstrap
//! command that builds and binds the ephemeral-storage array.

use super::toml::{self, Table, Value};
use super::{BootstrapInput, KubeletSettings, UserDataError};

fn str_table(m: &std::collections::BTreeMap<String, String>) -> Value {
    Value::Table(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

/// The table at `key` inside `t`, created if absent; a non-table there is a conflict.
fn subtable<'a>(t: &'a mut Table, key: &str, at: &str) -> Result<&'a mut Table, UserDataError> {
    match t
        .entry(key.to_string())
        .or_insert_with(|| Value::Table(Table::new()))
    {
        Value::Table(inner) => Ok(inner),
        _ => Err(UserDataError::Conflict(format!(
            "{at}{key} must be a table to hold the generated settings"
        ))),
    }
}

fn strings(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| Value::String(s.to_string())).collect())
}

pub(super) fn script(input: &BootstrapInput) -> Result<String, UserDataError> {
    let mut root = match input.custom_user_data() {
        Some(u) => toml::parse(u).map_err(UserDataError::Toml)?,
        None => Table::new(),
    };
    let settings = subtable(&mut root, "settings", "")?;
    // Instances launched by a fleet are in no Auto Scaling group, so waiting for one would
    // hold the kubelet back forever.
    if let Some(Value::Table(autoscaling)) = settings.get_mut("autoscaling")
        && autoscaling.contains_key("should-wait")
    {
        autoscaling.insert("should-wait".into(), Value::Boolean(false));
    }
    let k8s = subtable(settings, "kubernetes", "settings.")?;
    let s = |v: &str| Value::String(v.to_string());

    k8s.insert("cluster-name".into(), s(&input.cluster_name));
    k8s.insert("api-server".into(), s(&input.cluster_endpoint));
    if let Some(ca) = &input.ca_bundle {
        k8s.insert("cluster-certificate".into(), s(ca));
    }
    kubelet(k8s, &input.kubelet, input.dns_ip());
    if !input.labels.is_empty() {
        let labels = subtable(k8s, "node-labels", "settings.kubernetes.")?;
        for (key, v) in &input.labels {
            labels.insert(key.clone(), s(v));
        }
    }

    let mut taints = Table::new();
    for t in &input.taints {
        let entry = taints
            .entry(t.key.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(items) = entry {
            items.push(s(&format!("{}:{}", t.value, t.effect.as_str())));
        }
    }
    if taints.is_empty() {
        k8s.remove("node-taints");
    } else {
        k8s.insert("node-taints".into(), Value::Table(taints));
    }

    if input.instance_store_raid0 {
        mount_instance_storage(&mut root)?;
    }
    Ok(toml::render(&root))
}

/// The kubelet's settings Bottlerocket takes under `settings.kubernetes`, with the cluster's
/// DNS address.
fn kubelet(k8s: &mut Table, k: &KubeletSettings, dns_ip: Option<&str>) {
    let s = |v: &str| Value::String(v.to_string());
    if let Some(n) = k.max_pods {
        k8s.insert("max-pods".into(), Value::Integer(n));
    }
    if let Some(dns) = dns_ip {
        k8s.insert("cluster-dns-ip".into(), s(dns));
    }
    for (name, m) in [
        ("system-reserved", &k.system_reserved),
        ("kube-reserved", &k.kube_reserved),
        ("eviction-hard", &k.eviction_hard),
        ("eviction-soft", &k.eviction_soft),
        ("eviction-soft-grace-period", &k.eviction_soft_grace_period),
    ] {
        if !m.is_empty() {
            k8s.insert(name.into(), str_table(m));
        }
    }
    if let Some(n) = k.eviction_max_pod_grace_period {
        k8s.insert("eviction-max-pod-grace-period".into(), Value::Integer(n));
    }
    // Bottlerocket takes the image GC thresholds as strings.
    if let Some(n) = k.image_gc_high_threshold_percent {
        k8s.insert("image-gc-high-threshold-percent".into(), s(&n.to_string()));
    }
    if let Some(n) = k.image_gc_low_threshold_percent {
        k8s.insert("image-gc-low-threshold-percent".into(), s(&n.to_string()));
    }
    if let Some(b) = k.cpu_cfs_quota {
        k8s.insert("cpu-cfs-quota-enforced".into(), Value::Boolean(b));
    }
}

/// The bootstrap command that puts containerd's, the kubelet's and the pods' logs on the
/// instance store, in RAID 0 (`instanceStorePolicy: RAID0`).
fn mount_instance_storage(root: &mut Table) -> Result<(), UserDataError> {
    let s = |v: &str| Value::String(v.to_string());
    let settings = subtable(root, "settings", "")?;
    let commands = subtable(settings, "bootstrap-commands", "settings.")?;
    let mount: Table = [
        (
            "commands".to_string(),
            Value::Array(vec![
                strings(&["apiclient", "ephemeral-storage", "init"]),
                strings(&[
                    "apiclient",
                    "ephemeral-storage",
                    "bind",
                    "--dirs",
                    "/var/lib/containerd",
                    "/var/lib/kubelet",
                    "/var/log/pods",
                ]),
            ]),
        ),
        ("mode".to_string(), s("always")),
        ("essential".to_string(), Value::Boolean(true)),
    ]
    .into();
    commands.insert("000-mount-instance-storage".into(), Value::Table(mount));
    Ok(())
}

#[cfg(test)]
mod tests;
