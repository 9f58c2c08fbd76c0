//! Agreement counts over many cases, and their rendering.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::compare::{CaseReport, Verdict};

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub cases: usize,
    /// Cases that could not be run (the message says why).
    pub failed_cases: Vec<(String, String)>,
    pub decisions: usize,
    pub verdicts: BTreeMap<String, usize>,
}

impl Summary {
    pub fn new(reports: &[CaseReport]) -> Summary {
        let mut s = Summary {
            cases: reports.len(),
            ..Summary::default()
        };
        for r in reports {
            if let Some(e) = &r.error {
                s.failed_cases.push((r.name.clone(), e.clone()));
            }
            for d in &r.decisions {
                s.decisions += 1;
                *s.verdicts
                    .entry(verdict_name(d.verdict).into())
                    .or_insert(0) += 1;
            }
        }
        s
    }

    /// Decisions where both placed the pod on the same node (or on nodes that tie in
    /// score), or both found it unschedulable, with the same victims.
    pub fn agreeing(&self) -> usize {
        ["same", "tie", "message"]
            .iter()
            .map(|k| self.verdicts.get(*k).copied().unwrap_or(0))
            .sum()
    }

    pub fn text(&self) -> String {
        let pct = |n: usize| {
            if self.decisions == 0 {
                0.0
            } else {
                100.0 * n as f64 / self.decisions as f64
            }
        };
        let mut out = format!(
            "{} cases, {} decisions; placement agreement {}/{} ({:.2}%)\n",
            self.cases,
            self.decisions,
            self.agreeing(),
            self.decisions,
            pct(self.agreeing())
        );
        for (k, n) in &self.verdicts {
            out += &format!("  {k:<10} {n:>6}  {:6.2}%\n", pct(*n));
        }
        for (name, e) in &self.failed_cases {
            out += &format!("  case {name} not run: {e}\n");
        }
        out
    }
}

pub fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Same => "same",
        Verdict::Tie => "tie",
        Verdict::Message => "message",
        Verdict::Victims => "victims",
        Verdict::Placement => "placement",
    }
}
