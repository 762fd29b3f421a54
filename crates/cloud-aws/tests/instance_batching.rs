//! Lookups and terminations that arrive together share one DescribeInstances and one
//! TerminateInstances, against moto behind a counting proxy; each caller still gets the answer
//! about its own instance, including EC2's refusal for an instance it will not terminate.

#[macro_use]
mod support;

use std::sync::Arc;

use aws_sdk_ec2::types::{InstanceType, ResourceType};
use futures::future::join_all;
use nodewright_cloud::{CloudError, CloudProvider, InstanceState, tags};
use nodewright_cloud_aws::AwsClients;
use support::Moto;
use support::proxy::{self, Proxy};

/// `n` running instances of the cluster, as (provider id, instance id).
async fn instances(c: &AwsClients, cluster: &str, n: i32) -> Vec<(String, String)> {
    let seed = support::seed(c, cluster).await;
    let image = support::copy_image(c, &support::unique("img"), &[]).await;
    let cluster_tag = tags::cluster(cluster);
    let out = c
        .ec2
        .run_instances()
        .image_id(image)
        .instance_type(InstanceType::M5Large)
        .subnet_id(&seed.subnets[0].0)
        .min_count(n)
        .max_count(n)
        .tag_specifications(support::tags(
            ResourceType::Instance,
            &support::tag_map(&[(tags::NODEPOOL, "default"), (&cluster_tag, "owned")]),
        ))
        .send()
        .await
        .expect("RunInstances");
    let mut v: Vec<(String, String)> = out
        .instances()
        .iter()
        .map(|i| {
            let id = i.instance_id().unwrap().to_string();
            let zone = i.placement().unwrap().availability_zone().unwrap();
            (format!("aws:///{zone}/{id}"), id)
        })
        .collect();
    v.sort();
    v
}

/// The provider through a proxy in front of moto that answers with `reply` where it gives an
/// answer, reporting to a recorder.
async fn cloud_via(
    moto: &Moto,
    cluster: &str,
    reply: proxy::Reply,
) -> (
    nodewright_cloud_aws::AwsCloud,
    Proxy,
    Arc<support::Recorder>,
) {
    let proxy = proxy::start_replies(&moto.url, reply, proxy::unchanged()).await;
    let via = Moto {
        url: proxy.url.clone(),
        clients: support::clients_via(&proxy.url).await,
    };
    let cloud = support::cloud(&via, cluster, "", "1.32");
    let recorder = Arc::new(support::Recorder::default());
    cloud.observe_with(recorder.clone());
    (cloud, proxy, recorder)
}

fn sizes(r: &support::Recorder, batcher: &str) -> Vec<usize> {
    r.batches
        .lock()
        .unwrap()
        .iter()
        .filter(|b| b.batcher == batcher)
        .map(|b| b.size)
        .collect()
}

#[tokio::test]
async fn concurrent_gets_and_terminations_share_one_call_each() {
    let moto = moto_or_skip!("concurrent_gets_and_terminations_share_one_call_each");
    let cluster = support::unique("ibatch");
    let ours = instances(&moto.clients, &cluster, 5).await;
    let (cloud, proxy, recorder) = cloud_via(&moto, &cluster, Arc::new(|_| None)).await;

    // Five lookups at once: one DescribeInstances naming all five.
    let got = join_all(ours.iter().map(|(pid, _)| cloud.get(pid))).await;
    for ((pid, _), g) in ours.iter().zip(&got) {
        let i = g.as_ref().expect("get");
        assert_eq!(&i.provider_id, pid, "each caller gets its own instance");
        assert_eq!(i.instance_type, "m5.large");
        assert_eq!(i.state, InstanceState::Running);
    }
    let describes = proxy.sent("Action=DescribeInstances&");
    assert_eq!(describes.len(), 1, "{describes:#?}");
    for (_, id) in &ours {
        assert!(
            describes[0].contains(id.as_str()),
            "{id} in {}",
            describes[0]
        );
    }
    assert_eq!(sizes(&recorder, "describe_instances"), vec![5]);

    // Three terminations at once: one lookup and one TerminateInstances for the three.
    let doomed = &ours[..3];
    let deleted = join_all(doomed.iter().map(|(pid, _)| cloud.delete(pid))).await;
    assert!(deleted.iter().all(Result::is_ok), "{deleted:?}");
    let terminates = proxy.sent("Action=TerminateInstances&");
    assert_eq!(terminates.len(), 1, "{terminates:#?}");
    for (_, id) in doomed {
        assert!(terminates[0].contains(id.as_str()));
    }
    assert_eq!(proxy.sent("Action=DescribeInstances&").len(), 2);
    assert_eq!(sizes(&recorder, "terminate_instances"), vec![3]);
    assert_eq!(sizes(&recorder, "describe_instances"), vec![5, 3]);

    // The terminated ones are gone, the others are untouched; still one call for all five.
    let after = join_all(ours.iter().map(|(pid, _)| cloud.get(pid))).await;
    for ((pid, _), g) in ours.iter().zip(&after) {
        if doomed.iter().any(|(d, _)| d == pid) {
            assert!(
                matches!(g, Err(CloudError::NotFound { provider_id }) if provider_id == pid),
                "{g:?}"
            );
        } else {
            assert_eq!(g.as_ref().expect("untouched").state, InstanceState::Running);
        }
    }
    assert_eq!(proxy.sent("Action=DescribeInstances&").len(), 3);
}

