//! Operator settings under Karpenter's flag and environment names and defaults, so an
//! existing Helm values file or Deployment env block keeps meaning the same thing. Flags win
//! over environment variables; both accept Go's spelling (`--flag=true`, `1m30s`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use clap::ArgAction;
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum SettingsError {
    #[error("invalid duration {value:?}: {reason}")]
    Duration { value: String, reason: String },
    #[error("invalid feature gate entry {entry:?}: expected Name=true|false")]
    GateSyntax { entry: String },
    #[error("unknown feature gate {name:?} (known: {known})")]
    UnknownGate { name: String, known: String },
    #[error("feature gate {name}: {value:?} is not true or false")]
    GateValue { name: String, value: String },
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
}

/// Parses a Go duration: a sequence of decimal numbers with units `ns`, `us`, `ms`, `s`,
/// `m`, `h` (`1s`, `1.5m`, `1h30m`); a bare `0` is zero.
pub fn parse_duration(value: &str) -> Result<Duration, SettingsError> {
    let err = |reason: &str| SettingsError::Duration {
        value: value.to_owned(),
        reason: reason.to_owned(),
    };
    let s = value.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s.starts_with('-') {
        return Err(err("must not be negative"));
    }
    let mut total = 0f64;
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| err("missing unit (ns, us, ms, s, m, h)"))?;
        if num_end == 0 {
            return Err(err("expected a number"));
        }
        let number: f64 = rest[..num_end]
            .parse()
            .map_err(|_| err("malformed number"))?;
        let unit_end = rest[num_end..]
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .map_or(rest.len(), |i| num_end + i);
        let scale = match &rest[num_end..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            other => return Err(err(&format!("unknown unit {other:?}"))),
        };
        total += number * scale;
        rest = &rest[unit_end..];
    }
    Ok(Duration::from_secs_f64(total))
}

/// Formats a duration the way Go prints it (`1s`, `1m30s`, `1.5s`, `0s`).
pub fn format_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".into();
    }
    let total = d.as_secs();
    let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
    let nanos = d.subsec_nanos();
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if nanos == 0 {
        out.push_str(&format!("{s}s"));
    } else {
        let frac = format!("{nanos:09}");
        out.push_str(&format!("{s}.{}s", frac.trim_end_matches('0')));
    }
    out
}

fn parse_bool(name: &str, value: &str) -> Result<bool, SettingsError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "t" => Ok(true),
        "false" | "0" | "f" => Ok(false),
        _ => Err(SettingsError::GateValue {
            name: name.to_owned(),
            value: value.to_owned(),
        }),
    }
}

/// Splits `A=true,B=false` and applies each entry with `set`, which returns false for a
/// name it does not know.
fn parse_gates(
    value: &str,
    known: &[&str],
    mut set: impl FnMut(&str, bool) -> bool,
) -> Result<(), SettingsError> {
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, v) = entry
            .split_once('=')
            .ok_or_else(|| SettingsError::GateSyntax {
                entry: entry.to_owned(),
            })?;
        let name = name.trim();
        let enabled = parse_bool(name, v)?;
        if !set(name, enabled) {
            return Err(SettingsError::UnknownGate {
                name: name.to_owned(),
                known: known.join(", "),
            });
        }
    }
    Ok(())
}

/// Karpenter's core feature gates (`FEATURE_GATES`). Gates not named keep their defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    pub node_repair: bool,
    pub reserved_capacity: bool,
    pub spot_to_spot_consolidation: bool,
    pub node_overlay: bool,
    pub static_capacity: bool,
    pub capacity_buffer: bool,
}

impl FeatureGates {
    pub const DEFAULT: &'static str = "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false";
    const KNOWN: [&'static str; 6] = [
        "NodeRepair",
        "ReservedCapacity",
        "SpotToSpotConsolidation",
        "NodeOverlay",
        "StaticCapacity",
        "CapacityBuffer",
    ];
}

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates {
            node_repair: false,
            reserved_capacity: true,
            spot_to_spot_consolidation: false,
            node_overlay: false,
            static_capacity: false,
            capacity_buffer: false,
        }
    }
}

