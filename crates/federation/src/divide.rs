//! Replica assignment, as Karmada's scheduler assigns replicas to the selected clusters:
//! Duplicated (every cluster gets all replicas), Divided by StaticWeight (Webster's method
//! over the static weights), and Divided by Aggregated or DynamicWeight (Webster's method over
//! the clusters' available replicas, Aggregated first cutting the list down to as few
//! clusters as hold the replicas), with Karmada's steady mode (scale up adds to the previous
//! assignment, scale down divides the previous assignment, unchanged keeps it) and fresh mode
//! (a reschedule divides everything again, each cluster's previous replicas counted as room).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One candidate cluster as division sees it. Clusters are named by a key whose order is
/// their names' order (the scheduler's cluster index; a name in the tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate<K> {
    pub name: K,
    /// Replicas the cluster can take now plus those of this binding already there
    /// (Karmada's `AvailableReplicas`).
    pub available: i64,
    /// Replicas the cluster can take now (Karmada's `AllocatableReplicas`).
    pub allocatable: i64,
}

/// Karmada's tie-break among parties of equal priority, chosen per binding by the parity of
/// the FNV-1a hash of the resource's UID: names descending when odd, ascending otherwise
/// (and for an empty UID). Fewer seats win first either way.
pub fn names_descending(uid: &str) -> bool {
    if uid.is_empty() {
        return false;
    }
    let mut h: u32 = 0x811c_9dc5;
    for b in uid.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h & 1 == 1
}

#[derive(Debug, Clone, Copy)]
struct Party<K> {
    name: K,
    votes: i64,
    seats: i64,
    descending: bool,
}

impl<K: Key> Party<K> {
    /// Whether `self` gets the next seat before `other`: the larger votes / (2 seats + 1),
    /// compared exactly; ties to fewer seats, then by name in the binding's direction.
    fn before(&self, other: &Party<K>) -> Ordering {
        let a = i128::from(self.votes) * i128::from(2 * other.seats + 1);
        let b = i128::from(other.votes) * i128::from(2 * self.seats + 1);
        a.cmp(&b)
            .then_with(|| other.seats.cmp(&self.seats))
            .then_with(|| {
                if self.descending {
                    self.name.cmp(&other.name)
                } else {
                    other.name.cmp(&self.name)
                }
            })
    }
}

impl<K: Key> PartialEq for Party<K> {
    fn eq(&self, other: &Self) -> bool {
        self.before(other) == Ordering::Equal
    }
}
impl<K: Key> Eq for Party<K> {}
impl<K: Key> PartialOrd for Party<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K: Key> Ord for Party<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.before(other)
    }
}

/// A cluster's key in a division: copied freely, ordered as the clusters' names are.
pub trait Key: Ord + Copy {}
impl<K: Ord + Copy> Key for K {}

/// Seats per party.
pub type Seats<K> = Vec<(K, i64)>;

/// Webster's (Sainte-Laguë) method as Karmada runs it: `new_seats` seats go one by one to the
/// party with the highest votes / (2 seats + 1), starting from `initial` seats (a party with
/// initial seats and no votes has 0 votes). Returns every party with its seats, by name.
pub fn webster<K: Key>(
    new_seats: i64,
    votes: &[(K, i64)],
    initial: &[(K, i64)],
    descending: bool,
) -> Seats<K> {
    let mut parties: Vec<Party<K>> = initial
        .iter()
        .map(|(n, s)| Party {
            name: *n,
            votes: 0,
            seats: *s,
            descending,
        })
        .collect();
    let k = parties.len();
    for (n, v) in votes {
        match parties[..k].iter_mut().find(|p| p.name == *n) {
            Some(p) => p.votes = *v,
            None => parties.push(Party {
                name: *n,
                votes: *v,
                seats: 0,
                descending,
            }),
        }
    }
    if parties.is_empty() {
        return Vec::new();
    }
    let rounds = new_seats.max(0) - seat_in_bulk(&mut parties, new_seats.max(0));
    let mut heap = BinaryHeap::from(parties);
    for _ in 0..rounds {
        let Some(mut top) = heap.pop() else { break };
        top.seats += 1;
        heap.push(top);
    }
    let mut out: Seats<K> = heap.into_iter().map(|p| (p.name, p.seats)).collect();
    // Keys are distinct: an unstable sort gives the one order.
    out.sort_unstable();
    out
}

