//! Karmada's cluster filters and score, with its messages: APIEnablement, TaintToleration,
//! ClusterAffinity, SpreadConstraint, ClusterEviction (run in that order, the first failure
//! being the cluster's reason), then lockstep's Ready check (a cluster whose `Ready`
//! condition is not True gets nothing new; one the binding already uses keeps what it has).
//! Score: ClusterLocality (100 for a cluster the binding already uses, when it uses any).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::api::ClusterAffinity;
use crate::model::{Binding, Cluster, tolerates};

pub const MAX_CLUSTER_SCORE: i64 = 100;

/// The affinities a binding's placement imposes for the ClusterAffinities term at `term`
/// (or its single clusterAffinity); none when the placement has neither.
pub fn affinities(b: &Binding, term: usize) -> Vec<ClusterAffinity> {
    if let Some(a) = &b.placement.cluster_affinity {
        return vec![a.clone()];
    }
    b.placement
        .cluster_affinities
        .get(term)
        .map(|t| vec![t.affinity()])
        .unwrap_or_default()
}

/// Runs every filter; `Err` holds the reason in Karmada's words.
pub fn filter(b: &Binding, c: &Cluster, affinities: &[ClusterAffinity]) -> Result<(), String> {
    let targeted = b.targets(&c.name);
    // APIEnablement.
    if !targeted && !c.apis.contains(&b.gvk) {
        return Err("cluster(s) did not have the API resource".into());
    }
    // TaintToleration.
    if !targeted {
        for taint in &c.taints {
            if !matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute") {
                continue;
            }
            if !b
                .placement
                .cluster_tolerations
                .iter()
                .any(|t| tolerates(t, taint))
            {
                let text = match taint.value.as_deref() {
                    Some(v) if !v.is_empty() => format!("{}={v}:{}", taint.key, taint.effect),
                    _ => format!("{}:{}", taint.key, taint.effect),
                };
                return Err(format!("cluster(s) had untolerated taint {{{text}}}"));
            }
        }
    }
    // ClusterAffinity.
    if !affinities.is_empty() && !affinities.iter().any(|a| cluster_matches(c, a)) {
        return Err("cluster(s) did not match the placement cluster affinity constraint".into());
    }
    // SpreadConstraint.
    for sc in &b.placement.spread_constraints {
        match sc.spread_by_field.as_str() {
            "provider" if c.provider.is_empty() => {
                return Err("cluster(s) did not have provider property".into());
            }
            "region" if c.region.is_empty() => {
                return Err("cluster(s) did not have region property".into());
            }
            "zone" if c.zones.is_empty() => {
                return Err("cluster(s) did not have zones property".into());
            }
            _ => {}
        }
    }
    // ClusterEviction.
    if b.eviction_clusters.contains(&c.name) {
        return Err("cluster(s) is in the process of eviction".into());
    }
    if !c.ready && !targeted {
        return Err("cluster(s) were not ready".into());
    }
    Ok(())
}

/// Whether every filter passes ([`filter`] without building the reason), given whether the
/// cluster matches the affinities (`affine`, see [`matching`]) and has the binding's API.
pub fn passes_with(b: &Binding, c: &Cluster, affine: bool, has_api: bool) -> bool {
    if !affine {
        return false;
    }
    let targeted = b.targets(&c.name);
    if !targeted {
        if !has_api {
            return false;
        }
        for taint in &c.taints {
            if matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
                && !b
                    .placement
                    .cluster_tolerations
                    .iter()
                    .any(|t| tolerates(t, taint))
            {
                return false;
            }
        }
    }
    for sc in &b.placement.spread_constraints {
        let missing = match sc.spread_by_field.as_str() {
            "provider" => c.provider.is_empty(),
            "region" => c.region.is_empty(),
            "zone" => c.zones.is_empty(),
            _ => false,
        };
        if missing {
            return false;
        }
    }
    !b.eviction_clusters.contains(&c.name) && (c.ready || targeted)
}