impl FromStr for FeatureGates {
    type Err = SettingsError;
    fn from_str(value: &str) -> Result<Self, SettingsError> {
        let mut g = FeatureGates::default();
        parse_gates(value, &Self::KNOWN, |name, on| {
            let slot = match name {
                "NodeRepair" => &mut g.node_repair,
                "ReservedCapacity" => &mut g.reserved_capacity,
                "SpotToSpotConsolidation" => &mut g.spot_to_spot_consolidation,
                "NodeOverlay" => &mut g.node_overlay,
                "StaticCapacity" => &mut g.static_capacity,
                "CapacityBuffer" => &mut g.capacity_buffer,
                _ => return false,
            };
            *slot = on;
            true
        })?;
        Ok(g)
    }
}

impl fmt::Display for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "NodeRepair={},ReservedCapacity={},SpotToSpotConsolidation={},NodeOverlay={},StaticCapacity={},CapacityBuffer={}",
            self.node_repair,
            self.reserved_capacity,
            self.spot_to_spot_consolidation,
            self.node_overlay,
            self.static_capacity,
            self.capacity_buffer
        )
    }
}

/// The AWS provider's gates (`AWS_FEATURE_GATES`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AwsFeatureGates {
    pub node_class_cel: bool,
}

impl FromStr for AwsFeatureGates {
    type Err = SettingsError;
    fn from_str(value: &str) -> Result<Self, SettingsError> {
        let mut g = AwsFeatureGates::default();
        parse_gates(value, &["NodeClassCEL"], |name, on| match name {
            "NodeClassCEL" => {
                g.node_class_cel = on;
                true
            }
            _ => false,
        })?;
        Ok(g)
    }
}

impl fmt::Display for AwsFeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeClassCEL={}", self.node_class_cel)
    }
}

fn non_negative_f64(value: &str) -> Result<f64, String> {
    let v: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("{value:?} is not a number"))?;
    if v < 0.0 || !v.is_finite() {
        return Err(format!("{value} must be a finite number >= 0"));
    }
    Ok(v)
}

fn at_least_a_minute(value: &str) -> Result<Duration, SettingsError> {
    let d = parse_duration(value)?;
    if d < Duration::from_secs(60) {
        return Err(SettingsError::Duration {
            value: value.to_owned(),
            reason: "must be at least 1m".into(),
        });
    }
    Ok(d)
}

