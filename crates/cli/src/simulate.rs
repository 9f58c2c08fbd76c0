//! `lockstep simulate`: flags in, a trace and policies to `lockstep_sim`, the summary out and
//! the report directory written.

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use clap::ValueEnum;
use lockstep_engine::Profile;
use lockstep_sim::data::{DATA_DIR_ENV, Dataset};
use lockstep_sim::fragmentation::{self, FragmentationOptions};
use lockstep_sim::policy::{DEFAULT_COMPARE, GangPreemption, Policy, gpu_aware};
use lockstep_sim::progress::Progress;
use lockstep_sim::readers::table::read_file;
use lockstep_sim::readers::{native, openb, parse_timestamp, philly, tiresias};
use lockstep_sim::trace::limits;
use lockstep_sim::{DefaultScenario, SimOptions, Trace, report};

#[derive(Clone, Copy, ValueEnum)]
pub enum SimFormat {
    Table,
    Json,
    Yaml,
}

#[derive(clap::Args)]
pub struct SimulateArgs {
    /// Replay the Philly-derived trace (default: the built-in copy).
    #[arg(long, value_name = "CSV", num_args = 0..=1, default_missing_value = "",
          conflicts_with_all = ["tiresias", "openb", "files"], help_heading = "Trace (default: the embedded scenario)")]
    philly: Option<String>,
    /// Replay a Tiresias job CSV (default: the built-in example).
    #[arg(long, value_name = "CSV", num_args = 0..=1, default_missing_value = "",
          conflicts_with_all = ["openb", "files"], help_heading = "Trace (default: the embedded scenario)")]
    tiresias: Option<String>,
    /// Replay an Alibaba openb pod list (default: the built-in openb_pod_list_default.csv).
    #[arg(long, value_name = "CSV", num_args = 0..=1, default_missing_value = "",
          conflicts_with = "files", help_heading = "Trace (default: the embedded scenario)")]
    openb: Option<String>,
    /// Replay Kubernetes manifests whose Pods/PodGroups carry lockstep.dev/arrival and
    /// lockstep.dev/duration annotations (file, directory or - for stdin; repeatable).
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "PATH",
        help_heading = "Trace (default: the embedded scenario)"
    )]
    files: Vec<String>,
    /// With -f: a field the Kubernetes API does not define is an error, not a warning.
    #[arg(long, help_heading = "Trace options")]
    strict: bool,

    /// Seed of the embedded scenario's generator, and of the arrival order in --fragmentation.
    #[arg(long, default_value_t = 42, help_heading = "Embedded scenario")]
    seed: u64,
    /// Jobs in the embedded scenario.
    #[arg(long, default_value_t = 2000, help_heading = "Embedded scenario")]
    jobs: usize,
    /// Offered GPU load of the embedded scenario (share of GPU capacity).
    #[arg(long, default_value_t = 0.85, help_heading = "Embedded scenario")]
    load: f64,

    /// Philly: 8-GPU nodes in the cluster.
    #[arg(long, default_value_t = 64, help_heading = "Trace options")]
    gpu_nodes: usize,
    /// Philly: only jobs submitted at or after this time (YYYY-MM-DD[ HH:MM[:SS]], UTC).
    #[arg(long, value_name = "TIME", help_heading = "Trace options")]
    from: Option<String>,
    /// Philly: only jobs submitted before this time.
    #[arg(long, value_name = "TIME", help_heading = "Trace options")]
    to: Option<String>,
    /// Philly: only jobs of this virtual cluster (the `cluster` column).
    #[arg(long, value_name = "ID", help_heading = "Trace options")]
    virtual_cluster: Option<String>,
    /// Philly: at most this many jobs (the earliest submitted).
    #[arg(long, value_name = "N", help_heading = "Trace options")]
    max_jobs: Option<usize>,
    /// Tiresias: the cluster spec CSV (default: the example's cluster_spec.csv).
    #[arg(long, value_name = "CSV", help_heading = "Trace options")]
    cluster_spec: Option<PathBuf>,
    /// openb: the node list CSV (default: openb_node_list_all_node.csv).
    #[arg(long, value_name = "CSV", help_heading = "Trace options")]
    openb_nodes: Option<PathBuf>,

    /// A directory laid out as crates/sim/data (openb/, pollux-philly/, tiresias/,
    /// fgd-expected-results/) whose files replace the built-in trace data.
    #[arg(long, value_name = "DIR", env = DATA_DIR_ENV, help_heading = "Trace options")]
    data_dir: Option<PathBuf>,

    /// Seconds between scheduling cycles (default: a cycle at every arrival/completion).
    #[arg(long, value_name = "SECONDS", help_heading = "Run")]
    interval: Option<u64>,
    /// Stop at this simulated time (seconds).
    #[arg(long, value_name = "SECONDS", help_heading = "Run")]
    stop_at: Option<u64>,
    /// A KubeSchedulerConfiguration file (one profile) the policies start from.
    #[arg(long, value_name = "FILE", help_heading = "Run")]
    config: Option<PathBuf>,
    /// The policy of a single run: terms joined by +, e.g. most-allocated+no-batching.
    #[arg(
        long,
        value_name = "SPEC",
        conflicts_with = "compare",
        help_heading = "Run"
    )]
    policy: Option<String>,
    /// Run several policies on the same trace and compare them (comma-separated specs;
    /// without a value: least-allocated, most-allocated, most-allocated+gang-preemption=atomic,
    /// most-allocated+no-batching). Terms: least-allocated, most-allocated,
    /// device-fragmentation (fragmentation gradient descent as the only score), fgd (the FGD
    /// paper's score as its simulator computes it), fgd-fit (fgd counting a node's fragments
    /// in the copies of each task it holds, its cpu included), device-strategy, gang-search,
    /// batching, no-batching, preemption, no-preemption, gang-preemption=off|minimal|atomic.
    #[arg(long, value_name = "SPEC,...", num_args = 0.., value_delimiter = ',', help_heading = "Run")]
    compare: Option<Vec<String>>,
    /// Victim selection for gangs whose disruptionMode is single.
    #[arg(long, value_enum, default_value = "minimal", help_heading = "Run")]
    gang_preemption: crate::GangPreemption,
    /// Schedule every pod with a full cycle, never reusing the previous pod's result.
    #[arg(long, help_heading = "Run")]
    no_batching: bool,
    /// Never evict running pods to make room for higher-priority ones.
    #[arg(long, help_heading = "Run")]
    no_preemption: bool,
    /// Fragmentation mode (as the ATC'23 FGD paper): pods arrive in a random order (--seed)
    /// and never leave, until the GPUs they asked for reach SHARE of GPU capacity (the trace
    /// is inflated with copies of its pods when needed); reports GPU allocation against
    /// arrived demand. With --openb, the cluster defaults to the GPU nodes only and the
    /// paper's published results for the pod list are shown alongside.
    #[arg(long, value_name = "SHARE", num_args = 0..=1, default_missing_value = "1.0",
          conflicts_with_all = ["interval", "stop_at"], help_heading = "Run")]
    fragmentation: Option<f64>,
    /// With --fragmentation: replay this arrival order instead of the seeded one (columns
    /// idx,name,source_pod,num_gpu,gpu_milli: the n-th arrival is the n-th row; other names
    /// than source_pod are copies). Without PATH: the FGD paper's seed-42 run on the default
    /// pod list (fgd-seed42/arrival_order.csv), with its simulator's node tie-break ranks
    /// (fgd-seed42/node_prefix.csv); with PATH, node_prefix.csv next to it is used if present.
    #[arg(long, value_name = "PATH", num_args = 0..=1, requires = "fragmentation",
          help_heading = "Run")]
    arrival_order: Option<Option<std::path::PathBuf>>,

    /// The report directory (index.html, metrics.json, timing.json).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "lockstep-report",
        help_heading = "Output"
    )]
    out: PathBuf,
    /// Do not write the report directory.
    #[arg(long, help_heading = "Output")]
    no_report: bool,
    /// What to print: the summary table, or metrics.json (as JSON or YAML).
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        default_value = "table",
        help_heading = "Output"
    )]
    output: SimFormat,
    /// No progress bar and no summary (the report is still written).
    #[arg(short, long, help_heading = "Output")]
    quiet: bool,
}

