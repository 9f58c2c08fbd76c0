//! A client of a member's scheduler estimator, as karmada-scheduler is one: the request is
//! built the way Karmada builds it (requests as protobuf-encoded Quantities, tolerations and
//! the node affinity as protobuf-encoded Kubernetes messages), and an answer that does not
//! come within the timeout, or an error, is no answer (Karmada's UnauthenticReplica).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::{NodeSelector, Toleration};
use prost::Message;

use crate::proto::service::estimator_client::EstimatorClient;
use crate::proto::{k8s, pb, quantity};

/// What a replica needs, in Kubernetes' terms.
#[derive(Debug, Clone, Default)]
pub struct Replica {
    pub namespace: String,
    pub priority_class_name: String,
    /// Resource name -> quantity as Kubernetes writes it (`500m`, `2Gi`).
    pub requests: BTreeMap<String, String>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
    pub node_affinity: Option<NodeSelector>,
    /// ResourceClaimTemplate names (a claim per replica).
    pub claim_templates: Vec<String>,
    /// ResourceClaim names (shared by every replica).
    pub shared_claims: Vec<String>,
}

impl Replica {
    /// The `ReplicaRequirements` message Karmada sends for it.
    pub fn requirements(&self) -> pb::ReplicaRequirements {
        pb::ReplicaRequirements {
            node_claim: self.node_claim(),
            namespace: self.namespace.clone(),
            priority_class_name: self.priority_class_name.clone(),
            resource_request_bytes: self.resource_request_bytes(),
            resource_claim_refs: self.resource_claim_refs(),
        }
    }

    /// The `ComponentReplicaRequirements` message of a component whose replicas are this.
    pub fn component_requirements(&self) -> pb::ComponentReplicaRequirements {
        pb::ComponentReplicaRequirements {
            node_claim: self.node_claim(),
            priority_class_name: self.priority_class_name.clone(),
            resource_request_bytes: self.resource_request_bytes(),
            resource_claim_refs: self.resource_claim_refs(),
        }
    }

    fn node_claim(&self) -> Option<pb::NodeClaim> {
        (!self.node_selector.is_empty()
            || !self.tolerations.is_empty()
            || self.node_affinity.is_some())
        .then(|| pb::NodeClaim {
            node_selector: self
                .node_selector
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            node_affinity_bytes: self
                .node_affinity
                .as_ref()
                .map(|a| node_selector(a).encode_to_vec())
                .unwrap_or_default(),
            tolerations_bytes: self
                .tolerations
                .iter()
                .map(|t| toleration(t).encode_to_vec())
                .collect(),
        })
    }

    fn resource_request_bytes(&self) -> HashMap<String, Vec<u8>> {
        self.requests
            .iter()
            .map(|(name, q)| {
                let bytes = quantity::Quantity {
                    string: Some(q.clone()),
                }
                .encode_to_vec();
                (name.clone(), bytes)
            })
            .collect()
    }

    fn resource_claim_refs(&self) -> Vec<pb::ResourceClaimReference> {
        self.claim_templates
            .iter()
            .map(|t| pb::ResourceClaimReference {
                resource_claim_template_name: t.clone(),
                resource_claim_name: String::new(),
            })
            .chain(
                self.shared_claims
                    .iter()
                    .map(|c| pb::ResourceClaimReference {
                        resource_claim_template_name: String::new(),
                        resource_claim_name: c.clone(),
                    }),
            )
            .collect()
    }
}

fn node_selector(s: &NodeSelector) -> k8s::NodeSelector {
    let requirement =
        |r: &k8s_openapi::api::core::v1::NodeSelectorRequirement| k8s::NodeSelectorRequirement {
            key: Some(r.key.clone()),
            operator: Some(r.operator.clone()),
            values: r.values.clone().unwrap_or_default(),
        };
    k8s::NodeSelector {
        node_selector_terms: s
            .node_selector_terms
            .iter()
            .map(|t| k8s::NodeSelectorTerm {
                match_expressions: t
                    .match_expressions
                    .iter()
                    .flatten()
                    .map(requirement)
                    .collect(),
                match_fields: t.match_fields.iter().flatten().map(requirement).collect(),
            })
            .collect(),
    }
}

fn toleration(t: &Toleration) -> k8s::Toleration {
    k8s::Toleration {
        key: t.key.clone(),
        operator: t.operator.clone(),
        value: t.value.clone(),
        effect: t.effect.clone(),
        toleration_seconds: t.toleration_seconds,
    }
}