#[tokio::test]
async fn one_unknown_or_protected_instance_does_not_spoil_the_others() {
    let moto = moto_or_skip!("one_unknown_or_protected_instance_does_not_spoil_the_others");
    let cluster = support::unique("ibatch-err");
    let ours = instances(&moto.clients, &cluster, 3).await;
    let protected = ours[2].1.clone();
    // EC2 refuses any TerminateInstances naming the protected instance, as it does for one
    // with termination protection.
    let refused = protected.clone();
    let reply: proxy::Reply = Arc::new(move |form: &str| {
        (form.contains("Action=TerminateInstances&") && form.contains(refused.as_str())).then(
            || {
                (
                    400,
                    proxy::error_xml(
                        "OperationNotPermitted",
                        &format!("The instance '{refused}' may not be terminated."),
                    ),
                )
            },
        )
    });
    let (cloud, proxy, recorder) = cloud_via(&moto, &cluster, reply).await;

    // An id EC2 has never seen fails the shared call; each instance is then asked for alone.
    let zone = ours[0].0.split('/').nth(3).unwrap().to_string();
    let unknown = format!("aws:///{zone}/i-0123456789abcdef0");
    let pids = [ours[0].0.clone(), unknown.clone(), ours[1].0.clone()];
    let got = join_all(pids.iter().map(|p| cloud.get(p))).await;
    assert_eq!(got[0].as_ref().expect("known").provider_id, ours[0].0);
    assert!(
        matches!(&got[1], Err(CloudError::NotFound { provider_id }) if *provider_id == unknown),
        "{:?}",
        got[1]
    );
    assert_eq!(got[2].as_ref().expect("known").provider_id, ours[1].0);
    let describes = proxy.sent("Action=DescribeInstances&");
    assert_eq!(describes.len(), 4, "one shared call, then one per instance");

    // The protected instance's refusal is its own; the other two are terminated.
    let deleted = join_all(ours.iter().map(|(pid, _)| cloud.delete(pid))).await;
    assert!(deleted[0].is_ok() && deleted[1].is_ok(), "{deleted:?}");
    assert!(
        matches!(&deleted[2], Err(e) if e.to_string().contains("may not be terminated")),
        "{:?}",
        deleted[2]
    );
    let terminates = proxy.sent("Action=TerminateInstances&");
    assert_eq!(
        terminates.len(),
        4,
        "one shared call, then one per instance"
    );
    assert_eq!(sizes(&recorder, "terminate_instances"), vec![3]);
    let failures = recorder.terminations.lock().unwrap().clone();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].zone, zone);
    for (pid, _) in &ours[..2] {
        assert!(matches!(
            cloud.get(pid).await,
            Err(CloudError::NotFound { .. })
        ));
    }
    assert_eq!(
        cloud.get(&ours[2].0).await.expect("protected").state,
        InstanceState::Running
    );
}
