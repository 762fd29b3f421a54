//! The interruption queue (SQS, with the policy that lets EventBridge send to it) and the
//! EventBridge rules that feed it the events the controller handles.

use aws_sdk_eventbridge::types::{RuleState, Tag as EventTag, Target};
use aws_sdk_sqs::types::QueueAttributeName;

use super::desired::{self, OWNER_TAG};
use super::{Action, InstallError, Result, Run, document, fail};

const QUEUE: &str = "sqs queue";
const RULE: &str = "eventbridge rule";
/// The id of the rule's one target.
const TARGET_ID: &str = "nodewright-interruption-queue";

async fn queue_url(run: &Run<'_>, name: &str) -> Result<Option<String>> {
    match run
        .clients
        .sqs
        .get_queue_url()
        .queue_name(name)
        .send()
        .await
    {
        Ok(out) => Ok(out.queue_url().map(str::to_string)),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_queue_does_not_exist()) =>
        {
            Ok(None)
        }
        Err(e) => Err(fail(QUEUE, name, e)),
    }
}

async fn queue_is_ours(run: &Run<'_>, url: &str, name: &str) -> Result<bool> {
    let tags = run
        .clients
        .sqs
        .list_queue_tags()
        .queue_url(url)
        .send()
        .await
        .map_err(|e| fail(QUEUE, name, e))?;
    Ok(tags
        .tags()
        .and_then(|t| t.get(OWNER_TAG))
        .is_some_and(|v| *v == run.inputs.cluster))
}

/// The attributes the queue should have, policy included, as (name, value).
fn wanted_attributes(run: &Run<'_>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = desired::QUEUE_ATTRIBUTES
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    out.push((
        "Policy".into(),
        desired::queue_policy(run.inputs, &run.names.queue).to_string(),
    ));
    out
}

pub async fn ensure_queue(run: &mut Run<'_>) -> Result<()> {
    let name = run.names.queue.clone();
    let sqs = run.clients.sqs.clone();
    let want = wanted_attributes(run);
    let Some(url) = queue_url(run, &name).await? else {
        run.log(QUEUE, &name, Action::Create);
        if run.writes() {
            let mut create = sqs
                .create_queue()
                .queue_name(&name)
                .tags(OWNER_TAG, &run.inputs.cluster);
            for (k, v) in &want {
                create = create.attributes(QueueAttributeName::from(k.as_str()), v);
            }
            create.send().await.map_err(|e| fail(QUEUE, &name, e))?;
        }
        return Ok(());
    };
    if !queue_is_ours(run, &url, &name).await? {
        return Err(InstallError {
            kind: QUEUE,
            name,
            message: format!(
                "exists but was not made by `nodewright install aws` (no tag {OWNER_TAG}={}); delete it, or tag it so to let the command manage it",
                run.inputs.cluster
            ),
        });
    }
    let have = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .map_err(|e| fail(QUEUE, &name, e))?;
    let have = have.attributes().cloned().unwrap_or_default();
    let differ: Vec<&(String, String)> = want
        .iter()
        .filter(|(k, v)| {
            let got = have.get(&QueueAttributeName::from(k.as_str()));
            match k.as_str() {
                "Policy" => got.map(|g| document(g)) != Some(document(v)),
                _ => got != Some(v),
            }
        })
        .collect();
    if differ.is_empty() {
        run.log(QUEUE, &name, Action::Unchanged);
        return Ok(());
    }
    let what: Vec<&str> = differ.iter().map(|(k, _)| k.as_str()).collect();
    run.log(QUEUE, &name, Action::Update(what.join(", ")));
    if run.writes() {
        // All of them, not only the changed: moto forgets a policy left out of the call.
        let mut set = sqs.set_queue_attributes().queue_url(&url);
        for (k, v) in &want {
            set = set.attributes(QueueAttributeName::from(k.as_str()), v);
        }
        set.send().await.map_err(|e| fail(QUEUE, &name, e))?;
    }
    Ok(())
}

/// The rule as it is: (pattern, enabled, its targets' ARNs, ours).
async fn rule_state(
    run: &Run<'_>,
    name: &str,
) -> Result<Option<(serde_json::Value, bool, Vec<String>, bool)>> {
    let events = &run.clients.events;
    let rule = match events.describe_rule().name(name).send().await {
        Ok(r) => r,
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_not_found_exception()) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(fail(RULE, name, e)),
    };
    let targets = events
        .list_targets_by_rule()
        .rule(name)
        .send()
        .await
        .map_err(|e| fail(RULE, name, e))?;
    let tags = events
        .list_tags_for_resource()
        .resource_arn(rule.arn().unwrap_or_default())
        .send()
        .await
        .map_err(|e| fail(RULE, name, e))?;
    let ours = tags
        .tags()
        .iter()
        .any(|t| t.key() == OWNER_TAG && t.value() == run.inputs.cluster);
    Ok(Some((
        document(rule.event_pattern().unwrap_or_default()),
        rule.state() == Some(&RuleState::Enabled),
        targets
            .targets()
            .iter()
            .map(|t| t.arn().to_string())
            .collect(),
        ours,
    )))
}

