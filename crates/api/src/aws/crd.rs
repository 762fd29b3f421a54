//! The `openAPIV3Schema` and printer columns of the v1 EC2NodeClass CRD, stating with
//! [`crate::schema`] the rules [`super::validate`] checks offline (same texts, from
//! [`super::rules`]).

use serde_json::{Value, json};

use super::rules::*;
use crate::schema::{Schema, array, boolean, int32, int64, map_of, object, string};

/// `openAPIV3Schema` of `karpenter.k8s.aws/v1` EC2NodeClass.
pub fn ec2nodeclass_schema() -> Value {
    object()
        .description("EC2NodeClass is the Schema for the EC2NodeClass API")
        .prop("apiVersion", string())
        .prop("kind", string())
        .prop("metadata", object())
        .prop("spec", spec())
        .prop("status", status())
        .required(&["spec"])
        .into_value()
}

/// Ready and Age; Role in wide output.
pub fn ec2nodeclass_printer_columns() -> Value {
    json!([
        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Role", "type": "string", "priority": 1, "jsonPath": ".spec.role"},
    ])
}

fn spec() -> Schema {
    let mut s = object()
        .description("EC2NodeClassSpec: how Karpenter launches instances in AWS.")
        .prop("subnetSelectorTerms", subnet_terms().description("Subnets to launch into: terms are ORed, the fields of one term ANDed."))
        .prop("securityGroupSelectorTerms", security_group_terms().description("Security groups for the nodes: terms are ORed, the fields of one term ANDed."))
        .prop("capacityReservationSelectorTerms", capacity_reservation_terms().description("Capacity reservations nodes may launch into: terms are ORed."))
        .prop("placementGroupSelector", placement_group().description("The placement group instances launch into, by name or id."))
        .prop("associatePublicIPAddress", boolean().description("Whether instances get a public IP address; unset follows the subnet's setting."))
        .prop("ipPrefixCount", int32().minimum(0).description("Number of IPv4 prefixes assigned to the primary network interface."))
        .prop("amiSelectorTerms", ami_terms().description("AMIs to launch: one alias (family@version), or terms by id, name, owner, tags or SSM parameter, ORed."))
        .prop("amiFamily", string().enumerate(AMI_FAMILIES).description("The bootstrap and default storage format. Optional with an alias, which implies it; may then only be that family or Custom."))
        .prop("userData", string().description("User data merged with what Karpenter generates, in the format of the AMI family."))
        .prop("role", string().rule("self != ''", ROLE_EMPTY).transition_rule("self == oldSelf", IMMUTABLE).description("IAM role of the nodes; Karpenter manages an instance profile for it. Immutable. Exclusive with instanceProfile."))
        .prop("instanceProfile", string().rule("self != ''", INSTANCE_PROFILE_EMPTY).description("An existing instance profile for the nodes (not managed). Exclusive with role."))
        .prop("tags", tags().description("Tags applied to instances, volumes, network interfaces and launch templates."))
        .prop("kubelet", kubelet().description("Kubelet configuration for the nodes. The managed fields are typed; other fields pass through where the family allows."))
        .prop("blockDeviceMappings", block_device_mappings().description("Volumes attached at launch; replaces the family's default root volume."))
        .prop("instanceStorePolicy", string().enumerate(INSTANCE_STORE_POLICIES).description("RAID0 joins the NVMe instance-store disks and puts kubelet and container state on them."))
        .prop("networkInterfaces", network_interfaces().description("Network interfaces per network card; must include the primary interface."))
        .prop("detailedMonitoring", boolean().description("Whether CloudWatch detailed monitoring is enabled on instances."))
        .prop("metadataOptions", metadata_options().description("Instance Metadata Service options of the launch template."))
        .prop("connectionTracking", connection_tracking().description("Connection-tracking timeouts of the network interfaces (Nitro instances only)."))
        .prop("context", string().description("Reserved EC2 CreateFleet context."))
        .prop("cpuOptions", object().prop("nestedVirtualization", string().enumerate(ENABLED_DISABLED)))
        .required(&["amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"])
        .rule(
            "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
            ROLE_XOR_INSTANCE_PROFILE,
        )
        .transition_rule(
            "(has(oldSelf.role) && has(self.role)) || (has(oldSelf.instanceProfile) && has(self.instanceProfile))",
            ROLE_PROFILE_SWITCH,
        );
    for (alias, family) in super::v1::ALIAS_FAMILIES {
        s = s.rule(
            &format!(
                "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == '{alias}') ? (self.amiFamily == 'Custom' || self.amiFamily == '{family}') : true)"
            ),
            &alias_family_message(family),
        );
    }
    s.rule(
        "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
        AMI_FAMILY_REQUIRED,
    )
}

