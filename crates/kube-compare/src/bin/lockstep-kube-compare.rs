//! `lockstep-kube-compare`: lockstep against the real kube-scheduler v1.37, decision
//! by decision, over the scenario fixtures and random small clusters.
//!
//! ```text
//! lockstep-kube-compare [--fixtures] [--random N] [--seed S] [--only TEXT ...] [--json FILE]
//!                       [--differences] [--dump DIR]
//! ```

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use lockstep_kube_compare::compare::{Case, CaseReport, Verdict, run_case};
use lockstep_kube_compare::summary::Summary;
use lockstep_kube_compare::{fixtures, generate};
use lockstep_testenv::objects::Loader;
use lockstep_testenv::{ControlPlane, Options};

#[derive(Parser)]
#[command(about = "Compare lockstep with the real kube-scheduler v1.37, decision by decision")]
struct Args {
    /// Compare on the scenario fixtures that use only kube-scheduler's defaults.
    #[arg(long)]
    fixtures: bool,
    /// Compare on N random small clusters.
    #[arg(long, value_name = "N", default_value_t = 0)]
    random: u64,
    /// Seed of the random clusters.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write every decision of every case to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Print every decision that is not the same (or a tie).
    #[arg(long)]
    differences: bool,
    /// Write the input of every differing placement to DIR/<case>-<pod>.yaml, ready for
    /// `lockstep schedule -f`.
    #[arg(long, value_name = "DIR")]
    dump: Option<PathBuf>,
    /// Only the cases whose name contains one of these strings.
    #[arg(long, value_name = "TEXT")]
    only: Vec<String>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    let mut cases: Vec<Case> = Vec::new();
    if args.fixtures {
        cases.extend(fixtures::load(&fixtures::scenarios_dir()).map_err(anyhow::Error::msg)?);
    }
    for i in 0..args.random {
        cases.push(Case {
            name: format!("random-{}-{i}", args.seed),
            objects: generate::cluster(args.seed, i),
        });
    }
    if !args.only.is_empty() {
        cases.retain(|c| args.only.iter().any(|o| c.name.contains(o.as_str())));
    }
    anyhow::ensure!(
        !cases.is_empty(),
        "nothing to compare: give --fixtures and/or --random N"
    );
    let plane = ControlPlane::start(Options {
        kube_scheduler: true,
        ..Options::default()
    })?;
    let loader = Loader::new(plane.client().await?).await?;
    let mut reports: Vec<CaseReport> = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let r = run_case(&loader, case).await;
        eprint!("\r{}/{} cases", i + 1, cases.len());
        reports.push(r);
    }
    eprintln!();
    if args.differences {
        for r in &reports {
            for d in r
                .decisions
                .iter()
                .filter(|d| !matches!(d.verdict, Verdict::Same | Verdict::Tie))
            {
                println!("{}: {}", r.name, serde_json::to_string(d)?);
            }
        }
    }
    if let Some(dir) = &args.dump {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for r in &reports {
            for d in &r.decisions {
                if let Some(input) = &d.input {
                    let file = dir.join(format!("{}-{}.yaml", r.name, d.pod.replace('/', "-")));
                    std::fs::write(&file, input)
                        .with_context(|| format!("writing {}", file.display()))?;
                }
            }
        }
    }
    print!("{}", Summary::new(&reports).text());
    if let Some(path) = args.json {
        std::fs::write(&path, serde_json::to_string_pretty(&reports)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
