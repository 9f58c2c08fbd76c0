//! Dynamic Resource Allocation (`resource.k8s.io/v1`): DeviceClass, ResourceSlice,
//! ResourceClaim and ResourceClaimTemplate converted into the model, pods' `resourceClaims`,
//! and the messages of invalid objects.

mod common;
use common::{assert_contains, err, ok};

use std::collections::BTreeMap;

use lockstep_manifests::Loaded;
use lockstep_model::dra::{
    AllocationMode, AttributeValue, CapacityRange, CapacityRequestPolicy, ConstraintKind,
    DeviceCapacity, DeviceNodeScope, DeviceRequestKind, ExactDeviceRequest, ResourceClaim,
    ResourceSlice, SliceNodeScope,
};
use lockstep_model::{
    NodeSelector, NodeSelectorTerm, Operator, PodResourceClaim, Requirement, Taint, TaintEffect,
    Toleration, TolerationOperator,
};

const GI: i64 = 1024 * 1024 * 1024;

fn slice<'a>(loaded: &'a Loaded, name: &str) -> &'a ResourceSlice {
    loaded
        .cluster
        .resource_slices
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no ResourceSlice {name}"))
}

fn claim<'a>(loaded: &'a Loaded, key: &str) -> &'a ResourceClaim {
    loaded
        .cluster
        .resource_claims
        .iter()
        .find(|c| c.key() == key)
        .unwrap_or_else(|| panic!("no ResourceClaim {key}"))
}

fn exactly(kind: &DeviceRequestKind) -> &ExactDeviceRequest {
    match kind {
        DeviceRequestKind::Exactly(r) => r,
        other => panic!("expected exactly, found {other:?}"),
    }
}

fn term(key: &str, operator: Operator, values: &[&str]) -> NodeSelector {
    NodeSelector {
        terms: vec![NodeSelectorTerm {
            match_expressions: vec![Requirement {
                key: key.into(),
                operator,
                values: values.iter().map(|v| v.to_string()).collect(),
            }],
            match_fields: Vec::new(),
        }],
    }
}

/// A ResourceSlice named `s` with the given `spec` body (block YAML, indented by two).
fn slice_yaml(spec: &str) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: s}}\nspec:\n{spec}"
    )
}

/// A slice on node-a in pool p whose only device is `device` (flow YAML).
fn device_yaml(device: &str) -> String {
    slice_yaml(&format!(
        "  driver: gpu.example.com\n  nodeName: node-a\n  pool: {{name: p, generation: 1, \
         resourceSliceCount: 1}}\n  devices:\n  - {device}\n"
    ))
}

/// A ResourceClaim `default/c` whose `spec.devices` is `devices` (flow YAML).
fn claim_yaml(devices: &str) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: c}}\n\
         spec: {{devices: {devices}}}\n"
    )
}

/// A pending pod `default/p` with the given `resourceClaims` (flow YAML) and container
/// `resources.claims` (flow YAML).
fn pod_yaml(claims: &str, container_claims: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  resourceClaims: {claims}\n  \
         containers:\n  - name: c\n    image: x\n    resources: {{claims: {container_claims}}}\n"
    )
}

// ---------------------------------------------------------------------------------------
// Conversion
// ---------------------------------------------------------------------------------------

#[test]
fn device_class_with_every_field() {
    let loaded = ok(r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
  - cel:
      expression: >-
        device.capacity["gpu.example.com"].memory.compareTo(quantity("16Gi")) >= 0
  config:
  - opaque:
      driver: gpu.example.com
      parameters: {apiVersion: gpu.example.com/v1, kind: GpuConfig, sharing: {strategy: TimeSlicing}}
  extendedResourceName: example.com/gpu
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: empty}
"#);
    let classes = &loaded.cluster.device_classes;
    assert_eq!(classes.len(), 2);
    let gpu = &classes[0];
    assert_eq!(gpu.name, "gpu.example.com");
    assert_eq!(
        gpu.selectors,
        [
            r#"device.driver == "gpu.example.com""#,
            r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("16Gi")) >= 0"#,
        ]
    );
    assert_eq!(gpu.config.len(), 1);
    assert_eq!(gpu.config[0].driver, "gpu.example.com");
    let parameters: serde_json::Value = serde_json::from_str(&gpu.config[0].parameters).unwrap();
    assert_eq!(parameters["kind"], "GpuConfig");
    assert_eq!(parameters["sharing"]["strategy"], "TimeSlicing");
    assert_eq!(
        gpu.extended_resource_name.as_deref(),
        Some("example.com/gpu")
    );

    let empty = &classes[1];
    assert_eq!(empty.name, "empty");
    assert!(empty.selectors.is_empty() && empty.config.is_empty());
    assert_eq!(empty.extended_resource_name, None);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

const NODE_SLICE: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: node-a, generation: 3, resourceSliceCount: 2}
  devices:
  - name: gpu-0
    attributes:
      model: {string: A100}
      gpu.example.com/pcieRoot: {string: pci0000:00}
      index: {int: 0}
      mig: {bool: false}
      driverVersion: {version: 550.54.15}
    capacity:
      memory: {value: 80Gi}
      gpu.example.com/cores: {value: "6912"}
      power: {value: 400500m}
    bindsToNode: true
    bindingConditions: [Attached]
    bindingFailureConditions: [AttachFailed]
  - name: gpu-1
    allowMultipleAllocations: true
    capacity:
      memory:
        value: 80Gi
        requestPolicy:
          default: 10Gi
          validRange: {min: 1Gi, max: 40Gi, step: 1Gi}
      slots:
        value: "8"
        requestPolicy: {default: "1", validValues: ["1", "2", "4"]}
      bandwidth: {value: 100G}
    taints:
    - {key: maintenance, value: planned, effect: NoSchedule}
    - {key: degraded, effect: NoExecute}
    - {key: note, value: informational, effect: None}