/// A tag selector map: at most 20 entries, no empty key or value.
fn selector_tags() -> Schema {
    map_of(string())
        .max_properties(MAX_SELECTOR_TAGS)
        .rule("self.all(k, k != '' && self[k] != '')", SELECTOR_TAG_EMPTY)
}

fn subnet_terms() -> Schema {
    let term = object()
        .prop("tags", selector_tags())
        .prop("id", string().pattern(SUBNET_ID_PATTERN));
    array(term)
        .max_items(MAX_SELECTOR_TERMS)
        .rule("self.size() != 0", SUBNET_TERMS_EMPTY)
        .rule("self.all(x, has(x.tags) || has(x.id))", SUBNET_TERM_NONE)
        .rule(
            "!self.exists(x, has(x.id) && has(x.tags))",
            SUBNET_ID_EXCLUSIVE,
        )
}

fn security_group_terms() -> Schema {
    let term = object()
        .prop("tags", selector_tags())
        .prop("id", string().pattern(SECURITY_GROUP_ID_PATTERN))
        .prop("name", string());
    array(term)
        .max_items(MAX_SELECTOR_TERMS)
        .rule("self.size() != 0", SG_TERMS_EMPTY)
        .rule(
            "self.all(x, has(x.tags) || has(x.id) || has(x.name))",
            SG_TERM_NONE,
        )
        .rule(
            "!self.exists(x, has(x.id) && (has(x.tags) || has(x.name)))",
            SG_ID_EXCLUSIVE,
        )
        .rule(
            "!self.exists(x, has(x.name) && (has(x.tags) || has(x.id)))",
            SG_NAME_EXCLUSIVE,
        )
}

fn capacity_reservation_terms() -> Schema {
    let term = object()
        .prop("tags", selector_tags())
        .prop("id", string().pattern(CAPACITY_RESERVATION_ID_PATTERN))
        .prop("ownerID", string().pattern(OWNER_ID_PATTERN))
        .prop(
            "instanceMatchCriteria",
            string().enumerate(INSTANCE_MATCH_CRITERIA),
        );
    array(term)
        .max_items(MAX_SELECTOR_TERMS)
        .rule("self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))", CR_TERM_NONE)
        .rule(
            "!self.exists(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))",
            CR_ID_EXCLUSIVE,
        )
}

fn placement_group() -> Schema {
    object()
        .prop("name", string())
        .prop("id", string().pattern(PLACEMENT_GROUP_ID_PATTERN))
        .rule("has(self.name) != has(self.id)", PLACEMENT_GROUP_XOR)
}

fn ami_terms() -> Schema {
    let windows = WINDOWS_ALIAS_FAMILIES
        .iter()
        .map(|f| format!("'{f}'"))
        .collect::<Vec<_>>()
        .join(",");
    let families = ALIAS_FAMILY_NAMES
        .iter()
        .map(|f| format!("'{f}'"))
        .collect::<Vec<_>>()
        .join(",");
    let alias = string()
        .max_length(MAX_ALIAS_LENGTH)
        .rule(
            &format!("self.matches('{ALIAS_FORMAT_PATTERN}')"),
            ALIAS_FORMAT,
        )
        .rule(
            &format!("self.find('^[^@]+') in [{families}]"),
            ALIAS_FAMILY,
        )
        .rule(
            &format!("self.find('^[^@]+') in [{windows}] ? self.find('[^@]+$') == 'latest' : true"),
            ALIAS_WINDOWS_LATEST,
        );
    let term = object()
        .prop("alias", alias)
        .prop("tags", selector_tags())
        .prop("id", string().pattern(AMI_ID_PATTERN))
        .prop("name", string())
        .prop("owner", string())
        .prop("ssmParameter", string());
    array(term)
        .min_items(1)
        .max_items(MAX_SELECTOR_TERMS)
        .rule(
            "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))",
            AMI_TERM_NONE,
        )
        .rule(
            "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner) || has(x.ssmParameter)))",
            AMI_ID_EXCLUSIVE,
        )
        .rule(
            "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner) || has(x.ssmParameter)))",
            AMI_ALIAS_EXCLUSIVE_FIELDS,
        )
        .rule("!(self.exists(x, has(x.alias)) && self.size() != 1)", AMI_ALIAS_EXCLUSIVE_TERMS)
}

