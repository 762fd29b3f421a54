//! A plan against a case's expectation, in the words of the case file: one line per
//! difference (`expect.placed.web-0.zone: expected "us-east-1b", got "us-east-1a"`), and the
//! whole plan written out beside them so a failure can be read without a debugger.

use std::collections::BTreeMap;
use std::fmt::Write;

use nodewright_core::labels;
use nodewright_core::model::Snapshot;
use nodewright_core::scheduling::{NewClaim, Plan, Target};

use crate::case::{Claim, Expect, Where, pod_at, pod_key};

/// Every difference between the plan and the expectation.
pub fn differences(plan: &Plan, s: &Snapshot, expect: &Expect) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(n) = expect.new_claims {
        same(&mut out, "expect.newClaims", &n, &plan.new_claims.len());
    }
    if let Some(cost) = expect.cost {
        same(&mut out, "expect.cost", &cents(cost), &cents(plan.cost));
    }
    if let Some(want) = &expect.pods_per_zone {
        let got = pods_per(
            plan,
            s,
            |c| Some(plan.zone_of(c.cheapest()?).to_string()),
            labels::ZONE,
        );
        same(&mut out, "expect.podsPerZone", want, &got);
    }
    if let Some(want) = &expect.pods_per_capacity_type {
        let ct = |c: &NewClaim| Some(c.cheapest()?.capacity_type.to_string());
        same(
            &mut out,
            "expect.podsPerCapacityType",
            want,
            &pods_per(plan, s, ct, labels::CAPACITY_TYPE),
        );
    }
    if let Some(want) = &expect.unplaced {
        let want_pods: Vec<String> = want.keys().map(|k| pod_key(k)).collect();
        let mut got_pods: Vec<String> = plan.unplaced.iter().map(|u| u.pod.clone()).collect();
        got_pods.sort();
        same(&mut out, "expect.unplaced (pods)", &want_pods, &got_pods);
        for (pod, reason) in want {
            let got = plan.unplaced.iter().find(|u| u.pod == pod_key(pod));
            for part in reason.parts() {
                if let Some(u) = got.filter(|u| !u.reason.contains(part.as_str())) {
                    out.push(format!(
                        "{}: expected a reason containing {part:?}, got {:?}",
                        pod_at("unplaced", pod),
                        u.reason
                    ));
                }
            }
        }
    }
    for (pod, want) in &expect.placed {
        out.extend(placement(plan, pod, want));
    }
    if let Some(claims) = &expect.claims {
        out.extend(claims_differ(plan, claims));
    }
    for (i, g) in expect.together.iter().enumerate() {
        let places = places_of(plan, g);
        if places.len() != 1 {
            out.push(format!(
                "expect.together[{i}]: expected one place for {g:?}, got {places:?}"
            ));
        }
    }
    for (i, g) in expect.apart.iter().enumerate() {
        let places = places_of(plan, g);
        if places.len() != g.len() {
            out.push(format!(
                "expect.apart[{i}]: expected {} places for {g:?}, got {places:?}",
                g.len()
            ));
        }
    }
    out
}

/// The places `pods` went to (see [`describe`]), each with the pods it took; a pod left
/// pending counts as a place of its own, so it never satisfies a group.
fn places_of(plan: &Plan, pods: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pod in pods {
        let key = pod_key(pod);
        let place = match plan.placements.iter().find(|p| p.pod == key) {
            Some(p) => describe(&p.target),
            None => format!("pending ({pod})"),
        };
        m.entry(place).or_default().push(pod.clone());
    }
    m
}

/// A difference when `want` and `got` print differently.
fn same(out: &mut Vec<String>, path: &str, want: &dyn std::fmt::Debug, got: &dyn std::fmt::Debug) {
    let (w, g) = (format!("{want:?}"), format!("{got:?}"));
    if w != g {
        out.push(format!("{path}: expected {w}, got {g}"));
    }
}