"#;

#[test]
fn resource_slice_with_devices_attributes_capacities_and_taints() {
    let loaded = ok(NODE_SLICE);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let s = slice(&loaded, "node-a-gpus");
    assert_eq!(s.driver, "gpu.example.com");
    assert_eq!(s.pool.name, "node-a");
    assert_eq!(s.pool.generation, 3);
    assert_eq!(s.pool.resource_slice_count, 2);
    assert_eq!(s.node_scope, SliceNodeScope::NodeName("node-a".into()));
    assert!(s.shared_counters.is_empty());
    assert_eq!(s.devices.len(), 2);

    let gpu0 = &s.devices[0];
    assert_eq!(gpu0.name, "gpu-0");
    assert_eq!(
        gpu0.attributes,
        BTreeMap::from([
            (
                "driverVersion".to_string(),
                AttributeValue::Version("550.54.15".into())
            ),
            (
                "gpu.example.com/pcieRoot".to_string(),
                AttributeValue::String("pci0000:00".into())
            ),
            ("index".to_string(), AttributeValue::Int(0)),
            ("mig".to_string(), AttributeValue::Bool(false)),
            ("model".to_string(), AttributeValue::String("A100".into())),
        ])
    );
    let plain = |value| DeviceCapacity {
        value,
        request_policy: None,
    };
    assert_eq!(
        gpu0.capacity,
        BTreeMap::from([
            ("gpu.example.com/cores".to_string(), plain(6912)),
            ("memory".to_string(), plain(80 * GI)),
            // 400.5 rounds up to whole units.
            ("power".to_string(), plain(401)),
        ])
    );
    assert!(!gpu0.allow_multiple_allocations);
    assert!(gpu0.binds_to_node);
    assert_eq!(gpu0.binding_conditions, ["Attached"]);
    assert_eq!(gpu0.binding_failure_conditions, ["AttachFailed"]);
    assert_eq!(gpu0.node_scope, None);
    assert!(gpu0.taints.is_empty() && gpu0.consumes_counters.is_empty());

    let gpu1 = &s.devices[1];
    assert!(gpu1.allow_multiple_allocations);
    assert_eq!(
        gpu1.capacity["memory"],
        DeviceCapacity {
            value: 80 * GI,
            request_policy: Some(CapacityRequestPolicy {
                default: Some(10 * GI),
                valid_values: Vec::new(),
                valid_range: Some(CapacityRange {
                    min: GI,
                    max: Some(40 * GI),
                    step: Some(GI),
                }),
            }),
        }
    );
    assert_eq!(
        gpu1.capacity["slots"].request_policy,
        Some(CapacityRequestPolicy {
            default: Some(1),
            valid_values: vec![1, 2, 4],
            valid_range: None,
        })
    );
    assert_eq!(gpu1.capacity["bandwidth"], plain(100_000_000_000));
    // Effect None does not keep the device from being allocated, so it is not kept.
    assert_eq!(
        gpu1.taints,
        [
            Taint {
                key: "maintenance".into(),
                value: "planned".into(),
                effect: TaintEffect::NoSchedule,
            },
            Taint {
                key: "degraded".into(),
                value: String::new(),
                effect: TaintEffect::NoExecute,
            },
        ]
    );
}

#[test]
fn resource_slice_node_scopes_and_counters() {
    let loaded = ok(r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: rack-1-counters}
spec:
  driver: gpu.example.com
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions: [{key: rack, operator: In, values: [r1]}]
  pool: {name: rack-1, generation: 0, resourceSliceCount: 2}
  sharedCounters:
  - name: gpu-0-counters
    counters:
      memory: {value: 80Gi}
      multiprocessors: {value: "108"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: rack-1-devices}
spec:
  driver: gpu.example.com
  perDeviceNodeSelection: true
  pool: {name: rack-1, generation: 0, resourceSliceCount: 2}
  devices:
  - name: mig-1g
    nodeName: node-a
    consumesCounters:
    - counterSet: gpu-0-counters
      counters: {memory: {value: 10Gi}, multiprocessors: {value: "14"}}
  - name: mig-7g
    nodeSelector:
      nodeSelectorTerms:
      - matchExpressions: [{key: rack, operator: In, values: [r1]}]
    consumesCounters:
    - counterSet: gpu-0-counters
      counters: {memory: {value: 80Gi}, multiprocessors: {value: "98"}}
  - name: fabric
    allNodes: true
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: network}
spec:
  driver: nic.example.com
  allNodes: true
  pool: {name: fabric, generation: 1, resourceSliceCount: 1}
"#);
    let counters = slice(&loaded, "rack-1-counters");
    assert_eq!(
        counters.node_scope,
        SliceNodeScope::NodeSelector(term("rack", Operator::In, &["r1"]))
    );
    assert!(counters.devices.is_empty());
    assert_eq!(counters.shared_counters.len(), 1);
    assert_eq!(counters.shared_counters[0].name, "gpu-0-counters");
    assert_eq!(
        counters.shared_counters[0].counters,
        BTreeMap::from([
            ("memory".to_string(), 80 * GI),
            ("multiprocessors".to_string(), 108)
        ])
    );

    let devices = slice(&loaded, "rack-1-devices");
    assert_eq!(devices.node_scope, SliceNodeScope::PerDeviceNodeSelection);
    let d = &devices.devices;
    assert_eq!(
        d[0].node_scope,
        Some(DeviceNodeScope::NodeName("node-a".into()))
    );
    assert_eq!(d[0].consumes_counters.len(), 1);
    assert_eq!(d[0].consumes_counters[0].counter_set, "gpu-0-counters");
    assert_eq!(
        d[0].consumes_counters[0].counters,
        BTreeMap::from([
            ("memory".to_string(), 10 * GI),
            ("multiprocessors".to_string(), 14)
        ])
    );
    assert_eq!(
        d[1].node_scope,
        Some(DeviceNodeScope::NodeSelector(term(
            "rack",
            Operator::In,
            &["r1"]
        )))
    );
    assert_eq!(d[2].node_scope, Some(DeviceNodeScope::AllNodes));

    let network = slice(&loaded, "network");
    assert_eq!(network.node_scope, SliceNodeScope::AllNodes);
    assert!(network.devices.is_empty());
}

