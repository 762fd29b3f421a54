use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ::kube::client::{Body, DynBody};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tower::{BoxError, Layer, Service};

use super::kube::KubeFaults;
use super::*;

fn plan(kube: f64, cloud: f64) -> FaultPlan {
    FaultPlan {
        kube,
        cloud,
        seed: 7,
        timeout: Duration::from_secs(1),
    }
}

#[test]
fn the_setting_reads_rates_seed_and_timeout() {
    let p: FaultPlan = "kube=0.1, cloud=0.25,seed=7,timeout=250ms".parse().unwrap();
    assert_eq!(
        p,
        FaultPlan {
            kube: 0.1,
            cloud: 0.25,
            seed: 7,
            timeout: Duration::from_millis(250)
        }
    );
    assert_eq!(p.to_string(), "kube=0.1,cloud=0.25,seed=7,timeout=0.25s");
}

#[test]
fn anything_but_a_deliberate_setting_is_refused() {
    for (value, says) in [
        ("1", "expected key=value"),
        ("true", "expected key=value"),
        ("kube=0.1", "names no seed"),
        ("kube=0,cloud=0,seed=1", "breaks nothing"),
        (
            "kube=1.5,seed=1",
            "kube=\"1.5\": expected a share from 0 to 1",
        ),
        ("kube=-0.1,seed=1", "expected a share"),
        ("kube=NaN,seed=1", "expected a share"),
        ("kube=0.1,seed=x", "seed=\"x\""),
        ("kube=0.1,seed=1,rate=0.2", "unknown key \"rate\""),
    ] {
        let e = value.parse::<FaultPlan>().unwrap_err().to_string();
        assert!(e.starts_with(ENV), "{value}: {e}");
        assert!(e.contains(says), "{value}: {e}");
    }
}

#[test]
fn an_edge_left_at_zero_gets_no_injector() {
    let m = Arc::new(Metrics::new());
    assert!(Injector::new("kube", &plan(0.0, 0.5), m.clone()).is_none());
    assert!(Injector::new("cloud", &plan(0.0, 0.5), m).is_some());
}

fn metric(m: &Metrics, line_start: &str) -> f64 {
    m.encode()
        .lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn draws_fail_the_planned_share_with_every_kind_and_are_counted() {
    let m = Arc::new(Metrics::new());
    let inj = Injector::new("kube", &plan(0.1, 0.0), m.clone()).unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..10_000 {
        if let Some(f) = inj.draw() {
            *seen.entry(f.label()).or_insert(0) += 1;
        }
    }
    let total: usize = seen.values().sum();
    assert!((850..1150).contains(&total), "{total}");
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(
        metric(&m, "nodewright_fault_injection_calls_total{edge=\"kube\"}"),
        10_000.0
    );
    let counted: f64 = Fault::ALL
        .iter()
        .map(|f| {
            metric(
                &m,
                &format!(
                    "nodewright_fault_injection_faults_total{{edge=\"kube\",fault=\"{}\"}}",
                    f.label()
                ),
            )
        })
        .sum();
    assert_eq!(counted, total as f64);
}

#[test]
fn the_same_seed_fails_the_same_calls() {
    let run = || {
        let inj = Injector::new("cloud", &plan(0.0, 0.3), Arc::new(Metrics::new())).unwrap();
        (0..200).map(|_| inj.draw()).collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

/// A server that answers 200 and counts the requests that reached it.
fn server(
    reached: Arc<AtomicUsize>,
) -> impl Service<
    Request<Body>,
    Response = Response<Box<DynBody>>,
    Error = BoxError,
    Future = impl Send + 'static,
> {
    tower::service_fn(move |_: Request<Body>| {
        reached.fetch_add(1, Ordering::SeqCst);
        async move {
            let body = http_body_util::Full::new(bytes::Bytes::from_static(b"{}"))
                .map_err(|never| -> BoxError { match never {} });
            Ok::<_, BoxError>(Response::new(Box::new(body) as Box<DynBody>))
        }
    })
}

/// Sends `n` requests through the layer at a rate of 1 (every call faulted) and returns,
/// per fault kind, the statuses or errors seen and whether the server got the call.
#[tokio::test(start_paused = true)]
async fn every_kube_fault_fails_the_call_as_a_server_or_network_would() {
    let reached = Arc::new(AtomicUsize::new(0));
    let m = Arc::new(Metrics::new());
    let inj = Injector::new("kube", &plan(1.0, 0.0), m).unwrap();
    let mut svc = KubeFaults(inj).layer(server(reached.clone()));
    let mut by_kind = std::collections::BTreeMap::new();
    for _ in 0..40 {
        let before = reached.load(Ordering::SeqCst);
        std::future::poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
        let started = tokio::time::Instant::now();
        let outcome = match svc.call(Request::new(Body::empty())).await {
            Ok(r) => {
                let status = r.status();
                let retry = r.headers().get("retry-after").is_some();
                let body = r.into_body().collect().await.unwrap().to_bytes();
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(v["code"], status.as_u16());
                format!("{status} {} retry-after={retry}", v["reason"])
            }
            Err(e) => e.to_string(),
        };
        let sent = reached.load(Ordering::SeqCst) > before;
        let waited = started.elapsed() >= Duration::from_secs(1);
        by_kind.insert(outcome, (sent, waited));
    }
    let expected: std::collections::BTreeMap<String, (bool, bool)> = [
        (
            format!(
                "{} \"TooManyRequests\" retry-after=true",
                StatusCode::TOO_MANY_REQUESTS
            ),
            (false, false),
        ),
        (
            format!(
                "{} \"InternalError\" retry-after=false",
                StatusCode::INTERNAL_SERVER_ERROR
            ),
            (false, false),
        ),
        (
            format!("injected fault ({ENV}): the call timed out"),
            (false, true),
        ),
        (
            format!("injected fault ({ENV}): the connection dropped before the response"),
            (true, false),
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(by_kind, expected);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_cloud_call_is_carried_out_and_the_others_are_not() {
    use nodewright_cloud::CloudProvider;
    use nodewright_cloud_sim::{SimCloud, SimCloudConfig};
    use nodewright_testkit::nodeclaim;
    let sim = Arc::new(SimCloud::new(SimCloudConfig::default()).unwrap());
    let inj = Injector::new("cloud", &plan(0.0, 1.0), Arc::new(Metrics::new())).unwrap();
    let faulty = cloud::FaultyCloud::wrap(sim.clone(), inj);
    let claim = nodeclaim::aws("default-abcde", "default", &["c5.large"], "on-demand");
    let claim = nodeclaim::requests(claim, serde_json::json!({"cpu": "1"}));
    let claim: nodewright_api::v1::nodeclaim::NodeClaim = serde_json::from_value(claim).unwrap();
    let mut errors = Vec::new();
    for _ in 0..40 {
        let e = faulty.create(&claim, None).await.unwrap_err();
        assert!(e.is_retryable(), "{e}");
        errors.push(e.to_string());
    }
    for kind in [
        "RequestLimitExceeded",
        "InternalError",
        "timed out",
        "dropped",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(kind)),
            "{kind}: {errors:?}"
        );
    }
    // Only the dropped calls launched: one instance per dropped-connection error.
    let dropped = errors.iter().filter(|e| e.contains("dropped")).count();
    assert!(dropped > 0, "{errors:?}");
    assert_eq!(sim.list().await.unwrap().len(), dropped);
}
