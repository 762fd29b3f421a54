//! The scenario's actions as the engine carries them out: objects applied (workloads, NodePools,
//! DaemonSets, PDBs and the rest), scaled, deleted, and the faults it injects.

use super::{Engine, SimAction};

impl Engine<'_> {
    pub(super) fn apply(&mut self, action: SimAction) {
        self.cluster.changed();
        match action {
            SimAction::ApplyNodePool(pool, types) => {
                self.log(
                    "apply",
                    format!("NodePool/{} ({} instance types)", pool.name, types.len()),
                );
                self.cluster.catalog.insert(pool.name.clone(), types);
                self.cluster.nodepools.retain(|p| p.name != pool.name);
                self.cluster.nodepools.push(pool);
                self.cluster.nodepools.sort_by(|a, b| a.name.cmp(&b.name));
            }
            SimAction::ApplyWorkload(w) => {
                self.log(
                    "apply",
                    format!(
                        "{:?}/{}/{} replicas={}",
                        w.kind, w.namespace, w.name, w.replicas
                    ),
                );
                let key = (w.namespace.clone(), w.name.clone());
                match self.cluster.workloads.get_mut(&key) {
                    Some(existing) => existing.update_from(w),
                    None => {
                        self.cluster.workloads.insert(key, w);
                    }
                }
            }
            SimAction::ApplyDaemonSet(ds) => {
                self.log("apply", format!("DaemonSet/{}/{}", ds.namespace, ds.name));
                self.cluster
                    .daemonsets
                    .retain(|d| !(d.namespace == ds.namespace && d.name == ds.name));
                self.cluster.daemonsets.push(ds);
            }
            SimAction::ApplyPdb(b) => {
                self.log("apply", format!("PodDisruptionBudget/{}", b.key()));
                self.cluster
                    .pdbs
                    .insert((b.namespace().to_string(), b.name().to_string()), *b);
            }
            SimAction::ApplyStorageClass(sc) => {
                self.log(
                    "apply",
                    format!(
                        "StorageClass/{} ({}, {})",
                        sc.name, sc.provisioner, sc.volume_binding_mode
                    ),
                );
                self.cluster.storage_classes.insert(sc.name.clone(), sc);
            }
            SimAction::Delete(kind, ns, name) => self.delete(&kind, &ns, &name),
            SimAction::Scale {
                namespace,
                name,
                replicas,
            } => match self
                .cluster
                .workloads
                .get_mut(&(namespace.clone(), name.clone()))
            {
                Some(w) => {
                    let from = w.replicas;
                    w.replicas = replicas;
                    self.log(
                        "scale",
                        format!("{namespace}/{name}: {from} -> {replicas} replicas"),
                    );
                }
                None => self.log(
                    "warning",
                    format!("scale: no Deployment or StatefulSet {namespace}/{name}"),
                ),
            },
            SimAction::Interrupt(target) => self.interrupt(target),
            SimAction::Advance => {}
        }
    }

    fn delete(&mut self, kind: &str, ns: &str, name: &str) {
        match kind {
            "NodePool" => {
                self.cluster.nodepools.retain(|p| p.name != name);
                let claims: Vec<String> = self
                    .cluster
                    .claims()
                    .values()
                    .filter(|c| c.is_running() && c.claim.nodepool == name)
                    .map(|c| c.claim.name.clone())
                    .collect();
                for c in claims {
                    self.remove_claim(&c);
                }
            }
            "PodDisruptionBudget" => {
                self.cluster
                    .pdbs
                    .remove(&(ns.to_string(), name.to_string()));
            }
            "StorageClass" => {
                self.cluster.storage_classes.remove(name);
            }
            "DaemonSet" => {
                self.cluster
                    .daemonsets
                    .retain(|d| !(d.namespace == ns && d.name == name));
                let pods: Vec<String> = self
                    .cluster
                    .pods()
                    .values()
                    .filter(|p| {
                        p.is_daemonset_pod() && p.owner.as_ref().is_some_and(|o| o.name == name)
                    })
                    .map(|p| p.key())
                    .collect();
                for p in pods {
                    self.cluster.remove_pod(&p, self.now);
                }
            }
            _ => {
                let removed = self
                    .cluster
                    .workloads
                    .remove(&(ns.to_string(), name.to_string()));
                if removed.is_none() {
                    self.log("warning", format!("delete: no {kind} {ns}/{name}"));
                    return;
                }
                let pods: Vec<String> = self
                    .cluster
                    .pods()
                    .values()
                    .filter(|p| {
                        p.namespace == ns
                            && (p.owner.as_ref().is_some_and(|o| o.name == name)
                                || (p.owner.is_none() && p.name == name))
                    })
                    .map(|p| p.key())
                    .collect();
                for p in pods {
                    self.cluster.remove_pod(&p, self.now);
                }
            }
        }
        self.log(
            "delete",
            format!("{kind}/{ns}{}{name}", if ns.is_empty() { "" } else { "/" }),
        );
    }
}
