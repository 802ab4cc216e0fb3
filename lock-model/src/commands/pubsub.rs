//! PUBLISH, SPUBLISH and PUBSUB NUMSUB/SHARDNUMSUB (src/pubsub.c).

use crate::call::CallState;
use crate::pubsub::Publication;
use crate::reply::Reply;

/// `PUBLISH` / `SPUBLISH channel message`: how many of this node's clients hear it.
pub(super) fn publish(state: &mut CallState, argv: &[Vec<u8>], sharded: bool) -> Reply {
    let message = state.data.pubsub.deliver(Publication {
        channel: argv[1].clone(),
        payload: argv[2].clone(),
        sharded,
    });
    let heard = message.receivers.len();
    state.published.push(message);
    Reply::Int(heard as i64)
}

/// `PUBSUB NUMSUB` / `SHARDNUMSUB [channel …]`: each channel and its subscriber count.
pub(super) fn numsub(state: &mut CallState, argv: &[Vec<u8>], sharded: bool) -> Reply {
    Reply::Array(
        argv[2..]
            .iter()
            .flat_map(|channel| {
                let count = state.data.pubsub.subscribers(channel, sharded).len();
                [Reply::Bulk(channel.clone()), Reply::Int(count as i64)]
            })
            .collect(),
    )
}
