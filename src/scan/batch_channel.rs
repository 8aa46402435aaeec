//! A unit's batches made on a blocking thread and handed to the scan as it reads them: the
//! maker waits while the scan has [`BATCHES_AHEAD`] batches it has not taken, so a unit of
//! 10^8 rows holds a few batches, not all of its rows at once, and a scan that stops early
//! (a LIMIT) stops the maker with it.

use std::future::Future;

use arrow::array::RecordBatch;
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::error::{Error, Result};
use crate::scan::UnitBatches;

/// Batches a unit's maker may have made before the scan takes them.
pub(crate) const BATCHES_AHEAD: usize = 4;

/// Where a unit's maker puts its batches.
#[derive(Debug, Clone)]
pub(crate) struct BatchSender(mpsc::Sender<datafusion::common::Result<RecordBatch>>);

impl BatchSender {
    /// Hands `batch` to the scan, waiting (on this blocking thread) while the scan has enough
    /// ahead; an error once the scan has stopped reading, which ends the maker's work.
    pub(crate) fn send(&self, batch: RecordBatch) -> Result<()> {
        self.0
            .blocking_send(Ok(batch))
            .map_err(|_| Error::Internal("the scan stopped reading".into()))
    }
}

/// The batches `make` puts in the sender it is given, as a stream: `make` runs as a task of
/// its own beside the scan, and its error, if any, is the stream's last item.
pub(crate) fn spawn_batches<F>(make: impl FnOnce(BatchSender) -> F) -> UnitBatches
where
    F: Future<Output = Result<()>> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(BATCHES_AHEAD);
    let made = make(BatchSender(tx.clone()));
    tokio::spawn(async move {
        if let Err(e) = made.await {
            // Nothing to tell when the scan has gone (it stopped reading).
            let _ = tx.send(Err(e.into())).await;
        }
    });
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|batch| (batch, rx))
    })
    .boxed()
}
