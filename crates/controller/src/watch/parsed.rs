//! One watched object parsed once, from the bytes the API server sent straight into its type.
//!
//! The watchers used to read every object as a `DynamicObject`, turn that into a
//! `serde_json::Value` and read the typed object from the value: three passes over each
//! event, a fifth of the controller's CPU in the whole-loop benchmark. [`Parsed`] keeps the
//! object's text as the client hands it over and reads the typed object from that text. An
//! object that does not read that way (a list item without `apiVersion` and `kind`, which the
//! karpenter.sh types require, or one that is malformed) takes the old way through a `Value`,
//! so what is accepted and every error message stay as they were. Only a malformed object
//! fails: it keeps its metadata, for the watcher's resource version, and the reason.

use std::borrow::Cow;
use std::marker::PhantomData;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::core::DynamicResourceScope;
use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::state::{Kind, Object};

/// A typed object the controller watches: its [`Kind`] and its place in [`Object`].
pub trait Watched: DeserializeOwned + std::fmt::Debug {
    const KIND: Kind;
    fn into_object(self: Box<Self>) -> Object;
}

macro_rules! watched {
    ($($ty:ty => $variant:ident),* $(,)?) => {$(
        impl Watched for $ty {
            const KIND: Kind = Kind::$variant;
            fn into_object(self: Box<Self>) -> Object {
                Object::$variant(self)
            }
        }
    )*};
}

watched! {
    Pod => Pod,
    Node => Node,
    NodeClaim => NodeClaim,
    NodePool => NodePool,
    EC2NodeClass => NodeClass,
    DaemonSet => DaemonSet,
    PodDisruptionBudget => Pdb,
    PersistentVolume => PersistentVolume,
    PersistentVolumeClaim => PersistentVolumeClaim,
    StorageClass => StorageClass,
    VolumeAttachment => VolumeAttachment,
    Namespace => Namespace,
}

/// What a watcher hands over for one object of type `K`: the object, or why it cannot be used.
#[derive(Debug)]
pub struct Parsed<K> {
    pub object: Result<Object, Malformed>,
    of: PhantomData<fn() -> K>,
}

/// An object that does not parse: as much of its metadata as reads, and the reason.
#[derive(Clone, Debug)]
pub struct Malformed {
    /// Boxed: an `ObjectMeta` is some 400 bytes, and a `Result` is as large as its larger side.
    pub meta: Box<ObjectMeta>,
    pub error: String,
}

// By hand: a derived `Clone` would ask `K: Clone` of the marker.
impl<K> Clone for Parsed<K> {
    fn clone(&self) -> Self {
        Parsed {
            object: self.object.clone(),
            of: PhantomData,
        }
    }
}

impl<K: Watched> Parsed<K> {
    /// Reads one object from its JSON text.
    pub fn from_text(text: &str) -> Self {
        let object = match serde_json::from_str::<K>(&without_managed_fields(text)) {
            Ok(k) => {
                let mut o = Box::new(k).into_object();
                o.strip();
                Ok(o)
            }
            Err(_) => the_long_way(K::KIND, text),
        };
        Parsed {
            object,
            of: PhantomData,
        }
    }
}

/// `text` with the object's `metadata.managedFields` read as `null`. The index strips them
/// ([`Object::strip`]), but reading them first was 6.5% of the controller's CPU in a profile
/// of the whole-loop benchmark, and about a third of the time a pending pod's event took to
/// read (15 µs against 10.5 µs without, for a pod with two entries): every entry's
/// `fieldsV1` is a tree of maps, allocated to be dropped. Finding them costs two
/// passes that allocate nothing (the object's top level, then its metadata) and one copy of
/// the text; an object whose metadata does not read that way is left as it is, for the full
/// parse to judge.
fn without_managed_fields(text: &str) -> Cow<'_, str> {
    #[derive(Deserialize)]
    struct Top<'a> {
        #[serde(borrow)]
        metadata: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Meta<'a> {
        #[serde(borrow, rename = "managedFields")]
        managed_fields: Option<&'a RawValue>,
    }
    let Ok(Top {
        metadata: Some(meta),
    }) = serde_json::from_str(text)
    else {
        return Cow::Borrowed(text);
    };
    let Ok(Meta {
        managed_fields: Some(fields),
    }) = serde_json::from_str(meta.get())
    else {
        return Cow::Borrowed(text);
    };
    // Both raw values borrow from `text`, so the field's place in it is where its text starts.
    let fields = fields.get();
    let Some(start) = (fields.as_ptr() as usize).checked_sub(text.as_ptr() as usize) else {
        return Cow::Borrowed(text);
    };
    let end = start + fields.len();
    if text.get(start..end) != Some(fields) {
        return Cow::Borrowed(text);
    }
    Cow::Owned([&text[..start], "null", &text[end..]].concat())
}

