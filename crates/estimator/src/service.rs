//! The `Estimator` gRPC service: requests checked and decoded, answered on the member
//! cluster as it stands (a blocking task per request; one request counts at a time).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tonic::{Request, Response, Status};

use crate::member::{EstimateError, Member, Part};
use crate::metrics::{Metrics, code_name};
use crate::proto::pb;
use crate::proto::service::estimator_server;
use crate::request::{RequestError, Requirements};

/// Answers `GetUnschedulableReplicas` (live clusters only).
#[tonic::async_trait]
pub trait Unschedulable: Send + Sync + 'static {
    async fn unschedulable(
        &self,
        resource: &pb::ObjectReference,
        threshold: std::time::Duration,
    ) -> Result<u64, Status>;
}

/// What the service answers from.
pub struct State {
    /// The member cluster's name, as requests must name it.
    pub cluster: String,
    /// The member as it stands; `None` until a live cluster's caches are synced.
    member: Mutex<Option<Member>>,
    pub metrics: Arc<Metrics>,
    pub unschedulable: Option<Arc<dyn Unschedulable>>,
}

impl State {
    pub fn new(cluster: &str, member: Option<Member>) -> State {
        State {
            cluster: cluster.to_string(),
            member: Mutex::new(member),
            metrics: Arc::new(Metrics::new()),
            unschedulable: None,
        }
    }

    /// Runs `f` on the member slot under the member's lock (requests wait meanwhile).
    pub fn with_member_slot<R>(&self, f: impl FnOnce(&mut Option<Member>) -> R) -> R {
        match self.member.lock() {
            Ok(mut m) => f(&mut m),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Replaces the member (a live cluster changed).
    pub fn set_member(&self, member: Member) {
        match self.member.lock() {
            Ok(mut m) => *m = Some(member),
            Err(poisoned) => *poisoned.into_inner() = Some(member),
        }
    }

    pub fn ready(&self) -> bool {
        self.member.lock().map(|m| m.is_some()).unwrap_or(false)
    }

    fn check_cluster(&self, cluster: &str) -> Result<(), Status> {
        if cluster == self.cluster {
            Ok(())
        } else {
            Err(Status::invalid_argument(format!(
                "cluster: the request names cluster {cluster:?}, this estimator serves {:?}; \
                 send it to that cluster's estimator",
                self.cluster
            )))
        }
    }

    /// Runs `f` on the member in a blocking task.
    async fn on_member<R: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Member) -> Result<R, EstimateError> + Send + 'static,
    ) -> Result<R, Status> {
        let state = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = match state.member.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            let Some(member) = guard.as_mut() else {
                return Err(Status::unavailable(
                    "the member cluster's state is not loaded yet; retry shortly",
                ));
            };
            f(member).map_err(|e| match e {
                EstimateError::Request(RequestError(m)) => Status::invalid_argument(m),
                EstimateError::Internal(m) => Status::internal(m),
            })
        })
        .await
        .map_err(|e| Status::internal(format!("the estimate failed: {e}")))?
    }
}

fn invalid(e: RequestError) -> Status {
    Status::invalid_argument(e.0)
}

fn replicas(n: i32, place: &str) -> Result<u64, Status> {
    u64::try_from(n).map_err(|_| {
        Status::invalid_argument(format!("{place}: replicas is {n}; it must be zero or more"))
    })
}

