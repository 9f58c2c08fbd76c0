//! A progress bar on stderr (indicatif) that appears only once a run has taken more than a
//! second, and never when stderr is not a terminal.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Shows how many jobs have completed.
pub struct Progress {
    enabled: bool,
    started: Instant,
    bar: Option<ProgressBar>,
    label: String,
}

impl Progress {
    pub fn new(enabled: bool) -> Self {
        Progress {
            enabled,
            started: Instant::now(),
            bar: None,
            label: String::new(),
        }
    }

    /// Names the run now in progress (a policy).
    pub fn start(&mut self, label: &str) {
        self.label = label.to_string();
        if let Some(bar) = &self.bar {
            bar.set_message(self.label.clone());
            bar.set_position(0);
        }
    }

    pub fn update(&mut self, done: usize, total: usize) {
        if !self.enabled {
            return;
        }
        if self.bar.is_none() && self.started.elapsed() > Duration::from_secs(1) {
            let bar =
                ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{msg:>24} [{bar:40.cyan/blue}] {pos}/{len} jobs done ({elapsed})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_message(self.label.clone());
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    }

    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