/// Through a `Value`, with `apiVersion` and `kind` set to what was asked for, as list items
/// carry neither.
fn the_long_way(kind: Kind, text: &str) -> Result<Object, Malformed> {
    let malformed = |error: String| {
        #[derive(Deserialize)]
        struct Meta {
            #[serde(default)]
            metadata: ObjectMeta,
        }
        let meta = serde_json::from_str::<Meta>(text)
            .map(|m| m.metadata)
            .unwrap_or_default();
        Malformed {
            meta: Box::new(meta),
            error,
        }
    };
    let mut v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| malformed(e.to_string()))?;
    if !v.is_object() {
        return Err(malformed(format!("{} is not an object", kind.name())));
    }
    let (_, _, k, _, _) = kind.gvk();
    v["apiVersion"] = serde_json::Value::String(kind.api_version());
    v["kind"] = serde_json::Value::String(k.to_string());
    Object::from_value(kind, v).map_err(malformed)
}

impl<'de, K: Watched> Deserialize<'de> for Parsed<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Ok(Parsed::from_text(raw.get()))
    }
}

impl<K: 'static> kube::Resource for Parsed<K> {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        match &self.object {
            Ok(o) => o.meta(),
            Err(m) => &m.meta,
        }
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match &mut self.object {
            Ok(o) => o.meta_mut(),
            Err(m) => &mut m.meta,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one pass and the way through a `Value` read an event's object alike.
    fn both_ways<K: Watched>(text: &str) {
        let once = Parsed::<K>::from_text(text).object.unwrap();
        let long = the_long_way(K::KIND, text).unwrap();
        assert_eq!(once, long);
    }

    #[test]
    fn one_pass_reads_what_the_way_through_a_value_reads() {
        let event: serde_json::Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/watch-nodeclaim-event.json"
        ))
        .unwrap();
        both_ways::<NodeClaim>(&event["object"].to_string());
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "d", "uid": "u1", "resourceVersion": "9",
                "labels": {"app": "web"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                "managedFields": [{"manager": "kube-scheduler", "operation": "Update"}],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web", "uid": "r1", "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                "volumes": [{"name": "token", "projected": {"sources": []}}],
                "topologySpreadConstraints": [{"maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable"}],
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "",
                    "ready": false, "restartCount": 0}]}});
        both_ways::<Pod>(&pod.to_string());
    }

    #[test]
    fn managed_fields_are_not_read() {
        let text = r#"{"metadata": {"name": "n", "labels": {"managedFields": "x"},
            "managedFields": [{"manager": "m", "fieldsV1": {"f:metadata": {"k:{\"a\"}": {}}}}],
            "uid": "u"}, "spec": {"template": {"metadata": {"managedFields": []}}}}"#;
        let out = without_managed_fields(text);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["metadata"]["managedFields"], serde_json::Value::Null);
        assert_eq!(v["metadata"]["labels"]["managedFields"], "x");
        assert_eq!(v["metadata"]["uid"], "u");
        assert_eq!(
            v["spec"]["template"]["metadata"]["managedFields"],
            serde_json::json!([])
        );
        // Without them, or with metadata that does not read, the text is left alone.
        for text in [
            r#"{"metadata": {"name": "n"}}"#,
            r#"{"metadata": 3}"#,
            "[1]",
            "{",
        ] {
            assert!(matches!(without_managed_fields(text), Cow::Borrowed(t) if t == text));
        }
    }

    #[test]
    fn a_malformed_object_keeps_the_metadata_that_reads() {
        let text = r#"{"metadata": {"name": "n", "resourceVersion": "12"}, "spec": {"taints": 3}}"#;
        let m = Parsed::<Node>::from_text(text).object.unwrap_err();
        assert_eq!(m.meta.name.as_deref(), Some("n"));
        assert_eq!(m.meta.resource_version.as_deref(), Some("12"));
        assert!(m.error.starts_with("Node n: "), "{}", m.error);
    }
}