/// A trace file's name (for messages) and text: the file given, or (when `given` is `None`
/// or empty) the built-in `dataset`, read from `--data-dir` when one is set.
fn trace_file(
    args: &SimulateArgs,
    given: Option<&std::path::Path>,
    dataset: Dataset,
) -> Result<(String, String), lockstep_sim::TraceError> {
    match given.filter(|p| !p.as_os_str().is_empty()) {
        Some(path) => Ok((path.display().to_string(), read_file(path)?)),
        None => dataset.read(args.data_dir.as_deref()),
    }
}

fn time_flag(name: &str, value: &Option<String>) -> Result<Option<i64>> {
    value
        .as_deref()
        .map(|v| {
            parse_timestamp(v).ok_or_else(|| {
                anyhow!("--{name} {v:?}: not a time; write YYYY-MM-DD or YYYY-MM-DD HH:MM[:SS]")
            })
        })
        .transpose()
}

fn load_trace(args: &SimulateArgs) -> Result<(Trace, Option<u64>)> {
    if let Some(p) = &args.philly {
        if args.gpu_nodes > limits::NODES {
            bail!(
                "--gpu-nodes {}: more than {}, the most nodes a cluster may have; give a smaller \
                 cluster (see \"Limits\" in README.md)",
                args.gpu_nodes,
                limits::NODES
            );
        }
        let from = time_flag("from", &args.from)?;
        let until = time_flag("to", &args.to)?;
        if let (Some(f), Some(u)) = (from, until)
            && f >= u
        {
            bail!(
                "--from {:?} is not before --to {:?}: no job could be selected; give a --to later than --from",
                args.from.as_deref().unwrap_or_default(),
                args.to.as_deref().unwrap_or_default()
            );
        }
        let options = philly::PhillyOptions {
            gpu_nodes: args.gpu_nodes,
            from,
            until,
            virtual_cluster: args.virtual_cluster.clone(),
            max_jobs: args.max_jobs,
            ..philly::PhillyOptions::default()
        };
        let (file, text) = trace_file(args, Some(p.as_ref()), Dataset::Philly)?;
        return Ok((philly::parse_philly(&file, &text, &options)?, None));
    }
    if args.from.is_some()
        || args.to.is_some()
        || args.virtual_cluster.is_some()
        || args.max_jobs.is_some()
    {
        bail!("--from, --to, --virtual-cluster and --max-jobs apply to --philly only");
    }
    if let Some(t) = &args.tiresias {
        let spec = match &args.cluster_spec {
            Some(p) => tiresias::read_cluster_spec(p)?,
            None if t.is_empty() => {
                let (file, text) = trace_file(args, None, Dataset::TiresiasCluster)?;
                tiresias::parse_cluster_spec(&file, &text)?
            }
            None => tiresias::ClusterSpec::default(),
        };
        let (file, text) = trace_file(args, Some(t.as_ref()), Dataset::TiresiasJobs)?;
        return Ok((tiresias::parse_tiresias(&file, &text, &spec)?, None));
    }
    if let Some(pods) = &args.openb {
        let default_nodes = if args.fragmentation.is_some() {
            Dataset::OpenbGpuNodes
        } else {
            Dataset::OpenbNodes
        };
        let (node_file, node_text) = trace_file(args, args.openb_nodes.as_deref(), default_nodes)?;
        let (pod_file, pod_text) = trace_file(args, Some(pods.as_ref()), Dataset::OpenbPods)?;
        return Ok((
            openb::parse_openb(&node_file, &node_text, &pod_file, &pod_text)?,
            None,
        ));
    }
    if !args.files.is_empty() {
        let sources: Vec<lockstep_manifests::Source> = args
            .files
            .iter()
            .map(|f| lockstep_manifests::Source::from_arg(f))
            .collect();
        let manifests = native::load_manifests(&sources, &mut std::io::stdin().lock())?;
        crate::check_unknown_fields(&manifests.unknown_fields, args.strict)?;
        for w in &manifests.warnings {
            eprintln!("{w}");
        }
        return Ok((manifests.trace, None));
    }
    if args.strict {
        bail!("--strict applies to manifests (-f) only");
    }
    if !(0.01..=10.0).contains(&args.load) {
        bail!(
            "--load {}: give the offered GPU load as a share of capacity, e.g. 0.85",
            args.load
        );
    }
    if args.jobs > limits::GENERATED_JOBS {
        bail!(
            "--jobs {}: more than {}, the most jobs the embedded scenario generates \
             (see \"Limits\" in README.md)",
            args.jobs,
            limits::GENERATED_JOBS
        );
    }
    let scenario = DefaultScenario {
        seed: args.seed,
        jobs: args.jobs,
        load: args.load,
        ..DefaultScenario::default()
    };
    Ok((scenario.build(), Some(args.seed)))
}

