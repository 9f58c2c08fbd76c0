//! The embedded default scenario: a generated GPU cluster and a generated trace, both a pure
//! function of the seed (ChaCha8, so the same seed gives the same trace on every platform
//! and every release of `rand`).
//!
//! Cluster: `racks` racks of `nodes_per_rack` GPU nodes (128 CPU, 1 TiB, labelled with their
//! rack and GPU model, tainted `nvidia.com/gpu=present:NoSchedule`) plus `cpu_nodes` CPU
//! nodes (64 CPU, 256 GiB). GPUs are Dynamic Resource Allocation devices of driver
//! [`DRIVER`]: each GPU node publishes a ResourceSlice of `gpus_per_node` devices (attribute
//! `model`, shareable through a consumable capacity `milli` of 1000), and a DeviceClass `gpu`
//! selects them.
//!
//! Workload: `jobs` jobs in three PriorityClasses (`production` 1000, `research` 500, `spot`
//! 0): 8% CPU-only pods, 57% single GPU pods (1, 2, 4 or 8 GPUs; a quarter of the one-GPU
//! pods share a GPU, asking for 250 or 500 milli of it), 35% gangs of 2 to 64 workers (1 to 8
//! GPUs each) as PodGroups with `minCount` = all workers, half of those that fit in one rack
//! constrained to one rack. GPU pods claim their devices through ResourceClaimTemplates.
//! Each GPU asks for 12 CPU and 96 GiB beside it (a shared GPU for its share of that).
//! Durations are log-normal (heavy-tailed: medians 10 min for CPU pods, 30 min for single
//! GPU pods, 1 h for gangs), between one minute and two days. Arrivals are a Poisson process
//! whose rate makes the offered GPU load `load` times the cluster's GPU capacity.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::trace::{GPU_MODEL_LABEL, JobSpec, PodShape, RACK_LABEL, Trace, TraceBuilder, gib};

/// The DRA driver the scenario's GPUs are published under.
pub const DRIVER: &str = "gpu.nvidia.com";

/// The GPU model of the scenario's nodes (label [`GPU_MODEL_LABEL`], device attribute `model`).
pub const GPU_MODEL: &str = "NVIDIA-H100-80GB-HBM3";

/// The parameters of the embedded default scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultScenario {
    pub seed: u64,
    pub racks: usize,
    pub nodes_per_rack: usize,
    pub gpus_per_node: i64,
    pub cpu_nodes: usize,
    pub jobs: usize,
    /// Offered GPU load over the arrival period, as a share of GPU capacity.
    pub load: f64,
}

impl Default for DefaultScenario {
    fn default() -> Self {
        DefaultScenario {
            seed: 42,
            racks: 32,
            nodes_per_rack: 8,
            gpus_per_node: 8,
            cpu_nodes: 32,
            jobs: 2000,
            load: 0.85,
        }
    }
}

/// The PriorityClasses of the scenario, highest first.
pub const PRIORITY_CLASSES: [(&str, i32); 3] =
    [("production", 1000), ("research", 500), ("spot", 0)];

fn pick<T: Copy>(rng: &mut ChaCha8Rng, choices: &[(T, f64)]) -> T {
    let total: f64 = choices.iter().map(|c| c.1).sum();
    let mut x = rng.random::<f64>() * total;
    for &(v, w) in choices {
        if x < w {
            return v;
        }
        x -= w;
    }
    choices[choices.len() - 1].0
}

/// A uniform sample in (0, 1].
fn open01(rng: &mut ChaCha8Rng) -> f64 {
    1.0 - rng.random::<f64>()
}

/// A log-normal sample with the given median and shape (Box-Muller).
fn log_normal(rng: &mut ChaCha8Rng, median: f64, sigma: f64) -> f64 {
    let (u1, u2) = (open01(rng), open01(rng));
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    median * (sigma * z).exp()
}

struct Draft {
    spec: JobSpec,
    gpu_seconds: f64,
}

impl DefaultScenario {
    /// The scenario's cluster and trace.
    pub fn build(&self) -> Trace {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut b = TraceBuilder::new();
        b.taint_gpu_nodes();
        b.dra_gpus(DRIVER);
        for (name, value) in PRIORITY_CLASSES {
            b.priority_class(name, value);
        }
        for r in 0..self.racks {
            let rack = format!("rack-{r:02}");
            for i in 0..self.nodes_per_rack {
                b.node(
                    &format!("gpu-{rack}-node-{i:02}"),
                    128_000,
                    gib(1024),
                    self.gpus_per_node,
                    &[(RACK_LABEL, &rack), (GPU_MODEL_LABEL, GPU_MODEL)],
                );
            }
        }
        for i in 0..self.cpu_nodes {
            b.node(&format!("cpu-node-{i:03}"), 64_000, gib(256), 0, &[]);
        }
        let rack_gpus = self.nodes_per_rack as i64 * self.gpus_per_node;
        let mut drafts = Vec::with_capacity(self.jobs);
        for i in 0..self.jobs {
            drafts.push(self.draft(&mut rng, i, rack_gpus));
        }
        // Poisson arrivals: exponential gaps, scaled so that offered load = `load`.
        let gaps: Vec<f64> = (0..self.jobs).map(|_| -open01(&mut rng).ln()).collect();
        let demand: f64 = drafts.iter().map(|d| d.gpu_seconds).sum();
        let capacity = (self.racks * self.nodes_per_rack) as f64 * self.gpus_per_node as f64;
        let span = demand / (self.load.max(0.01) * capacity.max(1.0));
        let unit = span / gaps.iter().sum::<f64>().max(1e-9);
        let mut t = 0f64;
        for (i, mut d) in drafts.into_iter().enumerate() {
            if i > 0 {
                t += gaps[i] * unit;
            }
            d.spec.arrival = t.round() as u64;
            b.job(d.spec);
        }
        b.note(format!(
            "generated: {} racks x {} nodes x {} GPUs (DRA devices of {DRIVER}) + {} CPU nodes; \
             {} jobs at {:.0}% offered GPU load; seed {}",
            self.racks,
            self.nodes_per_rack,
            self.gpus_per_node,
            self.cpu_nodes,
            self.jobs,
            self.load * 100.0,
            self.seed
        ));
        b.finish(format!("embedded default (seed {})", self.seed))
    }

