//! Rules for the launch settings: block devices, network interfaces, metadata options and
//! connection tracking.

use std::collections::{BTreeMap, BTreeSet};

use super::super::common::{BlockDeviceMapping, IntOrString, MetadataOptions};
use super::super::rules::*;
use super::super::v1::{ConnectionTracking, NetworkInterface};
use super::{at_least_value, in_range, matches, one_of};
use crate::error::{FieldError, Path};

pub(super) fn block_device_mappings(
    bdms: &[BlockDeviceMapping],
    p: &Path,
    errs: &mut Vec<FieldError>,
) {
    if bdms.len() as u64 > MAX_BLOCK_DEVICE_MAPPINGS {
        errs.push(p.error(too_many(bdms.len(), MAX_BLOCK_DEVICE_MAPPINGS)));
    }
    if bdms.iter().filter(|b| b.root_volume == Some(true)).count() > 1 {
        errs.push(p.error(ROOT_VOLUME_ONCE));
    }
    for (i, b) in bdms.iter().enumerate() {
        let Some(ebs) = &b.ebs else { continue };
        let ep = p.index(i).field("ebs");
        if ebs.snapshot_id.is_none() && ebs.volume_size.is_none() {
            errs.push(ep.error(EBS_SIZE_OR_SNAPSHOT));
        }
        match &ebs.volume_size {
            Some(IntOrString::String(size)) => {
                matches(size, VOLUME_SIZE_PATTERN, &ep.field("volumeSize"), errs)
            }
            Some(IntOrString::Int(_)) => errs.push(
                ep.field("volumeSize")
                    .error("must be of type string, got integer"),
            ),
            None => {}
        }
        if let Some(t) = &ebs.volume_type {
            one_of(t, VOLUME_TYPES, &ep.field("volumeType"), errs);
        }
        if let Some(rate) = ebs.volume_initialization_rate {
            in_range(rate, 100, 300, &ep.field("volumeInitializationRate"), errs);
            if ebs.snapshot_id.is_none() {
                errs.push(ep.error(EBS_INIT_RATE_SNAPSHOT));
            }
        }
    }
}

pub(super) fn network_interfaces(nis: &[NetworkInterface], p: &Path, errs: &mut Vec<FieldError>) {
    if nis.len() as u64 > MAX_NETWORK_INTERFACES {
        errs.push(p.error(too_many(nis.len(), MAX_NETWORK_INTERFACES)));
    }
    for (i, ni) in nis.iter().enumerate() {
        let ip = p.index(i);
        match ni.network_card_index {
            Some(n) => at_least_value(n, 0, &ip.field("networkCardIndex"), errs),
            None => errs.push(ip.field("networkCardIndex").error(REQUIRED)),
        }
        match ni.device_index {
            Some(n) => at_least_value(n, 0, &ip.field("deviceIndex"), errs),
            None => errs.push(ip.field("deviceIndex").error(REQUIRED)),
        }
        match &ni.interface_type {
            Some(t) => one_of(t, INTERFACE_TYPES, &ip.field("interfaceType"), errs),
            None => errs.push(ip.field("interfaceType").error(REQUIRED)),
        }
    }
    let primary = nis.iter().any(|ni| {
        ni.network_card_index == Some(0)
            && ni.device_index == Some(0)
            && ni.interface_type.as_deref() == Some("interface")
    });
    if !primary {
        errs.push(p.error(NI_PRIMARY));
    }
    let mut pairs = BTreeSet::new();
    if !nis
        .iter()
        .all(|ni| pairs.insert((ni.network_card_index, ni.device_index)))
    {
        errs.push(p.error(NI_UNIQUE));
    }
    let mut efa_only: BTreeMap<Option<i64>, usize> = BTreeMap::new();
    for ni in nis
        .iter()
        .filter(|ni| ni.interface_type.as_deref() == Some("efa-only"))
    {
        *efa_only.entry(ni.network_card_index).or_default() += 1;
    }
    if efa_only.values().any(|&n| n > 1) {
        errs.push(p.error(NI_ONE_EFA_ONLY));
    }
}

pub(super) fn metadata_options(m: &MetadataOptions, p: &Path, errs: &mut Vec<FieldError>) {
    if let Some(v) = &m.http_endpoint {
        one_of(v, ENABLED_DISABLED, &p.field("httpEndpoint"), errs);
    }
    if let Some(v) = &m.http_protocol_ipv6 {
        one_of(v, ENABLED_DISABLED, &p.field("httpProtocolIPv6"), errs);
    }
    if let Some(v) = m.http_put_response_hop_limit {
        in_range(v, 1, 64, &p.field("httpPutResponseHopLimit"), errs);
    }
    if let Some(v) = &m.http_tokens {
        one_of(v, HTTP_TOKENS, &p.field("httpTokens"), errs);
    }
}

pub(super) fn connection_tracking(ct: &ConnectionTracking, p: &Path, errs: &mut Vec<FieldError>) {
    if ct.tcp_established_timeout.is_none()
        && ct.udp_stream_timeout.is_none()
        && ct.udp_timeout.is_none()
    {
        errs.push(p.error(CONNTRACK_NONE));
    }
    if let Some(v) = ct.tcp_established_timeout {
        in_range(v, 60, 432000, &p.field("tcpEstablishedTimeout"), errs);
    }
    if let Some(v) = ct.udp_stream_timeout {
        in_range(v, 60, 180, &p.field("udpStreamTimeout"), errs);
    }
    if let Some(v) = ct.udp_timeout {
        in_range(v, 30, 60, &p.field("udpTimeout"), errs);
    }
}
