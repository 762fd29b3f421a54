//! EC2NodeClass reconciliation: subnets, security groups, AMIs, capacity reservations, the
//! placement group and the instance profile resolved against AWS, turned into the status the controller writes (with conditions) and
//! kept in richer form ([`ResolvedNodeClass`]) for instance types and launches.

pub mod aliases;
pub mod amis;
pub mod conditions;
pub mod hash;
pub mod network;
pub mod placement;
pub mod profile;
pub mod reservations;
pub mod validation;

use nodewright_api::aws::common::{
    AmiRequirement, AmiStatus, Condition, SecurityGroupStatus, SubnetStatus,
};
use nodewright_api::aws::v1::{EC2NodeClass, EC2NodeClassStatus};
use nodewright_core::time::Timestamp;

use crate::AwsClients;
use crate::error::AwsError;
use crate::parameters::Parameters;

pub use amis::ResolvedAmi;
pub use network::{ResolvedSecurityGroup, ResolvedSubnet};

/// What reconciliation needs besides the class.
pub struct NodeClassContext<'a> {
    pub clients: &'a AwsClients,
    pub parameters: &'a dyn Parameters,
    pub cluster: &'a str,
    /// The cluster's Kubernetes version (`1.32`), for alias parameter paths.
    pub kubernetes_version: &'a str,
    pub placement_groups: &'a placement::PlacementGroups,
}

/// Everything resolved for a class, plus the status and hash derived from it.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedNodeClass {
    /// Most free addresses first.
    pub subnets: Vec<ResolvedSubnet>,
    pub security_groups: Vec<ResolvedSecurityGroup>,
    /// Newest first; each with the node requirements it serves.
    pub amis: Vec<ResolvedAmi>,
    pub instance_profile: Option<String>,
    /// The active capacity reservations `capacityReservationSelectorTerms` select, by id.
    pub capacity_reservations: Vec<nodewright_aws_model::reservations::CapacityReservation>,
    /// The group `placementGroupSelector` names, when it exists.
    pub placement_group: Option<nodewright_aws_model::placement::PlacementGroup>,
    pub status: EC2NodeClassStatus,
    /// Value of [`hash::HASH_ANNOTATION`] (version [`hash::HASH_VERSION`]).
    pub hash: String,
}

impl ResolvedNodeClass {
    pub fn is_ready(&self) -> bool {
        self.status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == conditions::READY && c.status == "True")
    }

    /// The zones the class's subnets are in, sorted, without repeats.
    pub fn zones(&self) -> Vec<nodewright_aws_model::Zone> {
        let mut z: Vec<nodewright_aws_model::Zone> = self
            .subnets
            .iter()
            .map(|s| nodewright_aws_model::Zone {
                name: s.zone.clone(),
                id: s.zone_id.clone(),
            })
            .collect();
        z.sort();
        z.dedup_by(|a, b| a.name == b.name);
        z
    }
}

fn err(reason: &str, message: impl Into<String>) -> conditions::Outcome {
    Err((reason.to_string(), message.into()))
}

/// `Ok` when something was `found`, else `reason` with `message`.
fn found_or(found: bool, reason: &str, message: &str) -> conditions::Outcome {
    if found { Ok(()) } else { err(reason, message) }
}

/// Resolves `class` at `now`. API failures (throttling, network) are `Err` so the caller
/// retries; things that do not exist become `False` conditions.
pub async fn reconcile(
    ctx: &NodeClassContext<'_>,
    class: &EC2NodeClass,
    now: Timestamp,
) -> Result<ResolvedNodeClass, AwsError> {
    let spec = &class.spec;
    let subnets = network::resolve_subnets(
        ctx.clients,
        spec.subnet_selector_terms.as_deref().unwrap_or(&[]),
    )
    .await?;
    let subnets_ok = found_or(
        !subnets.is_empty(),
        "SubnetsNotFound",
        "no subnet matches subnetSelectorTerms",
    );
    let security_groups = network::resolve_security_groups(
        ctx.clients,
        spec.security_group_selector_terms.as_deref().unwrap_or(&[]),
    )
    .await?;
    let groups_ok = found_or(
        !security_groups.is_empty(),
        "SecurityGroupsNotFound",
        "no security group matches securityGroupSelectorTerms",
    );
    let (amis, amis_ok) = resolve_amis(ctx, class, now).await;
    let (instance_profile, profile_ok) = resolve_instance_profile(ctx, class).await?;
    let capacity_reservations = reservations::resolve_capacity_reservations(
        ctx.clients,
        spec.capacity_reservation_selector_terms
            .as_deref()
            .unwrap_or(&[]),
    )
    .await?;
    let (placement_group, placement_ok) =
        placement::resolve(ctx.placement_groups, spec.placement_group_selector.as_ref()).await;

    let parts = vec![
        (conditions::SUBNETS_READY, subnets_ok),
        (conditions::SECURITY_GROUPS_READY, groups_ok),
        (conditions::AMIS_READY, amis_ok),
        (conditions::INSTANCE_PROFILE_READY, profile_ok),
        // Reservations that cannot be listed fail the whole reconcile (it is retried);
        // selecting none, or none matching, is a valid state.
        (conditions::CAPACITY_RESERVATIONS_READY, Ok(())),
    ];
    let conds = class_conditions(class, parts, placement_ok, now);
    let mut resolved = ResolvedNodeClass {
        subnets,
        security_groups,
        amis,
        instance_profile,
        capacity_reservations,
        placement_group,
        status: EC2NodeClassStatus::default(),
        hash: hash::nodeclass_hash(class),
    };
    resolved.status = status(class, &resolved, conds, now);
    Ok(resolved)
}

