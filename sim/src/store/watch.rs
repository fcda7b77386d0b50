//! Watch fan-out: a bounded event history per resource type and a broadcast
//! channel for live events.
//!
//! A watch from resourceVersion `rv` replays the retained events newer than
//! `rv` and then follows the channel. The history keeps the last
//! [`HISTORY`] events of each type; a watch from before that gets
//! `410 Gone` with reason `Expired`, as kube-apiserver's watch cache does.

use crate::status::Status;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::broadcast;

/// Events retained per resource type for watches that resume.
pub const HISTORY: usize = 1000;

/// Live events a slow watcher may fall behind by before it is ended with
/// 410 (and relists, like a client-go informer does).
const CHANNEL: usize = 1024;

/// A watch event's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was deleted.
    Deleted,
}

impl EventType {
    /// The wire name: `ADDED`, `MODIFIED`, `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change to one object.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for a delete: its last state, with the
    /// deletion's resourceVersion).
    pub object: Arc<Value>,
    /// The change's resourceVersion.
    pub revision: u64,
}

/// What a new watch starts from.
#[derive(Debug)]
pub struct Subscription {
    /// For a watch without a resourceVersion: every current object, to be
    /// sent as ADDED.
    pub initial: Vec<Arc<Value>>,
    /// For a watch from a resourceVersion: the retained later events.
    pub replay: Vec<WatchEvent>,
    /// Live events after `initial`/`replay`.
    pub events: broadcast::Receiver<WatchEvent>,
    /// The store's resourceVersion when the watch started.
    pub revision: u64,
}

/// A resource type's recent events.
pub(super) struct EventLog {
    events: VecDeque<WatchEvent>,
    /// Newest resourceVersion no longer in `events`.
    compacted_to: u64,
    sender: broadcast::Sender<WatchEvent>,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            events: VecDeque::new(),
            compacted_to: 0,
            sender: broadcast::channel(CHANNEL).0,
        }
    }
}

impl EventLog {
    /// Record and broadcast an event.
    pub(super) fn push(&mut self, event: WatchEvent) {
        if self.events.len() >= HISTORY {
            if let Some(old) = self.events.pop_front() {
                self.compacted_to = old.revision;
            }
        }
        self.events.push_back(event.clone());
        // No receivers is fine: nobody is watching this type.
        let _ = self.sender.send(event);
    }

    /// Receive events pushed from now on.
    pub(super) fn subscribe(&self) -> broadcast::Receiver<WatchEvent> {
        self.sender.subscribe()
    }

    /// Retained events newer than `since`; 410 if some were forgotten.
    pub(super) fn since(&self, since: u64, current: u64) -> Result<Vec<WatchEvent>, Status> {
        if since < self.compacted_to {
            return Err(too_old(since, current));
        }
        Ok(self.events.iter().filter(|e| e.revision > since).cloned().collect())
    }

    /// Forget every event up to `current`.
    pub(super) fn compact(&mut self, current: u64) {
        self.events.clear();
        self.compacted_to = current;
    }
}

/// 410 Gone, reason Expired: `too old resource version: <rv> (<current>)`.
pub fn too_old(since: u64, current: u64) -> Status {
    Status::failure(410, "Expired", format!("too old resource version: {since} ({current})"))
}
