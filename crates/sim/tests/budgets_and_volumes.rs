//! PodDisruptionBudgets and StatefulSet volumes in scenarios: evictions a budget refuses, the
//! NodePool's terminationGracePeriod overriding them, volumes pinning replicas to a zone, and
//! errors for bad manifests.

use nodewright_sim::RunReport;

mod common;
use common::run;

const CLASS: &str = r#"
  - inline:
      apiVersion: karpenter.k8s.aws/v1
      kind: EC2NodeClass
      metadata: { name: default }
      spec:
        amiSelectorTerms: [{ alias: al2023@latest }]
        role: node-role
        subnetSelectorTerms: [{ tags: { demo: "true" } }]
        securityGroupSelectorTerms: [{ tags: { demo: "true" } }]
  - inline:
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: { name: default }
      spec:
        template:
          spec:
            nodeClassRef: { group: karpenter.k8s.aws, kind: EC2NodeClass, name: default }
            requirements:
              - { key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m] }
              - { key: karpenter.k8s.aws/instance-cpu, operator: In, values: ["8"] }
              - { key: karpenter.sh/capacity-type, operator: In, values: [on-demand] }
              - { key: kubernetes.io/arch, operator: In, values: [amd64] }
            TGP
        disruption: { consolidationPolicy: WhenEmpty, consolidateAfter: Never }
  - inline:
      apiVersion: apps/v1
      kind: Deployment
      metadata: { name: app, namespace: default }
      spec:
        replicas: 4
        selector: { matchLabels: { app: app } }
        template:
          metadata: { labels: { app: app } }
          spec:
            containers: [{ name: c, image: pause, resources: { requests: { cpu: "1" } } }]
"#;

fn pdb(spec: &str) -> String {
    format!(
        "\n  - inline:\n      apiVersion: policy/v1\n      kind: PodDisruptionBudget\n      metadata: {{ name: app, namespace: default }}\n      spec: {spec}\n"
    )
}

fn with_pdb(tgp: &str, budget: Option<&str>, steps: &str, until: &str) -> String {
    let mut manifests = CLASS.replace("TGP", tgp);
    if let Some(b) = budget {
        manifests.push_str(&pdb(b));
    }
    format!("until: {until}\nmanifests:{manifests}\nsteps:\n{steps}")
}

fn lines(r: &RunReport, kind: &str) -> Vec<String> {
    r.timeline
        .iter()
        .filter(|e| e.kind == kind)
        .map(|e| e.message.clone())
        .collect()
}

#[test]
fn a_drain_evicts_only_what_the_budget_allows_and_waits_for_the_rest() {
    // An interruption drains the only node; with at most one pod unavailable, one pod goes
    // and the other three wait (their replacements have nowhere to run until a new node is
    // Ready).
    let steps = "  - { at: 2m, interrupt: any, count: 1 }\n";
    let held = run(&with_pdb(
        "",
        Some("{ maxUnavailable: 1, selector: { matchLabels: { app: app } } }"),
        steps,
        "3m",
    ))
    .unwrap();
    assert!(held.violations.is_empty(), "{:#?}", held.violations);
    let drains = lines(&held, "draining");
    assert!(
        drains[0].contains("1 pod(s) evicted") && drains[0].contains("3 held back"),
        "{drains:?}"
    );
    assert_eq!(lines(&held, "eviction-refused").len(), 3);
    // Once the first replacement runs, the budget lets the next pod go.
    assert!(!lines(&held, "evicted").is_empty(), "{:#?}", held.timeline);

    let free = run(&with_pdb("", None, steps, "3m")).unwrap();
    assert!(lines(&free, "draining")[0].contains("4 pod(s) evicted"));
    assert!(lines(&free, "eviction-refused").is_empty());
}

#[test]
fn the_termination_grace_period_overrides_a_budget_that_never_allows_eviction() {
    // The node expires at 3m; no pod may ever be evicted, so the drain waits until the
    // NodePool's terminationGracePeriod (1m) leaves just the pods' 30 s grace, then deletes them.
    let r = run(&with_pdb(
        "expireAfter: 3m\n            terminationGracePeriod: 1m",
        Some("{ maxUnavailable: 0, selector: { matchLabels: { app: app } } }"),
        "",
        "6m",
    ))
    .unwrap();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    let forced: Vec<_> = r
        .timeline
        .iter()
        .filter(|e| e.kind == "evicted" && e.message.contains("terminationGracePeriod"))
        .collect();
    assert_eq!(forced.len(), 4, "{:#?}", r.timeline);
    // Expired at 3:00 plus a few seconds of launch, deadline one minute on, less 30 s grace.
    assert!(
        forced.iter().all(|e| e.at.as_secs() >= 3 * 60 + 30),
        "{forced:?}"
    );
    assert!(
        !lines(&r, "disrupted").is_empty(),
        "the node goes in the end"
    );
}