/// A connection to one estimator, used from synchronous code.
#[derive(Debug)]
pub struct Remote {
    address: String,
    timeout: Duration,
    runtime: tokio::runtime::Runtime,
}

impl Remote {
    /// An estimator at `address` (`host:port`, or a URL). Nothing is dialled until the first
    /// question.
    pub fn new(address: &str, timeout: Duration) -> std::io::Result<Remote> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let address = if address.contains("://") {
            address.to_string()
        } else {
            format!("http://{address}")
        };
        Ok(Remote {
            address,
            timeout,
            runtime,
        })
    }

    /// `MaxAvailableReplicas` for `cluster`; `Err` says why there is no answer.
    pub fn max_available_replicas(&self, cluster: &str, replica: &Replica) -> Result<i64, String> {
        let request = pb::MaxAvailableReplicasRequest {
            cluster: cluster.to_string(),
            replica_requirements: Some(replica.requirements()),
            assumed_workloads: Vec::new(),
        };
        self.ask(|mut client| async move {
            let reply = client.max_available_replicas(request).await?;
            Ok(i64::from(reply.into_inner().max_replicas))
        })
    }

    /// `MaxAvailableComponentSets` for `cluster`: how many whole sets of `components` (name,
    /// replicas in a set, what each replica needs) fit in `namespace`; `Err` says why there
    /// is no answer.
    pub fn max_available_component_sets(
        &self,
        cluster: &str,
        namespace: &str,
        components: &[(String, i64, Replica)],
    ) -> Result<i64, String> {
        let request = pb::MaxAvailableComponentSetsRequest {
            cluster: cluster.to_string(),
            components: components
                .iter()
                .map(|(name, replicas, replica)| pb::Component {
                    name: name.clone(),
                    replica_requirements: Some(replica.component_requirements()),
                    replicas: i32::try_from(*replicas).unwrap_or(i32::MAX),
                })
                .collect(),
            namespace: namespace.to_string(),
            assumed_workloads: Vec::new(),
        };
        self.ask(|mut client| async move {
            let reply = client.max_available_component_sets(request).await?;
            Ok(i64::from(reply.into_inner().max_sets))
        })
    }

    /// `SelectVictims` for `cluster`: which of `candidates` (bindings' permanent ids, in
    /// reprieve order) must go for `replicas` replicas to fit; `Ok((feasible, victims))`, or
    /// `Err` saying why there is no answer.
    pub fn select_victims(
        &self,
        cluster: &str,
        replica: &Replica,
        replicas: i64,
        candidates: &[String],
    ) -> Result<(bool, Vec<String>), String> {
        let request = pb::SelectVictimsRequest {
            cluster: cluster.to_string(),
            preemptor_replica_requirements: Some(replica.requirements()),
            preemptor_replicas: i32::try_from(replicas).unwrap_or(i32::MAX),
            candidates: candidates
                .iter()
                .map(|id| pb::VictimCandidate {
                    binding_permanent_id: id.clone(),
                })
                .collect(),
        };
        self.ask(|mut client| async move {
            let reply = client.select_victims(request).await?.into_inner();
            Ok((
                reply.feasible,
                reply
                    .selected_victims
                    .into_iter()
                    .map(|v| v.binding_permanent_id)
                    .collect(),
            ))
        })
    }

    /// Connects and makes one call, within the timeout.
    fn ask<T, F, Fut>(&self, call: F) -> Result<T, String>
    where
        F: FnOnce(EstimatorClient<tonic::transport::Channel>) -> Fut,
        Fut: std::future::Future<Output = Result<T, tonic::Status>>,
    {
        let address = self.address.clone();
        let timeout = self.timeout;
        self.runtime.block_on(async move {
            let ask = async {
                let endpoint = tonic::transport::Endpoint::from_shared(address.clone())
                    .map_err(|e| format!("estimator address {address:?}: {e}"))?
                    .connect_timeout(timeout)
                    .timeout(timeout);
                let channel = endpoint
                    .connect()
                    .await
                    .map_err(|e| format!("estimator at {address}: cannot connect: {e}"))?;
                call(EstimatorClient::new(channel))
                    .await
                    .map_err(|e| format!("estimator at {address}: {}", e.message()))
            };
            match tokio::time::timeout(timeout, ask).await {
                Ok(answer) => answer,
                Err(_) => Err(format!(
                    "estimator at {address}: no answer within {} ms",
                    timeout.as_millis()
                )),
            }
        })
    }
}
