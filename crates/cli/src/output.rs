//! The `schedule` output contract: one object with bindings, evictions, unschedulable,
//! waiting, skipped, podGroups and allocations, each list sorted by its first field.

use lockstep_engine::Decisions;
use lockstep_model::Cluster;
use serde::Serialize;

#[derive(Debug, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub bindings: Vec<Binding>,
    pub evictions: Vec<Eviction>,
    pub unschedulable: Vec<PodMessage>,
    pub waiting: Vec<PodMessage>,
    pub skipped: Vec<PodMessage>,
    pub pod_groups: Vec<PodGroupStatus>,
    pub allocations: Vec<Allocation>,
    /// Per workload object (RayCluster, Job, ...): its pods bound after the run, of all its
    /// pods. Shown by the table only.
    #[serde(skip)]
    pub owners: Vec<OwnerSummary>,
}

/// How many of a workload object's pods are bound once the run is over.
#[derive(Debug, PartialEq, Eq)]
pub struct OwnerSummary {
    /// e.g. `RayCluster ml/rc`.
    pub owner: String,
    pub bound: usize,
    pub pods: usize,
}

#[derive(Debug, Serialize)]
pub struct Binding {
    pub pod: String,
    pub node: String,
}

#[derive(Debug, Serialize)]
pub struct Eviction {
    pub pod: String,
    pub node: String,
    pub preemptor: String,
    pub reason: String,
}

#[derive(Debug, Serialize)]
pub struct PodMessage {
    pub pod: String,
    pub message: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    pub name: String,
    pub scheduled: bool,
    pub message: String,
    /// Set when preemption took pods of the group: the DisruptionTarget condition's message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disruption_target: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Allocation {
    pub pod: String,
    pub claim: String,
    pub node: String,
    pub devices: Vec<AllocatedDevice>,
}

#[derive(Debug, Serialize)]
pub struct AllocatedDevice {
    pub request: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
}

impl Report {
    pub fn new(cluster: &Cluster, d: &Decisions) -> Report {
        let key = |id: lockstep_model::PodId| cluster.pods[id.index()].key();
        let messages = |list: &[(lockstep_model::PodId, String)]| {
            let mut v: Vec<PodMessage> = list
                .iter()
                .map(|(id, m)| PodMessage {
                    pod: key(*id),
                    message: m.clone(),
                })
                .collect();
            v.sort_by(|a, b| a.pod.cmp(&b.pod));
            v
        };
        let mut bindings: Vec<Binding> = d
            .bindings
            .iter()
            .map(|(p, n)| Binding {
                pod: key(*p),
                node: cluster.nodes[n.index()].name.clone(),
            })
            .collect();
        bindings.sort_by(|a, b| a.pod.cmp(&b.pod));
        let mut pod_groups: Vec<PodGroupStatus> = d
            .pod_groups
            .iter()
            .map(|g| PodGroupStatus {
                name: g.name.clone(),
                scheduled: g.scheduled,
                message: g.message.clone(),
                disruption_target: None,
            })
            .collect();
        for (name, why) in &d.disrupted_groups {
            match pod_groups.iter_mut().find(|g| g.name == *name) {
                Some(g) => g.disruption_target = Some(why.clone()),
                None => pod_groups.push(PodGroupStatus {
                    name: name.clone(),
                    scheduled: true,
                    message: why.clone(),
                    disruption_target: Some(why.clone()),
                }),
            }
        }
        pod_groups.sort_by(|a, b| a.name.cmp(&b.name));
        let mut evictions: Vec<Eviction> = d
            .evictions
            .iter()
            .map(|e| Eviction {
                pod: key(e.pod),
                node: cluster.nodes[e.node.index()].name.clone(),
                preemptor: e.preemptor.clone(),
                reason: e.reason.clone(),
            })
            .collect();
        evictions.sort_by(|a, b| a.pod.cmp(&b.pod));
        Report {
            bindings,
            evictions,
            unschedulable: messages(&d.unschedulable),
            waiting: messages(&d.waiting),
            skipped: messages(&d.skipped),
            pod_groups,
            allocations: {
                let mut v: Vec<Allocation> = d
                    .allocations
                    .iter()
                    .map(|a| Allocation {
                        pod: key(a.pod),
                        claim: a.claim.clone(),
                        node: cluster.nodes[a.node.index()].name.clone(),
                        devices: a
                            .devices
                            .iter()
                            .map(|x| AllocatedDevice {
                                request: x.request.clone(),
                                driver: x.driver.clone(),
                                pool: x.pool.clone(),
                                device: x.device.clone(),
                            })
                            .collect(),
                    })
                    .collect();
                v.sort_by(|a, b| (&a.pod, &a.claim).cmp(&(&b.pod, &b.claim)));
                v
            },
            owners: Vec::new(),
        }
    }