#[test]
fn do_not_disrupt_pods_are_waited_for_until_the_termination_grace_period_forces_them() {
    // The node expires at 3m; its pods are never evicted, as upstream's drain leaves
    // `do-not-disrupt` pods alone, so the node waits until the NodePool's
    // terminationGracePeriod (2m) leaves just the pods' 30 s grace, then deletes them.
    let scenario = with_pdb(
        "expireAfter: 3m\n            terminationGracePeriod: 2m",
        None,
        "",
        "6m",
    )
    .replace(
        "metadata: { labels: { app: app } }",
        "metadata: { labels: { app: app }, annotations: { karpenter.sh/do-not-disrupt: \"true\" } }",
    );
    let r = run(&scenario).unwrap();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert_eq!(lines(&r, "eviction-withheld").len(), 4, "{:#?}", r.timeline);
    let drained = lines(&r, "draining");
    assert!(
        drained
            .iter()
            .any(|l| l.contains("0 pod(s) evicted") && l.contains("4 kept by do-not-disrupt")),
        "{drained:?}"
    );
    let forced: Vec<_> = r
        .timeline
        .iter()
        .filter(|e| e.kind == "evicted" && e.message.contains("terminationGracePeriod"))
        .collect();
    assert_eq!(forced.len(), 4, "{:#?}", r.timeline);
    // Expired at 3:00 plus a few seconds of launch, deadline two minutes on, less 30 s grace.
    assert!(
        forced.iter().all(|e| e.at.as_secs() >= 4 * 60 + 30),
        "{forced:?}"
    );
    assert!(
        !lines(&r, "disrupted").is_empty(),
        "the node goes in the end"
    );
}

#[test]
fn bad_budgets_name_the_file_the_step_the_object_and_the_field() {
    let step = |spec: &str, api: &str| {
        format!(
            "{}  - at: 1m\n    apply:\n      - inline:\n          apiVersion: {api}\n          kind: PodDisruptionBudget\n          metadata: {{ name: bad, namespace: default }}\n          spec: {spec}\n",
            with_pdb("", None, "", "2m")
        )
    };
    let both = run(&step(
        "{ minAvailable: 1, maxUnavailable: 1, selector: { matchLabels: { app: app } } }",
        "policy/v1",
    ))
    .unwrap_err();
    assert!(both.starts_with("test.yaml: steps[0].apply: "), "{both}");
    assert!(
        both.contains("PodDisruptionBudget/default/bad")
            || both.contains("PodDisruptionBudget/bad"),
        "{both}"
    );
    assert!(both.contains("minAvailable and maxUnavailable"), "{both}");

    let pct = run(&step(
        "{ maxUnavailable: \"150%\", selector: { matchLabels: { app: app } } }",
        "policy/v1",
    ))
    .unwrap_err();
    assert!(pct.contains("spec.maxUnavailable"), "{pct}");

    let old = run(&step("{ maxUnavailable: 1 }", "policy/v1beta1")).unwrap_err();
    assert!(old.contains("apiVersion"), "{old}");
}

const STATEFUL: &str = r#"
  - inline:
      apiVersion: storage.k8s.io/v1
      kind: StorageClass
      metadata: { name: ebs }
      provisioner: ebs.csi.aws.com
      volumeBindingMode: WaitForFirstConsumer
  - inline:
      apiVersion: apps/v1
      kind: StatefulSet
      metadata: { name: db, namespace: default }
      spec:
        replicas: 2
        selector: { matchLabels: { app: db } }
        template:
          metadata: { labels: { app: db } }
          spec:
            containers: [{ name: c, image: pause, resources: { requests: { cpu: "3" } } }]
        volumeClaimTemplates:
          - metadata: { name: data }
            spec: { storageClassName: ebs }
"#;

#[test]
fn a_replica_goes_back_to_its_volume_zone_after_its_node_is_interrupted() {
    let text = format!(
        "until: 6m\nmanifests:{}{STATEFUL}\nsteps:\n  - {{ at: 2m, interrupt: any, count: 1 }}\n",
        CLASS.replace("TGP", "")
    );
    let r = run(&text).unwrap();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    let volumes = lines(&r, "volume");
    let provisioned: Vec<&String> = volumes
        .iter()
        .filter(|m| m.contains("provisioned"))
        .collect();
    assert_eq!(provisioned.len(), 2, "{volumes:#?}");
    let back: Vec<&String> = volumes
        .iter()
        .filter(|m| m.contains("rescheduled"))
        .collect();
    assert!(!back.is_empty(), "{:#?}", r.timeline);
    for m in back {
        // "... rescheduled on N in ZONE, with its volume pv-... (ZONE)"
        let zone = m.split(" in ").nth(1).unwrap().split(',').next().unwrap();
        assert!(m.ends_with(&format!("({zone})")), "{m}");
    }
    assert_eq!(r.summary.pending_at_end, 0);
}

