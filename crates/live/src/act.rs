//! Carrying a pass's decisions out through the API server, as kube-scheduler does:
//!
//! - preemption: each victim gets the `DisruptionTarget` condition and is deleted; the pods
//!   placed where victims are leaving are not bound yet but nominated (`nominatedNodeName`),
//!   and a later pass binds them once the victims are gone (their node is tried first);
//! - DRA: before a pod is bound, each claim it needs is allocated (`status.allocation`, the
//!   `resource.kubernetes.io/delete-protection` finalizer) and reserved for it
//!   (`status.reservedFor`); a claim from a template that no controller has made yet is
//!   created as kube-controller-manager's resourceclaim controller would (named
//!   `<pod>-<claim>`, owned by the pod, recorded in `status.resourceClaimStatuses`);
//! - binding through the `pods/binding` subresource, at most `concurrency` at once; a gang's
//!   pods only after its group cycle committed, all in the same pass;
//! - `PodScheduled=False` (reason `Unschedulable`, kube-scheduler's message) for pods that
//!   fit nowhere, PodGroup `PodGroupInitiallyScheduled` conditions, and Events
//!   (`Scheduled`, `FailedScheduling`, `Preempted`).
//!
//! A write the API server refuses undoes what this pass did for that pod (its claims'
//! reservations and allocations) and is reported; nothing else changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Client, Resource, ResourceExt};
use lockstep_engine::ClaimDevices;
use serde_json::{Value, json};

use crate::cache::{Cache, Caches};
use crate::cycle::{Assumed, Pass};
use crate::metrics::{Metrics, ResultLabel};

/// The finalizer an allocated claim carries (kube's `resourceapi.Finalizer`).
const CLAIM_FINALIZER: &str = "resource.kubernetes.io/delete-protection";

/// A binding's result: the claims' statuses as written, or why it was refused.
type BindResult = Result<BTreeMap<String, Value>, BindError>;

/// Why a binding was not made.
struct BindError {
    message: String,
    /// The pod was deleted or bound by someone else meanwhile: nothing is reported on
    /// it (the watch shows where it went), as kube-scheduler leaves such a pod alone.
    settled: bool,
}

impl From<String> for BindError {
    fn from(message: String) -> BindError {
        BindError {
            message,
            settled: false,
        }
    }
}

/// What a pass's writes came to.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Pods bound: `namespace/name` -> node.
    pub bound: BTreeMap<String, String>,
    /// Pods that fit nowhere (they back off).
    pub unschedulable: BTreeSet<String>,
    /// Pods nominated to a node their victims are leaving.
    pub nominated: BTreeSet<String>,
    /// Writes the API server refused: pod -> message.
    pub failed: BTreeMap<String, String>,
}

/// Writes decisions for one scheduler name.
pub struct Writer {
    pub client: Client,
    pub events: crate::events::Events,
    pub scheduler_name: String,
    pub concurrency: usize,
    pub metrics: Arc<Metrics>,
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": now()})
}

/// A pod's current condition of `type_`, as `(status, reason, message)`.
fn pod_condition(pod: &Pod, type_: &str) -> Option<(String, String, String)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

