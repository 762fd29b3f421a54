//! [`Fleet`]: the simulated cloud's launch decision and fault model, with no clock and no
//! async inside, so both shells run the same cloud: the controller's [`crate::SimCloud`]
//! wraps it behind the `CloudProvider` trait (tokio's clock turned into a [`Timestamp`]), and
//! the simulator calls it directly at its virtual `now`.
//!
//! A launch fails with an injected API error at `api_error_rate`, then tries the claim's
//! compatible, available offerings in the AWS provider's launch order ([`crate::select`]).
//! Offerings matched by `insufficient_capacity` fail; each that fails is remembered as
//! unavailable for `unavailable_ttl`, as upstream's ICE cache does, and a launch with nothing
//! left to try is an insufficient-capacity error, as upstream's provider answers then.
//! Instance ids are EC2's shape (`i-` and 17 hex digits) from the seed, drawn apart from the
//! faults so that an id drawn does not change which later calls fail. An instance's private
//! address ([`private_ip`], which names its Node) is a hash of its provider id, and ids are
//! drawn until that address is free, as a subnet hands each address to one instance at a
//! time: two instances on one address would register one Node between them. Instances are
//! `Pending` until `launch_delay` has passed, `ShuttingDown` for `termination_delay` after
//! their termination, then `Terminated`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use nodewright_cloud::InstanceState;
use nodewright_core::model::{CapacityType, InstanceType};
use nodewright_core::requirements::Requirement;
use nodewright_core::resources::Resources;
use nodewright_core::rng::Rng;
use nodewright_core::time::Timestamp;

use crate::select::{Choice, candidates};

/// Matches offerings; an unset field matches anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OfferingPattern {
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<CapacityType>,
}

impl OfferingPattern {
    pub fn matches(&self, instance_type: &str, zone: &str, capacity_type: CapacityType) -> bool {
        self.instance_type
            .as_deref()
            .is_none_or(|t| t == instance_type)
            && self.zone.as_deref().is_none_or(|z| z == zone)
            && self.capacity_type.is_none_or(|c| c == capacity_type)
    }
}

/// Timings and faults of the simulated cloud.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetConfig {
    /// From the launch call to a running instance.
    pub launch_delay: Duration,
    /// From the terminate call to a terminated instance.
    pub termination_delay: Duration,
    /// Share of launch calls that fail with a retryable API error.
    pub api_error_rate: f64,
    /// Offerings that have no capacity.
    pub insufficient_capacity: Vec<OfferingPattern>,
    /// How long an offering that failed with insufficient capacity stays unavailable
    /// (upstream's ICE cache TTL).
    pub unavailable_ttl: Duration,
    /// Mean interruptions per spot instance per hour.
    pub spot_interruptions_per_hour: f64,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            launch_delay: Duration::from_secs(3),
            termination_delay: Duration::from_secs(30),
            api_error_rate: 0.0,
            insufficient_capacity: Vec::new(),
            unavailable_ttl: Duration::from_secs(180),
            spot_interruptions_per_hour: 0.0,
        }
    }
}

/// A launched instance: where it landed, and the cheaper offerings passed over for want of
/// capacity.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    /// EC2's instance id, `i-` and 17 hex digits.
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
    pub out_of_capacity: Vec<Choice>,
}

impl Launch {
    /// `aws:///<zone>/<id>`, as the AWS provider writes it.
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.id)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum LaunchError {
    /// Every offering tried was out of capacity (none at all, when nothing compatible was
    /// left to try).
    InsufficientCapacity(Vec<Choice>),
    /// A transient API error, worth retrying.
    Api(String),
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::InsufficientCapacity(tried) if tried.is_empty() => write!(
                f,
                "insufficient capacity: no compatible offering is available"
            ),
            LaunchError::InsufficientCapacity(tried) => {
                let names: Vec<String> = tried
                    .iter()
                    .take(5)
                    .map(|o| format!("{}/{}/{}", o.instance_type, o.zone, o.capacity_type))
                    .collect();
                write!(
                    f,
                    "insufficient capacity for {} offering(s): {}{}",
                    tried.len(),
                    names.join(", "),
                    if tried.len() > 5 { ", ..." } else { "" }
                )
            }
            LaunchError::Api(m) => write!(f, "cloud API error: {m}"),
        }
    }
}

