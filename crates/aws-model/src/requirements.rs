//! The labels of an instance type, as requirements: single- or multi-valued `In` for what is
//! known, `DoesNotExist` for well-known labels this type lacks (so a pod that requires one
//! does not match it).

use nodewright_core::labels::{self, aws};
use nodewright_core::model::CapacityType;
use nodewright_core::requirements::{Operator, Requirement};

use crate::build::Zone;
use crate::info::{InstanceTypeInfo, lower_kebab};
use crate::nodeclass::AmiFamily;

/// Builds the requirement list in a fixed key order.
struct Reqs(Vec<Requirement>);

impl Reqs {
    fn is(&mut self, key: &str, value: impl ToString) {
        self.0.push(Requirement::single(key, &value.to_string()));
    }

    fn any_of(&mut self, key: &str, values: &[String]) {
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        self.0.push(Requirement::new(key, Operator::In, &values));
    }

    fn maybe(&mut self, key: &str, value: Option<String>) {
        match value {
            Some(v) => self.is(key, v),
            None => self
                .0
                .push(Requirement::new(key, Operator::DoesNotExist, &[])),
        }
    }
}

/// Karpenter's requirements for `info` in `region`, offered in `zones` (already intersected
/// with the NodeClass's subnet zones) with `capacity_types`. `arch` is the type's Kubernetes
/// architecture ([`InstanceTypeInfo::kube_arch`]).
pub fn requirements(
    info: &InstanceTypeInfo,
    arch: &str,
    region: &str,
    zones: &[Zone],
    capacity_types: &[CapacityType],
    family: AmiFamily,
) -> Vec<Requirement> {
    let mut r = Reqs(Vec::new());
    well_known(&mut r, info, arch, region, zones, capacity_types, family);
    shape(&mut r, info);
    devices(&mut r, info);
    features(&mut r, info, zones);
    r.0
}

/// Kubernetes' and Karpenter's well-known labels: type, architecture, OS, zone, region,
/// Windows build, capacity type.
fn well_known(
    r: &mut Reqs,
    info: &InstanceTypeInfo,
    arch: &str,
    region: &str,
    zones: &[Zone],
    capacity_types: &[CapacityType],
    family: AmiFamily,
) {
    r.is(labels::INSTANCE_TYPE, &info.name);
    r.is(labels::ARCH, arch);
    // Windows AMIs run on amd64 only: elsewhere the OS requirement has no value at all.
    let os: Vec<String> = match (family.is_windows(), arch) {
        (false, _) => vec!["linux".into()],
        (true, "amd64") => vec!["windows".into()],
        (true, _) => vec![],
    };
    r.any_of(labels::OS, &os);
    let zone_names: Vec<String> = zones.iter().map(|z| z.name.clone()).collect();
    r.any_of(labels::ZONE, &zone_names);
    r.is(labels::REGION, region);
    r.maybe(
        labels::WINDOWS_BUILD,
        family.windows_build().map(str::to_string),
    );
    let cts: Vec<String> = capacity_types
        .iter()
        .map(|c| c.as_str().to_string())
        .collect();
    r.any_of(labels::CAPACITY_TYPE, &cts);
}

