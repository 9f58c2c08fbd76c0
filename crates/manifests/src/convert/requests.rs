//! A pod's effective resource requests, computed as Kubernetes computes them.
//!
//! This follows `resourcehelper.PodRequests` of `k8s.io/component-helpers` (with sidecar
//! containers and pod-level resources) and kube-scheduler's non-zero requests
//! (`calculateResource` with `getNonMissingContainerRequests`). Amounts are integers per
//! resource name (milli-CPU, bytes, units); a key that is present with 0 differs from an absent
//! key, as in Kubernetes, because the non-zero defaults apply only to absent keys.
//!
//! Each quantity is rounded up to an integer before it is summed; Kubernetes sums exact
//! quantities and rounds the total. The two differ only for fractions of a milli-CPU or of a
//! byte.

use std::collections::BTreeMap;

/// Amounts by resource name.
pub(crate) type Amounts = BTreeMap<String, i64>;

/// kube-scheduler's `schedutil.DefaultMilliCPURequest`.
pub(crate) const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// kube-scheduler's `schedutil.DefaultMemoryRequest` (200 MiB).
pub(crate) const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// What the computation needs from a pod spec, after API-server defaulting of container
/// requests from limits.
#[derive(Debug, Clone, Default)]
pub(crate) struct PodResources {
    /// Requests of `spec.containers`.
    pub containers: Vec<Amounts>,
    /// Requests of `spec.initContainers` and whether each is restartable (a sidecar).
    pub init_containers: Vec<(Amounts, bool)>,
    /// `spec.resources.requests` and `.limits` (pod-level resources), when set.
    pub pod_requests: Amounts,
    pub pod_limits: Amounts,
    /// `spec.overhead`.
    pub overhead: Amounts,
}

/// The result: effective requests and the non-zero CPU/memory used for scoring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EffectiveRequests {
    pub requests: Amounts,
    pub non_zero_cpu: i64,
    pub non_zero_memory: i64,
}

