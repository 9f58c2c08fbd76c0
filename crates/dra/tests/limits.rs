//! Too many devices for one claim, and the bound on the search.

mod common;

use common::*;
use lockstep_dra::{DraState, Limits, UnfitReason};

fn node_with(n: usize, attr: impl Fn(usize) -> lockstep_model::dra::AttributeValue) -> World {
    let mut w = World::new();
    w.nodes = vec![node("node-a", &[])];
    w.slices = vec![slice_on(
        "a",
        "node-a",
        "node-a",
        (0..n)
            .map(|i| device(&format!("d{i:02}"), &[("group", attr(i))]))
            .collect(),
    )];
    w
}

#[test]
fn more_than_32_devices_in_one_claim_is_refused() {
    let mut w = node_with(40, |_| int(0));
    w.templates = vec![
        template("33", vec![request("gpu", exact("gpu", 33))], vec![]),
        template(
            "20+20",
            vec![
                request("a", exact("gpu", 20)),
                request("b", exact("gpu", 20)),
            ],
            vec![],
        ),
        template("all", vec![request("gpu", all("gpu"))], vec![]),
        template("32", vec![request("gpu", exact("gpu", 32))], vec![]),
    ];
    let st = w.state();
    let n = node_id(&w, "node-a");
    for t in ["33", "20+20", "all"] {
        let e = st.try_allocate(n, &[template_ref(&st, t)]).unwrap_err();
        assert_eq!(e.reason, UnfitReason::CannotAllocateAllClaims, "{t}");
        assert!(
            e.to_string().contains("exceeds the claim limit of 32"),
            "{t}: {e}"
        );
    }
    assert!(st.try_allocate(n, &[template_ref(&st, "32")]).is_ok());
}

#[test]
fn a_subrequest_within_the_limit_is_chosen() {
    let mut w = node_with(40, |_| int(0));
    w.templates = vec![template(
        "t",
        vec![first_available(
            "gpu",
            vec![("many", exact("gpu", 40)), ("few", exact("gpu", 2))],
        )],
        vec![],
    )];
    let st = w.state();
    let a = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
        .unwrap();
    assert_eq!(picked(&st, &a), ["gpu/few=d00", "gpu/few=d01"]);
}

#[test]
fn the_search_stops_at_its_bound_with_a_clear_reason() {
    // 24 devices in 12 groups of two; 13 distinct groups cannot exist, but proving it takes
    // far more steps than the bound.
    let mut w = node_with(24, |i| int((i / 2) as i64));
    w.templates = vec![template(
        "t",
        vec![request("gpu", exact("gpu", 13))],
        vec![distinct_attr("gpu.example.com/group", &[])],
    )];
    let st = DraState::with_limits(
        w.inputs(),
        Limits {
            max_search_steps: 10_000,
        },
    )
    .unwrap();
    let started = std::time::Instant::now();
    let e = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
        .unwrap_err();
    assert_eq!(e.reason, UnfitReason::SearchBoundExceeded);
    assert!(
        e.to_string()
            .contains("gave up after 10000 steps on node node-a"),
        "{e}"
    );
    assert!(started.elapsed().as_secs() < 5);
    // The default bound stops a larger instance (16 groups of two, 17 wanted).
    let mut w = node_with(32, |i| int((i / 2) as i64));
    w.templates = vec![template(
        "t",
        vec![request("gpu", exact("gpu", 17))],
        vec![distinct_attr("gpu.example.com/group", &[])],
    )];
    let st = w.state();
    let e = st
        .try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
        .unwrap_err();
    assert_eq!(e.reason, UnfitReason::SearchBoundExceeded);
}

#[test]
fn a_small_bound_still_allows_easy_allocations() {
    let mut w = node_with(8, |i| int(i as i64));
    w.templates = vec![template("t", vec![request("gpu", exact("gpu", 4))], vec![])];
    let st = DraState::with_limits(
        w.inputs(),
        Limits {
            max_search_steps: 5,
        },
    )
    .unwrap();
    assert!(
        st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
            .is_ok()
    );
    let st = DraState::with_limits(
        w.inputs(),
        Limits {
            max_search_steps: 4,
        },
    )
    .unwrap();
    assert_eq!(
        st.try_allocate(node_id(&w, "node-a"), &[template_ref(&st, "t")])
            .unwrap_err()
            .reason,
        UnfitReason::SearchBoundExceeded
    );
}
