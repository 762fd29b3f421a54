//! The EC2 instances this controller launched: one by provider id, all of the cluster's by
//! their tags, and termination. A termination EC2 refuses is reported to the observer with
//! the instance's zone and zone id (upstream's
//! `karpenter_cloudprovider_instance_termination_failures_total`).
//!
//! Instances are listed in the states pending, running, stopping, stopped and shutting-down.
//! A terminated instance (or one EC2 no longer knows) is [`CloudError::NotFound`]; a
//! shutting-down one still exists, so termination is not asked for twice and the caller keeps
//! waiting until it is gone.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{self as ec2, Filter};
use nodewright_cloud::{CloudError, Instance, InstanceState, TerminationFailure, tags};
use nodewright_core::model::CapacityType;
use nodewright_core::time::Timestamp;

use crate::AwsClients;
use crate::error::AwsError;
use crate::observe::Observer;

pub use crate::instance_batch::LISTED_STATES;
use crate::instance_batch::{InstanceBatchers, state_filter};

/// An instance as EC2 describes it: the provider-neutral view plus the network placement the
/// drift checks compare against the node class.
#[derive(Clone, Debug, PartialEq)]
pub struct Ec2Instance {
    pub instance: Instance,
    pub subnet_id: Option<String>,
    /// Sorted, without repeats.
    pub security_groups: Vec<String>,
}

/// `aws:///<zone>/<instance id>`.
pub fn provider_id(zone: &str, instance_id: &str) -> String {
    format!("aws:///{zone}/{instance_id}")
}

/// The instance id inside a provider id (`aws:///us-east-1a/i-0abc` → `i-0abc`).
pub fn instance_id(provider_id: &str) -> Result<&str, CloudError> {
    let invalid = || {
        CloudError::InvalidRequest(format!(
            "provider id {provider_id:?} is not of the form aws:///<zone>/<instance id>"
        ))
    };
    let rest = provider_id.strip_prefix("aws:///").ok_or_else(invalid)?;
    let (_zone, id) = rest.split_once('/').ok_or_else(invalid)?;
    if !id.starts_with("i-") || id.contains('/') {
        return Err(invalid());
    }
    Ok(id)
}

fn state(name: &ec2::InstanceStateName) -> InstanceState {
    match name {
        ec2::InstanceStateName::Pending => InstanceState::Pending,
        ec2::InstanceStateName::ShuttingDown => InstanceState::ShuttingDown,
        ec2::InstanceStateName::Terminated => InstanceState::Terminated,
        // A stopped instance still holds its claim; the controller tells apart only starting,
        // existing and going away.
        _ => InstanceState::Running,
    }
}

/// One `DescribeInstances` entry; `None` without an id.
pub fn from_sdk(i: &ec2::Instance) -> Option<Ec2Instance> {
    let id = i.instance_id()?;
    let zone = i
        .placement()
        .and_then(|p| p.availability_zone())
        .unwrap_or_default()
        .to_string();
    let capacity_type = if i.instance_lifecycle() == Some(&ec2::InstanceLifecycleType::Spot) {
        CapacityType::Spot
    } else if i.capacity_reservation_id().is_some_and(|r| !r.is_empty()) {
        CapacityType::Reserved
    } else {
        CapacityType::OnDemand
    };
    let tags: BTreeMap<String, String> = i
        .tags()
        .iter()
        .filter_map(|t| {
            Some((
                t.key()?.to_string(),
                t.value().unwrap_or_default().to_string(),
            ))
        })
        .collect();
    let mut security_groups: Vec<String> = i
        .security_groups()
        .iter()
        .filter_map(|g| g.group_id().map(str::to_string))
        .collect();
    security_groups.sort();
    security_groups.dedup();
    Some(Ec2Instance {
        instance: Instance {
            provider_id: provider_id(&zone, id),
            instance_type: i
                .instance_type()
                .map(|t| t.as_str().to_string())
                .unwrap_or_default(),
            zone,
            capacity_type,
            image_id: i.image_id().map(str::to_string),
            state: i
                .state()
                .and_then(|s| s.name())
                .map(state)
                .unwrap_or(InstanceState::Pending),
            launched_at: i
                .launch_time()
                .and_then(|t| t.to_millis().ok())
                .map(Timestamp),
            tags,
        },
        subnet_id: i.subnet_id().map(str::to_string),
        security_groups,
    })
}

