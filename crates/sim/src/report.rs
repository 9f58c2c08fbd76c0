//! Reports: the summary table printed to the terminal, and the report directory
//! (`index.html`, self-contained with inline SVG charts drawn by plotters; `metrics.json`;
//! `timing.json`).

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

use crate::fragmentation::FragmentationStep;
use crate::metrics::{ByClass, Metrics, RunMetrics, Timing};

/// `90` -> `1m 30s`; `0` -> `0s`.
pub fn duration(secs: u64) -> String {
    let (d, h, m, s) = (
        secs / 86400,
        (secs % 86400) / 3600,
        (secs % 3600) / 60,
        secs % 60,
    );
    if d > 0 {
        format!("{d}d {h:02}h")
    } else if h > 0 {
        format!("{h}h {m:02}m")
    } else if m > 0 {
        format!("{m}m {s:02}s")
    } else {
        format!("{s}s")
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn fduration(secs: f64) -> String {
    duration(secs.round().max(0.0) as u64)
}

fn percent(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A plain text table with left-aligned first column and right-aligned others.
struct TextTable {
    rows: Vec<Vec<String>>,
}

impl TextTable {
    fn new(header: Vec<String>) -> Self {
        TextTable { rows: vec![header] }
    }
    fn row(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }
    fn render(&self, indent: &str) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..cols)
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for r in &self.rows {
            let mut line = String::from(indent);
            for (c, w) in widths.iter().enumerate() {
                let cell = r.get(c).map_or("", String::as_str);
                if c == 0 {
                    let _ = write!(line, "{cell:<w$}");
                } else {
                    let _ = write!(line, "  {cell:>w$}");
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

fn class_rows(wait: &ByClass, jct: &ByClass) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut push = |name: &str, w: &crate::metrics::Stats, j: &crate::metrics::Stats| {
        rows.push(vec![
            name.to_string(),
            w.count.to_string(),
            fduration(w.mean),
            duration(w.p50),
            duration(w.p90),
            duration(w.p99),
            fduration(j.mean),
            duration(j.p50),
            duration(j.p90),
            duration(j.p99),
        ]);
    };
    for (w, j) in wait.by_priority_class.iter().zip(&jct.by_priority_class) {
        push(&w.priority_class, &w.stats, &j.stats);
    }
    if wait.by_priority_class.len() != 1 {
        push("all", &wait.all, &jct.all);
    }
    rows
}

const CLASS_HEADER: [&str; 10] = [
    "priority class",
    "started",
    "wait mean",
    "p50",
    "p90",
    "p99",
    "JCT mean",
    "p50",
    "p90",
    "p99",
];

/// The lines shared by the summary and the HTML report: (metric, value per run).
fn comparison(metrics: &Metrics, timing: Option<&Timing>) -> Vec<(String, Vec<String>)> {
    let runs = &metrics.runs;
    let per = |f: &dyn Fn(&RunMetrics) -> String| runs.iter().map(f).collect::<Vec<_>>();
    let mut rows = vec![
        (
            "GPU allocation, mean while jobs arrive".to_string(),
            per(&|r| percent(r.allocation.gpu_mean_while_arriving)),
        ),
        (
            "GPU allocation, mean over the run".into(),
            per(&|r| percent(r.allocation.gpu_mean)),
        ),
        (
            "GPU allocation, peak".into(),
            per(&|r| percent(r.allocation.gpu_peak)),
        ),
        (
            "CPU allocation, mean while jobs arrive".into(),
            per(&|r| percent(r.allocation.cpu_mean_while_arriving)),
        ),
        (
            "jobs completed".into(),
            per(&|r| format!("{}/{}", r.jobs.completed, r.jobs.total)),
        ),
        (
            "jobs pending at end".into(),
            per(&|r| r.jobs.pending_at_end.to_string()),
        ),
        ("makespan".into(), per(&|r| duration(r.simulated_seconds))),
        (
            "queueing delay, mean".into(),
            per(&|r| fduration(r.queueing_delay.all.mean)),
        ),
        (
            "queueing delay, p50 / p90 / p99".into(),
            per(&|r| {
                let s = &r.queueing_delay.all;
                format!(
                    "{} / {} / {}",
                    duration(s.p50),
                    duration(s.p90),
                    duration(s.p99)
                )
            }),
        ),
    ];
    if let Some(first) = runs.first() {
        for (i, c) in first.queueing_delay.by_priority_class.iter().enumerate() {
            if first.queueing_delay.by_priority_class.len() < 2 {
                break;
            }
            let name = c.priority_class.clone();
            rows.push((
                format!("  {name}: wait p90"),
                per(&|r| {
                    r.queueing_delay
                        .by_priority_class
                        .get(i)
                        .map_or("-".into(), |s| duration(s.stats.p90))
                }),
            ));
        }
    }
    rows.extend([
        (
            "job completion time, mean".to_string(),
            per(&|r| fduration(r.job_completion_time.all.mean)),
        ),
        (
            "job completion time, p90".into(),
            per(&|r| duration(r.job_completion_time.all.p90)),
        ),
        (
            "fragmented GPUs, mean".into(),
            per(&|r| {
                format!(
                    "{:.1} ({})",
                    r.fragmentation.mean_fragmented_gpus,
                    percent(r.fragmentation.mean_share_of_capacity)
                )
            }),
        ),
        (
            "evicted pods / disrupted gangs".into(),
            per(&|r| {
                format!(
                    "{} / {}",
                    r.preemption.evicted_pods, r.preemption.disrupted_gangs
                )
            }),
        ),
        (
            "GPU-hours lost to eviction".into(),
            per(&|r| format!("{:.1}", r.preemption.gpu_hours_lost)),
        ),
        ("scheduling cycles".into(), per(&|r| r.cycles.to_string())),
    ]);
    if let Some(t) = timing {
        rows.push((
            "engine time (wall)".into(),
            t.runs
                .iter()
                .map(|r| {
                    format!(
                        "{:.2} s, {} us/cycle p99",
                        r.engine_seconds, r.per_cycle_micros.p99
                    )
                })
                .collect(),
        ));
    }
    rows
}

/// For each run, the first earlier run with the same results (everything but the policy),
/// so reports can say that a setting changed nothing.
pub fn identical_runs(metrics: &Metrics) -> Vec<Option<usize>> {
    let values: Vec<serde_json::Value> = metrics
        .runs
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.remove("policy");
                o.remove("cycles");
            }
            v
        })
        .collect();
    (0..values.len())
        .map(|i| (0..i).find(|&j| values[j] == values[i]))
        .collect()
}

fn identical_notes(metrics: &Metrics) -> Vec<String> {
    identical_runs(metrics)
        .iter()
        .enumerate()
        .filter_map(|(i, same)| {
            same.map(|j| {
                format!(
                    "{} gave the same metrics as {}: the setting that differs changed none of them here",
                    metrics.runs[i].policy.name, metrics.runs[j].policy.name
                )
            })
        })
        .collect()
}

fn policy_line(r: &RunMetrics) -> String {
    let p = &r.policy;
    format!(
        "{} (scoring {}, batching {}, preemption {}, {})",
        p.name,
        p.scoring_strategy,
        if p.batching { "on" } else { "off" },
        if p.preemption {
            format!("on, gang preemption {}", p.gang_preemption)
        } else {
            "off".into()
        },
        match p.interval {
            Some(i) => format!("a cycle every {}", duration(i)),
            None => "a cycle at every event".into(),
        }
    )
}

/// The summary table for the terminal.
pub fn summary(metrics: &Metrics, timing: &Timing) -> String {
    let t = &metrics.trace;
    let mut out = String::new();
    let _ = writeln!(out, "lockstep simulate: {}", t.name);
    let _ = writeln!(
        out,
        "  cluster: {} nodes ({} with GPUs), {} GPUs, {} CPUs",
        t.nodes, t.gpu_nodes, t.gpus, t.cpu_cores
    );
    let _ = writeln!(
        out,
        "  trace:   {}, {}, {}",
        plural(t.jobs, "job"),
        plural(t.gang_jobs, "gang"),
        plural(t.pods, "pod")
    );
    for s in &t.skipped {
        let _ = writeln!(out, "  skipped: {}", s.reason);
    }
    for n in &t.notes {
        let _ = writeln!(out, "  note:    {n}");
    }
    if !metrics.fragmentation_runs.is_empty() {
        out.push('\n');
        for line in fragmentation_lines(metrics) {
            let _ = writeln!(out, "{line}");
        }
        let (header, rows) = fragmentation_table(metrics);
        let mut table = TextTable::new(header);
        for row in rows {
            table.row(row);
        }
        out.push_str(&table.render("  "));
        if let Some(f) = &metrics.fgd_reference {
            let _ = writeln!(
                out,
                "  paper: mean of {} seeds per policy for {} (tune {}), from {}",
                f.curves.first().map_or(0, |c| c.seeds),
                f.workload,
                f.tune,
                f.source
            );
        }
    }
    if metrics.runs.len() > 1 {
        out.push('\n');
        let mut header = vec!["".to_string()];
        header.extend(metrics.runs.iter().map(|r| r.policy.name.clone()));
        let mut table = TextTable::new(header);
        for (name, values) in comparison(metrics, Some(timing)) {
            let mut row = vec![name];
            row.extend(values);
            table.row(row);
        }
        out.push_str(&table.render("  "));
        for note in identical_notes(metrics) {
            let _ = writeln!(out, "  note: {note}");
        }
    }
    for (r, tm) in metrics.runs.iter().zip(&timing.runs) {
        out.push('\n');
        let _ = writeln!(out, "policy {}", policy_line(r));
        let _ = writeln!(
            out,
            "  simulated {} in {} cycles ({:.2} s wall, {:.2} s in the engine); jobs: {} completed, {} running, {} pending",
            duration(r.simulated_seconds),
            r.cycles,
            tm.wall_seconds,
            tm.engine_seconds,
            r.jobs.completed,
            r.jobs.running_at_end,
            r.jobs.pending_at_end
        );
        let _ = writeln!(
            out,
            "  allocation: GPU mean {} while jobs arrive, {} over the run (peak {}); CPU mean {} while jobs arrive",
            percent(r.allocation.gpu_mean_while_arriving),
            percent(r.allocation.gpu_mean),
            percent(r.allocation.gpu_peak),
            percent(r.allocation.cpu_mean_while_arriving)
        );
        let _ = writeln!(
            out,
            "  fragmentation: {:.1} GPUs free but unusable by any pending pod on average ({} of capacity)",
            r.fragmentation.mean_fragmented_gpus,
            percent(r.fragmentation.mean_share_of_capacity)
        );
        let _ = writeln!(
            out,
            "  preemption: {} pods evicted, {} gangs disrupted, {:.1} GPU-hours lost",
            r.preemption.evicted_pods, r.preemption.disrupted_gangs, r.preemption.gpu_hours_lost
        );
        let mut table = TextTable::new(CLASS_HEADER.iter().map(|s| s.to_string()).collect());
        for row in class_rows(&r.queueing_delay, &r.job_completion_time) {
            table.row(row);
        }
        out.push_str(&table.render("  "));
    }
    out
}

/// The upper bound of the runs' arrivals (the first run's: runs of one seed share them),
/// when it was computed.
fn fragmentation_bound(metrics: &Metrics) -> Option<&Vec<FragmentationStep>> {
    metrics
        .fragmentation_runs
        .first()
        .map(|r| &r.bound_steps)
        .filter(|b| !b.is_empty())
}

/// A curve's points: (arrived percent, allocated percent).
fn step_points(steps: &[FragmentationStep]) -> Vec<(f64, f64)> {
    steps
        .iter()
        .map(|s| (f64::from(s.arrived_percent), s.allocated_percent))
        .collect()
}

/// Steps (whole percents of arrived demand) of the longest fragmentation run.
fn fragmentation_steps(metrics: &Metrics) -> usize {
    metrics
        .fragmentation_runs
        .iter()
        .map(|r| r.steps.len())
        .max()
        .unwrap_or(0)
}

/// The fragmentation-mode table: allocation at every 10% of arrived demand (and the last
/// step), one column per run and per policy of the FGD paper's results.
fn fragmentation_table(metrics: &Metrics) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header = vec!["arrived GPU demand".to_string()];
    header.extend(metrics.fragmentation_runs.iter().map(|r| r.policy.clone()));
    // The bound of the first run's arrivals (runs of one seed share them).
    let bound = fragmentation_bound(metrics);
    if bound.is_some() {
        header.push("upper bound".into());
    }
    if let Some(f) = &metrics.fgd_reference {
        header.extend(f.curves.iter().map(|c| format!("paper {}", c.policy)));
    }
    let last = fragmentation_steps(metrics);
    let mut rows = Vec::new();
    for k in (0..last).filter(|k| k % 10 == 0 || k + 1 == last) {
        let mut row = vec![format!("{k}%")];
        for r in &metrics.fragmentation_runs {
            row.push(
                r.steps
                    .get(k)
                    .map_or("-".into(), |s| format!("{:.2}%", s.allocated_percent)),
            );
        }
        if let Some(b) = bound {
            row.push(
                b.get(k)
                    .map_or("-".into(), |s| format!("{:.2}%", s.allocated_percent)),
            );
        }
        if let Some(f) = &metrics.fgd_reference {
            for c in &f.curves {
                row.push(
                    c.allocated_percent
                        .get(k)
                        .map_or("-".into(), |v| format!("{v:.2}%")),
                );
            }
        }
        rows.push(row);
    }
    (header, rows)
}

fn fragmentation_lines(metrics: &Metrics) -> Vec<String> {
    metrics
        .fragmentation_runs
        .iter()
        .map(|r| {
            let at100 = r.rounded_steps.get(100).map_or(String::new(), |s| {
                format!(
                    "; at 100% of demand {:.2}% (mean over the arrivals rounding to 100%, as the \
                     paper measures)",
                    s.allocated_percent
                )
            });
            let bound = r.bound_steps.get(100).map_or(String::new(), |s| {
                format!(
                    "; no policy can allocate more than {:.2}% of the pods arrived by 100% \
                     (linear-programming bound)",
                    s.allocated_percent
                )
            });
            format!(
                "fragmentation mode, policy {} (seed {}): {} arrived ({} copies to reach {:.0}% of \
                 GPU capacity), {} did not fit; arrived {:.2}% of GPU capacity, allocated {:.2}%{at100}",
                r.policy,
                r.seed,
                plural(r.arrived_jobs, "job"),
                r.copied_jobs,
                r.share * 100.0,
                r.failed_jobs,
                r.arrived_percent,
                r.allocated_percent
            ) + &bound
        })
        .collect()
}

/// The allocation chart from `from` percent of arrived demand on (0: the whole run; above
/// it the y axis starts just under the lowest value shown, so close curves part).
fn fragmentation_chart(metrics: &Metrics, from: u32) -> String {
    let mut lines: Vec<Line> = metrics
        .fragmentation_runs
        .iter()
        .map(|r| Line {
            name: r.policy.clone(),
            points: step_points(&r.steps),
        })
        .collect();
    let last = fragmentation_steps(metrics);
    if let Some(bound) = fragmentation_bound(metrics) {
        lines.push(Line {
            name: "upper bound (no policy allocates more)".into(),
            points: step_points(bound),
        });
    }
    if let Some(f) = &metrics.fgd_reference {
        for c in &f.curves {
            lines.push(Line {
                name: format!("paper {}", c.policy),
                points: c
                    .allocated_percent
                    .iter()
                    .take(last)
                    .enumerate()
                    .map(|(k, v)| (k as f64, *v))
                    .collect(),
            });
        }
    }
    for line in &mut lines {
        line.points.retain(|&(x, _)| x >= f64::from(from));
    }
    let lowest = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|&(_, y)| y))
        .fold(f64::MAX, f64::min);
    let y_min = (from > 0 && lowest < f64::MAX).then(|| (lowest - 1.0).floor().max(0.0));
    let title = if from > 0 {
        format!("GPU allocation from {from}% of arrived demand on (no departures)")
    } else {
        "GPU allocation against arrived GPU demand (no departures)".to_string()
    };
    let pct = |v: &f64| format!("{v:.0}%");
    draw_chart(
        &Chart {
            title: &title,
            x_desc: "arrived GPU demand (% of capacity)",
            y_desc: "allocated GPUs (% of capacity)",
            x_format: &pct,
            y_format: &pct,
            y_max: Some(100.0),
            y_min,
            lines_are: "policies",
        },
        &lines,
    )
}

