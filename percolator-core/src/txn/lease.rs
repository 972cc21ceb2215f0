//! The worker lease: what renewing it takes ([`LeaseRenewal`]) and the thread that renews it
//! ([`LeaseRefresher`]).
//!
//! A client's lease is what keeps garbage collection below its snapshots and lock resolution
//! off its locks; if it lapses, the client's running transactions fail with
//! `Error::SnapshotTooOld`. So the renewal must not wait behind the work it protects: it runs on
//! a thread of its own with a one-thread tokio runtime, where a runtime saturated with requests
//! (searches ranking long posting lists, ingests) cannot delay it. It renews every quarter of
//! the lease, so it rides out a stall of more than half a lease (the client counts its lease
//! valid until a quarter before it runs out). Renewals that found the lease already lapsed, in
//! the client's own view, are counted (`TxnMetricsSnapshot::late_lease_renewals`).
//!
//! A store whose client library works on the application's runtime (etcd and TiKV over gRPC)
//! still answers through it; the renewal then waits only for that store's own round trip.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::Result;
use crate::gc::snapshots::{ActiveSnapshots, SnapshotSafety};
use crate::liveness::StoreLiveness;
use crate::oracle::{OracleClock, TimestampOracle};
use crate::store::RowStore;

use super::notify;

/// What renewing a worker's lease takes (see [`crate::gc::snapshots`]).
pub(crate) struct LeaseRenewal<S: RowStore> {
    pub(crate) registry: Arc<StoreLiveness<S>>,
    pub(crate) store: Arc<S>,
    pub(crate) oracle: Arc<dyn TimestampOracle>,
    pub(crate) clock: Arc<OracleClock>,
    pub(crate) snapshots: Arc<ActiveSnapshots>,
    pub(crate) safety: Arc<SnapshotSafety>,
    pub(crate) observed: Arc<notify::ObservedColumns>,
    pub(crate) worker_id: u64,
    pub(crate) lease: Duration,
    /// Renewals done.
    pub(crate) renewals: AtomicU64,
    /// Renewals that found the lease lapsed (in the client's view, with its margin).
    pub(crate) late: AtomicU64,
    /// Held by the one renewal that begins wait for after a lapse.
    pub(crate) renewing: tokio::sync::Mutex<()>,
    /// The scan group the worker announces with its lease (0: none; see
    /// [`crate::Client::join_scan_group`]).
    pub(crate) scan_group: AtomicU64,
}

impl<S: RowStore> LeaseRenewal<S> {
    /// The scan group the worker announces, if it joined one.
    pub(crate) fn scan_group(&self) -> Option<u64> {
        Some(self.scan_group.load(Ordering::Relaxed)).filter(|&g| g != 0)
    }

    /// Renews the lease, publishing the oldest start timestamp in use, and reads the safe
    /// point. After a lapse, dooms every transaction that began before the renewal.
    pub(crate) async fn renew(&self) -> Result<()> {
        let lapsed = !self.safety.lease_holds(self.clock.now_ms());
        // A fresh timestamp, taken before the registrations are read: a transaction that
        // registers after this asks the oracle later and gets a larger one. (A fresh one, not
        // the newest seen, so that an idle client does not hold the safe point back.)
        let fresh = crate::oracle::next_timestamp(self.oracle.as_ref()).await?;
        self.clock.observe(fresh);
        let oldest = self.snapshots.oldest().unwrap_or(fresh).min(fresh);
        let until = self
            .registry
            .register(
                self.worker_id,
                &self.clock,
                self.lease,
                oldest,
                self.scan_group(),
            )
            .await?;
        if lapsed {
            // A collector that read the leases while ours had run out started below this.
            let fresh = crate::oracle::next_timestamp(self.oracle.as_ref()).await?;
            self.clock.observe(fresh);
            self.safety.raise_lapse_floor(fresh);
            // The first renewal (at the client's start) finds no lease yet: not late.
            if self.renewals.load(Ordering::Relaxed) > 0 {
                self.late.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.renewals.fetch_add(1, Ordering::Relaxed);
        let margin = u64::try_from((self.lease / 4).as_millis()).unwrap_or(u64::MAX);
        self.safety.renewed(until.saturating_sub(margin));
        self.safety
            .observe_safe_point(crate::gc::safe_point::read(self.store.as_ref()).await?);
        self.observed.refresh(self.store.as_ref()).await
    }

    /// Renews the lease if it has lapsed, in the client's view: one renewal at a time, which
    /// the others wait for and then find the lease holding.
    pub(crate) async fn renew_if_lapsed(&self) -> Result<()> {
        if self.safety.lease_holds(self.clock.now_ms()) {
            return Ok(());
        }
        let _one = self.renewing.lock().await;
        if self.safety.lease_holds(self.clock.now_ms()) {
            return Ok(());
        }
        self.renew().await
    }

    /// How often the refresher renews: every quarter of the lease.
    fn interval(&self) -> Duration {
        (self.lease / 4).max(Duration::from_millis(10))
    }
}

/// The lease's refresher: a thread with a one-thread runtime that renews until stopped.
pub(crate) struct LeaseRefresher {
    stop: tokio::sync::watch::Sender<bool>,
    stopped: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl LeaseRefresher {
    /// Starts renewing `renewal`'s lease every quarter of it. Where no thread can be started,
    /// it renews on the caller's runtime instead (and says so).
    pub(crate) fn start<S: RowStore>(renewal: Arc<LeaseRenewal<S>>) -> Self {
        let (stop, stop_seen) = tokio::sync::watch::channel(false);
        let (done, stopped) = tokio::sync::oneshot::channel();
        let worker_id = renewal.worker_id;
        let on_thread = Arc::clone(&renewal);
        let thread_stop = stop_seen.clone();
        let spawned = std::thread::Builder::new()
            .name("percolator-lease".to_owned())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime.block_on(refresh(on_thread, thread_stop)),
                    Err(e) => {
                        tracing::error!(worker_id, error = %e, "no runtime to renew the lease on");
                    }
                }
                let _ = done.send(());
            });
        if let Err(e) = spawned {
            tracing::warn!(
                worker_id,
                error = %e,
                "no thread for the lease's renewal; renewing on the application's runtime"
            );
            tokio::spawn(refresh(renewal, stop_seen));
            return Self {
                stop,
                stopped: None,
            };
        }
        Self {
            stop,
            stopped: Some(stopped),
        }
    }

    /// Stops renewing and waits until a renewal in progress has finished, so that nothing
    /// renews the lease after this returns.
    pub(crate) async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(stopped) = self.stopped.take() {
            let _ = stopped.await;
        }
    }

    /// Stops renewing without waiting (a dropped client: like a process that died).
    pub(crate) fn signal_stop(&self) {
        let _ = self.stop.send(true);
    }
}

/// Renews every interval until `stop` says so.
async fn refresh<S: RowStore>(
    renewal: Arc<LeaseRenewal<S>>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let interval = renewal.interval();
    loop {
        if *stop.borrow() {
            return;
        }
        tokio::select! {
            _ = stop.changed() => return,
            () = tokio::time::sleep(interval) => {}
        }
        if *stop.borrow() {
            return;
        }
        if let Err(e) = renewal.renew().await {
            tracing::warn!(
                worker_id = renewal.worker_id,
                error = %e,
                "could not refresh worker lease"
            );
        }
    }
}
