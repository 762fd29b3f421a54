//! One ConversionReview (`apiextensions.k8s.io/v1`) in, its answer out, as bytes: every object
//! converted by `nodewright_api::versions`, or a failed review whose message names the object
//! and the reason. Nothing here panics on what the API server (or anyone reaching the port)
//! sends.

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use nodewright_api::versions;
use serde_json::Value;

/// The answer to a review body.
pub fn answer(body: &[u8]) -> Vec<u8> {
    let response = respond(body);
    serde_json::to_vec(&response.into_review()).unwrap_or_else(|e| {
        format!(r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{{"uid":"","result":{{"status":"Failure","message":"encoding the answer: {e}"}},"convertedObjects":[]}}}}"#)
            .into_bytes()
    })
}

fn failure(message: &str) -> Status {
    Status::failure(message, "BadRequest")
}

fn respond(body: &[u8]) -> ConversionResponse {
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return ConversionResponse::invalid(failure(&format!("the body is not JSON: {e}")));
        }
    };
    // The uid, if there is one, so even a review that does not parse is answered as its own.
    let uid = value
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let invalid = |message: String| {
        let mut r = ConversionResponse::invalid(failure(&message));
        r.uid = uid.clone();
        r
    };
    let review: ConversionReview = match serde_json::from_value(value) {
        Ok(r) => r,
        Err(e) => return invalid(format!("not a ConversionReview: {e}")),
    };
    if review.types.kind != "ConversionReview"
        || review.types.api_version != "apiextensions.k8s.io/v1"
    {
        return invalid(format!(
            "expected an apiextensions.k8s.io/v1 ConversionReview, got {} {}",
            review.types.api_version, review.types.kind
        ));
    }
    let request = match ConversionRequest::from_review(review) {
        Ok(r) => r,
        Err(e) => return invalid(e.to_string()),
    };
    let desired = request.desired_api_version.clone();
    let converted: Result<Vec<Value>, _> = request
        .objects
        .iter()
        .enumerate()
        .map(|(i, o)| versions::convert(o, &desired, i))
        .collect();
    let response = ConversionResponse::for_request(request);
    match converted {
        Ok(objects) => response.success(objects),
        Err(e) => response.failure(failure(&format!("converting to {desired}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn review(body: &[u8]) -> Value {
        serde_json::from_slice(&answer(body)).unwrap()
    }

    fn request(desired: &str, objects: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u-1", "desiredAPIVersion": desired, "objects": objects},
        }))
        .unwrap()
    }

    #[test]
    fn converts_every_object_and_keeps_the_uid() {
        let pool = json!({"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool",
            "metadata": {"name": "p"},
            "spec": {"disruption": {"consolidationPolicy": "WhenUnderutilized"}}});
        let out = review(&request("karpenter.sh/v1", json!([pool, pool])));
        assert_eq!(out["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(out["kind"], "ConversionReview");
        let r = &out["response"];
        assert_eq!(r["uid"], "u-1");
        assert_eq!(r["result"]["status"], "Success");
        assert_eq!(r["convertedObjects"].as_array().unwrap().len(), 2);
        assert_eq!(r["convertedObjects"][1]["apiVersion"], "karpenter.sh/v1");
        assert_eq!(
            r["convertedObjects"][1]["spec"]["disruption"]["consolidationPolicy"],
            "WhenEmptyOrUnderutilized"
        );
    }

    #[test]
    fn bad_reviews_are_failed_with_a_reason() {
        let cases: Vec<(Vec<u8>, &str, &str)> = vec![
            (b"{not json".to_vec(), "", "the body is not JSON"),
            (b"[]".to_vec(), "", "not a ConversionReview"),
            (
                serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"})).unwrap(),
                "",
                "request missing",
            ),
            (
                serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                    "request": {"uid": "u-2", "desiredAPIVersion": "karpenter.sh/v1", "objects": "x"}})).unwrap(),
                "u-2",
                "not a ConversionReview",
            ),
            (
                serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "request": {"uid": "u-3", "desiredAPIVersion": "karpenter.sh/v1", "objects": []}})).unwrap(),
                "u-3",
                "expected an apiextensions.k8s.io/v1 ConversionReview",
            ),
            (
                request("karpenter.sh/v1", json!([{"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "old"}}])),
                "u-1",
                "converting to karpenter.sh/v1: objects[0] (Provisioner \"old\"): apiVersion \"karpenter.sh/v1alpha5\" is not served here",
            ),
            (request("karpenter.sh/v2", json!([{"apiVersion": "karpenter.sh/v1", "kind": "NodePool"}])), "u-1", "karpenter.sh/v2"),
        ];
        for (body, uid, message) in cases {
            let out = review(&body);
            let r = &out["response"];
            assert_eq!(r["uid"], uid, "{out}");
            assert_eq!(r["result"]["status"], "Failure", "{out}");
            assert!(
                r["result"]["message"].as_str().unwrap().contains(message),
                "{message:?} not in {out}"
            );
            assert_eq!(r["convertedObjects"], json!([]), "{out}");
        }
    }
}
