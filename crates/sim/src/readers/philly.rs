//! The Philly-derived job trace of the Pollux artifact (`philly.csv`: columns
//! `timestamp,duration,num_gpus,gpu_time,cluster`).
//!
//! Each row is a job: it arrives at `timestamp` (times are shifted so the first selected job
//! arrives at 0) and runs `duration` seconds. `num_gpus` becomes one pod when it fits on a
//! node, otherwise a gang of pods of at most `gpus_per_node` GPUs each (split evenly: 12 GPUs
//! are two pods of 6) in a PodGroup with `minCount` = every pod. GPUs are the extended
//! resource `nvidia.com/gpu`; each GPU brings 6 CPU and 48 GiB. The trace names no cluster,
//! so the cluster is `gpu_nodes` nodes of `gpus_per_node` GPUs (64 CPU, 512 GiB), in racks of
//! 8 nodes. The trace has no priorities: every job is in the same (unnamed) class.

use std::path::Path;

use crate::readers::table::{Table, parse_timestamp, read_file};
use crate::trace::{JobSpec, PodShape, RACK_LABEL, Trace, TraceBuilder, TraceError, gib};
use crate::trace::{limits, split_gpus, split_pods};

/// Which part of the trace to replay, on what cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhillyOptions {
    pub gpu_nodes: usize,
    pub gpus_per_node: i64,
    /// Jobs submitted at or after this time (seconds since the epoch, UTC).
    pub from: Option<i64>,
    /// Jobs submitted before this time.
    pub until: Option<i64>,
    /// Only jobs of this virtual cluster (the `cluster` column).
    pub virtual_cluster: Option<String>,
    /// At most this many jobs (the earliest).
    pub max_jobs: Option<usize>,
}

impl Default for PhillyOptions {
    fn default() -> Self {
        PhillyOptions {
            gpu_nodes: 64,
            gpus_per_node: 8,
            from: None,
            until: None,
            virtual_cluster: None,
            max_jobs: None,
        }
    }
}

/// Nodes per rack of the Philly cluster.
const NODES_PER_RACK: usize = 8;

struct Row {
    line: u64,
    submitted: i64,
    duration: u64,
    gpus: i64,
}

/// Reads a Philly CSV file.
pub fn read_philly(path: &Path, options: &PhillyOptions) -> Result<Trace, TraceError> {
    let text = read_file(path)?;
    parse_philly(&path.display().to_string(), &text, options)
}

/// Parses Philly CSV text; `file` names it in errors and in the trace name.
pub fn parse_philly(file: &str, text: &str, options: &PhillyOptions) -> Result<Trace, TraceError> {
    let table = Table::parse(file, text)?;
    let c_time = table.column("timestamp")?;
    let c_duration = table.column("duration")?;
    let c_gpus = table.column("num_gpus")?;
    let c_cluster = table.optional_column("cluster");
    if options.gpu_nodes > limits::NODES {
        return Err(TraceError::new(
            file,
            0,
            format!(
                "a cluster of {} GPU nodes is more than {}, the most nodes a cluster may have \
                 (see \"Limits\" in README.md)",
                options.gpu_nodes,
                limits::NODES
            ),
        ));
    }
    let per_node = options.gpus_per_node.clamp(1, limits::GPUS_PER_NODE);
    let mut rows = Vec::new();
    for row in &table.rows {
        let raw = &row.fields[c_time];
        let submitted = parse_timestamp(raw).ok_or_else(|| {
            table.error(
                row,
                format!("timestamp: {raw:?} is not a time like 2017-10-09 07:01:55"),
            )
        })?;
        let duration = table.number(row, c_duration, "a number of seconds")?;
        if duration > limits::SECONDS as f64 {
            return Err(table.error(
                row,
                format!(
                    "duration: {} is more than {}, the longest time a trace may span \
                     (100 years; see \"Limits\" in README.md)",
                    &row.fields[c_duration],
                    limits::SECONDS
                ),
            ));
        }
        let gpus = table.bounded(
            row,
            c_gpus,
            "a whole number of GPUs",
            limits::JOB_PODS * per_node,
            &format!(
                "the most GPUs one job may ask for, {} pods of {per_node} GPUs",
                limits::JOB_PODS
            ),
        )?;
        if gpus == 0 {
            return Err(table.error(row, "num_gpus: 0; a Philly job needs at least one GPU"));
        }
        if let (Some(vc), Some(c)) = (&options.virtual_cluster, c_cluster)
            && row.fields[c] != *vc
        {
            continue;
        }
        if options.from.is_some_and(|f| submitted < f)
            || options.until.is_some_and(|u| submitted >= u)
        {
            continue;
        }
        rows.push(Row {
            line: row.line,
            submitted,
            duration: duration.round() as u64,
            gpus,
        });
    }
    rows.sort_by_key(|r| (r.submitted, r.line));
    if let Some(max) = options.max_jobs {
        rows.truncate(max);
    }
    let start = rows.first().map_or(0, |r| r.submitted);
    let mut pods_total: i64 = 0;
    for r in &rows {
        if (r.submitted - start) as u64 > limits::SECONDS {
            return Err(TraceError::new(
                file,
                r.line,
                format!(
                    "timestamp: more than 100 years after the first job's ({}), the longest \
                     time a trace may span; select a window with --from and --to \
                     (see \"Limits\" in README.md)",
                    format_timestamp(start)
                ),
            ));
        }
        pods_total += split_pods(r.gpus, per_node);
        if pods_total > limits::PODS as i64 {
            return Err(TraceError::new(
                file,
                r.line,
                format!(
                    "the trace has more than {} pods here, the most lockstep simulates; \
                     select fewer jobs with --max-jobs, --from and --to \
                     (see \"Limits\" in README.md)",
                    limits::PODS
                ),
            ));
        }
    }
    let mut b = TraceBuilder::new();
    for i in 0..options.gpu_nodes {
        let rack = format!("rack-{:02}", i / NODES_PER_RACK);
        b.node(
            &format!("philly-{rack}-node-{:02}", i % NODES_PER_RACK),
            8_000 * per_node,
            gib(64) * per_node,
            per_node,
            &[(RACK_LABEL, &rack)],
        );
    }
    let capacity = options.gpu_nodes as i64 * per_node;
    let too_big = rows.iter().filter(|r| r.gpus > capacity).count();
    for r in &rows {
        let pods: Vec<PodShape> = split_gpus(r.gpus, per_node)
            .into_iter()
            .map(|g| PodShape::new(6_000 * g, gib(48) * g, g))
            .collect();
        let gang = pods.len() > 1;
        b.job(JobSpec {
            name: format!("philly-{:06}", r.line),
            arrival: (r.submitted - start) as u64,
            duration: Some(r.duration),
            priority_class: None,
            pods,
            gang,
            topology_key: None,
        });
    }
    b.note(format!(
        "{} jobs; cluster: {} nodes x {} GPUs (the trace names no cluster; --gpu-nodes changes it)",
        rows.len(),
        options.gpu_nodes,
        per_node
    ));
    if too_big > 0 {
        b.note(format!(
            "{too_big} jobs ask for more GPUs than the cluster has ({capacity}) and can never start"
        ));
    }
    let mut name = file.rsplit('/').next().unwrap_or(file).to_string();
    let mut window = Vec::new();
    if let Some(vc) = &options.virtual_cluster {
        window.push(format!("cluster {vc}"));
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        window.push(format!(
            "{} jobs submitted {} .. {}",
            rows.len(),
            format_timestamp(first.submitted),
            format_timestamp(last.submitted)
        ));
    }
    if !window.is_empty() {
        name = format!("{name} ({})", window.join(", "));
    }
    Ok(b.finish(name))
}

