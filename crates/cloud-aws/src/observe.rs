//! Where the provider reports what it observes: each error CreateFleet returns becomes one
//! [`LaunchFailure`] (upstream's `karpenter_cloudprovider_instance_launch_failures_total{zone,
//! zone_id, capacity_type, reason}`), each refused TerminateInstances one
//! [`TerminationFailure`], each batch of merged calls one [`BatchFlushed`], and each launch
//! template made to exist the size of its user data; all are handed to the observer the
//! controller registered.

use std::sync::{Arc, RwLock};

use nodewright_cloud::{BatchFlushed, LaunchFailure, ProviderObserver, TerminationFailure};

use crate::launch::{FleetCall, FleetFailure};
use crate::nodeclass::ResolvedNodeClass;

/// The observer slot; empty until the controller registers one. Clones share the slot, so the
/// batchers built with the provider see the observer registered later.
#[derive(Clone, Default)]
pub struct Observer {
    inner: Arc<RwLock<Option<Arc<dyn ProviderObserver>>>>,
}

impl Observer {
    pub fn set(&self, observer: Arc<dyn ProviderObserver>) {
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = Some(observer);
    }

    fn get(&self) -> Option<Arc<dyn ProviderObserver>> {
        self.inner.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn termination_failed(&self, failure: &TerminationFailure) {
        if let Some(o) = self.get() {
            o.termination_failed(failure);
        }
    }

    pub fn batch_flushed(&self, batch: &BatchFlushed) {
        if let Some(o) = self.get() {
            o.batch_flushed(batch);
        }
    }

    pub fn user_data_rendered(&self, nodeclass: &str, bytes: usize) {
        if let Some(o) = self.get() {
            o.user_data_rendered(nodeclass, bytes);
        }
    }

    /// Reports every error of one CreateFleet answer.
    pub fn fleet_errors(
        &self,
        call: &FleetCall,
        errors: &[FleetFailure],
        resolved: &ResolvedNodeClass,
    ) {
        let Some(observer) = self.get() else { return };
        for f in launch_failures(call, errors, resolved) {
            observer.launch_failed(&f);
        }
    }
}

/// One [`LaunchFailure`] per fleet error. The zone is the error's own, else its subnet's; the
/// zone id comes from the class's subnets.
pub fn launch_failures(
    call: &FleetCall,
    errors: &[FleetFailure],
    resolved: &ResolvedNodeClass,
) -> Vec<LaunchFailure> {
    errors
        .iter()
        .map(|e| {
            let subnet = resolved
                .subnets
                .iter()
                .find(|s| e.subnet_id.as_deref() == Some(s.id.as_str()));
            let zone = e
                .zone
                .clone()
                .filter(|z| !z.is_empty())
                .or_else(|| subnet.map(|s| s.zone.clone()))
                .unwrap_or_default();
            let zone_id = resolved
                .subnets
                .iter()
                .find(|s| s.zone == zone)
                .and_then(|s| s.zone_id.clone())
                .unwrap_or_default();
            LaunchFailure {
                zone,
                zone_id,
                capacity_type: call.capacity_type.as_str().to_string(),
                reason: e.code.clone(),
            }
        })
        .collect()
}