#[derive(Clone, Debug)]
struct Record {
    launched: Timestamp,
    terminating: Option<Timestamp>,
}

/// An offering out of capacity until `until`.
#[derive(Clone, Debug)]
struct Mark {
    zone: String,
    capacity_type: CapacityType,
    until: Timestamp,
}

/// The simulated cloud's state: its fault draws, its instances and its ICE memory.
#[derive(Clone, Debug)]
pub struct Fleet {
    config: FleetConfig,
    faults: Rng,
    ids: Rng,
    /// Provider id → the instance's times.
    instances: BTreeMap<String, Record>,
    /// The private addresses of `instances`.
    addresses: BTreeSet<[u8; 3]>,
    /// Instance type → its offerings marked out of capacity; looked up by name without
    /// building a key, as every launch asks about every offering.
    unavailable: BTreeMap<String, Vec<Mark>>,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet::new(FleetConfig::default(), 0)
    }
}

/// The last three bytes of an instance's private address `10.x.y.z`, derived from its
/// provider id (FNV-1a: stable across runs and platforms), so every agent names its Node alike.
pub fn private_ip(provider_id: &str) -> [u8; 3] {
    let mut h: u32 = 0x811c_9dc5;
    for b in provider_id.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    let [a, b, c, _] = h.to_be_bytes();
    [a, b, c.max(1)]
}

/// Keeps the id stream apart from the fault stream of the same seed.
const ID_STREAM: u64 = 0x6964_735f_6672_6f6d;

impl Fleet {
    pub fn new(config: FleetConfig, seed: u64) -> Self {
        Fleet {
            config,
            faults: Rng::new(seed),
            ids: Rng::new(seed ^ ID_STREAM),
            instances: BTreeMap::new(),
            addresses: BTreeSet::new(),
            unavailable: BTreeMap::new(),
        }
    }

    pub fn config(&self) -> &FleetConfig {
        &self.config
    }

    /// Launches one instance for a claim with `requirements` and `requests` over `types`
    /// at `now` (see the module header).
    pub fn launch(
        &mut self,
        types: &[InstanceType],
        requirements: &[Requirement],
        requests: &Resources,
        now: Timestamp,
    ) -> Result<Launch, LaunchError> {
        if self.faults.chance(self.config.api_error_rate) {
            return Err(LaunchError::Api("RequestLimitExceeded (injected)".into()));
        }
        let options = candidates(types, requirements, requests, |it, o| {
            !self.is_unavailable(it, &o.zone, o.capacity_type, now)
        });
        let no_capacity = |c: &Choice| {
            self.config
                .insufficient_capacity
                .iter()
                .any(|p| p.matches(&c.instance_type, &c.zone, c.capacity_type))
        };
        let found = options.iter().position(|c| !no_capacity(c));
        // What failed is remembered, as the ICE cache does.
        for c in &options[..found.unwrap_or(options.len())] {
            self.mark_unavailable(&c.instance_type, &c.zone, c.capacity_type, now);
        }
        let Some(pos) = found else {
            return Err(LaunchError::InsufficientCapacity(options));
        };
        let mut options = options;
        let choice = options.swap_remove(pos);
        options.truncate(pos);
        let id = self.new_id(&choice.zone);
        let provider_id = format!("aws:///{}/{id}", choice.zone);
        self.addresses.insert(private_ip(&provider_id));
        self.instances.insert(
            provider_id,
            Record {
                launched: now,
                terminating: None,
            },
        );
        Ok(Launch {
            id,
            instance_type: choice.instance_type,
            zone: choice.zone,
            capacity_type: choice.capacity_type,
            price: choice.price,
            out_of_capacity: options,
        })
    }

    fn new_id(&mut self, zone: &str) -> String {
        loop {
            let hi = self.ids.next_u64() & 0xf;
            let lo = self.ids.next_u64();
            let id = format!("i-{hi:x}{lo:016x}");
            let provider_id = format!("aws:///{zone}/{id}");
            if !self.instances.contains_key(&provider_id)
                && !self.addresses.contains(&private_ip(&provider_id))
            {
                return id;
            }
        }
    }