#[test]
fn bad_claim_templates_and_storage_classes_name_the_field() {
    let bad_template = format!(
        "manifests:{}{}",
        CLASS.replace("TGP", ""),
        STATEFUL.replace("metadata: { name: data }", "metadata: {}")
    );
    let e = run(&bad_template).unwrap_err();
    assert!(
        e.contains("StatefulSet/db") || e.contains("StatefulSet/default/db"),
        "{e}"
    );
    assert!(
        e.contains("spec.volumeClaimTemplates[0].metadata.name"),
        "{e}"
    );
    let bad_mode = format!(
        "manifests:{}{}",
        CLASS.replace("TGP", ""),
        STATEFUL.replace("WaitForFirstConsumer", "Later")
    );
    let e = run(&bad_mode).unwrap_err();
    assert!(e.contains("volumeBindingMode"), "{e}");
}

/// The StatefulSet of [`STATEFUL`] on an `Immediate` class, with `allowed` as the class's
/// `allowedTopologies` zones; the Deployment scaled to nothing, so every launch is for it.
fn immediate(allowed: Option<&str>) -> RunReport {
    let mut stateful = STATEFUL.replace(
        "volumeBindingMode: WaitForFirstConsumer",
        "volumeBindingMode: Immediate",
    );
    if let Some(zone) = allowed {
        stateful = stateful.replace(
            "      volumeBindingMode: Immediate",
            &format!(
                "      volumeBindingMode: Immediate\n      allowedTopologies:\n        - matchLabelExpressions:\n            - {{ key: topology.kubernetes.io/zone, values: [{zone}] }}"
            ),
        );
    }
    let text = format!(
        "until: 6m\nmanifests:{}{stateful}\nsteps:\n  - {{ at: 2m, interrupt: any, count: 1 }}\n",
        CLASS
            .replace("TGP", "")
            .replace("replicas: 4", "replicas: 0")
    );
    run(&text).unwrap()
}

/// The zone of every "launched" line.
fn launch_zones(r: &RunReport) -> Vec<String> {
    lines(r, "launched")
        .iter()
        .map(|m| {
            m.split(" in ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn an_immediate_volume_is_bound_at_claim_creation_and_pins_its_pod_there() {
    let r = immediate(Some("us-east-1b"));
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    let volumes = lines(&r, "volume");
    let provisioned: Vec<&String> = volumes
        .iter()
        .filter(|m| m.contains("provisioned"))
        .collect();
    assert_eq!(provisioned.len(), 2, "{volumes:#?}");
    for m in &provisioned {
        assert!(
            m.contains("provisioned in us-east-1b") && m.ends_with("(Immediate binding)"),
            "{m}"
        );
    }
    // The first launch and the replacement after the interruption: all in the volume's zone.
    let zones = launch_zones(&r);
    assert!(zones.len() >= 2, "{:#?}", r.timeline);
    assert!(zones.iter().all(|z| z == "us-east-1b"), "{zones:?}");
    assert_eq!(r.summary.pending_at_end, 0);
}

#[test]
fn without_allowed_topologies_an_immediate_claim_takes_a_zone_by_its_name() {
    let r = immediate(None);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    let provisioned: Vec<String> = lines(&r, "volume")
        .into_iter()
        .filter(|m| m.contains("(Immediate binding)"))
        .collect();
    assert_eq!(provisioned.len(), 2, "{:#?}", r.timeline);
    // Consecutive ordinals go to different zones; each replica's nodes follow its volume.
    let zone = |m: &String| {
        m.split(" in ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .to_string()
    };
    assert_ne!(
        zone(&provisioned[0]),
        zone(&provisioned[1]),
        "{provisioned:?}"
    );
    let zones = launch_zones(&r);
    for z in &zones {
        assert!(
            provisioned.iter().any(|m| zone(m) == *z),
            "{z} in {zones:?}"
        );
    }
    assert_eq!(r.summary.pending_at_end, 0);
}

#[test]
fn a_node_is_deleting_from_its_drain_so_the_pods_a_budget_holds_there_get_capacity() {
    // As the controller's finalization deletes a claim's Node before draining it, the Node is
    // deleting from the interruption notice on, and the pods the budget keeps on it are
    // rescheduled by the provisioner: the replacement launched for the one evicted pod is
    // sized for all four, not for the evicted pod alone.
    let r = run(&with_pdb(
        "",
        Some("{ maxUnavailable: 1, selector: { matchLabels: { app: app } } }"),
        "  - { at: 2m, interrupt: any, count: 1 }\n",
        "3m",
    ))
    .unwrap();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    let notice = r
        .timeline
        .iter()
        .find(|e| e.kind == "interruption-notice")
        .unwrap();
    let replacement = r
        .timeline
        .iter()
        .find(|e| e.kind == "launch" && e.at >= notice.at)
        .unwrap_or_else(|| panic!("{:#?}", r.timeline));
    assert!(
        replacement.message.contains("for 4 pending pod(s)"),
        "{replacement:?}"
    );
}
