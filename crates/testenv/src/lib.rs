//! A real Kubernetes control plane for lockstep's tests and benchmarks.
//!
//! [`ControlPlane::start`] builds the Go program in `testenv/` (once per test
//! process; Go's caches and a binary cache keyed by the sources make later builds
//! instant), starts an embedded etcd and a real kube-apiserver v1.37 on a free
//! loopback port, optionally with the real kube-scheduler v1.37, and hands out a
//! kubeconfig and a kube-rs client. Dropping the [`ControlPlane`] stops it, also
//! when a test panics; if the test process dies, the program notices its parent is
//! gone and stops by itself.
//!
//! This crate is for tests and benchmarks only: no product crate depends on it.
//! It never skips: when Go is missing or the build fails, [`ControlPlane::start`]
//! returns an error that says what to install or what failed.

pub mod objects;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a build of the Go program may take (a cold build from the Go module
/// proxy takes about ten minutes on two cores).
pub const BUILD_TIMEOUT: Duration = Duration::from_secs(40 * 60);
/// How long the control plane may take to print `ready` after it is started.
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a stopping control plane may take before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Lines of the control plane's log quoted in an error.
const LOG_LINES_IN_ERRORS: usize = 40;

/// Why the control plane could not be built or started.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("testenv: {0}")]
    Build(String),
    #[error("testenv: {what}\n--- last lines of its log ({log}) ---\n{tail}")]
    Start {
        what: String,
        log: String,
        tail: String,
    },
    #[error("testenv: {0}")]
    Io(String),
    #[error("testenv: kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
}

/// What to start besides etcd and kube-apiserver.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Also run the real kube-scheduler v1.37 (default profile unless `scheduler_config`).
    pub kube_scheduler: bool,
    /// A KubeSchedulerConfiguration file for kube-scheduler; its client connection is
    /// pointed at this API server and leader election is turned off.
    pub scheduler_config: Option<PathBuf>,
    /// A fixed port for the API server (default: a free one).
    pub port: Option<u16>,
}

/// A running control plane; stopped when dropped.
pub struct ControlPlane {
    child: Child,
    /// The program's stdout, line by line ("ready", then "restarted" per restart).
    lines: std::sync::Mutex<mpsc::Receiver<String>>,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    log: PathBuf,
}

/// The repository's `testenv/` directory.
pub fn testenv_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testenv")
}

/// Builds the Go program (or finds the cached build) and returns its path. The
/// build runs once per process; later calls return the same answer.
pub fn build() -> Result<PathBuf, Error> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| build_uncached().map_err(|e| e.to_string()))
        .clone()
        .map_err(Error::Build)
}

fn build_uncached() -> Result<PathBuf, String> {
    let script = testenv_dir().join("build.sh");
    let mut child = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stdout = read_in_background(child.stdout.take());
    let stderr = read_in_background(child.stderr.take());
    let status = wait_bounded(&mut child, BUILD_TIMEOUT)
        .map_err(|e| format!("waiting for {}: {e}", script.display()))?;
    let out = stdout.recv().unwrap_or_default();
    let err = stderr.recv().unwrap_or_default();
    match status {
        None => Err(format!(
            "building the control plane took longer than {} min; stopped. Output so far:\n{}",
            BUILD_TIMEOUT.as_secs() / 60,
            last_lines(&err, LOG_LINES_IN_ERRORS)
        )),
        Some(s) if !s.success() => Err(format!(
            "building the control plane failed ({}):\n{}",
            s,
            last_lines(&err, LOG_LINES_IN_ERRORS)
        )),
        Some(_) => {
            let path = PathBuf::from(out.trim());
            if path.is_file() {
                Ok(path)
            } else {
                Err(format!(
                    "build.sh printed {:?}, which is not a file",
                    out.trim()
                ))
            }
        }
    }
}

fn read_in_background<R: Read + Send + 'static>(r: Option<R>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut r) = r {
            let _ = r.read_to_string(&mut s);
        }
        let _ = tx.send(s);
    });
    rx
}

