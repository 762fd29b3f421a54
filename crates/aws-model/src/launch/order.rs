//! The order in which a launch tries the offerings a claim may use, as Karpenter's AWS
//! provider asks CreateFleet: the capacity type first (reserved, then spot, then on-demand: the
//! first that has an offering here), then the cheapest offering of that type (ties: instance
//! type, then zone). Offerings of the other capacity types are not tried: a claim whose spot
//! offerings are all out of capacity gets on-demand on its next launch, once they are known
//! to be unavailable. The simulated cloud (`cloud-sim`'s fleet, which the controller and the
//! simulator share) launches so.

use nodewright_core::model::CapacityType;

/// One offering a launch may use.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
}

fn rank(c: CapacityType) -> u8 {
    match c {
        CapacityType::Reserved => 0,
        CapacityType::Spot => 1,
        CapacityType::OnDemand => 2,
    }
}

/// `choices` of the first capacity type that has any, cheapest first.
pub fn in_launch_order(mut choices: Vec<Choice>) -> Vec<Choice> {
    let Some(best) = choices.iter().map(|c| rank(c.capacity_type)).min() else {
        return choices;
    };
    choices.retain(|c| rank(c.capacity_type) == best);
    choices.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.instance_type.cmp(&b.instance_type))
            .then_with(|| a.zone.cmp(&b.zone))
    });
    choices
}

#[cfg(test)]
mod tests {
    use super::*;
    use CapacityType::*;

    fn c(t: &str, z: &str, ct: CapacityType, price: f64) -> Choice {
        Choice {
            instance_type: t.into(),
            zone: z.into(),
            capacity_type: ct,
            price,
        }
    }

    #[test]
    fn spot_comes_before_a_cheaper_on_demand_offering_and_reserved_before_both() {
        let order = in_launch_order(vec![
            c("m5.large", "a", OnDemand, 0.02),
            c("m5.xlarge", "b", Spot, 0.07),
            c("m5.large", "b", Spot, 0.04),
        ]);
        assert_eq!(
            order,
            vec![
                c("m5.large", "b", Spot, 0.04),
                c("m5.xlarge", "b", Spot, 0.07)
            ]
        );
        let order = in_launch_order(vec![
            c("m5.large", "b", Spot, 0.04),
            c("m5.large", "a", Reserved, 0.0),
        ]);
        assert_eq!(order, vec![c("m5.large", "a", Reserved, 0.0)]);
    }

    #[test]
    fn equal_prices_go_by_type_then_zone() {
        let order = in_launch_order(vec![
            c("m5.large", "b", OnDemand, 0.1),
            c("c5.large", "c", OnDemand, 0.1),
            c("m5.large", "a", OnDemand, 0.1),
        ]);
        let names: Vec<_> = order
            .iter()
            .map(|c| format!("{}/{}", c.instance_type, c.zone))
            .collect();
        assert_eq!(names, ["c5.large/c", "m5.large/a", "m5.large/b"]);
        assert!(in_launch_order(Vec::new()).is_empty());
    }
}
