//! Karmada's request messages into pod shapes: the replica requirements of a request
//! (resource requests as protobuf-encoded `resource.Quantity` values, required node
//! affinity as a protobuf-encoded `NodeSelector`, tolerations as protobuf-encoded
//! `Toleration`s, the DRA claim references) decoded exactly and written as the Pod a
//! replica would be, so that lockstep's manifest conversion reads it like any other pod.

use std::collections::{BTreeMap, HashMap};

use prost::Message;
use serde_json::{Value, json};

use crate::proto::k8s;
use crate::proto::pb;
use crate::proto::quantity::Quantity;

/// A request that cannot be answered as sent: the gRPC InvalidArgument message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(pub String);

fn bad(message: String) -> RequestError {
    RequestError(message)
}

/// A DRA claim each replica's pod names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimRef {
    /// A ResourceClaimTemplate: each replica gets a claim of its own.
    Template(String),
    /// A ResourceClaim every replica shares.
    Shared(String),
}

/// The decoded requirements of one replica.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Requirements {
    /// Where the requirements are in the request (`replicaRequirements`,
    /// `components[0] ("leader").replicaRequirements`), for messages.
    pub place: String,
    /// Where templates and shared claims are looked up (`default` when the request names
    /// none).
    pub namespace: String,
    pub priority_class_name: Option<String>,
    /// Resource name -> quantity text, by name.
    pub requests: BTreeMap<String, String>,
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity (`NodeSelector` as JSON).
    pub node_affinity: Option<Value>,
    /// Tolerations as JSON.
    pub tolerations: Vec<Value>,
    pub claims: Vec<ClaimRef>,
}

/// Decodes one `resource.Quantity` in Kubernetes' protobuf encoding (`Quantity.Marshal()`:
/// its text in field 1) and checks that the text is a quantity and not negative.
pub fn decode_quantity(name: &str, bytes: &[u8], place: &str) -> Result<String, RequestError> {
    let q = Quantity::decode(bytes).map_err(|e| {
        bad(format!(
            "{place}.resourceRequestBytes[{name:?}]: not a protobuf-encoded resource.Quantity \
             ({e}); send the bytes of Quantity.Marshal()"
        ))
    })?;
    let text = q.string.unwrap_or_default();
    match lockstep_model::quantity::Quantity::parse(&text) {
        Ok(parsed) if parsed.is_negative() => Err(bad(format!(
            "{place}.resourceRequestBytes[{name:?}]: the quantity {text:?} is negative; a \
             request must be zero or more"
        ))),
        Ok(_) => Ok(text),
        Err(e) => Err(bad(format!(
            "{place}.resourceRequestBytes[{name:?}]: {text:?} is not a quantity ({e})"
        ))),
    }
}

fn requirement_json(r: &k8s::NodeSelectorRequirement) -> Value {
    json!({
        "key": r.key.clone().unwrap_or_default(),
        "operator": r.operator.clone().unwrap_or_default(),
        "values": r.values,
    })
}

/// Decodes a `NodeSelector` in Kubernetes' protobuf encoding into its JSON form.
pub fn decode_node_selector(bytes: &[u8], place: &str) -> Result<Value, RequestError> {
    let s = k8s::NodeSelector::decode(bytes).map_err(|e| {
        bad(format!(
            "{place}.nodeClaim.nodeAffinityBytes: not a protobuf-encoded core/v1 NodeSelector \
             ({e}); send the bytes of NodeSelector.Marshal()"
        ))
    })?;
    let terms: Vec<Value> = s
        .node_selector_terms
        .iter()
        .map(|t| {
            let mut term = serde_json::Map::new();
            if !t.match_expressions.is_empty() {
                term.insert(
                    "matchExpressions".into(),
                    t.match_expressions.iter().map(requirement_json).collect(),
                );
            }
            if !t.match_fields.is_empty() {
                term.insert(
                    "matchFields".into(),
                    t.match_fields.iter().map(requirement_json).collect(),
                );
            }
            Value::Object(term)
        })
        .collect();
    Ok(json!({ "nodeSelectorTerms": terms }))
}