/// Gives the parties with positive votes, at once, every seat they would win among the first
/// rounds of [`webster`], leaving fewer rounds than there are parties; returns how many seats
/// it gave. A party's seats are worth votes / 1, votes / 3, votes / 5, ...: every party
/// with positive votes has ever smaller such quotients, and a party without positive votes
/// wins no seat while one with positive votes is there, so the one-by-one rounds hand out
/// the quotients in the order of their values, and the seats worth more than some threshold
/// are the first rounds' seats whatever the tie-breaks. The threshold is largest votes / p for
/// the largest integer p that gives at most `new_seats` such seats, found by bisection: a
/// party's quotients are at least 2 apart in p, so one step of p adds at most one seat per
/// party. Millions of replicas divide in microseconds rather than one heap round each.
fn seat_in_bulk<K>(parties: &mut [Party<K>], new_seats: i64) -> i64 {
    let Some(top) = parties.iter().map(|p| p.votes).filter(|v| *v > 0).max() else {
        return 0;
    };
    let want = i128::from(new_seats);
    let held = parties
        .iter()
        .filter(|p| p.votes == top)
        .map(|p| i128::from(p.seats))
        .max()
        .unwrap_or(0);
    // total(0) = 0 <= want; total(hi) > want (the top party alone has hi / 2 - held).
    let (mut lo, mut hi) = (0i128, 2 * (want + held) + 2);
    // Every votes * p is at most top * hi: in 64 bits when that fits, as it almost always
    // does (128-bit division is a library call).
    let narrow = i64::try_from(hi)
        .ok()
        .and_then(|h| top.checked_mul(h))
        .is_some();
    let top_wide = i128::from(top);
    // Seats above the threshold top / p: k = 2 seats + 1 with k * top < votes * p.
    let above = |party: &Party<K>, p: i128| -> i128 {
        if party.votes <= 0 || p <= 0 {
            return 0;
        }
        let odd = if narrow {
            let m = party.votes * p as i64;
            i128::from(((m - 1) / top + 1) / 2)
        } else {
            let m = i128::from(party.votes) * p;
            ((m - 1) / top_wide + 1) / 2
        };
        (odd - i128::from(party.seats)).max(0)
    };
    let total = |p: i128| parties.iter().map(|party| above(party, p)).sum::<i128>();
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if total(mid) <= want {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let mut given = 0i64;
    for party in parties.iter_mut() {
        let n = i64::try_from(above(party, lo)).unwrap_or(0);
        party.seats += n;
        given += n;
    }
    given
}

/// Karmada's Dispenser: divides `replicas` by `weights` (Webster), on top of `init`. Nothing
/// is divided when the weights sum to 0.
fn dispense<K: Key>(
    replicas: i64,
    weights: &[(K, i64)],
    init: &[(K, i64)],
    descending: bool,
) -> Seats<K> {
    if replicas == 0 && !init.is_empty() {
        return init.to_vec();
    }
    if weights.iter().map(|(_, w)| *w).sum::<i64>() == 0 {
        return init.to_vec();
    }
    webster(replicas, weights, init, descending)
}

/// Duplicated: every candidate gets all the replicas.
pub fn duplicated<K: Key>(candidates: &[Candidate<K>], replicas: i64) -> Seats<K> {
    candidates.iter().map(|c| (c.name, replicas)).collect()
}

/// StaticWeight: `weights` holds each candidate's weight (the largest of the rules that match
/// it; candidates no rule matches are left out). When no candidate has weight, every
/// candidate weighs 1.
pub fn static_weight<K: Key>(
    candidates: &[Candidate<K>],
    weights: &[(K, i64)],
    replicas: i64,
    descending: bool,
) -> Seats<K> {
    let mut list: Seats<K> = weights.iter().filter(|(_, w)| *w > 0).copied().collect();
    if list.iter().map(|(_, w)| *w).sum::<i64>() == 0 {
        list = candidates.iter().map(|c| (c.name, 1)).collect();
    }
    positive(dispense(replicas, &list, &[], descending))
}

/// Aggregated or DynamicWeight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dynamic {
    Aggregated,
    Weighted,
}

