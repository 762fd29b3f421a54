use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    settings: Settings,
}

fn parse(args: &[&str]) -> Result<Settings, clap::Error> {
    let mut argv = vec!["nodewright"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).map(|c| c.settings)
}

#[test]
fn defaults_match_upstream() {
    let s = parse(&["--cluster-name", "prod"]).unwrap();
    assert_eq!(s, Settings::with_cluster_name("prod"));
    assert!(s.leader_election_enabled());
    assert_eq!(s.validate(), Ok(()));
}

#[test]
fn cluster_name_is_required() {
    // Only meaningful when the variable is not set in the test environment.
    if std::env::var_os("CLUSTER_NAME").is_none() {
        assert!(parse(&[]).is_err());
    }
    assert!(Settings::with_cluster_name(" ").validate().is_err());
}

#[test]
fn flags_override_defaults() {
    let s = parse(&[
        "--cluster-name=c",
        "--batch-idle-duration=500ms",
        "--batch-max-duration=1m30s",
        "--feature-gates=SpotToSpotConsolidation=true",
        "--disable-leader-election",
        "--metrics-port=9000",
        "--vm-memory-overhead-percent=0.1",
        "--isolated-vpc=true",
        "--log-level=debug",
    ])
    .unwrap();
    assert_eq!(s.batch_idle_duration, Duration::from_millis(500));
    assert_eq!(s.batch_max_duration, Duration::from_secs(90));
    assert!(s.feature_gates.spot_to_spot_consolidation);
    assert!(
        s.feature_gates.reserved_capacity,
        "unnamed gates keep defaults"
    );
    assert!(s.disable_leader_election);
    assert!(!s.leader_election_enabled());
    assert_eq!(s.metrics_port, 9000);
    assert_eq!(s.vm_memory_overhead_percent, 0.1);
    assert!(s.isolated_vpc);
    assert_eq!(s.log_level, "debug");
}

#[test]
fn bad_values_are_rejected_with_the_reason() {
    let e = parse(&["--cluster-name=c", "--feature-gates=Drift=true"]).unwrap_err();
    assert!(
        e.to_string().contains("unknown feature gate \"Drift\""),
        "{e}"
    );
    let e = parse(&["--cluster-name=c", "--vm-memory-overhead-percent=-1"]).unwrap_err();
    assert!(e.to_string().contains(">= 0"), "{e}");
    let e = parse(&["--cluster-name=c", "--log-level=verbose"]).unwrap_err();
    assert!(e.to_string().contains("verbose"), "{e}");
    let e = parse(&["--cluster-name=c", "--ami-refresh-interval=30s"]).unwrap_err();
    assert!(e.to_string().contains("at least 1m"), "{e}");
    let mut s = Settings::with_cluster_name("c");
    s.batch_idle_duration = Duration::from_secs(20);
    assert!(matches!(
        s.validate(),
        Err(SettingsError::Invalid {
            field: "BATCH_IDLE_DURATION",
            ..
        })
    ));
    s = Settings::with_cluster_name("c");
    s.cluster_endpoint = "not a url".into();
    assert!(s.validate().is_err());
}

