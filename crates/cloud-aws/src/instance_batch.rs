//! Batching of DescribeInstances and TerminateInstances, as upstream does: lookups and
//! terminations that arrive within 100 ms of each other (for at most a second, up to 500
//! instances) go to EC2 as one call naming all their instances, and each caller gets the part
//! of the answer about its own instance. Reported as the `describe_instances` and
//! `terminate_instances` batchers.
//!
//! One instance can spoil a call for all: an id EC2 does not know fails the whole
//! DescribeInstances (`InvalidInstanceID.NotFound`), and a termination can be refused for one
//! instance alone (termination protection, an IAM policy scoped by tags). So when a call for
//! several instances fails, each instance is asked about again on its own, and every caller
//! gets what EC2 says about its instance. A lookup that succeeded but left an instance out
//! needs no second ask: EC2 checked every id, so the instance is in a state the filter leaves
//! out (terminated).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::types::{self as ec2, Filter};
use tokio::task::JoinSet;

use crate::AwsClients;
use crate::batcher::{Batcher, Executor, Window};
use crate::error::AwsError;
use crate::observe::Observer;

/// The `batcher` label of the lookup batcher's metrics.
pub const DESCRIBE_BATCHER: &str = "describe_instances";
/// The `batcher` label of the termination batcher's metrics.
pub const TERMINATE_BATCHER: &str = "terminate_instances";

/// Upstream's window for both batchers.
pub const WINDOW: Window = Window {
    idle: Duration::from_millis(100),
    max_wait: Duration::from_secs(1),
    max_items: 500,
};

/// The states in which an instance still counts as existing.
pub const LISTED_STATES: &[&str] = &["pending", "running", "stopping", "stopped", "shutting-down"];

pub fn state_filter() -> Filter {
    let mut f = Filter::builder().name("instance-state-name");
    for s in LISTED_STATES {
        f = f.values(*s);
    }
    f.build()
}

/// One caller's lookup: its instance in one of [`LISTED_STATES`], or `None` when EC2 does not
/// know it or it is terminated.
pub type Lookup = Result<Option<ec2::Instance>, AwsError>;

/// The caller's ids without repeats, in first-seen order.
fn unique(ids: &[String]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    ids.iter().filter(|i| seen.insert(*i)).cloned().collect()
}

/// Asks each id on its own, concurrently; answers by id.
async fn each<T, F, Fut>(clients: &AwsClients, ids: Vec<String>, one: F) -> BTreeMap<String, T>
where
    T: Send + 'static,
    F: Fn(AwsClients, String) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    let mut set = JoinSet::new();
    for id in ids {
        let call = one(clients.clone(), id.clone());
        set.spawn(async move { (id, call.await) });
    }
    let mut out = BTreeMap::new();
    while let Some(done) = set.join_next().await {
        if let Ok((id, answer)) = done {
            out.insert(id, answer);
        }
    }
    out
}

/// DescribeInstances for `ids` in the listed states, every page.
async fn describe(clients: &AwsClients, ids: &[String]) -> Result<Vec<ec2::Instance>, AwsError> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = clients
            .ec2
            .describe_instances()
            .set_instance_ids(Some(ids.to_vec()))
            .filters(state_filter())
            .set_next_token(token)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("DescribeInstances", e))?;
        out.extend(
            page.reservations()
                .iter()
                .flat_map(|r| r.instances())
                .filter(|i| {
                    i.state().and_then(|s| s.name()) != Some(&ec2::InstanceStateName::Terminated)
                })
                .cloned(),
        );
        token = page
            .next_token()
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        if token.is_none() {
            return Ok(out);
        }
    }
}

