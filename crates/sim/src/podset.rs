//! A set of pods held densely by pod index: insertion, removal and membership in constant
//! time.

use lockstep_model::PodId;

const ABSENT: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(crate) struct PodSet {
    members: Vec<PodId>,
    /// Per pod index: its place in `members`, or `ABSENT`.
    place: Vec<u32>,
}

impl PodSet {
    /// Adds `pod`; returns whether it was absent.
    pub(crate) fn insert(&mut self, pod: PodId) -> bool {
        let i = pod.index();
        if i >= self.place.len() {
            self.place.resize(i + 1, ABSENT);
        }
        if self.place[i] != ABSENT {
            return false;
        }
        self.place[i] = self.members.len() as u32;
        self.members.push(pod);
        true
    }

    /// Takes `pod` out; returns whether it was there.
    pub(crate) fn remove(&mut self, pod: PodId) -> bool {
        let Some(&at) = self.place.get(pod.index()) else {
            return false;
        };
        if at == ABSENT {
            return false;
        }
        self.place[pod.index()] = ABSENT;
        self.members.swap_remove(at as usize);
        if let Some(moved) = self.members.get(at as usize) {
            self.place[moved.index()] = at;
        }
        true
    }

    pub(crate) fn contains(&self, pod: PodId) -> bool {
        self.place.get(pod.index()).is_some_and(|&at| at != ABSENT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn behaves_as_a_set() {
        let mut set = PodSet::default();
        let mut reference = BTreeSet::new();
        // A fixed mix of inserts and removes, repeated ids included.
        for k in 0u32..2000 {
            let pod = PodId((k * 7919) % 97);
            if k % 3 == 0 {
                assert_eq!(set.remove(pod), reference.remove(&pod));
            } else {
                assert_eq!(set.insert(pod), reference.insert(pod));
            }
            for id in 0..100 {
                assert_eq!(set.contains(PodId(id)), reference.contains(&PodId(id)));
            }
            assert_eq!(set.members.len(), reference.len());
        }
        assert!(!set.contains(PodId(5000)));
        assert!(!set.remove(PodId(5000)));
    }
}
