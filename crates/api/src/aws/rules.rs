//! The facts both the CRD schema and the offline validator state: patterns, enums, limits and
//! rule messages. Keeping them in one place is what makes the two agree.

pub const MAX_SELECTOR_TERMS: u64 = 30;
pub const MAX_SELECTOR_TAGS: u64 = 20;
pub const MAX_BLOCK_DEVICE_MAPPINGS: u64 = 50;
pub const MAX_NETWORK_INTERFACES: u64 = 150;
pub const MAX_ALIAS_LENGTH: u64 = 30;

pub const SUBNET_ID_PATTERN: &str = "subnet-[0-9a-z]+";
pub const SECURITY_GROUP_ID_PATTERN: &str = "sg-[0-9a-z]+";
pub const AMI_ID_PATTERN: &str = "ami-[0-9a-z]+";
pub const CAPACITY_RESERVATION_ID_PATTERN: &str = "^cr-[0-9a-z]+$";
pub const OWNER_ID_PATTERN: &str = "^[0-9]{12}$";
pub const PLACEMENT_GROUP_ID_PATTERN: &str = "^pg-[0-9a-z]+$";
/// EBS volume sizes Karpenter accepts: up to 64T in Gi, G, Ti or T.
pub const VOLUME_SIZE_PATTERN: &str = r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$";
/// A resource quantity.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
/// An eviction threshold: a percentage or a quantity.
pub const EVICTION_VALUE_PATTERN: &str = r"^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$";
pub const ALIAS_FORMAT_PATTERN: &str = "^[a-zA-Z0-9]*@.*$";

pub const AMI_FAMILIES: &[&str] = super::v1::AMI_FAMILIES;
pub const ALIAS_FAMILY_NAMES: &[&str] = &[
    "al2",
    "al2023",
    "bottlerocket",
    "windows2019",
    "windows2022",
    "windows2025",
];
pub const WINDOWS_ALIAS_FAMILIES: &[&str] = &["windows2019", "windows2022", "windows2025"];
pub const VOLUME_TYPES: &[&str] = &["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"];
pub const INSTANCE_STORE_POLICIES: &[&str] = &["RAID0"];
pub const ENABLED_DISABLED: &[&str] = &["enabled", "disabled"];
pub const HTTP_TOKENS: &[&str] = &["required", "optional"];
pub const INSTANCE_MATCH_CRITERIA: &[&str] = &["open", "targeted"];
pub const INTERFACE_TYPES: &[&str] = &["interface", "efa-only"];
pub const RESERVED_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage", "pid"];
pub const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];

/// A restricted tag rule: CEL rule, message, and the same test in Rust.
pub type TagRule = (&'static str, &'static str, fn(&str) -> bool);

/// Tag keys Karpenter sets itself, rejected in `spec.tags`.
pub const RESTRICTED_TAGS: &[TagRule] = &[
    (
        "self.all(k, k != 'eks:eks-cluster-name')",
        "tag contains a restricted tag matching eks:eks-cluster-name",
        |k| k == "eks:eks-cluster-name",
    ),
    (
        "self.all(k, !k.startsWith('kubernetes.io/cluster') )",
        "tag contains a restricted tag matching kubernetes.io/cluster/",
        |k| k.starts_with("kubernetes.io/cluster"),
    ),
    (
        "self.all(k, k != 'karpenter.sh/nodepool')",
        "tag contains a restricted tag matching karpenter.sh/nodepool",
        |k| k == "karpenter.sh/nodepool",
    ),
    (
        "self.all(k, k !='karpenter.sh/nodeclaim')",
        "tag contains a restricted tag matching karpenter.sh/nodeclaim",
        |k| k == "karpenter.sh/nodeclaim",
    ),
    (
        "self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')",
        "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",
        |k| k == "karpenter.k8s.aws/ec2nodeclass",
    ),
];

pub const ROLE_XOR_INSTANCE_PROFILE: &str =
    "must specify exactly one of ['role', 'instanceProfile']";
pub const ROLE_EMPTY: &str = "role cannot be empty";
pub const INSTANCE_PROFILE_EMPTY: &str = "instanceProfile cannot be empty";
pub const IMMUTABLE: &str = "immutable field changed";
pub const ROLE_PROFILE_SWITCH: &str = "changing from 'instanceProfile' to 'role' is not supported. You must delete and recreate this node class if you want to change this.";
pub const AMI_FAMILY_REQUIRED: &str =
    "must specify amiFamily if amiSelectorTerms does not contain an alias";

pub const TAG_KEY_EMPTY: &str = "empty tag keys aren't supported";
pub const SELECTOR_TAG_EMPTY: &str = "empty tag keys or values aren't supported";

