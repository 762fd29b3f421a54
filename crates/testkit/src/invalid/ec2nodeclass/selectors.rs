//! Invalid EC2NodeClasses: the selector terms for subnets, security groups, AMIs and capacity
//! reservations, and the placement group.

use super::*;

/// Subnets, security groups, AMIs, capacity reservations and the placement group.
pub(super) fn selector_rows() -> Vec<Row> {
    vec![
        // subnets
        row_printing(
            "subnet terms missing",
            vec![("/spec/subnetSelectorTerms", Value::Null)],
            "spec.subnetSelectorTerms",
            "required value",
            &["spec.subnetSelectorTerms: required field is missing"],
        ),
        row(
            "subnet terms empty",
            vec![("/spec/subnetSelectorTerms", json!([]))],
            "spec.subnetSelectorTerms",
            "subnetSelectorTerms cannot be empty",
        ),
        row_printing(
            "too many subnet terms",
            vec![(
                "/spec/subnetSelectorTerms",
                many(31, json!({"id": "subnet-1"})),
            )],
            "spec.subnetSelectorTerms",
            "too many: 31: must have at most 30 items",
            &["spec.subnetSelectorTerms: must have at most 30 items"],
        ),
        row(
            "empty subnet term",
            vec![("/spec/subnetSelectorTerms", json!([{}]))],
            "spec.subnetSelectorTerms[0]",
            "expected at least one, got none, ['tags', 'id']",
        ),
        row(
            "subnet id with tags",
            vec![(
                "/spec/subnetSelectorTerms",
                json!([{"id": "subnet-1", "tags": {"a": "b"}}]),
            )],
            "spec.subnetSelectorTerms[0]",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in subnetSelectorTerms",
        ),
        row_printing(
            "bad subnet id",
            vec![("/spec/subnetSelectorTerms", json!([{"id": "sn-1"}]))],
            "spec.subnetSelectorTerms[0].id",
            "should match 'subnet-[0-9a-z]+'",
            &[
                r#"spec.subnetSelectorTerms[0].id: invalid value "sn-1": must match 'subnet-[0-9a-z]+'"#,
            ],
        ),
        row(
            "empty selector tag value",
            vec![("/spec/subnetSelectorTerms", json!([{"tags": {"a": ""}}]))],
            "spec.subnetSelectorTerms[0].tags",
            "empty tag keys or values aren't supported",
        ),
        row_printing(
            "too many selector tags",
            vec![("/spec/subnetSelectorTerms", json!([{"tags": tags(21)}]))],
            "spec.subnetSelectorTerms[0].tags",
            "too many: 21: must have at most 20 items",
            &["spec.subnetSelectorTerms[0].tags: must have at most 20 properties"],
        ),
        // security groups
        row_printing(
            "sg terms missing",
            vec![("/spec/securityGroupSelectorTerms", Value::Null)],
            "spec.securityGroupSelectorTerms",
            "required value",
            &["spec.securityGroupSelectorTerms: required field is missing"],
        ),
        row(
            "sg terms empty",
            vec![("/spec/securityGroupSelectorTerms", json!([]))],
            "spec.securityGroupSelectorTerms",
            "securityGroupSelectorTerms cannot be empty",
        ),
        row_printing(
            "too many sg terms",
            vec![(
                "/spec/securityGroupSelectorTerms",
                many(31, json!({"id": "sg-1"})),
            )],
            "spec.securityGroupSelectorTerms",
            "too many: 31: must have at most 30 items",
            &["spec.securityGroupSelectorTerms: must have at most 30 items"],
        ),
        row(
            "empty sg term",
            vec![("/spec/securityGroupSelectorTerms", json!([{}]))],
            "spec.securityGroupSelectorTerms[0]",
            "expected at least one, got none, ['tags', 'id', 'name']",
        ),
        row(
            "sg id with tags",
            vec![(
                "/spec/securityGroupSelectorTerms",
                json!([{"id": "sg-1", "tags": {"a": "b"}}]),
            )],
            "spec.securityGroupSelectorTerms[0]",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in securityGroupSelectorTerms",
        ),
        row(
            "sg name with tags",
            vec![(
                "/spec/securityGroupSelectorTerms",
                json!([{"name": "n", "tags": {"a": "b"}}]),
            )],
            "spec.securityGroupSelectorTerms[0]",
            "'name' is mutually exclusive, cannot be set with a combination of other fields in securityGroupSelectorTerms",
        ),
        row_printing(
            "bad sg id",
            vec![(
                "/spec/securityGroupSelectorTerms",
                json!([{"id": "group-1"}]),
            )],
            "spec.securityGroupSelectorTerms[0].id",
            "should match 'sg-[0-9a-z]+'",
            &[
                r#"spec.securityGroupSelectorTerms[0].id: invalid value "group-1": must match 'sg-[0-9a-z]+'"#,
            ],
        ),
        // AMIs
        row_printing(
            "ami terms missing",
            vec![("/spec/amiSelectorTerms", Value::Null)],
            "spec.amiSelectorTerms",
            "required value",
            &["spec.amiSelectorTerms: required field is missing"],
        ),
        row_printing(
            "ami terms empty",
            vec![
                ("/spec/amiSelectorTerms", json!([])),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms",
            "too few: 0: must have at least 1 items",
            &["spec.amiSelectorTerms: must have at least 1 items"],
        ),
        row_printing(
            "too many ami terms",
            vec![
                ("/spec/amiSelectorTerms", many(31, json!({"id": "ami-1"}))),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms",
            "too many: 31: must have at most 30 items",
            &["spec.amiSelectorTerms: must have at most 30 items"],
        ),
        row(
            "empty ami term",
            vec![
                ("/spec/amiSelectorTerms", json!([{}])),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms[0]",
            "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
        ),
        row(
            "ami id with name",
            vec![
                (
                    "/spec/amiSelectorTerms",
                    json!([{"id": "ami-1", "name": "n"}]),
                ),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms[0]",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
        ),
        row(
            "alias with owner",
            vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "al2023@latest", "owner": "self"}]),
            )],
            "spec.amiSelectorTerms[0]",
            "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
        ),
        row(
            "alias with another term",
            vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "al2023@latest"}, {"name": "n"}]),
            )],
            "spec.amiSelectorTerms",
            "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
        ),
        row(
            "alias without version",
            vec![("/spec/amiSelectorTerms", json!([{"alias": "al2023"}]))],
            "spec.amiSelectorTerms[0].alias",
            "'alias' is improperly formatted, must match the format 'family@version'",
        ),
        row(
            "alias of unknown family",
            vec![
                (
                    "/spec/amiSelectorTerms",
                    json!([{"alias": "ubuntu@latest"}]),
                ),
                ("/spec/amiFamily", json!("Custom")),
            ],
            "spec.amiSelectorTerms[0].alias",
            "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",
        ),
        row(
            "pinned windows alias",
            vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "windows2022@v20240101"}]),
            )],
            "spec.amiSelectorTerms[0].alias",
            "windows families may only specify version 'latest'",
        ),
        row_printing(
            "alias too long",
            vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "al2023@v2024010100000000000000000"}]),
            )],
            "spec.amiSelectorTerms[0].alias",
            "too long: may not be more than 30 bytes",
            &["spec.amiSelectorTerms[0].alias: may not be longer than 30 characters"],
        ),
        row_printing(
            "bad ami id",
            vec![
                ("/spec/amiSelectorTerms", json!([{"id": "image-1"}])),
                ("/spec/amiFamily", json!("AL2")),
            ],
            "spec.amiSelectorTerms[0].id",
            "should match 'ami-[0-9a-z]+'",
            &[
                r#"spec.amiSelectorTerms[0].id: invalid value "image-1": must match 'ami-[0-9a-z]+'"#,
            ],
        ),
        // capacity reservations and placement group
        row(
            "empty capacity reservation term",
            vec![("/spec/capacityReservationSelectorTerms", json!([{}]))],
            "spec.capacityReservationSelectorTerms[0]",
            "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
        ),
        row_printing(
            "too many capacity reservation terms",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                many(31, json!({"id": "cr-1"})),
            )],
            "spec.capacityReservationSelectorTerms",
            "too many: 31: must have at most 30 items",
            &["spec.capacityReservationSelectorTerms: must have at most 30 items"],
        ),
        row(
            "capacity reservation id with owner",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                json!([{"id": "cr-1", "ownerID": "123456789012"}]),
            )],
            "spec.capacityReservationSelectorTerms[0]",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in capacityReservationSelectorTerms",
        ),
        row_printing(
            "bad capacity reservation id",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                json!([{"id": "cr_1"}]),
            )],
            "spec.capacityReservationSelectorTerms[0].id",
            "should match '^cr-[0-9a-z]+$'",
            &[
                r#"spec.capacityReservationSelectorTerms[0].id: invalid value "cr_1": must match '^cr-[0-9a-z]+$'"#,
            ],
        ),
        row_printing(
            "bad owner id",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                json!([{"tags": {"a": "b"}, "ownerID": "1234"}]),
            )],
            "spec.capacityReservationSelectorTerms[0].ownerID",
            "should match '^[0-9]{12}$'",
            &[
                r#"spec.capacityReservationSelectorTerms[0].ownerID: invalid value "1234": must match '^[0-9]{12}$'"#,
            ],
        ),
        row_printing(
            "bad match criteria",
            vec![(
                "/spec/capacityReservationSelectorTerms",
                json!([{"instanceMatchCriteria": "any"}]),
            )],
            "spec.capacityReservationSelectorTerms[0].instanceMatchCriteria",
            r#"unsupported value: "any": supported values: "open", "targeted""#,
            &[
                r#"spec.capacityReservationSelectorTerms[0].instanceMatchCriteria: unsupported value "any": supported values: "open", "targeted""#,
            ],
        ),
        row(
            "placement group with neither",
            vec![("/spec/placementGroupSelector", json!({}))],
            "spec.placementGroupSelector",
            "must specify exactly one of ['name', 'id']",
        ),
        row(
            "placement group with both",
            vec![(
                "/spec/placementGroupSelector",
                json!({"name": "a", "id": "pg-1"}),
            )],
            "spec.placementGroupSelector",
            "must specify exactly one of ['name', 'id']",
        ),
        row_printing(
            "bad placement group id",
            vec![("/spec/placementGroupSelector", json!({"id": "pg_1"}))],
            "spec.placementGroupSelector.id",
            "should match '^pg-[0-9a-z]+$'",
            &[
                r#"spec.placementGroupSelector.id: invalid value "pg_1": must match '^pg-[0-9a-z]+$'"#,
            ],
        ),
        row_printing(
            "negative ip prefix count",
            vec![("/spec/ipPrefixCount", json!(-1))],
            "spec.ipPrefixCount",
            "should be greater than or equal to 0",
            &["spec.ipPrefixCount: must be greater than or equal to 0"],
        ),
    ]
}
