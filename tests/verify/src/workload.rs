//! The client sub-mode: several tasks in one process, each drawing operations from its own
//! seeded generator and recording them, beside a job scheduler ([`jobs`]) and a task for
//! elections ([`election`]) and idempotency keys ([`idempotency`]), and with one Redis an
//! HTTP server behind lock-tower's idempotency layer with gateway tasks sending to every
//! process's server ([`http`]). Only the libraries' public APIs are used.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use distlock_tests::fault::clock::monotonic_ns;
use distlock_tests::fault::rng::Rng;
use lock_core::{current_lock, scope, LockClient, LockGuard, LockMode, OnLost};

use crate::args::Control;
use crate::check::FORCE_RELEASE;
use crate::guarded::{self, Writes};
use crate::history::{Event, HistoryWriter, Mode, Outcome};
use crate::hold::{self, error_outcome, NoGuard, Plan};
use crate::http::{self, ports::Ports};
use crate::register::Registers;
use crate::{election, idempotency, jobs};

/// The watchdog lease of every client: short, so pauses outlast it and renewals are busy.
pub const LEASE: Duration = Duration::from_millis(1000);
/// Exclusive lock names (also used by `lock_all`, re-entry, `run`, and force releases).
pub const EXCLUSIVE: [&str; 3] = ["x0", "x1", "x2"];
/// Read-write lock names.
pub const READ_WRITE: [&str; 2] = ["rw0", "rw1"];
/// The semaphore name and its permits.
pub const SEMAPHORE: (&str, u32) = ("s0", 2);
/// Every name whose register the workload writes.
pub fn register_names() -> Vec<&'static str> {
    EXCLUSIVE.iter().chain(&READ_WRITE).copied().collect()
}

/// One client process's settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The process number (op ids start with it).
    pub proc: u32,
    /// Its generator's seed.
    pub seed: u64,
    /// Tasks running operations side by side.
    pub tasks: u32,
    /// A negative control, if any.
    pub control: Option<Control>,
    /// Whether read-write locks and semaphores are available (not under Redlock).
    pub family: bool,
    /// Where the processes publish their HTTP servers' ports; none: no HTTP.
    pub ports: Option<Ports>,
    /// How the guarded registers beside the locks are written.
    pub guarded: Writes,
}

/// Gateway tasks per process (each sends one key's requests at a time).
pub const GATEWAYS: u32 = 2;

/// What every task of a client process shares.
pub(crate) struct Ctx {
    pub(crate) client: LockClient,
    pub(crate) history: HistoryWriter,
    pub(crate) config: ClientConfig,
    next_op: AtomicU64,
    stop: AtomicBool,
}

impl Ctx {
    /// A new operation id: the process number, then a counter.
    pub(crate) fn next_op(&self) -> u64 {
        (u64::from(self.config.proc) << 32) | self.next_op.fetch_add(1, Ordering::Relaxed)
    }

    /// True once the run is stopping.
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Whether this op skips the locks (the `nolock` control).
    pub(crate) fn no_lock(&self) -> bool {
        self.config.control == Some(Control::NoLock)
    }
}

