//! `lockstep`: the command-line front end. Translates flags and manifests into engine calls
//! and engine decisions into output; it makes no scheduling decision of its own.

/// mimalloc rather than the system allocator: the CLI allocates heavily (parsing manifests,
/// building the cluster state) and parses large inputs on several threads, whose memory
/// mimalloc reuses across threads (glibc keeps it per thread: half again as much at peak).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its place in `mi_option_t`, kept stable across versions
/// by the deprecated placeholders before it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

mod config;
mod estimator;
mod federate;
mod output;
mod run;
mod simulate;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use lockstep_engine::Options;
use lockstep_manifests::Source;

/// `lockstep --version`: the version, the git commit built from, and the Kubernetes API
/// version manifests are read as.
static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{} (commit {}, Kubernetes API {})",
        env!("CARGO_PKG_VERSION"),
        env!("LOCKSTEP_GIT_COMMIT"),
        lockstep_manifests::KUBERNETES_API_VERSION
    )
});

#[derive(Parser)]
#[command(
    name = "lockstep",
    version = VERSION.as_str(),
    args_override_self = true,
    about = "A workload-aware scheduler for AI and batch work on Kubernetes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Schedule the pending pods of a set of manifests once and print the decisions.
    Schedule(ScheduleArgs),
    /// Replay a workload trace against a cluster in simulated time and report utilization,
    /// waits, preemptions and fragmentation (no arguments: the embedded scenario).
    Simulate(Box<simulate::SimulateArgs>),
    /// Schedule a real cluster through the Kubernetes API: pods whose schedulerName is
    /// --scheduler-name are bound, preempted for, and given DRA devices, until SIGTERM.
    Run(Box<run::RunArgs>),
    /// Place Karmada ResourceBindings across member clusters once, as karmada-scheduler
    /// would, with binding preemption, and print the decisions.
    Federate(federate::FederateArgs),
    /// Serve Karmada's scheduler-estimator gRPC service for one member cluster, counting replicas exactly with the engine.
    Estimator(Box<estimator::EstimatorArgs>),
    /// Print a shell completion script: `lockstep completions bash > /etc/bash_completion.d/lockstep`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `lockstep man > lockstep.1`.
    Man,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
    Yaml,
}

/// `--gang-preemption` for both subcommands.
#[derive(Clone, Copy, ValueEnum)]
pub enum GangPreemption {
    Off,
    Minimal,
    Atomic,
}

impl From<GangPreemption> for lockstep_engine::GangPreemption {
    fn from(mode: GangPreemption) -> Self {
        match mode {
            GangPreemption::Off => lockstep_engine::GangPreemption::Off,
            GangPreemption::Minimal => lockstep_engine::GangPreemption::Minimal,
            GangPreemption::Atomic => lockstep_engine::GangPreemption::Atomic,
        }
    }
}

#[derive(clap::Args)]
struct ScheduleArgs {
    /// A manifest file, a directory (recursively *.yaml, *.yml, *.json) or - for stdin.
    #[arg(short = 'f', long = "filename", required = true, value_name = "PATH")]
    files: Vec<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    output: Format,
    /// A KubeSchedulerConfiguration file (one profile).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Victim selection for gangs whose disruptionMode is single [default: minimal, or the
    /// config file's gangPreemption].
    #[arg(long, value_enum)]
    gang_preemption: Option<GangPreemption>,
    /// Schedule every pod with a full cycle, never reusing the previous pod's result.
    #[arg(long)]
    no_batching: bool,
    /// Instead of scheduling, print how many more replicas of the pod in POD_FILE fit on
    /// each node of the cluster as it runs now (resources, filters and DRA devices).
    #[arg(long, value_name = "POD_FILE")]
    estimate: Option<PathBuf>,
    /// A field the Kubernetes API does not define is an error (exit 2), not a warning.
    #[arg(long)]
    strict: bool,
    /// Scheduler names whose pods this run schedules (a pod without schedulerName has
    /// default-scheduler, as Kubernetes defaults it).
    #[arg(long = "scheduler-name", value_name = "NAME", default_values = ["default-scheduler", "lockstep"])]
    scheduler_names: Vec<String>,
}

