//! The cloud provider's families, fed by [`super::MeteredCloud`] and the provider's reports:
//! every call's `karpenter_cloudprovider_duration_seconds{controller, method, provider}` and
//! failures `karpenter_cloudprovider_errors_total{..., error}`; the errors the cloud returned
//! for launch attempts (`karpenter_cloudprovider_instance_launch_failures_total{zone, zone_id,
//! capacity_type, reason}`); terminations the cloud refused (upstream's
//! `karpenter_cloudprovider_instance_termination_failures_total`); and the batches its
//! batchers sent (`karpenter_cloudprovider_batcher_batch_size` and `_batch_time_seconds`,
//! labelled with the batcher); and the size of the user data last rendered for each
//! EC2NodeClass (`karpenter_ec2nodeclasses_userdata_bytes`), whose series goes once the
//! class is finalized.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::{Counters, Gauges, Histograms, durations, register, registered};

/// Calls per batch, up to the batchers' cap of 1000.
const BATCH_SIZE_BUCKETS: [f64; 12] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1000.0, 2000.0,
];

/// Seconds a batch stayed open: from the idle window (tens of milliseconds) to past the
/// longest window (one second).
const BATCH_TIME_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0,
];

fn batch_size_histogram() -> Histogram {
    Histogram::new(BATCH_SIZE_BUCKETS)
}

fn batch_time_histogram() -> Histogram {
    Histogram::new(BATCH_TIME_BUCKETS)
}

pub struct CloudMetrics {
    duration: Histograms,
    errors: Counters,
    launch_failures: Counters,
    termination_failures: Counters,
    batch_size: Histograms,
    batch_time: Histograms,
    user_data: Gauges,
}

impl CloudMetrics {
    pub(crate) fn register(r: &mut Registry) -> Self {
        CloudMetrics {
            duration: register(
                r,
                "karpenter_cloudprovider_duration_seconds",
                "Seconds each cloud provider call took, by calling loop, method and provider.",
                durations(),
            ),
            errors: registered(
                r,
                "karpenter_cloudprovider_errors",
                "Cloud provider calls that returned an error, by calling loop, method, provider and error.",
            ),
            launch_failures: registered(
                r,
                "karpenter_cloudprovider_instance_launch_failures",
                "Errors the cloud returned for launch attempts, by zone, zone id, capacity type and error code.",
            ),
            termination_failures: registered(
                r,
                "karpenter_cloudprovider_instance_termination_failures",
                "Terminations the cloud refused, by zone and zone id.",
            ),
            batch_size: register(
                r,
                "karpenter_cloudprovider_batcher_batch_size",
                "Requests merged into one cloud call, by batcher.",
                Family::new_with_constructor(batch_size_histogram),
            ),
            batch_time: register(
                r,
                "karpenter_cloudprovider_batcher_batch_time_seconds",
                "Seconds a batcher waited to gather requests before its call, by batcher.",
                Family::new_with_constructor(batch_time_histogram),
            ),
            user_data: registered(
                r,
                "karpenter_ec2nodeclasses_userdata_bytes",
                "Size in bytes of the rendered user data (raw, pre-base64) for the EC2NodeClass",
            ),
        }
    }

    /// The user data last rendered for `nodeclass` is `bytes` long.
    pub fn user_data_rendered(&self, nodeclass: &str, bytes: usize) {
        self.user_data
            .get_or_create(&vec![("nodeclass", nodeclass.to_owned())])
            .set(bytes as f64);
    }

    /// `nodeclass` is gone: so is its user data series.
    pub fn node_class_finalized(&self, nodeclass: &str) {
        self.user_data
            .remove(&vec![("nodeclass", nodeclass.to_owned())]);
    }

    /// One call by `controller` into the cloud provider; `error` names the failure kind when
    /// it failed.
    pub fn call(
        &self,
        controller: &str,
        method: &str,
        provider: &str,
        seconds: f64,
        error: Option<&str>,
    ) {
        let mut labels = vec![
            ("controller", controller.to_owned()),
            ("method", method.to_owned()),
            ("provider", provider.to_owned()),
        ];
        self.duration.get_or_create(&labels).observe(seconds);
        if let Some(error) = error {
            labels.push(("error", error.to_owned()));
            self.errors.get_or_create(&labels).inc();
        }
    }

    /// One error the cloud returned for a launch attempt.
    pub fn launch_failure(&self, zone: &str, zone_id: &str, capacity_type: &str, reason: &str) {
        self.launch_failures
            .get_or_create(&vec![
                ("zone", zone.to_owned()),
                ("zone_id", zone_id.to_owned()),
                ("capacity_type", capacity_type.to_owned()),
                ("reason", reason.to_owned()),
            ])
            .inc();
    }

    /// A termination the cloud refused.
    pub fn termination_failure(&self, zone: &str, zone_id: &str) {
        self.termination_failures
            .get_or_create(&vec![
                ("zone", zone.to_owned()),
                ("zone_id", zone_id.to_owned()),
            ])
            .inc();
    }