/// Runs the tasks until `stop` resolves (the controller closed stdin) or `limit` passes.
pub async fn run(
    client: LockClient,
    registers: Registers,
    history: HistoryWriter,
    config: ClientConfig,
    stop: impl std::future::Future<Output = ()>,
    limit: Duration,
) {
    let ctx = Arc::new(Ctx {
        client,
        history,
        next_op: AtomicU64::new(1),
        stop: AtomicBool::new(false),
        config,
    });
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..ctx.config.tasks {
        let (ctx, registers) = (ctx.clone(), registers.clone());
        tasks.spawn(task_loop(ctx, registers, task));
    }
    // Beside the lock tasks: one scheduler firing jobs, and (with one Redis) one task
    // campaigning in elections and retrying idempotent operations.
    tasks.spawn(jobs::scheduler(ctx.clone(), registers.clone()));
    if ctx.config.family {
        tasks.spawn(extras_loop(ctx.clone(), registers.clone()));
    }
    // With one Redis (the layer refuses Redlock), the HTTP server and its gateways.
    let ports = ctx.config.ports.clone().filter(|_| ctx.config.family);
    if let Some(ports) = &ports {
        if let Err(e) = http::server::start(ctx.clone(), registers.clone(), ports).await {
            eprintln!("verify: client {}: no HTTP server: {e}", ctx.config.proc);
        }
        for task in 0..GATEWAYS {
            tasks.spawn(http::gateway::run(ctx.clone(), ports.clone(), task));
        }
    }
    tokio::select! {
        () = stop => {}
        () = tokio::time::sleep(limit) => {}
    }
    ctx.stop.store(true, Ordering::SeqCst);
    // Each operation is bounded (waits ≤ 3 s, holds ≤ 2.5 leases): give them time to end.
    let _ = tokio::time::timeout(Duration::from_secs(20), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    // The server answers until the process exits; gateways stop picking it from here.
    if let Some(ports) = &ports {
        ports.remove(ctx.config.proc);
    }
}

/// At most this many operations per task, whatever the duration.
const MAX_OPS_PER_TASK: u64 = 10_000_000;

async fn task_loop(ctx: Arc<Ctx>, mut registers: Registers, task: u32) {
    let mut rng = Rng::new(ctx.config.seed ^ (u64::from(task) << 48) ^ 0x5eed);
    for _ in 0..MAX_OPS_PER_TASK {
        if ctx.stopping() {
            return;
        }
        one_op(&ctx, &mut registers, &mut rng, ctx.next_op()).await;
        pause_while_down(&ctx).await;
    }
}

/// While the client knows Redis is down its calls are refused at once: a task then pauses
/// between operations, as a service retrying would, instead of spinning through refusals
/// (millions of operations in an outage, each kept by the history and the checkers).
async fn pause_while_down(ctx: &Ctx) {
    if !ctx.client.is_reachable() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Elections and idempotency keys, half and half, from their own generator (the lock
/// tasks' choices stay those of their seed).
async fn extras_loop(ctx: Arc<Ctx>, mut registers: Registers) {
    let mut rng = Rng::new(ctx.config.seed ^ 0xe1ec_7104);
    for _ in 0..MAX_OPS_PER_TASK {
        if ctx.stopping() {
            return;
        }
        let op = ctx.next_op();
        if rng.below(0..2) == 0 {
            election::campaign(&ctx, &mut registers, &mut rng, op).await;
        } else {
            idempotency::attempt(&ctx, &mut registers, &mut rng, op).await;
        }
        pause_while_down(&ctx).await;
    }
}

pub(crate) fn pick<'a>(rng: &mut Rng, names: &[&'a str]) -> &'a str {
    names[rng.index(names.len())]
}

/// The longest pause between a hold's read and its write: short, except in the `unfenced`
/// control, where a long one lets client pauses land inside it (that control must fire).
pub(crate) fn think_max(config: &ClientConfig) -> Duration {
    match config.control {
        Some(Control::Unfenced) => Duration::from_millis(500),
        _ => Duration::from_millis(30),
    }
}

pub(crate) fn plan(ctx: &Ctx, rng: &mut Rng, writes: Vec<(String, u64)>) -> Plan {
    let hold = match rng.below(0..100) {
        0..80 => rng.millis(Duration::ZERO, Duration::from_millis(40)),
        80..97 => rng.millis(Duration::from_millis(40), LEASE),
        // Longer than the lease: the watchdog keeps it.
        _ => rng.millis(LEASE, LEASE * 5 / 2),
    };
    Plan {
        writes,
        think: rng.millis(Duration::ZERO, think_max(&ctx.config)),
        hold,
        extend: (rng.below(0..10) < 2).then(|| rng.millis(LEASE, LEASE * 2)),
        guarded: ctx.config.guarded.clone(),
    }
}

fn wait(rng: &mut Rng) -> Duration {
    rng.millis(Duration::from_millis(500), Duration::from_millis(3000))
}

