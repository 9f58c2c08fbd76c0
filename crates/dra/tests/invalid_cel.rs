//! CEL: expressions that do not compile are bad input naming the object and field; errors while
//! evaluating exclude the device and are reported with the expression and the device.

mod common;

use common::*;
use lockstep_dra::{DraError, DraState, UnfitReason};

fn world() -> World {
    let mut w = World::new();
    w.nodes = vec![node("node-a", &[])];
    w.slices = vec![slice_on(
        "a",
        "node-a",
        "node-a",
        vec![device("gpu-0", &[]), gpu("gpu-1", "A100", 80, "pci0", 0)],
    )];
    w
}

#[test]
fn a_class_selector_that_does_not_compile_names_the_class() {
    let mut w = world();
    w.classes
        .push(class("broken", &["device.driver ==", "true"]));
    let e = DraState::new(w.inputs()).unwrap_err();
    match &e {
        DraError::InvalidSelector {
            object,
            field,
            expression,
            ..
        } => {
            assert_eq!(object, "DeviceClass broken");
            assert_eq!(field, "spec.selectors[0].cel.expression");
            assert_eq!(expression, "device.driver ==");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(e.to_string().contains("invalid CEL expression"), "{e}");
}

#[test]
fn a_claim_selector_that_does_not_compile_names_the_claim_and_field() {
    let mut w = world();
    w.claims = vec![claim(
        "c",
        vec![first_available(
            "gpu",
            vec![
                ("a", exact("gpu", 1)),
                ("b", selecting(exact("gpu", 1), &["dev.driver == 'x'"])),
            ],
        )],
        vec![],
    )];
    let e = DraState::new(w.inputs()).unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("ResourceClaim default/c: spec.devices.requests[0].firstAvailable[1].selectors[0].cel.expression"), "{text}");
    assert!(text.contains("undeclared reference to 'dev'"), "{text}");
}

#[test]
fn template_errors_use_the_template_field_path() {
    let mut w = world();
    w.templates = vec![template(
        "t",
        vec![request(
            "gpu",
            selecting(exact("gpu", 1), &["device.attributes["]),
        )],
        vec![],
    )];
    let text = DraState::new(w.inputs()).unwrap_err().to_string();
    assert!(text.contains("ResourceClaimTemplate default/t: spec.spec.devices.requests[0].exactly.selectors[0].cel.expression"), "{text}");
}

#[test]
fn too_long_or_too_costly_expressions_are_rejected() {
    let mut w = world();
    let long = format!("device.driver == '{}'", "x".repeat(11 * 1024));
    w.classes.push(class("long", &[&long]));
    assert!(
        DraState::new(w.inputs())
            .unwrap_err()
            .to_string()
            .contains("limit")
    );
    let mut w = world();
    let list = (0..100)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let costly = format!("[{list}].all(a, [{list}].all(b, [{list}].all(c, a + b + c >= 0)))");
    w.classes.push(class("costly", &[&costly]));
    assert!(
        DraState::new(w.inputs())
            .unwrap_err()
            .to_string()
            .contains("cost")
    );
}

#[test]
fn an_evaluation_error_excludes_the_device_and_is_reported() {
    let mut w = world();
    // gpu-0 has no model attribute: looking it up is an error for gpu-0 only.
    w.classes.push(class(
        "a100",
        &["device.attributes['gpu.example.com'].model == 'A100'"],
    ));
    w.templates = vec![
        template("one", vec![request("gpu", exact("a100", 1))], vec![]),
        template("two", vec![request("gpu", exact("a100", 2))], vec![]),
    ];
    let st = w.state();
    let n = node_id(&w, "node-a");
    let a = st.try_allocate(n, &[template_ref(&st, "one")]).unwrap();
    assert_eq!(devices_of(&st, &a), ["gpu-1"]);
    let e = st.try_allocate(n, &[template_ref(&st, "two")]).unwrap_err();
    assert_eq!(e.reason, UnfitReason::CannotAllocateAllClaims);
    let detail = e.detail.expect("the CEL error is reported");
    assert!(
        detail.contains("device.attributes['gpu.example.com'].model == 'A100'"),
        "{detail}"
    );
    assert!(detail.contains("gpu.example.com/node-a/gpu-0"), "{detail}");
    assert!(detail.contains("model"), "{detail}");
}

#[test]
fn has_guards_against_missing_attributes() {
    let mut w = world();
    w.classes.push(class(
        "a100",
        &["has(device.attributes['gpu.example.com'].model) && device.attributes['gpu.example.com'].model == 'A100'"],
    ));
    w.templates = vec![template(
        "two",
        vec![request("gpu", exact("a100", 2))],
        vec![],
    )];
    let st = w.state();
    let e = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "two")])
        .unwrap_err();
    assert_eq!(e.detail, None);
}

#[test]
fn a_non_boolean_result_is_an_evaluation_error() {
    let mut w = world();
    w.classes.push(class("weird", &["device.driver"]));
    w.templates = vec![template(
        "t",
        vec![request("gpu", exact("weird", 1))],
        vec![],
    )];
    let st = w.state();
    let e = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
        .unwrap_err();
    assert!(e.detail.unwrap().contains("bool"));
}