/// ClusterLocality.
pub fn score(b: &Binding, c: &Cluster) -> i64 {
    if !b.clusters.is_empty() && b.targets(&c.name) {
        MAX_CLUSTER_SCORE
    } else {
        0
    }
}

/// Karmada's `ClusterMatches`: not excluded, the label selector, the field selector
/// (provider, region, zone), and the cluster names when given.
pub fn cluster_matches(c: &Cluster, a: &ClusterAffinity) -> bool {
    if a.exclude_clusters.contains(&c.name) {
        return false;
    }
    if let Some(s) = &a.label_selector
        && !label_selector_matches(s, &c.labels)
    {
        return false;
    }
    if let Some(f) = &a.field_selector {
        for e in &f.match_expressions {
            let values = e.values.as_deref().unwrap_or(&[]);
            let ok = if e.key == "zone" {
                match e.operator.as_str() {
                    "In" => c.zones.iter().any(|z| values.contains(z)),
                    "NotIn" => !c.zones.iter().any(|z| values.contains(z)),
                    "Exists" => !c.zones.is_empty(),
                    "DoesNotExist" => c.zones.is_empty(),
                    _ => false,
                }
            } else {
                let field = match e.key.as_str() {
                    "provider" => &c.provider,
                    "region" => &c.region,
                    _ => return false,
                };
                let value = (!field.is_empty()).then_some(field.as_str());
                requirement_matches(&e.operator, values, value)
            };
            if !ok {
                return false;
            }
        }
    }
    a.cluster_names.is_empty() || a.cluster_names.contains(&c.name)
}

/// Whether every affinity of the list names its clusters: only those can match.
pub fn names_clusters(affinities: &[ClusterAffinity]) -> bool {
    affinities.iter().all(|a| !a.cluster_names.is_empty())
}

/// Which of `clusters` (sorted by name) match any of `affinities`, by index. A list that
/// [names its clusters](names_clusters) is checked on those alone.
pub fn matching(clusters: &[Cluster], affinities: &[ClusterAffinity]) -> Vec<bool> {
    if !names_clusters(affinities) {
        return clusters
            .iter()
            .map(|c| affinities.iter().any(|a| cluster_matches(c, a)))
            .collect();
    }
    let mut mask = vec![false; clusters.len()];
    for a in affinities {
        for name in &a.cluster_names {
            if let Ok(c) = clusters.binary_search_by(|c| c.name.as_str().cmp(name))
                && cluster_matches(&clusters[c], a)
            {
                mask[c] = true;
            }
        }
    }
    mask
}

fn requirement_matches(operator: &str, values: &[String], value: Option<&str>) -> bool {
    match operator {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => false,
    }
}

pub fn label_selector_matches(s: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    for (k, v) in s.match_labels.iter().flatten() {
        if labels.get(k) != Some(v) {
            return false;
        }
    }
    for e in s.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or(&[]);
        if !requirement_matches(&e.operator, values, labels.get(&e.key).map(String::as_str)) {
            return false;
        }
    }
    true
}

/// Karmada's FitError message: `0/N clusters are available: <count reason>, ...` with the
/// "count reason" strings sorted.
pub fn fit_error(num_clusters: usize, reasons: &[String]) -> String {
    if num_clusters == 0 || reasons.is_empty() {
        return format!("0/{num_clusters} clusters are available: no cluster exists.");
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reasons {
        *counts.entry(r).or_default() += 1;
    }
    let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    format!(
        "0/{num_clusters} clusters are available: {}.",
        parts.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_error_counts_and_sorts_reasons() {
        let reasons = vec![
            "cluster(s) did not have the API resource".to_string(),
            "cluster(s) had untolerated taint {a:NoSchedule}".to_string(),
            "cluster(s) did not have the API resource".to_string(),
        ];
        assert_eq!(
            fit_error(3, &reasons),
            "0/3 clusters are available: 1 cluster(s) had untolerated taint {a:NoSchedule}, \
             2 cluster(s) did not have the API resource."
        );
        assert_eq!(
            fit_error(0, &[]),
            "0/0 clusters are available: no cluster exists."
        );
    }
}
