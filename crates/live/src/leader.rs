//! Leader election on a `coordination.k8s.io/v1` Lease (`--leader-elect`), through
//! kube-lease-manager: only the instance holding the lease schedules; an instance that
//! loses it stops (as kube-scheduler does) so its supervisor restarts it as a candidate; a
//! graceful stop releases the lease so another instance takes over at once.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Where the lease lives and how long it lasts.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    pub namespace: String,
    pub name: String,
    /// This instance's identity in the lease (`holderIdentity`).
    pub identity: String,
    /// kube-scheduler's `--leader-elect-lease-duration`.
    pub lease_duration: Duration,
}

/// A held (or sought) lease; dropping it releases the lease.
pub struct Leadership {
    state: watch::Receiver<bool>,
    task:
        JoinHandle<Result<kube_lease_manager::LeaseManager, kube_lease_manager::LeaseManagerError>>,
}

impl Leadership {
    /// Joins the election and waits until this instance leads.
    pub async fn acquire(client: &Client, e: &LeaderElection) -> Result<Leadership, String> {
        let secs = e.lease_duration.as_secs().max(2);
        let manager = LeaseManagerBuilder::new(client.clone(), e.name.clone())
            .with_namespace(e.namespace.clone())
            .with_identity(e.identity.clone())
            .with_duration(secs)
            .with_grace((secs / 3).max(1))
            .build()
            .await
            .map_err(|err| format!("lease {}/{}: {err}", e.namespace, e.name))?;
        let (mut state, task) = manager.watch().await;
        tracing::info!(
            "waiting for the lease {}/{} as {}",
            e.namespace,
            e.name,
            e.identity
        );
        while !*state.borrow_and_update() {
            state
                .changed()
                .await
                .map_err(|_| format!("the election on lease {}/{} stopped", e.namespace, e.name))?;
        }
        tracing::info!(
            "leading: lease {}/{} held as {}",
            e.namespace,
            e.name,
            e.identity
        );
        Ok(Leadership { state, task })
    }

    /// Completes when this instance no longer leads.
    pub async fn lost(&mut self) {
        loop {
            if !*self.state.borrow_and_update() {
                return;
            }
            if self.state.changed().await.is_err() {
                return;
            }
        }
    }

    /// Gives the lease up (another instance may take it at once) and waits for that.
    pub async fn release(self) {
        drop(self.state);
        match tokio::time::timeout(Duration::from_secs(10), self.task).await {
            Ok(Ok(Ok(_))) => tracing::info!("lease released"),
            Ok(Ok(Err(e))) => tracing::warn!("releasing the lease: {e}"),
            _ => tracing::warn!("the lease was not released in time; it expires by itself"),
        }
    }
}
