//! Operator settings that change instance-type capacity (`VM_MEMORY_OVERHEAD_PERCENT`,
//! `RESERVED_ENIS`).

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Fraction of memory the hypervisor and OS take before the kubelet sees it.
    pub vm_memory_overhead_percent: f64,
    /// ENIs kept back from the VPC CNI (for example for custom networking), per instance.
    pub reserved_enis: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            vm_memory_overhead_percent: 0.075,
            reserved_enis: 0,
        }
    }
}