/// What the type is made of: CPU, memory, bandwidths, category, generation, family, size,
/// local NVMe.
fn shape(r: &mut Reqs, info: &InstanceTypeInfo) {
    r.is(aws::INSTANCE_CPU, info.vcpus);
    r.maybe(
        aws::INSTANCE_CPU_MANUFACTURER,
        info.processor_manufacturer.as_deref().map(lower_kebab),
    );
    r.maybe(
        aws::INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        info.sustained_clock_mhz.map(|m| m.to_string()),
    );
    r.is(aws::INSTANCE_MEMORY, info.memory_mib);
    r.maybe(
        aws::INSTANCE_EBS_BANDWIDTH,
        info.ebs
            .optimized_by_default
            .then(|| info.ebs.max_mbps.to_string()),
    );
    // Karpenter reads a generated table of baseline Mbps; the default card's baseline Gbit/s
    // from DescribeInstanceTypes is the same figure in other units.
    let mbps = (info.network_baseline_gbps * 1000.0).round() as i64;
    r.maybe(
        aws::INSTANCE_NETWORK_BANDWIDTH,
        (mbps > 0).then(|| mbps.to_string()),
    );

    let cg = info.category_and_generation();
    r.maybe(aws::INSTANCE_CATEGORY, cg.map(|(c, _)| c.to_string()));
    r.maybe(aws::INSTANCE_GENERATION, cg.map(|(_, g)| g.to_string()));
    let fs = info.family_and_size();
    r.maybe(aws::INSTANCE_FAMILY, fs.map(|(f, _)| f.to_string()));
    r.maybe(aws::INSTANCE_SIZE, fs.map(|(_, s)| s.to_string()));
    r.maybe(
        aws::INSTANCE_LOCAL_NVME,
        info.local_nvme_gb.filter(|&g| g > 0).map(|g| g.to_string()),
    );
}

/// The GPU and the accelerator, when the type has exactly one kind of each.
fn devices(r: &mut Reqs, info: &InstanceTypeInfo) {
    let gpu = match info.gpus.as_slice() {
        [one] => Some(one),
        _ => None,
    };
    r.maybe(aws::INSTANCE_GPU_NAME, gpu.map(|g| lower_kebab(&g.name)));
    r.maybe(
        aws::INSTANCE_GPU_MANUFACTURER,
        gpu.map(|g| lower_kebab(&g.manufacturer)),
    );
    r.maybe(aws::INSTANCE_GPU_COUNT, gpu.map(|g| g.count.to_string()));
    r.maybe(
        aws::INSTANCE_GPU_MEMORY,
        gpu.map(|g| g.memory_mib.to_string()),
    );

    // A single Neuron device kind names the accelerator (maker `aws`); otherwise a single
    // inference accelerator kind does, when the type has no Neuron devices at all.
    let accel: Option<(String, String, u32)> = match (
        info.neuron_devices.as_slice(),
        info.inference_accelerators.as_slice(),
    ) {
        ([n], _) => Some((lower_kebab(&n.name), "aws".into(), n.count)),
        ([], [a]) => Some((lower_kebab(&a.name), lower_kebab(&a.manufacturer), a.count)),
        _ => None,
    };
    r.maybe(
        aws::INSTANCE_ACCELERATOR_NAME,
        accel.as_ref().map(|a| a.0.clone()),
    );
    r.maybe(
        aws::INSTANCE_ACCELERATOR_MANUFACTURER,
        accel.as_ref().map(|a| a.1.clone()),
    );
    r.maybe(
        aws::INSTANCE_ACCELERATOR_COUNT,
        accel.as_ref().map(|a| a.2.to_string()),
    );
}

/// Hypervisor, encryption in transit, Nitro Enclaves, flex, tenancy and zone IDs.
fn features(r: &mut Reqs, info: &InstanceTypeInfo, zones: &[Zone]) {
    // Empty for bare metal, as upstream (a node label with an empty value).
    r.is(aws::INSTANCE_HYPERVISOR, &info.hypervisor);
    r.is(
        aws::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        info.encryption_in_transit,
    );
    r.is(aws::NITRO_SANDBOX, info.nitro_enclaves);
    let flex = info
        .family_and_size()
        .is_some_and(|(f, _)| f.contains("-flex"));
    r.is(aws::INSTANCE_CAPABILITY_FLEX, flex);
    // Every type can run shared or on dedicated hardware; the claim's requirements pick one
    // at launch (shared unless they rule it out).
    let tenancies: Vec<String> = crate::placement::TENANCIES
        .iter()
        .map(|t| t.to_string())
        .collect();
    r.any_of(aws::INSTANCE_TENANCY, &tenancies);
    let ids: Vec<String> = zones.iter().filter_map(|z| z.id.clone()).collect();
    if ids.is_empty() {
        r.maybe(aws::ZONE_ID, None);
    } else {
        r.any_of(aws::ZONE_ID, &ids);
    }
}
