//! [`AwsCloud`] as the controller's [`CloudProvider`]: node classes resolved against EC2, SSM
//! and IAM; instance types from the discovered catalog and current prices; launches through
//! the fleet path; instances found, terminated and checked for drift through EC2.

use async_trait::async_trait;
use nodewright_api::aws::v1::{EC2NodeClass, EC2NodeClassStatus};
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_aws_model::Zone;
use std::collections::BTreeMap;
use std::sync::Arc;

use nodewright_cloud::{
    CloudError, CloudProvider, Instance, InstanceHealth, Launched, ProviderObserver,
    ReconciledNodeClass, RegisteredInstance, Registration, ReservationEnd,
};
use nodewright_core::labels;
use nodewright_core::model::InstanceType;
use nodewright_core::requirements::Requirement;

use crate::cloud::{AwsCloud, AwsCloudError, now};
use crate::drift::{self, DriftError};
use crate::error::AwsError;
use crate::instances;
use crate::nodeclass::hash::{
    HASH_ANNOTATION, HASH_VERSION, HASH_VERSION_ANNOTATION, nodeclass_hash,
};
use crate::nodeclass::validation::PoolDemand;
use nodewright_aws_model::class_input::node_class_input;

fn class_name(class: &EC2NodeClass) -> String {
    class.metadata.name.clone().unwrap_or_default()
}

/// The zones of the subnets in a class's status, sorted, without repeats.
pub fn status_zones(status: Option<&EC2NodeClassStatus>) -> Vec<Zone> {
    let mut zones: Vec<Zone> = status
        .and_then(|s| s.subnets.as_deref())
        .unwrap_or(&[])
        .iter()
        .filter_map(|s| {
            Some(Zone {
                name: s.zone.clone()?,
                id: s.zone_id.clone(),
            })
        })
        .collect();
    zones.sort();
    zones.dedup_by(|a, b| a.name == b.name);
    zones
}

/// The hash annotations `class`'s spec gives now: written on the class, and on every claim
/// launched from it.
pub fn hash_annotations(class: &EC2NodeClass) -> BTreeMap<String, String> {
    BTreeMap::from([
        (HASH_ANNOTATION.to_string(), nodeclass_hash(class)),
        (
            HASH_VERSION_ANNOTATION.to_string(),
            HASH_VERSION.to_string(),
        ),
    ])
}

/// `class` with the hash annotations its spec gives now, so drift compares against the
/// current spec whether or not the annotation on the object has been written.
fn with_current_hash(class: &EC2NodeClass) -> EC2NodeClass {
    let mut c = class.clone();
    c.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .extend(hash_annotations(class));
    c
}

impl AwsCloud {
    /// The zones instance types of `class` are offered in: from its status when the class has
    /// been resolved, else resolved now.
    async fn class_zones(&self, class: &EC2NodeClass) -> Result<Vec<Zone>, CloudError> {
        let zones = status_zones(class.status.as_ref());
        if !zones.is_empty() {
            return Ok(zones);
        }
        let resolved = self.resolve_node_class(class, now()).await?;
        Ok(resolved.zones())
    }

    /// A `reserved` offering per reservation in `class`'s status, with the free count the
    /// provider's books hold. Reservations the books have not seen yet (a fresh process) are
    /// listed from EC2 first.
    async fn add_reserved_offerings(
        &self,
        class: &EC2NodeClass,
        zones: &[Zone],
        types: &mut [InstanceType],
    ) -> Result<(), CloudError> {
        if !self.settings.reserved_capacity {
            return Ok(());
        }
        let ids: Vec<String> = class
            .status
            .as_ref()
            .and_then(|s| s.capacity_reservations.as_deref())
            .unwrap_or(&[])
            .iter()
            .map(|r| r.id.clone())
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let known = self
            .launch
            .reservations()
            .current(ids.iter().map(String::as_str));
        if known.len() < ids.len() {
            let listed = crate::nodeclass::reservations::resolve_capacity_reservations(
                &self.clients,
                class
                    .spec
                    .capacity_reservation_selector_terms
                    .as_deref()
                    .unwrap_or(&[]),
            )
            .await?;
            self.launch.reservations().observe(&listed);
        }
        let reservations = self
            .launch
            .reservations()
            .current(ids.iter().map(String::as_str));
        let names: Vec<String> = zones.iter().map(|z| z.name.clone()).collect();
        nodewright_aws_model::reservations::add_reserved_offerings(
            types,
            &reservations,
            &names,
            now().unix_seconds(),
        );
        Ok(())
    }

