//! lockstep against the real kube-scheduler v1.37, decision by decision: every scenario
//! fixture that runs with kube-scheduler's defaults and a set of random small clusters.
//! Any placement or victim difference not listed (with its reason) in
//! `lockstep_kube_compare::known` fails, and so does a listed one that no longer occurs.
//!
//! The full run over 500 random clusters is the `lockstep-kube-compare` tool
//! (BENCHMARKS.md); this test keeps every change honest on a smaller set.

use lockstep_kube_compare::compare::{Case, CaseReport, run_case};
use lockstep_kube_compare::known::Audit;
use lockstep_kube_compare::summary::Summary;
use lockstep_kube_compare::{fixtures, generate};
use lockstep_testenv::objects::Loader;
use lockstep_testenv::{ControlPlane, Options};

/// Random clusters per run, and their seed (the same clusters every run).
const RANDOM_CASES: u64 = 20;
const SEED: u64 = 7;

async fn run(cases: &[Case]) -> Vec<CaseReport> {
    let plane = ControlPlane::start(Options {
        kube_scheduler: true,
        ..Options::default()
    })
    .expect("the test control plane starts (testenv/, built from Go modules)");
    let client = plane
        .client()
        .await
        .expect("a client of the test control plane");
    let loader = Loader::new(client).await.expect("API discovery");
    let mut reports = Vec::new();
    for case in cases {
        reports.push(run_case(&loader, case).await);
    }
    reports
}

fn check(reports: &[CaseReport]) {
    let summary = Summary::new(reports);
    eprint!("{}", summary.text());
    let audit = Audit::new(reports);
    let mut problems = Vec::new();
    for f in &audit.failed {
        problems.push(format!("case not run: {f}"));
    }
    for u in &audit.unexplained {
        problems.push(format!("differs from kube-scheduler: {u}"));
    }
    for s in &audit.stale {
        problems.push(format!("stale entry in known.rs: {s}"));
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(summary.decisions > 0, "no decision was compared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_and_random_clusters_agree_with_kube_scheduler() {
    let mut cases = fixtures::load(&fixtures::scenarios_dir()).expect("the scenario fixtures");
    assert!(cases.len() >= 50, "only {} fixtures found", cases.len());
    for i in 0..RANDOM_CASES {
        cases.push(Case {
            name: format!("random-{SEED}-{i}"),
            objects: generate::cluster(SEED, i),
        });
    }
    check(&run(&cases).await);
}