/// Decodes a `Toleration` in Kubernetes' protobuf encoding into its JSON form (empty
/// strings, as Go writes unset fields, are left out).
pub fn decode_toleration(bytes: &[u8], place: &str, i: usize) -> Result<Value, RequestError> {
    let t = k8s::Toleration::decode(bytes).map_err(|e| {
        bad(format!(
            "{place}.nodeClaim.tolerationsBytes[{i}]: not a protobuf-encoded core/v1 \
             Toleration ({e}); send the bytes of Toleration.Marshal()"
        ))
    })?;
    let mut out = serde_json::Map::new();
    for (k, v) in [
        ("key", &t.key),
        ("operator", &t.operator),
        ("value", &t.value),
        ("effect", &t.effect),
    ] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            out.insert(k.into(), json!(v));
        }
    }
    if let Some(s) = t.toleration_seconds {
        out.insert("tolerationSeconds".into(), json!(s));
    }
    Ok(Value::Object(out))
}

fn decode(
    namespace: &str,
    priority_class_name: &str,
    node_claim: Option<&pb::NodeClaim>,
    requests: &HashMap<String, Vec<u8>>,
    claims: &[pb::ResourceClaimReference],
    place: &str,
) -> Result<Requirements, RequestError> {
    let mut out = Requirements {
        place: place.to_string(),
        namespace: if namespace.is_empty() {
            "default".to_string()
        } else {
            namespace.to_string()
        },
        priority_class_name: Some(priority_class_name.to_string()).filter(|s| !s.is_empty()),
        ..Requirements::default()
    };
    for (name, bytes) in requests {
        if name.is_empty() {
            return Err(bad(format!(
                "{place}.resourceRequestBytes: a resource name is empty"
            )));
        }
        out.requests
            .insert(name.clone(), decode_quantity(name, bytes, place)?);
    }
    if let Some(nc) = node_claim {
        out.node_selector = nc
            .node_selector
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !nc.node_affinity_bytes.is_empty() {
            out.node_affinity = Some(decode_node_selector(&nc.node_affinity_bytes, place)?);
        }
        for (i, b) in nc.tolerations_bytes.iter().enumerate() {
            out.tolerations.push(decode_toleration(b, place, i)?);
        }
    }
    for (i, c) in claims.iter().enumerate() {
        out.claims.push(
            match (
                c.resource_claim_template_name.as_str(),
                c.resource_claim_name.as_str(),
            ) {
                ("", "") => {
                    return Err(bad(format!(
                        "{place}.resourceClaimRefs[{i}]: names neither a \
                         resourceClaimTemplateName nor a resourceClaimName"
                    )));
                }
                ("", shared) => ClaimRef::Shared(shared.to_string()),
                (template, _) => ClaimRef::Template(template.to_string()),
            },
        );
    }
    Ok(out)
}

impl Requirements {
    /// The requirements of a `MaxAvailableReplicas` or `SelectVictims` request.
    pub fn from_replica(
        r: Option<&pb::ReplicaRequirements>,
        place: &str,
    ) -> Result<Requirements, RequestError> {
        match r {
            Some(r) => decode(
                &r.namespace,
                &r.priority_class_name,
                r.node_claim.as_ref(),
                &r.resource_request_bytes,
                &r.resource_claim_refs,
                place,
            ),
            None => Ok(Requirements {
                place: place.to_string(),
                namespace: "default".to_string(),
                ..Requirements::default()
            }),
        }
    }

    /// The requirements of one component (`namespace` is the workload's).
    pub fn from_component(
        c: Option<&pb::ComponentReplicaRequirements>,
        namespace: &str,
        place: &str,
    ) -> Result<Requirements, RequestError> {
        match c {
            Some(c) => decode(
                namespace,
                &c.priority_class_name,
                c.node_claim.as_ref(),
                &c.resource_request_bytes,
                &c.resource_claim_refs,
                place,
            ),
            None => decode(namespace, "", None, &HashMap::new(), &[], place),
        }
    }

