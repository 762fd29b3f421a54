//! `ValidationSucceeded` beyond the class's own settings: can the controller actually launch
//! from it? Once every dependency resolved, the launch configuration a node of the class would
//! get is built (user data size-checked against EC2's limit) and, unless `DISABLE_DRY_RUN`,
//! `CreateFleet`, `CreateLaunchTemplate` and `RunInstances` are sent with `DryRun=true` to learn
//! whether the controller's IAM policy allows them.
//!
//! This module holds the decisions (what an answer means, what is cached, which condition
//! results); [`dryrun`] builds and sends the requests.

pub mod dryrun;
pub mod run_instances;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nodewright_api::aws::common::Condition;
use nodewright_api::stable_hash::fnv1a64;
use nodewright_aws_model::launch::{offering_compatible, type_compatible};
use nodewright_aws_model::userdata::registration_taints;
use nodewright_core::labels::NODEPOOL as NODEPOOL_LABEL;
use nodewright_core::model::{CapacityType, InstanceType, NodePool};
use nodewright_core::requirements::Requirement;
use nodewright_core::resources::{CPU, MEMORY};
use nodewright_core::taints::Taint;
use nodewright_core::time::Timestamp;

use super::aliases::{ACCELERATOR_COUNT_LABEL, GPU_COUNT_LABEL};
use super::conditions::{self, Outcome, READY, VALIDATION_SUCCEEDED};
use super::{ResolvedAmi, ResolvedNodeClass};
use crate::error::AwsError;
use crate::launch::ClusterInfo;
use crate::launch::claim::node_labels_from;
use nodewright_aws_model::AmiFamily;

pub const CREATE_FLEET_AUTH_FAILED: &str = "CreateFleetAuthCheckFailed";
pub const CREATE_LAUNCH_TEMPLATE_AUTH_FAILED: &str = "CreateLaunchTemplateAuthCheckFailed";
pub const RUN_INSTANCES_AUTH_FAILED: &str = "RunInstancesAuthCheckFailed";
pub const USER_DATA_SIZE_LIMIT_EXCEEDED: &str = "UserDataSizeLimitExceeded";
/// The class's launch configuration cannot be built (the cluster endpoint or service CIDR its
/// user data needs is unknown, user data of the wrong form ...): every launch would fail.
pub const LAUNCH_CONFIGURATION_INVALID: &str = "LaunchConfigurationInvalid";
/// The class uses AL2023, whose nodes cannot join without the cluster's service CIDR, and EKS
/// `DescribeCluster` did not give it: no node of the class could join.
pub const CLUSTER_CIDR_RESOLUTION_FAILED: &str = "ClusterCIDRResolutionFailed";
/// A dry run gave no verdict (throttling, a network error, an answer that is neither success
/// nor a refusal) and there is no earlier verdict to keep.
pub const AUTH_CHECK_INCOMPLETE: &str = "AuthCheckIncomplete";

/// How long a verdict is reused, as upstream.
pub const TTL: Duration = Duration::from_secs(30 * 60);

/// Instance types upstream validates with when nothing narrows the choice (one per
/// architecture); preferred when the class can launch them.
const PREFERRED_TYPES: &[&str] = &["m5.large", "m6g.large"];

/// Error codes that mean the caller's identity may not make the call.
const AUTH_CODES: &[&str] = &[
    "UnauthorizedOperation",
    "AccessDenied",
    "AccessDeniedException",
];

/// The calls a launch makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    CreateFleet,
    CreateLaunchTemplate,
    RunInstances,
}

impl Call {
    pub fn operation(self) -> &'static str {
        match self {
            Call::CreateFleet => "CreateFleet",
            Call::CreateLaunchTemplate => "CreateLaunchTemplate",
            Call::RunInstances => "RunInstances",
        }
    }

    /// The condition reason when the controller may not make this call.
    pub fn auth_reason(self) -> &'static str {
        match self {
            Call::CreateFleet => CREATE_FLEET_AUTH_FAILED,
            Call::CreateLaunchTemplate => CREATE_LAUNCH_TEMPLATE_AUTH_FAILED,
            Call::RunInstances => RUN_INSTANCES_AUTH_FAILED,
        }
    }
}

/// What one dry run (or the checks before them) says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// EC2 would have made the call.
    Passed,
    /// The class cannot launch: a condition reason and message.
    Failed {
        reason: &'static str,
        message: String,
    },
    /// No verdict: try again on the next reconcile.
    Undecided { message: String },
}

impl Verdict {
    fn failed(reason: &'static str, message: impl Into<String>) -> Self {
        Verdict::Failed {
            reason,
            message: message.into(),
        }
    }
}

/// EC2's code for user data it will not take: more than 16 KiB once decoded, or not base64.
pub const INVALID_USER_DATA: &str = "InvalidUserData.Malformed";