/// One instance's lookup on its own.
async fn describe_one(clients: AwsClients, id: String) -> Lookup {
    match describe(&clients, std::slice::from_ref(&id)).await {
        Ok(found) => Ok(found
            .into_iter()
            .find(|i| i.instance_id() == Some(id.as_str()))),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Sends the lookups of one batch as one DescribeInstances.
pub struct DescribeSender {
    clients: AwsClients,
}

#[async_trait]
impl Executor for DescribeSender {
    /// Every lookup asks the same question (the same state filter), so all share a call.
    type Key = ();
    /// An instance id.
    type Item = String;
    type Output = Lookup;

    async fn execute(&self, _key: &(), ids: Vec<String>) -> Vec<Lookup> {
        let distinct = unique(&ids);
        let answers: BTreeMap<String, Lookup> = if distinct.len() == 1 {
            let id = distinct[0].clone();
            BTreeMap::from([(id.clone(), describe_one(self.clients.clone(), id).await)])
        } else {
            match describe(&self.clients, &distinct).await {
                Ok(found) => distinct
                    .iter()
                    .map(|id| {
                        let mine = found
                            .iter()
                            .find(|i| i.instance_id() == Some(id.as_str()))
                            .cloned();
                        (id.clone(), Ok(mine))
                    })
                    .collect(),
                Err(e) => {
                    tracing::debug!(instances = distinct.len(), error = %e, "batched DescribeInstances failed; asking for each instance on its own");
                    each(&self.clients, distinct, describe_one).await
                }
            }
        };
        answer_each(&ids, answers, "DescribeInstances")
    }
}

/// One termination on its own: `Ok` once EC2 reports the instance shutting down or gone.
async fn terminate_one(clients: AwsClients, id: String) -> Result<(), AwsError> {
    let out = terminate(&clients, std::slice::from_ref(&id)).await?;
    if out.contains(&id) {
        Ok(())
    } else {
        Err(AwsError::new(
            "TerminateInstances",
            format!("EC2 did not report instance {id} shutting down"),
        ))
    }
}

/// TerminateInstances for `ids`; the ids EC2 reports shutting down or terminated.
async fn terminate(clients: &AwsClients, ids: &[String]) -> Result<BTreeSet<String>, AwsError> {
    let out = clients
        .ec2
        .terminate_instances()
        .set_instance_ids(Some(ids.to_vec()))
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("TerminateInstances", e))?;
    Ok(out
        .terminating_instances()
        .iter()
        .filter(|c| {
            matches!(
                c.current_state().and_then(|s| s.name()),
                Some(ec2::InstanceStateName::ShuttingDown | ec2::InstanceStateName::Terminated)
            )
        })
        .filter_map(|c| c.instance_id().map(str::to_string))
        .collect())
}

/// Sends the terminations of one batch as one TerminateInstances.
pub struct TerminateSender {
    clients: AwsClients,
}

#[async_trait]
impl Executor for TerminateSender {
    type Key = ();
    /// An instance id.
    type Item = String;
    type Output = Result<(), AwsError>;

    async fn execute(&self, _key: &(), ids: Vec<String>) -> Vec<Self::Output> {
        let distinct = unique(&ids);
        let answers = if distinct.len() == 1 {
            let id = distinct[0].clone();
            BTreeMap::from([(id.clone(), terminate_one(self.clients.clone(), id).await)])
        } else {
            match terminate(&self.clients, &distinct).await {
                Ok(done) => {
                    // Instances the answer left out are asked about again, for their own
                    // error.
                    let rest: Vec<String> = distinct
                        .iter()
                        .filter(|i| !done.contains(*i))
                        .cloned()
                        .collect();
                    let mut answers = each(&self.clients, rest, terminate_one).await;
                    answers.extend(done.into_iter().map(|id| (id, Ok(()))));
                    answers
                }
                Err(e) => {
                    tracing::debug!(instances = distinct.len(), error = %e, "batched TerminateInstances failed; terminating each instance on its own");
                    each(&self.clients, distinct, terminate_one).await
                }
            }
        };
        answer_each(&ids, answers, "TerminateInstances")
    }
}

/// Each caller's answer, in the callers' order (callers naming the same instance get the same
/// answer).
fn answer_each<T: Clone>(
    ids: &[String],
    answers: BTreeMap<String, Result<T, AwsError>>,
    operation: &str,
) -> Vec<Result<T, AwsError>> {
    ids.iter()
        .map(|id| {
            answers.get(id).cloned().unwrap_or_else(|| {
                Err(AwsError::new(
                    operation,
                    format!("no answer for instance {id}"),
                ))
            })
        })
        .collect()
}

/// The two batchers, shared by every lookup and termination of one provider.
#[derive(Clone)]
pub struct InstanceBatchers {
    describe: Batcher<DescribeSender>,
    terminate: Batcher<TerminateSender>,
}

impl InstanceBatchers {
    pub fn new(clients: &AwsClients, observer: &Observer) -> Self {
        Self::with_window(clients, observer, WINDOW)
    }

    pub fn with_window(clients: &AwsClients, observer: &Observer, window: Window) -> Self {
        InstanceBatchers {
            describe: Batcher::new(
                DESCRIBE_BATCHER,
                DescribeSender {
                    clients: clients.clone(),
                },
                window,
                observer.clone(),
            ),
            terminate: Batcher::new(
                TERMINATE_BATCHER,
                TerminateSender {
                    clients: clients.clone(),
                },
                window,
                observer.clone(),
            ),
        }
    }

    /// The instance `id` in one of [`LISTED_STATES`]; `None` when EC2 does not know it or it
    /// is terminated.
    pub async fn describe(&self, id: &str) -> Lookup {
        self.describe
            .add((), id.to_string())
            .await
            .unwrap_or_else(|e| Err(AwsError::new("DescribeInstances", e.to_string())))
    }

    /// Terminates the instance `id`.
    pub async fn terminate(&self, id: &str) -> Result<(), AwsError> {
        self.terminate
            .add((), id.to_string())
            .await
            .unwrap_or_else(|e| Err(AwsError::new("TerminateInstances", e.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_ids_are_asked_once_and_answered_for_each_caller() {
        let ids: Vec<String> = ["i-2", "i-1", "i-2"].map(String::from).to_vec();
        assert_eq!(unique(&ids), vec!["i-2", "i-1"]);
        let answers = BTreeMap::from([
            ("i-1".to_string(), Ok(1)),
            (
                "i-2".to_string(),
                Err(AwsError::new("TerminateInstances", "refused")),
            ),
        ]);
        let out = answer_each(&ids, answers, "TerminateInstances");
        assert!(out[0].is_err() && out[2].is_err());
        assert_eq!(out[1], Ok(1));
        let none = answer_each::<u8>(&ids[..1], BTreeMap::new(), "DescribeInstances");
        assert!(none[0].as_ref().unwrap_err().message.contains("i-2"));
    }
}
