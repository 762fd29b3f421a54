//! Reading and writing the TOML subset, and the errors outside it.

use super::*;

fn s(v: &str) -> Value {
    Value::String(v.into())
}

#[test]
fn reads_the_supported_subset() {
    let t = parse(
        r#"
# comment
[settings.kubernetes]
cluster-name = "ignored" # trailing comment
max-pods = 1_10
"node-labels"."team.example.com/name" = 'web'
[settings.host-containers.admin]
enabled = false
[settings."bootstrap-containers".x]
args = [
  "a", 'b',  # comment inside
  ["nested"],
]
negative = -3
"#,
    )
    .unwrap();
    let k = match &t["settings"] {
        Value::Table(st) => match &st["kubernetes"] {
            Value::Table(k) => k.clone(),
            _ => panic!(),
        },
        _ => panic!(),
    };
    assert_eq!(k["cluster-name"], s("ignored"));
    assert_eq!(k["max-pods"], Value::Integer(110));
    assert_eq!(
        k["node-labels"],
        Value::Table([("team.example.com/name".to_string(), s("web"))].into())
    );
    let rendered = render(&t);
    assert_eq!(parse(&rendered).unwrap(), t, "{rendered}");
    assert!(
        rendered
            .contains("[settings.kubernetes.node-labels]\n\"team.example.com/name\" = \"web\"\n"),
        "{rendered}"
    );
    assert!(
        rendered.contains("args = [\"a\", \"b\", [\"nested\"]]\n"),
        "{rendered}"
    );
}

#[test]
fn unsupported_and_malformed_input_names_the_line() {
    let cases = [
        ("a = 1.5", 1, "floats"),
        ("\n\nd = 2024-01-01", 3, "dates"),
        ("t = {a = 1", 1, "unterminated inline table"),
        ("t = {a = 1 b = 2}", 1, "expected ','"),
        ("x = [1]\n[[x]]", 2, "not an array of tables"),
        ("s = \"\"\"x", 1, "unterminated"),
        ("a = bare", 1, "must be quoted"),
        ("a = 1\na = 2", 2, "defined twice"),
        ("[t]\n[t]", 2, "defined twice"),
        ("a = 1\n[a]", 2, "already a value"),
        ("a = \"open", 1, "unterminated"),
        ("a = 1 b", 1, "after the value"),
        ("a = 012", 1, "not a valid integer"),
        ("a = inf", 1, "floats"),
        ("a = [1 2]", 1, "expected ','"),
    ];
    for (input, line, reason) in cases {
        let e = parse(input).unwrap_err();
        assert_eq!(e.line, line, "{input}: {e}");
        assert!(e.reason.contains(reason), "{input}: {e}");
    }
}

#[test]
fn arrays_of_tables_inline_tables_and_multiline_strings() {
    let input = r#"
[[settings.container-registry.mirrors]]
registry = "docker.io"
endpoint = ["https://mirror.example"]

[[settings.container-registry.mirrors]]
registry = "quay.io"
endpoint = ["https://quay-mirror.example"]
[settings.container-registry.mirrors.extra]
note = 'second only'

[settings.kubernetes]
eviction-hard = { "memory.available" = "15%", nodefs.inodesFree = "5%" }
[settings.host-containers.admin]
user-data = '''
{"ssh": true}
'''
motd = """
line one \
   continued"""
"#;
    let t = parse(input).unwrap();
    let settings = match &t["settings"] {
        Value::Table(st) => st,
        _ => panic!(),
    };
    let mirrors = match &settings["container-registry"] {
        Value::Table(c) => &c["mirrors"],
        _ => panic!(),
    };
    let Value::Array(items) = mirrors else {
        panic!()
    };
    assert_eq!(items.len(), 2);
    let Value::Table(second) = &items[1] else {
        panic!()
    };
    assert_eq!(second["registry"], s("quay.io"));
    assert!(matches!(&second["extra"], Value::Table(e) if e["note"] == s("second only")));
    let Value::Table(k) = &settings["kubernetes"] else {
        panic!()
    };
    let Value::Table(ev) = &k["eviction-hard"] else {
        panic!()
    };
    assert_eq!(ev["memory.available"], s("15%"));
    assert!(matches!(&ev["nodefs"], Value::Table(n) if n["inodesFree"] == s("5%")));
    let Value::Table(admin) = &settings["host-containers"] else {
        panic!()
    };
    let Value::Table(admin) = &admin["admin"] else {
        panic!()
    };
    assert_eq!(admin["user-data"], s("{\"ssh\": true}\n"));
    assert_eq!(admin["motd"], s("line one continued"));

    let rendered = render(&t);
    assert_eq!(parse(&rendered).unwrap(), t, "{rendered}");
    assert_eq!(
        rendered
            .matches("[[settings.container-registry.mirrors]]")
            .count(),
        2,
        "{rendered}"
    );
}

#[test]
fn escapes_round_trip() {
    let t = parse("a = \"q\\\"b\\\\n\\u00e9\\n\"").unwrap();
    assert_eq!(t["a"], s("q\"b\\n\u{e9}\n"));
    assert_eq!(parse(&render(&t)).unwrap(), t);
}
