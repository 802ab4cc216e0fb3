//! Revocation: a forced release tells the former holder's client at once, so that its
//! guard reports the lock lost within milliseconds instead of at its next renewal.
//!
//! Each client that holds a lock listens on its own channel, `distlock:revoke:{<client
//! id>}` (the hash tag keeps it on one Cluster shard), on the pub/sub connection its waiters
//! use. [`LockClient::force_release`](crate::LockClient::force_release) publishes
//! `<owner> <lock key>` there for each owner it removed, on every node (a Redlock client
//! listens on one of them). The channel is distlock's own: Redisson's channels only ever
//! carry its decimal messages. A message that is missed (pub/sub down) changes nothing: the
//! holder then learns at its next renewal, as before.

use std::sync::{Arc, Weak};

use futures_util::future::join_all;
use tokio::sync::mpsc;

use crate::error::bounded;
use crate::lock::engine::Engine;
use crate::lock::hold_registry::HoldRegistry;
use crate::observe;
use crate::protocol::name::LockName;

/// The start of every client's revocation channel.
const CHANNEL_PREFIX: &str = "distlock:revoke:";

/// Why a revoked hold is lost.
pub(crate) const REVOKED: &str = "an operator force-released it";

/// The revocation channel of the client `client_id`.
pub(crate) fn channel(client_id: &str) -> Vec<u8> {
    format!("{CHANNEL_PREFIX}{{{client_id}}}").into_bytes()
}

/// Starts the client's revocation listener, once (called at each new hold of `holds`).
pub(crate) fn listen(engine: &Engine, holds: &Arc<HoldRegistry>) {
    if !holds.start_listening() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let revocations = engine.waiters.listen_revocations(channel(&engine.id));
    runtime.spawn(serve(Arc::downgrade(holds), revocations));
}

/// Marks each revoked hold lost; ends with the client (its pub/sub task drops the sender).
async fn serve(holds: Weak<HoldRegistry>, mut revocations: mpsc::UnboundedReceiver<Vec<u8>>) {
    while let Some(payload) = revocations.recv().await {
        let Some(holds) = holds.upgrade() else {
            return;
        };
        let Some((owner, key)) = parse(&payload) else {
            tracing::debug!("unreadable revocation message");
            continue;
        };
        for held in holds.find(owner, key) {
            held.mark_lost(REVOKED);
        }
    }
}

/// `<owner> <lock key>`: owners have no space, keys may have anything.
fn parse(payload: &[u8]) -> Option<(&str, &[u8])> {
    let space = payload.iter().position(|b| *b == b' ')?;
    let owner = std::str::from_utf8(&payload[..space]).ok()?;
    Some((owner, &payload[space + 1..]))
}

/// Tells the clients of `owners` that their holds of the lock `key` were force-released;
/// answers how many messages some listener received. Failures are only logged: the former
/// holders then learn at their next renewal.
pub(crate) async fn notify(
    engine: &Engine,
    name: &LockName,
    key: &[u8],
    owners: &[String],
) -> usize {
    let (timeout, names) = (engine.config.command_timeout, engine.config.trace_names);
    let mut received = 0;
    for owner in owners {
        // `<client id>:<number>`; a Redisson owner's client listens nowhere, which is fine.
        let Some((client_id, _)) = owner.split_once(':') else {
            continue;
        };
        let mut message = redis::cmd(engine.config.publish.command());
        let payload = [owner.as_bytes(), b" ", key].concat();
        message.arg(channel(client_id)).arg(payload);
        let publishes = engine.nodes.iter().map(|conn| {
            let (mut conn, message) = (conn.clone(), &message);
            async move { bounded(name, timeout, message.query_async::<u64>(&mut conn)).await }
        });
        for answer in join_all(publishes).await {
            match answer {
                Ok(listeners) => received += usize::from(listeners > 0),
                Err(error) => tracing::debug!(
                    distlock.lock.name = observe::name(name, names),
                    distlock.error.class = error.class(),
                    error = observe::error(&error, names),
                    "revocation not published"
                ),
            }
        }
    }
    received
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_owner_and_key() {
        let payload = b"3db65fe7-939f-4757-93a2-a2f87f354cca:17:write dl:a b";
        assert_eq!(
            parse(payload),
            Some((
                "3db65fe7-939f-4757-93a2-a2f87f354cca:17:write",
                &b"dl:a b"[..]
            ))
        );
        assert_eq!(parse(b"no-space"), None);
        assert_eq!(channel("u"), b"distlock:revoke:{u}");
    }
}
