//! Who a hold is, as Redis knows it: the one value an acquisition builds from its request
//! and carries down — to its attempts, its clean-up guard, its entry among the client's
//! queued waits — until it becomes the [`Held`](super::held::Held) hold's own.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::observe::MetricsLabel;
use crate::protocol::fcall::Call;
use crate::protocol::kind::mode::LockMode;
use crate::protocol::lock_calls;
use crate::protocol::messages::Publish;
use crate::protocol::name::LockKeys;
use crate::protocol::replies::ReleaseReply;

/// A hold's identity: the arguments that every call about it (acquire, leave the queue,
/// renew, release) repeats, and its metrics label. Built once per acquisition (per name of
/// a multi-lock), never changed after.
#[derive(Debug, Clone)]
pub(crate) struct HoldIdentity {
    pub(crate) keys: LockKeys,
    /// The Redis owner id (see [`owner_id`]).
    pub(crate) owner: String,
    /// A semaphore's capacity as this caller sees it (1 for the other kinds), an argument
    /// of its acquire and release functions.
    pub(crate) capacity: u32,
    /// The lease each acquisition, renewal and extension sets; the watchdog renews only
    /// when the request set none.
    pub(crate) lease: Duration,
    /// Holder metadata, sent with every attempt (and so part of a queue entry, which
    /// leaving the queue names). Shared: the client's own unless the request set a
    /// request id.
    pub(crate) meta: Arc<str>,
    /// The metrics label (see [`LockRequest::metrics_label`](crate::LockRequest::metrics_label)).
    pub(crate) label: MetricsLabel,
}

impl HoldIdentity {
    /// The call that releases this hold in Redis (handing the lock on, announced as
    /// `publish` says); when `leave_queue`, it also takes this identity's entry out of the
    /// queue if it holds nothing (the entry names the metadata its attempts sent).
    pub(crate) fn release_call(&self, publish: Publish, leave_queue: bool) -> Call<ReleaseReply> {
        let queued_meta = leave_queue.then_some(&*self.meta);
        let (keys, owner, lease, capacity) = (&self.keys, &self.owner, self.lease, self.capacity);
        lock_calls::release(keys, owner, lease, publish, queued_meta, capacity)
    }
}

/// Owner numbers are unique in the process; with the client's UUID they make Redis owner ids
/// (`<uuid>:<number>`, Redisson's form). Each acquisition in Redis gets its own: reentrancy
/// is counted in the caller's [scope](super::scope), so two holds in Redis never share an
/// owner.
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// The next owner number (see [`owner_id`]).
pub(crate) fn next_owner_number() -> u64 {
    NEXT_OWNER.fetch_add(1, Ordering::Relaxed)
}

/// The Redis owner id `<client id>:<number>` (Redisson's `<id>:<thread>`), with Redisson's
/// `:write` suffix for a writer, in one allocation of its final size.
pub(crate) fn owner_id(client: &str, number: u64, kind: LockMode) -> String {
    let suffix = kind.owner_suffix();
    let mut owner = String::with_capacity(client.len() + 1 + 20 + suffix.len());
    write!(owner, "{client}:{number}{suffix}").expect("writing to a String cannot fail");
    owner
}