// ---- Charts ------------------------------------------------------------------------------

/// Line colours: the Okabe-Ito palette, distinguishable with the common colour-vision
/// deficiencies (yellow, the faintest on white, last).
const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442",
];
/// Line styles (SVG `stroke-dasharray`), so lines differ in more than colour.
const DASHES: [&str; 4] = ["", "9 4", "2 3", "12 3 3 3"];

/// The colour and dash pattern of line `i` of a chart: every line of a chart with up to
/// 32 lines looks different, and a policy keeps its look across charts (its index).
fn line_style(i: usize) -> (&'static str, &'static str) {
    (
        PALETTE[i % PALETTE.len()],
        DASHES[(i + i / PALETTE.len()) % DASHES.len()],
    )
}

struct Line {
    name: String,
    points: Vec<(f64, f64)>,
}

struct Chart<'a> {
    title: &'a str,
    x_desc: &'a str,
    y_desc: &'a str,
    x_format: &'a dyn Fn(&f64) -> String,
    y_format: &'a dyn Fn(&f64) -> String,
    y_max: Option<f64>,
    /// The bottom of the y axis (default 0).
    y_min: Option<f64>,
    /// What the lines are (`policies`, `classes`): the legend's `data-lines`, so a check
    /// can find the charts that must show every policy.
    lines_are: &'a str,
}

