//! The facts about one EC2 instance type that Karpenter's formulas read, named after the
//! `DescribeInstanceTypes` fields they come from.

/// One instance type's facts: a row of the embedded catalog, or one `InstanceTypeInfo` of
/// `DescribeInstanceTypes` converted by the AWS provider.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceTypeInfo {
    /// `InstanceType`, e.g. `m5.large`.
    pub name: String,
    /// `VCpuInfo.DefaultVCpus`.
    pub vcpus: u32,
    /// `MemoryInfo.SizeInMiB`.
    pub memory_mib: u64,
    /// `ProcessorInfo.SupportedArchitectures` in AWS spelling (`x86_64`, `arm64`, `i386`,
    /// `x86_64_mac` ...), in the order AWS lists them: the arm64 memory rule reads the first.
    pub architectures: Vec<String>,
    /// `Hypervisor` (`nitro`, `xen`); empty for bare metal, where AWS omits it.
    pub hypervisor: String,
    pub bare_metal: bool,
    pub current_generation: bool,
    /// `SupportedUsageClasses` (`on-demand`, `spot`, `capacity-block`).
    pub usage_classes: Vec<String>,
    /// `NetworkInfo.MaximumNetworkInterfaces`, over all network cards.
    pub max_network_interfaces: u32,
    /// `MaximumNetworkInterfaces` of the default network card: the VPC CNI uses only that card,
    /// so ENI-limited pod density counts these.
    pub default_card_max_enis: u32,
    /// `NetworkInfo.Ipv4AddressesPerInterface`.
    pub ipv4_per_eni: u32,
    /// Baseline bandwidth of the default network card, Gbit/s.
    pub network_baseline_gbps: f64,
    /// `NetworkInfo.EfaInfo.MaximumEfaInterfaces` (0 without EFA).
    pub efa_max_interfaces: u32,
    pub encryption_in_transit: bool,
    /// `GpuInfo.Gpus`: one entry per GPU kind.
    pub gpus: Vec<Gpu>,
    /// `InferenceAcceleratorInfo.Accelerators`: one entry per kind.
    pub inference_accelerators: Vec<Accelerator>,
    /// `NeuronInfo.NeuronDevices`: one entry per kind.
    pub neuron_devices: Vec<NeuronDevice>,
    /// `InstanceStorageInfo.TotalSizeInGB` when the instance store is NVMe; `None` otherwise.
    pub local_nvme_gb: Option<u64>,
    pub burstable: bool,
    pub ebs: Ebs,
    /// `ProcessorInfo.Manufacturer` (`Intel`, `AMD`, `AWS`, `Apple`).
    pub processor_manufacturer: Option<String>,
    /// `ProcessorInfo.SustainedClockSpeedInGhz` × 1000, rounded.
    pub sustained_clock_mhz: Option<u32>,
    /// `NitroEnclavesSupport == supported`.
    pub nitro_enclaves: bool,
    /// `ProcessorInfo.SupportedFeatures` lists `nested-virtualization`; `None` when the source
    /// does not say (the embedded catalog), which filters nothing.
    pub nested_virtualization: Option<bool>,
    /// `NetworkInfo.EnaSupport` is not `unsupported`; `None` when unknown.
    pub ena_supported: Option<bool>,
    /// `NetworkInfo.NetworkCards[].MaximumNetworkInterfaces`, indexed by network card; empty
    /// when unknown.
    pub network_cards: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    pub name: String,
    pub manufacturer: String,
    pub count: u32,
    pub memory_mib: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accelerator {
    pub name: String,
    pub manufacturer: String,
    pub count: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeuronDevice {
    pub name: String,
    pub count: u32,
    /// `CoreInfo.Count`: NeuronCores per device.
    pub cores_per_device: u32,
}

/// `EbsInfo`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ebs {
    /// `EbsOptimizedSupport == default`: only then does Karpenter label the bandwidth.
    pub optimized_by_default: bool,
    /// `EbsOptimizedInfo.BaselineBandwidthInMbps`.
    pub baseline_mbps: u32,
    /// `EbsOptimizedInfo.MaximumBandwidthInMbps`.
    pub max_mbps: u32,
}

