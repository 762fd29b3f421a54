//! The world around the controller, stepped by the bench: the Deployments' pods as their
//! ReplicaSets create them, the kubelets registering the simulated cloud's instances, a
//! stand-in kube-scheduler binding each pod where it was nominated, and ReplicaSets replacing
//! the pods that go.

use super::*;

pub(super) struct Deploy {
    pub(super) name: &'static str,
    pub(super) cpu: &'static str,
    pub(super) memory: &'static str,
    pub(super) spread: bool,
}

pub(super) const DEPLOYS: [Deploy; 4] = [
    Deploy {
        name: "inflate",
        cpu: "1",
        memory: "1536Mi",
        spread: false,
    },
    Deploy {
        name: "small",
        cpu: "250m",
        memory: "256Mi",
        spread: false,
    },
    Deploy {
        name: "large",
        cpu: "3",
        memory: "8Gi",
        spread: false,
    },
    Deploy {
        name: "spread",
        cpu: "500m",
        memory: "1Gi",
        spread: true,
    },
];

/// The Deployment of the `i`th pod: `spread_percent` in the spread one, the rest half
/// `inflate`, three tenths `small`, a fifth `large`.
pub(super) fn deploy_of(i: usize, spread_percent: usize) -> usize {
    if i % 100 < spread_percent {
        return 3;
    }
    match i % 10 {
        0..=4 => 0,
        5..=7 => 1,
        _ => 2,
    }
}