/// Size of the drawing in SVG user units; the page scales it to its container's width.
const CHART_SIZE: (u32, u32) = (760, 330);

/// One chart as an HTML figure: an SVG that scales to its container (axes and grid by
/// plotters, the lines as SVG polylines with their dash patterns) and, below it, an HTML
/// legend listing every line, so no legend covers a curve.
fn draw_chart(chart: &Chart, lines: &[Line]) -> String {
    let mut svg = String::new();
    let mut polylines = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, CHART_SIZE).into_drawing_area();
        // Drawing into a string cannot fail for I/O reasons; a failure leaves a blank chart.
        if let Ok(p) = draw_into(&root, chart, lines) {
            polylines = p;
        }
        let _ = root.present();
    }
    // Fixed width and height attributes would keep the drawing from shrinking with the
    // page; the viewBox plotters writes keeps its proportions.
    let svg = svg.replacen(
        &format!("width=\"{}\" height=\"{}\" ", CHART_SIZE.0, CHART_SIZE.1),
        "preserveAspectRatio=\"xMidYMid meet\" ",
        1,
    );
    let svg = match svg.rfind("</svg>") {
        Some(at) => format!("{}{}</svg>", &svg[..at], polylines.concat()),
        None => svg,
    };
    let mut out = format!(
        "<figure class=\"chart\">{svg}<figcaption class=\"legend\" data-lines=\"{}\">",
        esc(chart.lines_are)
    );
    for (i, line) in lines.iter().enumerate() {
        let (color, dash) = line_style(i);
        let _ = write!(
            out,
            "<span class=\"key\"><svg width=\"30\" height=\"10\" aria-hidden=\"true\">\
             <line x1=\"1\" y1=\"5\" x2=\"29\" y2=\"5\" stroke=\"{color}\" stroke-width=\"3\" \
             stroke-dasharray=\"{dash}\"/></svg><span class=\"name\">{}</span></span>",
            esc(&line.name)
        );
    }
    out.push_str("</figcaption></figure>");
    out
}

