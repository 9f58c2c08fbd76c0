//! `lockstep federate`: Karmada ResourceBindings placed across member clusters, printed in
//! the `federate` output contract (table, JSON or YAML).

use anyhow::{Result, anyhow, bail};
use lockstep_federation::schedule::Decisions;
use lockstep_manifests::Source;

use crate::{Format, Output};

#[derive(clap::Args)]
pub struct FederateArgs {
    /// Karmada objects (Cluster, ResourceBinding, ClusterResourceBinding): a file, a
    /// directory (recursively *.yaml, *.yml, *.json) or - for stdin.
    #[arg(short = 'f', long = "filename", required = true, value_name = "PATH")]
    files: Vec<String>,
    /// A member cluster's own manifests (Nodes, Pods, DRA objects, ...): its replica
    /// estimates are then exact, node by node. CLUSTER names a Cluster of the -f input.
    #[arg(long = "member", value_name = "CLUSTER=PATH")]
    members: Vec<String>,
    /// A member cluster's scheduler estimator (karmada-scheduler-estimator or `lockstep
    /// estimator`), asked MaxAvailableReplicas as karmada-scheduler asks it. CLUSTER names a
    /// Cluster of the -f input; ADDRESS is host:port.
    #[arg(long = "estimator", value_name = "CLUSTER=ADDRESS")]
    estimators: Vec<String>,
    /// How long to wait for an estimator's answer; without one in time the cluster's
    /// summary estimate is used (karmada-scheduler's --scheduler-estimator-timeout).
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = parse_duration)]
    estimator_timeout: std::time::Duration,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    output: Format,
    /// Bindings never preempt, whatever their preemptionPolicy.
    #[arg(long)]
    no_preemption: bool,
}

pub fn federate(args: &FederateArgs) -> Result<Output> {
    let sources: Vec<Source> = args.files.iter().map(|f| Source::from_arg(f)).collect();
    let mut members: Vec<(String, Vec<Source>)> = Vec::new();
    for m in &args.members {
        let Some((cluster, path)) = m.split_once('=') else {
            bail!("--member {m:?}: expected CLUSTER=PATH (e.g. --member gpu-cluster=members/gpu)");
        };
        if cluster.is_empty() || path.is_empty() {
            bail!("--member {m:?}: expected CLUSTER=PATH with both parts non-empty");
        }
        let source = Source::from_arg(path);
        match members.iter_mut().find(|(c, _)| c == cluster) {
            Some((_, list)) => list.push(source),
            None => members.push((cluster.to_string(), vec![source])),
        }
    }
    if members
        .iter()
        .flat_map(|(_, s)| s)
        .chain(&sources)
        .filter(|s| **s == Source::Stdin)
        .count()
        > 1
    {
        bail!("stdin (-) can be read once; give the other inputs as files");
    }
    let loaded = lockstep_federation::load(&sources).map_err(|e| anyhow!("{e}"))?;
    for w in &loaded.warnings {
        eprintln!("{w}");
    }
    let mut estimators: Vec<(
        String,
        std::sync::Arc<dyn lockstep_federation::ReplicaEstimator>,
    )> = Vec::new();
    for e in &args.estimators {
        let (cluster, address) = e.split_once('=').unwrap_or(("", ""));
        if cluster.is_empty() || address.is_empty() {
            bail!(
                "--estimator {e:?}: expected CLUSTER=ADDRESS with both parts non-empty \
                 (e.g. --estimator member1=127.0.0.1:10352)"
            );
        }
        let remote = lockstep_estimator::client::Remote::new(address, args.estimator_timeout)
            .map_err(|err| anyhow!("--estimator {e:?}: {err}"))?;
        estimators.push((
            cluster.to_string(),
            std::sync::Arc::new(RemoteEstimator {
                remote,
                warned: std::sync::atomic::AtomicBool::new(false),
            }),
        ));
    }
    let options = lockstep_federation::Options {
        preemption: !args.no_preemption,
        members,
        estimators,
    };
    // The run takes the federation over: nothing is copied.
    let members = lockstep_federation::load_members(&loaded.federation, &options)
        .map_err(|e| anyhow!("{e}"))?;
    let decisions = lockstep_federation::schedule_with(loaded.federation, &options, members)
        .map_err(|e| anyhow!("{e}"))?;
    // JSON and YAML are written as they are made: a large run's estimates alone are
    // hundreds of megabytes of text.
    Ok(match args.output {
        Format::Table => Output::Text(table(&decisions)),
        Format::Json => Output::Stream(Box::new(move |w| {
            serde_json::to_writer_pretty(&mut *w, &decisions)?;
            w.write_all(b"\n")
        })),
        Format::Yaml => Output::Stream(Box::new(move |w| {
            serde_norway::to_writer(w, &decisions).map_err(std::io::Error::other)
        })),
    })
}

/// A duration as `3s`, `500ms` or a number of seconds.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 0.001)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0)
    } else {
        (text, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * scale <= 3600.0 => {
            Ok(std::time::Duration::from_secs_f64(v * scale))
        }
        _ => Err(format!(
            "{text:?} is not a duration between 1ms and 1h (write e.g. 3s or 500ms)"
        )),
    }
}

/// A member's estimator over gRPC. A failure is reported once per estimator on stderr;
/// the cluster's summary estimate is used then.
#[derive(Debug)]
struct RemoteEstimator {
    remote: lockstep_estimator::client::Remote,
    warned: std::sync::atomic::AtomicBool,
}

