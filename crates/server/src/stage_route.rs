//! Dynamic stage endpoints: `GET /stage/<name>/...` is answered by the
//! `sojourn-stages` worker pool, which spends the stage's processing time of
//! real CPU on it (003 §2, §5.1 Fig. 8: requests are parsed on arrival and
//! queued per stage; the class comes from the client's address).
//!
//! Each event-loop worker owns a [`StageRoute`]: it submits the request with a
//! reply that sends `(connection, outcome)` on the route's channel and wakes the
//! loop through the worker's mio [`Waker`] (shared with [`crate::opener`]); the loop then
//! drains [`StageRoute::replies`] and writes the responses. While a connection
//! waits for its stage reply it reads no further request (responses stay in
//! order) and is exempt from the head timeout. Answers: 200 with a one-line
//! text body (queueing and processing microseconds, the work result), 503 when
//! the dispatch policy dropped the request (DWFS waiting room full or deadline
//! no longer reachable, 003 §4.2).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::Waker;
use sojourn_sched::JobId;
use sojourn_stages::{Outcome, StagePool};

/// The URL prefix of stage endpoints.
pub const PREFIX: &str = "/stage/";

/// What the loop must remember about a request while its stage works.
pub struct Pending {
    pub arrived: Instant,
    pub keep_alive: bool,
    pub minor_version: u8,
    pub head_only: bool,
    pub request_line: String,
    pub referer: Option<String>,
    pub user_agent: Option<String>,
}

/// A finished stage request, ready to be written.
pub struct Reply {
    pub conn: JobId,
    pub pending: Pending,
    pub status: u16,
    pub body: String,
    /// The stage's CPU processing of the request (zero when dropped): time it was served,
    /// which admission does not count as waiting.
    pub processing: Duration,
}

pub struct StageRoute {
    pool: Arc<StagePool>,
    sender: Sender<(JobId, Outcome)>,
    receiver: Receiver<(JobId, Outcome)>,
    waker: Arc<Waker>,
    pending: HashMap<JobId, Pending>,
}

impl StageRoute {
    /// `waker` wakes the worker's loop, which then calls [`StageRoute::replies`].
    pub fn new(pool: Arc<StagePool>, waker: Arc<Waker>) -> Self {
        let (sender, receiver) = channel();
        StageRoute { pool, sender, receiver, waker, pending: HashMap::new() }
    }

    /// The configured stage a request target names (`/stage/<name>` or
    /// `/stage/<name>/...`, query ignored); `None` for any other target, which
    /// the file handler then answers (404 for an unknown stage).
    pub fn stage_of(&self, target: &str) -> Option<usize> {
        let path = target.split('?').next()?;
        let name = path.strip_prefix(PREFIX)?.split('/').next()?;
        self.pool.spec().stage_index(name)
    }

    /// Queues the request of connection `conn` from `peer` at `stage`.
    pub fn submit(&mut self, conn: JobId, stage: usize, peer: IpAddr, pending: Pending) {
        self.pending.insert(conn, pending);
        let sender = self.sender.clone();
        let waker = Arc::clone(&self.waker);
        let reply = Box::new(move |outcome| {
            // The loop may have exited (shutdown): then nobody waits for this reply.
            if sender.send((conn, outcome)).is_ok() {
                let _ = waker.wake();
            }
        });
        if self.pool.submit(stage, peer, reply).is_err() {
            // `stage` came from `stage_of`, so the pool knows it; keep the
            // connection from waiting forever all the same.
            self.pending.remove(&conn);
        }
    }

    /// The replies that arrived since the last call, for connections still waiting.
    pub fn replies(&mut self) -> Vec<Reply> {
        let arrived: Vec<(JobId, Outcome)> = self.receiver.try_iter().collect();
        arrived
            .into_iter()
            .filter_map(|(conn, outcome)| {
                let pending = self.pending.remove(&conn)?;
                let (status, body, processing) = describe(&outcome);
                Some(Reply { conn, pending, status, body, processing })
            })
            .collect()
    }

    /// Forgets a connection that closed while its stage worked.
    pub fn forget(&mut self, conn: JobId) {
        self.pending.remove(&conn);
    }

    pub fn is_waiting(&self, conn: JobId) -> bool {
        self.pending.contains_key(&conn)
    }
}

/// Status, body and processing time (zero when dropped) of a stage outcome.
fn describe(outcome: &Outcome) -> (u16, String, Duration) {
    match outcome {
        Outcome::Completed { queued, processing, work, in_time } => (
            200,
            format!(
                "queued_us={} processing_us={} in_time={} work={work:016x}\n",
                queued.as_micros(),
                processing.as_micros(),
                u8::from(*in_time)
            ),
            *processing,
        ),
        Outcome::Dropped { queued, reason } => {
            (503, format!("dropped reason={} queued_us={}\n", reason.name(), queued.as_micros()), Duration::ZERO)
        }
    }
}
