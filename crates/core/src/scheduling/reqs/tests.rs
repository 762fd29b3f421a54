use super::*;

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values)
}

fn reqs(i: &mut Interner, items: &[Requirement]) -> Reqs {
    compile_all(items, i)
}

#[test]
fn in_and_not_in_intersect() {
    let mut i = Interner::new();
    let node = reqs(&mut i, &[req("zone", Operator::In, &["a", "b"])]);
    let ok = reqs(&mut i, &[req("zone", Operator::NotIn, &["a"])]);
    let bad = reqs(&mut i, &[req("zone", Operator::NotIn, &["a", "b"])]);
    assert!(node.intersects(&ok, &i).is_ok());
    assert!(node.intersects(&bad, &i).is_err());
    let mut merged = node.clone();
    merged.merge(&ok, &i);
    assert_eq!(
        *merged.get(i.get("zone").unwrap()).unwrap().values,
        [i.get("b").unwrap()]
    );
}

#[test]
fn negative_constraints_never_conflict_with_each_other() {
    let mut i = Interner::new();
    let a = reqs(&mut i, &[req("gpu", Operator::DoesNotExist, &[])]);
    let b = reqs(&mut i, &[req("gpu", Operator::DoesNotExist, &[])]);
    assert!(a.intersects(&b, &i).is_ok());
    let c = reqs(&mut i, &[req("gpu", Operator::In, &["x"])]);
    assert!(a.intersects(&c, &i).is_err());
}

#[test]
fn numeric_bounds() {
    let mut i = Interner::new();
    let gt = reqs(&mut i, &[req("cpu", Operator::Gt, &["4"])]);
    let gte = reqs(&mut i, &[req("cpu", Operator::Gte, &["4"])]);
    let lte = reqs(&mut i, &[req("cpu", Operator::Lte, &["4"])]);
    let four = reqs(&mut i, &[req("cpu", Operator::In, &["4"])]);
    let eight = reqs(&mut i, &[req("cpu", Operator::In, &["8"])]);
    assert!(four.intersects(&gt, &i).is_err());
    assert!(eight.intersects(&gt, &i).is_ok());
    assert!(four.intersects(&gte, &i).is_ok());
    assert!(four.intersects(&lte, &i).is_ok());
    assert!(eight.intersects(&lte, &i).is_err());
    // Gt 4 and Lt 5 leave no integer.
    let mut both = gt.clone();
    both.merge(&reqs(&mut i, &[req("cpu", Operator::Lt, &["5"])]), &i);
    assert!(both.get(i.get("cpu").unwrap()).unwrap().is_empty());
    let nonnumeric = reqs(&mut i, &[req("cpu", Operator::In, &["big"])]);
    assert!(nonnumeric.intersects(&gt, &i).is_err());
}

#[test]
fn compatible_rejects_undefined_custom_labels() {
    let mut i = Interner::new();
    let node = reqs(&mut i, &[req("zone", Operator::In, &["a"])]);
    let pod = reqs(&mut i, &[req("team", Operator::In, &["x"])]);
    let err = node.compatible(&pod, &i, &|_| false).unwrap_err();
    assert!(err.describe(&i).contains("team is not defined"));
    assert!(node.compatible(&pod, &i, &|_| true).is_ok());
    let neg = reqs(&mut i, &[req("team", Operator::NotIn, &["x"])]);
    assert!(node.compatible(&neg, &i, &|_| false).is_ok());
}

#[test]
fn legacy_and_beta_keys_normalize() {
    let mut i = Interner::new();
    let a = reqs(
        &mut i,
        &[req(
            "karpenter.sh/provisioner-name",
            Operator::In,
            &["default"],
        )],
    );
    assert!(a.get(i.get(labels::NODEPOOL).unwrap()).is_some());
    let b = reqs(
        &mut i,
        &[req(
            "failure-domain.beta.kubernetes.io/zone",
            Operator::In,
            &["z"],
        )],
    );
    assert!(b.get(i.get(labels::ZONE).unwrap()).is_some());
}

#[test]
fn overlaps_agrees_with_intersect() {
    let mut i = Interner::new();
    let sets = [
        ValueSet::of(vec![i.intern("1"), i.intern("2")]),
        ValueSet::of(vec![i.intern("2"), i.intern("3")]),
        ValueSet::of(vec![i.intern("5")]),
        ValueSet::not_in(vec![i.intern("2")]),
        ValueSet::exists(),
        ValueSet::does_not_exist(),
        ValueSet::exists().with_bounds(Some(1), None),
        ValueSet::exists().with_bounds(None, Some(3)),
        ValueSet::exists().with_bounds(Some(2), None),
    ];
    for a in &sets {
        for b in &sets {
            assert_eq!(
                a.overlaps(b, &i),
                !a.intersect(b, &i).is_empty(),
                "{a:?} vs {b:?}"
            );
        }
    }
}

#[test]
fn min_values_keep_the_largest() {
    let mut i = Interner::new();
    let mut a = Reqs::new();
    let k = i.intern("k");
    a.add(k, ValueSet::exists(), Some(2), &i);
    a.add(k, ValueSet::exists(), Some(5), &i);
    assert_eq!(a.get_req(k).unwrap().min_values, Some(5));
}

#[test]
fn a_requirement_is_48_bytes_so_a_node_of_30_labels_holds_under_1_5_kib() {
    // Each node's requirements are kept per compile that holds the node (the node cache, the
    // consolidation's prepared compile): at 2,000 nodes every byte here is some 60 KB a copy.
    assert_eq!(std::mem::size_of::<Req>(), 48);
    assert_eq!(std::mem::size_of::<ValueSet>(), 32);
    let mut i = Interner::new();
    let labels: std::collections::BTreeMap<String, String> = (0..30)
        .map(|n| (format!("example.com/key-{n}"), format!("value-{n}")))
        .collect();
    let r = Reqs::from_labels(&labels, &mut i);
    assert_eq!(r.items.len(), 30);
    assert_eq!(r.items.capacity(), 30, "one slot a label, none spare");
}

#[test]
fn bounds_are_held_only_when_set_so_equal_sets_are_equal() {
    let mut i = Interner::new();
    let a = ValueSet::exists().with_bounds(Some(2), None);
    let b = ValueSet::exists().with_bounds(None, Some(9));
    let both = a.intersect(&b, &i);
    assert_eq!((both.gt(), both.lt()), (Some(2), Some(9)));
    assert_eq!(
        ValueSet::exists().with_bounds(None, None),
        ValueSet::exists()
    );
    // Bounds that leave nothing between them make the set empty.
    let none = a.intersect(&ValueSet::exists().with_bounds(None, Some(3)), &i);
    assert!(none.is_empty());
    assert_eq!(none, ValueSet::does_not_exist());
    let five = i.intern("5");
    assert!(a.has(five, &i) && !b.has(i.intern("10"), &i));
}