/// Whether a resource may be set at pod level (`IsSupportedPodLevelResource`).
pub(crate) fn is_pod_level_resource(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

fn add(into: &mut Amounts, from: &Amounts) {
    for (k, v) in from {
        let e = into.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(*v);
    }
}

fn max(into: &mut Amounts, from: &Amounts) {
    for (k, v) in from {
        match into.get_mut(k) {
            Some(e) if *e >= *v => {}
            Some(e) => *e = *v,
            None => {
                into.insert(k.clone(), *v);
            }
        }
    }
}

/// A copy of `reqs` where each resource of `non_missing` that `reqs` lacks gets its value.
fn apply_non_missing(reqs: &Amounts, non_missing: &Amounts) -> Amounts {
    let mut out = reqs.clone();
    for (k, v) in non_missing {
        out.entry(k.clone()).or_insert(*v);
    }
    out
}

/// `AggregateContainerRequests`: the sum of regular containers and sidecars, raised to the
/// peak of any init container (which runs beside the sidecars started before it).
fn aggregate_containers(pod: &PodResources, non_missing: &Amounts) -> Amounts {
    let mut total = Amounts::new();
    for c in &pod.containers {
        add(&mut total, &apply_non_missing(c, non_missing));
    }
    let mut sidecars = Amounts::new();
    let mut init_peak = Amounts::new();
    for (c, restartable) in &pod.init_containers {
        let reqs = apply_non_missing(c, non_missing);
        if *restartable {
            add(&mut total, &reqs);
            add(&mut sidecars, &reqs);
            max(&mut init_peak, &sidecars);
        } else {
            let mut running = reqs;
            add(&mut running, &sidecars);
            max(&mut init_peak, &running);
        }
    }
    max(&mut total, &init_peak);
    total
}

/// Pod-level requests after API-server defaulting (`defaultPodRequests`): when pod-level
/// limits are set, a supported resource without a pod-level request takes the containers'
/// aggregate request (cpu and memory) or else the pod-level limit.
fn pod_level_requests(pod: &PodResources) -> Amounts {
    let mut reqs = pod.pod_requests.clone();
    if !pod.pod_limits.is_empty() {
        let containers = aggregate_containers(pod, &Amounts::new());
        for (k, v) in &containers {
            if (k == "cpu" || k == "memory") && !reqs.contains_key(k) {
                reqs.insert(k.clone(), *v);
            }
        }
        for (k, v) in &pod.pod_limits {
            if is_pod_level_resource(k) && !reqs.contains_key(k) {
                reqs.insert(k.clone(), *v);
            }
        }
    }
    reqs.retain(|k, _| is_pod_level_resource(k));
    reqs
}

/// `PodRequests`: container aggregate, overridden by pod-level requests, plus overhead.
fn pod_requests(pod: &PodResources, pod_level: &Amounts, non_missing: &Amounts) -> Amounts {
    let mut reqs = aggregate_containers(pod, non_missing);
    for (k, v) in pod_level {
        reqs.insert(k.clone(), *v);
    }
    add(&mut reqs, &pod.overhead);
    reqs
}

pub(crate) fn effective_requests(pod: &PodResources) -> EffectiveRequests {
    let pod_level = pod_level_requests(pod);
    let requests = pod_requests(pod, &pod_level, &Amounts::new());

    // getNonMissingContainerRequests: without pod-level requests every container lacking a
    // cpu or memory request counts the default; with them, only when the pod as a whole
    // lacks that resource.
    let mut non_missing = Amounts::new();
    if pod_level.is_empty() || !requests.contains_key("cpu") {
        non_missing.insert("cpu".to_string(), DEFAULT_MILLI_CPU_REQUEST);
    }
    if pod_level.is_empty() || !requests.contains_key("memory") {
        non_missing.insert("memory".to_string(), DEFAULT_MEMORY_REQUEST);
    }
    let non_zero = if non_missing.is_empty() {
        requests.clone()
    } else {
        pod_requests(pod, &pod_level, &non_missing)
    };
    EffectiveRequests {
        non_zero_cpu: non_zero.get("cpu").copied().unwrap_or(0),
        non_zero_memory: non_zero.get("memory").copied().unwrap_or(0),
        requests,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amounts(pairs: &[(&str, i64)]) -> Amounts {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    const MI: i64 = 1024 * 1024;

    #[test]
    fn sum_of_containers_plus_overhead() {
        let pod = PodResources {
            containers: vec![
                amounts(&[("cpu", 100), ("memory", 64 * MI)]),
                amounts(&[("cpu", 250), ("example.com/gpu", 1)]),
            ],
            overhead: amounts(&[("cpu", 10), ("memory", MI)]),
            ..Default::default()
        };
        let r = effective_requests(&pod);
        assert_eq!(
            r.requests,
            amounts(&[("cpu", 360), ("memory", 65 * MI), ("example.com/gpu", 1)])
        );
        // The second container has no memory request: it counts 200Mi for scoring.
        assert_eq!(r.non_zero_cpu, 360);
        assert_eq!(r.non_zero_memory, 64 * MI + DEFAULT_MEMORY_REQUEST + MI);
    }

    #[test]
    fn init_container_peak_wins_per_resource() {
        let pod = PodResources {
            containers: vec![amounts(&[("cpu", 500), ("memory", 100 * MI)])],
            init_containers: vec![
                (amounts(&[("cpu", 2000)]), false),
                (amounts(&[("memory", 50 * MI)]), false),
            ],
            ..Default::default()
        };
        let r = effective_requests(&pod);
        assert_eq!(r.requests, amounts(&[("cpu", 2000), ("memory", 100 * MI)]));
        // Non-zero: the first init container counts 200Mi memory, the second 100m CPU.
        assert_eq!(r.non_zero_cpu, 2000);
        assert_eq!(r.non_zero_memory, DEFAULT_MEMORY_REQUEST);
    }

    #[test]
    fn sidecars_add_to_the_total_and_to_later_init_containers() {
        let pod = PodResources {
            containers: vec![amounts(&[("cpu", 100)])],
            init_containers: vec![
                (amounts(&[("cpu", 300)]), false), // before any sidecar: 300
                (amounts(&[("cpu", 200)]), true),  // sidecar
                (amounts(&[("cpu", 400)]), false), // runs beside the sidecar: 600
                (amounts(&[("cpu", 50)]), true),   // second sidecar
            ],
            ..Default::default()
        };
        let r = effective_requests(&pod);
        // max(100 + 200 + 50, 300, 600) = 600
        assert_eq!(r.requests, amounts(&[("cpu", 600)]));

        let small_init = PodResources {
            init_containers: vec![
                (amounts(&[("cpu", 200)]), true),
                (amounts(&[("cpu", 100)]), false),
            ],
            ..pod.clone()
        };
        // max(100 + 200, 100 + 200) = 300
        assert_eq!(
            effective_requests(&small_init).requests,
            amounts(&[("cpu", 300)])
        );
    }

    #[test]
    fn explicit_zero_is_not_missing() {
        let pod = PodResources {
            containers: vec![amounts(&[("cpu", 0), ("memory", 0)]), Amounts::new()],
            ..Default::default()
        };
        let r = effective_requests(&pod);
        assert_eq!(r.non_zero_cpu, DEFAULT_MILLI_CPU_REQUEST);
        assert_eq!(r.non_zero_memory, DEFAULT_MEMORY_REQUEST);
    }

    #[test]
    fn pod_level_requests_override_containers() {
        let pod = PodResources {
            containers: vec![
                amounts(&[("cpu", 100), ("example.com/gpu", 1)]),
                amounts(&[("cpu", 100)]),
            ],
            pod_requests: amounts(&[("cpu", 1000)]),
            ..Default::default()
        };
        let r = effective_requests(&pod);
        assert_eq!(
            r.requests,
            amounts(&[("cpu", 1000), ("example.com/gpu", 1)])
        );
        assert_eq!(r.non_zero_cpu, 1000);
        // Memory is missing at both levels: each container counts the default.
        assert_eq!(r.non_zero_memory, 2 * DEFAULT_MEMORY_REQUEST);
    }

    #[test]
    fn pod_level_limits_default_pod_level_requests() {
        let pod = PodResources {
            containers: vec![amounts(&[("cpu", 300)]), Amounts::new()],
            pod_limits: amounts(&[("cpu", 2000), ("memory", 512 * MI)]),
            ..Default::default()
        };
        let r = effective_requests(&pod);
        // cpu from the containers' aggregate, memory from the pod-level limit.
        assert_eq!(r.requests, amounts(&[("cpu", 300), ("memory", 512 * MI)]));
        assert_eq!(r.non_zero_cpu, 300);
        assert_eq!(r.non_zero_memory, 512 * MI);
    }
}