/// Draws the axes and grid, and returns each line as an SVG polyline in the drawing's
/// coordinates (earlier lines wider, so identical runs stay visible under later ones).
fn draw_into<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    spec: &Chart,
    lines: &[Line],
) -> Result<Vec<String>, DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let all = lines.iter().flat_map(|l| l.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = spec
        .y_max
        .unwrap_or(if y1 <= 0.0 { 1.0 } else { y1 * 1.08 });
    let y0 = spec.y_min.unwrap_or(0.0).min(y1 - f64::EPSILON);
    let mut chart = ChartBuilder::on(root)
        .caption(spec.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(38)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    chart
        .configure_mesh()
        .x_desc(spec.x_desc)
        .y_desc(spec.y_desc)
        .x_label_formatter(spec.x_format)
        .y_label_formatter(spec.y_format)
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()?;
    let n = lines.len();
    let mut out = Vec::with_capacity(n);
    for (i, line) in lines.iter().enumerate() {
        let (color, dash) = line_style(i);
        let width = if n > 1 { 2 + (n - 1 - i).min(3) } else { 2 };
        let mut points = String::new();
        for &(x, y) in &line.points {
            let (px, py) = chart.backend_coord(&(x, y.clamp(y0, y1)));
            let _ = write!(points, "{px},{py} ");
        }
        out.push(format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"{width}\" \
             stroke-dasharray=\"{dash}\" stroke-linejoin=\"round\" points=\"{}\"/>",
            points.trim_end()
        ));
    }
    Ok(out)
}

