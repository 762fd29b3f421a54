//! AMIs chosen by a class's `amiSelectorTerms`: aliases through SSM parameters, then ids,
//! names, tags, owners and `ssmParameter` terms, all settled with `DescribeImages`.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, Image};
use nodewright_api::aws::v1::AmiSelectorTerm;
use nodewright_core::requirements::{Operator, Requirement as TypeRequirement};

use super::aliases::{ARCH_LABEL, Requirement, Variant, alias_parameters, sort_requirements};
use super::network::tag_filters;
use crate::AwsClients;
use crate::error::AwsError;
use crate::parameters::Parameters;

/// A resolved image and the node requirements it serves. One image may appear more than once
/// with different requirements (Bottlerocket's x86 image serves standard and neuron nodes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedAmi {
    pub id: String,
    pub name: String,
    /// `CreationDate` as EC2 reports it (ISO 8601, so it sorts as text).
    pub creation_date: String,
    pub deprecated: bool,
    pub requirements: Vec<Requirement>,
}

/// Why no AMI could be resolved, as a condition reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmiProblem {
    pub reason: &'static str,
    pub message: String,
}

/// One `DescribeImages` call and, for alias terms, the variants each image id serves.
#[derive(Clone, Debug, Default)]
struct Query {
    image_ids: Vec<String>,
    filters: Vec<Filter>,
    owners: Vec<String>,
    known: BTreeMap<String, Vec<Variant>>,
}

/// Whether an image whose requirements are `image` (key, operator, values, as a resolved
/// image or the class's status lists them) may run on an instance type described by
/// `type_requirements`. Each must admit one of the type's values for its key, or the label's
/// absence where the type marks the key `DoesNotExist`; a key the type says nothing about
/// constrains nothing, as in upstream's compatibility check, and an operator that does not
/// parse admits nothing. The matching itself is core's one rule, [`Requirement::admits`].
pub(crate) fn image_serves<'a>(
    image: impl IntoIterator<Item = (&'a str, &'a str, &'a [String])>,
    type_requirements: &[TypeRequirement],
) -> bool {
    image.into_iter().all(|(key, operator, values)| {
        let Some(operator) = Operator::parse(operator) else {
            return false;
        };
        let Some(t) = type_requirements.iter().find(|t| t.key == key) else {
            return true;
        };
        let r = TypeRequirement {
            key: key.to_string(),
            operator,
            values: values.into(),
            min_values: None,
        };
        match t.operator {
            Operator::In => t.values.iter().any(|v| r.admits(Some(v))),
            Operator::DoesNotExist => r.admits(None),
            // The type's own labels are single values or absent; anything else is open.
            _ => true,
        }
    })
}

fn kube_arch(image: &Image) -> Option<&'static str> {
    match image.architecture().map(|a| a.as_str()) {
        Some("x86_64") => Some("amd64"),
        Some("arm64") => Some("arm64"),
        _ => None,
    }
}

/// Whether `deprecation_time` (ISO 8601) is at or before `now_rfc3339`.
fn is_deprecated(image: &Image, now_rfc3339: &str) -> bool {
    image
        .deprecation_time()
        .is_some_and(|t| !t.is_empty() && t <= now_rfc3339)
}

async fn queries(
    terms: &[AmiSelectorTerm],
    kubernetes: &str,
    parameters: &dyn Parameters,
) -> Result<Vec<Query>, AmiProblem> {
    let mut out = Vec::new();
    let mut ids = Vec::new();
    for term in terms {
        if let Some(alias) = &term.alias {
            let params = alias_parameters(alias, kubernetes).map_err(|e| AmiProblem {
                reason: "UnsupportedAlias",
                message: e.to_string(),
            })?;
            let mut q = Query::default();
            for p in params {
                match parameters.get(&p.path).await {
                    Ok(Some(id)) => {
                        let known = q.known.entry(id.clone()).or_default();
                        known.extend(p.variants.iter().copied());
                        if !q.image_ids.contains(&id) {
                            q.image_ids.push(id);
                        }
                    }
                    // A variant that is not published (no arm64 neuron image ...) is skipped.
                    Ok(None) => {}
                    Err(e) => {
                        return Err(AmiProblem {
                            reason: "AMINotFound",
                            message: format!("reading {}: {e}", p.path),
                        });
                    }
                }
            }
            if !q.image_ids.is_empty() {
                out.push(q);
            }
        } else if let Some(id) = &term.id {
            ids.push(id.clone());
        } else if let Some(name) = &term.ssm_parameter {
            match parameters.get(name).await {
                Ok(Some(id)) if id.starts_with("ami-") => ids.push(id),
                Ok(Some(v)) => {
                    return Err(AmiProblem {
                        reason: "AMINotFound",
                        message: format!("parameter {name} holds {v:?}, not an AMI id"),
                    });
                }
                Ok(None) => {}
                Err(e) => {
                    return Err(AmiProblem {
                        reason: "AMINotFound",
                        message: format!("reading {name}: {e}"),
                    });
                }
            }
        } else {
            let mut q = Query::default();
            if let Some(name) = &term.name {
                q.filters
                    .push(Filter::builder().name("name").values(name).build());
                if term.owner.is_none() {
                    q.owners = vec!["self".into(), "amazon".into()];
                }
            }
            if let Some(owner) = &term.owner {
                q.owners = vec![owner.clone()];
            }
            q.filters
                .extend(term.tags.as_ref().map(tag_filters).unwrap_or_default());
            if !q.filters.is_empty() || !q.owners.is_empty() {
                out.push(q);
            }
        }
    }
    if !ids.is_empty() {
        out.push(Query {
            image_ids: ids,
            ..Query::default()
        });
    }
    Ok(out)
}