impl InstanceTypeInfo {
    /// The Kubernetes architecture: the first listed AWS architecture that has one.
    pub fn kube_arch(&self) -> Option<&'static str> {
        self.architectures.iter().find_map(|a| match a.as_str() {
            "x86_64" => Some("amd64"),
            "arm64" => Some("arm64"),
            _ => None,
        })
    }

    /// The family (`m5d`) and size (`2xlarge`): the name split at its one dot.
    pub fn family_and_size(&self) -> Option<(&str, &str)> {
        let mut parts = self.name.split('.');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(f), Some(s), None) => Some((f, s)),
            _ => None,
        }
    }

    /// Category and generation as Karpenter's pattern `(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.`
    /// reads them: `m5d.large` → (`m`, `5`), `u-6tb1.metal` → (`u`, `1`).
    pub fn category_and_generation(&self) -> Option<(&str, &str)> {
        let name = self.name.as_str();
        let letters = name.bytes().take_while(u8::is_ascii_lowercase).count();
        if letters == 0 {
            return None;
        }
        let mut rest = &name[letters..];
        if let Some(after_dash) = rest.strip_prefix('-') {
            let digits = after_dash.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 && after_dash[digits..].starts_with("tb") {
                rest = &after_dash[digits + 2..];
            }
        }
        let gen_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        if gen_len == 0 || !rest[gen_len..].contains('.') {
            return None;
        }
        Some((&name[..letters], &rest[..gen_len]))
    }
}

/// Karpenter's label form of AWS names: lower case, spaces as dashes (`A10G` → `a10g`,
/// `RTX PRO 4500` → `rtx-pro-4500`).
pub fn lower_kebab(s: &str) -> String {
    s.replace(' ', "-").to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> InstanceTypeInfo {
        InstanceTypeInfo {
            name: name.to_string(),
            vcpus: 2,
            memory_mib: 1024,
            architectures: vec!["x86_64".into()],
            hypervisor: "nitro".into(),
            bare_metal: false,
            current_generation: true,
            usage_classes: vec![],
            max_network_interfaces: 2,
            default_card_max_enis: 2,
            ipv4_per_eni: 2,
            network_baseline_gbps: 1.0,
            efa_max_interfaces: 0,
            encryption_in_transit: false,
            gpus: vec![],
            inference_accelerators: vec![],
            neuron_devices: vec![],
            local_nvme_gb: None,
            burstable: false,
            ebs: Ebs::default(),
            processor_manufacturer: None,
            sustained_clock_mhz: None,
            nitro_enclaves: false,
            nested_virtualization: None,
            ena_supported: None,
            network_cards: vec![],
        }
    }

    #[test]
    fn category_and_generation_follow_the_pattern() {
        let cases = [
            ("m5d.large", Some(("m", "5"))),
            ("u-6tb1.metal", Some(("u", "1"))),
            ("u7i-6tb.112xlarge", Some(("u", "7"))),
            ("m7i-flex.large", Some(("m", "7"))),
            ("hpc7g.4xlarge", Some(("hpc", "7"))),
            ("x2iedn.xlarge", Some(("x", "2"))),
            ("c10.large", Some(("c", "10"))),
            ("mac.metal", None),
            ("m5", None),
        ];
        for (name, want) in cases {
            assert_eq!(named(name).category_and_generation(), want, "{name}");
        }
    }

    #[test]
    fn family_and_size_need_exactly_one_dot() {
        assert_eq!(
            named("m5d.2xlarge").family_and_size(),
            Some(("m5d", "2xlarge"))
        );
        assert_eq!(named("a.b.c").family_and_size(), None);
    }

    #[test]
    fn architecture_takes_the_first_kubernetes_one() {
        let mut i = named("t2.micro");
        i.architectures = vec!["i386".into(), "x86_64".into()];
        assert_eq!(i.kube_arch(), Some("amd64"));
        i.architectures = vec!["x86_64_mac".into()];
        assert_eq!(i.kube_arch(), None);
    }

    #[test]
    fn kebab() {
        assert_eq!(lower_kebab("RTX PRO Server 6000"), "rtx-pro-server-6000");
    }
}
