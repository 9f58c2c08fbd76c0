//! Device taints (NoSchedule, NoExecute) and request tolerations.

mod common;

use common::*;
use lockstep_model::TaintEffect;
use lockstep_model::dra::ExactDeviceRequest;

fn world(effect: TaintEffect) -> World {
    let mut w = World::new();
    w.nodes = vec![node("node-a", &[])];
    let mut bad = gpu("gpu-0", "A", 80, "pci0", 0);
    bad.taints = vec![taint("example.com/unhealthy", effect)];
    w.slices = vec![slice_on(
        "a",
        "node-a",
        "node-a",
        vec![bad, gpu("gpu-1", "A", 80, "pci0", 0)],
    )];
    w
}

fn pick(w: &World, e: ExactDeviceRequest) -> Option<Vec<String>> {
    let mut w = w.clone();
    w.templates = vec![template("t", vec![request("gpu", e)], vec![])];
    let st = w.state();
    st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
        .ok()
        .map(|a| devices_of(&st, &a))
}

fn tolerating(
    mut e: ExactDeviceRequest,
    key: &str,
    effect: Option<TaintEffect>,
) -> ExactDeviceRequest {
    e.tolerations.push(tolerate(key, effect));
    e
}

#[test]
fn tainted_devices_are_skipped() {
    for effect in [TaintEffect::NoSchedule, TaintEffect::NoExecute] {
        let w = world(effect);
        assert_eq!(pick(&w, exact("gpu", 1)).unwrap(), ["gpu-1"]);
        assert_eq!(pick(&w, exact("gpu", 2)), None);
    }
}

#[test]
fn tolerated_taints_do_not_block() {
    let w = world(TaintEffect::NoSchedule);
    assert_eq!(
        pick(
            &w,
            tolerating(exact("gpu", 1), "example.com/unhealthy", None)
        )
        .unwrap(),
        ["gpu-0"]
    );
    assert_eq!(
        pick(
            &w,
            tolerating(
                exact("gpu", 2),
                "example.com/unhealthy",
                Some(TaintEffect::NoSchedule)
            )
        )
        .unwrap(),
        ["gpu-0", "gpu-1"]
    );
    // Exists with an empty key tolerates everything.
    assert_eq!(
        pick(&w, tolerating(exact("gpu", 2), "", None))
            .unwrap()
            .len(),
        2
    );
    // A toleration for another effect or key does not.
    assert_eq!(
        pick(
            &w,
            tolerating(
                exact("gpu", 2),
                "example.com/unhealthy",
                Some(TaintEffect::NoExecute)
            )
        ),
        None
    );
    assert_eq!(pick(&w, tolerating(exact("gpu", 2), "other", None)), None);
}

#[test]
fn other_effects_do_not_block() {
    let w = world(TaintEffect::PreferNoSchedule);
    assert_eq!(pick(&w, exact("gpu", 2)).unwrap().len(), 2);
}

#[test]
fn all_mode_skips_tainted_devices() {
    let w = world(TaintEffect::NoExecute);
    assert_eq!(pick(&w, all("gpu")).unwrap(), ["gpu-1"]);
}