/// The outcome of a dynamic division: an assignment or Karmada's unschedulable message.
pub type Division<K> = Result<Seats<K>, String>;

/// Whether [`dynamic`] divides the replicas (rather than failing), without dividing them.
pub fn dynamic_fits<K: Key>(
    candidates: &[Candidate<K>],
    previous: &[(K, i64)],
    replicas: i64,
    fresh: bool,
) -> bool {
    plan(candidates, previous, replicas, fresh).is_ok()
}

/// What [`dynamic`] does before dividing: keep the previous assignment as it is, or divide
/// `target` replicas over `available` on top of `keep`.
enum Plan<K> {
    Keep(Seats<K>),
    Divide {
        target: i64,
        available: Seats<K>,
        keep: Seats<K>,
    },
}

fn plan<K: Key>(
    candidates: &[Candidate<K>],
    previous: &[(K, i64)],
    replicas: i64,
    fresh: bool,
) -> Result<Plan<K>, String> {
    // The previous assignment on clusters still among the candidates.
    let scheduled: Seats<K> = previous
        .iter()
        .filter(|(n, _)| candidates.iter().any(|c| c.name == *n))
        .copied()
        .collect();
    let assigned: i64 = scheduled.iter().map(|(_, r)| r).sum();
    fn by_replicas_desc<K>(mut list: Seats<K>) -> Seats<K> {
        // Stable, as Go's insertion sort is for the short lists it sorts.
        list.sort_by_key(|e| std::cmp::Reverse(e.1));
        list
    }
    let (target, available, keep) = if fresh {
        let mut list: Seats<K> = candidates.iter().map(|c| (c.name, c.allocatable)).collect();
        for (n, r) in &scheduled {
            if let Some(e) = list.iter_mut().find(|(m, _)| m == n) {
                e.1 += r;
            }
        }
        (replicas, by_replicas_desc(list), Vec::new())
    } else if assigned > replicas {
        (replicas, by_replicas_desc(scheduled.clone()), Vec::new())
    } else if assigned < replicas {
        let list = candidates.iter().map(|c| (c.name, c.allocatable)).collect();
        (
            replicas - assigned,
            by_replicas_desc(list),
            scheduled.clone(),
        )
    } else {
        return Ok(Plan::Keep(scheduled));
    };
    let total: i64 = available.iter().map(|(_, r)| r).sum();
    if total < target {
        return Err(format!(
            "Clusters available replicas {total} are not enough to schedule."
        ));
    }
    Ok(Plan::Divide {
        target,
        available,
        keep,
    })
}

/// Aggregated / DynamicWeight division of `replicas` over `candidates` (in the order
/// selection left them), given the binding's previous assignment `previous` and whether the
/// binding asked for a fresh reschedule.
pub fn dynamic<K: Key>(
    kind: Dynamic,
    candidates: &[Candidate<K>],
    previous: &[(K, i64)],
    replicas: i64,
    fresh: bool,
    descending: bool,
) -> Division<K> {
    let (target, available, keep) = match plan(candidates, previous, replicas, fresh)? {
        Plan::Keep(scheduled) => return Ok(positive(scheduled)),
        Plan::Divide {
            target,
            available,
            keep,
        } => (target, available, keep),
    };
    let mut available = available;
    if kind == Dynamic::Aggregated {
        // Clusters the binding already uses first, then the others, each part in order
        // (only scale-up keeps the previous assignment; scale-down and fresh mode clear it).
        let prior: Vec<K> = keep
            .iter()
            .filter(|(_, r)| *r > 0)
            .map(|(n, _)| *n)
            .collect();
        if !prior.is_empty() {
            let (mut first, rest): (Vec<_>, Vec<_>) =
                available.into_iter().partition(|(n, _)| prior.contains(n));
            first.extend(rest);
            available = first;
        }
        let mut sum = 0;
        for i in 0..available.len() {
            sum += available[i].1;
            if sum >= target {
                available.truncate(i + 1);
                break;
            }
        }
    }
    let spread = dispense(target, &available, &[], descending);
    Ok(positive(merge(&keep, spread)))
}

