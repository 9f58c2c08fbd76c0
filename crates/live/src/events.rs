//! Kubernetes Events, written beside the scheduling work rather than inside it, as
//! kube-scheduler's event broadcaster does: a decision's binding does not wait for its
//! `Scheduled` event. Events queue (up to [`QUEUE`]) for one task that writes a few at a
//! time; when the queue is full an event is dropped and counted, never the scheduling
//! slowed. On shutdown the queued events are written, within a bound.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Events waiting to be written, at most.
pub const QUEUE: usize = 4096;
/// Events written at once.
const CONCURRENCY: usize = 8;

/// Where events go.
pub struct Events {
    sender: mpsc::Sender<(ObjectReference, Event)>,
    task: JoinHandle<()>,
}

impl Events {
    /// Starts the task that writes events through `recorder`.
    pub fn start(recorder: Recorder) -> Events {
        let (sender, receiver) = mpsc::channel::<(ObjectReference, Event)>(QUEUE);
        let task = tokio::spawn(async move {
            tokio_stream_of(receiver)
                .for_each_concurrent(CONCURRENCY, |(object, event)| {
                    let recorder = recorder.clone();
                    async move {
                        if let Err(e) = recorder.publish(&event, &object).await {
                            tracing::debug!("event {}: {e}", event.reason);
                        }
                    }
                })
                .await;
        });
        Events { sender, task }
    }

    /// Queues an event; `false` when the queue is full and it was dropped.
    pub fn send(&self, object: ObjectReference, event: Event) -> bool {
        self.sender.try_send((object, event)).is_ok()
    }

    /// Writes what is queued (for at most `bound`), then stops.
    pub async fn close(self, bound: Duration) {
        drop(self.sender);
        if tokio::time::timeout(bound, self.task).await.is_err() {
            tracing::warn!("some events were not written before stopping");
        }
    }
}

fn tokio_stream_of<T: Send + 'static>(
    mut receiver: mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}
