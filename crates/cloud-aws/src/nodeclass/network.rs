//! Subnets and security groups chosen by a class's selector terms. Terms are ORed; within a
//! term, fields are ANDed. A tag value `*` means "the key exists".

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Filter;
use nodewright_api::aws::common::Tags;
use nodewright_api::aws::v1::{SecurityGroupSelectorTerm, SubnetSelectorTerm};

use crate::AwsClients;
use crate::error::AwsError;

/// A selected subnet with what launches need from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedSubnet {
    pub id: String,
    pub zone: String,
    pub zone_id: Option<String>,
    pub available_ips: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedSecurityGroup {
    pub id: String,
    pub name: String,
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

/// `tag:<k>=<v>`, or `tag-key=<k>` for `*`.
pub fn tag_filters(tags: &Tags) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" {
                filter("tag-key", k)
            } else {
                filter(&format!("tag:{k}"), v)
            }
        })
        .collect()
}

/// The EC2 filters of one subnet term; `None` for a term that selects nothing (no field set).
pub fn subnet_filters(term: &SubnetSelectorTerm) -> Option<Vec<Filter>> {
    let mut f = Vec::new();
    if let Some(id) = &term.id {
        f.push(filter("subnet-id", id));
    }
    f.extend(term.tags.as_ref().map(tag_filters).unwrap_or_default());
    (!f.is_empty()).then_some(f)
}

pub fn security_group_filters(term: &SecurityGroupSelectorTerm) -> Option<Vec<Filter>> {
    let mut f = Vec::new();
    if let Some(id) = &term.id {
        f.push(filter("group-id", id));
    }
    if let Some(name) = &term.name {
        f.push(filter("group-name", name));
    }
    f.extend(term.tags.as_ref().map(tag_filters).unwrap_or_default());
    (!f.is_empty()).then_some(f)
}

/// Every subnet any term selects, most free addresses first, then by id.
pub async fn resolve_subnets(
    c: &AwsClients,
    terms: &[SubnetSelectorTerm],
) -> Result<Vec<ResolvedSubnet>, AwsError> {
    let mut found: BTreeMap<String, ResolvedSubnet> = BTreeMap::new();
    for filters in terms.iter().filter_map(subnet_filters) {
        let mut token = None;
        loop {
            let out = c
                .ec2
                .describe_subnets()
                .set_filters(Some(filters.clone()))
                .set_next_token(token)
                .max_results(500)
                .send()
                .await
                .map_err(|e| AwsError::from_sdk("DescribeSubnets", e))?;
            for s in out.subnets() {
                let (Some(id), Some(zone)) = (s.subnet_id(), s.availability_zone()) else {
                    continue;
                };
                found.insert(
                    id.to_string(),
                    ResolvedSubnet {
                        id: id.to_string(),
                        zone: zone.to_string(),
                        zone_id: s.availability_zone_id().map(str::to_string),
                        available_ips: s.available_ip_address_count().unwrap_or(0).max(0) as u64,
                    },
                );
            }
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
    }
    let mut out: Vec<ResolvedSubnet> = found.into_values().collect();
    out.sort_by(|a, b| b.available_ips.cmp(&a.available_ips).then(a.id.cmp(&b.id)));
    Ok(out)
}

/// Every security group any term selects, sorted by id.
pub async fn resolve_security_groups(
    c: &AwsClients,
    terms: &[SecurityGroupSelectorTerm],
) -> Result<Vec<ResolvedSecurityGroup>, AwsError> {
    let mut found: BTreeMap<String, ResolvedSecurityGroup> = BTreeMap::new();
    for filters in terms.iter().filter_map(security_group_filters) {
        let mut token = None;
        loop {
            let out = c
                .ec2
                .describe_security_groups()
                .set_filters(Some(filters.clone()))
                .set_next_token(token)
                .max_results(1000)
                .send()
                .await
                .map_err(|e| AwsError::from_sdk("DescribeSecurityGroups", e))?;
            for g in out.security_groups() {
                let Some(id) = g.group_id() else { continue };
                found.insert(
                    id.to_string(),
                    ResolvedSecurityGroup {
                        id: id.to_string(),
                        name: g.group_name().unwrap_or_default().to_string(),
                    },
                );
            }
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
    }
    Ok(found.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_tag_becomes_tag_key() {
        let tags: Tags = [
            ("a".to_string(), "*".to_string()),
            ("b".to_string(), "x".to_string()),
        ]
        .into();
        let f = tag_filters(&tags);
        assert_eq!(f[0].name(), Some("tag-key"));
        assert_eq!(f[0].values(), ["a"]);
        assert_eq!(f[1].name(), Some("tag:b"));
        assert_eq!(f[1].values(), ["x"]);
        assert!(subnet_filters(&SubnetSelectorTerm::default()).is_none());
    }
}