async fn describe(c: &AwsClients, q: &Query) -> Result<Vec<Image>, AwsError> {
    let mut images = Vec::new();
    let mut token = None;
    loop {
        let mut req = c
            .ec2
            .describe_images()
            .include_deprecated(true)
            .set_next_token(token);
        if !q.image_ids.is_empty() {
            req = req.filters(
                Filter::builder()
                    .name("image-id")
                    .set_values(Some(q.image_ids.clone()))
                    .build(),
            );
        }
        for f in &q.filters {
            req = req.filters(f.clone());
        }
        if !q.owners.is_empty() {
            req = req.set_owners(Some(q.owners.clone()));
        }
        let out = req
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("DescribeImages", e))?;
        images.extend(out.images().iter().cloned());
        token = out.next_token().map(str::to_string);
        if token.is_none() {
            return Ok(images);
        }
    }
}

/// Resolves the terms to AMIs: for each distinct requirement set the best image (not
/// deprecated, then newest, then by name and id), the result sorted newest first.
/// `now_rfc3339` decides deprecation. `Err` is a problem for the AMIsReady condition.
pub async fn resolve_amis(
    c: &AwsClients,
    parameters: &dyn Parameters,
    terms: &[AmiSelectorTerm],
    kubernetes: &str,
    now_rfc3339: &str,
) -> Result<Vec<ResolvedAmi>, AmiProblem> {
    let mut candidates: Vec<ResolvedAmi> = Vec::new();
    for q in queries(terms, kubernetes, parameters).await? {
        let images = describe(c, &q).await.map_err(|e| AmiProblem {
            reason: "AMINotFound",
            message: e.to_string(),
        })?;
        for image in images {
            let (Some(id), Some(arch)) = (image.image_id(), kube_arch(&image)) else {
                continue;
            };
            let base = ResolvedAmi {
                id: id.to_string(),
                name: image.name().unwrap_or_default().to_string(),
                creation_date: image.creation_date().unwrap_or_default().to_string(),
                deprecated: is_deprecated(&image, now_rfc3339),
                requirements: Vec::new(),
            };
            let arch_req = Requirement::new(ARCH_LABEL, "In", &[arch]);
            match q.known.get(id) {
                Some(variants) => {
                    // The architecture comes from the image itself, not the parameter path.
                    for v in variants {
                        let mut reqs = v.requirements();
                        reqs.push(arch_req.clone());
                        sort_requirements(&mut reqs);
                        candidates.push(ResolvedAmi {
                            requirements: reqs,
                            ..base.clone()
                        });
                    }
                }
                None => candidates.push(ResolvedAmi {
                    requirements: vec![arch_req],
                    ..base
                }),
            }
        }
    }
    let mut best: BTreeMap<Vec<Requirement>, ResolvedAmi> = BTreeMap::new();
    for a in candidates {
        let better = match best.get(&a.requirements) {
            None => true,
            Some(cur) => {
                (
                    a.deprecated,
                    std::cmp::Reverse(&a.creation_date),
                    &a.name,
                    &a.id,
                ) < (
                    cur.deprecated,
                    std::cmp::Reverse(&cur.creation_date),
                    &cur.name,
                    &cur.id,
                )
            }
        };
        if better {
            best.insert(a.requirements.clone(), a);
        }
    }
    let mut out: Vec<ResolvedAmi> = best.into_values().collect();
    out.sort_by(|a, b| {
        b.creation_date
            .cmp(&a.creation_date)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.id.cmp(&b.id))
            .then_with(|| a.requirements.cmp(&b.requirements))
    });
    if out.is_empty() {
        return Err(AmiProblem {
            reason: "AMINotFound",
            message: "no AMI matches amiSelectorTerms".into(),
        });
    }
    Ok(out)
}