pub async fn ensure_rules(run: &mut Run<'_>) -> Result<()> {
    let queue_arn = desired::queue_arn(run.inputs, &run.names.queue);
    let events = run.clients.events.clone();
    for (name, source, detail) in run.names.rules.clone() {
        let pattern = desired::event_pattern(&source, &detail);
        let action = match rule_state(run, &name).await? {
            None => Action::Create,
            Some((_, _, _, false)) => {
                return Err(InstallError {
                    kind: RULE,
                    name,
                    message: format!(
                        "exists but was not made by `nodewright install aws` (no tag {OWNER_TAG}={})",
                        run.inputs.cluster
                    ),
                });
            }
            Some((p, enabled, targets, true)) => {
                let mut what = Vec::new();
                if p != pattern {
                    what.push("pattern");
                }
                if !enabled {
                    what.push("enable");
                }
                if targets != [queue_arn.clone()] {
                    what.push("target");
                }
                if what.is_empty() {
                    Action::Unchanged
                } else {
                    Action::Update(what.join(", "))
                }
            }
        };
        let write = action != Action::Unchanged && run.writes();
        run.log(RULE, &name, action);
        if !write {
            continue;
        }
        // PutRule creates or replaces; its tags apply when it creates.
        events
            .put_rule()
            .name(&name)
            .event_pattern(pattern.to_string())
            .state(RuleState::Enabled)
            .description(format!(
                "{detail} to the interruption queue {}",
                run.names.queue
            ))
            .tags(
                EventTag::builder()
                    .key(OWNER_TAG)
                    .value(&run.inputs.cluster)
                    .build()
                    .expect("key and value are set"),
            )
            .send()
            .await
            .map_err(|e| fail(RULE, &name, e))?;
        let target = Target::builder()
            .id(TARGET_ID)
            .arn(&queue_arn)
            .build()
            .expect("id and arn are set");
        events
            .put_targets()
            .rule(&name)
            .targets(target)
            .send()
            .await
            .map_err(|e| fail(RULE, &name, e))?;
    }
    Ok(())
}

pub async fn remove_rules(run: &mut Run<'_>) -> Result<()> {
    let events = run.clients.events.clone();
    for (name, _, _) in run.names.rules.clone() {
        match rule_state(run, &name).await? {
            None => run.log(RULE, &name, Action::Skip("absent".into())),
            Some((_, _, _, false)) => run.log(
                RULE,
                &name,
                Action::Skip("not made by nodewright install".into()),
            ),
            Some((_, _, targets, true)) => {
                run.log(RULE, &name, Action::Delete);
                if run.writes() {
                    if !targets.is_empty() {
                        let listed = events
                            .list_targets_by_rule()
                            .rule(&name)
                            .send()
                            .await
                            .map_err(|e| fail(RULE, &name, e))?;
                        let ids: Vec<String> = listed
                            .targets()
                            .iter()
                            .map(|t| t.id().to_string())
                            .collect();
                        events
                            .remove_targets()
                            .rule(&name)
                            .set_ids(Some(ids))
                            .send()
                            .await
                            .map_err(|e| fail(RULE, &name, e))?;
                    }
                    events
                        .delete_rule()
                        .name(&name)
                        .send()
                        .await
                        .map_err(|e| fail(RULE, &name, e))?;
                }
            }
        }
    }
    Ok(())
}

pub async fn remove_queue(run: &mut Run<'_>) -> Result<()> {
    let name = run.names.queue.clone();
    let Some(url) = queue_url(run, &name).await? else {
        run.log(QUEUE, &name, Action::Skip("absent".into()));
        return Ok(());
    };
    if !queue_is_ours(run, &url, &name).await? {
        run.log(
            QUEUE,
            &name,
            Action::Skip("not made by nodewright install".into()),
        );
        return Ok(());
    }
    run.log(QUEUE, &name, Action::Delete);
    if run.writes() {
        run.clients
            .sqs
            .delete_queue()
            .queue_url(&url)
            .send()
            .await
            .map_err(|e| fail(QUEUE, &name, e))?;
    }
    Ok(())
}
