//! The Workload API (`scheduling.k8s.io` v1beta1 and v1alpha3): PodGroups, CompositePodGroups
//! and Workloads converted into the model, and the messages of invalid ones.

mod common;
use common::{assert_contains, err, ok};

use std::fs;
use std::path::PathBuf;

use lockstep_manifests::{Loaded, Source, load};
use lockstep_model::{
    CompositePodGroup, DisruptionMode, GroupPolicy, PodGroup, PodGroupClaim, PreemptionPolicy,
};

fn group<'a>(loaded: &'a Loaded, name: &str) -> &'a PodGroup {
    loaded
        .cluster
        .pod_groups
        .iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no PodGroup {name}"))
}

fn composite<'a>(loaded: &'a Loaded, name: &str) -> &'a CompositePodGroup {
    loaded
        .cluster
        .composite_pod_groups
        .iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no CompositePodGroup {name}"))
}

/// A PodGroup in namespace `default` with the given `spec` (flow-style YAML).
fn pod_group(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: {name}}}\n\
         spec: {spec}\n"
    )
}

/// A CompositePodGroup in namespace `default` with the given `spec` (flow-style YAML).
fn composite_group(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: CompositePodGroup\n\
         metadata: {{name: {name}}}\nspec: {spec}\n"
    )
}

fn workload(spec: &str) -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\nmetadata: {{name: w}}\n\
         spec: {spec}\n"
    )
}

fn docs(parts: &[String]) -> String {
    parts.join("---\n")
}

const PRIORITY_CLASSES: &str = r#"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: training}
value: 1000
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: everything}
value: 7
globalDefault: true
"#;

const FULL: &str = r#"
apiVersion: scheduling.k8s.io/VERSION
kind: CompositePodGroup
metadata: {name: job, namespace: ml, creationTimestamp: "2026-01-02T03:04:05Z"}
spec:
  schedulingPolicy:
    gang: {minGroupCount: 2}
  schedulingConstraints:
    topology: [{key: topology.kubernetes.io/zone}]
  priorityClassName: training
  disruptionMode: {all: {}}
  workloadRef: {workloadName: train, templateName: job}
---
apiVersion: scheduling.k8s.io/VERSION
kind: CompositePodGroup
metadata: {name: replica-0, namespace: ml}
spec:
  schedulingPolicy: {basic: {}}
  parentCompositePodGroupName: job
  priority: 5
  preemptionPolicy: PreemptLowerPriority
  disruptionMode: {single: {}}
---
apiVersion: scheduling.k8s.io/VERSION
kind: PodGroup
metadata: {name: workers-0, namespace: ml, creationTimestamp: "2026-01-02T03:04:06Z"}
spec:
  schedulingPolicy:
    gang: {minCount: 8}
  schedulingConstraints:
    topology:
    - key: topology.kubernetes.io/rack
  priorityClassName: training
  disruptionMode: {all: {}}
  parentCompositePodGroupName: replica-0
  resourceClaims:
  - {name: shared-gpu, resourceClaimTemplateName: gpu-template}
  - {name: scratch, resourceClaimName: scratch-claim}
  workloadRef: {workloadName: train, templateName: workers}
status:
  conditions:
  - type: PodGroupInitiallyScheduled
    status: "True"
    reason: Scheduled
    message: all 8 pods placed
    lastTransitionTime: "2026-01-02T03:05:00Z"
---
apiVersion: scheduling.k8s.io/VERSION
kind: Workload
metadata: {name: train, namespace: ml}
spec:
  controllerRef: {apiGroup: jobset.x-k8s.io, kind: JobSet, name: train}
  compositePodGroupTemplates:
  - name: job
    schedulingPolicy: {gang: {minGroupCount: 2}}
    schedulingConstraints: {topology: [{key: topology.kubernetes.io/zone}]}
    compositePodGroupTemplates:
    - name: replica
      schedulingPolicy: {basic: {}}
      podGroupTemplates:
      - name: workers
        schedulingPolicy: {gang: {minCount: 8}}
        schedulingConstraints: {topology: [{key: topology.kubernetes.io/rack}]}
        resourceClaims: [{name: shared-gpu, resourceClaimTemplateName: gpu-template}]
      - name: driver
        schedulingPolicy: {basic: {}}
    podGroupTemplates:
    - name: coordinator
      schedulingPolicy: {basic: {}}
"#;

fn full(version: &str) -> Loaded {
    ok(&format!(
        "{PRIORITY_CLASSES}---\n{}",
        FULL.replace("VERSION", version)
    ))
}

// ---------------------------------------------------------------------------------------
// Conversion
// ---------------------------------------------------------------------------------------