/// Every operator setting. Boolean flags take Go's forms: `--flag`, `--flag=true|false`.
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct Settings {
    /// The cluster's name; instances are tagged with it. Required.
    #[arg(long, env = "CLUSTER_NAME")]
    pub cluster_name: String,
    /// The API server endpoint nodes join; discovered when empty.
    #[arg(long, env = "CLUSTER_ENDPOINT", default_value = "")]
    pub cluster_endpoint: String,
    #[arg(long, env = "CLUSTER_CA_BUNDLE", default_value = "")]
    pub cluster_ca_bundle: String,
    /// Window of quiet after the last pending pod before a scheduling run starts.
    #[arg(long, env = "BATCH_IDLE_DURATION", default_value = "1s", value_parser = parse_duration)]
    pub batch_idle_duration: Duration,
    /// Longest a batch of pending pods may grow before a scheduling run starts.
    #[arg(long, env = "BATCH_MAX_DURATION", default_value = "10s", value_parser = parse_duration)]
    pub batch_max_duration: Duration,
    #[arg(long, env = "FEATURE_GATES", default_value = FeatureGates::DEFAULT, value_parser = FeatureGates::from_str)]
    pub feature_gates: FeatureGates,
    #[arg(long, env = "AWS_FEATURE_GATES", default_value = "NodeClassCEL=false", value_parser = AwsFeatureGates::from_str)]
    pub aws_feature_gates: AwsFeatureGates,
    #[arg(long, env = "LOG_LEVEL", default_value = "info", value_parser = ["debug", "info", "warn", "error"])]
    pub log_level: String,
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    pub metrics_port: u16,
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    pub health_probe_port: u16,
    /// The address the metrics and health servers listen on (nodewright's own setting; in a
    /// pod every interface, out of a cluster `127.0.0.1` keeps them to this machine).
    #[arg(long, env = "LISTEN_ADDRESS", default_value = "0.0.0.0")]
    pub listen_address: std::net::IpAddr,
    /// The v1alpha5-era switch, kept so old manifests still parse; `false` disables election.
    #[arg(long, env = "LEADER_ELECT", default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,
    #[arg(long, env = "DISABLE_LEADER_ELECTION", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub disable_leader_election: bool,
    #[arg(
        long,
        env = "LEADER_ELECTION_NAME",
        default_value = "karpenter-leader-election"
    )]
    pub leader_election_name: String,
    /// Namespace of the lease; empty means the controller's own namespace.
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE", default_value = "")]
    pub leader_election_namespace: String,
    /// How long a lease lasts unrenewed (nodewright's own setting; controller-runtime's 15 s
    /// by default). The renew deadline and retry period scale with it (10 s and 2 s of 15 s):
    /// a shorter lease lets a standby take over sooner after its leader is killed.
    #[arg(long, env = "LEADER_ELECTION_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub leader_election_lease_duration: Duration,
    #[arg(long, env = "KUBE_CLIENT_QPS", default_value_t = 200)]
    pub kube_client_qps: u32,
    #[arg(long, env = "KUBE_CLIENT_BURST", default_value_t = 300)]
    pub kube_client_burst: u32,
    #[arg(long, env = "VM_MEMORY_OVERHEAD_PERCENT", default_value = "0.075", value_parser = non_negative_f64)]
    pub vm_memory_overhead_percent: f64,
    #[arg(long, env = "RESERVED_ENIS", default_value_t = 0)]
    pub reserved_enis: u32,
    /// SQS queue for interruption events; interruption handling is off when empty.
    #[arg(long, env = "INTERRUPTION_QUEUE", default_value = "")]
    pub interruption_queue: String,
    #[arg(long, env = "ISOLATED_VPC", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub isolated_vpc: bool,
    #[arg(long, env = "EKS_CONTROL_PLANE", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub eks_control_plane: bool,
    #[arg(long, env = "DISABLE_DRY_RUN", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub disable_dry_run: bool,
    #[arg(long, env = "ENABLE_ZONAL_SHIFT", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_zonal_shift: bool,
    #[arg(long, env = "AMI_REFRESH_INTERVAL", default_value = "1m", value_parser = at_least_a_minute)]
    pub ami_refresh_interval: Duration,
    #[arg(long, env = "SUBNET_REFRESH_INTERVAL", default_value = "1m", value_parser = at_least_a_minute)]
    pub subnet_refresh_interval: Duration,
    #[arg(long, env = "PREFERENCE_POLICY", default_value = "Respect", value_parser = ["Respect", "Ignore"])]
    pub preference_policy: String,
    #[arg(long, env = "MIN_VALUES_POLICY", default_value = "Strict", value_parser = ["Strict", "BestEffort"])]
    pub min_values_policy: String,
    #[arg(long, env = "IGNORE_DRA_REQUESTS", default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub ignore_dra_requests: bool,
    /// Turns off the node, pod and nodepool state metrics.
    #[arg(long, env = "DISABLE_CLUSTER_STATE_OBSERVABILITY", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub disable_cluster_state_observability: bool,
    /// Drives concurrency, as upstream: millicores requested by the controller pod.
    #[arg(long, env = "CPU_REQUESTS", default_value_t = 1000)]
    pub cpu_requests: u32,
    /// Karpenter's pprof handlers; nodewright has none, so `true` stops the start.
    #[arg(long, env = "ENABLE_PROFILING", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_profiling: bool,
    /// Karpenter's Go memory limit (bytes, -1 for none); only -1 is taken here.
    #[arg(long, env = "MEMORY_LIMIT", default_value_t = -1, allow_negative_numbers = true)]
    pub memory_limit: i64,
    /// Where logs go; only `stdout` is taken here.
    #[arg(long, env = "LOG_OUTPUT_PATHS", default_value = "stdout")]
    pub log_output_paths: String,
    /// Where the logger's own errors go; only `stderr` is taken here.
    #[arg(long, env = "LOG_ERROR_OUTPUT_PATHS", default_value = "stderr")]
    pub log_error_output_paths: String,
    /// Default topology spread constraints for pods without any; only empty is taken here.
    #[arg(long, env = "SCHEDULER_CONFIG", default_value = "")]
    pub scheduler_config: String,
    /// TEST ONLY: fail a share of the controller's own Kubernetes and cloud calls on purpose
    /// (`kube=0.1,cloud=0.1,seed=1`; see `faults.rs`). Never set it on a real cluster.
    #[arg(long, env = crate::faults::ENV, value_parser = crate::faults::FaultPlan::from_str)]
    pub test_faults: Option<crate::faults::FaultPlan>,
    /// TEST ONLY: exit the process at this point (`after-launch`, `after-terminate`; see
    /// `failpoint.rs`). Never set it on a real cluster.
    #[arg(long, env = crate::failpoint::ENV, value_parser = crate::failpoint::Failpoint::from_str)]
    pub test_failpoint: Option<crate::failpoint::Failpoint>,
    /// The conversion webhook: `DISABLE_WEBHOOK`, `WEBHOOK_PORT`, `KARPENTER_SERVICE`,
    /// `SYSTEM_NAMESPACE`, `WEBHOOK_URL`.
    #[command(flatten)]
    pub webhook: crate::webhook::WebhookSettings,
}

