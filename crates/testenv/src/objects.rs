//! Loading Kubernetes objects given as YAML or JSON into the API server, in the
//! order their controllers and kubelets would have made them exist.

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::{ApiCapabilities, ApiResource, Discovery, Scope};
use serde_json::Value;

/// Why an object could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("document {index}: {message}")]
    Parse { index: usize, message: String },
    #[error("{kind} {name}: the API server does not serve {api_version}/{kind}")]
    Unknown {
        kind: String,
        name: String,
        api_version: String,
    },
    #[error("creating {kind} {name}: {message}")]
    Create {
        kind: String,
        name: String,
        message: String,
    },
    #[error("discovery: {0}")]
    Discovery(String),
}

/// Splits YAML text (several documents, `kind: List` allowed) into objects.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, LoadError> {
    let mut out = Vec::new();
    for (index, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value: Value = serde::Deserialize::deserialize(doc).map_err(|e| LoadError::Parse {
            index: index + 1,
            message: e.to_string(),
        })?;
        match value {
            Value::Null => {}
            Value::Object(ref o) if o.get("kind").and_then(Value::as_str) == Some("List") => {
                if let Some(Value::Array(items)) = o.get("items") {
                    out.extend(items.iter().cloned());
                }
            }
            v => out.push(v),
        }
    }
    Ok(out)
}

/// The order objects are created in: what others refer to first, running pods
/// before pending ones.
fn creation_rank(object: &Value) -> u8 {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    match kind {
        "Namespace" => 0,
        "PriorityClass" | "DeviceClass" | "RuntimeClass" => 1,
        "Node" => 2,
        "ResourceSlice" => 3,
        "Workload" | "CompositePodGroup" => 4,
        "PodGroup" => 5,
        "ResourceClaimTemplate" | "ResourceClaim" | "PodDisruptionBudget" => 6,
        "Pod" if object.pointer("/spec/nodeName").is_some() => 7,
        "Pod" => 8,
        _ => 6,
    }
}

/// The scheduling gate a pending pod is created behind until its status is written.
pub const STATUS_GATE: &str = "lockstep.dev/status-pending";

/// Kinds whose status the tests give and the API server ignores on create.
fn status_is_written(kind: &str) -> bool {
    matches!(
        kind,
        "Pod" | "ResourceClaim" | "PodGroup" | "CompositePodGroup"
    )
}

/// Creates objects in an API server, resolving kinds through discovery once.
pub struct Loader {
    client: kube::Client,
    discovery: Discovery,
}

impl Loader {
    /// Runs API discovery against the server.
    pub async fn new(client: kube::Client) -> Result<Loader, LoadError> {
        let discovery = Discovery::new(client.clone())
            .run()
            .await
            .map_err(|e| LoadError::Discovery(e.to_string()))?;
        Ok(Loader { client, discovery })
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    /// Creates every object (sorted by [`creation_rank`], input order within a rank)
    /// and writes the status of pods, claims and pod groups that carry one. Objects
    /// without a namespace get `default` when they are namespaced.
    pub async fn create_all(&self, objects: &[Value]) -> Result<(), LoadError> {
        let mut order: Vec<usize> = (0..objects.len()).collect();
        order.sort_by_key(|&i| creation_rank(&objects[i]));
        for i in order {
            create_one(&self.client, &self.discovery, &objects[i]).await?;
        }
        Ok(())
    }

    /// Creates the namespaces the objects name that do not exist yet (`default`
    /// always exists).
    pub async fn create_namespaces(&self, objects: &[Value]) -> Result<(), LoadError> {
        let mut names: Vec<&str> = objects
            .iter()
            .filter_map(|o| o.pointer("/metadata/namespace").and_then(Value::as_str))
            .filter(|n| *n != "default")
            .collect();
        names.sort_unstable();
        names.dedup();
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        for name in names {
            let ns: k8s_openapi::api::core::v1::Namespace =
                serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
                    .expect("a namespace object");
            match api.create(&PostParams::default(), &ns).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    return Err(LoadError::Create {
                        kind: "Namespace".into(),
                        name: name.into(),
                        message: e.to_string(),
                    });
                }
            }
        }
        Ok(())
    }
}