fn cents(x: f64) -> String {
    format!("{x:.4}")
}

/// Placed pods counted by the domain of where they go: a new claim's by `new`, a node's or
/// an in-flight claim's by its `key` label.
fn pods_per(
    plan: &Plan,
    s: &Snapshot,
    new: impl Fn(&NewClaim) -> Option<String>,
    key: &str,
) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for p in &plan.placements {
        let domain = match &p.target {
            Target::NewClaim(i) => new(&plan.new_claims[*i]),
            Target::Node(n) => s
                .nodes
                .iter()
                .find(|x| &x.name == n)
                .and_then(|x| x.labels.get(key).cloned()),
            Target::InFlight(n) => s
                .node_claims
                .iter()
                .find(|x| &x.name == n)
                .and_then(|x| x.labels.get(key).cloned()),
        };
        *m.entry(domain.unwrap_or_else(|| "<none>".into()))
            .or_insert(0) += 1;
    }
    m
}

fn placement(plan: &Plan, pod: &str, want: &Where) -> Vec<String> {
    let at = pod_at("placed", pod);
    let key = pod_key(pod);
    let Some(p) = plan.placements.iter().find(|p| p.pod == key) else {
        let why = plan.unplaced.iter().find(|u| u.pod == key);
        let why = why.map_or("not considered".to_string(), |u| u.reason.clone());
        return vec![format!("{at}: expected placed, got unplaced: {why}")];
    };
    let got = where_of(plan, &p.target);
    let mut out = Vec::new();
    let mut check = |field: &str, want: &Option<String>, got: &Option<String>| {
        if let Some(w) = want.as_ref().filter(|w| Some(*w) != got.as_ref()) {
            let g = got
                .as_deref()
                .map_or("nothing".to_string(), |g| format!("{g:?}"));
            out.push(format!(
                "{at}.{field}: expected {w:?}, got {g} ({})",
                describe(&p.target)
            ));
        }
    };
    check("node", &want.node, &got.node);
    check("nodeClaim", &want.node_claim, &got.node_claim);
    check("nodePool", &want.node_pool, &got.node_pool);
    check("instanceType", &want.instance_type, &got.instance_type);
    check("zone", &want.zone, &got.zone);
    check("capacityType", &want.capacity_type, &got.capacity_type);
    if want.on_new_claim() && !matches!(p.target, Target::NewClaim(_)) {
        out.push(format!(
            "{at}: expected a new claim, got {}",
            describe(&p.target)
        ));
    }
    out
}

fn where_of(plan: &Plan, target: &Target) -> Where {
    match target {
        Target::Node(n) => Where {
            node: Some(n.clone()),
            ..Where::default()
        },
        Target::InFlight(n) => Where {
            node_claim: Some(n.clone()),
            ..Where::default()
        },
        Target::NewClaim(i) => {
            let c = &plan.new_claims[*i];
            let o = c.cheapest();
            Where {
                new_claim: Some(true),
                node_pool: Some(c.nodepool.clone()),
                instance_type: o.map(|o| plan.name_of(o).to_string()),
                zone: o.map(|o| plan.zone_of(o).to_string()),
                capacity_type: o.map(|o| o.capacity_type.to_string()),
                node: None,
                node_claim: None,
            }
        }
    }
}

fn describe(t: &Target) -> String {
    match t {
        Target::Node(n) => format!("on node {n}"),
        Target::InFlight(n) => format!("on in-flight NodeClaim {n}"),
        Target::NewClaim(i) => format!("on new claim {i}"),
    }
}