/// Under `--strict`, fields the Kubernetes API does not define are an error listing them all
/// (their warnings are not printed then).
pub fn check_unknown_fields(
    unknown: &[lockstep_manifests::UnknownField],
    strict: bool,
) -> Result<()> {
    if !strict || unknown.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = unknown.iter().map(|u| u.to_string()).collect();
    bail!(
        "{}\n{} field(s) the Kubernetes API does not define (--strict); fix or remove them",
        list.join("\n"),
        list.len()
    )
}

/// Prints the loader's warnings, or fails under `--strict` when fields are unknown.
/// Logging to stderr (`RUST_LOG`, default `info`) and the async runtime of a long-running
/// subcommand (`run`, `estimator`).
fn service_runtime() -> Result<tokio::runtime::Runtime> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn report_warnings(loaded: &lockstep_manifests::Loaded, strict: bool) -> Result<()> {
    check_unknown_fields(&loaded.unknown_fields, strict)?;
    for w in &loaded.warnings {
        eprintln!("{w}");
    }
    Ok(())
}

fn schedule(args: &ScheduleArgs) -> Result<String> {
    let mut options = Options {
        scheduler_names: args.scheduler_names.clone(),
        ..Options::default()
    };
    if let Some(path) = &args.config {
        options.profile = config::load(path)?;
    }
    options.batching = !args.no_batching;
    options.gang_preemption = match args.gang_preemption {
        Some(mode) => mode.into(),
        None => options.profile.gang_preemption.unwrap_or_default(),
    };
    let sources: Vec<Source> = args
        .files
        .iter()
        .map(|f| {
            if f == "-" {
                Source::Stdin
            } else {
                Source::Path(PathBuf::from(f))
            }
        })
        .collect();
    if let Some(file) = &args.estimate {
        return estimate(args, options, sources, file);
    }
    let mut loaded = lockstep_manifests::load(&sources).map_err(|e| anyhow!("{e}"))?;
    report_warnings(&loaded, args.strict)?;
    // The cluster state takes the loaded objects (ids stay their positions in the cluster).
    let cluster = std::mem::take(&mut loaded.cluster);
    let mut scheduler = lockstep_engine::Scheduler::from_cluster(cluster, options)
        .map_err(|e| setup_error(&loaded, e))?;
    let decisions = scheduler.run();
    let cluster = &scheduler.state().cluster;
    let mut report = output::Report::new(cluster, &decisions);
    report.summarize_owners(cluster, &loaded.owners);
    Ok(match args.output {
        Format::Table => report.table(),
        Format::Json => serde_json::to_string_pretty(&report)? + "\n",
        Format::Yaml => serde_norway::to_string(&report)?,
    })
}

/// A setup error (configuration, DRA objects) with the file and document of the object it
/// names, when it names one.
fn setup_error(
    loaded: &lockstep_manifests::Loaded,
    e: lockstep_engine::SetupError,
) -> anyhow::Error {
    use lockstep_dra::DraError;
    let text = e.to_string();
    match &e {
        lockstep_engine::SetupError::Dra(
            DraError::InvalidSelector { object, .. } | DraError::Invalid { object, .. },
        ) => anyhow!("{}", loaded.locate(object, &text)),
        _ => anyhow!("{text}"),
    }
}

#[derive(serde::Serialize)]
struct EstimateReport {
    pod: String,
    nodes: Vec<NodeReplicas>,
    total: u64,
}

#[derive(serde::Serialize)]
struct NodeReplicas {
    node: String,
    replicas: u32,
}