const CLAIM: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: ml}
spec:
  devices:
    requests:
    - name: gpus
      exactly:
        deviceClassName: gpu.example.com
        count: 2
        selectors:
        - cel: {expression: 'device.attributes["gpu.example.com"].model == "A100"'}
        tolerations:
        - {key: maintenance, operator: Equal, value: planned, effect: NoSchedule}
        - {operator: Exists, effect: NoExecute, tolerationSeconds: 60}
    - name: all-nics
      exactly: {deviceClassName: nic.example.com, allocationMode: All, adminAccess: true}
    - name: slice
      exactly:
        deviceClassName: gpu.example.com
        capacity: {requests: {memory: 10Gi, gpu.example.com/slots: "1"}}
    - name: fallback
      firstAvailable:
      - name: big
        deviceClassName: gpu.example.com
        selectors:
        - cel: {expression: 'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))'}
      - name: two-small
        deviceClassName: gpu.example.com
        allocationMode: ExactCount
        count: 2
        capacity: {requests: {memory: 16Gi}}
        tolerations: [{key: maintenance, operator: Exists}]
    constraints:
    - {requests: [gpus], matchAttribute: gpu.example.com/pcieRoot}
    - {requests: [gpus, fallback/big], distinctAttribute: gpu.example.com/uuid}
    - {matchAttribute: gpu.example.com/numa}
    config:
    - requests: [gpus]
      opaque: {driver: gpu.example.com, parameters: {mode: exclusive}}
status:
  allocation:
    devices:
      results:
      - {request: gpus, driver: gpu.example.com, pool: node-a, device: gpu-0}
      - {request: gpus, driver: gpu.example.com, pool: node-a, device: gpu-1}
      - {request: all-nics, driver: nic.example.com, pool: node-a, device: nic-0, adminAccess: true}
      - request: slice
        driver: gpu.example.com
        pool: node-c
        device: gpu-0
        shareID: 7c1a2b3c-0000-4000-8000-000000000001
        consumedCapacity: {memory: 10Gi, gpu.example.com/slots: "1"}
      - {request: fallback/big, driver: gpu.example.com, pool: node-a, device: gpu-2}
      config:
      - {source: FromClaim, requests: [gpus], opaque: {driver: gpu.example.com, parameters: {mode: exclusive}}}
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-a]}]
    allocationTimestamp: "2025-01-01T00:00:00Z"
  reservedFor:
  - {resource: pods, name: trainer-0, uid: 11111111-1111-1111-1111-111111111111}
  - {apiGroup: "", resource: pods, name: trainer-1, uid: 22222222-2222-2222-2222-222222222222}
  - {apiGroup: scheduling.k8s.io, resource: podgroups, name: trainers, uid: 33333333-3333-3333-3333-333333333333}
"#;

