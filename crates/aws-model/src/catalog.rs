//! The embedded AWS catalog: `data/aws/*.csv` compiled into the binary and parsed into
//! [`InstanceTypeInfo`]s, per-region zone offerings and on-demand prices.
//!
//! Parsing never panics: any bad row is a [`DataError`] naming file, line and column.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_core::model::InstanceType;

use crate::build::{Zone, build_instance_type};
use crate::csv::{Row, Table};
use crate::error::DataError;
use crate::info::{Accelerator, Ebs, Gpu, InstanceTypeInfo, NeuronDevice};
use crate::nodeclass::NodeClassInput;
use crate::pricing::{OnDemandPrices, PriceBook, SpotPrices};
use crate::settings::Settings;

const INSTANCE_TYPES_CSV: &str = include_str!("../../../data/aws/instance-types.csv");
const EXTRAS_CSV: &str = include_str!("../../../data/aws/instance-type-extras.csv");
const OFFERINGS_CSV: &str = include_str!("../../../data/aws/offerings.csv");
const PRICES_CSV: &str = include_str!("../../../data/aws/on-demand-prices.csv");

/// When the embedded on-demand prices were taken.
pub const ON_DEMAND_PRICES_TAKEN_AT: &str = "2026-07-20T13:44:30Z";

const INSTANCE_TYPES_COLUMNS: &[&str] = &[
    "instance_type",
    "vcpu",
    "memory_mib",
    "architectures",
    "hypervisor",
    "bare_metal",
    "current_generation",
    "usage_classes",
    "max_enis",
    "ipv4_per_eni",
    "network_gbps",
    "gpu_count",
    "gpu_name",
    "gpu_manufacturer",
    "gpu_memory_mib",
    "local_nvme_gb",
    "burstable",
    "encryption_in_transit",
    "ebs_baseline_mbps",
    "processor",
];

const EXTRAS_COLUMNS: &[&str] = &[
    "instance_type",
    "default_card_max_enis",
    "ebs_optimized_default",
    "ebs_max_mbps",
    "efa_max_interfaces",
    "nitro_enclaves",
    "sustained_clock_mhz",
    "accelerator_name",
    "accelerator_manufacturer",
    "accelerator_count",
    "neuron_name",
    "neuron_count",
    "neuron_cores_per_device",
];

const OFFERINGS_COLUMNS: &[&str] = &["region", "zone", "instance_type"];
const PRICES_COLUMNS: &[&str] = &["region", "instance_type", "usd_per_hour"];

/// Instance-type facts, where each type is offered, and on-demand prices.
#[derive(Clone, Debug, PartialEq)]
pub struct Catalog {
    /// Sorted by name. Includes types no Kubernetes node can run (mac); see
    /// [`Catalog::instance_types`].
    infos: Vec<InstanceTypeInfo>,
    /// region → instance type → zones, sorted.
    offerings: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    on_demand: OnDemandPrices,
}

/// The catalog compiled into this crate (from `data/aws/`; see its `SOURCES.md`). It has no
/// spot prices: pair it with [`SpotPrices::synthetic`] and say so, or with observed prices.
pub fn embedded() -> Result<Catalog, DataError> {
    Catalog::from_csv(INSTANCE_TYPES_CSV, EXTRAS_CSV, OFFERINGS_CSV, PRICES_CSV)
}