/// A refusal of the request's user data. EC2 answers oversized user data with
/// [`INVALID_USER_DATA`]; the controller always sends valid base64, so that code means the
/// size unless the message says the encoding is at fault. An `InvalidParameterValue` that
/// names the user data limit (as some EC2 peers send) is read as the size too.
fn user_data_refusal(code: &str, lower: &str, message: &str) -> Option<Verdict> {
    let about_size = || {
        lower.contains("user data")
            && (lower.contains("limit") || lower.contains("exceed") || lower.contains("too large"))
    };
    if code == INVALID_USER_DATA {
        return Some(if lower.contains("base64") {
            Verdict::failed(LAUNCH_CONFIGURATION_INVALID, message)
        } else {
            Verdict::failed(USER_DATA_SIZE_LIMIT_EXCEEDED, message)
        });
    }
    (code == "InvalidParameterValue" && about_size())
        .then(|| Verdict::failed(USER_DATA_SIZE_LIMIT_EXCEEDED, message))
}

/// What EC2's answer to a dry run of `call` means. `DryRunOperation` is EC2's "would have
/// succeeded"; an authorization refusal fails the class; a refusal of the user data (EC2's
/// `InvalidUserData.Malformed`) is reported as oversized user data. Throttling, network errors, an instance profile EC2 does not see yet
/// (IAM is eventually consistent) and anything unexpected give no verdict.
pub fn classify(call: Call, err: &AwsError) -> Verdict {
    let code = err.code.as_deref().unwrap_or_default();
    if code == "DryRunOperation" {
        return Verdict::Passed;
    }
    if AUTH_CODES.contains(&code) {
        return Verdict::failed(
            call.auth_reason(),
            format!(
                "the controller is not authorized to call ec2:{} ({})",
                call.operation(),
                err.message
            ),
        );
    }
    let lower = err.message.to_ascii_lowercase();
    if let Some(verdict) = user_data_refusal(code, &lower, &err.message) {
        return verdict;
    }
    let why = if err.retryable {
        "EC2 is throttling or unreachable"
    } else if lower.contains("instance profile") {
        "the instance profile is not visible to EC2 yet"
    } else {
        "unexpected answer"
    };
    Verdict::Undecided {
        message: format!(
            "the ec2:{} dry run gave no verdict ({why}): {}",
            call.operation(),
            err.message
        ),
    }
}

/// Verdicts per class, each with the key of what was validated: a verdict is reused for
/// [`TTL`] while the key is unchanged. One entry per class, so the cache is as large as the
/// number of classes.
#[derive(Debug)]
pub struct ValidationCache {
    ttl: Duration,
    entries: Mutex<BTreeMap<String, (u64, Instant, Verdict)>>,
}

impl Default for ValidationCache {
    fn default() -> Self {
        ValidationCache::new(TTL)
    }
}