/// The time unit for an x axis spanning `end` seconds.
fn time_unit(end: u64) -> (f64, &'static str) {
    if end >= 3 * 86400 {
        (86400.0, "days")
    } else if end >= 3 * 3600 {
        (3600.0, "hours")
    } else if end >= 180 {
        (60.0, "minutes")
    } else {
        (1.0, "seconds")
    }
}

fn series_lines(
    metrics: &Metrics,
    unit: f64,
    value: impl Fn(&RunMetrics) -> &Vec<f64>,
) -> Vec<Line> {
    metrics
        .runs
        .iter()
        .map(|r| Line {
            name: r.policy.name.clone(),
            points: r
                .series
                .time
                .iter()
                .zip(value(r))
                .map(|(&t, &v)| (t as f64 / unit, v))
                .collect(),
        })
        .collect()
}

fn charts(metrics: &Metrics) -> Vec<String> {
    let end = metrics
        .runs
        .iter()
        .map(|r| r.simulated_seconds)
        .max()
        .unwrap_or(0);
    let (unit, unit_name) = time_unit(end);
    let x_desc = format!("simulated time ({unit_name})");
    // Count axes: whole numbers only (no repeated labels on short ranges).
    let plain = |v: &f64| {
        if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            String::new()
        }
    };
    let x_fmt = |v: &f64| {
        if unit == 1.0 || v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    };
    let pct = |v: &f64| format!("{:.0}%", v * 100.0);
    let mut out = Vec::new();
    out.push(draw_chart(
        &Chart {
            title: "GPU allocation",
            x_desc: &x_desc,
            y_desc: "GPUs requested by running pods",
            x_format: &x_fmt,
            y_format: &pct,
            y_max: Some(1.0),
            y_min: None,
            lines_are: "policies",
        },
        &series_lines(metrics, unit, |r| &r.series.gpu_allocation),
    ));
    out.push(draw_chart(
        &Chart {
            title: "Queue length",
            x_desc: &x_desc,
            y_desc: "pending jobs",
            x_format: &x_fmt,
            y_format: &plain,
            y_max: None,
            y_min: None,
            lines_are: "policies",
        },
        &series_lines(metrics, unit, |r| &r.series.pending_jobs),
    ));
    // Queueing delay CDFs on a log scale of seconds (1 s .. max).
    let log_x = |v: &f64| duration(10f64.powf(*v).round() as u64);
    let cdf_line = |name: String, points: &[(u64, f64)]| Line {
        name,
        points: points
            .iter()
            .map(|&(s, f)| (((s.max(1)) as f64).log10(), f))
            .collect(),
    };
    for run in &metrics.runs {
        let lines: Vec<Line> = run
            .queueing_delay_cdf
            .iter()
            .filter(|c| c.priority_class != "all")
            .filter(|c| !c.points.is_empty())
            .map(|c| cdf_line(c.priority_class.clone(), &c.points))
            .collect();
        let title = format!("Queueing delay by priority class ({})", run.policy.name);
        out.push(draw_chart(
            &Chart {
                title: &title,
                x_desc: "wait (log scale)",
                y_desc: "share of started jobs",
                x_format: &log_x,
                y_format: &pct,
                y_max: Some(1.0),
                y_min: None,
                lines_are: "classes",
            },
            &lines,
        ));
    }
    if metrics.runs.len() > 1 {
        let lines: Vec<Line> = metrics
            .runs
            .iter()
            .filter_map(|r| {
                r.queueing_delay_cdf
                    .iter()
                    .find(|c| c.priority_class == "all")
                    .map(|c| cdf_line(r.policy.name.clone(), &c.points))
            })
            .collect();
        out.push(draw_chart(
            &Chart {
                title: "Queueing delay, all jobs, by policy",
                x_desc: "wait (log scale)",
                y_desc: "share of started jobs",
                x_format: &log_x,
                y_format: &pct,
                y_max: Some(1.0),
                y_min: None,
                lines_are: "policies",
            },
            &lines,
        ));
    }
    out.push(draw_chart(
        &Chart {
            title: "CPU allocation",
            x_desc: &x_desc,
            y_desc: "CPU requested by running pods",
            x_format: &x_fmt,
            y_format: &pct,
            y_max: Some(1.0),
            y_min: None,
            lines_are: "policies",
        },
        &series_lines(metrics, unit, |r| &r.series.cpu_allocation),
    ));
    out.push(draw_chart(
        &Chart {
            title: "Fragmentation: free GPUs no pending pod can use",
            x_desc: &x_desc,
            y_desc: "GPUs",
            x_format: &x_fmt,
            y_format: &plain,
            y_max: None,
            y_min: None,
            lines_are: "policies",
        },
        &series_lines(metrics, unit, |r| &r.series.fragmented_gpus),
    ));
    let preemption: Vec<Line> = metrics
        .runs
        .iter()
        .map(|r| {
            let mut points = vec![(0.0, 0.0)];
            for &(t, n) in &r.preemption.timeline {
                points.push((t as f64 / unit, points.last().map_or(0.0, |p| p.1)));
                points.push((t as f64 / unit, n as f64));
            }
            points.push((
                r.simulated_seconds as f64 / unit,
                points.last().map_or(0.0, |p| p.1),
            ));
            Line {
                name: r.policy.name.clone(),
                points,
            }
        })
        .collect();
    let evicted: usize = metrics.runs.iter().map(|r| r.preemption.evicted_pods).sum();
    let title = if evicted == 0 {
        "Preemption timeline: no pod was evicted"
    } else {
        "Preemption timeline: evicted pods so far"
    };
    out.push(draw_chart(
        &Chart {
            title,
            x_desc: &x_desc,
            y_desc: "evicted pods",
            x_format: &x_fmt,
            y_format: &plain,
            y_max: (evicted == 0).then_some(5.0),
            y_min: None,
            lines_are: "policies",
        },
        &preemption,
    ));
    out
}

