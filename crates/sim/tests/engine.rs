//! The engine against small inline scenarios: cloud faults, limits, interruptions, and
//! scenario errors found while loading manifests.

use nodewright_core::disruption::queue::Failure;
use nodewright_sim::RunReport;
use nodewright_sim::report::TimelineEvent;

mod common;
use common::run;

const POOL: &str = r#"
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
              - { key: karpenter.sh/capacity-type, operator: In, values: [on-demand] }
              - { key: kubernetes.io/arch, operator: In, values: [amd64] }
        limits: { cpu: LIMIT }
        disruption: { consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s }
  - inline:
      apiVersion: apps/v1
      kind: Deployment
      metadata: { name: app, namespace: default }
      spec:
        replicas: 0
        selector: { matchLabels: { app: app } }
        template:
          metadata: { labels: { app: app } }
          spec:
            containers: [{ name: c, image: pause, resources: { requests: { cpu: "1" } } }]
"#;

fn scenario(limit: &str, cloud: &str, steps: &str, until: &str) -> String {
    format!(
        "until: {until}\ncloud: {cloud}\nmanifests:{}\nsteps:\n{steps}",
        POOL.replace("LIMIT", limit)
    )
}

fn kinds(r: &RunReport, kind: &str) -> usize {
    r.timeline.iter().filter(|e| e.kind == kind).count()
}

#[test]
fn api_errors_fail_launches_and_pending_pods_retry() {
    let r = run(&scenario(
        "100",
        "{ apiErrorRate: 1 }",
        "  - { at: 5s, scale: default/app, replicas: 3 }\n",
        "2m",
    ))
    .unwrap();
    assert_eq!(r.summary.nodes_launched, 0);
    // Still-pending pods trigger again every 10 s, so launches are retried many times.
    assert!(
        r.summary.launch_failures >= 5,
        "{}",
        r.summary.launch_failures
    );
    assert_eq!(r.summary.pending_at_end, 3);
    assert!(r.violations.is_empty());
}

#[test]
fn offerings_out_of_capacity_push_the_launch_elsewhere() {
    let r = run(&scenario(
        "100",
        "{ insufficientCapacity: [{ zone: us-east-1a }, { zone: us-east-1b }] }",
        "  - { at: 5s, scale: default/app, replicas: 2 }\n",
        "3m",
    ))
    .unwrap();
    assert_eq!(r.summary.pending_at_end, 0);
    for e in r.timeline.iter().filter(|e| e.kind == "launched") {
        assert!(e.message.contains(" in us-east-1c "), "{}", e.message);
    }
}

#[test]
fn nodepool_limits_hold_and_the_rest_stays_pending_with_a_reason() {
    let r = run(&scenario(
        "4",
        "{}",
        "  - { at: 5s, scale: default/app, replicas: 10 }\n",
        "3m",
    ))
    .unwrap();
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert!(r.summary.pending_at_end > 0);
    assert!(kinds(&r, "unschedulable") > 0);
}

#[test]
fn an_interrupted_node_is_replaced_and_its_pods_placed_again() {
    let r = run(&scenario(
        "100",
        "{}",
        "  - { at: 5s, scale: default/app, replicas: 2 }\n  - { at: 2m, interrupt: default-00001 }\n",
        "5m",
    ))
    .unwrap();
    assert_eq!(r.summary.interruptions, 1);
    assert!(r.summary.nodes_launched >= 2);
    assert_eq!(r.summary.pending_at_end, 0);
    // The notice cordons and drains the node at once; its pods get a new node before EC2
    // reclaims the instance two minutes after the notice.
    let notice = r
        .timeline
        .iter()
        .find(|e| e.kind == "interruption-notice")
        .unwrap();
    assert_eq!(notice.at.as_secs(), 120);
    let draining = r.timeline.iter().find(|e| e.kind == "draining").unwrap();
    assert_eq!(draining.at, notice.at);
    assert!(
        draining.message.contains("spot interruption"),
        "{draining:?}"
    );
    // Drained before the deadline (the pods' default 30 s grace), the node goes early.
    let reclaimed = r
        .timeline
        .iter()
        .find(|e| e.kind == "disrupted" && e.message.contains("spot interruption"))
        .unwrap_or_else(|| panic!("{:#?}", r.timeline));
    assert_eq!(reclaimed.at.as_secs(), 150);
    let replacement_ready = r
        .timeline
        .iter()
        .find(|e| e.kind == "ready" && e.at > notice.at)
        .unwrap();
    let deadline = notice.at + std::time::Duration::from_secs(120);
    assert!(replacement_ready.at < deadline, "{replacement_ready:?}");
    assert!(
        r.timeline
            .iter()
            .any(|e| e.kind == "launch" && e.at >= notice.at && e.at < reclaimed.at)
    );
}