impl Default for Settings {
    /// The defaults with an empty cluster name (which [`Settings::validate`] rejects).
    fn default() -> Self {
        Settings::with_cluster_name("")
    }
}

impl Settings {
    /// The defaults, as if started with only `CLUSTER_NAME` set.
    pub fn with_cluster_name(cluster_name: &str) -> Self {
        Settings {
            cluster_name: cluster_name.to_owned(),
            cluster_endpoint: String::new(),
            cluster_ca_bundle: String::new(),
            batch_idle_duration: Duration::from_secs(1),
            batch_max_duration: Duration::from_secs(10),
            feature_gates: FeatureGates::default(),
            aws_feature_gates: AwsFeatureGates::default(),
            log_level: "info".into(),
            metrics_port: 8080,
            health_probe_port: 8081,
            listen_address: std::net::IpAddr::from([0, 0, 0, 0]),
            leader_elect: true,
            disable_leader_election: false,
            leader_election_name: "karpenter-leader-election".into(),
            leader_election_namespace: String::new(),
            leader_election_lease_duration: Duration::from_secs(15),
            kube_client_qps: 200,
            kube_client_burst: 300,
            vm_memory_overhead_percent: 0.075,
            reserved_enis: 0,
            interruption_queue: String::new(),
            isolated_vpc: false,
            eks_control_plane: false,
            disable_dry_run: false,
            enable_zonal_shift: false,
            ami_refresh_interval: Duration::from_secs(60),
            subnet_refresh_interval: Duration::from_secs(60),
            preference_policy: "Respect".into(),
            min_values_policy: "Strict".into(),
            ignore_dra_requests: true,
            disable_cluster_state_observability: false,
            cpu_requests: 1000,
            enable_profiling: false,
            memory_limit: -1,
            log_output_paths: "stdout".into(),
            log_error_output_paths: "stderr".into(),
            scheduler_config: String::new(),
            test_faults: None,
            test_failpoint: None,
            webhook: crate::webhook::WebhookSettings::default(),
        }
    }

    /// Cross-field checks clap cannot express.
    pub fn validate(&self) -> Result<(), SettingsError> {
        self.webhook.target()?;
        if self.cluster_name.trim().is_empty() {
            return Err(SettingsError::Invalid {
                field: "CLUSTER_NAME",
                reason: "required".into(),
            });
        }
        let endpoint = &self.cluster_endpoint;
        let is_url = endpoint.starts_with("https://") || endpoint.starts_with("http://");
        if !endpoint.is_empty() && !is_url {
            return Err(SettingsError::Invalid {
                field: "CLUSTER_ENDPOINT",
                reason: format!("{:?} is not a valid URL", self.cluster_endpoint),
            });
        }
        if self.batch_idle_duration > self.batch_max_duration {
            return Err(SettingsError::Invalid {
                field: "BATCH_IDLE_DURATION",
                reason: format!(
                    "{} is longer than BATCH_MAX_DURATION {}",
                    format_duration(self.batch_idle_duration),
                    format_duration(self.batch_max_duration)
                ),
            });
        }
        if self.metrics_port == self.health_probe_port && self.metrics_port != 0 {
            return Err(SettingsError::Invalid {
                field: "HEALTH_PROBE_PORT",
                reason: format!("same as METRICS_PORT ({})", self.metrics_port),
            });
        }
        self.refuse_unbuilt()
    }

