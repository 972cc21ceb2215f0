//! One simulated server: a single-server FIFO queue, kept as the instant it is busy until.
//!
//! A request that arrives at `arrival` and needs `work` of service starts when both it and the
//! server are there (`max(arrival, busy_until)`), and finishes `work` later; the server is then
//! busy until that instant. That is all a FIFO single-server queue is, and it needs no task, no
//! channel and no clock: the caller books its request under the server's own small lock and then
//! sleeps until the finish instant it was given. Booking is exact to the nanosecond whatever the
//! timer's resolution, so a server's capacity is exactly `1 / service time`; a late timer only
//! adds latency to the request that waited for it (see the module docs of [`super`]).

use std::time::Duration;

use tokio::time::Instant;

/// The state of one server (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Server {
    /// When the last booked request finishes.
    busy_until: Instant,
    /// Totals since the server was created.
    totals: ServerTotals,
}

/// What a server did, cumulatively.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerTotals {
    /// Service booked: the sum of every request's work.
    pub booked: Duration,
    /// Of [`Self::booked`], what lies after the instant the totals were read (work still queued
    /// or in service then); `booked - pending` is the work done by then.
    pub pending: Duration,
    /// Requests served.
    pub requests: u64,
    /// Row operations served (a request may carry several).
    pub ops: u64,
    /// Time requests spent queued behind others, summed.
    pub waited: Duration,
}

impl ServerTotals {
    /// Work done by the instant the totals were read.
    pub fn done(&self) -> Duration {
        self.booked.saturating_sub(self.pending)
    }

    /// `self - earlier`, field by field (totals only grow; the pending part is `self`'s).
    pub fn since(&self, earlier: &ServerTotals) -> ServerTotals {
        ServerTotals {
            booked: self.done().saturating_sub(earlier.done()),
            pending: Duration::ZERO,
            requests: self.requests.saturating_sub(earlier.requests),
            ops: self.ops.saturating_sub(earlier.ops),
            waited: self.waited.saturating_sub(earlier.waited),
        }
    }
}

impl Server {
    /// An idle server.
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            busy_until: now,
            totals: ServerTotals::default(),
        }
    }

    /// Books a request of `ops` row operations taking `work` in all, arriving at `arrival`;
    /// returns when it finishes.
    pub(crate) fn book(&mut self, arrival: Instant, ops: u64, work: Duration) -> Instant {
        let start = arrival.max(self.busy_until);
        let done = start + work;
        self.busy_until = done;
        self.totals.booked += work;
        self.totals.requests += 1;
        self.totals.ops += ops;
        self.totals.waited += start - arrival;
        done
    }

    /// The totals as of `now`.
    pub(crate) fn totals(&self, now: Instant) -> ServerTotals {
        ServerTotals {
            pending: self.busy_until.saturating_duration_since(now),
            ..self.totals
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A request to a busy server starts when the one before it finishes.
    #[test]
    fn a_request_queues_behind_the_one_before() {
        let t0 = Instant::now();
        let mut server = Server::new(t0);
        assert_eq!(server.book(t0, 1, MS), t0 + MS);
        // Arrives while the first is in service: waits for it, then takes its own millisecond.
        assert_eq!(server.book(t0, 1, MS), t0 + 2 * MS);
        // Arrives half-way through the second: waits half a millisecond.
        assert_eq!(server.book(t0 + MS + MS / 2, 2, 2 * MS), t0 + 4 * MS);
        let totals = server.totals(t0);
        assert_eq!(totals.requests, 3);
        assert_eq!(totals.ops, 4);
        assert_eq!(totals.booked, 4 * MS);
        assert_eq!(totals.waited, MS + MS / 2);
        assert_eq!(totals.pending, 4 * MS);
        assert_eq!(totals.done(), Duration::ZERO);
    }

    /// An idle server serves a request at once; idle time is not counted as work.
    #[test]
    fn an_idle_server_serves_at_once() {
        let t0 = Instant::now();
        let mut server = Server::new(t0);
        server.book(t0, 1, MS);
        let later = t0 + 10 * MS;
        assert_eq!(server.book(later, 1, MS), later + MS);
        let totals = server.totals(later + 5 * MS);
        assert_eq!(totals.waited, Duration::ZERO);
        assert_eq!(totals.done(), 2 * MS);
        // Work done between two readings.
        let before = ServerTotals {
            booked: MS,
            ..ServerTotals::default()
        };
        assert_eq!(totals.since(&before).booked, MS);
        assert_eq!(totals.since(&before).requests, 2);
    }
}