/// Karmada's MergeTargetClusters: the new list with the old replicas added, then old clusters
/// the new list lacks.
fn merge<K: Key>(old: &[(K, i64)], mut new: Seats<K>) -> Seats<K> {
    if old.is_empty() {
        return new;
    }
    if new.is_empty() {
        return old.to_vec();
    }
    let mut rest: Seats<K> = Vec::new();
    for &(n, r) in old {
        match new.iter_mut().find(|(m, _)| *m == n) {
            Some(e) => e.1 += r,
            None => rest.push((n, r)),
        }
    }
    rest.sort();
    new.extend(rest);
    new
}

/// The clusters with replicas.
fn positive<K>(mut list: Seats<K>) -> Seats<K> {
    list.retain(|(_, r)| *r > 0);
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cands<'a>(list: &[(&'a str, i64)]) -> Vec<Candidate<&'a str>> {
        list.iter()
            .map(|(n, r)| Candidate {
                name: *n,
                available: *r,
                allocatable: *r,
            })
            .collect()
    }

    fn pairs<'a>(list: &[(&'a str, i64)]) -> Vec<(&'a str, i64)> {
        list.to_vec()
    }

    fn s<'a>(list: &[(&'a str, i64)]) -> Vec<(&'a str, i64)> {
        list.to_vec()
    }

    fn sorted(mut v: Vec<(&str, i64)>) -> Vec<(&str, i64)> {
        v.sort();
        v
    }

    #[test]
    fn webster_divides_in_proportion_when_exact() {
        let r = webster(12, &s(&[("a", 18), ("b", 12), ("c", 6)]), &[], false);
        assert_eq!(r, s(&[("a", 6), ("b", 4), ("c", 2)]));
    }

    #[test]
    fn webster_rounds_by_the_largest_remaining_quotient() {
        // 9 over 1:3 -> quotas 2.25 and 6.75 -> 2 and 7 (Karmada's documented example).
        assert_eq!(
            webster(9, &s(&[("a", 1), ("b", 3)]), &[], false),
            s(&[("a", 2), ("b", 7)])
        );
        // Webster differs from largest remainders: 10 seats over 6:3:1 gives 6/3/1, and
        // 5 seats over 10:1:1 gives the small parties nothing.
        assert_eq!(
            webster(5, &s(&[("a", 10), ("b", 1), ("c", 1)]), &[], false),
            s(&[("a", 5), ("b", 0), ("c", 0)])
        );
    }

    #[test]
    fn webster_ties_go_to_fewer_seats_then_by_name_in_the_uid_direction() {
        let equal = s(&[("a", 1), ("b", 1), ("c", 1)]);
        assert_eq!(
            webster(1, &equal, &[], false),
            s(&[("a", 1), ("b", 0), ("c", 0)])
        );
        assert_eq!(
            webster(1, &equal, &[], true),
            s(&[("a", 0), ("b", 0), ("c", 1)])
        );
        assert_eq!(
            webster(4, &equal, &[], false),
            s(&[("a", 2), ("b", 1), ("c", 1)])
        );
    }

    /// Webster's method one seat at a time, as Karmada hands seats out.
    fn webster_by_rounds<'a>(
        new_seats: i64,
        votes: &[(&'a str, i64)],
        initial: &[(&'a str, i64)],
        descending: bool,
    ) -> Seats<&'a str> {
        let mut parties: Vec<Party<&'a str>> = initial
            .iter()
            .map(|(n, s)| Party {
                name: *n,
                votes: 0,
                seats: *s,
                descending,
            })
            .collect();
        let k = parties.len();
        for (n, v) in votes {
            match parties[..k].iter_mut().find(|p| p.name == *n) {
                Some(p) => p.votes = *v,
                None => parties.push(Party {
                    name: *n,
                    votes: *v,
                    seats: 0,
                    descending,
                }),
            }
        }
        let mut heap = BinaryHeap::from(parties);
        for _ in 0..new_seats.max(0) {
            let Some(mut top) = heap.pop() else { break };
            top.seats += 1;
            heap.push(top);
        }
        let mut out: Seats<&'a str> = heap.into_iter().map(|p| (p.name, p.seats)).collect();
        out.sort();
        out
    }

    const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

    proptest::proptest! {
        #[test]
        fn webster_in_bulk_is_webster_by_rounds(
            votes in proptest::collection::vec(-3i64..40, 1..6),
            initial in proptest::collection::vec(0i64..6, 0..4),
            new_seats in 0i64..300,
            descending: bool,
        ) {
            let votes: Vec<(&str, i64)> = NAMES.iter().copied().zip(votes).collect();
            // Initial seats on some of the same names and on names without votes.
            let initial: Vec<(&str, i64)> =
                NAMES.iter().rev().copied().zip(initial).collect();
            proptest::prop_assert_eq!(
                webster(new_seats, &votes, &initial, descending),
                webster_by_rounds(new_seats, &votes, &initial, descending)
            );
        }

        /// Votes so large that votes × seats leaves 64 bits: the bulk step's 128-bit path.
        #[test]
        fn webster_in_bulk_is_webster_by_rounds_for_huge_votes(
            votes in proptest::collection::vec(0i64..i64::MAX / 2, 1..6),
            new_seats in 0i64..300,
            descending: bool,
        ) {
            let votes: Vec<(&str, i64)> = NAMES.iter().copied().zip(votes).collect();
            proptest::prop_assert_eq!(
                webster(new_seats, &votes, &[], descending),
                webster_by_rounds(new_seats, &votes, &[], descending)
            );
        }
    }

    #[test]
    fn webster_divides_two_billion_seats_at_once() {
        let start = std::time::Instant::now();
        let r = webster(
            i64::from(i32::MAX),
            &s(&[("a", 3), ("b", 2), ("c", 1)]),
            &[],
            false,
        );
        // 2147483647 over 3:2:1: quotas 1073741823.5, 715827882.33, 357913941.17.
        assert_eq!(
            r,
            s(&[("a", 1_073_741_824), ("b", 715_827_882), ("c", 357_913_941)])
        );
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
        let r = webster(
            1_000_000_007,
            &s(&[("a", i64::MAX), ("b", 1)]),
            &s(&[("b", 5)]),
            true,
        );
        assert_eq!(r, s(&[("a", 1_000_000_007), ("b", 5)]));
    }

    #[test]
    fn webster_starts_from_initial_seats() {
        // b already holds 3 seats with no votes: it gets nothing more.
        let r = webster(2, &s(&[("a", 1)]), &s(&[("b", 3)]), false);
        assert_eq!(r, s(&[("a", 2), ("b", 3)]));
    }

    #[test]
    fn uid_parity_picks_the_direction() {
        assert!(!names_descending(""));
        // FNV-1a 32 of "a" is 0xe40c292c (even), of "b" 0xe70c2de5 (odd).
        assert!(!names_descending("a"));
        assert!(names_descending("b"));
    }

    #[test]
    fn static_weights_3_2_1() {
        let c = cands(&[("a", 100), ("b", 100), ("c", 100)]);
        let w = pairs(&[("a", 3), ("b", 2), ("c", 1)]);
        assert_eq!(
            sorted(static_weight(&c, &w, 12, false)),
            pairs(&[("a", 6), ("b", 4), ("c", 2)])
        );
        // 13: quotas 6.5, 4.33, 2.17 -> the 13th seat goes to a (3/13 > 2/9 > 1/5).
        assert_eq!(
            sorted(static_weight(&c, &w, 13, false)),
            pairs(&[("a", 7), ("b", 4), ("c", 2)])
        );
        // 14: the 14th seat compares b 2/9 with c 1/5 and a 3/15: b.
        assert_eq!(
            sorted(static_weight(&c, &w, 14, false)),
            pairs(&[("a", 7), ("b", 5), ("c", 2)])
        );
    }

    #[test]
    fn static_weight_without_weights_divides_evenly() {
        let c = cands(&[("a", 0), ("b", 0)]);
        assert_eq!(
            sorted(static_weight(&c, &[], 3, false)),
            pairs(&[("a", 2), ("b", 1)])
        );
    }

    #[test]
    fn duplicated_gives_every_cluster_all_replicas() {
        let c = cands(&[("a", 0), ("b", 5)]);
        assert_eq!(duplicated(&c, 3), pairs(&[("a", 3), ("b", 3)]));
    }

    #[test]
    fn dynamic_weight_18_12_6() {
        let c = cands(&[("a", 18), ("b", 12), ("c", 6)]);
        let r = dynamic(Dynamic::Weighted, &c, &[], 12, false, false).unwrap();
        assert_eq!(sorted(r), pairs(&[("a", 6), ("b", 4), ("c", 2)]));
    }

    #[test]
    fn aggregated_12_over_12_6_6_takes_one_cluster() {
        let c = cands(&[("a", 12), ("b", 6), ("c", 6)]);
        let r = dynamic(Dynamic::Aggregated, &c, &[], 12, false, false).unwrap();
        assert_eq!(r, pairs(&[("a", 12)]));
    }

    #[test]
    fn aggregated_scale_up_12_to_24_keeps_the_previous_clusters_first() {
        // Room 4:6:8 on a, b, c; previous assignment a=4, b=8.
        let c = cands(&[("a", 4), ("b", 6), ("c", 8)]);
        let prev = pairs(&[("a", 4), ("b", 8)]);
        let r = dynamic(Dynamic::Aggregated, &c, &prev, 24, false, false).unwrap();
        assert_eq!(sorted(r), pairs(&[("a", 7), ("b", 12), ("c", 5)]));
    }

    #[test]
    fn scale_down_divides_the_previous_assignment() {
        let c = cands(&[("a", 0), ("b", 0)]);
        let prev = pairs(&[("a", 6), ("b", 3)]);
        let r = dynamic(Dynamic::Weighted, &c, &prev, 3, false, false).unwrap();
        assert_eq!(sorted(r), pairs(&[("a", 2), ("b", 1)]));
    }

    #[test]
    fn unchanged_replicas_keep_the_assignment() {
        let c = cands(&[("a", 0), ("b", 100)]);
        let prev = pairs(&[("a", 6)]);
        let r = dynamic(Dynamic::Weighted, &c, &prev, 6, false, false).unwrap();
        assert_eq!(r, prev);
    }

    #[test]
    fn fresh_mode_divides_everything_again() {
        // a holds 6 of the binding's replicas and has room for 0 more; b has room for 6.
        let c = vec![
            Candidate {
                name: "a",
                available: 6,
                allocatable: 0,
            },
            Candidate {
                name: "b",
                available: 6,
                allocatable: 6,
            },
        ];
        let prev = pairs(&[("a", 6)]);
        let r = dynamic(Dynamic::Weighted, &c, &prev, 6, true, false).unwrap();
        assert_eq!(sorted(r), pairs(&[("a", 3), ("b", 3)]));
        let steady = dynamic(Dynamic::Weighted, &c, &prev, 6, false, false).unwrap();
        assert_eq!(steady, prev);
    }

    #[test]
    fn not_enough_room_is_karmadas_message() {
        let c = cands(&[("a", 3), ("b", 2)]);
        let r = dynamic(Dynamic::Weighted, &c, &[], 6, false, false);
        assert_eq!(
            r,
            Err("Clusters available replicas 5 are not enough to schedule.".to_string())
        );
    }
}
