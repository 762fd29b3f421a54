//! Placement groups from the SDK, the query, and the resolved condition and its caching.

use super::*;
use aws_sdk_ec2::types::{PlacementGroupState, PlacementStrategy, SpreadLevel};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Fixed {
    calls: AtomicUsize,
    fail: bool,
}

#[async_trait]
impl PlacementGroupSource for Fixed {
    async fn describe(&self, query: &Query) -> Result<Option<PlacementGroup>, AwsError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            return Err(AwsError::new("DescribePlacementGroups", "throttled"));
        }
        Ok(
            (query == &Query::Name("ml".into())).then(|| PlacementGroup {
                id: "pg-1".into(),
                name: "ml".into(),
                strategy: Strategy::Cluster,
                partition_count: 0,
                spread_level: None,
            }),
        )
    }
}

fn by_name(n: &str) -> PlacementGroupSelector {
    PlacementGroupSelector {
        name: Some(n.into()),
        ..Default::default()
    }
}

#[test]
fn sdk_groups_become_model_groups() {
    let g = SdkGroup::builder()
        .group_id("pg-0abc")
        .group_name("kafka")
        .strategy(PlacementStrategy::Partition)
        .partition_count(5)
        .state(PlacementGroupState::Available)
        .build();
    let m = from_sdk(&g).unwrap();
    assert_eq!(
        (
            m.id.as_str(),
            m.name.as_str(),
            m.strategy,
            m.partition_count
        ),
        ("pg-0abc", "kafka", Strategy::Partition, 5)
    );
    let spread = SdkGroup::builder()
        .group_id("pg-1")
        .strategy(PlacementStrategy::Spread)
        .spread_level(SpreadLevel::Host)
        .build();
    assert_eq!(
        from_sdk(&spread).unwrap().spread_level.as_deref(),
        Some("host")
    );
    assert!(from_sdk(&SdkGroup::builder().group_name("x").build()).is_none());
}

#[test]
fn the_partition_comes_from_the_instance_placement() {
    use aws_sdk_ec2::types::{Instance, Placement};
    let placed = |n: Option<i32>| {
        Instance::builder()
            .placement(Placement::builder().set_partition_number(n).build())
            .build()
    };
    assert_eq!(partition_of(&placed(Some(3))), Some(3));
    assert_eq!(partition_of(&placed(None)), None);
    assert_eq!(partition_of(&placed(Some(0))), None);
    assert_eq!(partition_of(&Instance::builder().build()), None);
}

#[test]
fn the_query_prefers_the_id() {
    let both = PlacementGroupSelector {
        name: Some("n".into()),
        id: Some("pg-1".into()),
        ..Default::default()
    };
    assert_eq!(Query::of(&both), Some(Query::Id("pg-1".into())));
    assert_eq!(Query::of(&by_name("n")), Some(Query::Name("n".into())));
    assert_eq!(Query::of(&PlacementGroupSelector::default()), None);
}

#[tokio::test]
async fn resolution_outcomes_and_caching() {
    let source = Arc::new(Fixed {
        calls: AtomicUsize::new(0),
        fail: false,
    });
    let groups = PlacementGroups::new(source.clone());
    assert_eq!(resolve(&groups, None).await, (None, None));
    let (g, ok) = resolve(&groups, Some(&by_name("ml"))).await;
    assert_eq!(g.map(|g| g.id), Some("pg-1".into()));
    assert_eq!(ok, Some(Ok(())));
    let (g, missing) = resolve(&groups, Some(&by_name("nope"))).await;
    assert_eq!(g, None);
    assert_eq!(missing.unwrap().unwrap_err().0, NOT_FOUND);
    let calls = source.calls.load(Ordering::SeqCst);
    // Outside a reconcile the answer is reused.
    assert!(groups.current(Some(&by_name("ml"))).await.is_some());
    assert_eq!(source.calls.load(Ordering::SeqCst), calls);

    let failing = PlacementGroups::new(Arc::new(Fixed {
        calls: AtomicUsize::new(0),
        fail: true,
    }));
    let (g, failed) = resolve(&failing, Some(&by_name("ml"))).await;
    assert_eq!(g, None);
    let (reason, message) = failed.unwrap().unwrap_err();
    assert_eq!(reason, RESOLUTION_FAILED);
    assert!(message.contains("\"ml\""), "{message}");
    assert_eq!(failing.current(Some(&by_name("ml"))).await, None);
}