/// `YYYY-MM-DD HH:MM` of seconds since the epoch (UTC).
pub fn format_timestamp(t: i64) -> String {
    let days = t.div_euclid(86400);
    let secs = t.rem_euclid(86400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        secs / 3600,
        (secs % 3600) / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 06:13:03,2951.0,16,47216.0,6214e9
2017-10-09 06:13:36,2759.4,12,2759.0,6214e9
";

    #[test]
    fn rows_become_jobs_and_gangs() {
        let t = parse_philly("philly.csv", SAMPLE, &PhillyOptions::default()).expect("valid");
        assert_eq!(t.cluster.nodes.len(), 64);
        assert_eq!(t.capacity(crate::trace::GPU), 512);
        let jobs: Vec<_> = t
            .jobs
            .iter()
            .map(|j| {
                (
                    j.name.as_str(),
                    j.arrival,
                    j.duration,
                    j.pods.len(),
                    j.gpus,
                    j.gang,
                )
            })
            .collect();
        assert_eq!(
            jobs,
            vec![
                ("philly-000003", 0, Some(2951), 2, 16, true),
                ("philly-000004", 33, Some(2759), 2, 12, true),
                ("philly-000002", 2932, Some(66), 1, 1, false),
            ]
        );
        assert!(
            t.name.contains("2017-10-09 06:13 .. 2017-10-09 07:01"),
            "{}",
            t.name
        );
    }

    #[test]
    fn window_cluster_and_limit() {
        let opts = PhillyOptions {
            virtual_cluster: Some("6214e9".into()),
            max_jobs: Some(1),
            ..PhillyOptions::default()
        };
        let t = parse_philly("philly.csv", SAMPLE, &opts).expect("valid");
        assert_eq!(t.jobs.len(), 1);
        assert_eq!(t.jobs[0].gpus, 16);
        let opts = PhillyOptions {
            from: parse_timestamp("2017-10-09 07:00"),
            ..PhillyOptions::default()
        };
        let t = parse_philly("philly.csv", SAMPLE, &opts).expect("valid");
        assert_eq!(t.jobs.len(), 1);
        assert_eq!(t.jobs[0].gpus, 1);
    }

    #[test]
    fn bad_rows_name_file_and_line() {
        let cases = [
            (
                "timestamp,duration,num_gpus\n2017-10-09 07:01:55,66,1\n2017-10-09 07:01:55,66,two\n",
                "philly.csv:3: num_gpus: \"two\" is not a whole number of GPUs",
            ),
            (
                "timestamp,duration,num_gpus\n2017-10-09 07:01:55,-5,1\n",
                "philly.csv:2: duration: \"-5\" is not a number of seconds",
            ),
            (
                "timestamp,duration,num_gpus\nlast tuesday,5,1\n",
                "philly.csv:2: timestamp: \"last tuesday\" is not a time like 2017-10-09 07:01:55",
            ),
            (
                "timestamp,duration,num_gpus\n2017-10-09 07:01:55,5,0\n",
                "philly.csv:2: num_gpus: 0; a Philly job needs at least one GPU",
            ),
            (
                "timestamp,duration\n2017-10-09 07:01:55,5\n",
                "philly.csv:1: missing column \"num_gpus\"; the header has timestamp,duration",
            ),
        ];
        for (text, want) in cases {
            let err =
                parse_philly("philly.csv", text, &PhillyOptions::default()).expect_err("bad row");
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn formats_timestamps() {
        assert_eq!(format_timestamp(1_507_532_515), "2017-10-09 07:01");
        assert_eq!(format_timestamp(0), "1970-01-01 00:00");
    }
}
