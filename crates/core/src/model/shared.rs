//! One copy of each distinct value that many objects hold alike: a shell that keeps objects
//! for a long time (the controller's index) passes what they hold through
//! [`Shared::share`], so the replicas of a Deployment hold one [`PodTemplate`] between them,
//! and NodeClaims made for alike pods one list of instance types, rather than one each.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

use super::PodTemplate;

/// Values in use, each kept once.
#[derive(Debug)]
pub struct Shared<T: ?Sized> {
    kept: HashSet<Arc<T>>,
    /// How many values the last sweep kept; the next sweep waits until there are twice as
    /// many, so sweeping costs a constant per value added.
    swept: usize,
}

/// The pod templates a shell's pods share (see [`PodTemplate`]).
pub type PodTemplates = Shared<PodTemplate>;

/// Below this many values no sweep runs.
const FIRST_SWEEP: usize = 64;

impl<T: ?Sized> Default for Shared<T> {
    fn default() -> Self {
        Shared {
            kept: HashSet::new(),
            swept: 0,
        }
    }
}

impl<T: ?Sized> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared {
            kept: self.kept.clone(),
            swept: self.swept,
        }
    }
}

impl<T: Hash + Eq + ?Sized> Shared<T> {
    /// Points `value` at the kept copy of what it holds, keeping it when it is new.
    pub fn share(&mut self, value: &mut Arc<T>) {
        if let Some(kept) = self.kept.get(&**value) {
            if !Arc::ptr_eq(kept, value) {
                *value = Arc::clone(kept);
            }
            return;
        }
        if self.kept.len() >= FIRST_SWEEP.max(2 * self.swept) {
            // A value only this set holds belongs to no object any more.
            self.kept.retain(|t| Arc::strong_count(t) > 1);
            self.swept = self.kept.len();
        }
        self.kept.insert(Arc::clone(value));
    }

    /// Values kept, including some no object holds until the next sweep.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

impl Shared<str> {
    /// The kept copy of `value`, kept now if new: [`Shared::share`] without first making a
    /// copy that a kept one then replaces.
    pub fn text(&mut self, value: &str) -> Arc<str> {
        if let Some(kept) = self.kept.get(value) {
            return Arc::clone(kept);
        }
        let mut copy: Arc<str> = Arc::from(value);
        self.share(&mut copy);
        copy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Pod;

    fn pod(name: &str, app: &str) -> Pod {
        let mut pod = Pod {
            name: name.into(),
            ..Pod::default()
        };
        pod.labels.insert("app".into(), app.into());
        pod
    }

    #[test]
    fn equal_templates_are_one_copy_and_a_change_copies_on_write() {
        let mut templates = PodTemplates::default();
        let (mut a, mut b, mut c) = (pod("a", "web"), pod("b", "web"), pod("c", "db"));
        for p in [&mut a, &mut b, &mut c] {
            templates.share(&mut p.template);
        }
        assert!(Arc::ptr_eq(&a.template, &b.template));
        assert!(!Arc::ptr_eq(&a.template, &c.template));
        assert_eq!(templates.len(), 2);
        b.labels.insert("tier".into(), "front".into());
        assert!(!Arc::ptr_eq(&a.template, &b.template));
        assert_eq!(a.labels.len(), 1);
    }

    #[test]
    fn values_no_object_holds_are_swept_as_new_ones_arrive() {
        let mut lists: Shared<[String]> = Shared::default();
        let mut live = Vec::new();
        for i in 0..1_000 {
            let mut list: Arc<[String]> = Arc::from(vec![format!("v{i}")]);
            lists.share(&mut list);
            if i % 10 == 0 {
                live.push(list);
            }
        }
        // 100 live lists; a sweep runs whenever the set doubles since the last one.
        assert!(
            lists.len() <= 2 * live.len() + FIRST_SWEEP,
            "{}",
            lists.len()
        );
        assert!(live.iter().all(|l| Arc::strong_count(l) == 2));
    }

    #[test]
    fn a_text_is_one_copy_whether_given_as_a_str_or_an_arc() {
        let mut texts: Shared<str> = Shared::default();
        let zone = texts.text("us-east-1a");
        assert!(Arc::ptr_eq(&zone, &texts.text("us-east-1a")));
        let mut given: Arc<str> = Arc::from("us-east-1a");
        texts.share(&mut given);
        assert!(Arc::ptr_eq(&zone, &given));
        assert!(!Arc::ptr_eq(&zone, &texts.text("us-east-1b")));
        assert_eq!(texts.len(), 2);
    }
}