    /// The instance's state at `now`; `None` for one this cloud never launched.
    pub fn state(&self, provider_id: &str, now: Timestamp) -> Option<InstanceState> {
        let r = self.instances.get(provider_id)?;
        Some(match r.terminating {
            Some(t) if now >= t.plus(self.config.termination_delay) => InstanceState::Terminated,
            Some(_) => InstanceState::ShuttingDown,
            None if now >= r.launched.plus(self.config.launch_delay) => InstanceState::Running,
            None => InstanceState::Pending,
        })
    }

    /// Starts terminating the instance at `now` (a second call keeps the first time);
    /// false if there is no such instance or it has terminated already.
    pub fn terminate(&mut self, provider_id: &str, now: Timestamp) -> bool {
        if self
            .state(provider_id, now)
            .is_none_or(|s| s == InstanceState::Terminated)
        {
            return false;
        }
        if let Some(r) = self.instances.get_mut(provider_id) {
            r.terminating.get_or_insert(now);
        }
        true
    }

    /// Forgets every instance that has been terminated for `listed_for` by `now` and returns
    /// their provider ids: a cloud that kept every instance it ever launched would grow
    /// without end under churn. Their state is then unknown (`None`), as for an id never seen.
    pub fn forget_terminated(&mut self, now: Timestamp, listed_for: Duration) -> Vec<String> {
        let gone_after = self.config.termination_delay + listed_for;
        let mut forgotten = Vec::new();
        self.instances.retain(|id, r| {
            let keep = r.terminating.is_none_or(|t| now < t.plus(gone_after));
            if !keep {
                forgotten.push(id.clone());
            }
            keep
        });
        for id in &forgotten {
            self.addresses.remove(&private_ip(id));
        }
        forgotten
    }

    /// Whether the offering is inside its insufficient-capacity window at `now`.
    pub fn is_unavailable(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
        now: Timestamp,
    ) -> bool {
        self.unavailable.get(instance_type).is_some_and(|marks| {
            marks
                .iter()
                .any(|m| m.zone == zone && m.capacity_type == capacity_type && now < m.until)
        })
    }

    /// Marks the offering out of capacity from `now` for the TTL: after a failed launch, or
    /// a spot interruption (as upstream's interruption handler does).
    pub fn mark_unavailable(
        &mut self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
        now: Timestamp,
    ) {
        let until = now.plus(self.config.unavailable_ttl);
        let marks = self
            .unavailable
            .entry(instance_type.to_owned())
            .or_default();
        match marks
            .iter_mut()
            .find(|m| m.zone == zone && m.capacity_type == capacity_type)
        {
            Some(m) => m.until = until,
            None => marks.push(Mark {
                zone: zone.to_owned(),
                capacity_type,
                until,
            }),
        }
    }

    /// Whether any offering is inside its window at `now`.
    pub fn any_unavailable(&self, now: Timestamp) -> bool {
        self.unavailable.values().flatten().any(|m| now < m.until)
    }

    /// Whether some offering's window ended in `(from, to]`.
    pub fn unavailable_ended_between(&self, from: Timestamp, to: Timestamp) -> bool {
        self.unavailable
            .values()
            .flatten()
            .any(|m| m.until > from && m.until <= to)
    }

    /// Every offering inside its window at `now`, as (instance type, zone, capacity
    /// type): exactly those [`Fleet::is_unavailable`] answers true for.
    pub fn unavailable_offerings(&self, now: Timestamp) -> Vec<(String, String, CapacityType)> {
        self.unavailable
            .iter()
            .flat_map(|(it, marks)| {
                marks
                    .iter()
                    .filter(move |m| now < m.until)
                    .map(move |m| (it.clone(), m.zone.clone(), m.capacity_type))
            })
            .collect()
    }

    /// `types` as offered at `now`: offerings inside their window are not available.
    pub fn mark_offerings(&self, types: &mut [InstanceType], now: Timestamp) {
        for it in types {
            for o in &mut it.offerings {
                if self.is_unavailable(&it.name, &o.zone, o.capacity_type, now) {
                    o.available = false;
                }
            }
        }
    }

    /// When a new spot instance will be reclaimed, as a delay from its launch, if within
    /// `horizon`; drawn with the faults.
    pub fn spot_interruption_after(&mut self, horizon: Duration) -> Option<Duration> {
        let hours = self
            .faults
            .exponential_hours(self.config.spot_interruptions_per_hour)?;
        let d = Duration::from_secs_f64(hours * 3600.0);
        (d <= horizon).then_some(d)
    }
}

#[cfg(test)]
mod tests;