#[test]
fn resource_claim_with_every_field_and_status() {
    let loaded = ok(CLAIM);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let c = claim(&loaded, "ml/shared");
    let requests = &c.spec.requests;
    assert_eq!(requests.len(), 4);

    assert_eq!(requests[0].name, "gpus");
    assert_eq!(
        *exactly(&requests[0].kind),
        ExactDeviceRequest {
            device_class_name: "gpu.example.com".into(),
            selectors: vec![r#"device.attributes["gpu.example.com"].model == "A100""#.into()],
            allocation_mode: AllocationMode::ExactCount(2),
            admin_access: false,
            tolerations: vec![
                Toleration {
                    key: "maintenance".into(),
                    operator: TolerationOperator::Equal,
                    value: "planned".into(),
                    effect: Some(TaintEffect::NoSchedule),
                },
                Toleration {
                    key: String::new(),
                    operator: TolerationOperator::Exists,
                    value: String::new(),
                    effect: Some(TaintEffect::NoExecute),
                },
            ],
            capacity_requests: BTreeMap::new(),
        }
    );

    let nics = exactly(&requests[1].kind);
    assert_eq!(nics.allocation_mode, AllocationMode::All);
    assert!(nics.admin_access);

    let slice_request = exactly(&requests[2].kind);
    assert_eq!(slice_request.allocation_mode, AllocationMode::ExactCount(1));
    assert_eq!(
        slice_request.capacity_requests,
        BTreeMap::from([
            ("gpu.example.com/slots".to_string(), 1),
            ("memory".to_string(), 10 * GI)
        ])
    );

    let DeviceRequestKind::FirstAvailable(subs) = &requests[3].kind else {
        panic!("expected firstAvailable");
    };
    assert_eq!(subs.len(), 2);
    assert_eq!(subs[0].name, "big");
    assert_eq!(
        subs[0].request.allocation_mode,
        AllocationMode::ExactCount(1)
    );
    assert_eq!(subs[0].request.selectors.len(), 1);
    assert_eq!(subs[1].name, "two-small");
    assert_eq!(
        subs[1].request.allocation_mode,
        AllocationMode::ExactCount(2)
    );
    assert_eq!(subs[1].request.capacity_requests["memory"], 16 * GI);
    assert!(!subs[1].request.admin_access);
    assert_eq!(
        subs[1].request.tolerations[0].operator,
        TolerationOperator::Exists
    );

    let constraints = &c.spec.constraints;
    assert_eq!(constraints.len(), 3);
    assert_eq!(constraints[0].requests, ["gpus"]);
    assert_eq!(
        constraints[0].kind,
        ConstraintKind::MatchAttribute("gpu.example.com/pcieRoot".into())
    );
    assert_eq!(constraints[1].requests, ["gpus", "fallback/big"]);
    assert_eq!(
        constraints[1].kind,
        ConstraintKind::DistinctAttribute("gpu.example.com/uuid".into())
    );
    assert!(constraints[2].requests.is_empty());

    assert_eq!(c.spec.config.len(), 1);
    assert_eq!(c.spec.config[0].requests, ["gpus"]);
    assert_eq!(c.spec.config[0].opaque.driver, "gpu.example.com");
    assert_eq!(
        c.spec.config[0].opaque.parameters,
        r#"{"mode":"exclusive"}"#
    );

    let allocation = c.allocation.as_ref().expect("allocated");
    assert_eq!(allocation.devices.len(), 5);
    let first = &allocation.devices[0];
    assert_eq!(
        (
            first.request.as_str(),
            first.driver.as_str(),
            first.pool.as_str(),
            first.device.as_str()
        ),
        ("gpus", "gpu.example.com", "node-a", "gpu-0")
    );
    assert!(!first.admin_access && first.share_id.is_none() && first.consumed_capacity.is_empty());
    assert!(allocation.devices[2].admin_access);
    let shared = &allocation.devices[3];
    assert_eq!(
        shared.share_id.as_deref(),
        Some("7c1a2b3c-0000-4000-8000-000000000001")
    );
    assert_eq!(
        shared.consumed_capacity,
        BTreeMap::from([
            ("gpu.example.com/slots".to_string(), 1),
            ("memory".to_string(), 10 * GI)
        ])
    );
    assert_eq!(allocation.devices[4].request, "fallback/big");
    let selector = allocation.node_selector.as_ref().expect("node selector");
    assert_eq!(selector.terms.len(), 1);
    assert_eq!(selector.terms[0].match_fields[0].values, ["node-a"]);

    // Pods by namespace/name; other consumers by resource.group/namespace/name.
    assert_eq!(
        c.reserved_for,
        [
            "ml/trainer-0",
            "ml/trainer-1",
            "podgroups.scheduling.k8s.io/ml/trainers"
        ]
    );
    // The claim's namespace exists in the loaded cluster.
    assert!(loaded.cluster.namespaces.contains_key("ml"));
}

#[test]
fn claim_without_status_or_spec() {
    let loaded = ok(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: a}\n\
         spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}\n---\n\
         apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: b}\n",
    );
    let a = claim(&loaded, "default/a");
    assert_eq!(a.allocation, None);
    assert!(a.reserved_for.is_empty());
    assert_eq!(a.spec.requests[0].name, "gpu");
    let b = claim(&loaded, "default/b");
    assert!(b.spec.requests.is_empty() && b.spec.constraints.is_empty());
}

#[test]
fn resource_claim_template_reads_spec_spec() {
    let loaded = ok(r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-gpus, namespace: ml}
spec:
  metadata: {labels: {app: trainer}}
  spec:
    devices:
      requests:
      - name: gpus
        exactly: {deviceClassName: gpu.example.com, count: 2}
      constraints:
      - {matchAttribute: gpu.example.com/pcieRoot}
"#);
    let templates = &loaded.cluster.resource_claim_templates;
    assert_eq!(templates.len(), 1);
    let t = &templates[0];
    assert_eq!(t.key(), "ml/two-gpus");
    assert_eq!(
        exactly(&t.spec.requests[0].kind).allocation_mode,
        AllocationMode::ExactCount(2)
    );
    assert_eq!(
        t.spec.constraints[0].kind,
        ConstraintKind::MatchAttribute("gpu.example.com/pcieRoot".into())
    );
    assert!(loaded.cluster.namespaces.contains_key("ml"));
}

#[test]
fn pods_name_their_claims() {
    let loaded = ok(&pod_yaml(
        "[{name: gpu, resourceClaimTemplateName: one-gpu}, \
         {name: shared, resourceClaimName: shared-gpu}]",
        "[{name: gpu}, {name: shared, request: gpus}]",
    ));
    assert_eq!(
        loaded.cluster.pods[0].resource_claims,
        [
            PodResourceClaim {
                name: "gpu".into(),
                resource_claim_name: None,
                resource_claim_template_name: Some("one-gpu".into()),
                generated_claim: None,
            },
            PodResourceClaim {
                name: "shared".into(),
                resource_claim_name: Some("shared-gpu".into()),
                resource_claim_template_name: None,
                generated_claim: None,
            },
        ]
    );
    // A claim or template that is not in the input is not an error: the pod waits for it.
    assert!(loaded.cluster.resource_claims.is_empty());
    assert!(loaded.cluster.resource_claim_templates.is_empty());
}