async fn one_op(ctx: &Ctx, registers: &mut Registers, rng: &mut Rng, op: u64) {
    let family = ctx.config.family;
    let roll = rng.below(0..100);
    let kind = match roll {
        0..20 => "lock",
        20..28 if family => "write",
        28..36 if family => "read",
        36..44 if family => "semaphore",
        44..54 => "lock_all",
        54..60 => "reenter",
        60..70 => "run",
        70..76 => "cancel",
        76..86 => "try",
        86..93 => "wait_timeout",
        93..94 => "force_release",
        _ => "lock",
    };
    let names: Vec<String> = match kind {
        "write" | "read" => vec![pick(rng, &READ_WRITE).to_owned()],
        "semaphore" => vec![SEMAPHORE.0.to_owned()],
        "lock_all" => {
            let mut names: Vec<String> = EXCLUSIVE.iter().map(|n| n.to_string()).collect();
            names.remove(rng.index(names.len()));
            if rng.below(0..2) == 1 {
                names.reverse();
            }
            names
        }
        _ => vec![pick(rng, &EXCLUSIVE).to_owned()],
    };
    ctx.history.log(
        op,
        Event::Invoke {
            kind: kind.to_owned(),
            names: names.clone(),
        },
    );
    let outcome = if ctx.no_lock() && kind != "force_release" {
        let writes = match kind {
            "read" | "semaphore" => vec![],
            _ => names.iter().map(|n| (n.clone(), 0)).collect(),
        };
        let mode = mode_of(kind);
        hold::run(
            &ctx.history,
            registers,
            op,
            mode,
            writes.clone(),
            Box::new(NoGuard),
            plan(ctx, rng, writes),
        )
        .await;
        Outcome::Ok
    } else {
        match kind {
            "lock_all" => lock_all(ctx, registers, rng, op, names).await,
            "reenter" => reenter(ctx, registers, rng, op, &names[0]).await,
            "run" => run_abort_on_lost(ctx, registers, rng, op, &names[0]).await,
            "force_release" => force_release(ctx, op, &names[0]).await,
            _ => single(ctx, registers, rng, op, kind, &names[0]).await,
        }
    };
    ctx.history.log(op, Event::Complete { outcome });
}

/// An operation's error as its outcome; an indeterminate one's text goes to the history
/// too (which node, which answer: what a burst of them needs to be explained).
pub(crate) fn failed(history: &HistoryWriter, op: u64, e: &lock_core::LockError) -> Outcome {
    let outcome = error_outcome(e);
    if matches!(outcome, Outcome::Info(_)) {
        history.log(
            op,
            Event::Error {
                message: e.to_string(),
            },
        );
    }
    outcome
}

fn mode_of(kind: &str) -> Mode {
    match kind {
        "write" => Mode::Write,
        "read" => Mode::Read,
        "semaphore" => Mode::Permit,
        _ => Mode::Exclusive,
    }
}

async fn single(
    ctx: &Ctx,
    registers: &mut Registers,
    rng: &mut Rng,
    op: u64,
    kind: &str,
    name: &str,
) -> Outcome {
    let client = &ctx.client;
    let request = match kind {
        "write" => client.write_lock(name),
        "read" => client.read_lock(name),
        "semaphore" => client.semaphore(name, SEMAPHORE.1),
        _ => client.lock(name),
    };
    let acquired = match kind {
        "try" => match request.try_acquire().await {
            Ok(Some(guard)) => Ok(guard),
            Ok(None) => return Outcome::Fail("busy".into()),
            Err(e) => Err(e),
        },
        "wait_timeout" => {
            request
                .wait(rng.millis(Duration::from_millis(10), Duration::from_millis(200)))
                .acquire()
                .await
        }
        "cancel" => {
            let limit = rng.millis(Duration::from_millis(1), Duration::from_millis(60));
            match tokio::time::timeout(limit, request.wait(wait(rng)).acquire()).await {
                Ok(result) => result,
                // Dropped mid-acquire: the library undoes an unseen grant in the background.
                Err(_) => return Outcome::Info("cancelled".into()),
            }
        }
        _ => request.wait(wait(rng)).acquire().await,
    };
    let guard = match acquired {
        Ok(guard) => guard,
        Err(e) => return failed(&ctx.history, op, &e),
    };
    let token = guard.fencing_token();
    let writes = match guard.mode() {
        LockMode::Read | LockMode::Permit => vec![],
        _ => vec![(name.to_owned(), token)],
    };
    let mode = mode_of(kind);
    let plan = plan(ctx, rng, writes);
    hold::run(
        &ctx.history,
        registers,
        op,
        mode,
        vec![(name.to_owned(), token)],
        Box::new(guard),
        plan,
    )
    .await;
    Outcome::Ok
}