#[test]
fn deleting_the_workload_empties_and_removes_the_nodes() {
    let r = run(&scenario(
        "100",
        "{}",
        "  - { at: 5s, scale: default/app, replicas: 4 }\n  - { at: 2m, delete: Deployment/default/app }\n",
        "5m",
    ))
    .unwrap();
    assert_eq!(r.summary.nodes_at_end, 0);
    assert!(r.summary.nodes_disrupted >= 1);
    // consolidateAfter 30 s, then the 15 s re-check.
    let first = r.timeline.iter().find(|e| e.kind == "disrupted").unwrap();
    assert!(first.at.as_secs() >= 120 + 30 + 15, "{:?}", first.at);
}

/// A removed node's claim and Node stay until the cloud reports its instance terminated (the
/// simulated cloud's 30 s), as the controller keeps their finalizers until then: counted as a
/// node meanwhile, but not billed, as EC2 bills no `shutting-down` instance.
#[test]
fn a_removed_node_stays_unbilled_until_its_instance_terminates() {
    let r = run(&scenario(
        "100",
        "{}",
        "  - { at: 5s, scale: default/app, replicas: 4 }\n  - { at: 2m, delete: Deployment/default/app }\n",
        "5m",
    ))
    .unwrap();
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    let (first, gone) = first_removal(&r);
    assert_eq!(gone.at, first.at + std::time::Duration::from_secs(30));
    let last_before = |t| r.samples.iter().rfind(|s| s.at < t).unwrap();
    let (before, during) = (last_before(first.at), last_before(gone.at));
    let after = r.samples.iter().find(|s| s.at >= gone.at).unwrap();
    assert_eq!(during.nodes, before.nodes, "{:#?}", r.samples);
    assert!(during.price_per_hour < before.price_per_hour);
    assert!(after.nodes < during.nodes);
}

/// The first node disrupted and the moment its instance is reported terminated.
fn first_removal(r: &RunReport) -> (&TimelineEvent, &TimelineEvent) {
    let claim = |m: &str| m.split(' ').next().unwrap_or_default().to_string();
    let first = r.timeline.iter().find(|e| e.kind == "disrupted").unwrap();
    let gone = r
        .timeline
        .iter()
        .find(|e| e.kind == "terminated" && claim(&e.message) == claim(&first.message))
        .unwrap_or_else(|| panic!("{:#?}", r.timeline));
    (first, gone)
}

/// The scenario's `terminationDelay` is how long the cloud takes to report a terminated
/// instance, and so how long a removed node's claim and Node stay.
#[test]
fn the_termination_delay_is_how_long_a_removed_node_stays() {
    let r = run(&scenario(
        "100",
        "{ terminationDelay: 2m }",
        "  - { at: 5s, scale: default/app, replicas: 4 }\n  - { at: 2m, delete: Deployment/default/app }\n",
        "8m",
    ))
    .unwrap();
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    let (first, gone) = first_removal(&r);
    assert_eq!(gone.at, first.at + std::time::Duration::from_secs(120));
}

