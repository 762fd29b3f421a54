//! v1 NodePool → `nodewright_core::model::NodePool`: defaults applied, durations and
//! quantities parsed into integers, enums into core's types. Anything that does not parse is
//! an error with its field path (validation catches all of these first; this never guesses).

use std::time::Duration;

use nodewright_core::model::{
    Budget, BudgetNodes, ConsolidationPolicy, Disruption, DisruptionReason, NodeClaimTemplate,
    NodeClassRef, NodePool,
};
use nodewright_core::requirements::{Operator, Requirement};
use nodewright_core::resources::Resources;
use nodewright_core::taints::{Taint, TaintEffect};

use crate::error::{FieldError, Path};
use crate::quantity;
use crate::v1::nodepool::defaults;
use crate::v1::shared::parse_duration;
use crate::v1::{self, NillableDuration};

pub fn nodepool(np: &v1::NodePool) -> Result<NodePool, Vec<FieldError>> {
    let mut errs = Vec::new();
    let spec = Path::root("spec");
    let tspec = spec.field("template").field("spec");
    let t = &np.spec.template;
    let meta = t.metadata.clone().unwrap_or_default();

    let template = NodeClaimTemplate {
        labels: meta.labels.unwrap_or_default(),
        annotations: meta.annotations.unwrap_or_default(),
        taints: taints(t.spec.taints.as_deref(), &tspec.field("taints"), &mut errs),
        startup_taints: taints(
            t.spec.startup_taints.as_deref(),
            &tspec.field("startupTaints"),
            &mut errs,
        ),
        requirements: requirements(
            &t.spec.requirements,
            &tspec.field("requirements"),
            &mut errs,
        ),
        node_class: NodeClassRef {
            group: t.spec.node_class_ref.group.clone(),
            kind: t.spec.node_class_ref.kind.clone(),
            name: t.spec.node_class_ref.name.clone(),
        },
        expire_after: nillable(
            t.spec.expire_after.as_ref(),
            defaults::EXPIRE_AFTER,
            &tspec.field("expireAfter"),
            &mut errs,
        ),
        termination_grace_period: t.spec.termination_grace_period.as_deref().and_then(|d| {
            parse_duration(d)
                .map_err(|e| errs.push(tspec.field("terminationGracePeriod").error(e)))
                .ok()
        }),
    };
    let disruption = disruption(
        np.spec.disruption.as_ref(),
        &spec.field("disruption"),
        &mut errs,
    );
    let mut limits = Resources::new();
    for (name, q) in np.spec.limits.iter().flatten() {
        match quantity::parse_resource(name, &q.text()) {
            Ok(v) => limits.set_explicit(name, v),
            Err(e) => errs.push(spec.field("limits").key(name).error(e.to_string())),
        }
    }
    // Without a status (a manifest read from a file) the pool is taken as ready; a stored
    // NodePool is ready only when its Ready condition says so.
    let ready = np
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_none_or(|c| c.status == "True");
    // The template's current hash, not the annotation on the pool (which lags an edit until
    // the controller rewrites it), so a claim stamped at creation is never compared with a
    // stale value.
    let hash = crate::v1::nodepool_hash::nodepool_hash(np);
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(NodePool {
        name: np.metadata.name.clone().unwrap_or_default(),
        weight: np.spec.weight.unwrap_or(0),
        template,
        disruption,
        limits,
        replicas: np.spec.replicas,
        hash,
        ready,
    })
}

fn nillable(
    d: Option<&NillableDuration>,
    default: &str,
    path: &Path,
    errs: &mut Vec<FieldError>,
) -> Option<Duration> {
    let d = d.cloned().unwrap_or_else(|| NillableDuration::new(default));
    d.duration().unwrap_or_else(|e| {
        errs.push(path.error(e));
        None
    })
}

pub(crate) fn taints(
    list: Option<&[v1::Taint]>,
    path: &Path,
    errs: &mut Vec<FieldError>,
) -> Vec<Taint> {
    let mut out = Vec::new();
    for (i, t) in list.unwrap_or_default().iter().enumerate() {
        match TaintEffect::parse(&t.effect) {
            Some(effect) => out.push(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect,
            }),
            None => errs.push(
                path.index(i)
                    .field("effect")
                    .error(format!("unsupported taint effect {:?}", t.effect)),
            ),
        }
    }
    out
}

pub(crate) fn requirements(
    reqs: &[v1::NodeSelectorRequirementWithMinValues],
    path: &Path,
    errs: &mut Vec<FieldError>,
) -> Vec<Requirement> {
    let mut out = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let Some(operator) = Operator::parse(&r.operator) else {
            errs.push(
                path.index(i)
                    .field("operator")
                    .error(format!("unsupported operator {:?}", r.operator)),
            );
            continue;
        };
        let min_values = match r.min_values.map(u32::try_from) {
            None => None,
            Some(Ok(m)) => Some(m),
            Some(Err(_)) => {
                errs.push(
                    path.index(i)
                        .field("minValues")
                        .error("must be between 1 and 50"),
                );
                continue;
            }
        };
        out.push(Requirement {
            key: r.key.clone(),
            operator,
            values: r.values.clone().unwrap_or_default(),
            min_values,
        });
    }
    out
}