// ---- HTML --------------------------------------------------------------------------------

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1600px;padding:0 1.5rem;color:#222;overflow-wrap:anywhere}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.3rem}
.sub{color:#666;margin-top:0}.table{max-width:100%;overflow-x:auto}table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem}
th,td{padding:.3rem .7rem;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}th{background:#f6f6f6}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,560px),1fr));gap:1rem}
figure.chart{margin:0;min-width:0;border:1px solid #eee;border-radius:6px;padding:.3rem}
figure.chart>svg{display:block;width:100%;height:auto}
.legend{display:flex;flex-wrap:wrap;gap:.3rem 1.1rem;padding:.3rem .5rem;font-size:.85rem}
.legend .key{display:inline-flex;align-items:center;gap:.35rem}
.note{color:#555;font-size:.9rem}.warn{color:#a35200}
dl{display:grid;grid-template-columns:max-content minmax(0,auto);gap:.2rem 1rem}dt{color:#666}dd{margin:0}
@media (max-width:600px){body{margin:1rem auto;padding:0 .6rem}}";

/// A table in a box that scrolls sideways on its own when it is wider than the page, so
/// the page itself never does.
fn html_table(out: &mut String, header: &[String], rows: &[Vec<String>]) {
    out.push_str("<div class=\"table\"><table><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>");
    for r in rows {
        out.push_str("<tr>");
        for c in r {
            let _ = write!(out, "<td>{}</td>", esc(c));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></div>\n");
}

/// The policies the report compares, in its order (each keeps its line style in every
/// chart).
fn policy_names(metrics: &Metrics) -> Vec<String> {
    let mut names: Vec<String> = metrics.runs.iter().map(|r| r.policy.name.clone()).collect();
    for r in &metrics.fragmentation_runs {
        if !names.contains(&r.policy) {
            names.push(r.policy.clone());
        }
    }
    names
}

/// The self-contained HTML report.
pub fn html(metrics: &Metrics, timing: &Timing) -> String {
    let t = &metrics.trace;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <meta name=\"lockstep-policies\" content=\"{}\">\
         <title>lockstep simulate: {}</title><style>{STYLE}</style></head><body>\n",
        esc(&serde_json::to_string(&policy_names(metrics)).unwrap_or_default()),
        esc(&t.name)
    );
    let _ = writeln!(
        out,
        "<h1>lockstep simulate</h1><p class=\"sub\">{}</p>",
        esc(&t.name)
    );
    out.push_str("<dl>");
    let _ = write!(
        out,
        "<dt>cluster</dt><dd>{} nodes ({} with GPUs), {} GPUs, {} CPUs</dd>",
        t.nodes, t.gpu_nodes, t.gpus, t.cpu_cores
    );
    let _ = write!(
        out,
        "<dt>trace</dt><dd>{}, {}, {}; priority classes: {}</dd>",
        plural(t.jobs, "job"),
        plural(t.gang_jobs, "gang"),
        plural(t.pods, "pod"),
        esc(&t.priority_classes.join(", "))
    );
    if let Some(seed) = metrics.seed {
        let _ = write!(out, "<dt>seed</dt><dd>{seed}</dd>");
    }
    for s in &t.skipped {
        let _ = write!(
            out,
            "<dt>skipped</dt><dd class=\"warn\">{}</dd>",
            esc(&s.reason)
        );
    }
    for n in &t.notes {
        let _ = write!(out, "<dt>note</dt><dd class=\"note\">{}</dd>", esc(n));
    }
    out.push_str("</dl>\n");
    if !metrics.fragmentation_runs.is_empty() {
        out.push_str("<h2>Fragmentation mode</h2>\n");
        for line in fragmentation_lines(metrics) {
            let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(&line));
        }
        out.push_str("<div class=\"charts\">\n");
        out.push_str(&fragmentation_chart(metrics, 0));
        // Where the policies part: from 80% of demand on, when the runs go that far.
        if fragmentation_steps(metrics) > 90 {
            out.push_str(&fragmentation_chart(metrics, 80));
        }
        out.push_str("\n</div>\n");
        let (header, rows) = fragmentation_table(metrics);
        html_table(&mut out, &header, &rows);
        if let Some(f) = &metrics.fgd_reference {
            let _ = writeln!(
                out,
                "<p class=\"note\">paper: the FGD paper's published results for {} (tune {}), \
                 mean of {} seeds per policy, from {}. Pods arrive in a seeded random order and \
                 never leave; allocation is GPUs requested by bound pods over GPU capacity, \
                 at each share of capacity the arrived pods asked for.</p>",
                esc(&f.workload),
                esc(&f.tune),
                f.curves.first().map_or(0, |c| c.seeds),
                esc(&f.source)
            );
        }
    }
    if metrics.runs.is_empty() {
        out.push_str("</body></html>\n");
        return out;
    }
    out.push_str("<h2>Results</h2>\n");
    let mut header = vec!["".to_string()];
    header.extend(metrics.runs.iter().map(|r| r.policy.name.clone()));
    let rows: Vec<Vec<String>> = comparison(metrics, Some(timing))
        .into_iter()
        .map(|(name, values)| {
            let mut row = vec![name];
            row.extend(values);
            row
        })
        .collect();
    html_table(&mut out, &header, &rows);
    for note in identical_notes(metrics) {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(&note));
    }
    out.push_str("<h2>Charts</h2><div class=\"charts\">\n");
    for svg in charts(metrics) {
        out.push_str(&svg);
        out.push('\n');
    }
    out.push_str("</div>\n");
    for r in &metrics.runs {
        let _ = writeln!(out, "<h2>Per priority class: {}</h2>", esc(&r.policy.name));
        let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(&policy_line(r)));
        let header: Vec<String> = CLASS_HEADER.iter().map(|s| s.to_string()).collect();
        html_table(
            &mut out,
            &header,
            &class_rows(&r.queueing_delay, &r.job_completion_time),
        );
    }
    out.push_str(
        "<h2>How to read this</h2><p class=\"note\">Allocation: resources requested by bound pods \
         over cluster capacity, time-weighted. Queueing delay: time a job spent pending before \
         it ran (all attempts). JCT: completion minus arrival. Percentiles are nearest-rank. \
         Fragmentation: free GPUs on nodes where no pending pod's shape (GPUs, CPU, memory) \
         fits. Preemption counts evicted pods, running gangs disrupted, and GPU-hours of \
         progress lost (a victim's whole job restarts). Batching changes how fast the engine \
         decides, not what it decides. metrics.json holds every number here \
         (identical for the same seed); timing.json holds wall-clock times.</p>\n",
    );
    out.push_str("</body></html>\n");
    out
}

/// Writes `index.html`, `metrics.json` and `timing.json` into `dir` (created if missing).
pub fn write(dir: &Path, metrics: &Metrics, timing: &Timing) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("metrics.json"), metrics_json(metrics))?;
    std::fs::write(
        dir.join("timing.json"),
        serde_json::to_string_pretty(timing).map_err(std::io::Error::other)? + "\n",
    )?;
    std::fs::write(dir.join("index.html"), html(metrics, timing))?;
    Ok(())
}

/// `metrics.json`'s text.
pub fn metrics_json(metrics: &Metrics) -> String {
    serde_json::to_string_pretty(metrics).expect("metrics serialize to JSON") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_a_chart_looks_different() {
        let styles: Vec<_> = (0..32).map(super::line_style).collect();
        for (i, a) in styles.iter().enumerate() {
            for b in &styles[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(0), "0s");
        assert_eq!(duration(59), "59s");
        assert_eq!(duration(90), "1m 30s");
        assert_eq!(duration(3 * 3600 + 60), "3h 01m");
        assert_eq!(duration(2 * 86400 + 5 * 3600), "2d 05h");
    }
}