/// `--estimate`: replicas of each pod shape of the file, per node and in total. The file is
/// loaded with the cluster: it may name the cluster's PriorityClasses and claim templates,
/// define its own, and be part of the `-f` set too.
fn estimate(
    args: &ScheduleArgs,
    options: Options,
    sources: Vec<Source>,
    file: &std::path::Path,
) -> Result<String> {
    let (loaded, objects) =
        lockstep_manifests::load_with_extra(&sources, &Source::Path(file.to_path_buf()))
            .map_err(|e| anyhow!("{e}"))?;
    report_warnings(&loaded, args.strict)?;
    let cluster = &loaded.cluster;
    let shapes: Vec<&str> = objects
        .iter()
        .filter_map(|o| o.strip_prefix("Pod "))
        .collect();
    if shapes.is_empty() {
        bail!(
            "--estimate {}: no Pod in the file; give a Pod manifest without spec.nodeName",
            file.display()
        );
    }
    let mut reports = Vec::new();
    for shape in shapes {
        let (i, pod) = cluster
            .pods
            .iter()
            .enumerate()
            .find(|(_, p)| p.key() == shape)
            .ok_or_else(|| anyhow!("--estimate {}: pod {shape} not found", file.display()))?;
        if !pod.is_pending() {
            bail!(
                "--estimate {}: pod {shape} is not pending (it has spec.nodeName or has \
                 finished); give a Pod manifest without spec.nodeName",
                file.display()
            );
        }
        let id = lockstep_model::PodId(i as u32);
        let e = lockstep_engine::estimate(cluster, options.clone(), id)
            .map_err(|e| setup_error(&loaded, e))?;
        reports.push(EstimateReport {
            pod: shape.to_string(),
            nodes: e
                .per_node
                .iter()
                .map(|(n, r)| NodeReplicas {
                    node: cluster.nodes[n.index()].name.clone(),
                    replicas: *r,
                })
                .collect(),
            total: e.total,
        });
    }
    // One pod: one object, as always; several: a list of them, in the file's order.
    Ok(match (args.output, reports.as_slice()) {
        (Format::Json, [one]) => serde_json::to_string_pretty(one)? + "\n",
        (Format::Json, all) => serde_json::to_string_pretty(all)? + "\n",
        (Format::Yaml, [one]) => serde_norway::to_string(one)?,
        (Format::Yaml, all) => serde_norway::to_string(all)?,
        (Format::Table, _) => reports
            .iter()
            .map(estimate_table)
            .collect::<Vec<_>>()
            .join("\n"),
    })
}

fn estimate_table(report: &EstimateReport) -> String {
    let w = report
        .nodes
        .iter()
        .map(|n| n.node.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!(
        "Replicas of {} that fit now\n  {:<w$}  REPLICAS\n",
        report.pod, "NODE"
    );
    for n in &report.nodes {
        out += &format!("  {:<w$}  {}\n", n.node, n.replicas);
    }
    out += &format!("  {:<w$}  {}\n", "total", report.total);
    out
}

/// What a command prints: its text, or a document written straight to standard output
/// (never held whole in memory).
pub enum Output {
    Text(String),
    Stream(Writer),
}

/// Writes a document to the writer it is given.
pub type Writer = Box<dyn FnOnce(&mut dyn Write) -> std::io::Result<()>>;

fn main() -> ExitCode {
    // Freed memory goes back to the system at once rather than after 10 ms: a run builds
    // large structures one after another (documents, objects, the cluster state), and peak
    // memory is then that of the largest, not their sum (50,000 pods: 552 MB, not 750 MB).
    // SAFETY: set before any other thread exists; the option only changes when mimalloc
    // returns free pages.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Schedule(args) => schedule(args).map(Output::Text),
        Command::Simulate(args) => simulate::simulate(args).map(Output::Text),
        Command::Run(args) => run::run(args).map(Output::Text),
        Command::Federate(args) => federate::federate(args),
        Command::Estimator(args) => estimator::estimator(args).map(Output::Text),
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "lockstep", &mut out);
            String::from_utf8(out)
                .context("the completion script is UTF-8")
                .map(Output::Text)
        }
        Command::Man => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut out)
                .context("cannot render the man page")
                .and_then(|()| String::from_utf8(out).context("the man page is UTF-8"))
                .map(Output::Text)
        }
    };
    match result {
        Ok(output) => {
            let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
            // A closed pipe (e.g. `| head`) is not an error worth a panic.
            let _ = match output {
                Output::Text(text) => stdout.write_all(text.as_bytes()),
                Output::Stream(write) => write(&mut stdout),
            };
            let _ = stdout.flush();
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
