//! Round-trip properties of the encoders user data is built from.

use std::collections::BTreeMap;

use nodewright_aws_model::userdata::base64;
use nodewright_aws_model::userdata::mime::{self, MimePart};
use nodewright_aws_model::userdata::toml::{self, Table, Value};
use proptest::prelude::*;

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9_-]{0,8}",
        "[a-z.]{1,6}/[a-z\"' ]{0,5}",
        Just(String::new()),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<String>().prop_map(Value::String),
        any::<i64>().prop_map(Value::Integer),
        any::<bool>().prop_map(Value::Boolean),
        prop::collection::vec(any::<String>().prop_map(Value::String), 0..3).prop_map(Value::Array),
    ]
}

fn table() -> impl Strategy<Value = Table> {
    let plain = prop::collection::btree_map(key(), leaf(), 0..4);
    plain.prop_recursive(3, 24, 4, |inner| {
        prop::collection::btree_map(
            key(),
            prop_oneof![
                leaf(),
                inner.clone().prop_map(Value::Table),
                prop::collection::vec(inner.prop_map(Value::Table), 1..3).prop_map(Value::Array),
            ],
            0..4,
        )
    })
}

proptest! {
    #[test]
    fn base64_round_trips(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        prop_assert_eq!(base64::decode(&base64::encode(&bytes)), Some(bytes));
    }

    #[test]
    fn toml_render_then_parse_is_identity(t in table()) {
        let text = toml::render(&t);
        let back = toml::parse(&text);
        prop_assert_eq!(back.as_ref(), Ok(&t), "rendered:\n{}", text);
    }

    #[test]
    fn mime_serialize_then_parse_is_identity(
        parts in prop::collection::vec(
            ("[a-z]{1,8}/[a-z.-]{1,12}", prop::collection::vec("[ -~]{0,20}", 0..4)),
            0..4,
        )
    ) {
        let parts: Vec<MimePart> = parts
            .into_iter()
            .map(|(ct, lines)| {
                // A line that is the boundary delimiter cannot be carried, and trailing blank
                // lines are not kept; neither occurs in scripts or configs.
                let body: Vec<String> = lines
                    .into_iter()
                    .filter(|l| !l.trim_end().starts_with("--//"))
                    .collect();
                let text = body.join("\n");
                MimePart::new(&ct, text.trim_end_matches(|c: char| c == '\n' || c.is_whitespace()))
            })
            .map(|p| if p.content.trim().is_empty() { MimePart::new(&p.content_type, "x") } else { p })
            .collect();
        let doc = mime::serialize(&parts);
        prop_assert_eq!(mime::parse(&doc), Ok(parts));
    }
}

#[test]
fn empty_keys_and_odd_strings_survive() {
    let t: Table = BTreeMap::from([(
        String::new(),
        Value::Table(BTreeMap::from([(
            "a\"b".to_string(),
            Value::String("\u{0}\u{7f}\r\n\t\\".into()),
        )])),
    )]);
    assert_eq!(toml::parse(&toml::render(&t)), Ok(t));
}