fn list(s: &str) -> Vec<String> {
    s.split('|')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

fn extras_row(row: &Row<'_, '_>) -> Result<(String, Extras), DataError> {
    let accelerator_name = row.str("accelerator_name")?;
    let neuron_name = row.str("neuron_name")?;
    let extras = Extras {
        default_card_max_enis: row.num("default_card_max_enis")?,
        ebs_optimized_default: row.flag("ebs_optimized_default")?,
        ebs_max_mbps: row.num("ebs_max_mbps")?,
        efa_max_interfaces: row.num("efa_max_interfaces")?,
        nitro_enclaves: row.flag("nitro_enclaves")?,
        sustained_clock_mhz: row.opt_num("sustained_clock_mhz")?,
        accelerator: if accelerator_name.is_empty() {
            None
        } else {
            Some(Accelerator {
                name: accelerator_name.to_string(),
                manufacturer: row.required("accelerator_manufacturer")?.to_string(),
                count: row.num("accelerator_count")?,
            })
        },
        neuron: if neuron_name.is_empty() {
            None
        } else {
            Some(NeuronDevice {
                name: neuron_name.to_string(),
                count: row.num("neuron_count")?,
                cores_per_device: row.num("neuron_cores_per_device")?,
            })
        },
    };
    Ok((row.required("instance_type")?.to_string(), extras))
}

struct Extras {
    default_card_max_enis: u32,
    ebs_optimized_default: bool,
    ebs_max_mbps: u32,
    efa_max_interfaces: u32,
    nitro_enclaves: bool,
    sustained_clock_mhz: Option<u32>,
    accelerator: Option<Accelerator>,
    neuron: Option<NeuronDevice>,
}

fn info_row(
    row: &Row<'_, '_>,
    extras: &mut BTreeMap<String, Extras>,
) -> Result<InstanceTypeInfo, DataError> {
    let name = row.required("instance_type")?;
    let x = extras.remove(name).ok_or_else(|| {
        row.error(
            "instance_type",
            format!("{name} has no row in instance-type-extras.csv"),
        )
    })?;
    let gpu_name = row.str("gpu_name")?;
    let gpus = if gpu_name.is_empty() {
        Vec::new()
    } else {
        vec![Gpu {
            name: gpu_name.to_string(),
            manufacturer: row.required("gpu_manufacturer")?.to_string(),
            count: row.num("gpu_count")?,
            memory_mib: row.num("gpu_memory_mib")?,
        }]
    };
    let network_baseline_gbps: f64 = row.num("network_gbps")?;
    if !network_baseline_gbps.is_finite() || network_baseline_gbps < 0.0 {
        return Err(row.error("network_gbps", "must be a non-negative number"));
    }
    let local_nvme_gb: u64 = row.num("local_nvme_gb")?;
    let processor = row.str("processor")?;
    Ok(InstanceTypeInfo {
        name: name.to_string(),
        vcpus: row.num("vcpu")?,
        memory_mib: row.num("memory_mib")?,
        architectures: list(row.required("architectures")?),
        hypervisor: row.str("hypervisor")?.to_string(),
        bare_metal: row.flag("bare_metal")?,
        current_generation: row.flag("current_generation")?,
        usage_classes: list(row.str("usage_classes")?),
        max_network_interfaces: row.num("max_enis")?,
        default_card_max_enis: x.default_card_max_enis,
        ipv4_per_eni: row.num("ipv4_per_eni")?,
        network_baseline_gbps,
        efa_max_interfaces: x.efa_max_interfaces,
        encryption_in_transit: row.flag("encryption_in_transit")?,
        gpus,
        inference_accelerators: x.accelerator.into_iter().collect(),
        neuron_devices: x.neuron.into_iter().collect(),
        local_nvme_gb: (local_nvme_gb > 0).then_some(local_nvme_gb),
        burstable: row.flag("burstable")?,
        ebs: Ebs {
            optimized_by_default: x.ebs_optimized_default,
            baseline_mbps: row.num("ebs_baseline_mbps")?,
            max_mbps: x.ebs_max_mbps,
        },
        processor_manufacturer: (!processor.is_empty()).then(|| processor.to_string()),
        sustained_clock_mhz: x.sustained_clock_mhz,
        nitro_enclaves: x.nitro_enclaves,
        // The catalog does not record these; unknown filters nothing.
        nested_virtualization: None,
        ena_supported: None,
        network_cards: Vec::new(),
    })
}

impl Catalog {
    /// Parses the four catalog files (contents, not paths).
    pub fn from_csv(
        instance_types: &str,
        extras: &str,
        offerings: &str,
        prices: &str,
    ) -> Result<Catalog, DataError> {
        let mut extra_rows = BTreeMap::new();
        let table = Table::parse("instance-type-extras.csv", extras, EXTRAS_COLUMNS)?;
        for row in table.rows() {
            let row = row?;
            let (name, x) = extras_row(&row)?;
            if extra_rows.insert(name.clone(), x).is_some() {
                return Err(row.error("instance_type", format!("{name} is listed twice")));
            }
        }

        let mut infos: Vec<InstanceTypeInfo> = Vec::new();
        let mut names = BTreeSet::new();
        let table = Table::parse("instance-types.csv", instance_types, INSTANCE_TYPES_COLUMNS)?;
        for row in table.rows() {
            let row = row?;
            let info = info_row(&row, &mut extra_rows)?;
            if !names.insert(info.name.clone()) {
                return Err(row.error("instance_type", format!("{} is listed twice", info.name)));
            }
            infos.push(info);
        }
        infos.sort_by(|a, b| a.name.cmp(&b.name));

        let mut offering_map: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        let table = Table::parse("offerings.csv", offerings, OFFERINGS_COLUMNS)?;
        for row in table.rows() {
            let row = row?;
            let ty = row.required("instance_type")?;
            if !names.contains(ty) {
                return Err(row.error(
                    "instance_type",
                    format!("{ty} is not in instance-types.csv"),
                ));
            }
            offering_map
                .entry(row.required("region")?.to_string())
                .or_default()
                .entry(ty.to_string())
                .or_default()
                .push(row.required("zone")?.to_string());
        }
        for zones in offering_map.values_mut().flat_map(|m| m.values_mut()) {
            zones.sort();
            zones.dedup();
        }

        let mut on_demand = OnDemandPrices::new();
        let table = Table::parse("on-demand-prices.csv", prices, PRICES_COLUMNS)?;
        for row in table.rows() {
            let row = row?;
            let price: f64 = row.num("usd_per_hour")?;
            if !price.is_finite() || price <= 0.0 {
                return Err(row.error("usd_per_hour", "must be a positive number"));
            }
            on_demand.insert(
                row.required("region")?,
                row.required("instance_type")?,
                price,
            );
        }

        Ok(Catalog {
            infos,
            offerings: offering_map,
            on_demand,
        })
    }

    /// The catalog with the offerings of `region` alone. A cloud in one region never reads
    /// another's, and every region's are some 64,000 rows: at 4.6 MiB of zone and type names,
    /// they were one of the larger things a controller on the simulated cloud held.
    pub fn in_region(mut self, region: &str) -> Catalog {
        self.offerings.retain(|r, _| r == region);
        self
    }

    /// Every instance type's facts, sorted by name.
    pub fn infos(&self) -> &[InstanceTypeInfo] {
        &self.infos
    }

    pub fn info(&self, name: &str) -> Option<&InstanceTypeInfo> {
        self.infos
            .binary_search_by(|i| i.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.infos[i])
    }

    pub fn on_demand_prices(&self) -> &OnDemandPrices {
        &self.on_demand
    }

    pub fn regions(&self) -> impl Iterator<Item = &str> {
        self.offerings.keys().map(String::as_str)
    }

    /// Every zone of `region` that offers some instance type, sorted.
    pub fn zones(&self, region: &str) -> Vec<&str> {
        let mut z: BTreeSet<&str> = BTreeSet::new();
        for zones in self
            .offerings
            .get(region)
            .into_iter()
            .flat_map(|m| m.values())
        {
            z.extend(zones.iter().map(String::as_str));
        }
        z.into_iter().collect()
    }

    /// The zones of `region` that offer `instance_type`, sorted (empty when none).
    pub fn offered_zones(&self, region: &str, instance_type: &str) -> &[String] {
        self.offerings
            .get(region)
            .and_then(|m| m.get(instance_type))
            .map_or(&[], Vec::as_slice)
    }

    /// Every instance type a node can run on in `region`, as Karpenter would list it for a
    /// NodeClass whose subnets are in `subnet_zones`: types offered somewhere in the region
    /// whose architecture is x86_64 or arm64 (the DescribeInstanceTypes filter), with zones
    /// narrowed to the subnet zones. Sorted by name.
    pub fn instance_types(
        &self,
        region: &str,
        subnet_zones: &[Zone],
        settings: &Settings,
        nodeclass: &NodeClassInput,
        spot: &SpotPrices,
    ) -> Vec<InstanceType> {
        let prices = PriceBook {
            on_demand: &self.on_demand,
            spot,
        };
        let Some(by_type) = self.offerings.get(region) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for info in &self.infos {
            let Some(offered) = by_type.get(&info.name) else {
                continue;
            };
            let zones: Vec<Zone> = subnet_zones
                .iter()
                .filter(|z| offered.contains(&z.name))
                .cloned()
                .collect();
            // Unsupported architectures are skipped, as DescribeInstanceTypes' filter does.
            if let Ok(it) = build_instance_type(info, settings, nodeclass, region, &zones, prices) {
                out.push(it);
            }
        }
        out
    }
}
