//! A unit's batches made on a blocking thread and handed to the scan as it reads them, in
//! groups of about [`GROUP_BYTES`]: the maker waits while the scan has a group it has not
//! taken, so a unit of 10^8 rows holds a few groups, not all of its rows at once, and a scan
//! that stops early (a LIMIT) stops the maker with it. Groups, not single batches, cross
//! between the threads: a hand-over per batch of 8,192 rows cost more than making the batch.

use std::future::Future;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::error::{Error, Result};
use crate::scan::UnitBatches;

/// The bytes of batches handed to the scan at a time.
pub(crate) const GROUP_BYTES: usize = 8 << 20;

/// Rows a unit's batches are made of, at least (the scan cuts them to its batch size): made
/// 8,192 rows at a time, the per-batch work of decoding and filtering showed in every scan.
const MIN_ROWS_MADE: usize = 1 << 16;

/// The rows of each batch a unit makes, for a scan of `batch_rows`-row batches.
pub(crate) fn rows_made(batch_rows: usize) -> usize {
    batch_rows.max(MIN_ROWS_MADE)
}

/// Groups made and not yet taken by the scan, at most.
const GROUPS_AHEAD: usize = 1;

/// The most a unit's batches hold at once, when they make `output_bytes` in all: the group
/// the scan reads, those ahead of it and the one being made.
pub(crate) fn held_bytes(output_bytes: u64) -> u64 {
    output_bytes.min(((GROUPS_AHEAD + 2) * GROUP_BYTES) as u64)
}

type Group = datafusion::common::Result<Vec<RecordBatch>>;

/// Where a unit's maker puts its batches.
#[derive(Debug)]
pub(crate) struct BatchSender {
    tx: mpsc::Sender<Group>,
    /// The group being made, and its bytes.
    pending: Mutex<(Vec<RecordBatch>, usize)>,
}

impl BatchSender {
    /// Adds `batch` to the group being made, and hands the group to the scan once it holds
    /// [`GROUP_BYTES`], waiting (on this blocking thread) while the scan has one ahead; an
    /// error once the scan has stopped reading, which ends the maker's work.
    pub(crate) fn send(&self, batch: RecordBatch) -> Result<()> {
        let full = {
            let mut pending = self.lock()?;
            pending.1 += batch.get_array_memory_size();
            pending.0.push(batch);
            match pending.1 >= GROUP_BYTES {
                true => Some(std::mem::take(&mut *pending).0),
                false => None,
            }
        };
        match full {
            Some(group) => (self.tx.blocking_send(Ok(group)))
                .map_err(|_| Error::Internal("the scan stopped reading".into())),
            None => Ok(()),
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, (Vec<RecordBatch>, usize)>> {
        (self.pending.lock()).map_err(|_| Error::Internal("a batch maker panicked".into()))
    }
}

/// The batches `make` puts in the sender it is given, as a stream: `make` runs as a task of
/// its own beside the scan; then what is left of its last group follows, or its error ends
/// the stream.
pub(crate) fn spawn_batches<F>(make: impl FnOnce(Arc<BatchSender>) -> F) -> UnitBatches
where
    F: Future<Output = Result<()>> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(GROUPS_AHEAD);
    let sender = Arc::new(BatchSender {
        tx: tx.clone(),
        pending: Mutex::new((Vec::new(), 0)),
    });
    let made = make(Arc::clone(&sender));
    tokio::spawn(async move {
        let last = made
            .await
            .and_then(|()| Ok(std::mem::take(&mut *sender.lock()?).0));
        // Nothing to tell when the scan has gone (it stopped reading).
        let _ = match last {
            Ok(group) if group.is_empty() => Ok(()),
            Ok(group) => tx.send(Ok(group)).await,
            Err(e) => tx.send(Err(e.into())).await,
        };
    });
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|group| (group, rx))
    })
    .flat_map(|group| {
        let batches: Vec<datafusion::common::Result<RecordBatch>> = match group {
            Ok(batches) => batches.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        };
        futures::stream::iter(batches)
    })
    .boxed()
}