#[test]
fn every_field_of_the_three_kinds_in_v1beta1() {
    let loaded = full("v1beta1");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);

    let pg = group(&loaded, "workers-0");
    assert_eq!(pg.namespace, "ml");
    assert_eq!(pg.policy, GroupPolicy::Gang { min: 8 });
    assert_eq!(
        pg.topology_key.as_deref(),
        Some("topology.kubernetes.io/rack")
    );
    assert_eq!(pg.priority, Some(1000));
    // Inherited from the PriorityClass, as for pods.
    assert_eq!(pg.preemption_policy, PreemptionPolicy::Never);
    assert_eq!(pg.disruption_mode, DisruptionMode::All);
    assert_eq!(pg.parent.as_deref(), Some("replica-0"));
    assert_eq!(
        pg.resource_claims,
        [
            PodGroupClaim {
                name: "shared-gpu".to_string(),
                resource_claim_name: None,
                resource_claim_template_name: Some("gpu-template".to_string()),
            },
            PodGroupClaim {
                name: "scratch".to_string(),
                resource_claim_name: Some("scratch-claim".to_string()),
                resource_claim_template_name: None,
            },
        ]
    );
    assert_eq!(pg.creation_timestamp, Some(1_767_323_046));
    assert!(pg.initially_scheduled);

    let job = composite(&loaded, "job");
    assert_eq!(job.namespace, "ml");
    assert_eq!(job.policy, GroupPolicy::Gang { min: 2 });
    assert_eq!(
        job.topology_key.as_deref(),
        Some("topology.kubernetes.io/zone")
    );
    assert_eq!(job.priority, Some(1000));
    assert_eq!(job.preemption_policy, PreemptionPolicy::Never);
    assert_eq!(job.disruption_mode, DisruptionMode::All);
    assert_eq!(job.parent, None);
    assert_eq!(job.creation_timestamp, Some(1_767_323_045));

    let replica = composite(&loaded, "replica-0");
    assert_eq!(replica.policy, GroupPolicy::Basic);
    assert_eq!(replica.topology_key, None);
    assert_eq!(replica.priority, Some(5));
    assert_eq!(
        replica.preemption_policy,
        PreemptionPolicy::PreemptLowerPriority
    );
    assert_eq!(replica.disruption_mode, DisruptionMode::Single);
    assert_eq!(replica.parent.as_deref(), Some("job"));
    assert_eq!(replica.creation_timestamp, None);

    let [w] = loaded.cluster.workloads.as_slice() else {
        panic!("one workload expected")
    };
    assert_eq!((w.namespace.as_str(), w.name.as_str()), ("ml", "train"));
    // Every template of the tree, depth first.
    assert_eq!(
        w.composite_pod_group_templates,
        ["job", "replica"],
        "composite templates"
    );
    assert_eq!(
        w.pod_group_templates,
        ["coordinator", "workers", "driver"],
        "pod group templates"
    );

    // Objects of the Workload API live in namespaces the cluster then knows.
    assert!(loaded.cluster.namespaces.contains_key("ml"));
}

#[test]
fn v1alpha3_reads_the_same_as_v1beta1() {
    let beta = full("v1beta1");
    let alpha = full("v1alpha3");
    assert!(alpha.warnings.is_empty(), "{:?}", alpha.warnings);
    assert_eq!(
        format!("{:?}", alpha.cluster.pod_groups),
        format!("{:?}", beta.cluster.pod_groups)
    );
    assert_eq!(
        format!("{:?}", alpha.cluster.composite_pod_groups),
        format!("{:?}", beta.cluster.composite_pod_groups)
    );
    assert_eq!(
        format!("{:?}", alpha.cluster.workloads),
        format!("{:?}", beta.cluster.workloads)
    );

    // The two versions can be mixed, e.g. a v1alpha3 parent of a v1beta1 PodGroup.
    let mixed = docs(&[
        composite_group("root", "{schedulingPolicy: {basic: {}}}").replace("v1beta1", "v1alpha3"),
        pod_group(
            "leaf",
            "{schedulingPolicy: {basic: {}}, parentCompositePodGroupName: root}",
        ),
    ]);
    let loaded = ok(&mixed);
    assert_eq!(group(&loaded, "leaf").parent.as_deref(), Some("root"));
}

#[test]
fn pod_group_defaults() {
    let loaded = ok(&pod_group("pg", "{schedulingPolicy: {basic: {}}}"));
    let pg = group(&loaded, "pg");
    assert_eq!(pg.namespace, "default");
    assert_eq!(pg.policy, GroupPolicy::Basic);
    assert_eq!(pg.topology_key, None);
    assert_eq!(pg.priority, None);
    assert_eq!(pg.preemption_policy, PreemptionPolicy::PreemptLowerPriority);
    assert_eq!(pg.disruption_mode, DisruptionMode::Single);
    assert_eq!(pg.parent, None);
    assert!(pg.resource_claims.is_empty());
    assert_eq!(pg.creation_timestamp, None);
    assert!(!pg.initially_scheduled);

    // Empty strings and an empty topology list count as unset.
    let loaded = ok(&pod_group(
        "pg",
        "{schedulingPolicy: {gang: {minCount: 1}}, priorityClassName: '', \
         parentCompositePodGroupName: '', schedulingConstraints: {topology: []}}",
    ));
    let pg = group(&loaded, "pg");
    assert_eq!(pg.policy, GroupPolicy::Gang { min: 1 });
    assert_eq!(
        (pg.priority, &pg.parent, &pg.topology_key),
        (None, &None, &None)
    );
}

