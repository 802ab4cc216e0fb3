//! The on-Redis protocol, in one place: lock names and the keys derived from them
//! ([`name`], [`template`]), the kinds of hold ([`kind`]), the Redis Functions library
//! that runs every operation (its Lua files joined and its functions named in [`library`]),
//! one `FCALL` of it ([`fcall`]: built, sent, the library loaded where it is missing), the
//! calls of each operation ([`lock_calls`], [`fleet`], [`complete`], [`write_commands`]),
//! what they answer ([`replies`]), the messages on a lock's channel ([`messages`]), and the
//! holder record ([`holder`]).
//!
//! The lock itself is Redisson's `RLock` layout: a hash `owner → hold count` with a PEXPIRE,
//! and a release publishes `0` on `redisson_lock__channel:{<key>}`. On top of it distlock
//! keeps a fair queue of waiters, so a release hands the lock straight to the next live
//! waiter (publishing `distlock:grant:<owner>:<token>` on distlock's own channel
//! `distlock__claim:{<key>}:<client id>`, beside Redisson's, where only the waiter's own
//! process listens: Redisson reads every message on its channel as a number, so only its
//! own `0` and `1` go there) instead of waking everyone to race:
//!
//! - the holder record: the field `distlock:holder` of the lock hash — the hold's fencing
//!   token, owner, and service, host, pid and request id joined by byte 31 (Redisson's
//!   scripts only read their own owner's field); it goes when the hash goes;
//! - an election's proclaimed value: the field `distlock:holder:value` of the lock hash (a
//!   record field, which INSPECT files with the records); a scheduled job's `hold_at_least`
//!   leaves the ordinary hash with the remaining TTL instead of deleting it
//!   ([`fleet`]);
//! - queue `distlock__wait:{<key>}`: one ZSET holding each waiter twice, its member by
//!   arrival (µs, Redis clock) and `~<member>` by liveness deadline (stored as
//!   `LIVE_BASE − deadline ms`, so that one `ZADD LT` queues a waiter or refreshes it
//!   without moving it); a waiter refreshes its deadline while it waits, so a crashed
//!   waiter is skipped; the queue expires with the last waiter's liveness;
//! - fence `distlock__fence:{<key>}` (Redlock only): a floor for the next tokens, kept for a
//!   lease after a majority was taken.
//!
//! The read-write lock is Redisson's `RReadWriteLock` layout (the hash's `mode`, reader
//! fields, `<owner>:write`, each reader hold's `{<key>}:<owner>:rwlock_timeout:<n>`, channel
//! `redisson_rwlock:{<key>}`), with one record per distlock holder in
//! `distlock:holder:<owner>` and its own queue (`distlock__rwwait:`).
//! A semaphore is a ZSET `owner → expiry` at the key, its records in the hash
//! `distlock__holders:{<key>}`, its queue `distlock__semwait:`, its release
//! channel `distlock__semaphore:{<key>}` (grants go to the same per-client channels as the
//! lock's). Each kind has its own queue, so a waiter is never
//! handed a hold of another kind on the same name.
//!
//! No key outlives its lock: an uncontended acquire and release leave nothing behind, the
//! hash expires with its lease when its holder dies, and the queue and fence
//! expire by themselves. Fencing tokens are the Redis clock in microseconds at the grant,
//! above the previous holder's token when it is known (see SAFETY.md for the promise).
//!
//! A waiter's member is `<lease ms>|<owner>|<metadata>`, so a hand-off can set the waiter's
//! own lease and holder record (owners never contain `|`; only the first two count, and a
//! member without metadata is accepted). Every function touches only keys of one lock, all in
//! one slot (see [`LockKeys`](name::LockKeys)).
//!
//! # How to add a function to the protocol
//!
//! 1. Write it as a `local function` in its kind's file under `library/` (a new file goes
//!    into [`LIBRARY`](library::LIBRARY)'s `concat!`, below the files it uses). It reads its
//!    keys and arguments by name in its first lines and answers a shape stated above it
//!    (a hold's end answers a reply code of [`replies`]).
//! 2. Add its line to the table in `functions!` ([`library`]): its variant, its Lua
//!    function, and whether it only reads, may run under OOM, fails fast and has a Cluster
//!    variant. The [`Function`](library::Function) variant, its name and its registration
//!    come from that line; bump the version in `library!` and pin the new digest.
//! 3. Build its call (keys and arguments in the function's order) in [`lock_calls`], or in the
//!    module of its feature ([`fleet`], [`complete`], [`write_commands`]).
//! 4. Read its answer into a type in [`replies`] (or beside its call).

#[cfg(feature = "idempotency")]
pub(crate) mod complete;
pub(crate) mod fcall;
pub(crate) mod fleet;
pub(crate) mod holder;
pub(crate) mod kind;
pub(crate) mod library;
pub(crate) mod lock_calls;
pub(crate) mod messages;
pub(crate) mod name;
pub(crate) mod replies;
pub(crate) mod template;
pub(crate) mod write_commands;