#[test]
fn manifest_errors_name_the_file_the_object_and_the_field() {
    let missing_class = "manifests:\n  - inline:\n      apiVersion: karpenter.sh/v1\n      kind: NodePool\n      metadata: { name: p }\n      spec:\n        template:\n          spec:\n            nodeClassRef: { group: karpenter.k8s.aws, kind: EC2NodeClass, name: nope }\n            requirements: []\n";
    let e = run(missing_class).unwrap_err();
    assert!(e.starts_with("test.yaml: manifests: "), "{e}");
    assert!(e.contains("NodePool/p"), "{e}");
    assert!(
        e.contains("EC2NodeClass \"nope\" is not in the scenario"),
        "{e}"
    );

    let bad_pool = scenario("lots", "{}", "", "1m");
    let e = run(&bad_pool).unwrap_err();
    assert!(e.contains("NodePool/default"), "{e}");
    assert!(e.contains("spec.limits"), "{e}");

    let bad_pod = "manifests:\n  - inline:\n      apiVersion: v1\n      kind: Pod\n      metadata: { name: x }\n      spec:\n        containers: [{ name: c, resources: { requests: { cpu: lots } } }]\n";
    let e = run(bad_pod).unwrap_err();
    assert!(e.contains("Pod/x"), "{e}");
    assert!(e.contains("cpu"), "{e}");
}

#[test]
fn an_underused_node_is_replaced_by_a_cheaper_one_that_keeps_the_pool_requirements() {
    let r = run(&scenario(
        "100",
        "{}",
        "  - { at: 5s, scale: default/app, replicas: 12 }\n  - { at: 3m, scale: default/app, replicas: 2 }\n",
        "10m",
    ))
    .unwrap();
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    let replaced: Vec<_> = r
        .timeline
        .iter()
        .filter(|e| e.kind == "disrupted")
        .collect();
    assert_eq!(replaced.len(), 1, "{replaced:?}");
    assert!(
        replaced[0]
            .message
            .contains("single-node-consolidation (replace)")
    );
    assert!(r.summary.savings_per_hour > 0.0);
    assert!(
        r.summary.final_per_hour
            < r.samples
                .iter()
                .map(|s| s.price_per_hour)
                .fold(0.0, f64::max)
    );
    // The pool is on-demand only: so is every launch, replacements included.
    for e in r.timeline.iter().filter(|e| e.kind == "launched") {
        assert!(e.message.contains("(on-demand)"), "{}", e.message);
    }
}

#[test]
fn daemonset_pods_run_on_every_node_and_count_against_its_room() {
    let ds = "  - inline:\n      apiVersion: apps/v1\n      kind: DaemonSet\n      metadata: { name: agent, namespace: kube-system }\n      spec:\n        selector: { matchLabels: { app: agent } }\n        template:\n          metadata: { labels: { app: agent } }\n          spec:\n            containers: [{ name: a, image: agent, resources: { requests: { cpu: 500m, memory: 256Mi } } }]\n";
    let text = scenario(
        "100",
        "{}",
        "  - { at: 5s, scale: default/app, replicas: 6 }\n",
        "3m",
    )
    .replace("steps:\n", &format!("{ds}steps:\n"));
    let r = run(&text).unwrap();
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.summary.pending_at_end, 0);
    assert!(
        !r.timeline
            .iter()
            .any(|e| e.message.contains("does not fit")),
        "{:?}",
        r.timeline
    );
    // Every Ready node carries one agent besides the workload's requests.
    let last = r.samples.last().unwrap();
    let nodes = last.ready_nodes as i64;
    assert!(nodes > 0);
    assert_eq!(last.cpu_requested_milli, 6_000 + 500 * nodes);
}

#[test]
fn spot_interruptions_follow_the_rate_and_the_workload_recovers() {
    let text = scenario(
        "100",
        "{ spotInterruptionsPerHour: 30 }",
        "  - { at: 5s, scale: default/app, replicas: 4 }\n",
        "6m",
    )
    .replace("values: [on-demand]", "values: [spot]");
    let r = run(&text).unwrap();
    assert!(r.summary.interruptions >= 1, "{}", r.summary.interruptions);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    // Every interruption is followed by a fresh launch for the evicted pods.
    let last_interrupt = r
        .timeline
        .iter()
        .filter(|e| e.kind == "interruption-notice")
        .map(|e| e.at)
        .max()
        .unwrap();
    assert!(
        r.timeline
            .iter()
            .any(|e| e.kind == "launch" && e.at > last_interrupt)
    );
    let none = run(&scenario(
        "100",
        "{}",
        "  - { at: 5s, scale: default/app, replicas: 4 }\n",
        "6m",
    )
    .replace("values: [on-demand]", "values: [spot]"))
    .unwrap();
    assert_eq!(none.summary.interruptions, 0);
}