async fn lock_all(
    ctx: &Ctx,
    registers: &mut Registers,
    rng: &mut Rng,
    op: u64,
    names: Vec<String>,
) -> Outcome {
    let guard = match ctx
        .client
        .lock_all(names.clone())
        .wait(wait(rng))
        .acquire()
        .await
    {
        Ok(guard) => guard,
        Err(e) => return failed(&ctx.history, op, &e),
    };
    let tokens: Vec<(String, u64)> = names
        .iter()
        .map(|n| (n.clone(), guard.fencing_token(n.as_str()).unwrap_or(0)))
        .collect();
    let plan = plan(ctx, rng, tokens.clone());
    hold::run(
        &ctx.history,
        registers,
        op,
        Mode::Exclusive,
        tokens,
        Box::new(guard),
        plan,
    )
    .await;
    Outcome::Ok
}

/// Takes `name` twice in one scope: the inner hold must carry the outer token.
async fn reenter(
    ctx: &Ctx,
    registers: &mut Registers,
    rng: &mut Rng,
    op: u64,
    name: &str,
) -> Outcome {
    let wait = wait(rng);
    let plan = plan(ctx, rng, vec![]);
    scope(async {
        let outer: LockGuard = match ctx.client.lock(name).wait(wait).acquire().await {
            Ok(guard) => guard,
            Err(e) => return failed(&ctx.history, op, &e),
        };
        let token = outer.fencing_token();
        match ctx.client.lock(name).wait(Duration::ZERO).acquire().await {
            Ok(inner) => {
                if inner.fencing_token() != token {
                    let inner = inner.fencing_token();
                    ctx.history.log(
                        op,
                        Event::ReentryMismatch {
                            outer: token,
                            inner,
                        },
                    );
                }
                let _ = inner.release().await;
            }
            // A busy re-entry would itself be a bug; a lost hold or a down Redis is not.
            Err(e) if e.is_wait_timeout() => {
                ctx.history.log(
                    op,
                    Event::ReentryMismatch {
                        outer: token,
                        inner: 0,
                    },
                );
            }
            Err(_) => {}
        }
        let plan = Plan {
            writes: vec![(name.to_owned(), token)],
            ..plan
        };
        hold::run(
            &ctx.history,
            registers,
            op,
            Mode::Exclusive,
            vec![(name.to_owned(), token)],
            Box::new(outer),
            plan,
        )
        .await;
        Outcome::Ok
    })
    .await
}

/// `run` with abort-on-lost: the work is dropped at its next await once the lock is lost.
async fn run_abort_on_lost(
    ctx: &Ctx,
    registers: &mut Registers,
    rng: &mut Rng,
    op: u64,
    name: &str,
) -> Outcome {
    let plan = plan(ctx, rng, vec![]);
    let history = &ctx.history;
    let work = async {
        let token = current_lock().map_or(0, |info| info.fencing_token());
        history.log(
            op,
            Event::Acquired {
                mode: Mode::Exclusive,
                tokens: vec![(name.to_owned(), token)],
            },
        );
        hold::read_modify_write(history, registers, op, name, token, plan.think).await;
        guarded::under_current(&plan.guarded, history, op, name, token, plan.think).await;
        tokio::time::sleep(plan.hold).await;
        history.log(op, Event::Releasing);
    };
    let result = ctx
        .client
        .lock(name)
        .on_lost(OnLost::Abort)
        .wait(wait(rng))
        .run(work)
        .await;
    match result {
        Ok(()) => {
            history.log(
                op,
                Event::Released {
                    outcome: Outcome::Ok,
                },
            );
            Outcome::Ok
        }
        Err(e) if e.is_lost() => {
            history.log(op, Event::Lost);
            history.log(op, Event::Releasing);
            Outcome::Fail("lost".into())
        }
        Err(e) => failed(&ctx.history, op, &e),
    }
}

/// An operator's force release: it breaks exclusion by design, so it is a fault window.
async fn force_release(ctx: &Ctx, op: u64, name: &str) -> Outcome {
    let fault = format!("{FORCE_RELEASE}{name}");
    ctx.history.log(
        op,
        Event::FaultStart {
            fault: fault.clone(),
            unsafe_for_exclusion: true,
            split_brain: false,
        },
    );
    let outcome = match ctx.client.force_release(name).await {
        Ok(_) => Outcome::Ok,
        Err(e) => failed(&ctx.history, op, &e),
    };
    ctx.history
        .log_at(monotonic_ns(), op, Event::FaultEnd { fault });
    outcome
}