impl Loader {
    /// Does what kube-controller-manager's resourceclaim controller does for a pod
    /// that names ResourceClaimTemplates: creates a ResourceClaim from each template,
    /// owned by the pod and named `<pod>-<claim>` (the controller adds a random suffix;
    /// a fixed name keeps runs reproducible), and records it in the pod's
    /// `status.resourceClaimStatuses`. Returns the claims' names.
    pub async fn create_claims_from_templates(
        &self,
        namespace: &str,
        pod_name: &str,
    ) -> Result<Vec<String>, LoadError> {
        let err = |kind: &str, name: &str, message: String| LoadError::Create {
            kind: kind.into(),
            name: name.into(),
            message,
        };
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), namespace);
        let pod = pods
            .get(pod_name)
            .await
            .map_err(|e| err("Pod", pod_name, e.to_string()))?;
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let claims = pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.clone())
            .unwrap_or_default();
        let templates: Api<k8s_openapi::api::resource::v1::ResourceClaimTemplate> =
            Api::namespaced(self.client.clone(), namespace);
        let made: Api<k8s_openapi::api::resource::v1::ResourceClaim> =
            Api::namespaced(self.client.clone(), namespace);
        let mut statuses = Vec::new();
        let mut names = Vec::new();
        for c in claims {
            let Some(template_name) = c.resource_claim_template_name.clone() else {
                continue;
            };
            let claim_name = format!("{pod_name}-{}", c.name);
            let template = match templates.get(&template_name).await {
                Ok(t) => t,
                // As the controller: no template, no claim (the pod waits for it).
                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                Err(e) => return Err(err("ResourceClaimTemplate", &template_name, e.to_string())),
            };
            let Some(spec) = template.spec else {
                continue;
            };
            let claim = serde_json::json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": claim_name,
                    "namespace": namespace,
                    "annotations": {"resource.kubernetes.io/pod-claim-name": c.name},
                    "labels": spec.metadata.as_ref().and_then(|m| m.labels.clone()),
                    "ownerReferences": [{
                        "apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": uid,
                        "controller": true, "blockOwnerDeletion": true,
                    }],
                },
                "spec": spec.spec,
            });
            let claim: k8s_openapi::api::resource::v1::ResourceClaim =
                serde_json::from_value(claim)
                    .map_err(|e| err("ResourceClaim", &claim_name, e.to_string()))?;
            match made.create(&PostParams::default(), &claim).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(err("ResourceClaim", &claim_name, e.to_string())),
            }
            statuses.push(serde_json::json!({"name": c.name, "resourceClaimName": claim_name}));
            names.push(claim_name);
        }
        if !statuses.is_empty() {
            let patch = serde_json::json!({"status": {"resourceClaimStatuses": statuses}});
            pods.patch_status(pod_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| {
                    err(
                        "Pod",
                        pod_name,
                        format!("writing resourceClaimStatuses: {e}"),
                    )
                })?;
        }
        Ok(names)
    }
}

/// Creates every object in the API server `client` talks to (see [`Loader::create_all`]).
pub async fn create_all(client: &kube::Client, objects: &[Value]) -> Result<(), LoadError> {
    let loader = Loader::new(client.clone()).await?;
    loader.create_namespaces(objects).await?;
    loader.create_all(objects).await
}

fn resolve(
    discovery: &Discovery,
    object: &Value,
) -> Result<(ApiResource, ApiCapabilities, String, String), LoadError> {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.clone()),
    };
    let gvk = kube::api::GroupVersionKind::gvk(&group, &version, &kind);
    let (ar, caps) = discovery
        .resolve_gvk(&gvk)
        .ok_or_else(|| LoadError::Unknown {
            kind: kind.clone(),
            name: name.clone(),
            api_version: api_version.clone(),
        })?;
    Ok((ar, caps, kind, name))
}

async fn create_one(
    client: &kube::Client,
    discovery: &Discovery,
    object: &Value,
) -> Result<(), LoadError> {
    let (ar, caps, kind, name) = resolve(discovery, object)?;
    let mut object = object.clone();
    let namespace = match caps.scope {
        Scope::Namespaced => Some(
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default")
                .to_string(),
        ),
        Scope::Cluster => None,
    };
    if let (Some(ns), Some(meta)) = (&namespace, object.get_mut("metadata")) {
        meta["namespace"] = Value::String(ns.clone());
    }
    let err = |message: String| LoadError::Create {
        kind: kind.clone(),
        name: name.clone(),
        message,
    };
    let api: Api<DynamicObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let status = object.get("status").cloned();
    // A pending pod whose status matters (e.g. status.nominatedNodeName) is created
    // behind a scheduling gate, so no scheduler takes it before its status is written.
    let gated = kind == "Pod"
        && status.is_some()
        && object.pointer("/spec/nodeName").is_none()
        && object.pointer("/spec/schedulingGates").is_none();
    if gated {
        object["spec"]["schedulingGates"] = serde_json::json!([{"name": STATUS_GATE}]);
    }
    let dynamic: DynamicObject =
        serde_json::from_value(object).map_err(|e| err(format!("not an object: {e}")))?;
    match api.create(&PostParams::default(), &dynamic).await {
        Ok(_) => {}
        // Namespaces outlive the objects in them (no namespace controller deletes them):
        // an existing one gets the labels given now.
        Err(kube::Error::Api(s)) if s.code == 409 && kind == "Namespace" => {
            let labels = dynamic.metadata.labels.clone().unwrap_or_default();
            let patch = serde_json::json!({"metadata": {"labels": labels}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| err(format!("updating labels: {e}")))?;
            return Ok(());
        }
        Err(e) => return Err(err(e.to_string())),
    }
    if let Some(mut status) = status
        && status_is_written(&kind)
    {
        // An allocator stamps the allocation's time; kube-scheduler adds the stamp to an
        // allocation without one when it reserves the claim, which the API server then
        // refuses as a change of an immutable field.
        if kind == "ResourceClaim"
            && let Some(allocation) = status.get_mut("allocation").and_then(Value::as_object_mut)
        {
            allocation
                .entry("allocationTimestamp")
                .or_insert_with(|| serde_json::json!(now_rfc3339()));
        }
        let patch = serde_json::json!({ "status": status });
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| err(format!("writing status: {e}")))?;
    }
    if gated {
        let patch = serde_json::json!({"spec": {"schedulingGates": null}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| err(format!("removing the scheduling gate: {e}")))?;
    }
    Ok(())
}

/// The current time as the API server writes times (RFC 3339, whole seconds, UTC).
fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into())
}