/// The instance behind `provider_id`, in one of [`LISTED_STATES`]. Looked up through the
/// DescribeInstances batcher, so concurrent lookups share one call.
pub async fn get(
    batchers: &InstanceBatchers,
    provider_id: &str,
) -> Result<Ec2Instance, CloudError> {
    Ok(describe(batchers, provider_id).await?.instance)
}

/// What DescribeInstances says about one instance beyond [`Ec2Instance`].
struct Described {
    instance: Ec2Instance,
    /// The capacity reservation it runs in.
    reservation: Option<String>,
    /// Its zone's id, when EC2 reports it with the placement.
    zone_id: Option<String>,
}

/// The instance behind `provider_id`.
async fn describe(batchers: &InstanceBatchers, provider_id: &str) -> Result<Described, CloudError> {
    let id = instance_id(provider_id)?;
    let not_found = || CloudError::NotFound {
        provider_id: provider_id.to_string(),
    };
    let Some(i) = batchers.describe(id).await? else {
        return Err(not_found());
    };
    let instance = from_sdk(&i).ok_or_else(not_found)?;
    if instance.instance.state == InstanceState::Terminated {
        return Err(not_found());
    }
    Ok(Described {
        instance,
        reservation: i
            .capacity_reservation_id()
            .filter(|r| !r.is_empty())
            .map(str::to_string),
        zone_id: i
            .placement()
            .and_then(|p| p.availability_zone_id())
            .filter(|z| !z.is_empty())
            .map(str::to_string),
    })
}

/// Every instance of `cluster` this controller launched: tagged with a NodePool and
/// `kubernetes.io/cluster/<cluster>=owned`. Sorted by provider id.
/// The pending or running instance of the cluster tagged for `nodeclaim`, if any: one an
/// earlier process launched and did not live to record on the claim.
pub async fn for_claim(
    clients: &AwsClients,
    cluster: &str,
    nodeclaim: &str,
) -> Result<Option<Ec2Instance>, AwsError> {
    let page = clients
        .ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name(format!("tag:{}", tags::NODECLAIM))
                .values(nodeclaim)
                .build(),
        )
        .filters(
            Filter::builder()
                .name(format!("tag:{}", tags::cluster(cluster)))
                .values("owned")
                .build(),
        )
        .filters(
            Filter::builder()
                .name("instance-state-name")
                .values("pending")
                .values("running")
                .build(),
        )
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("DescribeInstances", e))?;
    let mut found: Vec<Ec2Instance> = page
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(from_sdk)
        .collect();
    // Should two exist, the one launched first is kept; garbage collection ends the other.
    found.sort_by_key(|i| (i.instance.launched_at, i.instance.provider_id.clone()));
    Ok(found.into_iter().next())
}

pub async fn list(clients: &AwsClients, cluster: &str) -> Result<Vec<Ec2Instance>, AwsError> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = clients
            .ec2
            .describe_instances()
            .filters(
                Filter::builder()
                    .name("tag-key")
                    .values(tags::NODEPOOL)
                    .build(),
            )
            .filters(
                Filter::builder()
                    .name(format!("tag:{}", tags::cluster(cluster)))
                    .values("owned")
                    .build(),
            )
            .filters(state_filter())
            .max_results(1000)
            .set_next_token(token)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("DescribeInstances", e))?;
        out.extend(
            page.reservations()
                .iter()
                .flat_map(|r| r.instances())
                .filter_map(from_sdk)
                .filter(|i| i.instance.state != InstanceState::Terminated),
        );
        token = page
            .next_token()
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    out.sort_by(|a, b| a.instance.provider_id.cmp(&b.instance.provider_id));
    out.dedup_by(|a, b| a.instance.provider_id == b.instance.provider_id);
    Ok(out)
}

