//! The EC2NodeClass CRD schema: the v1 defaults and required fields, and the printer columns.
//! The real API server compiles its rules in the cluster suite.

use nodewright_api::aws::crd::{ec2nodeclass_printer_columns, ec2nodeclass_schema};
use serde_json::json;

#[test]
fn metadata_options_default_to_the_v1_values() {
    let s = ec2nodeclass_schema();
    let m = &s["properties"]["spec"]["properties"]["metadataOptions"];
    assert_eq!(
        m["default"],
        json!({"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"})
    );
    assert_eq!(m["properties"]["httpPutResponseHopLimit"]["default"], 1);
    let kubelet = &s["properties"]["spec"]["properties"]["kubelet"];
    assert_eq!(kubelet["x-kubernetes-preserve-unknown-fields"], true);
    assert_eq!(
        s["properties"]["spec"]["required"],
        json!([
            "amiSelectorTerms",
            "securityGroupSelectorTerms",
            "subnetSelectorTerms"
        ])
    );
}

#[test]
fn printer_columns_show_ready_age_and_role() {
    let cols = ec2nodeclass_printer_columns();
    let names: Vec<&str> = cols
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Ready", "Age", "Role"]);
    assert_eq!(cols[2]["priority"], 1);
    assert_eq!(
        cols[0]["jsonPath"],
        ".status.conditions[?(@.type==\"Ready\")].status"
    );
}