    /// Counts, per owner in `owners` (`namespace/pod` -> `Kind ns/name`), the owner's pods
    /// that are bound after the run: running before and not evicted, or bound by it.
    pub fn summarize_owners(
        &mut self,
        cluster: &Cluster,
        owners: &std::collections::BTreeMap<String, String>,
    ) {
        use std::collections::{BTreeMap, HashSet};
        let bound: HashSet<&str> = self.bindings.iter().map(|b| b.pod.as_str()).collect();
        let evicted: HashSet<&str> = self.evictions.iter().map(|e| e.pod.as_str()).collect();
        let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for pod in &cluster.pods {
            let key = pod.key();
            let Some(owner) = owners.get(&key) else {
                continue;
            };
            let entry = counts.entry(owner.as_str()).or_default();
            entry.1 += 1;
            let running = pod.is_bound() && !evicted.contains(key.as_str());
            if running || bound.contains(key.as_str()) {
                entry.0 += 1;
            }
        }
        self.owners = counts
            .into_iter()
            .map(|(owner, (bound, pods))| OwnerSummary {
                owner: owner.to_string(),
                bound,
                pods,
            })
            .collect();
    }

    /// A terminal-friendly rendering: one section per non-empty list and a summary line.
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        // A titled table; every column but the last is padded to its widest cell.
        let section = |out: &mut String, title: &str, head: &[&str], rows: Vec<Vec<String>>| {
            if rows.is_empty() {
                return;
            }
            let last = head.len() - 1;
            let widths: Vec<usize> = (0..last)
                .map(|c| {
                    rows.iter()
                        .map(|r| r[c].len())
                        .chain([head[c].len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |out: &mut String, cells: &[&str]| {
                out.push_str("  ");
                for (c, w) in widths.iter().enumerate() {
                    let _ = write!(out, "{:<w$}  ", cells[c]);
                }
                let _ = writeln!(out, "{}", cells[last]);
            };
            let _ = writeln!(out, "{title}");
            line(out, head);
            for r in &rows {
                line(out, &r.iter().map(String::as_str).collect::<Vec<_>>());
            }
            out.push('\n');
        };
        section(
            &mut out,
            "BOUND",
            &["POD", "NODE"],
            self.bindings
                .iter()
                .map(|b| vec![b.pod.clone(), b.node.clone()])
                .collect(),
        );
        section(
            &mut out,
            "EVICTED",
            &["POD", "NODE", "PREEMPTOR", "REASON"],
            self.evictions
                .iter()
                .map(|e| {
                    vec![
                        e.pod.clone(),
                        e.node.clone(),
                        e.preemptor.clone(),
                        e.reason.clone(),
                    ]
                })
                .collect(),
        );
        for (title, list) in [
            ("UNSCHEDULABLE", &self.unschedulable),
            ("WAITING", &self.waiting),
            ("SKIPPED", &self.skipped),
        ] {
            section(
                &mut out,
                title,
                &["POD", "MESSAGE"],
                list.iter()
                    .map(|m| vec![m.pod.clone(), m.message.clone()])
                    .collect(),
            );
        }
        section(
            &mut out,
            "DEVICES",
            &["POD", "CLAIM", "NODE", "DEVICES"],
            self.allocations
                .iter()
                .map(|a| {
                    let devices: Vec<String> = a
                        .devices
                        .iter()
                        .map(|d| format!("{}={}/{}/{}", d.request, d.driver, d.pool, d.device))
                        .collect();
                    vec![
                        a.pod.clone(),
                        a.claim.clone(),
                        a.node.clone(),
                        devices.join(", "),
                    ]
                })
                .collect(),
        );
        section(
            &mut out,
            "POD GROUPS",
            &["GROUP", "SCHEDULED", "MESSAGE"],
            self.pod_groups
                .iter()
                .map(|g| vec![g.name.clone(), g.scheduled.to_string(), g.message.clone()])
                .collect(),
        );
        if !self.owners.is_empty() {
            let _ = writeln!(out, "WORKLOADS");
            for o in &self.owners {
                let _ = writeln!(out, "  {}: {}/{} pods bound", o.owner, o.bound, o.pods);
            }
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "{} bound, {} evicted, {} unschedulable, {} waiting, {} skipped",
            self.bindings.len(),
            self.evictions.len(),
            self.unschedulable.len(),
            self.waiting.len(),
            self.skipped.len()
        );
        out
    }
}