pub const SUBNET_TERMS_EMPTY: &str = "subnetSelectorTerms cannot be empty";
pub const SUBNET_TERM_NONE: &str = "expected at least one, got none, ['tags', 'id']";
pub const SUBNET_ID_EXCLUSIVE: &str = "'id' is mutually exclusive, cannot be set with a combination of other fields in subnetSelectorTerms";
pub const SG_TERMS_EMPTY: &str = "securityGroupSelectorTerms cannot be empty";
pub const SG_TERM_NONE: &str = "expected at least one, got none, ['tags', 'id', 'name']";
pub const SG_ID_EXCLUSIVE: &str = "'id' is mutually exclusive, cannot be set with a combination of other fields in securityGroupSelectorTerms";
pub const SG_NAME_EXCLUSIVE: &str = "'name' is mutually exclusive, cannot be set with a combination of other fields in securityGroupSelectorTerms";
pub const AMI_TERM_NONE: &str =
    "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']";
pub const AMI_ID_EXCLUSIVE: &str = "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms";
pub const AMI_ALIAS_EXCLUSIVE_FIELDS: &str = "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms";
pub const AMI_ALIAS_EXCLUSIVE_TERMS: &str =
    "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms";
pub const ALIAS_FORMAT: &str =
    "'alias' is improperly formatted, must match the format 'family@version'";
pub const ALIAS_FAMILY: &str = "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'";
pub const ALIAS_WINDOWS_LATEST: &str = "windows families may only specify version 'latest'";
pub const CR_TERM_NONE: &str =
    "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']";
pub const CR_ID_EXCLUSIVE: &str = "'id' is mutually exclusive, cannot be set with a combination of other fields in capacityReservationSelectorTerms";
pub const PLACEMENT_GROUP_XOR: &str = "must specify exactly one of ['name', 'id']";

pub const ROOT_VOLUME_ONCE: &str = "must have only one blockDeviceMappings with rootVolume";
pub const EBS_SIZE_OR_SNAPSHOT: &str = "snapshotID or volumeSize must be defined";
pub const EBS_INIT_RATE_SNAPSHOT: &str = "volumeInitializationRate requires snapshotID";

pub const NI_PRIMARY: &str = "must include the primary network interface (networkCardIndex 0, deviceIndex 0, interfaceType 'interface')";
pub const NI_UNIQUE: &str = "networkCardIndex and deviceIndex pairs must be unique";
pub const NI_ONE_EFA_ONLY: &str = "at most one 'efa-only' interface is allowed per network card";
pub const CONNTRACK_NONE: &str =
    "expected at least one, got none, ['tcpEstablishedTimeout', 'udpStreamTimeout', 'udpTimeout']";

pub const IMAGE_GC_ORDER: &str =
    "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent";
pub const EVICTION_SOFT_UNMATCHED: &str =
    "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod";
pub const EVICTION_GRACE_UNMATCHED: &str =
    "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft";
pub const REGISTER_WITH_TAINTS: &str =
    "registerWithTaints is managed by karpenter and cannot be set in spec.kubelet";

/// `valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']`.
pub fn reserved_keys_message(field: &str) -> String {
    format!("valid keys for {field} are ['cpu','memory','ephemeral-storage','pid']")
}

pub fn reserved_negative_message(field: &str) -> String {
    format!("{field} value cannot be a negative resource quantity")
}

pub fn eviction_keys_message(field: &str) -> String {
    format!(
        "valid keys for {field} are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"
    )
}

/// The message of the per-family rule: `if set, amiFamily must be 'AL2' or 'Custom' when
/// using an AL2 alias`.
pub fn alias_family_message(family: &str) -> String {
    let article = if family.starts_with("AL") { "an" } else { "a" };
    format!("if set, amiFamily must be '{family}' or 'Custom' when using {article} {family} alias")
}

/// The API server's wording for an enum violation.
pub fn unsupported_value(value: &str, allowed: &[&str]) -> String {
    let list: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "unsupported value: {value:?}: supported values: {}",
        list.join(", ")
    )
}

pub fn should_match(pattern: &str) -> String {
    format!("should match '{pattern}'")
}

pub fn at_least(n: i64) -> String {
    format!("should be greater than or equal to {n}")
}

pub fn at_most(n: i64) -> String {
    format!("should be less than or equal to {n}")
}

pub fn too_many(got: usize, max: u64) -> String {
    format!("too many: {got}: must have at most {max} items")
}

pub fn too_few(got: usize, min: u64) -> String {
    format!("too few: {got}: must have at least {min} items")
}

pub fn too_long(max: u64) -> String {
    format!("too long: may not be more than {max} bytes")
}

pub const REQUIRED: &str = "required value";
