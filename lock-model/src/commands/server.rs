//! TIME (src/server.c), on the node's clock.

use crate::call::CallState;
use crate::error::ModelError;
use crate::reply::Reply;

/// `TIME`: seconds and microseconds, both as bulk strings (see [`crate::clock`]).
pub(super) fn time(state: &mut CallState) -> Result<Reply, ModelError> {
    let micros = state.data.time.next(state.now).ok_or_else(|| {
        ModelError::NotModelled(
            "more than 1000 TIME calls within one millisecond of a node's clock".to_owned(),
        )
    })?;
    if micros < 0 {
        return Err(ModelError::NotModelled(
            "TIME before the epoch (a node clock below 0)".to_owned(),
        ));
    }
    Ok(Reply::Array(vec![
        Reply::bulk((micros / 1_000_000).to_string()),
        Reply::bulk((micros % 1_000_000).to_string()),
    ]))
}