#[test]
fn alpha_fields_are_dropped_with_a_warning() {
    let loaded = ok(r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: p, generation: 1, resourceSliceCount: 1}
  partitionTypeAttribute: gpu.example.com/profile
  devices:
  - name: gpu-0
    consumesCounters:
    - {counterSet: set, counters: {memory: {value: 1Gi}}, compatibilityGroups: [a]}
    nodeAllocatableResources: {memory: {overhead: {perPod: 1Gi}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu
        derivedAttributes: [{name: derived/numa, expression: 'device.attributes["x"].numa'}]
    constraints: [{matchAttribute: derived/numa}]
"#);
    assert_eq!(loaded.warnings.len(), 4, "{:?}", loaded.warnings);
    for (warning, parts) in loaded.warnings.iter().zip([
        [
            "ResourceSlice s",
            "spec.devices[0].consumesCounters[0].compatibilityGroups",
        ],
        [
            "ResourceSlice s",
            "spec.devices[0].nodeAllocatableResources",
        ],
        ["ResourceSlice s", "spec.partitionTypeAttribute"],
        [
            "ResourceClaim default/c",
            "spec.devices.requests[0].exactly.derivedAttributes",
        ],
    ]) {
        assert_contains(warning, &["warning: test.yaml (document ", "ignoring"]);
        assert_contains(warning, &parts);
    }
}

// ---------------------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------------------

/// Each case: the manifest, then the parts its message must contain.
fn check_errors(cases: &[(String, &[&str])]) {
    for (text, parts) in cases {
        let message = err(text);
        assert_contains(&message, &["test.yaml (document 1)"]);
        assert_contains(&message, parts);
    }
}

#[test]
fn bad_quantities_name_the_field() {
    check_errors(&[
        (
            device_yaml("{name: d, capacity: {memory: {value: 80Gx}}}"),
            &[
                "ResourceSlice s",
                "field spec.devices[0].capacity.memory.value",
                "\"80Gx\" is not a valid Kubernetes quantity",
            ],
        ),
        (
            device_yaml("{name: d, capacity: {memory: {}}}"),
            &[
                "field spec.devices[0].capacity.memory.value",
                "a quantity is required here",
            ],
        ),
        (
            device_yaml("{name: d, capacity: {memory: {value: -1Gi}}}"),
            &["spec.devices[0].capacity.memory.value", "is negative"],
        ),
        (
            device_yaml("{name: d, capacity: {memory: {value: 100Ei}}}"),
            &["spec.devices[0].capacity.memory.value", "too large"],
        ),
        (
            device_yaml(
                "{name: d, consumesCounters: [{counterSet: set, counters: {mem: {value: -2}}}]}",
            ),
            &[
                "spec.devices[0].consumesCounters[0].counters.mem.value",
                "is negative",
            ],
        ),
        (
            claim_yaml(
                "{requests: [{name: r, exactly: {deviceClassName: c, capacity: {requests: \
                 {memory: lots}}}}]}",
            ),
            &[
                "ResourceClaim default/c",
                "field spec.devices.requests[0].exactly.capacity.requests.memory",
                "not a valid Kubernetes quantity",
            ],
        ),
        (
            // A quantity of the wrong JSON type is caught when the object is read.
            device_yaml("{name: d, capacity: {memory: {value: {size: 1}}}}"),
            &[
                "field spec.devices[0].capacity.memory.value",
                "make the field match",
            ],
        ),
    ]);
}

#[test]
fn bad_attributes_and_capacities() {
    check_errors(&[
        (
            device_yaml("{name: d, attributes: {model: {string: A100, int: 3}}}"),
            &[
                "spec.devices[0].attributes.model",
                "exactly one value, found 2",
            ],
        ),
        (
            device_yaml("{name: d, attributes: {model: {}}}"),
            &[
                "spec.devices[0].attributes.model",
                "an attribute needs a value",
            ],
        ),
        (
            device_yaml("{name: d, attributes: {cores: {ints: [1, 2]}}}"),
            &["spec.devices[0].attributes.cores", "list-typed attributes"],
        ),
        (
            device_yaml("{name: d, attributes: {driverVersion: {version: v1.2}}}"),
            &[
                "spec.devices[0].attributes.driverVersion.version",
                "\"v1.2\" is not a semantic version",
            ],
        ),
        (
            device_yaml("{name: d, attributes: {gpu.example.com/pcie-root: {string: x}}}"),
            &[
                "spec.devices[0].attributes.gpu.example.com/pcie-root",
                "attribute name \"gpu.example.com/pcie-root\" is not valid",
            ],
        ),
        (
            device_yaml(
                "{name: d, attributes: {memory: {int: 1}}, capacity: {memory: {value: 1}}}",
            ),
            &[
                "spec.devices[0].capacity.memory",
                "both an attribute and a capacity",
            ],
        ),
        (
            device_yaml(
                "{name: d, capacity: {memory: {value: 8Gi, requestPolicy: {default: 1Gi}}}}",
            ),
            &[
                "spec.devices[0].capacity.memory.requestPolicy",
                "needs allowMultipleAllocations: true",
            ],
        ),
        (
            device_yaml(
                "{name: d, allowMultipleAllocations: true, capacity: {memory: {value: 8Gi, \
                 requestPolicy: {default: 3Gi, validValues: [1Gi, 2Gi, 4Gi]}}}}",
            ),
            &[
                "spec.devices[0].capacity.memory.requestPolicy.default",
                "must be one of validValues",
            ],
        ),
        (
            device_yaml(
                "{name: d, allowMultipleAllocations: true, capacity: {memory: {value: 8Gi, \
                 requestPolicy: {default: 1Gi, validValues: [2Gi, 1Gi]}}}}",
            ),
            &[
                "spec.devices[0].capacity.memory.requestPolicy.validValues[1]",
                "ascending order",
            ],
        ),
        (
            device_yaml(
                "{name: d, allowMultipleAllocations: true, capacity: {memory: {value: 8Gi, \
                 requestPolicy: {validRange: {min: 1Gi}}}}}",
            ),
            &[
                "spec.devices[0].capacity.memory.requestPolicy.default",
                "needs a default",
            ],
        ),
        (
            device_yaml(
                "{name: d, allowMultipleAllocations: true, capacity: {memory: {value: 8Gi, \
                 requestPolicy: {default: 1Gi, validRange: {min: 2Gi, max: 16Gi}}}}}",
            ),
            &[
                "spec.devices[0].capacity.memory.requestPolicy.validRange.max",
                "more than the capacity",
            ],
        ),
        (
            device_yaml("{name: d, taints: [{key: k, effect: PreferNoSchedule}]}"),
            &[
                "spec.devices[0].taints[0].effect",
                "invalid effect \"PreferNoSchedule\" for a device taint",
            ],
        ),
    ]);
}

#[test]
fn bad_slices() {
    let pool = "  pool: {name: p, generation: 1, resourceSliceCount: 1}\n";
    check_errors(&[
        (
            slice_yaml(&format!("  nodeName: n\n{pool}")),
            &["ResourceSlice s", "field spec.driver", "needs a driver"],
        ),
        (
            slice_yaml("  driver: d\n  nodeName: n\n"),
            &["field spec.pool.name", "needs a pool name"],
        ),
        (
            slice_yaml("  driver: d\n  nodeName: n\n  pool: {name: p, generation: 1}\n"),
            &["field spec.pool.resourceSliceCount", "must be at least 1"],
        ),
        (
            slice_yaml(&format!("  driver: d\n{pool}")),
            &[
                "field spec:",
                "exactly one of nodeName, nodeSelector",
                "found 0",
            ],
        ),
        (
            slice_yaml(&format!(
                "  driver: d\n  nodeName: n\n  allNodes: true\n{pool}"
            )),
            &["field spec:", "found 2"],
        ),
        (
            slice_yaml(&format!(
                "  driver: d\n  nodeName: n\n{pool}  devices: [{{name: a}}]\n  sharedCounters: \
                 [{{name: c, counters: {{m: {{value: \"1\"}}}}}}]\n"
            )),
            &["only one of devices and sharedCounters"],
        ),
        (
            slice_yaml(&format!(
                "  driver: d\n  nodeName: n\n{pool}  devices: [{{name: a}}, {{name: a}}]\n"
            )),
            &["field spec.devices[1].name", "also used by spec.devices[0]"],
        ),
        (
            slice_yaml(&format!(
                "  driver: d\n  nodeName: n\n{pool}  devices: [{{name: GPU_0}}]\n"
            )),
            &["field spec.devices[0].name", "\"GPU_0\" is not a DNS label"],
        ),
        (
            slice_yaml(&format!(
                "  driver: d\n  nodeName: n\n{pool}  devices: [{{name: a, nodeName: n}}]\n"
            )),
            &[
                "field spec.devices[0].nodeName",
                "perDeviceNodeSelection: true",
            ],
        ),
        (
            slice_yaml(&format!(
                "  driver: d\n  perDeviceNodeSelection: true\n{pool}  devices: [{{name: a}}]\n"
            )),
            &[
                "field spec.devices[0]:",
                "exactly one of nodeName, nodeSelector and allNodes",
            ],
        ),
        (
            slice_yaml(&format!(
                "  driver: d\n{pool}  nodeSelector: {{nodeSelectorTerms: [{{matchExpressions: \
                 [{{key: a, operator: Exists}}]}}, {{matchExpressions: [{{key: b, operator: \
                 Exists}}]}}]}}\n"
            )),
            &[
                "field spec.nodeSelector.nodeSelectorTerms",
                "exactly one term, found 2",
            ],
        ),
        (
            slice_yaml(&format!(
                "  driver: d\n  nodeName: n\n{pool}  sharedCounters: [{{name: c, counters: {{}}}}]\n"
            )),
            &[
                "field spec.sharedCounters[0].counters",
                "at least one counter",
            ],
        ),
    ]);
}

#[test]
fn bad_device_classes() {
    let class = |spec: &str| {
        format!(
            "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: g}}\nspec: {spec}\n"
        )
    };
    check_errors(&[
        (
            class("{selectors: [{}]}"),
            &[
                "DeviceClass g",
                "field spec.selectors[0].cel.expression",
                "needs a CEL expression",
            ],
        ),
        (
            class("{selectors: [{cel: {expression: ''}}]}"),
            &["field spec.selectors[0].cel.expression"],
        ),
        (
            class("{config: [{}]}"),
            &["field spec.config[0].opaque", "needs opaque"],
        ),
        (
            class("{config: [{opaque: {driver: d, parameters: [1]}}]}"),
            &[
                "field spec.config[0].opaque.parameters",
                "must be an object",
            ],
        ),
        (
            class("{config: [{opaque: {parameters: {a: 1}}}]}"),
            &["field spec.config[0].opaque.driver", "add driver"],
        ),
    ]);
}

#[test]
fn bad_claims() {
    let gpu = "exactly: {deviceClassName: gpu}";
    check_errors(&[
        (
            claim_yaml("{requests: [{name: r}]}"),
            &[
                "ResourceClaim default/c",
                "field spec.devices.requests[0]:",
                "exactly one of exactly and firstAvailable",
            ],
        ),
        (
            claim_yaml(&format!(
                "{{requests: [{{name: r, {gpu}, firstAvailable: [{{name: s, deviceClassName: \
                 gpu}}]}}]}}"
            )),
            &["exactly one of exactly and firstAvailable"],
        ),
        (
            claim_yaml("{requests: [{name: r, exactly: {count: 1}}]}"),
            &[
                "field spec.devices.requests[0].exactly.deviceClassName",
                "needs a deviceClassName",
            ],
        ),
        (
            claim_yaml("{requests: [{name: r, exactly: {deviceClassName: gpu, count: 0}}]}"),
            &[
                "field spec.devices.requests[0].exactly.count",
                "must be greater than zero",
            ],
        ),
        (
            claim_yaml(
                "{requests: [{name: r, exactly: {deviceClassName: gpu, allocationMode: All, \
                 count: 2}}]}",
            ),
            &[
                "field spec.devices.requests[0].exactly.count",
                "only with allocationMode ExactCount",
            ],
        ),
        (
            claim_yaml(
                "{requests: [{name: r, exactly: {deviceClassName: gpu, allocationMode: Some}}]}",
            ),
            &["exactly.allocationMode", "invalid allocationMode \"Some\""],
        ),
        (
            claim_yaml(&format!(
                "{{requests: [{{name: r, {gpu}}}, {{name: r, {gpu}}}]}}"
            )),
            &["field spec.devices.requests[1].name", "is used twice"],
        ),
        (
            claim_yaml("{requests: [{name: r, firstAvailable: []}]}"),
            &[
                "field spec.devices.requests[0].firstAvailable",
                "at least one subrequest",
            ],
        ),
        (
            claim_yaml(
                "{requests: [{name: r, firstAvailable: [{name: a, deviceClassName: gpu}, \
                 {name: a, deviceClassName: gpu}]}]}",
            ),
            &[
                "field spec.devices.requests[0].firstAvailable[1].name",
                "used twice",
            ],
        ),
        (
            claim_yaml(&format!(
                "{{requests: [{{name: r, {gpu}}}], constraints: [{{matchAttribute: a/b, \
                 distinctAttribute: a/c}}]}}"
            )),
            &[
                "field spec.devices.constraints[0]:",
                "exactly one of matchAttribute and distinctAttribute",
            ],
        ),
        (
            claim_yaml(&format!(
                "{{requests: [{{name: r, {gpu}}}], constraints: [{{requests: [x], \
                 matchAttribute: a.com/b}}]}}"
            )),
            &[
                "field spec.devices.constraints[0].requests[0]",
                "\"x\" is not a request",
            ],
        ),
        (
            claim_yaml(&format!(
                "{{requests: [{{name: r, {gpu}}}], constraints: [{{matchAttribute: pcieRoot}}]}}"
            )),
            &[
                "field spec.devices.constraints[0].matchAttribute",
                "domain/name",
            ],
        ),
        (
            claim_yaml(&format!(
                "{{requests: [{{name: r, {gpu}}}], config: [{{requests: [r]}}]}}"
            )),
            &["field spec.devices.config[0].opaque", "needs opaque"],
        ),
        (
            claim_yaml(
                "{requests: [{name: r, exactly: {deviceClassName: gpu, selectors: [{cel: {}}]}}]}",
            ),
            &["field spec.devices.requests[0].exactly.selectors[0].cel.expression"],
        ),
        (
            claim_yaml(
                "{requests: [{name: r, exactly: {deviceClassName: gpu, tolerations: [{value: v}]}}]}",
            ),
            &[
                "field spec.devices.requests[0].exactly.tolerations[0].operator",
                "without a key must use operator Exists",
            ],
        ),
        (
            claim_yaml(
                "{requests: [{name: r, exactly: {deviceClassName: gpu, tolerations: [{key: k, \
                 effect: PreferNoSchedule}]}}]}",
            ),
            &[
                "tolerations[0].effect",
                "invalid effect \"PreferNoSchedule\"",
            ],
        ),
        (
            format!(
                "{}status: {{reservedFor: [{{resource: pods, name: p, uid: u}}]}}\n",
                claim_yaml(&format!("{{requests: [{{name: r, {gpu}}}]}}"))
            ),
            &["field status.reservedFor", "only once it is allocated"],
        ),
        (
            format!(
                "{}status: {{allocation: {{devices: {{results: [{{request: r, driver: d, \
                 pool: p}}]}}}}}}\n",
                claim_yaml(&format!("{{requests: [{{name: r, {gpu}}}]}}"))
            ),
            &[
                "field status.allocation.devices.results[0].device",
                "needs its device",
            ],
        ),
        (
            format!(
                "{}status: {{allocation: {{devices: {{results: [{{request: r, driver: d, \
                 pool: p, device: x, consumedCapacity: {{memory: 1Qi}}}}]}}}}}}\n",
                claim_yaml(&format!("{{requests: [{{name: r, {gpu}}}]}}"))
            ),
            &[
                "field status.allocation.devices.results[0].consumedCapacity.memory",
                "not a valid",
            ],
        ),
        (
            format!(
                "{}status: {{allocation: {{}}, reservedFor: [{{resource: pods, name: p, uid: a}}, \
                 {{resource: pods, name: p, uid: b}}]}}\n",
                claim_yaml(&format!("{{requests: [{{name: r, {gpu}}}]}}"))
            ),
            &[
                "field status.reservedFor[1]",
                "consumer default/p is listed twice",
            ],
        ),
    ]);
}

#[test]
fn template_errors_name_the_inner_spec() {
    let message = err(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t}\n\
         spec: {spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu, count: \
         -1}}]}}}\n",
    );
    assert_contains(
        &message,
        &[
            "ResourceClaimTemplate default/t",
            "field spec.spec.devices.requests[0].exactly.count",
            "count -1 must be greater than zero",
        ],
    );
}