/// The images the class's `amiSelectorTerms` select, with the AMIs condition's outcome.
async fn resolve_amis(
    ctx: &NodeClassContext<'_>,
    class: &EC2NodeClass,
    now: Timestamp,
) -> (Vec<ResolvedAmi>, conditions::Outcome) {
    match amis::resolve_amis(
        ctx.clients,
        ctx.parameters,
        class.spec.ami_selector_terms.as_deref().unwrap_or(&[]),
        ctx.kubernetes_version,
        &conditions::rfc3339(now),
    )
    .await
    {
        Ok(a) => (a, Ok(())),
        Err(p) => (Vec::new(), err(p.reason, p.message)),
    }
}

/// The class's instance profile: the one it names, else one made for its role (created when
/// missing), with the instance profile condition's outcome.
async fn resolve_instance_profile(
    ctx: &NodeClassContext<'_>,
    class: &EC2NodeClass,
) -> Result<(Option<String>, conditions::Outcome), AwsError> {
    let spec = &class.spec;
    Ok(match (&spec.role, &spec.instance_profile) {
        (_, Some(p)) => (Some(p.clone()), Ok(())),
        (Some(role), None) => {
            let name = class.metadata.name.clone().unwrap_or_default();
            let uid = class.metadata.uid.clone().unwrap_or_default();
            let region = ctx.clients.region.as_str();
            let pname = profile::profile_name(ctx.cluster, region, &name, &uid);
            let path = profile::profile_path(ctx.cluster, region, &uid);
            let tags = profile::profile_tags(
                &spec.tags.clone().unwrap_or_default(),
                ctx.cluster,
                region,
                &name,
            );
            match profile::ensure_instance_profile(ctx.clients, &pname, &path, &tags, role).await {
                Ok(()) => (Some(pname), Ok(())),
                Err(e) if e.is_not_found() => (
                    None,
                    err("RoleNotFound", format!("role {role}: {}", e.message)),
                ),
                Err(e) if !e.retryable => (None, err("InstanceProfileCreationFailed", e.message)),
                Err(e) => return Err(e),
            }
        }
        (None, None) => (
            None,
            err(
                "InstanceProfileNotFound",
                "neither role nor instanceProfile is set",
            ),
        ),
    })
}

/// The class's conditions from each part's outcome (and the placement group's, when the
/// class names one), with validation and readiness following from them.
fn class_conditions(
    class: &EC2NodeClass,
    mut parts: Vec<(&str, conditions::Outcome)>,
    placement_ok: Option<conditions::Outcome>,
    now: Timestamp,
) -> Vec<Condition> {
    let previous = class
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    // Only a class that names a placement group has the condition (and waits on it).
    if let Some(outcome) = placement_ok {
        parts.push((placement::PLACEMENT_GROUP_READY, outcome));
    }
    let validated = conditions::validation(&parts, &class.spec.tags.clone().unwrap_or_default());
    parts.push((conditions::VALIDATION_SUCCEEDED, validated));
    conditions::conditions(&parts, &previous, class.metadata.generation, now)
}

/// The status written for `resolved`: what was found (lists left out when empty) and
/// `conditions`, keeping the fields of the class's status this controller does not know.
fn status(
    class: &EC2NodeClass,
    resolved: &ResolvedNodeClass,
    conditions: Vec<Condition>,
    now: Timestamp,
) -> EC2NodeClassStatus {
    EC2NodeClassStatus {
        subnets: (!resolved.subnets.is_empty())
            .then(|| resolved.subnets.iter().map(subnet_status).collect()),
        security_groups: (!resolved.security_groups.is_empty()).then(|| {
            resolved
                .security_groups
                .iter()
                .map(security_group_status)
                .collect()
        }),
        capacity_reservations: (!resolved.capacity_reservations.is_empty()).then(|| {
            resolved
                .capacity_reservations
                .iter()
                .map(|r| reservations::status(r, now.unix_seconds()))
                .collect()
        }),
        amis: (!resolved.amis.is_empty()).then(|| resolved.amis.iter().map(ami_status).collect()),
        instance_profile: resolved.instance_profile.clone(),
        conditions: Some(conditions),
        extra: class
            .status
            .as_ref()
            .map(|s| s.extra.clone())
            .unwrap_or_default(),
    }
}

/// A resolved subnet as the status lists it.
fn subnet_status(s: &ResolvedSubnet) -> SubnetStatus {
    SubnetStatus {
        id: s.id.clone(),
        zone: Some(s.zone.clone()),
        zone_id: s.zone_id.clone(),
        extra: Default::default(),
    }
}

/// A resolved security group as the status lists it.
fn security_group_status(g: &ResolvedSecurityGroup) -> SecurityGroupStatus {
    SecurityGroupStatus {
        id: g.id.clone(),
        name: Some(g.name.clone()),
        extra: Default::default(),
    }
}

fn ami_status(a: &ResolvedAmi) -> AmiStatus {
    AmiStatus {
        id: a.id.clone(),
        deprecated: a.deprecated.then_some(true),
        name: Some(a.name.clone()),
        requirements: a
            .requirements
            .iter()
            .map(|r| AmiRequirement {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: (!r.values.is_empty()).then(|| r.values.clone()),
                min_values: None,
                extra: Default::default(),
            })
            .collect(),
        extra: Default::default(),
    }
}
