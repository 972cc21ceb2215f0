//! [`SimEngine`]: the TPC-E engine over the simulated cluster — several Percolator workers on
//! one store, the simulation switched on only for what is measured, and the measured window
//! ([`Window`]).
//!
//! **Workers.** The TPC-E engine runs Trade-Result in its observer runtime, at most 16 runs at
//! once. With hundreds of clients those 16 queue behind the clients' requests and the market
//! falls ever further behind: tpsE would measure one worker's observer concurrency, not the
//! cluster. A Percolator deployment adds workers as it adds load (the paper's figure grows
//! both), so a point runs one worker (engine, with its own client, scanners and observer
//! runs) per [`super::Figure9Config::clients_per_worker`] clients, all on the same store and
//! oracle; client transactions go to the workers in turn, and every worker's scanners find the
//! trades to execute (the ack column keeps each execution to one).
//!
//! **When it is simulated.** Loading a database of thousands of rows through one simulated
//! server would take minutes per point, and checking it afterwards as long, and neither is what
//! Figure 9 measures. So the cluster starts with the simulation off; the first transaction that
//! is not part of the load (the clients start right after it) turns it on. A warm-up follows,
//! then the measured window: a closed loop of hundreds of clients on one server starts with
//! every client in its first, slow transaction, and counting from the start would favour the
//! short types. The window counts the transactions itself (from the market's statistics) and
//! the cluster's and this process's work. The simulation stays on a little longer ([`TAIL`],
//! beyond the moment the TPC-E driver takes its own counts), then goes off, so that the market
//! drains and the invariants are checked at full speed. The TPC-E driver
//! ([`crate::tpce::run`]) is used unchanged; its run must last the warm-up and the window.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use percolator_core::{Error, Result};

use super::model::ClusterModel;
use super::window::{Sample, Window};
use crate::tpce::check::InvariantReport;
use crate::tpce::engine::{Engine, Executed};
use crate::tpce::frames::TxnInput;
use crate::tpce::stats::Stats;

/// How long the simulation stays on after the window: the TPC-E driver reads its counts on a
/// 100 ms tick after its measured time, and they must not include unsimulated transactions.
pub const TAIL: Duration = Duration::from_millis(300);

/// Where the measured window's figures appear once it has ended (`None` before; the sender
/// dropped without a value when the run ended before the window did).
pub type WindowReceiver = tokio::sync::watch::Receiver<Option<Window>>;

/// Workers of `E` on the simulated cluster `model`, simulated only while measured (see the
/// module docs).
pub struct SimEngine<E: Engine> {
    workers: Arc<Vec<E>>,
    next: AtomicUsize,
    model: Arc<ClusterModel>,
    stats: Arc<Stats>,
    warmup: Duration,
    measure: Duration,
    started: AtomicBool,
    /// Taken by the window's task when the simulation starts.
    sender: Mutex<Option<tokio::sync::watch::Sender<Option<Window>>>>,
    receiver: WindowReceiver,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl<E: Engine> SimEngine<E> {
    /// `workers` (at least one), whose store and oracle are on `model` and whose market counts
    /// into `stats`: simulated from the first transaction after the load, measured for
    /// `measure` after `warmup`.
    pub fn new(
        workers: Vec<E>,
        model: Arc<ClusterModel>,
        stats: Arc<Stats>,
        warmup: Duration,
        measure: Duration,
    ) -> Result<Self> {
        if workers.is_empty() {
            return Err(Error::InvalidInput(
                "a simulated engine needs a worker".into(),
            ));
        }
        model.set_simulating(false);
        let (sender, receiver) = tokio::sync::watch::channel(None);
        Ok(Self {
            workers: Arc::new(workers),
            next: AtomicUsize::new(0),
            model,
            stats,
            warmup,
            measure,
            started: AtomicBool::new(false),
            sender: Mutex::new(Some(sender)),
            receiver,
            task: Mutex::new(None),
        })
    }

    /// Where the window's figures appear.
    pub fn window(&self) -> WindowReceiver {
        self.receiver.clone()
    }

    /// The next worker in turn.
    fn worker(&self) -> &E {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.workers.len();
        &self.workers[i]
    }

    /// Turns the simulation on and schedules the window (once).
    fn start(&self) {
        if self.started.swap(true, Ordering::Relaxed) {
            return;
        }
        let Some(sender) = self.sender.lock().take() else {
            return;
        };
        self.model.set_simulating(true);
        let (model, stats, workers) = (
            Arc::clone(&self.model),
            Arc::clone(&self.stats),
            Arc::clone(&self.workers),
        );
        let (warmup, measure) = (self.warmup, self.measure);
        let task = tokio::spawn(async move {
            let conflicts = |workers: &[E]| workers.iter().map(E::emulator_conflicts).sum();
            tokio::time::sleep(warmup).await;
            let first = Sample::take(&model, &stats, conflicts(&workers));
            tokio::time::sleep(measure).await;
            let second = Sample::take(&model, &stats, conflicts(&workers));
            drop(workers);
            tokio::time::sleep(TAIL).await;
            model.set_simulating(false);
            // Nobody listening is fine: the run was given up.
            let _ = sender.send(Some(Window::between(&first, &second)));
        });
        *self.task.lock() = Some(task);
    }
}

impl<E: Engine> Engine for SimEngine<E> {
    fn name(&self) -> String {
        format!(
            "{} ({} workers) on {} simulated servers",
            self.workers[0].name(),
            self.workers.len(),
            self.model.config().servers
        )
    }

    async fn execute(&self, input: &TxnInput) -> Result<Executed> {
        if !matches!(input, TxnInput::Load { .. }) {
            self.start();
        }
        self.worker().execute(input).await
    }

    fn submitted(&self, t_id: u64, s_id: u64, submitted_us: i64) {
        self.worker().submitted(t_id, s_id, submitted_us);
    }

    async fn verify(&self) -> Result<InvariantReport> {
        // The check reads every table: at full speed, whatever the window's state.
        self.model.set_simulating(false);
        self.workers[0].verify().await
    }

    fn emulator_conflicts(&self) -> u64 {
        self.workers.iter().map(E::emulator_conflicts).sum()
    }

    async fn shutdown(self) -> Result<()> {
        // The window's task holds the workers until the window's last sample.
        let task = self.task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
        self.model.set_simulating(false);
        let Ok(workers) = Arc::try_unwrap(self.workers) else {
            return Ok(());
        };
        let mut result = Ok(());
        for worker in workers {
            let shut = worker.shutdown().await;
            result = result.and(shut);
        }
        result
    }
}