#[test]
fn bad_pod_claims() {
    check_errors(&[
        (
            pod_yaml("[{name: gpu}]", "[]"),
            &[
                "Pod default/p",
                "field spec.resourceClaims[0]:",
                "exactly one of resourceClaimName and resourceClaimTemplateName",
            ],
        ),
        (
            pod_yaml(
                "[{name: gpu, resourceClaimName: a, resourceClaimTemplateName: b}]",
                "[]",
            ),
            &["field spec.resourceClaims[0]:", "exactly one of"],
        ),
        (
            pod_yaml(
                "[{name: gpu, resourceClaimName: a}, {name: gpu, resourceClaimName: b}]",
                "[]",
            ),
            &[
                "field spec.resourceClaims[1].name",
                "also used by spec.resourceClaims[0]",
            ],
        ),
        (
            pod_yaml("[{resourceClaimName: a}]", "[]"),
            &["field spec.resourceClaims[0].name", "is required"],
        ),
        (
            pod_yaml("[{name: gpu, resourceClaimName: a}]", "[{name: gpus}]"),
            &[
                "field spec.containers[0].resources.claims[0].name",
                "\"gpus\" is not in spec.resourceClaims",
            ],
        ),
    ]);
}

#[test]
fn duplicates_are_errors_per_kind_and_namespace() {
    let class = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: g}\n";
    let message = err(&format!("{class}---\n{class}"));
    assert_contains(
        &message,
        &[
            "DeviceClass g is defined twice",
            "test.yaml (document 1)",
            "test.yaml (document 2)",
        ],
    );

    let slice = device_yaml("{name: d}");
    assert_contains(
        &err(&format!("{slice}---\n{slice}")),
        &["ResourceSlice s is defined twice"],
    );

    let claim = |ns: &str| {
        format!(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: c, namespace: {ns}}}\n"
        )
    };
    assert_contains(
        &err(&format!("{}---\n{}", claim("a"), claim("a"))),
        &["ResourceClaim a/c is defined twice"],
    );
    // The same name in two namespaces is two claims.
    let loaded = ok(&format!("{}---\n{}", claim("a"), claim("b")));
    assert_eq!(loaded.cluster.resource_claims.len(), 2);

    let template =
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t}\n";
    assert_contains(
        &err(&format!("{template}---\n{template}")),
        &["ResourceClaimTemplate default/t is defined twice"],
    );
}