fn disruption(d: Option<&v1::Disruption>, path: &Path, errs: &mut Vec<FieldError>) -> Disruption {
    let mut out = Disruption::default();
    let Some(d) = d else { return out };
    out.consolidation_policy = match d.consolidation_policy.as_deref() {
        None | Some("WhenEmptyOrUnderutilized") => ConsolidationPolicy::WhenEmptyOrUnderutilized,
        Some("WhenEmpty") => ConsolidationPolicy::WhenEmpty,
        Some("Balanced") => ConsolidationPolicy::Balanced,
        Some(other) => {
            errs.push(
                path.field("consolidationPolicy")
                    .error(format!("unsupported policy {other:?}")),
            );
            ConsolidationPolicy::WhenEmptyOrUnderutilized
        }
    };
    out.consolidate_after = nillable(
        d.consolidate_after.as_ref(),
        defaults::CONSOLIDATE_AFTER,
        &path.field("consolidateAfter"),
        errs,
    );
    if let Some(budgets) = &d.budgets {
        out.budgets = budgets
            .iter()
            .enumerate()
            .filter_map(|(i, b)| budget(b, &path.field("budgets").index(i), errs))
            .collect();
    }
    out
}

fn budget(b: &v1::Budget, path: &Path, errs: &mut Vec<FieldError>) -> Option<Budget> {
    let text = b.nodes.as_deref().unwrap_or(defaults::BUDGET_NODES);
    let nodes = match text.strip_suffix('%') {
        Some(p) => p
            .parse()
            .ok()
            .filter(|p| *p <= 100)
            .map(BudgetNodes::Percent),
        None => text.parse().ok().map(BudgetNodes::Count),
    };
    let Some(nodes) = nodes else {
        errs.push(
            path.field("nodes")
                .error(format!("invalid value {text:?}: a count or a percentage")),
        );
        return None;
    };
    let duration = match b.duration.as_deref().map(parse_duration) {
        None => None,
        Some(Ok(d)) => Some(d),
        Some(Err(e)) => {
            errs.push(path.field("duration").error(e));
            return None;
        }
    };
    let mut reasons = Vec::new();
    for (i, r) in b.reasons.iter().flatten().enumerate() {
        match r.as_str() {
            "Empty" => reasons.push(DisruptionReason::Empty),
            "Underutilized" => reasons.push(DisruptionReason::Underutilized),
            "Drifted" => reasons.push(DisruptionReason::Drifted),
            other => errs.push(
                path.field("reasons")
                    .index(i)
                    .error(format!("unsupported reason {other:?}")),
            ),
        }
    }
    Some(Budget {
        nodes,
        schedule: b.schedule.clone(),
        duration,
        reasons,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_testkit::json::merge;
    use nodewright_testkit::k8s;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> v1::NodePool {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn defaults_and_parsing() {
        let np = parse(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "a"},
            "spec": {
                "template": {"spec": {
                    "requirements": [{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"], "minValues": 1}],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                    "taints": [{"key": "k", "effect": "NoSchedule"}],
                    "terminationGracePeriod": "1h"
                }},
                "limits": {"cpu": 1000, "memory": "1Gi"},
                "weight": 7
            }
        }));
        let core = nodepool(&np).unwrap();
        assert_eq!(core.name, "a");
        assert_eq!(core.weight, 7);
        assert_eq!(
            core.template.expire_after,
            Some(Duration::from_secs(720 * 3600))
        );
        assert_eq!(
            core.template.termination_grace_period,
            Some(Duration::from_secs(3600))
        );
        assert_eq!(core.template.requirements[0].operator, Operator::Gte);
        assert_eq!(core.template.requirements[0].min_values, Some(1));
        assert_eq!(core.template.taints[0].effect, TaintEffect::NoSchedule);
        assert_eq!(core.limits.get("cpu"), 1_000_000);
        assert_eq!(core.limits.get("memory"), 1 << 30);
        assert_eq!(core.disruption, Disruption::default());
        assert!(core.ready);
    }

    #[test]
    fn never_budgets_and_readiness() {
        let np = parse(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "a"},
            "spec": {
                "template": {"spec": {
                    "requirements": [],
                    "nodeClassRef": {"group": "g", "kind": "k", "name": "n"},
                    "expireAfter": "Never"
                }},
                "disruption": {
                    "consolidateAfter": "Never", "consolidationPolicy": "WhenEmpty",
                    "budgets": [{"nodes": "20%", "schedule": "@daily", "duration": "1h30m", "reasons": ["Empty"]}, {"nodes": "3"}]
                }
            },
            "status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
        }));
        let core = nodepool(&np).unwrap();
        assert_eq!(core.template.expire_after, None);
        assert_eq!(core.disruption.consolidate_after, None);
        assert_eq!(
            core.disruption.consolidation_policy,
            ConsolidationPolicy::WhenEmpty
        );
        assert_eq!(core.disruption.budgets[0].nodes, BudgetNodes::Percent(20));
        assert_eq!(
            core.disruption.budgets[0].duration,
            Some(Duration::from_secs(5400))
        );
        assert_eq!(
            core.disruption.budgets[0].reasons,
            [DisruptionReason::Empty]
        );
        assert_eq!(core.disruption.budgets[1].nodes, BudgetNodes::Count(3));
        assert!(!core.ready);
    }

    #[test]
    fn bad_values_are_errors_with_paths() {
        let np = parse(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "a"},
            "spec": {
                "template": {"spec": {
                    "requirements": [{"key": "k", "operator": "Near"}],
                    "nodeClassRef": {"group": "g", "kind": "k", "name": "n"}
                }},
                "limits": {"cpu": "lots"}
            }
        }));
        let errs: Vec<String> = nodepool(&np)
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].starts_with("spec.template.spec.requirements[0].operator: "));
        assert!(errs[1].starts_with("spec.limits[cpu]: "));
    }

    #[test]
    fn a_zero_limit_stays_a_limit() {
        let np = merge(
            k8s::nodepool("none"),
            json!({"spec": {"limits": {"cpu": 0}}}),
        );
        let core = nodepool(&parse(np)).unwrap();
        assert!(core.limits.contains("cpu"));
        assert_eq!(core.limits.get("cpu"), 0);
    }
}
