//! What a scheduled job's fire did: ran here, or was skipped because another instance held
//! the name.

use std::time::Duration;

use crate::protocol::holder::HolderInfo;
use crate::protocol::name::LockName;

/// The outcome of one fire of a [scheduled job](crate::job::JobRequest): the body ran here, or
/// the fire was skipped because another instance held the job's name.
///
/// A skip is a value, not an error (it is the normal case on every instance but one), and
/// not an `Ok(())` that cannot be told from a run: match on it, or use
/// [`ran`](Self::ran) / [`is_skipped`](Self::is_skipped).
///
/// The enum is deliberately exhaustive: a fire either ran or was skipped, and a caller's
/// `match` may rely on it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a job's outcome says whether its body ran"]
pub enum JobOutcome<T> {
    /// The body ran on this instance and returned this.
    Ran(T),
    /// Another instance held the name: the body did not run here.
    Skipped(Skipped),
}

impl<T> JobOutcome<T> {
    /// The body's output, if it ran here.
    pub fn ran(self) -> Option<T> {
        match self {
            Self::Ran(output) => Some(output),
            Self::Skipped(_) => None,
        }
    }

    /// True when the fire was skipped.
    pub fn is_skipped(&self) -> bool {
        matches!(self, Self::Skipped(_))
    }

    /// Maps the output of a run, keeping a skip.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> JobOutcome<U> {
        match self {
            Self::Ran(output) => JobOutcome::Ran(f(output)),
            Self::Skipped(skipped) => JobOutcome::Skipped(skipped),
        }
    }
}

/// Why a fire was skipped: the job's name was held, by whom and for how long still.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub(crate) name: LockName,
    pub(crate) remaining_ttl: Option<Duration>,
    pub(crate) holder: Option<Box<HolderInfo>>,
}

impl Skipped {
    /// The job's name.
    pub fn name(&self) -> &LockName {
        &self.name
    }

    /// How long the holder's hold had left (its `hold_at_most`, or what `hold_at_least`
    /// keeps), when it has an expiry.
    pub fn remaining_ttl(&self) -> Option<Duration> {
        self.remaining_ttl
    }

    /// Who held the name, when its holder recorded it (service, host, pid, since when). For
    /// logs: never show it to end users.
    pub fn holder(&self) -> Option<&HolderInfo> {
        self.holder.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::__private::JobResult;

    fn skipped() -> Skipped {
        Skipped {
            name: LockName::from("report"),
            remaining_ttl: None,
            holder: None,
        }
    }

    /// What a `#[distributed_lock(on_busy = "skip")]` function returns for each outcome.
    #[test]
    fn a_jobs_outcome_becomes_the_functions_result() {
        type Fn = Result<JobOutcome<u32>, &'static str>;
        assert_eq!(
            Fn::from_outcome(JobOutcome::Ran(Ok(7))),
            Ok(JobOutcome::Ran(7))
        );
        assert_eq!(Fn::from_outcome(JobOutcome::Ran(Err("boom"))), Err("boom"));
        let skip = Fn::from_outcome(JobOutcome::Skipped(skipped()));
        assert!(skip.is_ok_and(|outcome| outcome.is_skipped()));
    }

    #[test]
    fn outcomes_map_and_unwrap() {
        assert_eq!(JobOutcome::Ran(2).map(|n| n * 2).ran(), Some(4));
        let skip: JobOutcome<u32> = JobOutcome::Skipped(skipped());
        assert_eq!(skip.map(|n| n * 2).ran(), None);
    }
}
