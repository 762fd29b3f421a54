//! Instance types from EC2: `DescribeInstanceTypes` and `DescribeInstanceTypeOfferings`, read
//! into `aws-model`'s [`InstanceTypeInfo`], cached, and built into core instance types for a
//! class (its AMI family and kubelet, its subnets' zones, current prices and the ICE cache).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{self as ec2, Filter, LocationType};
use nodewright_aws_model::{
    Accelerator, Ebs, Gpu, InstanceTypeInfo, NeuronDevice, NodeClassInput, PriceBook, Settings,
    Zone, build_instance_type,
};
use nodewright_core::model::InstanceType;
use tokio::sync::RwLock;

use crate::AwsClients;
use crate::error::AwsError;

/// How long discovered types and offerings are kept before they are fetched again.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(12 * 60 * 60);

fn count(v: Option<i32>) -> u32 {
    v.unwrap_or(0).max(0) as u32
}

/// Maximum interfaces per network card, indexed by card; empty when EC2 lists no cards.
fn network_cards(net: Option<&ec2::NetworkInfo>) -> Vec<u32> {
    let Some(cards) = net.map(|n| n.network_cards()).filter(|c| !c.is_empty()) else {
        return Vec::new();
    };
    let len = cards
        .iter()
        .filter_map(|c| c.network_card_index())
        .map(|i| i.max(0) as usize + 1)
        .max()
        .unwrap_or(0);
    let mut out = vec![0; len];
    for c in cards {
        if let Some(i) = c.network_card_index().filter(|i| *i >= 0) {
            out[i as usize] = count(c.maximum_network_interfaces());
        }
    }
    out
}

/// One `DescribeInstanceTypes` entry as the formulas read it; `None` without a name.
pub fn info_from_sdk(t: &ec2::InstanceTypeInfo) -> Option<InstanceTypeInfo> {
    let name = t.instance_type()?.as_str().to_string();
    let net = t.network_info();
    let card = default_card(net);
    let max_enis = count(net.and_then(|n| n.maximum_network_interfaces()));
    let processor = t.processor_info();
    Some(InstanceTypeInfo {
        name,
        vcpus: count(t.v_cpu_info().and_then(|v| v.default_v_cpus())),
        memory_mib: mib(t.memory_info().and_then(|m| m.size_in_mib())),
        architectures: architectures(processor),
        hypervisor: t
            .hypervisor()
            .map(|h| h.as_str().to_string())
            .unwrap_or_default(),
        bare_metal: t.bare_metal().unwrap_or(false),
        current_generation: t.current_generation().unwrap_or(false),
        usage_classes: t
            .supported_usage_classes()
            .iter()
            .map(|u| u.as_str().to_string())
            .collect(),
        max_network_interfaces: max_enis,
        default_card_max_enis: card
            .map(|c| count(c.maximum_network_interfaces()))
            .unwrap_or(max_enis),
        ipv4_per_eni: count(net.and_then(|n| n.ipv4_addresses_per_interface())),
        network_baseline_gbps: card
            .and_then(|c| c.baseline_bandwidth_in_gbps())
            .unwrap_or(0.0),
        efa_max_interfaces: count(
            net.and_then(|n| n.efa_info())
                .and_then(|e| e.maximum_efa_interfaces()),
        ),
        encryption_in_transit: net
            .and_then(|n| n.encryption_in_transit_supported())
            .unwrap_or(false),
        gpus: gpus(t),
        inference_accelerators: inference_accelerators(t),
        neuron_devices: neuron_devices(t),
        local_nvme_gb: local_nvme_gb(t),
        burstable: t.burstable_performance_supported().unwrap_or(false),
        ebs: ebs(t.ebs_info()),
        processor_manufacturer: processor
            .and_then(|p| p.manufacturer())
            .filter(|m| !m.is_empty())
            .map(str::to_string),
        sustained_clock_mhz: processor
            .and_then(|p| p.sustained_clock_speed_in_ghz())
            .map(|g| (g * 1000.0).round() as u32),
        nitro_enclaves: t.nitro_enclaves_support() == Some(&ec2::NitroEnclavesSupport::Supported),
        nested_virtualization: processor.map(|p| {
            p.supported_features()
                .contains(&ec2::SupportedAdditionalProcessorFeature::NestedVirtualization)
        }),
        ena_supported: net
            .and_then(|n| n.ena_support())
            .map(|e| *e != ec2::EnaSupport::Unsupported),
        network_cards: network_cards(net),
    })
}

/// A size in MiB, 0 when absent or negative.
fn mib(v: Option<i64>) -> u64 {
    v.unwrap_or(0).max(0) as u64
}

