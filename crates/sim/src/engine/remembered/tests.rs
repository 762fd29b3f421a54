//! When the kept compile and remembered answers are reused, and when they are not.

use nodewright_core::disruption::bench::cluster;
use nodewright_core::disruption::simulate::prepare;
use nodewright_core::resources::CPU;
use std::sync::Arc;

use super::*;
use nodewright_core::disruption::simulate::Job;

/// A job per node: the node gone, its pods moved.
fn jobs(s: &Snapshot) -> Vec<Job<'_>> {
    s.nodes
        .iter()
        .take(12)
        .map(|n| Job {
            without: [n.name.clone()].into_iter().collect(),
            pods: s
                .pods
                .iter()
                .filter(|p| p.node_name.as_deref() == Some(n.name.as_str()))
                .map(|p| &**p)
                .collect(),
        })
        .collect()
}

fn plain(s: &Snapshot) -> Vec<Simulation> {
    let engine = EngineSimulator::default();
    jobs(s)
        .iter()
        .map(|j| engine.simulate(s, Purpose::Consolidation, &j.without, &j.pods))
        .collect()
}

#[test]
fn commands_starting_within_a_generation_change_the_kept_compile() {
    let memo = RefCell::new(Memo::default());
    let first = cluster(20, 120, 7);
    {
        let sim = Remembering::new(&memo, 1, &InFlight::default(), &first);
        prepare(&sim, &first, Purpose::Consolidation).simulate_all(&jobs(&first));
    }
    // Same generation, commands now running on every node: no node takes moving pods.
    let mut held = InFlight::default();
    held.targets
        .extend(first.node_claims.iter().map(|c| c.name.clone()));
    let view = held.view(&first);
    let expected = plain(&view);
    let sim = Remembering::new(&memo, 1, &held, &view);
    assert_eq!(
        prepare(&sim, &view, Purpose::Consolidation).simulate_all(&jobs(&view)),
        expected
    );
}

#[test]
fn a_view_warmed_on_another_thread_is_not_compiled_again() {
    let memo = RefCell::new(Memo::default());
    let view = cluster(20, 120, 7);
    let expected = plain(&view);
    let sim = Remembering::new(&memo, 1, &InFlight::default(), &view);
    let warm_up = sim.warm_up(false);
    std::thread::scope(|scope| {
        scope.spawn(|| warm_up(&view));
    });
    let nodes = memo.borrow().nodes.clone();
    // Nodes looked up by compiles, and compiles answered whole from the kept one.
    let counts = NodeCache::counts;
    let (looked_up, reused) = counts(&nodes.lock().unwrap());
    assert!(looked_up > 0, "the warm-up compiled the view");
    assert_eq!(
        prepare(&sim, &view, Purpose::Consolidation).simulate_all(&jobs(&view)),
        expected
    );
    assert_eq!(counts(&nodes.lock().unwrap()), (looked_up, reused + 1));
}

#[test]
fn an_answer_is_not_reused_once_the_closed_nodes_change() {
    // Most nodes had a pod event a minute ago, under a 5-minute consolidateAfter: a
    // consolidation keeps moving pods off them until it passes.
    let mut early = cluster(20, 120, 7);
    for np in &mut early.nodepools {
        np.disruption.consolidate_after = Some(std::time::Duration::from_secs(300));
    }
    let minute_ago = nodewright_core::time::Timestamp(early.now.0 - 60_000);
    for c in early
        .node_claims
        .iter_mut()
        .filter(|c| !c.name.ends_with('0'))
        .map(Arc::make_mut)
    {
        c.last_pod_event_time = Some(minute_ago);
    }
    let mut late = early.clone();
    late.now = nodewright_core::time::Timestamp(early.now.0 + 300_000);
    let (before, after) = (plain(&early), plain(&late));
    assert_ne!(before, after, "closing the nodes changes some answer");
    let memo = RefCell::new(Memo::default());
    for (view, expected) in [(&early, &before), (&late, &after)] {
        // The same generation: only the clock moved.
        let sim = Remembering::new(&memo, 1, &InFlight::default(), view);
        for (j, e) in jobs(view).iter().zip(expected) {
            let got = sim.simulate(view, Purpose::Consolidation, &j.without, &j.pods);
            assert_eq!(&got, e, "{:?}", j.without);
        }
    }
}

#[test]
fn answers_are_reused_within_a_generation_only() {
    let memo = RefCell::new(Memo::default());
    let first = cluster(20, 120, 7);
    let expected = plain(&first);
    {
        let sim = Remembering::new(&memo, 1, &InFlight::default(), &first);
        let prepared = prepare(&sim, &first, Purpose::Consolidation);
        assert_eq!(prepared.simulate_all(&jobs(&first)), expected);
        for (j, e) in jobs(&first).iter().zip(&expected) {
            assert_eq!(
                &sim.simulate(&first, Purpose::Consolidation, &j.without, &j.pods),
                e
            );
        }
        assert_eq!(memo.borrow().reused, 0);
        // Asked again within the generation: every answer comes from memory.
        for (j, e) in jobs(&first).iter().zip(&expected) {
            assert_eq!(
                &sim.simulate(&first, Purpose::Consolidation, &j.without, &j.pods),
                e
            );
        }
        assert_eq!(memo.borrow().reused, expected.len() as u64);
    }
    // A new generation, the same jobs over nodes with no room left: nothing remembered may answer.
    let mut second = first.clone();
    for n in second.nodes.iter_mut().map(Arc::make_mut) {
        n.allocatable.set(CPU, 1);
    }
    let expected = plain(&second);
    assert_ne!(expected, plain(&first));
    let sim = Remembering::new(&memo, 2, &InFlight::default(), &second);
    let before = memo.borrow().reused;
    for (j, e) in jobs(&second).iter().zip(&expected) {
        assert_eq!(
            &sim.simulate(&second, Purpose::Consolidation, &j.without, &j.pods),
            e
        );
    }
    assert_eq!(memo.borrow().reused, before);
    // Another snapshot than the view passes through, remembered or not.
    let other = cluster(20, 120, 7);
    for (j, e) in jobs(&other).iter().zip(plain(&other)) {
        assert_eq!(
            sim.simulate(&other, Purpose::Consolidation, &j.without, &j.pods),
            e
        );
    }
    assert_eq!(memo.borrow().reused, before);
}
