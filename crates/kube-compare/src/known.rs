//! The differences from kube-scheduler v1.37 that are deliberate, each with its reason
//! (README's "Differences from kube-scheduler" says the same for users).
//!
//! A decision whose placement or victims differ must be listed here, or it is a bug; a
//! listed difference that no longer occurs must be removed, so the list stays true.

use crate::compare::{CaseReport, Decision, Verdict};

/// One deliberate difference: a case (and, for a case with several pods, the pod) on
/// which lockstep places or preempts otherwise than kube-scheduler, and why.
#[derive(Clone, Copy, Debug)]
pub struct Known {
    pub case: &'static str,
    /// `namespace/name`; `None`: every differing decision of the case.
    pub pod: Option<&'static str>,
    pub reason: &'static str,
    /// A tie kube-scheduler breaks at random (equal scores, equally good placements or
    /// preemption candidates): the two agree on some runs, so the entry is not stale when
    /// they do.
    pub random_tie: bool,
}

/// Gangs are placed as a whole: lockstep tries the pods of a gang in several orders
/// (and its own gang preemption) where kube-scheduler 1.37 places them one by one.
const GANG_ORDERS: &str = "lockstep places a gang as a whole, trying several pod orders; \
    kube-scheduler 1.37 places its pods one by one in queue order and gives up on the first \
    pod that does not fit";
const GANG_PREEMPTION: &str = "lockstep's workload-aware gang preemption (whole groups, \
    minimal victims by a stated objective, PodDisruptionBudgets and disruptionMode honoured \
    for the gang as a whole); kube-scheduler 1.37 preempts for a gang pod by pod";
const DRA_PREEMPTION: &str = "lockstep preempts lower-priority pods to free devices a \
    claim needs; kube-scheduler 1.37's DynamicResources plugin reports \"Preemption is not \
    helpful\" for device shortages";

const RACK_TIE: &str = "two empty racks of one zone hold a child group equally well; \
    lockstep gives the first child the rack whose name sorts first, kube-scheduler 1.37 picks \
    among equal placements at random";

/// Every deliberate difference found on the scenario fixtures.
pub const KNOWN: &[Known] = &[
    Known {
        case: "gang-heterogeneous-order",
        pod: None,
        reason: GANG_ORDERS,
        random_tie: false,
    },
    Known {
        case: "preempt-greedy-fallback",
        pod: None,
        reason: GANG_PREEMPTION,
        random_tie: false,
    },
    Known {
        case: "preempt-least-overage",
        pod: None,
        reason: GANG_PREEMPTION,
        random_tie: true,
    },
    Known {
        case: "preempt-pair-fallback",
        pod: None,
        reason: GANG_PREEMPTION,
        // kube-scheduler preempts for the first gang pod on n1 or n2 (one victim of
        // priority 100 each, an equally good candidate) from a random offset into the
        // candidate list: on the runs where it picks n1 it evicts what lockstep evicts.
        random_tie: true,
    },
    Known {
        case: "preempt-pdb-steers-gang",
        pod: None,
        reason: GANG_PREEMPTION,
        random_tie: false,
    },
    Known {
        case: "preempt-policy-never",
        pod: None,
        reason: GANG_PREEMPTION,
        random_tie: false,
    },
    Known {
        case: "preempt-disruption-mode-all",
        pod: None,
        reason: GANG_PREEMPTION,
        random_tie: false,
    },
    Known {
        case: "preempt-tie-score-then-name",
        pod: None,
        reason: GANG_PREEMPTION,
        random_tie: true,
    },
    Known {
        case: "dra-generated-claim-preemption",
        pod: None,
        reason: DRA_PREEMPTION,
        random_tie: false,
    },
    Known {
        // Compared with `gangPlacement: PodByPod`: one by one the gang strands its NVLink
        // pod, and lockstep evicts the pod holding the other NVLink GPU.
        case: "gang-search-before-preemption",
        pod: None,
        reason: DRA_PREEMPTION,
        random_tie: false,
    },
    Known {
        case: "gang-composite-zone-racks",
        pod: None,
        reason: RACK_TIE,
        random_tie: true,
    },
];

/// Whether `d` (a decision of case `case`) differs in placement or victims.
pub fn differs(d: &Decision) -> bool {
    matches!(d.verdict, Verdict::Placement | Verdict::Victims)
}

/// The listed reason for a differing decision, if it is a known difference.
pub fn reason(case: &str, d: &Decision) -> Option<&'static str> {
    KNOWN
        .iter()
        .find(|k| k.case == case && k.pod.is_none_or(|p| p == d.pod))
        .map(|k| k.reason)
}

/// What a set of case reports says against the list: differing decisions that are not
/// listed, listed differences of the cases run that did not occur, and cases that could
/// not be run.
#[derive(Debug, Default)]
pub struct Audit {
    pub unexplained: Vec<String>,
    pub stale: Vec<String>,
    pub failed: Vec<String>,
}

impl Audit {
    pub fn new(reports: &[CaseReport]) -> Audit {
        let mut audit = Audit::default();
        for r in reports {
            if let Some(e) = &r.error {
                audit.failed.push(format!("{}: {e}", r.name));
                continue;
            }
            for d in r.decisions.iter().filter(|d| differs(d)) {
                if reason(&r.name, d).is_none() {
                    audit.unexplained.push(format!(
                        "{} {}: {:?}: kube-scheduler {:?}{}, lockstep {:?}{}",
                        r.name,
                        d.pod,
                        d.verdict,
                        d.kube,
                        victims(&d.kube_victims),
                        d.lockstep,
                        victims(&d.lockstep_victims),
                    ));
                }
            }
            for k in KNOWN.iter().filter(|k| k.case == r.name && !k.random_tie) {
                let occurs = r
                    .decisions
                    .iter()
                    .any(|d| differs(d) && k.pod.is_none_or(|p| p == d.pod));
                if !occurs {
                    audit.stale.push(format!(
                        "{}{}: listed as a known difference but both schedulers agree now",
                        k.case,
                        k.pod.map(|p| format!(" {p}")).unwrap_or_default()
                    ));
                }
            }
        }
        audit
    }

    pub fn is_clean(&self) -> bool {
        self.unexplained.is_empty() && self.stale.is_empty() && self.failed.is_empty()
    }
}

fn victims(v: &[String]) -> String {
    if v.is_empty() {
        String::new()
    } else {
        format!(" evicting {}", v.join(", "))
    }
}
