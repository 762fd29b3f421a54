//! The nodewright simulator: a simulated EKS cluster and cloud on a virtual clock.
//!
//! The controller's own decisions run here at the controller's own cadence: pending pods are
//! batched by [`nodewright_core::cadence::Batcher`], the provisioner places them, the
//! disruption loop follows [`nodewright_core::cadence::DisruptionCadence`] and plans with
//! [`nodewright_core::disruption::plan::plan`]. What the simulator adds is the world around
//! them: the controller's simulated cloud ([`nodewright_cloud_sim::Fleet`], set up by
//! [`cloud`]) with launch and registration delays and injected faults, the
//! kube-scheduler binding pods to Ready nodes ([`kube_scheduler`]), workload controllers
//! ([`cluster`]), scenario files ([`scenario`]) and reports ([`report`]).

pub mod bench;
pub mod cloud;
pub mod cluster;
pub mod demo;
pub mod disruption_budget;
pub mod engine;
pub mod events;
pub mod invariants;
pub mod kube_scheduler;
pub mod load;
pub mod provision;
pub mod report;
pub mod scenario;
pub mod volumes;

use nodewright_aws_model::Catalog;

pub use provision::CoreProvisioner;
pub use report::RunReport;

/// Runs `scenario` on the embedded catalog with the core scheduler; `progress` hears the share
/// of virtual time done.
pub fn run(
    scenario: &scenario::Scenario,
    catalog: &Catalog,
    progress: &mut dyn FnMut(f64),
) -> Result<RunReport, scenario::ScenarioError> {
    let input = load::engine_input(scenario, catalog)?;
    let provisioner = CoreProvisioner::default();
    Ok(engine::Engine::new(input, &provisioner).run(progress))
}