impl lockstep_federation::ReplicaEstimator for RemoteEstimator {
    fn max_available_replicas(
        &self,
        cluster: &str,
        binding: &lockstep_federation::model::Binding,
    ) -> Option<i64> {
        let answer = self
            .remote
            .max_available_replicas(cluster, &replica(binding));
        self.answered(cluster, answer, "its summary estimate is used instead")
    }

    fn max_available_component_sets(
        &self,
        cluster: &str,
        binding: &lockstep_federation::model::Binding,
    ) -> Option<i64> {
        let namespace = namespace(binding);
        let components: Vec<(String, i64, lockstep_estimator::client::Replica)> = binding
            .components
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    c.replicas,
                    replica_of(&namespace, Some(&c.requirements)),
                )
            })
            .collect();
        let answer = self
            .remote
            .max_available_component_sets(cluster, &namespace, &components);
        self.answered(cluster, answer, "its summary estimate is used instead")
    }

    fn select_victims(
        &self,
        cluster: &str,
        preemptor: &lockstep_federation::model::Binding,
        replicas: i64,
        candidates: &[String],
    ) -> Option<(bool, Vec<String>)> {
        let answer = self
            .remote
            .select_victims(cluster, &replica(preemptor), replicas, candidates);
        self.answered(cluster, answer, "no binding is preempted there")
    }
}

impl RemoteEstimator {
    /// The answer, or `None` with the estimator's first failure reported (and what follows
    /// from it).
    fn answered<T>(&self, cluster: &str, answer: Result<T, String>, then: &str) -> Option<T> {
        match answer {
            Ok(v) => Some(v),
            Err(e) => {
                if !self.warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    eprintln!("warning: cluster {cluster}: {e}; {then}");
                }
                None
            }
        }
    }
}

/// The namespace a binding's replicas run in on a member (`default` for a
/// ClusterResourceBinding).
fn namespace(b: &lockstep_federation::model::Binding) -> String {
    b.namespace.clone().unwrap_or_else(|| "default".into())
}

/// What one replica of `b` needs, as karmada-scheduler sends it to an estimator.
fn replica(b: &lockstep_federation::model::Binding) -> lockstep_estimator::client::Replica {
    replica_of(&namespace(b), b.requirements.as_ref())
}

/// A replica of the given requirements in `namespace`.
fn replica_of(
    namespace: &str,
    requirements: Option<&lockstep_federation::model::Requirements>,
) -> lockstep_estimator::client::Replica {
    let mut r = lockstep_estimator::client::Replica {
        namespace: namespace.to_string(),
        ..Default::default()
    };
    let Some(req) = requirements else {
        return r;
    };
    r.priority_class_name = req.priority_class_name.clone();
    r.requests = req
        .requests
        .iter()
        .map(|(k, v)| (k.clone(), format!("{v}m")))
        .collect();
    if let Some(nc) = &req.node_claim {
        r.node_selector = nc.node_selector.clone();
        r.tolerations = nc.tolerations.clone();
        r.node_affinity = nc.hard_node_affinity.clone();
    }
    for c in &req.claims {
        match (&c.resource_claim_template_name, &c.resource_claim_name) {
            (Some(t), _) => r.claim_templates.push(t.clone()),
            (None, Some(n)) => r.shared_claims.push(n.clone()),
            (None, None) => {}
        }
    }
    r
}

fn clusters(list: &[lockstep_federation::schedule::TargetReplicas]) -> String {
    if list.is_empty() {
        return "-".into();
    }
    list.iter()
        .map(|c| format!("{}:{}", c.name, c.replicas))
        .collect::<Vec<_>>()
        .join(", ")
}

fn section(out: &mut String, title: &str, header: &[&str], rows: &[Vec<String>]) {
    if rows.is_empty() {
        return;
    }
    let n = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, cell) in r.iter().enumerate().take(n - 1) {
            widths[i] = widths[i].max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == n {
                s += &format!("  {c}");
            } else {
                s += &format!("  {c:<w$}", w = widths[i]);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(title);
    out.push('\n');
    out.push_str(&line(header.to_vec()));
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
}

fn table(d: &Decisions) -> String {
    let mut out = String::new();
    let placed: Vec<Vec<String>> = d
        .placements
        .iter()
        .map(|p| vec![p.binding.clone(), clusters(&p.clusters)])
        .collect();
    section(&mut out, "PLACED", &["BINDING", "CLUSTERS"], &placed);
    let preempted: Vec<Vec<String>> = d
        .preemptions
        .iter()
        .map(|p| {
            vec![
                p.binding.clone(),
                p.cluster.clone(),
                p.replicas.to_string(),
                p.preemptor.clone(),
                p.reason.clone(),
            ]
        })
        .collect();
    section(
        &mut out,
        "PREEMPTED",
        &["BINDING", "CLUSTER", "REPLICAS", "PREEMPTOR", "REASON"],
        &preempted,
    );
    let unschedulable: Vec<Vec<String>> = d
        .unschedulable
        .iter()
        .map(|u| vec![u.binding.clone(), u.message.clone()])
        .collect();
    section(
        &mut out,
        "UNSCHEDULABLE",
        &["BINDING", "MESSAGE"],
        &unschedulable,
    );
    let unchanged: Vec<Vec<String>> = d
        .unchanged
        .iter()
        .map(|p| vec![p.binding.clone(), clusters(&p.clusters)])
        .collect();
    section(&mut out, "UNCHANGED", &["BINDING", "CLUSTERS"], &unchanged);
    if !out.is_empty() {
        out.push('\n');
    }
    out += &format!(
        "{} placed, {} preempted, {} unschedulable, {} unchanged\n",
        d.placements.len(),
        d.preemptions.len(),
        d.unschedulable.len(),
        d.unchanged.len()
    );
    out
}