pub(super) fn pod_json(name: &str, d: &Deploy, node: Option<&str>) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("pod-{name}"),
            "labels": {"app": d.name},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": d.name,
                "uid": format!("rs-{}", d.name), "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "pause",
            "resources": {"requests": {"cpu": d.cpu, "memory": d.memory}}}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    });
    if d.spread {
        p["spec"]["topologySpreadConstraints"] = json!([{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": d.name}}}]);
    }
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
        p["status"] = json!({"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]});
    }
    p
}

/// The world around the controller: the API server's store, the cloud, the kubelets (node
/// agent) and kube-scheduler.
pub(super) struct World {
    pub(super) api: Arc<MemoryApi>,
    pub(super) state: SharedState,
    pub(super) sim: Arc<SimCloud>,
    pub(super) clock: Clock,
    pub(super) spread_percent: usize,
    /// Live pods by name, with their Deployment.
    pub(super) pods: BTreeMap<String, usize>,
    pub(super) bound: BTreeSet<String>,
    pub(super) next: usize,
    pub(super) registered: BTreeSet<String>,
}

impl World {
    pub(super) fn create_pod(&mut self, deploy: usize) {
        let name = format!("{}-{:06}", DEPLOYS[deploy].name, self.next);
        self.next += 1;
        self.api
            .put_value(Kind::Pod, pod_json(&name, &DEPLOYS[deploy], None));
        self.pods.insert(name, deploy);
    }

    pub(super) fn create_next(&mut self) {
        let d = deploy_of(self.next, self.spread_percent);
        self.create_pod(d);
    }

    /// The kubelets: a Node for every instance that has been running for the registration
    /// delay, and none for instances that are gone.
    pub(super) fn agent(&mut self) {
        let instances = self.sim.instances();
        let claims: BTreeMap<String, _> = {
            let s = lock(&self.state);
            instances
                .iter()
                .filter(|i| {
                    !self
                        .registered
                        .contains(&kwok::node_name(&i.instance.provider_id))
                })
                .filter_map(|i| i.instance.nodeclaim())
                .filter_map(|c| s.nodeclaims.get(c).map(|o| (c.to_string(), o.clone())))
                .collect()
        };
        let actions = kwok::plan(
            &instances,
            &claims,
            &self.registered,
            tokio::time::Instant::now(),
            kwok_registration_delay(),
            self.clock.now_time().0,
        );
        for a in actions {
            match a {
                Action::Register(node) => {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    self.api.put(Object::Node(node));
                    self.registered.insert(name);
                }
                Action::Delete(name) => {
                    let _ = self.api.delete(Kind::Node, &name);
                    self.registered.remove(&name);
                }
                Action::Heartbeat(_) => {}
            }
        }
    }

    /// kube-scheduler following the nominations: a pending pod nominated to a claim whose
    /// Node is Ready and untainted is bound there.
    pub(super) fn schedule(&mut self) {
        let now = self.clock.now();
        let binds: Vec<(String, String)> = {
            let s = lock(&self.state);
            s.pods
                .iter()
                .filter(|(_, p)| p.provisionable())
                .filter_map(|(key, _)| {
                    let c = s.nominated_claim(key, now)?;
                    let node = c.status.as_ref()?.node_name.clone()?;
                    let n = s.nodes.get(&node)?;
                    let ready = n
                        .status
                        .as_ref()
                        .and_then(|st| st.conditions.as_ref())
                        .is_some_and(|cs| {
                            cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        });
                    let tainted = n
                        .spec
                        .as_ref()
                        .and_then(|sp| sp.taints.as_ref())
                        .is_some_and(|ts| {
                            ts.iter()
                                .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
                        });
                    let name = key.split_once('/').map_or(&**key, |(_, n)| n);
                    (ready && !tainted).then(|| (name.to_string(), node))
                })
                .collect()
        };
        for (name, node) in binds {
            let Some(&d) = self.pods.get(&name) else {
                continue;
            };
            self.api
                .put_value(Kind::Pod, pod_json(&name, &DEPLOYS[d], Some(&node)));
            self.bound.insert(name);
        }
    }

    /// The ReplicaSet controllers: every pod evicted or deleted by the controller comes back
    /// as a new pending pod.
    pub(super) fn replace_evicted(&mut self) -> usize {
        let gone: Vec<String> = {
            let s = lock(&self.state);
            self.pods
                .keys()
                .filter(|n| !s.pods.contains_key(format!("default/{n}").as_str()))
                .cloned()
                .collect()
        };
        for n in &gone {
            if let Some(d) = self.pods.remove(n) {
                self.bound.remove(n);
                self.create_pod(d);
            }
        }
        gone.len()
    }

    /// Every other pod deleted, as a scale-down of each Deployment would; returns how many.
    pub(super) fn delete_every_other(&mut self) -> usize {
        let victims: Vec<String> = self.pods.keys().step_by(2).cloned().collect();
        for v in &victims {
            let _ = self.api.delete(Kind::Pod, &format!("default/{v}"));
            self.pods.remove(v);
            self.bound.remove(v);
        }
        victims.len()
    }

    pub(super) fn unbound(&self) -> usize {
        self.pods.len() - self.bound.len()
    }

    /// A line on each of the first `n` pods not bound: what the index holds of it.
    pub(super) fn describe_unbound(&self, n: usize) -> Vec<String> {
        let now = self.clock.now();
        let s = lock(&self.state);
        self.pods
            .keys()
            .filter(|name| !self.bound.contains(*name))
            .take(n)
            .map(|name| {
                let key = format!("default/{name}");
                let Some(p) = s.pods.get(key.as_str()) else {
                    return format!("{name}: not in the index");
                };
                let claim = s.nominated_claim(&key, now).map(|c| {
                    let st = c.status.as_ref();
                    let node = st.and_then(|st| st.node_name.clone());
                    let pid = st.and_then(|st| st.provider_id.clone());
                    let conds: Vec<String> = st
                        .and_then(|st| st.conditions.as_ref())
                        .into_iter()
                        .flatten()
                        .map(|c| format!("{}={}:{:?}", c.type_, c.status, c.reason))
                        .collect();
                    let inst = pid.as_ref().map(|pid| {
                        self.sim
                            .instances()
                            .iter()
                            .filter(|i| &i.instance.provider_id == pid)
                            .map(|i| format!("{:?}", i.instance.state))
                            .collect::<Vec<_>>()
                    });
                    format!(
                        "{} (node {node:?}, provider {pid:?}, instance {inst:?}, created {:?}, {conds:?})",
                        c.metadata.name.clone().unwrap_or_default(),
                        c.metadata.creation_timestamp
                    )
                });
                format!(
                    "{name}: node {:?}, provisionable {}, nominated to {claim:?}",
                    p.node_name,
                    p.provisionable()
                )
            })
            .collect()
    }
}

pub(super) fn kwok_registration_delay() -> Duration {
    kwok::AgentConfig::default().registration_delay
}