fn tags() -> Schema {
    let mut s = map_of(string()).rule("self.all(k, k != '')", TAG_KEY_EMPTY);
    for (rule, message, _) in RESTRICTED_TAGS {
        s = s.rule(rule, message);
    }
    s
}

fn in_list(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("'{v}'"))
        .collect::<Vec<_>>()
        .join(",")
}

fn reserved(field: &str) -> Schema {
    map_of(string().pattern(QUANTITY_PATTERN))
        .rule(
            &format!("self.all(x, x in [{}])", in_list(RESERVED_RESOURCES)),
            &reserved_keys_message(field),
        )
        .rule(
            "self.all(x, !self[x].startsWith('-'))",
            &reserved_negative_message(field),
        )
}

fn eviction(field: &str, thresholds: bool) -> Schema {
    let value = if thresholds {
        string().pattern(EVICTION_VALUE_PATTERN)
    } else {
        string()
    };
    map_of(value).rule(
        &format!("self.all(x, x in [{}])", in_list(EVICTION_SIGNALS)),
        &eviction_keys_message(field),
    )
}

/// The twelve managed kubelet fields, typed; any other kubelet field is preserved.
fn kubelet() -> Schema {
    object()
        .prop("clusterDNS", array(string()))
        .prop("maxPods", int32().minimum(0))
        .prop("podsPerCore", int32().minimum(0))
        .prop("systemReserved", reserved("systemReserved"))
        .prop("kubeReserved", reserved("kubeReserved"))
        .prop("evictionHard", eviction("evictionHard", true))
        .prop("evictionSoft", eviction("evictionSoft", true))
        .prop("evictionSoftGracePeriod", eviction("evictionSoftGracePeriod", false))
        .prop("evictionMaxPodGracePeriod", int32())
        .prop("imageGCHighThresholdPercent", int32().minimum(0).maximum(100))
        .prop("imageGCLowThresholdPercent", int32().minimum(0).maximum(100))
        .prop("cpuCFSQuota", boolean())
        // Declared only so the rule below compiles: the API server types CEL's `self` from
        // the declared properties, and `has()` of an undeclared field is a compile error.
        .prop(
            "registerWithTaints",
            array(object().preserve_unknown_fields()),
        )
        .preserve_unknown_fields()
        .rule(
            "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true",
            IMAGE_GC_ORDER,
        )
        .rule(
            "has(self.evictionSoft) ? (has(self.evictionSoftGracePeriod) && self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod))) : true",
            EVICTION_SOFT_UNMATCHED,
        )
        .rule(
            "has(self.evictionSoftGracePeriod) ? (has(self.evictionSoft) && self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft))) : true",
            EVICTION_GRACE_UNMATCHED,
        )
        .rule("!has(self.registerWithTaints)", REGISTER_WITH_TAINTS)
}

fn block_device_mappings() -> Schema {
    let ebs = object()
        .prop("deleteOnTermination", boolean())
        .prop("encrypted", boolean())
        .prop("iops", int64())
        .prop("kmsKeyID", string())
        .prop("snapshotID", string())
        .prop("throughput", int64())
        .prop(
            "volumeInitializationRate",
            int32().minimum(100).maximum(300),
        )
        .prop("volumeSize", string().pattern(VOLUME_SIZE_PATTERN))
        .prop("volumeType", string().enumerate(VOLUME_TYPES))
        .rule(
            "has(self.snapshotID) || has(self.volumeSize)",
            EBS_SIZE_OR_SNAPSHOT,
        )
        .rule(
            "!has(self.volumeInitializationRate) || has(self.snapshotID)",
            EBS_INIT_RATE_SNAPSHOT,
        );
    let mapping = object()
        .prop("deviceName", string())
        .prop("ebs", ebs)
        .prop("rootVolume", boolean());
    array(mapping).max_items(MAX_BLOCK_DEVICE_MAPPINGS).rule(
        "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1",
        ROOT_VOLUME_ONCE,
    )
}