fn examples_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/dra")
}

#[test]
fn the_examples_load() {
    let loaded = lockstep_manifests::load(&[lockstep_manifests::Source::Path(examples_dir())])
        .unwrap_or_else(|e| panic!("examples/dra does not load: {e}"));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let cluster = &loaded.cluster;
    assert_eq!(cluster.nodes.len(), 3);
    assert_eq!(cluster.device_classes.len(), 1);
    assert_eq!(cluster.resource_slices.len(), 3);
    assert_eq!(cluster.resource_claim_templates.len(), 3);
    assert_eq!(cluster.resource_claims.len(), 1);
    assert_eq!(cluster.pods.len(), 7);
    assert!(cluster.pods.iter().all(|p| p.resource_claims.len() == 1));
    let shared = slice(&loaded, "node-c-gpus");
    assert!(shared.devices.iter().all(|d| d.allow_multiple_allocations));
    assert_eq!(shared.devices[0].capacity["memory"].value, 80 * GI);
}

/// k8s-openapi ignores fields it does not know, so a misspelt field in an example would go
/// unnoticed: every field of every example object must survive reading it as its API type.
#[test]
fn the_examples_use_only_api_fields() {
    use k8s_openapi::api::core::v1 as core;
    use k8s_openapi::api::resource::v1 as resource;
    use serde_json::Value;

    fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(value: &Value) -> Value {
        let typed: T = serde_json::from_value(value.clone()).expect("reads as its type");
        serde_json::to_value(typed).expect("serializes")
    }
    /// Paths in `input` that `output` lacks.
    fn missing(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
        match (input, output) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in a {
                    match b.get(k) {
                        Some(w) => missing(v, w, &format!("{path}.{k}"), out),
                        None => out.push(format!("{path}.{k}")),
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for (i, v) in a.iter().enumerate() {
                    match b.get(i) {
                        Some(w) => missing(v, w, &format!("{path}[{i}]"), out),
                        None => out.push(format!("{path}[{i}]")),
                    }
                }
            }
            _ => {}
        }
    }

    let mut checked = 0;
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for document in serde_norway::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(document).unwrap();
            if value.is_null() {
                continue;
            }
            let output = match value["kind"].as_str().unwrap() {
                "Node" => round_trip::<core::Node>(&value),
                "Pod" => round_trip::<core::Pod>(&value),
                "DeviceClass" => round_trip::<resource::DeviceClass>(&value),
                "ResourceSlice" => round_trip::<resource::ResourceSlice>(&value),
                "ResourceClaim" => round_trip::<resource::ResourceClaim>(&value),
                "ResourceClaimTemplate" => round_trip::<resource::ResourceClaimTemplate>(&value),
                other => panic!("unexpected kind {other} in {}", path.display()),
            };
            let mut lost = Vec::new();
            missing(&value, &output, "", &mut lost);
            assert!(
                lost.is_empty(),
                "{}: {} {}: unknown fields {lost:?}",
                path.display(),
                value["kind"],
                value["metadata"]["name"]
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3 + 1 + 3 + 3 + 1 + 7);
}

