//! Fault injection at the steps of the commit protocol.
//!
//! The commit code (`commit.rs`, `one_phase.rs`) marks every step boundary with
//! `faults.at(step, start_ts).await?`. What that does depends on the `fault-injection` feature:
//! - **with it**, a [`CommitHook`] installed on the client
//!   ([`crate::ClientBuilder::commit_hook`]) or the transaction
//!   ([`crate::Transaction::set_commit_hook`]) is consulted there and may stop the commit as if
//!   the process had died ([`crate::Error::InjectedCrash`]), or pause it to let a test race it;
//! - **without it**, [`Faults`] is an empty struct and every checkpoint is a no-op, so the
//!   product build carries no hook, no `InjectedCrash` and no test-only public API.
//!
//! [`CommitStep`] is always defined (the commit code names its steps either way), but it is part
//! of the public API only with the feature, as `percolator_core::fault::CommitStep`.

#[cfg(feature = "fault-injection")]
use std::sync::Arc;

#[cfg(feature = "fault-injection")]
use async_trait::async_trait;

use crate::error::Result;

/// Protocol step boundaries at which a [`CommitHook`] is consulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CommitStep {
    /// Nothing written yet.
    BeforePrewrite,
    /// The primary row is locked; no secondary is (only without
    /// [`crate::TxnConfig::parallel_prewrite`], which locks every row in one batch).
    AfterPrimaryPrewrite,
    /// Every row is locked; no commit timestamp yet.
    AfterPrewrites,
    /// Commit timestamp taken; primary not yet committed.
    BeforeCommitPoint,
    /// Primary committed (the commit point); no secondary committed.
    AfterCommitPoint,
    /// `commit` has returned success; the secondaries are about to be committed by a background
    /// task (only with [`crate::TxnConfig::background_secondaries`] and at least one secondary
    /// row). A crash here, or at [`Self::AfterHalfSecondaries`] after it, stops that task: the
    /// caller has already seen the commit succeed.
    AfterReturn,
    /// Half of the secondary rows committed (only with two or more secondary rows, and only
    /// while a hook is installed).
    AfterHalfSecondaries,
}

/// What a [`CommitHook`] tells the committer to do.
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookAction {
    /// Go on.
    Continue,
    /// Stop here as if the process died: no cleanup, no more heartbeats.
    Crash,
}

/// Fault injection at protocol steps (tests, chaos runs). A hook may also `await` to pause the
/// commit at a step, for example to let a cleaner race it.
#[cfg(feature = "fault-injection")]
#[async_trait]
pub trait CommitHook: Send + Sync {
    /// Called at each step of a commit of transaction `start_ts`.
    async fn at(&self, step: CommitStep, start_ts: u64) -> HookAction;

    /// Whether single-row transactions may commit in one phase while this hook is installed;
    /// such a commit passes only [`CommitStep::BeforePrewrite`], [`CommitStep::BeforeCommitPoint`]
    /// and [`CommitStep::AfterCommitPoint`]. `false` by default, so that a hook written for the
    /// two-phase steps always sees them.
    fn one_phase(&self) -> bool {
        false
    }
}

/// The faults armed for one commit: the installed [`CommitHook`], if any. Without the
/// `fault-injection` feature it is empty and does nothing.
#[derive(Clone, Default)]
pub(crate) struct Faults {
    #[cfg(feature = "fault-injection")]
    hook: Option<Arc<dyn CommitHook>>,
}

impl Faults {
    /// Faults that consult `hook` (none if `None`).
    #[cfg(feature = "fault-injection")]
    pub(crate) fn new(hook: Option<Arc<dyn CommitHook>>) -> Self {
        Self { hook }
    }

    /// The checkpoint at `step` of the commit of `start_ts`: `Err(InjectedCrash)` if the hook
    /// says crash, else `Ok` (always `Ok` without the feature).
    pub(crate) async fn at(&self, step: CommitStep, start_ts: u64) -> Result<()> {
        #[cfg(feature = "fault-injection")]
        if let Some(hook) = &self.hook
            && hook.at(step, start_ts).await == HookAction::Crash
        {
            return Err(crate::error::Error::InjectedCrash(step));
        }
        #[cfg(not(feature = "fault-injection"))]
        let _ = (step, start_ts);
        Ok(())
    }

    /// Whether a hook is installed (the commit then stops between the two halves of its
    /// secondaries, at [`CommitStep::AfterHalfSecondaries`]).
    pub(crate) fn installed(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        return self.hook.is_some();
        #[cfg(not(feature = "fault-injection"))]
        false
    }

    /// Whether the installed hook (if any) lets single-row transactions commit in one phase.
    pub(crate) fn allow_one_phase(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        return self.hook.as_ref().is_none_or(|h| h.one_phase());
        #[cfg(not(feature = "fault-injection"))]
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn no_hook_never_stops_a_commit() {
        let faults = Faults::default();
        assert!(!faults.installed());
        assert!(faults.allow_one_phase());
        faults.at(CommitStep::AfterCommitPoint, 1).await.unwrap();
    }

    #[cfg(feature = "fault-injection")]
    #[tokio::test]
    async fn a_crashing_hook_stops_at_its_step() {
        struct CrashAtPrewrite;
        #[async_trait]
        impl CommitHook for CrashAtPrewrite {
            async fn at(&self, step: CommitStep, _: u64) -> HookAction {
                if step == CommitStep::AfterPrewrites {
                    HookAction::Crash
                } else {
                    HookAction::Continue
                }
            }
        }
        let faults = Faults::new(Some(Arc::new(CrashAtPrewrite)));
        assert!(faults.installed());
        assert!(!faults.allow_one_phase());
        faults.at(CommitStep::BeforePrewrite, 1).await.unwrap();
        let err = faults.at(CommitStep::AfterPrewrites, 1).await.unwrap_err();
        assert!(matches!(
            err,
            crate::Error::InjectedCrash(CommitStep::AfterPrewrites)
        ));
    }
}