/// Waits for the child at most `timeout`; kills it and returns `None` past it.
fn wait_bounded(
    child: &mut Child,
    timeout: Duration,
) -> std::io::Result<Option<std::process::ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver (and kube-scheduler when asked) and waits,
    /// at most [`READY_TIMEOUT`], until they are ready.
    pub fn start(options: Options) -> Result<ControlPlane, Error> {
        let binary = build()?;
        let dir = tempfile::Builder::new()
            .prefix("lockstep-testenv-")
            .tempdir()
            .map_err(|e| Error::Io(format!("creating a temporary directory: {e}")))?;
        let kubeconfig = dir.path().join("kubeconfig");
        let log = dir.path().join("testenv.log");
        let log_file = std::fs::File::create(&log)
            .map_err(|e| Error::Io(format!("creating {}: {e}", log.display())))?;
        let mut cmd = Command::new(&binary);
        cmd.arg(&kubeconfig)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("--parent-pid")
            .arg(std::process::id().to_string());
        if options.kube_scheduler {
            cmd.arg("--kube-scheduler");
            if let Some(config) = &options.scheduler_config {
                cmd.arg(config);
            }
        }
        if let Some(port) = options.port {
            cmd.arg("--port").arg(port.to_string());
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .spawn()
            .map_err(|e| Error::Io(format!("starting {}: {e}", binary.display())))?;

        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout is piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut plane = ControlPlane {
            child,
            lines: std::sync::Mutex::new(rx),
            dir,
            kubeconfig,
            log,
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let line = plane
                .lines
                .get_mut()
                .expect("not poisoned")
                .recv_timeout(Duration::from_millis(100));
            match line {
                Ok(line) if line.trim() == "ready" => return Ok(plane),
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = plane.child.wait().ok();
                    return Err(plane.start_error(format!(
                        "the control plane exited before it was ready ({})",
                        status.map_or("unknown status".to_string(), |s| s.to_string())
                    )));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= deadline {
                return Err(plane.start_error(format!(
                    "the control plane was not ready within {} s (etcd, kube-apiserver{})",
                    READY_TIMEOUT.as_secs(),
                    if options.kube_scheduler {
                        ", kube-scheduler"
                    } else {
                        ""
                    }
                )));
            }
        }
    }

    fn start_error(&self, what: String) -> Error {
        Error::Start {
            what,
            log: self.log.display().to_string(),
            tail: self.log_tail(LOG_LINES_IN_ERRORS),
        }
    }

    /// The last `n` lines the control plane logged.
    pub fn log_tail(&self, n: usize) -> String {
        std::fs::read_to_string(&self.log)
            .map(|s| last_lines(&s, n))
            .unwrap_or_default()
    }

    /// The kubeconfig of the cluster's admin user.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A temporary directory that lives as long as the control plane.
    pub fn scratch_dir(&self) -> &Path {
        self.dir.path()
    }

    /// A kube-rs client for the cluster's admin user.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        let path = self.kubeconfig.display().to_string();
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).map_err(|e| {
            Error::Kubeconfig {
                path: path.clone(),
                message: e.to_string(),
            }
        })?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| Error::Kubeconfig {
                path: path.clone(),
                message: e.to_string(),
            })?;
        kube::Client::try_from(config).map_err(|e| Error::Kubeconfig {
            path,
            message: e.to_string(),
        })
    }

    /// Restarts kube-apiserver alone, as an upgrade or a crash would: every
    /// connection and watch drops, and a new API server on the same port, etcd and
    /// credentials serves again (so clients keep their kubeconfig). Blocks until it
    /// is ready again, at most [`READY_TIMEOUT`]; from async code call it inside
    /// `tokio::task::block_in_place`.
    pub fn restart_api_server(&self) -> Result<(), Error> {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: kill(2) on our own child's pid; the pid is valid until we reap it.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGUSR1);
        }
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) if line.trim() == "restarted" => return Ok(()),
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(self.start_error(
                        "the control plane exited while its API server restarted".into(),
                    ));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= deadline {
                return Err(self.start_error(format!(
                    "the restarted API server was not ready within {} s",
                    READY_TIMEOUT.as_secs()
                )));
            }
        }
    }

    /// Stops the control plane: SIGTERM, then SIGKILL after a bounded wait.
    pub fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill(2) on our own child's pid; the pid is valid until we reap it.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        if !matches!(wait_bounded(&mut self.child, STOP_TIMEOUT), Ok(Some(_))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}