fn base_profile(args: &SimulateArgs) -> Result<Profile> {
    let Some(path) = &args.config else {
        return Ok(gpu_aware(Profile::default()));
    };
    let profile = crate::config::load(path)?;
    Ok(gpu_aware(profile))
}

fn policies(args: &SimulateArgs) -> Result<Vec<Policy>> {
    let base = base_profile(args)?;
    let with_flags = |mut p: Policy| {
        if args.no_batching {
            p.batching = false;
        }
        if args.no_preemption {
            p.preemption = false;
        }
        p
    };
    let gang: GangPreemption = args.gang_preemption.into();
    let specs: Vec<String> = match (&args.compare, &args.policy) {
        (Some(list), _) if list.is_empty() => {
            DEFAULT_COMPARE.iter().map(|s| s.to_string()).collect()
        }
        (Some(list), _) => list.clone(),
        (None, Some(spec)) => vec![spec.clone()],
        (None, None) => {
            let mut p = Policy::from_profile(&base);
            p.gang_preemption = gang;
            return Ok(vec![with_flags(p)]);
        }
    };
    let mut out = Vec::new();
    for spec in specs {
        let mut p = Policy::parse(&spec, &base).map_err(|e| anyhow!("--compare/--policy: {e}"))?;
        if !spec.contains("gang-preemption=") {
            p.gang_preemption = gang;
        }
        if out.iter().any(|q: &Policy| q.name == p.name) {
            bail!("--compare: policy {:?} is given twice", p.name);
        }
        out.push(with_flags(p));
    }
    Ok(out)
}

