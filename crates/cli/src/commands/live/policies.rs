//! The controller settings that change what `explain` answers: `FEATURE_GATES` (spot-to-spot
//! consolidation), `PREFERENCE_POLICY` and `MIN_VALUES_POLICY`. A flag wins; a setting with no
//! flag comes from the env of the controller's Deployment in the cluster, so `explain` answers
//! as the running controller decides; with neither, the controller's defaults.

use std::str::FromStr;

use anyhow::{Context, bail};
use clap::Args;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use nodewright_controller::settings::{FeatureGates, Settings};

use super::ClusterArgs;

/// The label the chart puts on the controller's Deployment (with its default `nameOverride`).
const CONTROLLER_SELECTOR: &str = "app.kubernetes.io/name=karpenter";

#[derive(Args, Clone, Debug, Default)]
pub struct PolicyArgs {
    /// As the controller's `FEATURE_GATES` (of which `SpotToSpotConsolidation` changes an
    /// answer).
    #[arg(long, value_name = "GATES", value_parser = FeatureGates::from_str)]
    pub feature_gates: Option<FeatureGates>,
    /// As the controller's `PREFERENCE_POLICY`.
    #[arg(long, value_parser = ["Respect", "Ignore"])]
    pub preference_policy: Option<String>,
    /// As the controller's `MIN_VALUES_POLICY`.
    #[arg(long, value_parser = ["Strict", "BestEffort"])]
    pub min_values_policy: Option<String>,
    /// The controller's Deployment, whose container env gives each setting not set by a flag.
    /// Unset: the one Deployment labelled `app.kubernetes.io/name=karpenter`, if there is one.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub controller: Option<String>,
}

/// The settings `explain` answers under, and where they came from.
pub struct Policies {
    pub settings: Settings,
    /// `flags`, `defaults`, or the Deployment read (`Deployment NS/NAME`), for the output.
    pub source: String,
}

impl Policies {
    /// One line naming the settings, for the top of an answer.
    pub fn line(&self) -> String {
        let s = &self.settings;
        format!(
            "controller settings ({}): SpotToSpotConsolidation={}, PREFERENCE_POLICY={}, MIN_VALUES_POLICY={}",
            self.source,
            s.feature_gates.spot_to_spot_consolidation,
            s.preference_policy,
            s.min_values_policy
        )
    }
}

/// The flags of `args` over the env of the controller's Deployment over the defaults.
pub async fn read(cluster: &ClusterArgs, args: &PolicyArgs) -> anyhow::Result<Policies> {
    let all_flags = args.feature_gates.is_some()
        && args.preference_policy.is_some()
        && args.min_values_policy.is_some();
    let found = if all_flags {
        None
    } else {
        controller_env(cluster, args.controller.as_deref()).await?
    };
    let mut settings = Settings::default();
    let source = match found {
        Some((name, env)) => {
            apply_env(&mut settings, &env)
                .with_context(|| format!("reading the settings of Deployment {name}"))?;
            format!("Deployment {name}")
        }
        None if args.feature_gates.is_some()
            || args.preference_policy.is_some()
            || args.min_values_policy.is_some() =>
        {
            "flags".to_string()
        }
        None => "defaults: no controller Deployment found".to_string(),
    };
    if let Some(g) = args.feature_gates {
        settings.feature_gates = g;
    }
    if let Some(p) = &args.preference_policy {
        settings.preference_policy = p.clone();
    }
    if let Some(p) = &args.min_values_policy {
        settings.min_values_policy = p.clone();
    }
    Ok(Policies { settings, source })
}

/// Sets what `env` (the controller container's plain `value`s) says of the three settings.
fn apply_env(settings: &mut Settings, env: &[(String, String)]) -> anyhow::Result<()> {
    for (name, value) in env {
        match name.as_str() {
            "FEATURE_GATES" => {
                settings.feature_gates = FeatureGates::from_str(value)
                    .map_err(|e| anyhow::anyhow!("env FEATURE_GATES: {e}"))?
            }
            "PREFERENCE_POLICY" => {
                settings.preference_policy = one_of(name, value, &["Respect", "Ignore"])?
            }
            "MIN_VALUES_POLICY" => {
                settings.min_values_policy = one_of(name, value, &["Strict", "BestEffort"])?
            }
            _ => {}
        }
    }
    Ok(())
}

fn one_of(name: &str, value: &str, allowed: &[&str]) -> anyhow::Result<String> {
    if !allowed.contains(&value) {
        bail!("env {name}: {value:?} is not one of {}", allowed.join(", "));
    }
    Ok(value.to_string())
}

/// The named Deployment (or the one the chart's label finds) and the plain env values of its
/// first container; `None` when no Deployment carries the label.
async fn controller_env(
    cluster: &ClusterArgs,
    named: Option<&str>,
) -> anyhow::Result<Option<(String, Vec<(String, String)>)>> {
    let client = super::client(cluster.kubeconfig.as_deref()).await?;
    let deployment = match named {
        Some(key) => {
            let Some((ns, name)) = key.split_once('/') else {
                bail!("--controller {key:?}: expected NAMESPACE/NAME");
            };
            let api: Api<Deployment> = Api::namespaced(client, ns);
            api.get(name)
                .await
                .with_context(|| format!("reading Deployment {key}"))?
        }
        None => {
            let api: Api<Deployment> = Api::all(client);
            let mut list = api
                .list(&ListParams::default().labels(CONTROLLER_SELECTOR))
                .await
                .context("listing the controller's Deployment")?
                .items;
            match list.len() {
                0 => return Ok(None),
                1 => list.remove(0),
                n => bail!(
                    "{n} Deployments are labelled {CONTROLLER_SELECTOR}: name one with --controller NAMESPACE/NAME"
                ),
            }
        }
    };
    let name = format!(
        "{}/{}",
        deployment.metadata.namespace.as_deref().unwrap_or_default(),
        deployment.metadata.name.as_deref().unwrap_or_default()
    );
    let env = deployment
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.env)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| Some((e.name, e.value?)))
        .collect();
    Ok(Some((name, env)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_sets_the_three_settings_and_names_a_bad_value() {
        let mut s = Settings::default();
        let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        apply_env(
            &mut s,
            &env(&[
                ("FEATURE_GATES", "SpotToSpotConsolidation=true"),
                ("PREFERENCE_POLICY", "Ignore"),
                ("MIN_VALUES_POLICY", "BestEffort"),
                ("CLUSTER_NAME", "x"),
            ]),
        )
        .unwrap();
        assert!(s.consolidation_features().spot_to_spot_consolidation);
        let o = s.scheduling_options();
        assert!(o.ignore_preferences && o.min_values_best_effort);

        let err = apply_env(&mut s, &env(&[("MIN_VALUES_POLICY", "Loose")])).unwrap_err();
        assert!(
            err.to_string().contains("MIN_VALUES_POLICY: \"Loose\""),
            "{err}"
        );
        let err = apply_env(&mut s, &env(&[("FEATURE_GATES", "Nope=true")])).unwrap_err();
        assert!(err.to_string().contains("FEATURE_GATES"), "{err}");
    }
}
