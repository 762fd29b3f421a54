//! The EC2NodeClass CRD (`ec2nodeclasses.karpenter.k8s.aws`): short names `ec2nc`/`ec2ncs`,
//! category `karpenter`, status subresource. The schema itself is stated in [`crate::aws::crd`].

use serde_json::json;

use super::envelope::{Crd, CrdNames};
use crate::aws;

pub fn ec2nodeclass_crd() -> Crd {
    Crd {
        names: CrdNames {
            group: aws::GROUP,
            kind: "EC2NodeClass",
            plural: "ec2nodeclasses",
            singular: "ec2nodeclass",
            short_names: &["ec2nc", "ec2ncs"],
            categories: &["karpenter"],
        },
        schema: aws::crd::ec2nodeclass_schema(),
        v1beta1: super::v1beta1::ec2nodeclass(&aws::crd::ec2nodeclass_schema()),
        printer_columns: aws::crd::ec2nodeclass_printer_columns(),
        subresources: json!({"status": {}}),
    }
}
