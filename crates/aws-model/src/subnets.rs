//! Which subnet a launch uses in each zone: the one with the most free addresses, leaving out
//! subnets the unavailable-offerings cache marked full. A zone whose subnets are all marked has
//! no subnet, so its offerings cannot be launched.

use std::collections::BTreeMap;

use nodewright_core::time::Timestamp;

use crate::ice::UnavailableOfferings;

/// A subnet from the NodeClass's status, with its free-address count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubnetInfo {
    pub id: String,
    pub zone: String,
    pub available_ips: u64,
}

/// Zone → chosen subnet id. Ties go to the lower subnet id so the choice is stable.
pub fn zonal_subnets(
    subnets: &[SubnetInfo],
    unavailable: &UnavailableOfferings,
    now: Timestamp,
) -> BTreeMap<String, String> {
    let mut best: BTreeMap<&str, &SubnetInfo> = BTreeMap::new();
    for s in subnets
        .iter()
        .filter(|s| !unavailable.is_subnet_unavailable(&s.id, now))
    {
        let better = best.get(s.zone.as_str()).is_none_or(|cur| {
            s.available_ips > cur.available_ips
                || (s.available_ips == cur.available_ips && s.id < cur.id)
        });
        if better {
            best.insert(&s.zone, s);
        }
    }
    best.into_iter()
        .map(|(zone, s)| (zone.to_string(), s.id.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(id: &str, zone: &str, ips: u64) -> SubnetInfo {
        SubnetInfo {
            id: id.into(),
            zone: zone.into(),
            available_ips: ips,
        }
    }

    #[test]
    fn most_free_addresses_per_zone_skipping_full_subnets() {
        let subnets = [
            subnet("subnet-a1", "a", 100),
            subnet("subnet-a2", "a", 4000),
            subnet("subnet-b2", "b", 50),
            subnet("subnet-b1", "b", 50),
            subnet("subnet-c1", "c", 10),
        ];
        let now = Timestamp(1_000);
        let mut cache = UnavailableOfferings::new();
        let chosen = zonal_subnets(&subnets, &cache, now);
        assert_eq!(
            chosen,
            BTreeMap::from([
                ("a".to_string(), "subnet-a2".to_string()),
                ("b".to_string(), "subnet-b1".to_string()),
                ("c".to_string(), "subnet-c1".to_string()),
            ])
        );
        cache.mark_subnet("subnet-a2", now);
        cache.mark_subnet("subnet-c1", now);
        let chosen = zonal_subnets(&subnets, &cache, now);
        assert_eq!(chosen.get("a").map(String::as_str), Some("subnet-a1"));
        assert_eq!(chosen.get("c"), None, "every subnet of zone c is full");
    }
}