    /// The requirements (labels) of `instance_type` as a node of `class` would carry them.
    async fn type_requirements(
        &self,
        instance_type: &str,
        class: &EC2NodeClass,
    ) -> Result<Vec<Requirement>, CloudError> {
        let input = node_class_input(class).map_err(AwsCloudError::from)?;
        let discovered = self
            .instance_types
            .discovered()
            .await
            .map_err(AwsCloudError::from)?;
        let info = discovered.info(instance_type).ok_or_else(|| {
            CloudError::InvalidRequest(format!(
                "instance type {instance_type} is not offered in {}",
                self.region()
            ))
        })?;
        let prices = self.pricing.prices().await;
        nodewright_aws_model::build_instance_type(
            info,
            &self.settings.model,
            &input,
            self.region(),
            &[],
            prices.book(),
        )
        .map(|it| it.requirements)
        .map_err(|e| CloudError::InvalidRequest(e.to_string()))
    }
}

#[async_trait]
impl CloudProvider for AwsCloud {
    fn name(&self) -> &'static str {
        "aws"
    }

    /// EC2's, as upstream's AWS provider lists them.
    fn repair_policies(&self) -> Vec<nodewright_core::repair::Policy> {
        nodewright_aws_model::repair::policies()
    }

    /// Without the NodePools that use it, the class is validated with a launch it alone allows.
    async fn reconcile_node_class(
        &self,
        class: &EC2NodeClass,
    ) -> Result<ReconciledNodeClass, CloudError> {
        self.reconcile_node_class_for(class, &[]).await
    }

    async fn reconcile_node_class_for(
        &self,
        class: &EC2NodeClass,
        nodepools: &[NodePool],
    ) -> Result<ReconciledNodeClass, CloudError> {
        let resolved_at = now();
        let mut resolved = self.resolve_node_class(class, resolved_at).await?;
        self.launch
            .reservations()
            .observe(&resolved.capacity_reservations);
        // The subnets' free-address counts were just read: they replace the in-flight
        // predictions on the class's reconcile cadence, not only when a launch resolves the
        // class, so the predictions cannot drift from EC2's count for longer than a cycle
        // (upstream refreshes them on every subnet listing).
        self.launch
            .addresses()
            .refresh(&crate::launch::subnet_infos(&resolved), resolved_at);
        let pools = pool_demands(class, nodepools);
        self.validate_launch(class, &mut resolved, &pools, now())
            .await;
        Ok(ReconciledNodeClass {
            status: resolved.status,
            annotations: hash_annotations(class),
        })
    }

    /// The class's launch templates, and the instance profile this controller made for its
    /// `role` (a profile the user named in `instanceProfile` is theirs and stays).
    async fn finalize_node_class(&self, class: &EC2NodeClass) -> Result<Vec<String>, CloudError> {
        let name = class.metadata.name.clone().unwrap_or_default();
        let cluster = &self.settings.cluster_name;
        let mut removed = crate::launch::template::delete_class_templates(
            &self.clients,
            &self.launch.templates,
            cluster,
            &name,
        )
        .await?;
        if class.spec.role.is_some() && class.spec.instance_profile.is_none() {
            let uid = class.metadata.uid.clone().unwrap_or_default();
            let region = self.clients.region.as_str();
            let profile = crate::nodeclass::profile::profile_name(cluster, region, &name, &uid);
            if crate::nodeclass::profile::delete_instance_profile(&self.clients, &profile).await? {
                removed.push(profile);
            }
        }
        Ok(removed)
    }

    /// Without a class there is nothing to launch into: no types, so NodePools naming a
    /// missing class are skipped rather than failing every other pool's provisioning.
    async fn instance_types(
        &self,
        class: Option<&EC2NodeClass>,
    ) -> Result<Arc<Vec<InstanceType>>, CloudError> {
        let Some(class) = class else {
            return Ok(Arc::new(Vec::new()));
        };
        let input = node_class_input(class).map_err(AwsCloudError::from)?;
        let zones = self.class_zones(class).await?;
        if zones.is_empty() {
            tracing::debug!(nodeclass = %class_name(class), "no subnets resolved; no instance types");
            return Ok(Arc::new(Vec::new()));
        }
        let discovered = self
            .instance_types
            .discovered()
            .await
            .map_err(AwsCloudError::from)?;
        let prices = self.pricing.prices().await;
        let mut types = discovered.instance_types(
            self.region(),
            &self.settings.model,
            &input,
            &zones,
            prices.book(),
        );
        self.add_reserved_offerings(class, &zones, &mut types)
            .await?;
        let group = self
            .placement_groups
            .current(class.spec.placement_group_selector.as_ref())
            .await;
        if let Some(g) = &group {
            nodewright_aws_model::placement::apply_placement_group(&mut types, g, |n| {
                discovered.info(n)
            });
        }
        // Offerings that just reported insufficient capacity stay unavailable for a while,
        // so the scheduler plans around them instead of retrying them (inside the class's
        // placement group, only what failed there).
        let scope = group.map(|g| g.id);
        self.launch
            .unavailable()
            .apply_in(&mut types, scope.as_deref(), now());
        crate::zonal_shift::shifts::close_shifted_offerings(&mut types, &self.shifted_zones());
        Ok(Arc::new(types))
    }

    async fn create(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Launched, CloudError> {
        let mut launched = self.launch(claim, class).await?;
        // The claim carries the hash of the class it was launched from; `is_drifted`
        // compares it with the class's current one.
        if let Some(class) = class {
            launched.annotations.extend(hash_annotations(class));
        }
        Ok(launched)
    }

    /// A terminated instance's reservation gets its place back at once, as upstream does, so
    /// the next scheduling round can plan into it before EC2 is asked again. An instance in a
    /// zone ARC has shifted traffic away from is not terminated: the refusal is retryable, so
    /// the claim stays and termination is tried again after the shift.
    async fn delete(&self, provider_id: &str) -> Result<(), CloudError> {
        let shifted = self.shifted_zones();
        if let Some(zone) = crate::zonal_shift::shifts::refused_termination(provider_id, &shifted) {
            return Err(CloudError::Api {
                operation: "TerminateInstances".into(),
                message: format!(
                    "not terminating {provider_id}: ARC has shifted traffic away from zone {zone}; retrying once the zonal shift ends"
                ),
                retryable: true,
            });
        }
        if let Some(id) = instances::terminate(
            &self.clients,
            &self.instance_batchers,
            provider_id,
            &self.observer,
        )
        .await?
        {
            self.launch.reservations().released(&id);
            tracing::debug!(provider_id, capacity_reservation_id = %id, "reserved instance terminated; its reservation has one more free instance");
        }
        Ok(())
    }

    async fn get(&self, provider_id: &str) -> Result<Instance, CloudError> {
        Ok(instances::get(&self.instance_batchers, provider_id)
            .await?
            .instance)
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        Ok(instances::list(&self.clients, &self.settings.cluster_name)
            .await?
            .into_iter()
            .map(|i| i.instance)
            .collect())
    }

    async fn is_drifted(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Option<String>, CloudError> {
        // A claim whose class is gone cannot be compared with anything.
        let Some(class) = class else {
            return Ok(None);
        };
        if let Some(reason) = drift::static_drift(claim, &with_current_hash(class)) {
            return Ok(Some(reason.as_str().to_string()));
        }
        let Some(pid) = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .filter(|p| !p.is_empty())
        else {
            return Ok(None);
        };
        let instance = instances::get(&self.instance_batchers, pid).await?;
        let type_name = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::INSTANCE_TYPE))
            .cloned()
            .unwrap_or_else(|| instance.instance.instance_type.clone());
        let requirements = self.type_requirements(&type_name, class).await?;
        let status = class.status.clone().unwrap_or_default();
        let found = drift::instance_drift(&instance, &requirements, &status)
            .map_err(|e: DriftError| CloudError::NodeClassNotReady {
                name: class_name(class),
                reason: e.to_string(),
            })?
            .or_else(|| drift::reservation_drift(claim, &status));
        let found = match found {
            Some(r) => Some(r),
            None => {
                let selector = class.spec.placement_group_selector.as_ref();
                let group = self.placement_groups.current(selector).await;
                drift::placement_group_drift(claim, selector.is_some(), group.as_ref())
            }
        };
        Ok(found.map(|r| r.as_str().to_string()))
    }

    /// The placement-group partition EC2 chose, for claims launched without a pinned one.
    async fn registration_hooks(
        &self,
        claim: &NodeClaim,
        _class: Option<&EC2NodeClass>,
    ) -> Result<Registration, CloudError> {
        self.partition_hook(claim).await
    }

    fn tagged_annotations(&self) -> BTreeMap<String, String> {
        crate::tagging::tagged_annotations()
    }

    /// Only claims of an EC2NodeClass: upstream's tagging controller watches claims managed
    /// by this provider and nothing else.
    fn tagged_node_classes(&self) -> &'static [(&'static str, &'static str)] {
        crate::tagging::TAGGED_NODE_CLASSES
    }

    /// `Name`, `karpenter.sh/nodeclaim` and `eks:eks-cluster-name` on the instance.
    async fn tag_registered(&self, instance: &RegisteredInstance) -> Result<(), CloudError> {
        self.tag_registered_instance(instance).await
    }

    /// DescribeCapacityReservations by id, for blocks claims sit in that no class lists.
    async fn capacity_reservations(
        &self,
        ids: &[String],
    ) -> Result<Vec<ReservationEnd>, CloudError> {
        let found = crate::nodeclass::reservations::reservations_by_id(&self.clients, ids).await?;
        Ok(found
            .into_iter()
            .map(|r| ReservationEnd {
                capacity_block: r.reservation_type
                    == nodewright_aws_model::reservations::ReservationType::CapacityBlock,
                end: r
                    .end_unix
                    .map(|s| nodewright_core::time::Timestamp(s.saturating_mul(1000))),
                id: r.id,
            })
            .collect())
    }

    async fn unhealthy_instances(&self) -> Result<Vec<InstanceHealth>, CloudError> {
        crate::interruption::status::unhealthy_instances(&self.clients)
            .await
            .map_err(|e| {
                if e.code.as_deref() == Some("UnauthorizedOperation") {
                    AwsError {
                        message: format!(
                            "{}; the controller's IAM policy needs ec2:DescribeInstanceStatus for instance health checks",
                            e.message
                        ),
                        ..e
                    }
                    .into()
                } else {
                    e.into()
                }
            })
    }

    /// ARC GetManagedResource for the cluster, only with `ENABLE_ZONAL_SHIFT`.
    async fn zonal_shifts(&self) -> Result<Vec<String>, CloudError> {
        Ok(self.refresh_zonal_shifts().await?.into_iter().collect())
    }

    fn observe_with(&self, observer: Arc<dyn ProviderObserver>) {
        self.observer.set(observer);
    }
}