fn clamp(n: u64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn components(list: &[pb::Component], namespace: &str, place: &str) -> Result<Vec<Part>, Status> {
    list.iter()
        .enumerate()
        .map(|(i, c)| {
            let here = format!("{place}[{i}] ({:?})", c.name);
            Ok(Part {
                requirements: Requirements::from_component(
                    c.replica_requirements.as_ref(),
                    namespace,
                    &format!("{here}.replicaRequirements"),
                )
                .map_err(invalid)?,
                replicas: replicas(c.replicas, &here)?,
            })
        })
        .collect()
}

fn assumed(list: &[pb::AssumedWorkload]) -> Result<Vec<Part>, Status> {
    let mut out = Vec::new();
    for (i, w) in list.iter().enumerate() {
        let ns = if w.namespace.is_empty() {
            "default"
        } else {
            &w.namespace
        };
        out.extend(components(
            &w.components,
            ns,
            &format!("assumedWorkloads[{i}].components"),
        )?);
    }
    Ok(out)
}

/// The tonic service.
#[derive(Clone)]
pub struct Service {
    pub state: Arc<State>,
}

impl Service {
    async fn timed<R>(
        &self,
        method: &'static str,
        f: impl Future<Output = Result<R, Status>>,
    ) -> Result<Response<R>, Status> {
        let start = Instant::now();
        let result = f.await;
        let code = match &result {
            Ok(_) => tonic::Code::Ok,
            Err(s) => s.code(),
        };
        self.state
            .metrics
            .observe(method, code_name(code), start.elapsed());
        if let Err(s) = &result {
            tracing::info!(method, code = ?s.code(), "{}", s.message());
        }
        result.map(Response::new)
    }
}

#[tonic::async_trait]
impl estimator_server::Estimator for Service {
    async fn max_available_replicas(
        &self,
        request: Request<pb::MaxAvailableReplicasRequest>,
    ) -> Result<Response<pb::MaxAvailableReplicasResponse>, Status> {
        let r = request.into_inner();
        self.timed("MaxAvailableReplicas", async {
            self.state.check_cluster(&r.cluster)?;
            let req =
                Requirements::from_replica(r.replica_requirements.as_ref(), "replicaRequirements")
                    .map_err(invalid)?;
            let assumed = assumed(&r.assumed_workloads)?;
            let n = self
                .state
                .on_member(move |m| m.max_replicas(&req, &assumed))
                .await?;
            Ok(pb::MaxAvailableReplicasResponse {
                max_replicas: clamp(n),
            })
        })
        .await
    }

    async fn max_available_component_sets(
        &self,
        request: Request<pb::MaxAvailableComponentSetsRequest>,
    ) -> Result<Response<pb::MaxAvailableComponentSetsResponse>, Status> {
        let r = request.into_inner();
        self.timed("MaxAvailableComponentSets", async {
            self.state.check_cluster(&r.cluster)?;
            let ns = if r.namespace.is_empty() {
                "default"
            } else {
                &r.namespace
            };
            let parts = components(&r.components, ns, "components")?;
            if parts.iter().all(|p| p.replicas == 0) {
                return Err(Status::invalid_argument(
                    "components: no component has replicas; a set needs at least one replica",
                ));
            }
            let assumed = assumed(&r.assumed_workloads)?;
            let n = self
                .state
                .on_member(move |m| m.max_sets(&parts, &assumed))
                .await?;
            Ok(pb::MaxAvailableComponentSetsResponse { max_sets: clamp(n) })
        })
        .await
    }

    async fn get_unschedulable_replicas(
        &self,
        request: Request<pb::UnschedulableReplicasRequest>,
    ) -> Result<Response<pb::UnschedulableReplicasResponse>, Status> {
        let r = request.into_inner();
        self.timed("GetUnschedulableReplicas", async {
            self.state.check_cluster(&r.cluster)?;
            let Some(resource) = r.resource.as_ref() else {
                return Err(Status::invalid_argument(
                    "resource: missing; name the workload (apiVersion, kind, namespace, name)",
                ));
            };
            let Some(source) = &self.state.unschedulable else {
                return Err(Status::failed_precondition(
                    "GetUnschedulableReplicas needs a live cluster: start the estimator with \
                     --kubeconfig",
                ));
            };
            let threshold = std::time::Duration::from_nanos(
                u64::try_from(r.unschedulable_threshold).unwrap_or(0),
            );
            let n = source.unschedulable(resource, threshold).await?;
            Ok(pb::UnschedulableReplicasResponse {
                unschedulable_replicas: clamp(n),
            })
        })
        .await
    }

    async fn select_victims(
        &self,
        request: Request<pb::SelectVictimsRequest>,
    ) -> Result<Response<pb::SelectVictimsResponse>, Status> {
        let r = request.into_inner();
        self.timed("SelectVictims", async {
            self.state.check_cluster(&r.cluster)?;
            let req = Requirements::from_replica(
                r.preemptor_replica_requirements.as_ref(),
                "preemptorReplicaRequirements",
            )
            .map_err(invalid)?;
            let n = replicas(r.preemptor_replicas, "preemptorReplicas")?;
            let mut ids = Vec::new();
            for (i, c) in r.candidates.iter().enumerate() {
                if c.binding_permanent_id.is_empty() {
                    return Err(Status::invalid_argument(format!(
                        "candidates[{i}].bindingPermanentID: empty; name the binding's \
                         permanent id"
                    )));
                }
                ids.push(c.binding_permanent_id.clone());
            }
            let (feasible, victims) = self
                .state
                .on_member(move |m| m.select_victims(&req, n, &ids))
                .await?;
            Ok(pb::SelectVictimsResponse {
                feasible,
                selected_victims: victims
                    .into_iter()
                    .map(|binding_permanent_id| pb::VictimCandidate {
                        binding_permanent_id,
                    })
                    .collect(),
            })
        })
        .await
    }
}