#[test]
fn initially_scheduled_comes_from_the_status_condition() {
    let with_status = |conditions: &str| {
        let text = format!(
            "{}status: {{conditions: {conditions}}}\n",
            pod_group("pg", "{schedulingPolicy: {gang: {minCount: 2}}}")
        );
        group(&ok(&text), "pg").initially_scheduled
    };
    // Only type and status matter; lastTransitionTime, reason and message may be left out.
    assert!(with_status(
        "[{type: PodGroupInitiallyScheduled, status: 'True'}]"
    ));
    assert!(with_status(
        "[{type: DisruptionTarget, status: 'False'}, \
         {type: PodGroupInitiallyScheduled, status: 'True', reason: Scheduled}]"
    ));
    assert!(!with_status(
        "[{type: PodGroupInitiallyScheduled, status: 'False', reason: Unschedulable}]"
    ));
    assert!(!with_status(
        "[{type: PodGroupInitiallyScheduled, status: Unknown}]"
    ));
    assert!(!with_status("[{type: DisruptionTarget, status: 'True'}]"));
    assert!(!with_status("[]"));

    // A status of the wrong shape names the field.
    let text = format!(
        "{}status: {{conditions: [{{type: 5, status: 'True'}}]}}\n",
        pod_group("pg", "{schedulingPolicy: {basic: {}}}")
    );
    assert_contains(
        &err(&text),
        &["PodGroup default/pg", "field status.conditions[0].type"],
    );
}

#[test]
fn group_priority_resolution() {
    let load = |spec: &str| {
        let text = format!("{PRIORITY_CLASSES}---\n{}", pod_group("pg", spec));
        let loaded = ok(&text);
        let pg = group(&loaded, "pg");
        (pg.priority, pg.preemption_policy)
    };
    let basic = "schedulingPolicy: {basic: {}}";
    // Neither field: no group priority (the engine then uses its pods'); the global default
    // class is not applied to groups.
    assert_eq!(
        load(&format!("{{{basic}}}")),
        (None, PreemptionPolicy::PreemptLowerPriority)
    );
    // The class's value and preemption policy.
    assert_eq!(
        load(&format!("{{{basic}, priorityClassName: training}}")),
        (Some(1000), PreemptionPolicy::Never)
    );
    // An explicit preemptionPolicy wins over the class's.
    assert_eq!(
        load(&format!(
            "{{{basic}, priorityClassName: training, preemptionPolicy: PreemptLowerPriority}}"
        )),
        (Some(1000), PreemptionPolicy::PreemptLowerPriority)
    );
    // An explicit priority wins over the class's value, as for pods.
    assert_eq!(
        load(&format!(
            "{{{basic}, priority: 3, priorityClassName: training}}"
        )),
        (Some(3), PreemptionPolicy::Never)
    );
    assert_eq!(
        load(&format!(
            "{{{basic}, priority: -4, preemptionPolicy: Never}}"
        )),
        (Some(-4), PreemptionPolicy::Never)
    );
    // Built-in classes need no definition.
    assert_eq!(
        load(&format!(
            "{{{basic}, priorityClassName: system-cluster-critical}}"
        )),
        (Some(2_000_000_000), PreemptionPolicy::PreemptLowerPriority)
    );
    // With priority set, an unknown class is not looked up (as for pods).
    assert_eq!(
        load(&format!(
            "{{{basic}, priority: 9, priorityClassName: unknown}}"
        )),
        (Some(9), PreemptionPolicy::PreemptLowerPriority)
    );

    // CompositePodGroups resolve the same way.
    let text = format!(
        "{PRIORITY_CLASSES}---\n{}---\n{}",
        composite_group(
            "a",
            "{schedulingPolicy: {basic: {}}, priorityClassName: training}"
        ),
        composite_group("b", "{schedulingPolicy: {basic: {}}}")
    );
    let loaded = ok(&text);
    assert_eq!(composite(&loaded, "a").priority, Some(1000));
    assert_eq!(
        composite(&loaded, "a").preemption_policy,
        PreemptionPolicy::Never
    );
    assert_eq!(composite(&loaded, "b").priority, None);
}

