//! Answers a client may cancel by their `FlightInfo` (Flight's `CancelFlightInfo` action, and
//! Flight SQL's older `CancelQuery`: the two ways Flight SQL clients cancel): every running
//! `DoGet` is registered under its ticket, and cancelling a `FlightInfo` ends the answers to
//! its endpoints' tickets. A statement's ticket carries a random id beside its SQL
//! (`service.rs`), and a prepared statement's handle is random, so one client's cancel does
//! not end another client's run of the same statement.
//!
//! An entry lives as long as its answer's stream (removed when the stream is dropped), so the
//! registry holds no more than the answers being sent.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// Each ticket's answers being sent: by an id of each, the signal that ends it.
type Answers = HashMap<Vec<u8>, HashMap<u64, oneshot::Sender<()>>>;

/// The answers being sent, by ticket.
#[derive(Default)]
pub(super) struct Running {
    answers: Mutex<Answers>,
    next: AtomicU64,
}

impl Running {
    fn lock(&self) -> MutexGuard<'_, Answers> {
        self.answers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers an answer to `ticket` until the returned entry is dropped.
    pub(super) fn register(self: &Arc<Self>, ticket: Vec<u8>) -> Registered {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (cancel, cancelled) = oneshot::channel();
        self.lock()
            .entry(ticket.clone())
            .or_default()
            .insert(id, cancel);
        Registered {
            running: Arc::clone(self),
            ticket,
            id,
            cancelled: Some(cancelled),
        }
    }

    /// Ends the answers being sent to any of `tickets`; how many there were.
    pub(super) fn cancel<'a>(&self, tickets: impl IntoIterator<Item = &'a [u8]>) -> usize {
        let mut answers = self.lock();
        let mut ended = 0;
        for ticket in tickets {
            for (_, cancel) in answers.remove(ticket).unwrap_or_default() {
                ended += usize::from(cancel.send(()).is_ok());
            }
        }
        ended
    }
}

/// An answer's entry in the registry: removed when dropped.
pub(super) struct Registered {
    running: Arc<Running>,
    ticket: Vec<u8>,
    id: u64,
    /// Fires when a client cancels the answer; taken once it has fired.
    pub(super) cancelled: Option<oneshot::Receiver<()>>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut answers = self.running.lock();
        if let Some(ids) = answers.get_mut(&self.ticket) {
            ids.remove(&self.id);
            if ids.is_empty() {
                answers.remove(&self.ticket);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_ends_the_answers_to_its_tickets_and_entries_go_with_their_answers() {
        let running = Arc::new(Running::default());
        let mut a1 = running.register(b"a".to_vec());
        let mut a2 = running.register(b"a".to_vec());
        let mut b = running.register(b"b".to_vec());
        assert_eq!(running.cancel([b"a".as_slice(), b"c".as_slice()]), 2);
        for answer in [&mut a1, &mut a2] {
            assert!(answer.cancelled.as_mut().unwrap().try_recv().is_ok());
        }
        assert!(b.cancelled.as_mut().unwrap().try_recv().is_err());
        assert_eq!(running.cancel([b"a".as_slice()]), 0);
        drop(b);
        assert_eq!(running.cancel([b"b".as_slice()]), 0);
        drop((a1, a2));
        assert!(running.lock().is_empty());
    }
}