impl Writer {
    /// Queues an event (written beside the scheduling work; see [`crate::events`]).
    async fn event(&self, object: ObjectReference, type_: EventType, reason: &str, note: String) {
        let ev = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: "Scheduling".into(),
            secondary: None,
        };
        if !self.events.send(object, ev) {
            self.metrics.dropped_events.inc();
        }
    }

    /// A Warning event on an object lockstep cannot read (named `Kind namespace/name` or
    /// `Kind name`), saying why; the pods that need it stay pending.
    pub async fn unreadable(&self, object: &str, why: &str) {
        let Some((kind, rest)) = object.split_once(' ') else {
            return;
        };
        let (namespace, name) = match rest.split_once('/') {
            Some((ns, name)) => (Some(ns.to_string()), name.to_string()),
            None => (None, rest.to_string()),
        };
        let reference = ObjectReference {
            kind: Some(kind.to_string()),
            namespace,
            name: Some(name),
            ..ObjectReference::default()
        };
        self.event(
            reference,
            EventType::Warning,
            "FailedScheduling",
            format!(
                "{}: this object cannot be read, so the pods that need it are not scheduled: {why}",
                self.scheduler_name
            ),
        )
        .await;
    }

    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// Carries out `pass`. `assumed` gains the bindings and allocations made and loses those
    /// the API server refused.
    pub async fn apply(&self, pass: &Pass, caches: &Caches, assumed: &mut Assumed) -> Outcome {
        let cluster = &pass.cluster;
        let d = &pass.decisions;
        let mut out = Outcome::default();
        // Pods are looked up in the cache by key: a pass costs its decisions, not the
        // cluster's size.
        let cached = &caches.pods;

        // Nodes victims are leaving, and the units (a pod, or a group of pods) placed there.
        let leaving: BTreeSet<usize> = d.evictions.iter().map(|e| e.node.index()).collect();
        let unit_of = |p: lockstep_model::PodId| {
            let pod = &cluster.pods[p.index()];
            match &pod.pod_group {
                Some(g) => format!("group {}/{g}", pod.namespace),
                None => format!("pod {}", pod.key()),
            }
        };
        let waiting_units: BTreeSet<String> = d
            .bindings
            .iter()
            .filter(|(_, n)| leaving.contains(&n.index()))
            .map(|(p, _)| unit_of(*p))
            .collect();

        // Preemption: victims first.
        for e in &d.evictions {
            let victim = cluster.pods[e.pod.index()].key();
            let node = cluster.nodes[e.node.index()].name.clone();
            if let Err(err) = self.evict(&victim, &e.preemptor, &node, cached).await {
                tracing::warn!("evicting {victim}: {err}");
            } else {
                self.metrics.preemption_victims.inc();
            }
        }

        // Placements: nominated where victims are leaving, bound elsewhere.
        let mut binds = Vec::new();
        for (p, n) in &d.bindings {
            let pod_key = cluster.pods[p.index()].key();
            let node = cluster.nodes[n.index()].name.clone();
            if waiting_units.contains(&unit_of(*p)) {
                if let Err(err) = self.nominate(&pod_key, &node).await {
                    tracing::warn!("nominating {pod_key} to {node}: {err}");
                }
                out.nominated.insert(pod_key);
                continue;
            }
            let claims: Vec<&ClaimDevices> = d.allocations.iter().filter(|a| a.pod == *p).collect();
            binds.push((pod_key, node, claims));
        }
        let mut writes = Vec::with_capacity(binds.len());
        for (pod_key, node, claims) in binds {
            writes.push(async move {
                let r = self.bind(&pod_key, &node, &claims, cached, caches).await;
                (pod_key, node, r)
            });
        }
        let results: Vec<(String, String, BindResult)> = futures::stream::iter(writes)
            .buffer_unordered(self.concurrency.max(1))
            .collect()
            .await;
        for (pod_key, node, r) in results {
            match r {
                Ok(claims) => {
                    assumed.bound.insert(pod_key.clone(), node.clone());
                    assumed.claims.extend(claims);
                    self.metrics
                        .attempts
                        .get_or_create(&ResultLabel {
                            result: "scheduled",
                        })
                        .inc();
                    let pod = cached.get(&pod_key);
                    if let Some(created) = pod
                        .as_deref()
                        .and_then(|p| p.metadata.creation_timestamp.as_ref())
                    {
                        let secs = (k8s_openapi::jiff::Timestamp::now() - created.0)
                            .total(k8s_openapi::jiff::Unit::Second)
                            .unwrap_or(0.0);
                        self.metrics.e2e_latency.observe(secs.max(0.0));
                    }
                    out.bound.insert(pod_key, node);
                }
                Err(BindError { message, settled }) => {
                    tracing::warn!("binding {pod_key} to {node}: {message}");
                    self.metrics.bind_errors.inc();
                    self.metrics
                        .attempts
                        .get_or_create(&ResultLabel { result: "error" })
                        .inc();
                    // As kube-scheduler: the pod says why with PodScheduled=False, reason
                    // SchedulerError, and a FailedScheduling event, unless it is gone or
                    // bound by someone else.
                    if !settled
                        && let Some(pod) = cached.get(&pod_key)
                        && let Err(err) = self.not_scheduled(&pod, "SchedulerError", &message).await
                    {
                        tracing::warn!("writing PodScheduled of {pod_key}: {err}");
                    }
                    out.failed.insert(pod_key, message);
                }
            }
        }

        // Pods that fit nowhere.
        for (p, message) in &d.unschedulable {
            let pod_key = cluster.pods[p.index()].key();
            self.metrics
                .attempts
                .get_or_create(&ResultLabel {
                    result: "unschedulable",
                })
                .inc();
            if let Some(pod) = cached.get(&pod_key)
                && let Err(err) = self.not_scheduled(&pod, "Unschedulable", message).await
            {
                tracing::warn!("writing PodScheduled of {pod_key}: {err}");
            }
            out.unschedulable.insert(pod_key);
        }

        // PodGroup conditions.
        for g in &d.pod_groups {
            if let Err(err) = self.pod_group_condition(g, caches).await {
                tracing::warn!("writing the condition of PodGroup {}: {err}", g.name);
            }
        }
        out
    }

    /// Marks `victim` with `DisruptionTarget` and deletes it (its grace period applies).
    async fn evict(
        &self,
        victim: &str,
        preemptor: &str,
        node: &str,
        cached: &Cache<Pod>,
    ) -> Result<(), kube::Error> {
        let (ns, name) = split(victim);
        let api = self.pods(ns);
        let message = format!(
            "{}: preempting to accommodate a higher priority pod",
            self.scheduler_name
        );
        let patch = json!({"status": {"conditions": [
            condition("DisruptionTarget", "True", "PreemptionByScheduler", &message)]}});
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(e),
        }
        if let Some(pod) = cached.get(victim) {
            self.event(
                pod.object_ref(&()),
                EventType::Normal,
                "Preempted",
                format!("Preempted by {preemptor} on node {node}"),
            )
            .await;
        }
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn nominate(&self, pod: &str, node: &str) -> Result<(), kube::Error> {
        let (ns, name) = split(pod);
        let patch = json!({"status": {"nominatedNodeName": node}});
        self.pods(ns)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }

    /// Allocates and reserves `claims` for `pod`, then binds it. Returns the claims'
    /// statuses as written; on failure, undoes them.
    async fn bind(
        &self,
        pod_key: &str,
        node: &str,
        claims: &[&ClaimDevices],
        cached: &Cache<Pod>,
        caches: &Caches,
    ) -> BindResult {
        let (ns, name) = split(pod_key);
        let pod = cached.get(pod_key).ok_or_else(|| BindError {
            message: format!("pod {pod_key} is no longer in the cache"),
            settled: true,
        })?;
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut written: BTreeMap<String, (Value, Option<Value>)> = BTreeMap::new();
        for c in claims {
            match self.reserve(&pod, &uid, node, c, caches).await {
                Ok((claim_key, status, previous)) => {
                    written.insert(claim_key, (status, previous));
                }
                Err(e) => {
                    self.undo(&written).await;
                    return Err(e.into());
                }
            }
        }
        let binding = json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
        let r: Result<Value, kube::Error> = self
            .pods(ns)
            .create_subresource("binding", name, &PostParams::default(), &binding)
            .await;
        match r {
            Ok(_) => {
                self.event(
                    pod.object_ref(&()),
                    EventType::Normal,
                    "Scheduled",
                    format!("Successfully assigned {ns}/{name} to {node}"),
                )
                .await;
                Ok(written.into_iter().map(|(k, (s, _))| (k, s)).collect())
            }
            Err(e) => {
                self.undo(&written).await;
                let settled = matches!(&e, kube::Error::Api(s) if s.code == 404 || s.code == 409);
                Err(BindError {
                    message: format!("binding rejected: {e}"),
                    settled,
                })
            }
        }
    }

    /// The claim `c` names: an existing claim, or one made from the pod's template now.
    async fn claim_for(
        &self,
        pod: &Pod,
        uid: &str,
        c: &ClaimDevices,
        caches: &Caches,
    ) -> Result<ResourceClaim, String> {
        let (ns, claim_name) = split(&c.claim);
        if let Some(existing) = caches.resource_claims.get(&c.claim) {
            return Ok((*existing).clone());
        }
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), ns);
        if let Ok(existing) = api.get(claim_name).await {
            return Ok(existing);
        }
        // A claim from a template: `<pod>-<claim>`.
        let pod_name = pod.name_any();
        let spec = pod.spec.as_ref().ok_or("pod without spec")?;
        let pod_claim = spec
            .resource_claims
            .iter()
            .flatten()
            .find(|pc| format!("{pod_name}-{}", pc.name) == claim_name)
            .ok_or_else(|| format!("claim {} is not one of the pod's claims", c.claim))?;
        let template_name = pod_claim
            .resource_claim_template_name
            .clone()
            .ok_or_else(|| format!("claim {} does not exist", c.claim))?;
        let template_spec = caches
            .resource_claim_templates
            .get(&format!("{ns}/{template_name}"))
            .and_then(|t| t.spec.clone())
            .ok_or_else(|| format!("ResourceClaimTemplate {ns}/{template_name} does not exist"))?;
        let claim: ResourceClaim = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {
                "name": claim_name, "namespace": ns,
                "annotations": {"resource.kubernetes.io/pod-claim-name": pod_claim.name},
                "labels": template_spec.metadata.as_ref().and_then(|m| m.labels.clone()),
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name,
                    "uid": uid, "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": template_spec.spec,
        }))
        .map_err(|e| e.to_string())?;
        let made = match api.create(&PostParams::default(), &claim).await {
            Ok(made) => made,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                api.get(claim_name).await.map_err(|e| e.to_string())?
            }
            Err(e) => return Err(format!("creating claim {}: {e}", c.claim)),
        };
        let patch = json!({"status": {"resourceClaimStatuses": [
            {"name": pod_claim.name, "resourceClaimName": claim_name}]}});
        self.pods(ns)
            .patch_status(
                &pod_name,
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
            .map_err(|e| format!("recording claim {} in the pod's status: {e}", c.claim))?;
        Ok(made)
    }

    /// Allocates (when not yet allocated) and reserves one claim for the pod. Returns the
    /// claim's key, its status as written, and its status before.
    async fn reserve(
        &self,
        pod: &Pod,
        uid: &str,
        node: &str,
        c: &ClaimDevices,
        caches: &Caches,
    ) -> Result<(String, Value, Option<Value>), String> {
        let claim = self.claim_for(pod, uid, c, caches).await?;
        let (ns, name) = split(&c.claim);
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), ns);
        let previous = claim
            .status
            .as_ref()
            .map(|s| serde_json::to_value(s).unwrap_or(Value::Null));
        let mut status = previous.clone().unwrap_or_else(|| json!({}));
        if status.get("allocation").is_none_or(Value::is_null) {
            let finalizers = claim.finalizers();
            if !finalizers.iter().any(|f| f == CLAIM_FINALIZER) {
                let mut all = finalizers.to_vec();
                all.push(CLAIM_FINALIZER.into());
                let patch = json!({"metadata": {"finalizers": all}});
                api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| format!("adding the finalizer to claim {}: {e}", c.claim))?;
            }
            let results: Vec<Value> = c
                .devices
                .iter()
                .map(|d| {
                    json!({"request": d.request, "driver": d.driver, "pool": d.pool,
                                "device": d.device})
                })
                .collect();
            status["allocation"] = json!({
                "devices": {"results": results},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
                "allocationTimestamp": now(),
            });
        }
        let mut reserved: Vec<Value> = status
            .get("reservedFor")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !reserved.iter().any(|r| r["uid"] == uid) {
            reserved.push(json!({"resource": "pods", "name": pod.name_any(), "uid": uid}));
        }
        status["reservedFor"] = Value::Array(reserved);
        let patch = json!({"status": status});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("allocating claim {}: {e}", c.claim))?;
        Ok((c.claim.clone(), status, previous))
    }

    /// Puts claims back as they were before this pass.
    async fn undo(&self, written: &BTreeMap<String, (Value, Option<Value>)>) {
        for (claim, (_, previous)) in written {
            let (ns, name) = split(claim);
            let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), ns);
            let status = previous.clone().unwrap_or_else(|| json!({}));
            let patch = json!({"status": {
                "allocation": status.get("allocation").cloned().unwrap_or(Value::Null),
                "reservedFor": status.get("reservedFor").cloned().unwrap_or(Value::Null)}});
            if let Err(e) = api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::warn!("undoing the allocation of claim {claim}: {e}");
            }
        }
    }

    /// `PodScheduled=False` with `reason` (`Unschedulable`, or `SchedulerError` for a
    /// refused binding) and the message (written only when it changed), and a
    /// `FailedScheduling` event.
    async fn not_scheduled(
        &self,
        pod: &Pod,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let current = pod_condition(pod, "PodScheduled");
        if current
            .as_ref()
            .is_some_and(|(s, r, m)| s == "False" && r == reason && m == message)
        {
            return Ok(());
        }
        let patch = json!({"status": {"conditions": [
            condition("PodScheduled", "False", reason, message)]}});
        self.pods(&pod.namespace().unwrap_or_default())
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await?;
        self.event(
            pod.object_ref(&()),
            EventType::Warning,
            "FailedScheduling",
            message.to_string(),
        )
        .await;
        Ok(())
    }

    /// The PodGroup's `PodGroupInitiallyScheduled` condition as kube-scheduler 1.37 writes
    /// it (`True`/`Scheduled` once placed; `False`/`Unschedulable` with the message before).
    async fn pod_group_condition(
        &self,
        g: &lockstep_engine::GroupStatus,
        caches: &Caches,
    ) -> Result<(), kube::Error> {
        let Some(group) = caches.pod_groups.get(&g.name) else {
            return Ok(());
        };
        let conditions = group
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let current = conditions
            .iter()
            .find(|c| c.type_ == "PodGroupInitiallyScheduled");
        if current.is_some_and(|c| c.status == "True") {
            return Ok(()); // Initially scheduled stays true.
        }
        let (status, reason) = if g.scheduled {
            ("True", "Scheduled")
        } else {
            ("False", "Unschedulable")
        };
        if current.is_some_and(|c| c.status == status && c.message == g.message) {
            return Ok(());
        }
        let mut list: Vec<Value> = conditions
            .iter()
            .filter(|c| c.type_ != "PodGroupInitiallyScheduled")
            .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
            .collect();
        list.push(condition(
            "PodGroupInitiallyScheduled",
            status,
            reason,
            &g.message,
        ));
        let (ns, name) = split(&g.name);
        let api: Api<PodGroup> = Api::namespaced(self.client.clone(), ns);
        let patch = json!({"status": {"conditions": list}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }
}