/// Checks that the report can be written to `dir` before a long run, not after: the
/// directory is created (and removed again when it did not exist) and a file is written in it.
fn check_report_dir(dir: &std::path::Path) -> Result<()> {
    let created = dir
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .last()
        .map(std::path::Path::to_path_buf);
    let probe = dir.join(".lockstep-write-check");
    let result = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&probe, b""))
        .and_then(|()| std::fs::remove_file(&probe));
    if let Some(top) = &created {
        let _ = std::fs::remove_dir_all(top);
    }
    result.map_err(|e| {
        anyhow!(
            "cannot write the report to {}: {e}; give a writable directory with --out, or --no-report",
            dir.display()
        )
    })
}

pub fn simulate(args: &SimulateArgs) -> Result<String> {
    let policies = policies(args)?;
    if !args.no_report {
        check_report_dir(&args.out)?;
    }
    let (trace, seed) = load_trace(args)?;
    let options = SimOptions {
        interval: args.interval.filter(|&i| i > 0),
        until: args.stop_at,
    };
    let mut progress = Progress::new(!args.quiet);
    let mut current = String::new();
    if let Some(share) = args.fragmentation {
        if !(share > 0.0 && share <= 10.0) {
            bail!(
                "--fragmentation {share}: give the arrived GPU demand to stop at as a share of capacity, e.g. 1.3"
            );
        }
        let arrival_order = match &args.arrival_order {
            None => None,
            Some(path) => {
                let (file, text) = trace_file(args, path.as_deref(), Dataset::FgdArrivalOrder)?;
                let rank = if let Some(path) = path {
                    let p = path.with_file_name("node_prefix.csv");
                    p.exists()
                        .then(|| {
                            Ok::<_, lockstep_sim::TraceError>((
                                p.display().to_string(),
                                read_file(&p)?,
                            ))
                        })
                        .transpose()?
                } else {
                    Some(trace_file(args, None, Dataset::FgdNodeRank)?)
                };
                Some(std::sync::Arc::new(fragmentation::ArrivalOrder::parse(
                    &file,
                    &text,
                    rank.as_ref().map(|(f, t)| (f.as_str(), t.as_str())),
                )?))
            }
        };
        let options = FragmentationOptions {
            share,
            seed: args.seed,
            arrival_order,
            bound: true,
        };
        let result = lockstep_sim::run_fragmentation_policies(
            &trace,
            &policies,
            &options,
            &mut |name, d, t| {
                if current != name {
                    current = name.to_string();
                    progress.start(name);
                }
                progress.update(d, t);
            },
        );
        progress.finish();
        let (mut metrics, timing) = result?;
        if let Some(pods) = &args.openb {
            let pods = if pods.is_empty() {
                Dataset::OpenbPods.file_name()
            } else {
                pods.as_str()
            };
            let workload = std::path::Path::new(pods)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if let Ok((file, text)) = trace_file(args, None, Dataset::FgdAllocation) {
                let max = metrics
                    .fragmentation_runs
                    .iter()
                    .map(|r| r.steps.len().saturating_sub(1) as u32)
                    .max()
                    .unwrap_or(0);
                metrics.fgd_reference = fragmentation::fgd_reference(&file, &text, &workload, max)?;
            }
        }
        return finish_output(args, &metrics, &timing);
    }
    let result =
        lockstep_sim::run_policies(&trace, &policies, &options, seed, &mut |name, d, t| {
            if current != name {
                current = name.to_string();
                progress.start(name);
            }
            progress.update(d, t);
        });
    progress.finish();
    let (metrics, timing) = result?;
    finish_output(args, &metrics, &timing)
}

fn finish_output(
    args: &SimulateArgs,
    metrics: &lockstep_sim::Metrics,
    timing: &lockstep_sim::Timing,
) -> Result<String> {
    if !args.no_report {
        report::write(&args.out, metrics, timing)
            .with_context(|| format!("cannot write the report to {}", args.out.display()))?;
    }
    Ok(match args.output {
        SimFormat::Json => report::metrics_json(metrics),
        SimFormat::Yaml => serde_norway::to_string(metrics)?,
        SimFormat::Table if args.quiet => String::new(),
        SimFormat::Table => {
            let mut s = report::summary(metrics, timing);
            if !args.no_report {
                s.push_str(&format!(
                    "\nreport: {}\n",
                    args.out.join("index.html").display()
                ));
            }
            s
        }
    })
}