#[test]
fn undefined_priority_class_of_a_group_is_an_error() {
    let e = err(&pod_group(
        "pg",
        "{schedulingPolicy: {basic: {}}, priorityClassName: gold}",
    ));
    assert_contains(
        &e,
        &[
            "test.yaml (document 1)",
            "PodGroup default/pg",
            "field spec.priorityClassName",
            "PriorityClass \"gold\" is not defined",
            "add the PriorityClass or remove the field",
        ],
    );
    let e = err(&composite_group(
        "c",
        "{schedulingPolicy: {basic: {}}, priorityClassName: gold}",
    ));
    assert_contains(
        &e,
        &[
            "CompositePodGroup default/c",
            "spec.priorityClassName",
            "\"gold\" is not defined",
        ],
    );
}

#[test]
fn pods_join_groups_by_scheduling_group() {
    let text = docs(&[
        pod_group("pg", "{schedulingPolicy: {gang: {minCount: 1}}}"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n\
         spec: {schedulingGroup: {podGroupName: pg}, containers: [{name: c}]}\n"
            .to_string(),
        // A pod may name a group that is not (yet) defined: it waits, it is not an error.
        "apiVersion: v1\nkind: Pod\nmetadata: {name: q}\n\
         spec: {schedulingGroup: {podGroupName: later}, containers: [{name: c}]}\n"
            .to_string(),
    ]);
    let loaded = ok(&text);
    assert_eq!(loaded.cluster.pods[0].pod_group.as_deref(), Some("pg"));
    assert_eq!(loaded.cluster.pods[1].pod_group.as_deref(), Some("later"));
}

#[test]
fn parents_link_across_files_and_documents() {
    let dir = TempDir::new("workload-parents");
    // The PodGroup comes first, in path order; its parent is defined in a later file.
    dir.write(
        "a-groups.yaml",
        &docs(&[
            pod_group(
                "workers",
                "{schedulingPolicy: {gang: {minCount: 4}}, parentCompositePodGroupName: replica}",
            ),
            composite_group(
                "replica",
                "{schedulingPolicy: {gang: {minGroupCount: 1}}, parentCompositePodGroupName: job}",
            ),
        ]),
    );
    dir.write(
        "b-root.yaml",
        &composite_group("job", "{schedulingPolicy: {gang: {minGroupCount: 1}}}"),
    );
    let loaded = load(&[Source::Path(dir.0.clone())]).unwrap();
    assert_eq!(group(&loaded, "workers").parent.as_deref(), Some("replica"));
    assert_eq!(composite(&loaded, "replica").parent.as_deref(), Some("job"));
    assert_eq!(composite(&loaded, "job").parent, None);

    // Without the root file, the missing parent is named with the file that needs it.
    let e = load(&[Source::Path(dir.0.join("a-groups.yaml"))])
        .unwrap_err()
        .to_string();
    assert_contains(
        &e,
        &[
            "a-groups.yaml (document 2)",
            "CompositePodGroup default/replica",
            "field spec.parentCompositePodGroupName",
            "the parent CompositePodGroup default/job is not defined",
            "define it in namespace default or remove the field",
        ],
    );
}

#[test]
fn a_tree_of_exactly_four_levels_is_fine() {
    let text = docs(&[
        composite_group("l1", "{schedulingPolicy: {basic: {}}}"),
        composite_group(
            "l2",
            "{schedulingPolicy: {basic: {}}, parentCompositePodGroupName: l1}",
        ),
        composite_group(
            "l3",
            "{schedulingPolicy: {basic: {}}, parentCompositePodGroupName: l2}",
        ),
        pod_group(
            "l4",
            "{schedulingPolicy: {basic: {}}, parentCompositePodGroupName: l3}",
        ),
    ]);
    let loaded = ok(&text);
    assert_eq!(loaded.cluster.composite_pod_groups.len(), 3);
    assert_eq!(group(&loaded, "l4").parent.as_deref(), Some("l3"));
}

#[test]
fn other_versions_of_workload_kinds_are_skipped_with_a_warning() {
    let text = pod_group("old", "{schedulingPolicy: {basic: {}}}").replace("v1beta1", "v1alpha2");
    let loaded = ok(&text);
    assert!(loaded.cluster.pod_groups.is_empty());
    assert_eq!(
        loaded.warnings,
        [
            "warning: ignoring unsupported kind PodGroup \"old\" (apiVersion \
             scheduling.k8s.io/v1alpha2; lockstep reads scheduling.k8s.io/v1beta1 and \
             scheduling.k8s.io/v1alpha3) in test.yaml (document 1)"
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Invalid objects
// ---------------------------------------------------------------------------------------

#[test]
fn scheduling_policy_is_exactly_one_of_basic_and_gang() {
    let e = err(&pod_group("pg", "{}"));
    assert_contains(
        &e,
        &[
            "test.yaml (document 1): PodGroup default/pg: field spec.schedulingPolicy:",
            "neither basic nor gang is set",
            "basic: {}",
            "gang: {minCount: N}",
        ],
    );
    let e = err(&pod_group(
        "pg",
        "{schedulingPolicy: {basic: {}, gang: {minCount: 2}}}",
    ));
    assert_contains(
        &e,
        &[
            "field spec.schedulingPolicy:",
            "basic and gang are both set; keep exactly one of them",
        ],
    );
    let e = err(&pod_group("pg", "{schedulingPolicy: {basic: true}}"));
    assert_contains(
        &e,
        &[
            "field spec.schedulingPolicy.basic:",
            "expected an empty mapping, found a boolean",
        ],
    );
    let e = err(&composite_group("c", "{schedulingPolicy: {}}"));
    assert_contains(
        &e,
        &[
            "CompositePodGroup default/c: field spec.schedulingPolicy:",
            "gang: {minGroupCount: N}",
        ],
    );
}

#[test]
fn gang_minimums_are_at_least_one() {
    for (spec, shown) in [
        ("{schedulingPolicy: {gang: {minCount: 0}}}", "minCount is 0"),
        (
            "{schedulingPolicy: {gang: {minCount: -3}}}",
            "minCount is -3",
        ),
        ("{schedulingPolicy: {gang: {}}}", "minCount is 0"),
    ] {
        let e = err(&pod_group("pg", spec));
        assert_contains(
            &e,
            &[
                "PodGroup default/pg: field spec.schedulingPolicy.gang.minCount:",
                shown,
                "it must be at least 1",
                "number of pods that must be placed together",
            ],
        );
    }
    let e = err(&composite_group(
        "c",
        "{schedulingPolicy: {gang: {minGroupCount: 0}}}",
    ));
    assert_contains(
        &e,
        &[
            "CompositePodGroup default/c: field spec.schedulingPolicy.gang.minGroupCount:",
            "minGroupCount is 0",
            "at least 1",
            "number of child groups",
        ],
    );
    // A wrong type names the field.
    let e = err(&pod_group(
        "pg",
        "{schedulingPolicy: {gang: {minCount: many}}}",
    ));
    assert_contains(
        &e,
        &[
            "PodGroup default/pg",
            "field spec.schedulingPolicy.gang.minCount",
        ],
    );
    let e = err(&composite_group(
        "c",
        "{schedulingPolicy: {gang: {minGroupCount: [1]}}}",
    ));
    assert_contains(
        &e,
        &[
            "CompositePodGroup default/c",
            "field spec.schedulingPolicy.gang.minGroupCount",
        ],
    );
}

#[test]
fn at_most_one_topology_constraint_with_a_key() {
    let e = err(&pod_group(
        "pg",
        "{schedulingPolicy: {basic: {}}, schedulingConstraints: {topology: [{key: a}, {key: b}]}}",
    ));
    assert_contains(
        &e,
        &[
            "PodGroup default/pg: field spec.schedulingConstraints.topology:",
            "2 topology constraints are given; at most one is allowed",
        ],
    );
    let e = err(&composite_group(
        "c",
        "{schedulingPolicy: {basic: {}}, schedulingConstraints: {topology: [{key: ''}]}}",
    ));
    assert_contains(
        &e,
        &[
            "CompositePodGroup default/c: field spec.schedulingConstraints.topology[0].key:",
            "needs a key",
            "topology.kubernetes.io/rack",
        ],
    );
    let e = err(&pod_group(
        "pg",
        "{schedulingPolicy: {basic: {}}, schedulingConstraints: {topology: [{}]}}",
    ));
    assert_contains(&e, &["spec.schedulingConstraints.topology[0].key"]);
}

#[test]
fn disruption_mode_and_preemption_policy_values() {
    let e = err(&pod_group(
        "pg",
        "{schedulingPolicy: {basic: {}}, disruptionMode: {}}",
    ));
    assert_contains(
        &e,
        &[
            "field spec.disruptionMode:",
            "neither single nor all is set",
        ],
    );
    let e = err(&composite_group(
        "c",
        "{schedulingPolicy: {basic: {}}, disruptionMode: {single: {}, all: {}}}",
    ));
    assert_contains(
        &e,
        &[
            "CompositePodGroup default/c: field spec.disruptionMode:",
            "single and all are both set",
        ],
    );
    let e = err(&pod_group(
        "pg",
        "{schedulingPolicy: {basic: {}}, preemptionPolicy: Sometimes}",
    ));
    assert_contains(
        &e,
        &[
            "field spec.preemptionPolicy:",
            "invalid preemptionPolicy \"Sometimes\"; use PreemptLowerPriority or Never",
        ],
    );
}

#[test]
fn resource_claims_need_a_unique_name_and_one_source() {
    let claims = |list: &str| {
        err(&pod_group(
            "pg",
            &format!("{{schedulingPolicy: {{basic: {{}}}}, resourceClaims: {list}}}"),
        ))
    };
    assert_contains(
        &claims("[{resourceClaimName: c}]"),
        &["field spec.resourceClaims[0].name:", "needs a name"],
    );
    assert_contains(
        &claims("[{name: gpu}]"),
        &[
            "field spec.resourceClaims[0]:",
            "set exactly one of resourceClaimName and resourceClaimTemplateName",
        ],
    );
    assert_contains(
        &claims("[{name: gpu, resourceClaimName: c, resourceClaimTemplateName: t}]"),
        &["set exactly one of resourceClaimName and resourceClaimTemplateName"],
    );
    assert_contains(
        &claims("[{name: gpu, resourceClaimName: c}, {name: gpu, resourceClaimName: d}]"),
        &[
            "field spec.resourceClaims[1].name:",
            "claim name \"gpu\" is also used by spec.resourceClaims[0]",
        ],
    );
}

#[test]
fn parent_must_be_a_composite_pod_group_of_the_same_namespace() {
    let e = err(&pod_group(
        "pg",
        "{schedulingPolicy: {basic: {}}, parentCompositePodGroupName: nowhere}",
    ));
    assert_contains(
        &e,
        &[
            "test.yaml (document 1): PodGroup default/pg: field spec.parentCompositePodGroupName:",
            "the parent CompositePodGroup default/nowhere is not defined",
            "define it in namespace default or remove the field",
        ],
    );

    // A CompositePodGroup of that name in another namespace does not count.
    let text = docs(&[
        composite_group("job", "{schedulingPolicy: {basic: {}}}")
            .replace("name: job}", "name: job, namespace: other}"),
        pod_group(
            "pg",
            "{schedulingPolicy: {basic: {}}, parentCompositePodGroupName: job}",
        ),
    ]);
    assert_contains(
        &err(&text),
        &[
            "test.yaml (document 2): PodGroup default/pg",
            "CompositePodGroup default/job is not defined",
        ],
    );

    // A PodGroup cannot be a parent.
    let text = docs(&[
        pod_group("leader", "{schedulingPolicy: {basic: {}}}"),
        pod_group(
            "pg",
            "{schedulingPolicy: {basic: {}}, parentCompositePodGroupName: leader}",
        ),
    ]);
    assert_contains(
        &err(&text),
        &[
            "CompositePodGroup default/leader is not defined",
            "PodGroup default/leader exists, but only a CompositePodGroup can be a parent",
        ],
    );
}

#[test]
fn parent_cycles_are_errors() {
    let text = docs(&[
        pod_group(
            "pg",
            "{schedulingPolicy: {basic: {}}, parentCompositePodGroupName: b}",
        ),
        composite_group(
            "a",
            "{schedulingPolicy: {basic: {}}, parentCompositePodGroupName: b}",
        ),
        composite_group(
            "b",
            "{schedulingPolicy: {basic: {}}, parentCompositePodGroupName: c}",
        ),
        composite_group(
            "c",
            "{schedulingPolicy: {basic: {}}, parentCompositePodGroupName: a}",
        ),
    ]);
    assert_contains(
        &err(&text),
        &[
            "test.yaml (document 2): CompositePodGroup default/a: field \
             spec.parentCompositePodGroupName:",
            "the parent chain loops back to this CompositePodGroup: a -> b -> c -> a",
            "cannot be its own ancestor",
        ],
    );
    let own = composite_group(
        "self",
        "{schedulingPolicy: {basic: {}}, parentCompositePodGroupName: self}",
    );
    assert_contains(
        &err(&own),
        &["CompositePodGroup default/self", "self -> self"],
    );
}

#[test]
fn group_trees_are_at_most_four_levels_deep() {
    let chain = |levels: usize, leaf_is_pod_group: bool| {
        let mut parts = vec![composite_group("c1", "{schedulingPolicy: {basic: {}}}")];
        for i in 2..levels {
            parts.push(composite_group(
                &format!("c{i}"),
                &format!(
                    "{{schedulingPolicy: {{basic: {{}}}}, parentCompositePodGroupName: c{}}}",
                    i - 1
                ),
            ));
        }
        let leaf_spec = format!(
            "{{schedulingPolicy: {{basic: {{}}}}, parentCompositePodGroupName: c{}}}",
            levels - 1
        );
        parts.push(if leaf_is_pod_group {
            pod_group("leaf", &leaf_spec)
        } else {
            composite_group(&format!("c{levels}"), &leaf_spec)
        });
        docs(&parts)
    };
    ok(&chain(4, true));
    ok(&chain(4, false));

    assert_contains(
        &err(&chain(5, true)),
        &[
            "test.yaml (document 5): PodGroup default/leaf: field \
             spec.parentCompositePodGroupName:",
            "this group is at level 5 of its group tree (leaf -> c4 -> c3 -> c2 -> c1, up to \
             the root); at most 4 levels are allowed",
        ],
    );
    // The first composite that is too deep is reported, before the PodGroups below it.
    assert_contains(
        &err(&chain(7, true)),
        &[
            "test.yaml (document 5): CompositePodGroup default/c5",
            "at level 5 of its group tree (c5 -> c4 -> c3 -> c2 -> c1, up to the root)",
        ],
    );
    assert_contains(
        &err(&chain(5, false)),
        &[
            "CompositePodGroup default/c5",
            "at level 5 of its group tree",
        ],
    );
}

#[test]
fn the_reported_level_counts_beyond_the_shown_chain() {
    // Declared bottom-up, the deepest composite comes first in the input and is reported with
    // its full level, although the message shows only the first five names of its chain.
    let mut parts = Vec::new();
    for i in (2..=6).rev() {
        parts.push(composite_group(
            &format!("c{i}"),
            &format!(
                "{{schedulingPolicy: {{basic: {{}}}}, parentCompositePodGroupName: c{}}}",
                i - 1
            ),
        ));
    }
    parts.push(composite_group("c1", "{schedulingPolicy: {basic: {}}}"));
    assert_contains(
        &err(&docs(&parts)),
        &[
            "test.yaml (document 1): CompositePodGroup default/c6",
            "at level 6 of its group tree (c6 -> c5 -> c4 -> c3 -> c2 -> ..., up to the root)",
        ],
    );
}

#[test]
fn duplicates_are_errors_across_versions() {
    let beta = pod_group("pg", "{schedulingPolicy: {basic: {}}}");
    let alpha = beta.replace("v1beta1", "v1alpha3");
    assert_contains(
        &err(&docs(&[beta.clone(), alpha])),
        &[
            "PodGroup default/pg is defined twice, in test.yaml (document 1) and in test.yaml \
             (document 2); remove one of them",
        ],
    );
    let c = composite_group("c", "{schedulingPolicy: {basic: {}}}");
    assert_contains(
        &err(&docs(&[c.clone(), c.clone()])),
        &["CompositePodGroup default/c is defined twice"],
    );
    let w = workload("{podGroupTemplates: [{name: t, schedulingPolicy: {basic: {}}}]}");
    assert_contains(
        &err(&docs(&[w.clone(), w.clone()])),
        &["Workload default/w is defined twice"],
    );
    // The same name for different kinds, or in different namespaces, is fine.
    let same_name = docs(&[
        beta.clone(),
        composite_group("pg", "{schedulingPolicy: {basic: {}}}"),
        beta.replace("name: pg}", "name: pg, namespace: other}"),
    ]);
    let loaded = ok(&same_name);
    assert_eq!(loaded.cluster.pod_groups.len(), 2);
    assert_eq!(loaded.cluster.composite_pod_groups.len(), 1);
}

// ---------------------------------------------------------------------------------------
// Invalid Workloads
// ---------------------------------------------------------------------------------------

fn templates(n: usize, prefix: &str) -> String {
    let items: Vec<String> = (0..n)
        .map(|i| format!("{{name: {prefix}{i}, schedulingPolicy: {{basic: {{}}}}}}"))
        .collect();
    format!("[{}]", items.join(", "))
}

#[test]
fn workload_holds_exactly_one_template_list() {
    assert_contains(
        &err(&workload("{}")),
        &[
            "test.yaml (document 1): Workload default/w: field spec:",
            "a Workload needs podGroupTemplates or compositePodGroupTemplates",
        ],
    );
    let both = format!(
        "{{podGroupTemplates: {}, compositePodGroupTemplates: [{{name: c, \
         schedulingPolicy: {{basic: {{}}}}, podGroupTemplates: {}}}]}}",
        templates(1, "a"),
        templates(1, "b")
    );
    assert_contains(
        &err(&workload(&both)),
        &[
            "Workload default/w: field spec:",
            "podGroupTemplates and compositePodGroupTemplates are both set",
        ],
    );
}

#[test]
fn workload_lists_hold_at_most_eight_templates() {
    ok(&workload(&format!(
        "{{podGroupTemplates: {}}}",
        templates(8, "t")
    )));
    assert_contains(
        &err(&workload(&format!(
            "{{podGroupTemplates: {}}}",
            templates(9, "t")
        ))),
        &[
            "Workload default/w: field spec.podGroupTemplates:",
            "9 templates are given; at most 8 are allowed",
        ],
    );
    let nested = format!(
        "{{compositePodGroupTemplates: [{{name: c, schedulingPolicy: {{basic: {{}}}}, \
         podGroupTemplates: {}, compositePodGroupTemplates: {}}}]}}",
        templates(1, "p"),
        templates(9, "n")
    );
    assert_contains(
        &err(&workload(&nested)),
        &[
            "field spec.compositePodGroupTemplates[0].compositePodGroupTemplates:",
            "9 templates are given",
        ],
    );
}

/// A Workload whose template tree has `levels` levels: composites down to one PodGroupTemplate.
fn deep_workload(levels: usize) -> String {
    let mut inner = "podGroupTemplates: [{name: leaf, schedulingPolicy: {basic: {}}}]".to_string();
    for i in (1..levels).rev() {
        inner = format!(
            "compositePodGroupTemplates: [{{name: c{i}, schedulingPolicy: {{basic: {{}}}}, {inner}}}]"
        );
    }
    workload(&format!("{{{inner}}}"))
}

#[test]
fn workload_template_trees_are_at_most_four_levels_deep() {
    let loaded = ok(&deep_workload(4));
    let w = &loaded.cluster.workloads[0];
    assert_eq!(w.composite_pod_group_templates, ["c1", "c2", "c3"]);
    assert_eq!(w.pod_group_templates, ["leaf"]);

    assert_contains(
        &err(&deep_workload(5)),
        &[
            "Workload default/w: field spec.compositePodGroupTemplates[0]\
             .compositePodGroupTemplates[0].compositePodGroupTemplates[0]\
             .compositePodGroupTemplates[0].podGroupTemplates:",
            "these templates are at level 5 of the template tree; at most 4 levels are allowed",
        ],
    );
}

#[test]
fn workload_template_names_are_required_and_unique() {
    let dup = "{compositePodGroupTemplates: [{name: replica, schedulingPolicy: {basic: {}}, \
               podGroupTemplates: [{name: workers, schedulingPolicy: {basic: {}}}, \
               {name: replica, schedulingPolicy: {basic: {}}}]}]}";
    assert_contains(
        &err(&workload(dup)),
        &[
            "field spec.compositePodGroupTemplates[0].podGroupTemplates[1].name:",
            "template name \"replica\" is also used by spec.compositePodGroupTemplates[0]",
            "unique in the whole Workload",
        ],
    );
    assert_contains(
        &err(&workload(
            "{podGroupTemplates: [{schedulingPolicy: {basic: {}}}]}",
        )),
        &["field spec.podGroupTemplates[0].name:", "needs a name"],
    );
}

#[test]
fn workload_templates_are_validated_like_groups() {
    assert_contains(
        &err(&workload(
            "{compositePodGroupTemplates: [{name: c, schedulingPolicy: {basic: {}}}]}",
        )),
        &[
            "field spec.compositePodGroupTemplates[0]:",
            "a CompositePodGroupTemplate needs podGroupTemplates or compositePodGroupTemplates",
        ],
    );
    assert_contains(
        &err(&workload(
            "{podGroupTemplates: [{name: t, schedulingPolicy: {gang: {minCount: 0}}}]}",
        )),
        &[
            "field spec.podGroupTemplates[0].schedulingPolicy.gang.minCount:",
            "at least 1",
        ],
    );
    assert_contains(
        &err(&workload(
            "{compositePodGroupTemplates: [{name: c, schedulingPolicy: {gang: {}}, \
             podGroupTemplates: [{name: t, schedulingPolicy: {basic: {}}}]}]}",
        )),
        &[
            "field spec.compositePodGroupTemplates[0].schedulingPolicy.gang.minGroupCount:",
            "minGroupCount is 0",
        ],
    );
    assert_contains(
        &err(&workload("{podGroupTemplates: [{name: t}]}")),
        &[
            "field spec.podGroupTemplates[0].schedulingPolicy:",
            "neither basic nor gang is set",
        ],
    );
    assert_contains(
        &err(&workload(
            "{podGroupTemplates: [{name: t, schedulingPolicy: {basic: {}}, \
             schedulingConstraints: {topology: [{key: a}, {key: b}]}}]}",
        )),
        &[
            "field spec.podGroupTemplates[0].schedulingConstraints.topology:",
            "at most one",
        ],
    );
    assert_contains(
        &err(&workload(
            "{podGroupTemplates: [{name: t, schedulingPolicy: {basic: {}}, disruptionMode: {}}]}",
        )),
        &["field spec.podGroupTemplates[0].disruptionMode:"],
    );
    assert_contains(
        &err(&workload(
            "{podGroupTemplates: [{name: t, schedulingPolicy: {basic: {}}, \
             preemptionPolicy: Always}]}",
        )),
        &[
            "field spec.podGroupTemplates[0].preemptionPolicy:",
            "\"Always\"",
        ],
    );
    assert_contains(
        &err(&workload(
            "{podGroupTemplates: [{name: t, schedulingPolicy: {basic: {}}, \
             resourceClaims: [{name: gpu}]}]}",
        )),
        &["field spec.podGroupTemplates[0].resourceClaims[0]:"],
    );
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("manifests-{name}"));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn write(&self, rel: &str, text: &str) {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