#[test]
fn steps_naming_objects_the_scenario_never_created_are_errors() {
    let e = run(&scenario(
        "100",
        "{}",
        "  - { at: 5s, scale: default/ap, replicas: 4 }\n",
        "1m",
    ))
    .unwrap_err();
    assert_eq!(
        e,
        "test.yaml: steps[0].scale: no Deployment or StatefulSet default/ap exists at this step"
    );
    let e = run(&scenario(
        "100",
        "{}",
        "  - { at: 5s, delete: Deployment/default/app }\n  - { at: 6s, delete: Deployment/default/app }\n",
        "1m",
    ))
    .unwrap_err();
    assert_eq!(
        e,
        "test.yaml: steps[1].delete: no Deployment default/app exists at this step"
    );
}

const JOB: &str = r#"
  - inline:
      apiVersion: batch/v1
      kind: Job
      metadata:
        name: crunch
        namespace: default
        annotations: { sim.nodewright.io/run-for: 4m }
      spec:
        completions: 6
        parallelism: 3
        template:
          spec:
            restartPolicy: Never
            containers: [{ name: c, image: pause, resources: { requests: { cpu: "3" } } }]
"#;

#[test]
fn job_pods_finish_and_their_empty_nodes_are_consolidated() {
    let text = format!(
        "until: 20m\nmanifests:{}{JOB}\nsteps:\n  - {{ advance: 1m }}\n",
        POOL.replace("LIMIT", "100")
    );
    let r = run(&text).unwrap();
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    let done = r
        .timeline
        .iter()
        .find(|e| e.kind == "job-complete")
        .unwrap_or_else(|| panic!("{:#?}", r.timeline));
    assert_eq!(done.message, "Job/default/crunch: 6/6 completions");
    // Two waves of three pods, four minutes each, after the first nodes are Ready.
    assert!(done.at.as_secs() >= 8 * 60, "{:?}", done.at);
    // At most three pods ran at once: the peak pod count is the parallelism.
    assert!(r.samples.iter().all(|s| s.pods <= 3));
    assert_eq!(r.summary.pods_at_end, 0);
    // The emptied nodes go.
    assert_eq!(r.summary.nodes_at_end, 0, "{:#?}", r.timeline);
    let removed = r.timeline.iter().filter(|e| e.kind == "disrupted").count();
    assert!(removed >= 1);
}

#[test]
fn a_bad_run_for_names_the_job_and_the_annotation() {
    let text = format!(
        "until: 5m\nmanifests:{}{}\n",
        POOL.replace("LIMIT", "100"),
        JOB.replace("run-for: 4m", "run-for: soon")
    );
    let e = run(&text).unwrap_err();
    assert!(e.starts_with("test.yaml: manifests: "), "{e}");
    assert!(e.contains("Job/crunch") || e.contains("crunch"), "{e}");
    assert!(
        e.contains("metadata.annotations[sim.nodewright.io/run-for]"),
        "{e}"
    );
}

