//! Which offering a launch lands on, as pure data: the claim's requirements are checked
//! against each instance type's labels and each offering's zone and capacity type with the AWS
//! provider's own rules (`aws_model::launch`), the instance type must hold the claim's
//! requests, and what remains is tried in the provider's launch order
//! (`aws_model::launch::order`): capacity type first, then price.

use nodewright_aws_model::launch::order::in_launch_order;
use nodewright_aws_model::launch::{offering_compatible, type_compatible};
use nodewright_core::model::{InstanceType, Offering};
use nodewright_core::requirements::Requirement;
use nodewright_core::resources::Resources;

pub use nodewright_aws_model::launch::order::Choice;

/// Every usable offering for the claim, in launch order (see the module header). `usable`
/// filters offerings further (capacity the cloud has, offerings not recently out of capacity).
pub fn candidates(
    instance_types: &[InstanceType],
    requirements: &[Requirement],
    requests: &Resources,
    usable: impl Fn(&str, &Offering) -> bool,
) -> Vec<Choice> {
    let mut out: Vec<Choice> = Vec::new();
    for it in instance_types {
        if !requests.fits_in(&it.allocatable()) || !type_compatible(it, requirements) {
            continue;
        }
        for o in &it.offerings {
            if usable(&it.name, o) && offering_compatible(o, requirements) {
                out.push(Choice {
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                    price: o.price,
                });
            }
        }
    }
    in_launch_order(out)
}

#[cfg(test)]
mod tests;
