//! Commit hooks for fault tests: crash at a step, pause at a step, crash at random (seeded).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use tokio::sync::{Notify, mpsc};

use crate::fault::{CommitHook, CommitStep, HookAction};

/// Crashes every commit at `step`.
pub struct CrashAt(pub CommitStep);

#[async_trait]
impl CommitHook for CrashAt {
    async fn at(&self, step: CommitStep, _start_ts: u64) -> HookAction {
        if step == self.0 {
            HookAction::Crash
        } else {
            HookAction::Continue
        }
    }
}

/// Reports each step on a channel and waits to be released before going on; optionally crashes
/// at one step after being released.
pub struct PauseAt {
    steps: Vec<CommitStep>,
    reached: mpsc::UnboundedSender<CommitStep>,
    release: Arc<Notify>,
    crash: Option<CommitStep>,
}

impl PauseAt {
    /// A hook pausing at each of `steps`, with the receiver of reached steps and the release
    /// handle (`notify_one` lets the commit go on).
    pub fn new(
        steps: Vec<CommitStep>,
        crash: Option<CommitStep>,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<CommitStep>, Arc<Notify>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let release = Arc::new(Notify::new());
        (
            Arc::new(Self {
                steps,
                reached: tx,
                release: Arc::clone(&release),
                crash,
            }),
            rx,
            release,
        )
    }
}

#[async_trait]
impl CommitHook for PauseAt {
    async fn at(&self, step: CommitStep, _start_ts: u64) -> HookAction {
        if self.steps.contains(&step) {
            let _ = self.reached.send(step);
            self.release.notified().await;
        }
        if self.crash == Some(step) {
            HookAction::Crash
        } else {
            HookAction::Continue
        }
    }
}

/// Crashes at a uniformly chosen step with probability `per_commit`; counts crashes per step.
///
/// The decisions come from one [`StdRng`] seeded at construction, so a seed replays the same
/// sequence of decisions (which commits they hit still depends on how tasks interleave).
pub struct RandomCrash {
    /// Probability that one commit crashes somewhere.
    pub per_commit: f64,
    /// The seed of the decisions.
    pub seed: u64,
    /// Crashes so far.
    pub crashes: AtomicU64,
    /// The step of each crash so far.
    pub steps: Mutex<Vec<CommitStep>>,
    rng: Mutex<StdRng>,
}

impl RandomCrash {
    /// Crashes about `per_commit` of all commits, with decisions seeded by `seed`.
    pub fn with_seed(per_commit: f64, seed: u64) -> Arc<Self> {
        Arc::new(Self {
            per_commit,
            seed,
            crashes: AtomicU64::new(0),
            steps: Mutex::new(Vec::new()),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        })
    }

    /// [`Self::with_seed`] with the seed of [`super::fault_seed`] (from `PERCOLATOR_FAULT_SEED`
    /// or random, printed to stderr for replay).
    pub fn new(per_commit: f64) -> Arc<Self> {
        Self::with_seed(per_commit, super::fault_seed("RandomCrash"))
    }
}

const STEPS: [CommitStep; 6] = [
    CommitStep::AfterPrimaryPrewrite,
    CommitStep::AfterPrewrites,
    CommitStep::BeforeCommitPoint,
    CommitStep::AfterCommitPoint,
    CommitStep::AfterReturn,
    CommitStep::AfterHalfSecondaries,
];

#[async_trait]
impl CommitHook for RandomCrash {
    async fn at(&self, step: CommitStep, _start_ts: u64) -> HookAction {
        // Each of the six steps crashes with per_commit / 6, so about per_commit of all commits
        // crash somewhere.
        if step == CommitStep::BeforePrewrite {
            return HookAction::Continue;
        }
        let chance = self.per_commit / STEPS.len() as f64;
        if self.rng.lock().random_bool(chance.clamp(0.0, 1.0)) {
            self.crashes.fetch_add(1, Ordering::Relaxed);
            self.steps.lock().push(step);
            HookAction::Crash
        } else {
            HookAction::Continue
        }
    }
}

/// Lets single-row transactions commit in one phase under `H` (hooks do not by default; see
/// [`CommitHook::one_phase`]).
pub struct OnePhase<H>(pub H);

#[async_trait]
impl<H: CommitHook> CommitHook for OnePhase<H> {
    async fn at(&self, step: CommitStep, start_ts: u64) -> HookAction {
        self.0.at(step, start_ts).await
    }

    fn one_phase(&self) -> bool {
        true
    }
}

#[async_trait]
impl<H: CommitHook + ?Sized> CommitHook for Arc<H> {
    async fn at(&self, step: CommitStep, start_ts: u64) -> HookAction {
        self.as_ref().at(step, start_ts).await
    }

    fn one_phase(&self) -> bool {
        self.as_ref().one_phase()
    }
}

/// Records every step it passes.
#[derive(Default)]
pub struct RecordSteps(pub Mutex<Vec<CommitStep>>);

#[async_trait]
impl CommitHook for RecordSteps {
    async fn at(&self, step: CommitStep, _start_ts: u64) -> HookAction {
        self.0.lock().push(step);
        HookAction::Continue
    }
}