impl ValidationCache {
    pub fn new(ttl: Duration) -> Self {
        ValidationCache {
            ttl,
            entries: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (u64, Instant, Verdict)>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The verdict for `class` if one was stored for `key` less than the TTL before `now`.
    pub fn get(&self, class: &str, key: u64, now: Instant) -> Option<Verdict> {
        let entries = self.lock();
        let (k, at, verdict) = entries.get(class)?;
        (*k == key && now.saturating_duration_since(*at) < self.ttl).then(|| verdict.clone())
    }

    /// Stores a verdict; an undecided one is not a verdict and is not kept.
    pub fn put(&self, class: &str, key: u64, verdict: Verdict, now: Instant) {
        if matches!(verdict, Verdict::Undecided { .. }) {
            return;
        }
        self.lock().insert(class.to_string(), (key, now, verdict));
    }
}

/// The key of what a validation covers: the class (its uid and spec hash), what it resolved
/// to (subnets, groups, images, profile, placement group, reservations), the launch validated
/// with ([`Choice::key`]: type, offering, pool), and how nodes reach the cluster. Free addresses are left out: they change
/// all the time and do not change the answer.
pub fn cache_key(
    uid: &str,
    spec_hash: &str,
    resolved: &ResolvedNodeClass,
    launch: &str,
    cluster: &impl std::fmt::Debug,
) -> u64 {
    let subnets: Vec<(&str, &str)> = resolved
        .subnets
        .iter()
        .map(|s| (s.id.as_str(), s.zone.as_str()))
        .collect();
    let groups: Vec<&str> = resolved
        .security_groups
        .iter()
        .map(|g| g.id.as_str())
        .collect();
    let amis: Vec<(&str, &Vec<_>)> = resolved
        .amis
        .iter()
        .map(|a| (a.id.as_str(), &a.requirements))
        .collect();
    let reservations: Vec<&str> = resolved
        .capacity_reservations
        .iter()
        .map(|r| r.id.as_str())
        .collect();
    let group = resolved.placement_group.as_ref().map(|g| g.id.as_str());
    let text = format!(
        "{uid}|{spec_hash}|{subnets:?}|{groups:?}|{amis:?}|{:?}|{group:?}|{reservations:?}|{launch}|{cluster:?}",
        resolved.instance_profile
    );
    fnv1a64(text.as_bytes())
}

/// Whether `ami` is a standard image (no GPU or accelerator variant): GPU images can carry a
/// larger root snapshot than the class's block devices allow for standard nodes.
fn is_standard(ami: &ResolvedAmi) -> bool {
    !ami.requirements.iter().any(|r| {
        (r.key == GPU_COUNT_LABEL || r.key == ACCELERATOR_COUNT_LABEL) && r.operator == "Exists"
    })
}

/// What a NodePool using the class asks of its nodes: its requirements and its template's
/// labels (as `In` requirements), as upstream reads them to pick the type it validates with;
/// and what its nodes register with, which goes into their user data (and so counts towards
/// EC2's size limit).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolDemand {
    pub name: String,
    pub requirements: Vec<Requirement>,
    /// The labels a node of the pool registers with, as a claim of the pool would give them:
    /// the template's labels, `karpenter.sh/nodepool`, and the single-valued requirements the
    /// kubelet may set.
    pub labels: BTreeMap<String, String>,
    /// The registration taints: the template's taints and startup taints, then
    /// `karpenter.sh/unregistered`.
    pub taints: Vec<Taint>,
}

impl PoolDemand {
    pub fn new(pool: &NodePool) -> Self {
        let t = &pool.template;
        let mut requirements = t.requirements.clone();
        requirements.extend(t.labels.iter().map(|(k, v)| Requirement::single(k, v)));
        let mut labels = t.labels.clone();
        labels.insert(NODEPOOL_LABEL.to_string(), pool.name.clone());
        PoolDemand {
            name: pool.name.clone(),
            labels: node_labels_from(labels, &requirements),
            requirements,
            taints: registration_taints(&t.taints, &t.startup_taints),
        }
    }
}

/// The launch to validate with: an instance type, the image it would boot, and the offering
/// (capacity type and zone) it would take; `pool` is the pool it was chosen for.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice<'a> {
    pub instance_type: &'a InstanceType,
    pub ami: &'a ResolvedAmi,
    pub capacity_type: CapacityType,
    pub zone: &'a str,
    pub price: f64,
    pub pool: Option<&'a PoolDemand>,
}

impl Choice<'_> {
    /// The name of the pool the launch was chosen for.
    pub fn nodepool(&self) -> Option<&str> {
        self.pool.map(|p| p.name.as_str())
    }

    /// What the choice adds to the cache key: a different type, offering or pool, or other
    /// labels or taints of the pool (they change the user data), is a different launch to
    /// check.
    pub fn key(&self) -> String {
        let (labels, taints) = match self.pool {
            Some(p) => (format!("{:?}", p.labels), format!("{:?}", p.taints)),
            None => Default::default(),
        };
        format!(
            "{}|{}|{}|{}|{labels}|{taints}",
            self.instance_type.name,
            self.capacity_type.as_str(),
            self.zone,
            self.nodepool().unwrap_or_default()
        )
    }
}

/// The launch `reqs` admit for `it`, if any: the image (a standard one if one serves the
/// type, else any that does) and the offering (on-demand before spot, then by zone).
/// Reserved offerings are left out: a dry run cannot target a reservation it might not fit.
fn launch_of<'a>(
    it: &'a InstanceType,
    amis: &'a [ResolvedAmi],
    reqs: &[Requirement],
    pool: Option<&'a PoolDemand>,
) -> Option<Choice<'a>> {
    if !type_compatible(it, reqs) {
        return None;
    }
    let serving = |a: &&ResolvedAmi| crate::launch::ami_serves(a, it);
    let ami = amis
        .iter()
        .filter(|a| is_standard(a))
        .find(serving)
        .or_else(|| amis.iter().find(serving))?;
    let offering = it
        .offerings
        .iter()
        .filter(|o| o.capacity_type != CapacityType::Reserved && offering_compatible(o, reqs))
        .min_by(|a, b| {
            (a.capacity_type != CapacityType::OnDemand)
                .cmp(&(b.capacity_type != CapacityType::OnDemand))
                .then(a.zone.cmp(&b.zone))
        })?;
    Some(Choice {
        instance_type: it,
        ami,
        capacity_type: offering.capacity_type,
        zone: &offering.zone,
        price: offering.price,
        pool,
    })
}