#[test]
fn what_nodewright_does_not_do_stops_it_at_start() {
    for (args, field, what) in [
        (
            "--feature-gates=NodeOverlay=true",
            "FEATURE_GATES",
            "NodeOverlay",
        ),
        (
            "--feature-gates=CapacityBuffer=true",
            "FEATURE_GATES",
            "CapacityBuffer",
        ),
        (
            "--aws-feature-gates=NodeClassCEL=true",
            "AWS_FEATURE_GATES",
            "NodeClassCEL",
        ),
        (
            "--ignore-dra-requests=false",
            "IGNORE_DRA_REQUESTS",
            "false",
        ),
        ("--enable-profiling", "ENABLE_PROFILING", "pprof"),
        (
            "--log-output-paths=/var/log/k.log",
            "LOG_OUTPUT_PATHS",
            "/var/log/k.log",
        ),
        (
            "--log-error-output-paths=stdout",
            "LOG_ERROR_OUTPUT_PATHS",
            "stdout",
        ),
        (
            "--scheduler-config={}",
            "SCHEDULER_CONFIG",
            "topology spread",
        ),
    ] {
        let s = parse(&["--cluster-name=c", args]).unwrap();
        match s.validate() {
            Err(SettingsError::Invalid { field: f, reason }) => {
                assert_eq!(f, field, "{args}");
                assert!(
                    reason.contains(what) && reason.contains("not implemented"),
                    "{reason}"
                );
            }
            other => panic!("{args}: {other:?}"),
        }
    }
    let s = parse(&["--cluster-name=c", "--memory-limit=1073741824"]).unwrap();
    match s.validate() {
        Err(SettingsError::Invalid { field, reason }) => {
            assert_eq!(field, "MEMORY_LIMIT");
            assert!(reason.contains("no garbage collector"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Built behind its gate now: turning it on starts the node repair loop.
    let s = parse(&["--cluster-name=c", "--feature-gates=NodeRepair=true"]).unwrap();
    assert_eq!(s.validate(), Ok(()));
    // Turned off explicitly, they are what nodewright does anyway.
    let s = parse(&[
        "--cluster-name=c",
        "--feature-gates=NodeRepair=false,StaticCapacity=false",
        "--ignore-dra-requests=true",
        "--memory-limit=-1",
        "--log-output-paths=stdout",
        "--enable-profiling=false",
    ])
    .unwrap();
    assert_eq!(s.validate(), Ok(()));
}

#[test]
fn policies_and_cpus_become_what_the_loops_take() {
    let s = parse(&[
        "--cluster-name=c",
        "--preference-policy=Ignore",
        "--min-values-policy=BestEffort",
        "--feature-gates=SpotToSpotConsolidation=true",
        "--cpu-requests=2500",
    ])
    .unwrap();
    let o = s.scheduling_options();
    assert!(o.ignore_preferences && o.min_values_best_effort);
    assert!(s.consolidation_features().spot_to_spot_consolidation);
    assert_eq!(s.cpus(), 3);
    let d = Settings::with_cluster_name("c");
    let o = d.scheduling_options();
    assert!(!o.ignore_preferences && !o.min_values_best_effort);
    assert!(!d.consolidation_features().spot_to_spot_consolidation);
    assert_eq!(d.cpus(), 1);
    let mut tiny = d.clone();
    tiny.cpu_requests = 0;
    assert_eq!(tiny.cpus(), 1, "never below one");
}

#[test]
fn feature_gates_parse_and_print() {
    let g: FeatureGates = FeatureGates::DEFAULT.parse().unwrap();
    assert_eq!(g, FeatureGates::default());
    assert_eq!(g.to_string(), FeatureGates::DEFAULT);
    let g: FeatureGates = " NodeRepair=true , SpotToSpotConsolidation=True,"
        .parse()
        .unwrap();
    assert!(g.node_repair && g.spot_to_spot_consolidation);
    assert_eq!("".parse::<FeatureGates>(), Ok(FeatureGates::default()));
    assert_eq!(
        "NodeRepair".parse::<FeatureGates>(),
        Err(SettingsError::GateSyntax {
            entry: "NodeRepair".into()
        })
    );
    assert!(matches!(
        "NodeRepair=yes".parse::<FeatureGates>(),
        Err(SettingsError::GateValue { .. })
    ));
    let unknown = "Foo=true".parse::<FeatureGates>().unwrap_err().to_string();
    assert!(
        unknown.contains("known: NodeRepair, ReservedCapacity"),
        "{unknown}"
    );
    let aws: AwsFeatureGates = "NodeClassCEL=true".parse().unwrap();
    assert!(aws.node_class_cel);
}

#[test]
fn durations_follow_go() {
    assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
    assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
    assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    for bad in ["", "10", "5x", "-1s", "s"] {
        assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
    }
    assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
    assert_eq!(format_duration(Duration::from_secs(3600)), "1h0m0s");
}