#[test]
fn claim_statuses_name_the_claims_made_from_templates() {
    let pod = |statuses: &str| {
        format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: trainer, namespace: ml}}
spec:
  resourceClaims:
  - {{name: gpu, resourceClaimTemplateName: one-gpu}}
  - {{name: shared, resourceClaimName: shared-gpu}}
  containers:
  - {{name: c, image: x}}
status:
  resourceClaimStatuses: {statuses}
"#
        )
    };
    let loaded = ok(&pod("[{name: gpu, resourceClaimName: trainer-gpu-x7k2p}, \
         {name: shared, resourceClaimName: shared-gpu}]"));
    let claims = &loaded.cluster.pods[0].resource_claims;
    assert_eq!(
        claims[0].generated_claim.as_deref(),
        Some("trainer-gpu-x7k2p")
    );
    // A claim naming an existing ResourceClaim uses that one.
    assert_eq!(claims[1].generated_claim, None);
    // Unset: no claim was needed; the template is used as it is.
    let loaded = ok(&pod("[{name: gpu}]"));
    assert_eq!(
        loaded.cluster.pods[0].resource_claims[0].generated_claim,
        None
    );
    let message = err(&pod("[{name: gpus, resourceClaimName: trainer-gpus-1}]"));
    assert_contains(
        &message,
        &[
            "status.resourceClaimStatuses[0].name",
            "\"gpus\" is not in spec.resourceClaims",
        ],
    );
}