/// The default network card (the one the VPC CNI uses), when EC2 lists it.
fn default_card(net: Option<&ec2::NetworkInfo>) -> Option<&ec2::NetworkCardInfo> {
    let default_card = net
        .and_then(|n| n.default_network_card_index())
        .unwrap_or(0);
    net.and_then(|n| {
        n.network_cards()
            .iter()
            .find(|c| c.network_card_index() == Some(default_card))
    })
}

/// The processor's architectures in AWS spelling, in the order AWS lists them.
fn architectures(processor: Option<&ec2::ProcessorInfo>) -> Vec<String> {
    processor
        .map(|p| {
            p.supported_architectures()
                .iter()
                .map(|a| a.as_str().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The type's GPUs, one entry per kind.
fn gpus(t: &ec2::InstanceTypeInfo) -> Vec<Gpu> {
    t.gpu_info()
        .map(|g| {
            g.gpus()
                .iter()
                .map(|d| Gpu {
                    name: d.name().unwrap_or_default().to_string(),
                    manufacturer: d.manufacturer().unwrap_or_default().to_string(),
                    count: count(d.count()),
                    memory_mib: mib(d.memory_info().and_then(|m| m.size_in_mib()).map(i64::from)),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The type's inference accelerators, one entry per kind.
fn inference_accelerators(t: &ec2::InstanceTypeInfo) -> Vec<Accelerator> {
    t.inference_accelerator_info()
        .map(|a| {
            a.accelerators()
                .iter()
                .map(|d| Accelerator {
                    name: d.name().unwrap_or_default().to_string(),
                    manufacturer: d.manufacturer().unwrap_or_default().to_string(),
                    count: count(d.count()),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The type's Neuron (Inferentia, Trainium) devices, one entry per kind.
fn neuron_devices(t: &ec2::InstanceTypeInfo) -> Vec<NeuronDevice> {
    t.neuron_info()
        .map(|n| {
            n.neuron_devices()
                .iter()
                .map(|d| NeuronDevice {
                    name: d.name().unwrap_or_default().to_string(),
                    count: count(d.count()),
                    cores_per_device: count(d.core_info().and_then(|c| c.count())),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The size of the instance store when it is NVMe; `None` otherwise.
fn local_nvme_gb(t: &ec2::InstanceTypeInfo) -> Option<u64> {
    t.instance_storage_info()
        .filter(|s| {
            s.nvme_support()
                .is_some_and(|n| *n != ec2::EphemeralNvmeSupport::Unsupported)
        })
        .and_then(|s| s.total_size_in_gb())
        .filter(|g| *g > 0)
        .map(|g| g as u64)
}

/// Whether the type is EBS-optimized by default, and its EBS bandwidth.
fn ebs(ebs: Option<&ec2::EbsInfo>) -> Ebs {
    Ebs {
        optimized_by_default: ebs.and_then(|e| e.ebs_optimized_support())
            == Some(&ec2::EbsOptimizedSupport::Default),
        baseline_mbps: count(
            ebs.and_then(|e| e.ebs_optimized_info())
                .and_then(|o| o.baseline_bandwidth_in_mbps()),
        ),
        max_mbps: count(
            ebs.and_then(|e| e.ebs_optimized_info())
                .and_then(|o| o.maximum_bandwidth_in_mbps()),
        ),
    }
}

/// Whether a node can run on the type at all: hardware virtualisation and a Kubernetes
/// architecture (the filter Karpenter sends with `DescribeInstanceTypes`).
fn launchable(t: &ec2::InstanceTypeInfo) -> bool {
    let hvm = t
        .supported_virtualization_types()
        .contains(&ec2::VirtualizationType::Hvm);
    let arch = t.processor_info().is_some_and(|p| {
        p.supported_architectures().iter().any(|a| {
            matches!(
                a,
                ec2::ArchitectureType::X8664 | ec2::ArchitectureType::Arm64
            )
        })
    });
    hvm && arch
}

/// Every HVM x86_64/arm64 instance type in the region, sorted by name.
pub async fn describe_instance_types(c: &AwsClients) -> Result<Vec<InstanceTypeInfo>, AwsError> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let page = c
            .ec2
            .describe_instance_types()
            .filters(
                Filter::builder()
                    .name("processor-info.supported-architecture")
                    .values("x86_64")
                    .values("arm64")
                    .build(),
            )
            .max_results(100)
            .set_next_token(token)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("DescribeInstanceTypes", e))?;
        out.extend(
            page.instance_types()
                .iter()
                .filter(|t| launchable(t))
                .filter_map(info_from_sdk),
        );
        token = page.next_token().map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    Ok(out)
}

/// Instance type → the availability zones offering it.
pub async fn describe_offerings(
    c: &AwsClients,
) -> Result<BTreeMap<String, BTreeSet<String>>, AwsError> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut token = None;
    loop {
        let page = c
            .ec2
            .describe_instance_type_offerings()
            .location_type(LocationType::AvailabilityZone)
            .max_results(1000)
            .set_next_token(token)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("DescribeInstanceTypeOfferings", e))?;
        for o in page.instance_type_offerings() {
            if let (Some(t), Some(z)) = (o.instance_type(), o.location()) {
                out.entry(t.as_str().to_string())
                    .or_default()
                    .insert(z.to_string());
            }
        }
        token = page.next_token().map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    Ok(out)
}

/// What EC2 said about instance types at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Discovered {
    /// Sorted by name.
    pub infos: Vec<InstanceTypeInfo>,
    /// Instance type → zones.
    pub zones: BTreeMap<String, BTreeSet<String>>,
}

impl Discovered {
    pub fn info(&self, name: &str) -> Option<&InstanceTypeInfo> {
        self.infos
            .binary_search_by(|i| i.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.infos[i])
    }

    /// Every type offered in at least one zone, built for a class whose subnets are in
    /// `subnet_zones`: each type's zones are its offered zones ∩ the subnet zones. Sorted by
    /// name.
    pub fn instance_types(
        &self,
        region: &str,
        settings: &Settings,
        class: &NodeClassInput,
        subnet_zones: &[Zone],
        prices: PriceBook<'_>,
    ) -> Vec<InstanceType> {
        let mut out = Vec::new();
        for info in &self.infos {
            let Some(offered) = self.zones.get(&info.name) else {
                continue;
            };
            let zones: Vec<Zone> = subnet_zones
                .iter()
                .filter(|z| offered.contains(&z.name))
                .cloned()
                .collect();
            if let Ok(it) = build_instance_type(info, settings, class, region, &zones, prices) {
                out.push(it);
            }
        }
        out
    }
}

struct Cached {
    discovered: Arc<Discovered>,
    fetched_at: Instant,
}

/// Discovered instance types, fetched on first use and again once older than the refresh
/// interval. Concurrent callers share one fetch.
pub struct InstanceTypeProvider {
    clients: AwsClients,
    refresh_interval: Duration,
    cache: RwLock<Option<Cached>>,
}

impl InstanceTypeProvider {
    pub fn new(clients: AwsClients) -> Self {
        InstanceTypeProvider {
            clients,
            refresh_interval: REFRESH_INTERVAL,
            cache: RwLock::new(None),
        }
    }

    pub fn with_refresh_interval(mut self, every: Duration) -> Self {
        self.refresh_interval = every;
        self
    }

    /// Fetches types and offerings now, replacing the cache.
    pub async fn refresh(&self) -> Result<Arc<Discovered>, AwsError> {
        let mut guard = self.cache.write().await;
        let discovered = fetch(&self.clients).await?;
        *guard = Some(Cached {
            discovered: discovered.clone(),
            fetched_at: Instant::now(),
        });
        Ok(discovered)
    }

    /// The cached data, fetched first when missing or stale (once, however many callers
    /// wait). When a refresh fails but older data exists, the older data is returned: stale
    /// facts beat no instance types.
    pub async fn discovered(&self) -> Result<Arc<Discovered>, AwsError> {
        let fresh = |c: &Option<Cached>| {
            c.as_ref()
                .filter(|c| c.fetched_at.elapsed() < self.refresh_interval)
                .map(|c| c.discovered.clone())
        };
        if let Some(d) = fresh(&*self.cache.read().await) {
            return Ok(d);
        }
        let mut guard = self.cache.write().await;
        if let Some(d) = fresh(&guard) {
            return Ok(d);
        }
        match fetch(&self.clients).await {
            Ok(d) => {
                *guard = Some(Cached {
                    discovered: d.clone(),
                    fetched_at: Instant::now(),
                });
                Ok(d)
            }
            Err(e) => match guard.as_ref() {
                Some(c) => {
                    tracing::warn!(error = %e, "instance type refresh failed; using cached data");
                    Ok(c.discovered.clone())
                }
                None => Err(e),
            },
        }
    }
}

async fn fetch(clients: &AwsClients) -> Result<Arc<Discovered>, AwsError> {
    let (infos, zones) = tokio::try_join!(
        describe_instance_types(clients),
        describe_offerings(clients)
    )?;
    Ok(Arc::new(Discovered { infos, zones }))
}
