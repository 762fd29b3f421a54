//! Whether a command's replacements, sized on the re-check's snapshot, still fit the instance
//! types planned for them.
//!
//! A replace command re-checked after its validation delay may find its targets' pods fit
//! elsewhere now (the re-check accepts that: the replacement is then more than needed, not
//! less). Its replacement's requests are taken from that fresh snapshot, falling back to the
//! sum of the moving pods when the solve made no new claim, while its instance types are the
//! ones planned. If a target took more pods in between, the requests can outgrow every
//! planned type: the cloud then refuses the launch, the claim times out unlaunched after five
//! minutes and the command is rolled back. Such a command is rejected at the re-check instead.

use nodewright_core::disruption::command::Command;
use nodewright_core::model::Snapshot;
use nodewright_core::resources::Resources;

/// The first replacement whose `requests` no instance type it may launch as can hold, as a
/// reason a person can read.
pub fn outgrown(snap: &Snapshot, command: &Command, requests: &[Resources]) -> Option<String> {
    command
        .replacements
        .iter()
        .zip(requests)
        .find_map(|(r, req)| {
            let types = snap.instance_types.get(&r.nodepool)?;
            let fits = types
                .iter()
                .filter(|it| r.instance_types.contains(&it.name))
                .any(|it| req.fits_in(&it.allocatable()));
            (!fits).then(|| {
                let short: Vec<&str> = r
                    .instance_types
                    .iter()
                    .take(3)
                    .map(String::as_str)
                    .collect();
                format!(
                    "the pods now need more than the planned replacement ({}{}) holds",
                    short.join(", "),
                    if r.instance_types.len() > 3 {
                        ", ..."
                    } else {
                        ""
                    }
                )
            })
        })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use nodewright_core::disruption::command::{Method, Replacement, Target};
    use nodewright_core::model::{CapacityType, InstanceType, Offering};
    use nodewright_core::resources::{CPU, MEMORY, PODS};

    use super::*;

    fn it(name: &str, cpu: i64) -> InstanceType {
        InstanceType {
            name: name.into(),
            capacity: Resources::new()
                .with(CPU, cpu)
                .with(MEMORY, 8 << 30)
                .with(PODS, 110),
            offerings: vec![Offering {
                zone: "a".into(),
                capacity_type: CapacityType::OnDemand,
                price: cpu as f64 / 10_000.0,
                available: true,
                reservation_id: None,
                reservation_capacity: None,
            }],
            requirements: Vec::new(),
            overhead: Default::default(),
        }
    }

    fn replace_with(types: &[&str]) -> Command {
        Command::new(
            Method::SingleNodeConsolidation,
            vec![Target {
                node: "n1".into(),
                nodeclaim: "c1".into(),
                nodepool: "default".into(),
                instance_type: "large".into(),
                zone: "a".into(),
                capacity_type: "on-demand".into(),
                price: 0.8,
                pods: Vec::new(),
            }],
            vec![Replacement {
                nodepool: "default".into(),
                requirements: Vec::new(),
                instance_types: types.iter().map(|t| t.to_string()).collect(),
                price: 0.1,
            }],
        )
    }

    #[test]
    fn requests_beyond_every_planned_type_are_named() {
        let snap = Snapshot {
            instance_types: [(
                "default".to_string(),
                Arc::new(vec![it("small", 2000), it("large", 8000)]),
            )]
            .into_iter()
            .collect(),
            ..Snapshot::default()
        };
        let cpu = |m: i64| vec![Resources::new().with(CPU, m).with(PODS, 3)];
        let small = replace_with(&["small"]);
        assert_eq!(outgrown(&snap, &small, &cpu(1500)), None);
        let why = outgrown(&snap, &small, &cpu(3000)).unwrap();
        assert!(why.contains("small"), "{why}");
        // A type the pool has that the command did not plan does not count.
        assert_eq!(
            outgrown(&snap, &replace_with(&["small", "large"]), &cpu(3000)),
            None
        );
        assert!(outgrown(&snap, &replace_with(&[]), &cpu(10)).is_some());
    }
}