    fn draft(&self, rng: &mut ChaCha8Rng, i: usize, rack_gpus: i64) -> Draft {
        let kind = rng.random::<f64>();
        let gpu_pod = |gpus: i64| PodShape::new(12_000 * gpus, gib(96) * gpus, gpus);
        let (name, pods, gang, topology_key, class, median, sigma) = if kind < 0.08 {
            let cores = pick(rng, &[(2, 0.3), (4, 0.3), (8, 0.2), (16, 0.15), (32, 0.05)]);
            let class = pick(rng, &[(0, 0.3), (1, 0.4), (2, 0.3)]);
            (
                format!("cpu-{i:05}"),
                vec![PodShape::new(cores * 1000, gib(4) * cores, 0)],
                false,
                None,
                class,
                600.0,
                1.2,
            )
        } else if kind < 0.65 {
            let gpus = pick(rng, &[(1, 0.55), (2, 0.15), (4, 0.15), (8, 0.15)]);
            let class = pick(rng, &[(0, 0.10), (1, 0.50), (2, 0.40)]);
            let shape = if gpus == 1 && rng.random::<f64>() < 0.25 {
                let milli = pick(rng, &[(250i64, 0.5), (500, 0.5)]);
                PodShape {
                    gpu_milli: milli,
                    ..PodShape::new(12 * milli, gib(96) * milli / 1000, 1)
                }
            } else {
                gpu_pod(gpus)
            };
            (
                format!("gpu-{i:05}"),
                vec![shape],
                false,
                None,
                class,
                1800.0,
                1.5,
            )
        } else {
            let workers = pick(
                rng,
                &[
                    (2usize, 0.35),
                    (4, 0.25),
                    (8, 0.18),
                    (16, 0.12),
                    (32, 0.07),
                    (64, 0.03),
                ],
            );
            let per_worker = pick(rng, &[(1i64, 0.15), (2, 0.15), (4, 0.20), (8, 0.50)]);
            let class = pick(rng, &[(0, 0.20), (1, 0.60), (2, 0.20)]);
            let fits_rack = workers as i64 * per_worker <= rack_gpus;
            let rack_local = fits_rack && rng.random::<f64>() < 0.5;
            (
                format!("gang-{i:05}"),
                vec![gpu_pod(per_worker); workers],
                true,
                rack_local.then(|| RACK_LABEL.to_string()),
                class,
                3600.0,
                1.3,
            )
        };
        let duration = log_normal(rng, median, sigma)
            .clamp(60.0, 2.0 * 86400.0)
            .round();
        let gpu_milli: i64 = pods.iter().map(|p| p.gpus * p.gpu_milli).sum();
        Draft {
            gpu_seconds: gpu_milli as f64 / 1000.0 * duration,
            spec: JobSpec {
                name,
                arrival: 0,
                duration: Some(duration as u64),
                priority_class: Some(PRIORITY_CLASSES[class].0.to_string()),
                pods,
                gang,
                topology_key,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_trace() {
        let small = DefaultScenario {
            jobs: 200,
            ..DefaultScenario::default()
        };
        let a = small.build();
        let b = small.build();
        let key = |t: &Trace| {
            t.jobs
                .iter()
                .map(|j| (j.name.clone(), j.arrival, j.duration, j.pods.len()))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&a), key(&b));
        let c = DefaultScenario {
            seed: 7,
            ..small.clone()
        }
        .build();
        assert_ne!(key(&a), key(&c));
    }

    #[test]
    fn shape_of_default_cluster() {
        let t = DefaultScenario {
            jobs: 300,
            ..DefaultScenario::default()
        }
        .build();
        assert_eq!(t.cluster.nodes.len(), 32 * 8 + 32);
        // GPUs are DRA devices, not the extended resource.
        assert_eq!(t.gpus(), 2048);
        assert_eq!(t.capacity(crate::trace::GPU), 0);
        assert_eq!(t.cluster.resource_slices.len(), 32 * 8);
        assert!(
            t.cluster
                .resource_slices
                .iter()
                .all(|s| s.driver == DRIVER && s.devices.len() == 8)
        );
        let gpu_pods = t.pod_gpu_milli.iter().filter(|&&m| m > 0).count();
        let with_claims = t
            .cluster
            .pods
            .iter()
            .filter(|p| !p.resource_claims.is_empty())
            .count();
        assert_eq!(gpu_pods, with_claims);
        assert!(t.pod_gpu_milli.iter().any(|&m| m == 250 || m == 500));
        assert!(t.jobs.iter().any(|j| j.gang && j.pods.len() >= 16));
        assert!(t.jobs.iter().all(|j| j.pods.len() <= 64));
        assert_eq!(t.priority_classes(), vec!["production", "research", "spot"]);
        assert!(
            t.cluster
                .pod_groups
                .iter()
                .any(|g| g.topology_key.as_deref() == Some(RACK_LABEL))
        );
    }
}