fn network_interfaces() -> Schema {
    let ni = object()
        .prop("networkCardIndex", int32().minimum(0))
        .prop("deviceIndex", int32().minimum(0))
        .prop("interfaceType", string().enumerate(INTERFACE_TYPES))
        .required(&["deviceIndex", "interfaceType", "networkCardIndex"]);
    array(ni)
        .max_items(MAX_NETWORK_INTERFACES)
        .rule(
            "self.exists(x, x.networkCardIndex == 0 && x.deviceIndex == 0 && x.interfaceType == 'interface')",
            NI_PRIMARY,
        )
        .rule(
            "self.all(x, self.filter(y, y.networkCardIndex == x.networkCardIndex && y.deviceIndex == x.deviceIndex).size() == 1)",
            NI_UNIQUE,
        )
        .rule(
            "self.all(x, x.interfaceType != 'efa-only' || self.filter(y, y.interfaceType == 'efa-only' && y.networkCardIndex == x.networkCardIndex).size() == 1)",
            NI_ONE_EFA_ONLY,
        )
}

fn metadata_options() -> Schema {
    object()
        .prop(
            "httpEndpoint",
            string()
                .enumerate(ENABLED_DISABLED)
                .default(json!("enabled")),
        )
        .prop(
            "httpProtocolIPv6",
            string()
                .enumerate(ENABLED_DISABLED)
                .default(json!("disabled")),
        )
        .prop(
            "httpPutResponseHopLimit",
            int64().minimum(1).maximum(64).default(json!(1)),
        )
        .prop(
            "httpTokens",
            string().enumerate(HTTP_TOKENS).default(json!("required")),
        )
        .default(json!({
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 1,
            "httpTokens": "required",
        }))
}

fn connection_tracking() -> Schema {
    object()
        .prop("tcpEstablishedTimeout", int32().minimum(60).maximum(432000))
        .prop("udpStreamTimeout", int32().minimum(60).maximum(180))
        .prop("udpTimeout", int32().minimum(30).maximum(60))
        .rule(
            "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
            CONNTRACK_NONE,
        )
}

fn condition() -> Schema {
    object()
        .prop("type", string().max_length(316).pattern(
            r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        ))
        .prop("status", string().enumerate(&["True", "False", "Unknown"]))
        .prop("lastTransitionTime", string().format("date-time"))
        .prop("observedGeneration", int64().minimum(0))
        .prop("reason", string().max_length(1024).pattern(r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?)?$"))
        .prop("message", string().max_length(32768))
        .required(&["lastTransitionTime", "status", "type"])
}

fn status() -> Schema {
    let requirement = object()
        .prop("key", string())
        .prop("operator", string())
        .prop("values", array(string()).list_type("atomic"))
        .prop("minValues", int32())
        .required(&["key", "operator"]);
    let ami = object()
        .prop("id", string())
        .prop("deprecated", boolean())
        .prop("name", string())
        .prop("requirements", array(requirement))
        .required(&["id", "requirements"]);
    let capacity_reservation = object()
        .prop("availabilityZone", string())
        .prop("endTime", string().format("date-time"))
        .prop("id", string().pattern(CAPACITY_RESERVATION_ID_PATTERN))
        .prop(
            "instanceMatchCriteria",
            string().enumerate(INSTANCE_MATCH_CRITERIA),
        )
        .prop("instanceType", string())
        .prop("ownerID", string().pattern(OWNER_ID_PATTERN))
        .prop(
            "reservationType",
            string()
                .enumerate(&["default", "capacity-block"])
                .default(json!("default")),
        )
        .prop("interruptible", boolean())
        .prop(
            "state",
            string()
                .enumerate(&["active", "expiring"])
                .default(json!("active")),
        )
        .required(&[
            "availabilityZone",
            "id",
            "instanceMatchCriteria",
            "instanceType",
            "ownerID",
        ]);
    object()
        .prop(
            "subnets",
            array(
                object()
                    .prop("id", string())
                    .prop("zone", string())
                    .prop("zoneID", string())
                    .required(&["id", "zone"]),
            ),
        )
        .prop(
            "securityGroups",
            array(
                object()
                    .prop("id", string())
                    .prop("name", string())
                    .required(&["id"]),
            ),
        )
        .prop("capacityReservations", array(capacity_reservation))
        .prop("amis", array(ami))
        .prop("instanceProfile", string())
        .prop("conditions", array(condition()))
}