/// Terminates the instance behind `provider_id`. Already shutting down: nothing is sent and
/// the call succeeds, so the caller checks again later; already terminated or unknown:
/// [`CloudError::NotFound`]. Returns the capacity reservation the instance leaves when this
/// call sent the termination, so its free count can go up once and right away. Any other
/// refusal is reported to `observer`.
///
/// Both the lookup and the termination go through the batchers, so concurrent terminations
/// share one DescribeInstances and one TerminateInstances; a refusal is still the one EC2
/// gave for this instance.
pub async fn terminate(
    clients: &AwsClients,
    batchers: &InstanceBatchers,
    provider_id: &str,
    observer: &Observer,
) -> Result<Option<String>, CloudError> {
    let Described {
        instance: current,
        reservation,
        zone_id,
    } = describe(batchers, provider_id).await?;
    if current.instance.state == InstanceState::ShuttingDown {
        return Ok(None);
    }
    let id = instance_id(provider_id)?;
    match batchers.terminate(id).await {
        Ok(_) => Ok(reservation),
        Err(e) if e.is_not_found() => Err(CloudError::NotFound {
            provider_id: provider_id.to_string(),
        }),
        Err(e) => {
            let zone = current.instance.zone;
            let zone_id = match zone_id {
                Some(z) => z,
                None => zone_id_of(clients, &zone).await,
            };
            observer.termination_failed(&TerminationFailure { zone, zone_id });
            Err(e.into())
        }
    }
}

/// The id of the zone named `zone` (`us-east-1a` → `use1-az1`); empty when EC2 does not say.
/// Only asked on a failed termination, so it is not cached.
async fn zone_id_of(clients: &AwsClients, zone: &str) -> String {
    if zone.is_empty() {
        return String::new();
    }
    match clients
        .ec2
        .describe_availability_zones()
        .zone_names(zone)
        .send()
        .await
    {
        Ok(out) => out
            .availability_zones()
            .iter()
            .find(|z| z.zone_name() == Some(zone))
            .and_then(|z| z.zone_id())
            .unwrap_or_default()
            .to_string(),
        Err(e) => {
            let e = AwsError::from_sdk("DescribeAvailabilityZones", e);
            tracing::debug!(zone, error = %e, "zone id unknown for a failed termination");
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_round_trip_and_reject_other_shapes() {
        let pid = provider_id("us-east-1a", "i-0123456789abcdef0");
        assert_eq!(pid, "aws:///us-east-1a/i-0123456789abcdef0");
        assert_eq!(instance_id(&pid).unwrap(), "i-0123456789abcdef0");
        for bad in [
            "",
            "aws://us-east-1a/i-1",
            "kwok:///us-east-1a/i-1",
            "aws:///i-1",
            "aws:///us-east-1a/vol-1",
            "aws:///us-east-1a/i-1/x",
        ] {
            let e = instance_id(bad).unwrap_err();
            assert!(matches!(e, CloudError::InvalidRequest(_)), "{bad}: {e}");
        }
    }

    #[test]
    fn sdk_instances_map_to_the_neutral_view() {
        let sdk = ec2::Instance::builder()
            .instance_id("i-1")
            .instance_type(ec2::InstanceType::M5Large)
            .image_id("ami-1")
            .subnet_id("subnet-1")
            .placement(
                ec2::Placement::builder()
                    .availability_zone("us-east-1b")
                    .build(),
            )
            .instance_lifecycle(ec2::InstanceLifecycleType::Spot)
            .state(
                ec2::InstanceState::builder()
                    .name(ec2::InstanceStateName::Stopped)
                    .build(),
            )
            .security_groups(ec2::GroupIdentifier::builder().group_id("sg-2").build())
            .security_groups(ec2::GroupIdentifier::builder().group_id("sg-1").build())
            .tags(ec2::Tag::builder().key(tags::NODECLAIM).value("c1").build())
            .build();
        let i = from_sdk(&sdk).unwrap();
        assert_eq!(i.instance.provider_id, "aws:///us-east-1b/i-1");
        assert_eq!(i.instance.instance_type, "m5.large");
        assert_eq!(i.instance.capacity_type, CapacityType::Spot);
        assert_eq!(i.instance.state, InstanceState::Running);
        assert_eq!(i.instance.nodeclaim(), Some("c1"));
        assert_eq!(i.subnet_id.as_deref(), Some("subnet-1"));
        assert_eq!(i.security_groups, vec!["sg-1", "sg-2"]);

        let reserved = ec2::Instance::builder()
            .instance_id("i-2")
            .capacity_reservation_id("cr-1")
            .build();
        assert_eq!(
            from_sdk(&reserved).unwrap().instance.capacity_type,
            CapacityType::Reserved
        );
        assert!(from_sdk(&ec2::Instance::builder().build()).is_none());
    }
}