#[test]
fn kubelet_max_pods_caps_each_node_and_forces_more_nodes() {
    let tiny = |kubelet: &str| {
        let text = scenario(
            "1000",
            "{}",
            "  - { at: 5s, scale: default/app, replicas: 30 }\n",
            "3m",
        )
        .replace(r#"cpu: "1""#, "cpu: 50m")
        .replace(
            "role: node-role",
            &format!("role: node-role\n        {kubelet}"),
        );
        run(&text).unwrap()
    };
    let free = tiny("tags: { demo: \"true\" }");
    let capped = tiny("kubelet: { maxPods: 10 }");
    for r in [&free, &capped] {
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        assert_eq!(r.summary.pending_at_end, 0);
    }
    assert_eq!(free.summary.nodes_at_end, 1, "{:#?}", free.timeline);
    assert!(
        capped.summary.nodes_at_end >= 3,
        "{}",
        capped.summary.nodes_at_end
    );
}

#[test]
fn a_bad_kubelet_setting_names_the_field() {
    let text = scenario("100", "{}", "", "1m").replace(
        "role: node-role",
        "role: node-role\n        kubelet: { evictionHard: { memory.available: lots } }",
    );
    let e = run(&text).unwrap_err();
    assert!(e.starts_with("test.yaml: manifests: "), "{e}");
    assert!(e.contains("EC2NodeClass/default"), "{e}");
}

#[test]
fn a_quiet_cluster_skips_disruption_rounds_until_something_changes() {
    let r = run(&scenario(
        "100",
        "{}",
        "  - { at: 5s, scale: default/app, replicas: 4 }\n  - { at: 8m, scale: default/app, replicas: 1 }\n",
        "12m",
    ))
    .unwrap();
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    // A round every 10 s is about 72 rounds; once consolidated, only changes and the
    // five-minute refresh plan again.
    let w = r.work;
    assert!(w.plans + w.plans_skipped >= 60, "{w:?}");
    assert!(w.plans_skipped > 3 * w.plans, "{w:?}");
    // The scale-down at 8m is a change: the node it empties is still consolidated.
    assert!(r.summary.nodes_disrupted >= 1, "{:#?}", r.timeline);
}

/// Two `app` pods that never share a node, each next to a `filler` pod that sizes its node up.
const APART: &str = r#"until: 10m
cloud: {}
manifests:
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
              - { key: karpenter.sh/capacity-type, operator: In, values: [on-demand] }
              - { key: kubernetes.io/arch, operator: In, values: [amd64] }
        disruption:
          consolidationPolicy: WhenEmptyOrUnderutilized
          consolidateAfter: 30s
          budgets: [{ nodes: "100%" }]
  - inline:
      apiVersion: apps/v1
      kind: Deployment
      metadata: { name: app, namespace: default }
      spec:
        replicas: 0
        selector: { matchLabels: { app: app } }
        template:
          metadata: { labels: { app: app } }
          spec:
            affinity:
              podAntiAffinity:
                requiredDuringSchedulingIgnoredDuringExecution:
                  - labelSelector: { matchLabels: { app: app } }
                    topologyKey: kubernetes.io/hostname
            containers: [{ name: c, image: pause, resources: { requests: { cpu: "1" } } }]
  - inline:
      apiVersion: apps/v1
      kind: Deployment
      metadata: { name: filler, namespace: default }
      spec:
        replicas: 0
        selector: { matchLabels: { app: filler } }
        template:
          metadata: { labels: { app: filler } }
          spec:
            affinity:
              podAntiAffinity:
                requiredDuringSchedulingIgnoredDuringExecution:
                  - labelSelector: { matchLabels: { app: filler } }
                    topologyKey: kubernetes.io/hostname
            containers: [{ name: c, image: pause, resources: { requests: { cpu: "6" } } }]
steps:
  - { at: 5s, scale: default/app, replicas: 2 }
  - { at: 5s, scale: default/filler, replicas: 2 }
  - { at: 3m, scale: default/filler, replicas: 0 }
"#;

#[test]
fn a_second_replace_starts_while_the_first_waits_for_its_replacement() {
    let r = run(APART).unwrap();
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    // Commands started and not yet done (their replacements Ready), along the timeline.
    let mut running = 0i32;
    let mut most = 0;
    let mut started = Vec::new();
    for e in &r.timeline {
        if e.kind == "disruption-started" {
            running += 1;
            started.push(e.message.as_str());
        } else if e.kind == "saved" {
            running -= 1;
        }
        most = most.max(running);
    }
    // Once the filler goes, each app node is replaced by a smaller one.
    assert_eq!(started.len(), 2, "{:#?}", r.timeline);
    assert!(
        started
            .iter()
            .all(|m| m.starts_with("single-node-consolidation: replace:")),
        "{started:?}"
    );
    // The second app node's pod does not count on the first one's launching replacement:
    // both replacements launch together.
    assert_eq!(most, 2, "{:#?}", r.timeline);
}

/// [`APART`] with a 5-minute grace period on the `app` pods, so a replaced node drains slowly,
/// and one filler per node that go at different times: the second node is planned while the
/// first one's replacement waits for the pod still leaving the first node.
fn apart_staggered() -> String {
    let one_filler = |name: &str| {
        format!(
            r#"  - inline:
      apiVersion: apps/v1
      kind: Deployment
      metadata: {{ name: {name}, namespace: default }}
      spec:
        replicas: 0
        selector: {{ matchLabels: {{ app: {name} }} }}
        template:
          metadata: {{ labels: {{ app: {name}, heavy: "true" }} }}
          spec:
            affinity:
              podAntiAffinity:
                requiredDuringSchedulingIgnoredDuringExecution:
                  - labelSelector: {{ matchLabels: {{ heavy: "true" }} }}
                    topologyKey: kubernetes.io/hostname
            containers: [{{ name: c, image: pause, resources: {{ requests: {{ cpu: "6" }} }} }}]
"#
        )
    };
    let (head, _) = APART.split_once("  - inline:\n      apiVersion: apps/v1\n      kind: Deployment\n      metadata: { name: filler").unwrap();
    let head = head.replace(
        "          spec:\n            affinity:",
        "          spec:\n            terminationGracePeriodSeconds: 300\n            affinity:",
    );
    format!(
        "{head}{}{}steps:
  - {{ at: 5s, scale: default/app, replicas: 2 }}
  - {{ at: 5s, scale: default/filler-a, replicas: 1 }}
  - {{ at: 5s, scale: default/filler-b, replicas: 1 }}
  - {{ at: 3m, scale: default/filler-a, replicas: 0 }}
  - {{ at: 5m, scale: default/filler-b, replicas: 0 }}
",
        one_filler("filler-a"),
        one_filler("filler-b")
    )
    .replace("until: 10m", "until: 20m")
}

#[test]
fn a_replacement_stays_reserved_while_its_target_drains() {
    let text = apart_staggered();
    let r = run(&text).unwrap();
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    // Replacement claim -> the node it replaces, and when each target was drained and gone.
    let mut replaces: Vec<(String, String)> = Vec::new();
    let mut gone: Vec<(String, std::time::Duration)> = Vec::new();
    for e in &r.timeline {
        let first = e.message.split_whitespace().nth(1).unwrap_or_default();
        if e.kind == "launch"
            && let Some((_, target)) = e.message.split_once("for replacement for ")
        {
            let target = target.split_whitespace().next().unwrap_or_default();
            replaces.push((first.to_string(), target.to_string()));
        }
        if e.kind == "disrupted" {
            let node = e.message.split_whitespace().next().unwrap_or_default();
            gone.push((node.to_string(), e.at));
        }
    }
    assert!(replaces.len() >= 2, "{:#?}", r.timeline);
    // The targets' `app` pods take five minutes to leave. Until they have, the replacement is
    // spoken for by them: it is no candidate, even once its command finished.
    for e in r.timeline.iter().filter(|e| e.kind == "disruption-started") {
        for (replacement, target) in &replaces {
            let drained = gone.iter().find(|(n, _)| n == target).map(|(_, at)| *at);
            if e.message.contains(&format!("{replacement}/")) {
                assert!(
                    drained.is_some_and(|d| d <= e.at),
                    "{replacement} disrupted at {:?} while {target} drained: {}",
                    e.at,
                    e.message
                );
            }
        }
    }
}

#[test]
fn a_drifted_node_is_replaced_at_once_as_the_controller_does() {
    // At 3m the NodePool allows only the m category: the c node no longer satisfies it.
    let changed = POOL
        .split("  - inline:")
        .find(|d| d.contains("kind: NodePool"))
        .unwrap()
        .replace("values: [c, m]", "values: [m]")
        .replace("LIMIT", "100")
        .replace("\n      ", "\n        ");
    let steps = format!(
        "  - {{ at: 5s, scale: default/app, replicas: 2 }}\n  - at: 3m\n    apply:\n      inline:{changed}\n"
    );
    let r = run(&scenario("100", "{}", &steps, "15m")).unwrap();
    let drift = r
        .timeline
        .iter()
        .find(|e| e.kind == "disruption-started" && e.message.starts_with("drift"))
        .unwrap_or_else(|| panic!("no drift started: {:#?}", r.timeline));
    assert!(
        !r.timeline
            .iter()
            .any(|e| e.kind == "disruption-planned" && e.message.starts_with("drift")),
        "drift waited for a re-check"
    );
    assert!(drift.at.as_secs() >= 180, "{:?}", drift.at);
}

/// The benchmark day's workloads have no constraints at all, so every pod a consolidation
/// moves lands wherever the cluster's scheduler likes: the consolidation must have simulated
/// where that is (emptiest node first, pods in queue order, ties by node order), and taken
/// only commands whose pods the scheduler places with the replacement Ready and the pods of
/// running commands moving first. Simulated the tight way, 61 of 93 commands at 30 nodes
/// were followed by a launch for their own pods; emptiest first, 3 of 43; now none.
#[test]
fn consolidations_on_the_benchmark_day_never_need_new_nodes_for_their_pods() {
    use nodewright_sim::bench::{BenchSpec, scenario_yaml};
    for nodes in [30, 60] {
        let r = run(&scenario_yaml(&BenchSpec {
            nodes,
            hours: 24,
            seed: 1,
        }))
        .unwrap();
        let s = &r.summary;
        assert!(s.disruption_commands > 20, "{s:?}");
        let churn: Vec<_> = r
            .timeline
            .iter()
            .filter(|e| e.kind == "consolidation-churn")
            .collect();
        assert_eq!(s.consolidation_churn, 0, "{nodes} nodes: {churn:#?}");
    }
}

/// The first hour of the 60-node benchmark day: a single-node consolidation moves five
/// pods, two of 900m and three of 500m. Three equally empty nodes had room for a 900m pod.
/// The cluster's scheduler breaks the tie by node order: the first 900m pod took the first
/// of them and two 500m pods the other two, so the second 900m pod had no room and a node
/// was launched for it a second later. The simulation took the last of equally empty nodes
/// first and so found room for both. Now it breaks ties as the scheduler does.
#[test]
fn consolidations_in_the_first_hour_of_the_60_node_day_relaunch_nothing() {
    use nodewright_sim::bench::{BenchSpec, scenario_yaml};
    let r = run(&scenario_yaml(&BenchSpec {
        nodes: 60,
        hours: 1,
        seed: 1,
    }))
    .unwrap();
    let s = &r.summary;
    assert!(s.disruption_commands > 10, "{s:?}");
    let churn: Vec<_> = r
        .timeline
        .iter()
        .filter(|e| e.kind == "consolidation-churn")
        .collect();
    assert_eq!(s.consolidation_churn, 0, "{churn:#?}");
}

/// Core's lifecycle timers run in the simulator as in the controller: an instance whose node
/// never registers within 15 minutes of its launch has its claim deleted, and its pods go to
/// a new claim.
#[test]
fn a_node_that_does_not_register_in_time_is_deleted_by_liveness() {
    let r = run(&scenario(
        "100",
        "{ registrationDelay: 20m }",
        "  - { at: 5s, scale: default/app, replicas: 2 }\n",
        "40m",
    ))
    .unwrap();
    let liveness: Vec<_> = r.timeline.iter().filter(|e| e.kind == "liveness").collect();
    assert!(!liveness.is_empty(), "{:#?}", r.timeline);
    let first = liveness[0];
    assert!(
        first.message.ends_with("registration_timeout"),
        "{}",
        first.message
    );
    // Launched a few seconds after the pods arrived, deleted 15 minutes later.
    assert!((900..930).contains(&first.at.as_secs()), "{:?}", first.at);
    assert!(r.summary.nodes_launched >= 2, "{:?}", r.summary);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}

/// With registration a little faster than the timer, nothing is deleted by liveness.
#[test]
fn a_node_that_registers_before_the_timer_is_kept() {
    let r = run(&scenario(
        "100",
        "{ registrationDelay: 14m }",
        "  - { at: 5s, scale: default/app, replicas: 2 }\n",
        "20m",
    ))
    .unwrap();
    assert_eq!(kinds(&r, "liveness"), 0, "{:#?}", r.timeline);
    assert_eq!(r.summary.pending_at_end, 0);
}

/// The orchestration queue's timeout, as in the controller: a drift replacement that is not
/// ready 10 minutes after its command started rolls the command back and untaints the target.
#[test]
fn a_command_whose_replacement_is_not_ready_in_ten_minutes_is_rolled_back() {
    let changed = POOL
        .split("  - inline:")
        .find(|d| d.contains("kind: NodePool"))
        .unwrap()
        .replace("values: [c, m]", "values: [m]")
        .replace("LIMIT", "100")
        .replace("\n      ", "\n        ");
    let steps = format!(
        "  - {{ at: 5s, scale: default/app, replicas: 2 }}\n  - at: 12m\n    apply:\n      inline:{changed}\n"
    );
    let r = run(&scenario(
        "100",
        "{ registrationDelay: 11m }",
        &steps,
        "30m",
    ))
    .unwrap();
    let started = r
        .timeline
        .iter()
        .find(|e| e.kind == "disruption-started" && e.message.starts_with("drift"))
        .unwrap_or_else(|| panic!("no drift started: {:#?}", r.timeline));
    let failed = r
        .timeline
        .iter()
        .find(|e| e.kind == "disruption-failed")
        .unwrap_or_else(|| panic!("no command rolled back: {:#?}", r.timeline));
    assert!(
        failed.message.contains(&Failure::TimedOut.to_string()),
        "{}",
        failed.message
    );
    // The queue advances on the loop's wakes, at most 10 s apart.
    let waited = (failed.at - started.at).as_secs();
    assert!((600..=610).contains(&waited), "{failed:?} {started:?}");
}

/// A static NodePool (`spec.replicas`) keeps its nodes with no pods asking for them, through
/// rounds that would remove an empty node of any other pool, and a lower `replicas` drains
/// the extra one: the controller's static capacity loop, run by the simulator.
#[test]
fn a_static_nodepool_keeps_its_replicas_and_follows_a_change() {
    let pool = |replicas: u32| {
        format!(
            r#"
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {{ name: fixed }}
      spec:
        replicas: {replicas}
        template:
          spec:
            nodeClassRef: {{ group: karpenter.k8s.aws, kind: EC2NodeClass, name: default }}
            requirements:
              - {{ key: karpenter.k8s.aws/instance-family, operator: In, values: [m5] }}
              - {{ key: karpenter.sh/capacity-type, operator: In, values: [on-demand] }}
        disruption: {{ consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s }}"#
        )
    };
    let class = POOL.split("  - inline:").nth(1).unwrap();
    let scenario = format!(
        "until: 20m\ncloud: {{}}\nmanifests:\n  - inline:{class}  - inline:{}\nsteps:\n  - at: 10m\n    apply:\n      inline:{}\n",
        pool(2),
        pool(1).replace("\n      ", "\n        ")
    );
    let r = run(&scenario).unwrap_or_else(|e| panic!("{e}\n{scenario}"));
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    let launched: Vec<_> = r.timeline.iter().filter(|e| e.kind == "launched").collect();
    assert_eq!(launched.len(), 2, "{:#?}", r.timeline);
    assert!(
        launched.iter().all(|e| e.message.contains(" as m5.")),
        "{launched:?}"
    );
    // Nothing removed them before the change; one drained after it.
    let drained: Vec<_> = r.timeline.iter().filter(|e| e.kind == "draining").collect();
    assert_eq!(drained.len(), 1, "{:#?}", r.timeline);
    assert!(drained[0].at.as_secs() >= 600, "{:?}", drained[0]);
    assert!(
        drained[0].message.contains("scaled down"),
        "{}",
        drained[0].message
    );
    assert_eq!(r.summary.disruption_commands, 0);
}