/// Claims are matched by the pods they hold; every new claim must be listed.
fn claims_differ(plan: &Plan, claims: &[Claim]) -> Vec<String> {
    let mut out = Vec::new();
    let pods_of = |c: &NewClaim| {
        let mut p = c.pods.clone();
        p.sort();
        p
    };
    for (i, want) in claims.iter().enumerate() {
        let mut pods: Vec<String> = want.pods.iter().map(|p| pod_key(p)).collect();
        pods.sort();
        match plan.new_claims.iter().position(|c| pods_of(c) == pods) {
            None => out.push(format!(
                "expect.claims[{i}]: no new claim holds exactly {pods:?}"
            )),
            Some(k) => out.extend(claim_differs(plan, k, want, &format!("expect.claims[{i}]"))),
        }
    }
    if plan.new_claims.len() != claims.len() {
        out.push(format!(
            "expect.claims: expected {} new claims, got {}",
            claims.len(),
            plan.new_claims.len()
        ));
    }
    out
}

fn claim_differs(plan: &Plan, k: usize, want: &Claim, at: &str) -> Vec<String> {
    let mut out = Vec::new();
    let c = &plan.new_claims[k];
    let got = where_of(plan, &Target::NewClaim(k));
    let check =
        |out: &mut Vec<String>,
         field: &str,
         want: &dyn std::fmt::Debug,
         got: &dyn std::fmt::Debug| { same(out, &format!("{at}.{field}"), want, got) };
    if want.node_pool.is_some() {
        check(&mut out, "nodePool", &want.node_pool, &got.node_pool);
    }
    if want.instance_type.is_some() {
        check(
            &mut out,
            "instanceType",
            &want.instance_type,
            &got.instance_type,
        );
    }
    if want.zone.is_some() {
        check(&mut out, "zone", &want.zone, &got.zone);
    }
    if want.capacity_type.is_some() {
        check(
            &mut out,
            "capacityType",
            &want.capacity_type,
            &got.capacity_type,
        );
    }
    if let Some(types) = &want.instance_types {
        let names: Vec<&str> = c.instance_types.iter().map(|o| plan.name_of(o)).collect();
        check(&mut out, "instanceTypes", types, &names);
    }
    if let Some(relaxed) = want.min_values_relaxed {
        check(
            &mut out,
            "minValuesRelaxed",
            &relaxed,
            &c.min_values_relaxed,
        );
    }
    for (k, q) in want.requests.iter().flatten() {
        let amount = nodewright_api::quantity::parse_resource(k, q);
        match amount {
            Ok(a) if a == c.requests.get(k) => {}
            Ok(_) => check(&mut out, &format!("requests.{k}"), q, &c.requests.get(k)),
            Err(e) => out.push(format!("{at}.requests.{k}: {e}")),
        }
    }
    let have = plan.claim_requirements(c);
    for (j, line) in want.requirements.iter().flatten().enumerate() {
        if !have.contains(line) {
            out.push(format!(
                "{at}.requirements[{j}]: {line:?} is not among the claim's {have:#?}"
            ));
        }
    }
    out
}

/// The plan as a case would state it, for the failure message.
pub fn render(plan: &Plan) -> String {
    let mut out = String::new();
    for (i, c) in plan.new_claims.iter().enumerate() {
        let names: Vec<&str> = c.instance_types.iter().map(|o| plan.name_of(o)).collect();
        let first = c.cheapest().map_or("no option".to_string(), |o| {
            format!(
                "{} {} {} ${}/h",
                plan.name_of(o),
                plan.zone_of(o),
                o.capacity_type,
                o.price
            )
        });
        let _ = writeln!(
            out,
            "  new claim {i} ({}): {first}; options {names:?}",
            c.nodepool
        );
        let _ = writeln!(out, "    pods {:?}", c.pods);
        let _ = writeln!(out, "    requirements {:?}", c.requirements);
    }
    for p in &plan.placements {
        if !matches!(p.target, Target::NewClaim(_)) {
            let _ = writeln!(out, "  {} {}", p.pod, describe(&p.target));
        }
    }
    for u in &plan.unplaced {
        let _ = writeln!(out, "  {} unplaced: {}", u.pod, u.reason);
    }
    out
}