/// The launch to validate with. With NodePools using the class, a launch one of them could
/// make (its requirements and labels admit the type and the offering); without any, or when
/// none of theirs is possible, any launch the class allows. Among those: a type a standard
/// image serves first (GPU images can need more disk than the class gives standard nodes),
/// then on-demand, upstream's defaults (`m5.large`, `m6g.large`), the smallest (vCPUs,
/// memory), and names as the tie-break.
pub fn choose_launch<'a>(
    types: &'a [InstanceType],
    amis: &'a [ResolvedAmi],
    pools: &'a [PoolDemand],
) -> Option<Choice<'a>> {
    let rank = |c: &Choice<'_>| {
        let it = c.instance_type;
        let preferred = PREFERRED_TYPES
            .iter()
            .position(|p| *p == it.name)
            .unwrap_or(PREFERRED_TYPES.len());
        (
            !is_standard(c.ami),
            c.capacity_type != CapacityType::OnDemand,
            preferred,
            it.capacity.get(CPU),
            it.capacity.get(MEMORY),
        )
    };
    let best = |candidates: Vec<Choice<'a>>| {
        candidates.into_iter().min_by(|a, b| {
            rank(a)
                .cmp(&rank(b))
                .then(a.instance_type.name.cmp(&b.instance_type.name))
                .then(a.nodepool().cmp(&b.nodepool()))
        })
    };
    let for_pools: Vec<Choice<'a>> = pools
        .iter()
        .flat_map(|p| {
            types
                .iter()
                .filter_map(|it| launch_of(it, amis, &p.requirements, Some(p)))
        })
        .collect();
    best(for_pools).or_else(|| {
        best(
            types
                .iter()
                .filter_map(|it| launch_of(it, amis, &[], None))
                .collect(),
        )
    })
}

/// Why a class of `family` cannot launch nodes that join `cluster`: AL2023's NodeConfig needs
/// the service CIDR, which only EKS `DescribeCluster` gives. `None` when nothing is missing.
pub fn cluster_cidr_missing(family: AmiFamily, cluster: &ClusterInfo) -> Option<String> {
    if family != AmiFamily::AL2023 || cluster.service_cidr.is_some() {
        return None;
    }
    let why = cluster
        .service_cidr_unknown
        .as_deref()
        .unwrap_or("EKS DescribeCluster was not asked");
    Some(format!(
        "amiFamily AL2023 needs the cluster's service CIDR, which is unknown: {why}"
    ))
}

/// Reasons that are a verdict about the class (not a wait on its dependencies).
fn is_verdict_reason(reason: &str) -> bool {
    [
        CREATE_FLEET_AUTH_FAILED,
        CREATE_LAUNCH_TEMPLATE_AUTH_FAILED,
        RUN_INSTANCES_AUTH_FAILED,
        USER_DATA_SIZE_LIMIT_EXCEEDED,
        LAUNCH_CONFIGURATION_INVALID,
    ]
    .contains(&reason)
}

/// The verdict the stored status holds, to keep while a dry run gives none: `True`, or
/// `False` with one of this module's reasons.
pub fn stored_verdict(previous: &[Condition]) -> Option<Outcome> {
    let c = previous.iter().find(|c| c.type_ == VALIDATION_SUCCEEDED)?;
    match c.status.as_str() {
        "True" => Some(Ok(())),
        "False" => {
            let reason = c.reason.clone().unwrap_or_default();
            is_verdict_reason(&reason).then(|| Err((reason, c.message.clone().unwrap_or_default())))
        }
        _ => None,
    }
}

/// The outcome a verdict gives: a pass is `True`; a failure is `False` with its reason; no
/// verdict keeps the stored one, or is `False` ([`AUTH_CHECK_INCOMPLETE`]) when there is none,
/// as an unchecked class is not known to be launchable.
pub fn outcome(verdict: Verdict, previous: &[Condition]) -> Outcome {
    match verdict {
        Verdict::Passed => Ok(()),
        Verdict::Failed { reason, message } => Err((reason.to_string(), message)),
        Verdict::Undecided { message } => stored_verdict(previous)
            .unwrap_or_else(|| Err((AUTH_CHECK_INCOMPLETE.to_string(), message))),
    }
}

/// `conds` with `ValidationSucceeded` set to `validated` and `Ready` worked out again;
/// transition times come from `previous` (the stored status).
pub fn with_validation(
    conds: &[Condition],
    validated: &Outcome,
    previous: &[Condition],
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let parts: Vec<(&str, Outcome)> = conds
        .iter()
        .filter(|c| c.type_ != READY)
        .map(|c| {
            let outcome = if c.type_ == VALIDATION_SUCCEEDED {
                validated.clone()
            } else if c.status == "True" {
                Ok(())
            } else {
                Err((
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                ))
            };
            (c.type_.as_str(), outcome)
        })
        .collect();
    conditions::conditions(&parts, previous, generation, now)
}

#[cfg(test)]
mod tests;