    /// The Pod one replica would be, named `name`. `priorityClassName` is left out (the
    /// caller sets the priority from the member's classes): a class the member does not
    /// define does not make a replica unplaceable.
    pub fn pod(&self, name: &str) -> Value {
        let mut spec = serde_json::Map::new();
        let mut container = json!({"name": "replica", "image": "replica"});
        if !self.requests.is_empty() {
            container["resources"] = json!({ "requests": self.requests });
        }
        if !self.node_selector.is_empty() {
            spec.insert("nodeSelector".into(), json!(self.node_selector));
        }
        if let Some(a) = &self.node_affinity {
            spec.insert(
                "affinity".into(),
                json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": a}}),
            );
        }
        if !self.tolerations.is_empty() {
            spec.insert("tolerations".into(), json!(self.tolerations));
        }
        if !self.claims.is_empty() {
            let entries: Vec<Value> = self
                .claims
                .iter()
                .enumerate()
                .map(|(i, c)| match c {
                    ClaimRef::Template(t) => {
                        json!({"name": format!("claim-{i}"), "resourceClaimTemplateName": t})
                    }
                    ClaimRef::Shared(n) => {
                        json!({"name": format!("claim-{i}"), "resourceClaimName": n})
                    }
                })
                .collect();
            let uses: Vec<Value> = (0..self.claims.len())
                .map(|i| json!({"name": format!("claim-{i}")}))
                .collect();
            container["resources"]["claims"] = json!(uses);
            spec.insert("resourceClaims".into(), json!(entries));
        }
        spec.insert("containers".into(), json!([container]));
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": spec,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes printed by Go's `resource.MustParse(q).Marshal()`, `NodeSelector.Marshal()`
    /// and `Toleration.Marshal()` from k8s.io/api and k8s.io/apimachinery v0.37.2, the
    /// calls Karmada's `SetResourceRequest`, `SetNodeAffinity` and `SetTolerations` make.
    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn quantities_as_go_marshals_them() {
        for (text, bytes) in [
            ("1500m", "0a05313530306d"),
            ("4Gi", "0a03344769"),
            ("2", "0a0132"),
            ("1e3", "0a03316533"),
        ] {
            assert_eq!(decode_quantity("cpu", &hex(bytes), "r").unwrap(), text);
        }
    }

    #[test]
    fn node_selector_as_go_marshals_it() {
        let v = decode_node_selector(
            &hex(
                "0a2e0a100a047a6f6e651202496e1a01611a0162121a0a0d6d657461646174612e6e616d6512054e6f74496e1a026e33",
            ),
            "r",
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
                "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n3"]}],
            }]})
        );
    }

    #[test]
    fn tolerations_as_go_marshals_them() {
        assert_eq!(
            decode_toleration(
                &hex("0a036770751205457175616c1a03796573220a4e6f5363686564756c65"),
                "r",
                0
            )
            .unwrap(),
            json!({"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"})
        );
        // Go writes the empty key and value; tolerationSeconds is field 5.
        assert_eq!(
            decode_toleration(
                &hex("0a0012064578697374731a0022094e6f45786563757465281e"),
                "r",
                0
            )
            .unwrap(),
            json!({"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30})
        );
    }

    #[test]
    fn undecodable_and_negative_quantities_are_named() {
        let e = decode_quantity("cpu", &[0xff, 0x01], "replicaRequirements").unwrap_err();
        assert!(
            e.0.contains("replicaRequirements.resourceRequestBytes[\"cpu\"]"),
            "{e}"
        );
        assert!(e.0.contains("resource.Quantity"), "{e}");
        let e = decode_quantity("cpu", &hex("0a022d31"), "r").unwrap_err();
        assert!(e.0.contains("negative"), "{e}");
        let e = decode_quantity("memory", &hex("0a0178"), "r").unwrap_err();
        assert!(e.0.contains("\"x\" is not a quantity"), "{e}");
    }

    #[test]
    fn claim_references_template_first() {
        let r = pb::ReplicaRequirements {
            namespace: "ml".into(),
            resource_claim_refs: vec![
                pb::ResourceClaimReference {
                    resource_claim_template_name: "gpu".into(),
                    resource_claim_name: "ignored".into(),
                },
                pb::ResourceClaimReference {
                    resource_claim_template_name: String::new(),
                    resource_claim_name: "shared".into(),
                },
            ],
            ..Default::default()
        };
        let req = Requirements::from_replica(Some(&r), "r").unwrap();
        assert_eq!(
            req.claims,
            [
                ClaimRef::Template("gpu".into()),
                ClaimRef::Shared("shared".into())
            ]
        );
        let pod = req.pod("shape");
        assert_eq!(pod["metadata"]["namespace"], "ml");
        assert_eq!(
            pod["spec"]["resourceClaims"][1],
            json!({"name": "claim-1", "resourceClaimName": "shared"})
        );
    }
}