/// What the NodePools using `class` (by `nodeClassRef` name, not being deleted) ask of its
/// nodes, sorted by name. A pool that does not convert is left out and logged: it cannot
/// launch either.
fn pool_demands(class: &EC2NodeClass, nodepools: &[NodePool]) -> Vec<PoolDemand> {
    let name = class_name(class);
    let mut out: Vec<PoolDemand> = nodepools
        .iter()
        .filter(|np| {
            np.spec.template.spec.node_class_ref.name == name
                && np.metadata.deletion_timestamp.is_none()
        })
        .filter_map(|np| match nodewright_api::to_core::nodepool(np) {
            Ok(pool) => Some(PoolDemand::new(&pool)),
            Err(errors) => {
                tracing::debug!(nodeclass = %name, nodepool = %np.metadata.name.as_deref().unwrap_or(""), errors = errors.len(), "NodePool left out of validation: it does not convert");
                None
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use nodewright_api::aws::common::SubnetStatus;

    use super::*;

    fn subnet(id: &str, zone: Option<&str>) -> SubnetStatus {
        SubnetStatus {
            id: id.into(),
            zone: zone.map(str::to_string),
            zone_id: zone.map(|z| format!("use1-{z}")),
            extra: Default::default(),
        }
    }

    #[test]
    fn zones_come_from_the_status_subnets_once_each() {
        let status = EC2NodeClassStatus {
            subnets: Some(vec![
                subnet("s-1", Some("us-east-1b")),
                subnet("s-2", Some("us-east-1a")),
                subnet("s-3", Some("us-east-1b")),
                subnet("s-4", None),
            ]),
            ..Default::default()
        };
        let names: Vec<String> = status_zones(Some(&status))
            .into_iter()
            .map(|z| z.name)
            .collect();
        assert_eq!(names, vec!["us-east-1a", "us-east-1b"]);
        assert!(status_zones(None).is_empty());
    }

    #[test]
    fn a_claim_stamped_at_launch_drifts_once_its_class_changes() {
        let mut class = EC2NodeClass::default();
        class.spec.role = Some("r".into());
        let stamp = hash_annotations(&class);
        assert_eq!(stamp[HASH_ANNOTATION], nodeclass_hash(&class));
        assert_eq!(stamp[HASH_VERSION_ANNOTATION], HASH_VERSION);
        let mut claim = NodeClaim::default();
        claim.metadata.annotations = Some(stamp.into_iter().collect());
        // The class object itself need not carry the annotation yet.
        assert_eq!(
            drift::static_drift(&claim, &with_current_hash(&class)),
            None
        );
        class.spec.role = Some("other".into());
        assert_eq!(
            drift::static_drift(&claim, &with_current_hash(&class)),
            Some(drift::DriftReason::NodeClass)
        );
    }

    #[test]
    fn the_current_hash_replaces_a_stale_annotation() {
        let mut class = EC2NodeClass::default();
        class.spec.role = Some("r".into());
        class.metadata.annotations = Some(
            [(HASH_ANNOTATION.to_string(), "stale".to_string())]
                .into_iter()
                .collect(),
        );
        let c = with_current_hash(&class);
        let ann = c.metadata.annotations.unwrap();
        assert_eq!(ann[HASH_ANNOTATION], nodeclass_hash(&class));
        assert_eq!(ann[HASH_VERSION_ANNOTATION], HASH_VERSION);
    }
}
