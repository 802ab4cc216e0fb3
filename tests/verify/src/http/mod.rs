//! lock-tower's `IdempotencyLayer` in the workload, over real HTTP. Every client process
//! serves `POST /effect` behind the layer ([`server`]) on a free loopback port it publishes
//! in the run's ports directory ([`ports`]); gateway tasks ([`gateway`]) send requests with
//! an `Idempotency-Key` to a randomly chosen live process's server — duplicates at once,
//! retries after a timeout, a 409 or a 503, replays after completion — so each key meets
//! the pauses, kills and failovers of the nemesis on whichever process serves it.
//!
//! Keys follow the epochs of [`crate::idempotency`] (`http_<epoch>_<k>`): a key is sent only
//! during its epoch and a short grace after, well inside the retention, so its record is
//! surely kept while it is in use. The handler's body names the effect it answers for and
//! the run that answered: `effect=<op> run=<op> key=<key>` (see [`HandlerBody`]).

pub mod gateway;
pub mod ports;
pub mod server;

use std::time::Duration;

/// Keys per epoch (each gateway task takes a few of them).
pub const KEYS: u64 = 8;
/// A key's requests are sent until this long after its epoch ended.
pub const GRACE: Duration = Duration::from_secs(3);
/// The route the layer guards.
pub const PATH: &str = "/effect";
/// The sender's op id of a request (the handler records which request it serves).
pub const OP_HEADER: &str = "x-verify-op";
/// The handler's pause between its read and its write, in milliseconds.
pub const THINK_HEADER: &str = "x-verify-think-ms";
/// How long the handler keeps the key after its effect, in milliseconds.
pub const HOLD_HEADER: &str = "x-verify-hold-ms";
/// The handler's answer when its token was refused: a newer run holds the key.
pub const SUPERSEDED: &str = "superseded by a newer attempt";
/// The handler's answer when the fenced resource did not answer.
pub const RESOURCE_DOWN: &str = "the resource did not answer";

/// The name of HTTP key `k` of `epoch` (also its register's name).
pub fn key_name(epoch: u64, k: u64) -> String {
    format!("http_{epoch}_{k}")
}

/// The body of every request of `key`: retries carry the same one (the same fingerprint).
pub fn request_body(key: &str) -> String {
    format!("charge {key}")
}

/// What the handler answers with `201`: the effect the key's register holds (this run's
/// own write, or the one an earlier run made) and the run that answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandlerBody {
    /// The op id of the handler run whose write is the key's effect.
    pub effect: u64,
    /// The op id of the handler run that answered.
    pub run: u64,
    /// The key.
    pub key: String,
}

impl HandlerBody {
    /// The body's text.
    pub fn render(&self) -> String {
        format!("effect={} run={} key={}", self.effect, self.run, self.key)
    }

    /// Parses a body; none for anything else (the layer's own answers, a corrupt body).
    pub fn parse(text: &str) -> Option<Self> {
        let mut fields = text.split(' ');
        let mut field = |name: &str| fields.next()?.strip_prefix(name)?.strip_prefix('=');
        let effect = field("effect")?.parse().ok()?;
        let run = field("run")?.parse().ok()?;
        let key = field("key")?.to_owned();
        Some(Self { effect, run, key })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_bodies_round_trip_and_other_texts_do_not_parse() {
        let body = HandlerBody {
            effect: 7,
            run: 9,
            key: key_name(3, 1),
        };
        assert_eq!(body.render(), "effect=7 run=9 key=http_3_1");
        assert_eq!(HandlerBody::parse(&body.render()), Some(body));
        assert_eq!(
            HandlerBody::parse("idempotency keys are unavailable\n"),
            None
        );
        assert_eq!(HandlerBody::parse("effect=7 run=x key=k"), None);
    }
}