    /// Settings that ask for something nodewright does not do yet stop the controller at
    /// start: running without what was asked for, silently, would be worse.
    fn refuse_unbuilt(&self) -> Result<(), SettingsError> {
        let unbuilt = |field: &'static str, what: &str| SettingsError::Invalid {
            field,
            reason: format!("{what} is not implemented by nodewright; leave it unset"),
        };
        let g = &self.feature_gates;
        for (on, gate) in [
            (g.node_overlay, "NodeOverlay=true (NodeOverlay objects)"),
            (g.capacity_buffer, "CapacityBuffer=true (capacity buffers)"),
        ] {
            if on {
                return Err(unbuilt("FEATURE_GATES", gate));
            }
        }
        if self.aws_feature_gates.node_class_cel {
            return Err(unbuilt(
                "AWS_FEATURE_GATES",
                "NodeClassCEL=true (CEL rules on EC2NodeClass fields)",
            ));
        }
        if !self.ignore_dra_requests {
            return Err(unbuilt(
                "IGNORE_DRA_REQUESTS",
                "false (scheduling pods' dynamic resource claims)",
            ));
        }
        if self.enable_profiling {
            return Err(unbuilt("ENABLE_PROFILING", "true (pprof handlers)"));
        }
        if self.memory_limit != -1 {
            return Err(SettingsError::Invalid {
                field: "MEMORY_LIMIT",
                reason: format!(
                    "{}: it sets Go's garbage collector target, and nodewright has no garbage collector; leave it unset (the container's memory limit still applies)",
                    self.memory_limit
                ),
            });
        }
        if self.log_output_paths.trim() != "stdout" {
            return Err(unbuilt(
                "LOG_OUTPUT_PATHS",
                &format!("{:?} (logs go to stdout)", self.log_output_paths),
            ));
        }
        if self.log_error_output_paths.trim() != "stderr" {
            return Err(unbuilt(
                "LOG_ERROR_OUTPUT_PATHS",
                &format!(
                    "{:?} (the logger's errors go to stderr)",
                    self.log_error_output_paths
                ),
            ));
        }
        if !self.scheduler_config.trim().is_empty() {
            return Err(unbuilt(
                "SCHEDULER_CONFIG",
                "a scheduler configuration (default topology spread constraints)",
            ));
        }
        Ok(())
    }

    /// The scheduler's policies: `PREFERENCE_POLICY` and `MIN_VALUES_POLICY`.
    pub fn scheduling_options(&self) -> nodewright_core::scheduling::Options {
        nodewright_core::scheduling::Options {
            ignore_preferences: self.preference_policy == "Ignore",
            min_values_best_effort: self.min_values_policy == "BestEffort",
            ..Default::default()
        }
    }

    /// What consolidation may do: `FEATURE_GATES`'s `SpotToSpotConsolidation`.
    pub fn consolidation_features(&self) -> nodewright_core::disruption::Features {
        nodewright_core::disruption::Features {
            spot_to_spot_consolidation: self.feature_gates.spot_to_spot_consolidation,
        }
    }

    /// The CPUs the controller was given, `ceil(CPU_REQUESTS / 1000)` (at least one): loops
    /// that work on many objects at once scale with it, as upstream's reconciles do.
    pub fn cpus(&self) -> usize {
        (self.cpu_requests.div_ceil(1000) as usize).max(1)
    }

    /// Whether to elect a leader: both the current and the legacy switch must allow it.
    pub fn leader_election_enabled(&self) -> bool {
        self.leader_elect && !self.disable_leader_election
    }

    /// The lease's namespace: the setting, else the controller's own namespace from
    /// `SYSTEM_NAMESPACE` or `POD_NAMESPACE`, else `kube-system`.
    pub fn lease_namespace(&self) -> String {
        if !self.leader_election_namespace.is_empty() {
            return self.leader_election_namespace.clone();
        }
        ["SYSTEM_NAMESPACE", "POD_NAMESPACE"]
            .iter()
            .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
            .unwrap_or_else(|| "kube-system".into())
    }
}

#[cfg(test)]
mod tests;