    /// One batch `batcher` sent: how many calls it merged and how long it stayed open.
    pub fn batch_flushed(&self, batcher: &str, size: usize, window_seconds: f64) {
        let labels = vec![("batcher", batcher.to_owned())];
        self.batch_size.get_or_create(&labels).observe(size as f64);
        self.batch_time
            .get_or_create(&labels)
            .observe(window_seconds);
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::{Metrics, has, samples};

    #[test]
    fn cloudprovider_errors_are_counted_only_on_failure() {
        let m = Metrics::new();
        m.cloud.call("", "Create", "sim", 0.1, None);
        let ice = Some("InsufficientCapacityError");
        m.cloud.call("", "Create", "sim", 0.2, ice);
        assert!(has(
            &m,
            r#"karpenter_cloudprovider_duration_seconds_count{controller="",method="Create",provider="sim"} 2"#
        ));
        assert!(has(
            &m,
            r#"karpenter_cloudprovider_errors_total{controller="",method="Create",provider="sim",error="InsufficientCapacityError"} 1"#
        ));
    }

    #[test]
    fn termination_failures_count_by_zone() {
        let m = Metrics::new();
        m.cloud.termination_failure("us-east-1a", "use1-az1");
        m.cloud.termination_failure("us-east-1a", "use1-az1");
        m.cloud.termination_failure("us-east-1b", "");
        let s = samples(&m);
        for line in [
            r#"karpenter_cloudprovider_instance_termination_failures_total{zone="us-east-1a",zone_id="use1-az1"} 2"#,
            r#"karpenter_cloudprovider_instance_termination_failures_total{zone="us-east-1b",zone_id=""} 1"#,
        ] {
            assert!(s.iter().any(|l| l == line), "{line} missing from {s:#?}");
        }
    }

    #[test]
    fn batches_are_observed_per_batcher() {
        let m = Metrics::new();
        m.cloud.batch_flushed("create_fleet", 3, 0.04);
        m.cloud.batch_flushed("create_fleet", 1, 0.2);
        let s = samples(&m);
        for line in [
            r#"karpenter_cloudprovider_batcher_batch_size_sum{batcher="create_fleet"} 4.0"#,
            r#"karpenter_cloudprovider_batcher_batch_size_count{batcher="create_fleet"} 2"#,
            r#"karpenter_cloudprovider_batcher_batch_size_bucket{le="2.0",batcher="create_fleet"} 1"#,
            r#"karpenter_cloudprovider_batcher_batch_size_bucket{le="4.0",batcher="create_fleet"} 2"#,
            r#"karpenter_cloudprovider_batcher_batch_time_seconds_count{batcher="create_fleet"} 2"#,
            r#"karpenter_cloudprovider_batcher_batch_time_seconds_bucket{le="0.05",batcher="create_fleet"} 1"#,
            r#"karpenter_cloudprovider_batcher_batch_time_seconds_bucket{le="0.25",batcher="create_fleet"} 2"#,
        ] {
            assert!(s.iter().any(|l| l == line), "{line} missing from {s:#?}");
        }
    }

    #[test]
    fn a_class_has_its_user_data_size_until_it_is_finalized() {
        use nodewright_cloud::ProviderObserver;
        let m = Metrics::new();
        let observer: &dyn ProviderObserver = &m;
        observer.user_data_rendered("default", 1200);
        observer.user_data_rendered("default", 1500);
        let line = r#"karpenter_ec2nodeclasses_userdata_bytes{nodeclass="default"} 1500.0"#;
        assert!(samples(&m).iter().any(|l| l == line), "{:#?}", samples(&m));
        m.cloud.node_class_finalized("default");
        assert!(
            !samples(&m)
                .iter()
                .any(|l| l.starts_with("karpenter_ec2nodeclasses_userdata_bytes")),
            "{:#?}",
            samples(&m)
        );
    }

    #[test]
    fn the_providers_reports_reach_the_families() {
        use nodewright_cloud::{BatchFlushed, ProviderObserver, TerminationFailure};
        let m = Metrics::new();
        let observer: &dyn ProviderObserver = &m;
        observer.termination_failed(&TerminationFailure {
            zone: "us-east-1c".into(),
            zone_id: "use1-az3".into(),
        });
        observer.batch_flushed(&BatchFlushed {
            batcher: "create_fleet",
            size: 5,
            window_seconds: 0.1,
        });
        let s = samples(&m);
        for line in [
            r#"karpenter_cloudprovider_instance_termination_failures_total{zone="us-east-1c",zone_id="use1-az3"} 1"#,
            r#"karpenter_cloudprovider_batcher_batch_size_sum{batcher="create_fleet"} 5.0"#,
            r#"karpenter_cloudprovider_batcher_batch_time_seconds_sum{batcher="create_fleet"} 0.1"#,
        ] {
            assert!(s.iter().any(|l| l == line), "{line} missing from {s:#?}");
        }
    }
}
