//! The launch templates known to exist, with when each was last used: created on first use,
//! found among the cluster's at start, deleted once idle.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::Filter;

use super::{CLUSTER_TAG, NAME_PREFIX, TemplateSpec, create_request};
use crate::AwsClients;
use crate::error::AwsError;

/// The templates known to exist, with when each was last used.
#[derive(Debug, Default)]
pub struct TemplateCache {
    known: Mutex<BTreeMap<String, Instant>>,
}

fn lock(
    m: &Mutex<BTreeMap<String, Instant>>,
) -> std::sync::MutexGuard<'_, BTreeMap<String, Instant>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TemplateCache {
    pub fn contains(&self, name: &str) -> bool {
        lock(&self.known).contains_key(name)
    }

    pub fn forget(&self, name: &str) {
        lock(&self.known).remove(name);
    }

    /// Marks `name` as existing and used now.
    fn remember(&self, name: &str) {
        lock(&self.known).insert(name.to_string(), Instant::now());
    }

    /// Adds the cluster's existing templates (after a restart), each as used now, so those
    /// no configuration needs any more are deleted by [`TemplateCache::delete_unused`] later.
    pub async fn hydrate(&self, clients: &AwsClients, cluster: &str) -> Result<usize, AwsError> {
        let names = cluster_templates(clients, cluster).await?;
        for n in &names {
            self.remember(n);
        }
        Ok(names.len())
    }

    /// Deletes templates not used for `idle` from EC2 and the cache, returning their names.
    /// A launch racing the deletion sees the template missing, forgets it and creates it again.
    pub async fn delete_unused(
        &self,
        clients: &AwsClients,
        idle: Duration,
    ) -> Result<Vec<String>, AwsError> {
        let stale: Vec<String> = {
            let known = lock(&self.known);
            known
                .iter()
                .filter(|(_, used)| used.elapsed() >= idle)
                .map(|(n, _)| n.clone())
                .collect()
        };
        let mut deleted = Vec::new();
        for name in stale {
            delete_template(clients, &name).await?;
            self.forget(&name);
            deleted.push(name);
        }
        Ok(deleted)
    }

    /// Makes sure the template for `spec` exists and returns its name: from the cache, else
    /// found by name, else created. Losing a creation race to another launch is success.
    pub async fn ensure(
        &self,
        clients: &AwsClients,
        spec: &TemplateSpec,
    ) -> Result<String, AwsError> {
        let name = spec.name();
        if self.contains(&name) {
            self.remember(&name);
            return Ok(name);
        }
        if exists(clients, &name).await? {
            self.remember(&name);
            return Ok(name);
        }
        let created = create_request(&clients.ec2, spec).send().await;
        match created {
            Ok(_) => {}
            Err(e) => {
                let e = AwsError::from_sdk("CreateLaunchTemplate", e);
                if !e
                    .code
                    .as_deref()
                    .is_some_and(|c| c.contains("AlreadyExists"))
                {
                    return Err(e);
                }
            }
        }
        tracing::info!(launch_template = %name, image = %spec.image_id, "created launch template");
        self.remember(&name);
        Ok(name)
    }
}

/// Names of the templates tagged with the cluster.
async fn cluster_templates(clients: &AwsClients, cluster: &str) -> Result<Vec<String>, AwsError> {
    tagged_templates(clients, &[(CLUSTER_TAG, cluster)]).await
}

/// Deletes the cluster's templates made for EC2NodeClass `class` (launches tag each template
/// with its class), returning their names. A template already gone is not an error.
pub async fn delete_class_templates(
    clients: &AwsClients,
    cache: &TemplateCache,
    cluster: &str,
    class: &str,
) -> Result<Vec<String>, AwsError> {
    let names = tagged_templates(
        clients,
        &[
            (CLUSTER_TAG, cluster),
            (nodewright_cloud::tags::NODECLASS, class),
        ],
    )
    .await?;
    for name in &names {
        delete_template(clients, name).await?;
        cache.forget(name);
    }
    Ok(names)
}

/// Deletes the launch template `name`; one already gone is as good as deleted.
async fn delete_template(clients: &AwsClients, name: &str) -> Result<(), AwsError> {
    let out = clients
        .ec2
        .delete_launch_template()
        .launch_template_name(name)
        .send()
        .await;
    match out {
        Ok(_) => Ok(()),
        Err(e) => {
            let e = AwsError::from_sdk("DeleteLaunchTemplate", e);
            if e.code.as_deref().is_some_and(|c| c.contains("NotFound")) {
                Ok(())
            } else {
                Err(e)
            }
        }
    }
}

/// Names of our templates carrying every `(key, value)` tag.
async fn tagged_templates(
    clients: &AwsClients,
    tags: &[(&str, &str)],
) -> Result<Vec<String>, AwsError> {
    let filters: Vec<Filter> = tags
        .iter()
        .map(|(k, v)| {
            Filter::builder()
                .name(format!("tag:{k}"))
                .values(*v)
                .build()
        })
        .collect();
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let out = clients
            .ec2
            .describe_launch_templates()
            .set_filters(Some(filters.clone()))
            .set_next_token(token.clone())
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("DescribeLaunchTemplates", e))?;
        names.extend(
            out.launch_templates()
                .iter()
                .filter_map(|t| t.launch_template_name())
                .filter(|n| n.starts_with(NAME_PREFIX))
                .map(str::to_string),
        );
        token = out
            .next_token()
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        if token.is_none() {
            return Ok(names);
        }
    }
}

async fn exists(clients: &AwsClients, name: &str) -> Result<bool, AwsError> {
    let out = clients
        .ec2
        .describe_launch_templates()
        .filters(
            Filter::builder()
                .name("launch-template-name")
                .values(name)
                .build(),
        )
        .send()
        .await;
    match out {
        Ok(o) => Ok(o
            .launch_templates()
            .iter()
            .any(|t| t.launch_template_name() == Some(name))),
        Err(e) => {
            let e = AwsError::from_sdk("DescribeLaunchTemplates", e);
            if e.code.as_deref().is_some_and(|c| c.contains("NotFound")) {
                Ok(false)
            } else {
                Err(e)
            }
        }
    }
}
