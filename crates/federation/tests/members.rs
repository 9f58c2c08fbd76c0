//! Members loaded once and run on ([`load_members`], [`schedule_with`]) give what
//! [`schedule`] gives, and members loaded for other bindings are refused.

use std::path::{Path, PathBuf};

use lockstep_federation::{Options, load, load_members, schedule, schedule_with};
use lockstep_manifests::Source;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/federation/member-node-level")
}

fn options() -> Options {
    Options {
        preemption: true,
        members: vec![(
            "m1".to_string(),
            vec![Source::Path(fixture().join("member"))],
        )],
        ..Options::default()
    }
}

fn federation() -> lockstep_federation::model::Federation {
    load(&[Source::Path(fixture().join("input.yaml"))])
        .expect("fixture loads")
        .federation
}

#[test]
fn a_run_on_members_loaded_beforehand_decides_as_a_whole_run() {
    let fed = federation();
    let whole = schedule(&fed, &options()).expect("schedules");
    let members = load_members(&fed, &options()).expect("members load");
    let split = schedule_with(fed.clone(), &options(), members).expect("schedules");
    assert_eq!(whole, split);
    assert!(
        split.estimates.iter().any(|e| e.source == "member"),
        "the member's own estimate is used"
    );
}

#[test]
fn members_loaded_for_other_bindings_are_refused() {
    let fed = federation();
    let members = load_members(&fed, &options()).expect("members load");
    let mut other = fed.clone();
    other.bindings.pop();
    let e = schedule_with(other, &options(), members).unwrap_err();
    assert!(
        e.to_string()
            .contains("loaded for other clusters or bindings"),
        "{e}"
    );
}
