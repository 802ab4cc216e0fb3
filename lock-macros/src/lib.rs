//! The `#[distributed_lock]` attribute for [`lock-core`](https://docs.rs/lock-core).
//!
//! Use it through lock-core's `macros` feature (`lock_core::distributed_lock`); see the
//! attribute's documentation for every option.
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod attr;
mod expand;
mod signature;
mod template;

use proc_macro::TokenStream;

/// Runs an `async fn` under a Redis distributed lock whose name is built from its parameters.
///
/// The lock is taken before the body runs, renewed by the client's watchdog while it runs,
/// and released when the body returns, panics or the call is cancelled (its future dropped).
///
/// ```no_run
/// use lock_core::{distributed_lock, LockError};
///
/// #[derive(Debug)]
/// enum ShopError {
///     Lock(LockError),
///     SoldOut,
/// }
///
/// impl From<LockError> for ShopError {
///     fn from(e: LockError) -> Self {
///         ShopError::Lock(e)
///     }
/// }
///
/// #[distributed_lock(key = "item_<id>", wait = "2s")]
/// async fn buy(id: u64, quantity: u32) -> Result<u32, ShopError> {
///     // Only one caller in the whole fleet runs this for a given `id` at a time.
///     let token = lock_core::current_lock().expect("held").fencing_token();
///     println!("buying {quantity} of {id} with fencing token {token}");
///     Ok(quantity)
/// }
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// // Once, at start-up: the client that functions without `client = …` use.
/// let _ = lock_core::set_default_client(lock_core::LockClient::new("redis://127.0.0.1:6379")?);
/// buy(7, 1).await.map_err(|e| format!("{e:?}"))?;
/// # Ok(()) }
/// ```
///
/// # Options
///
/// | option | meaning |
/// | --- | --- |
/// | `key = "item_<id>"` | the lock's name, a template (below); this or `keys` is required |
/// | `mode = "read"` / `mode = "write"` | a side of the read-write lock `key` (`LockClient::read_lock` / `write_lock`): read-mode calls run together, a write-mode call runs alone; `"exclusive"` is the default |
/// | `keys = ["acct_<from>", "acct_<to>"]` | a multi-lock (`LockClient::lock_all`): every name, all or nothing, taken in one global order so callers naming them in opposite orders never deadlock; each entry is a template |
/// | `permits = 3` | one permit of the semaphore `key` (`LockClient::semaphore`): at most this many calls run at once across every instance; a positive integer literal or a `u32` expression (`permits = MAX_EXPORTS`) |
/// | `lease = "10s"` | an explicit lease: the lock expires after it and the watchdog does not renew it; without it the watchdog keeps the lock while the body runs |
/// | `wait = "2s"` | wait at most this long for a busy lock (`"0s"`: try once); without it the client's default wait applies |
/// | `client = expr` | an expression giving the [`LockClient`], a reference to one or anything that derefs to one (`Arc<LockClient>`, a wrapper); it may use the parameters, e.g. `client = app.locks` or `client = self.locks`; without it the process-wide default client from `lock_core::set_default_client` is used, and a call made before one was installed returns `LockError::NoDefaultClient` |
/// | `on_lost = "abort"` | the default: when the lock is lost (its key deleted or expired, Redis restarted), the body is dropped at its next `.await` and the function returns `LockError::Lost` |
/// | `on_lost = "continue"` | the body runs on after a loss (the loss is logged) |
/// | `map_err = f` | a function or closure turning a `LockError` into the function's error type, for error types that cannot implement `From<LockError>` (the orphan rule: `axum::http::StatusCode`, `tonic::Status`, `String`, `anyhow::Error`): `map_err = ApiError::from_lock`, `map_err = \|e\| e.to_string()`; without it, `From::from` |
/// | `on_busy = "skip"` | a scheduled job (`LockClient::job`): when another instance holds the name, return `Ok(JobOutcome::Skipped(_))` at once without running the body. The function returns `Result<JobOutcome<T>, E>` and its body `Result<T, E>`; one exclusive `key` only (no `keys`, `mode`, `permits` or `lease`); `wait` waits that long before skipping. `"wait"` is the default (an ordinary lock) |
/// | `hold_at_least = "5m"` | with `on_busy = "skip"`: the name stays held until this long after the job started, even when the body ended earlier or failed, so instances whose schedules are skewed by less do not run the same fire again |
/// | `hold_at_most = "1h"` | with `on_busy = "skip"`: the job's lease, with no watchdog — a dead instance's hold ends by itself; at least `hold_at_least` (checked at compile time) |
/// | `crate = "path"` | where lock-core is, for crates that re-export it (default `::lock_core`) |
///
/// Durations are written as a number and a unit, `ms`, `s`, `m` or `h`, and may be
/// combined: `"500ms"`, `"10s"`, `"2m"`, `"1m30s"`, `"1h"`. They are checked at compile time.
///
/// [`LockClient`]: https://docs.rs/lock-core/latest/lock_core/struct.LockClient.html
///
/// ```no_run
/// use lock_core::{distributed_lock, LockClient, LockError};
///
/// // Readers of a document run side by side; an edit runs alone.
/// #[distributed_lock(key = "doc_<id>", mode = "read", client = locks)]
/// async fn show(locks: &LockClient, id: u64) -> Result<String, LockError> {
///     Ok(format!("doc {id}"))
/// }
///
/// // Both accounts, all or nothing; a transfer the other way cannot deadlock with it.
/// #[distributed_lock(keys = ["acct_<from>", "acct_<to>"], client = locks)]
/// async fn transfer(locks: &LockClient, from: u64, to: u64) -> Result<(), LockError> {
///     Ok(())
/// }
///
/// // At most 3 exports per tenant at once, across every instance.
/// #[distributed_lock(key = "export_<tenant>", permits = 3, client = locks)]
/// async fn export(locks: &LockClient, tenant: &str) -> Result<(), LockError> {
///     Ok(())
/// }
/// ```
///
/// `mode` and `permits` go with `key`; `keys` takes neither. Inside a multi-lock's body,
/// `lock_core::current_lock()` answers the first name listed.
///
/// # Key templates
///
/// - `<name>` is replaced by the value of the parameter `name`, formatted with `Display`;
/// - `<order.id>`, `<self.tenant>`, `<pair.0>` follow fields and tuple indices;
/// - names bound inside parameter patterns count as parameters: with
///   `Path((shop, item)): Path<(u32, u32)>` the template can use `<shop>` and `<item>`,
///   with `State(app): State<App>` it can use `<app.region>`;
/// - `<<` is a literal `<`; every other character is literal;
/// - two placeholders must be separated by a character such as `:` or `/` (`"<shop>:<item>"`,
///   not `"<shop><item>"`, `"<shop>_<item>"` or `"<shop>%<item>"`): one that encoded values
///   never contain, so not a letter, digit, `-`, `.`, `_`, `~` or `%`.
///
/// Values are percent-encoded (only letters, digits, `-`, `.`, `_` and `~` stay as they are),
/// so two different argument tuples never give the same lock name: `("a:b", "c")` and
/// `("a", "b:c")` give `a%3Ab:c` and `a:b%3Ac`. The grammar is the one of
/// `lock_core::KeyTemplate`, which the tower layer uses. A template error, or a placeholder
/// that names no parameter, is a compile error.
///
/// The values are computed before the body runs, so the body may take the parameters by
/// value.
///
/// # The function
///
/// - It must be an `async fn` (not `const`) with a body: a free function, an inherent or
///   trait-impl method (`&self`, `&mut self`, `self`, `self: Arc<Self>`), generic with
///   where-clauses and `impl Trait` arguments; its signature is kept as written.
/// - It must return `Result<T, E>` with `E: From<LockError>` (written as such, or through an
///   alias such as `io::Result<T>`): lock failures come back as `Err(E::from(lock_error))`;
///   with `map_err = f`, any `E`, as `Err(f(lock_error))`.
///   Anything else is a compile error that says so, on the return type.
/// - Its future is `Send` whenever the body's is, so it can be spawned and used directly as
///   an axum handler.
/// - The lock's work is boxed, so a chain of nested locked calls does not multiply the size
///   of the caller's future (each call allocates that box, beside the acquisition's own).
/// - It stacks with other attributes such as `#[tracing::instrument]`: placed above
///   `#[distributed_lock]`, the span also covers waiting for the lock.
///
/// # Reentrancy and the fencing token
///
/// Each call opens a reentrancy owner scope, or joins the caller's: a locked function that
/// calls another locked function on the same key (directly or deeper down the same call
/// chain) re-enters the lock instead of deadlocking, while other callers wait.
///
/// Inside the body, `lock_core::current_lock()` returns the innermost lock held:
/// `lock_core::current_lock().unwrap().fencing_token()` is the token to pass to the storage
/// that the lock protects, so it can refuse writes from a holder whose lock was lost.
///
/// # Equivalent code without the macro
///
/// ```ignore
/// #[distributed_lock(key = "item_<id>", wait = "2s", client = app.locks)]
/// async fn buy(id: u64, app: &App) -> Result<Receipt, ShopError> {
///     /* body */
/// }
/// ```
///
/// expands to about
///
/// ```ignore
/// async fn buy(id: u64, app: &App) -> Result<Receipt, ShopError> {
///     // The name borrows the parameters before the body takes them.
///     let name = ::lock_core::__private::KeyBuilder::new().literal("item_").value(&id).finish();
///     // A path call, not `app.locks.lock(…)`: the client's type is checked, and a `lock`
///     // method of its own (a `Mutex`'s, say) is never picked.
///     let request = ::lock_core::LockClient::lock(&app.locks, name)
///         .wait(::core::time::Duration::from_millis(2000))
///         // Metrics are labelled by the template, never by the rendered name.
///         .metrics_label("item_<id>")
///         .on_lost(::lock_core::OnLost::Abort);
///     let body = async move {
///         // Never runs: pins the block's output to the declared type, so type errors and
///         // `?` in the body behave as in the function itself.
///         if false {
///             let ret: Result<Receipt, ShopError> = loop {};
///             return ret;
///         }
///         /* body */
///     };
///     // Boxed, so that nested locked calls do not grow the caller's future.
///     match Box::pin(request.run(body)).await {
///         Ok(output) => output,
///         Err(lock_error) => Err(From::from(lock_error)),
///     }
/// }
/// ```
///
/// The `Err(…)` goes through a local trait implemented only for `Result`, so that a function
/// returning anything else gets one error, on its return type, saying what to return.
/// Without `client = …`, the client is
/// `match ::lock_core::default_client() { Ok(c) => c, Err(e) => return Err(From::from(e)) }`.
/// The same can be written by hand with `LockClient::lock(name).run(future)`, or
/// `KeyTemplate` for names known only at run time.
///
/// # Scheduled jobs
///
/// ```ignore
/// #[distributed_lock(key = "report_<day>", on_busy = "skip", hold_at_least = "5m", hold_at_most = "1h")]
/// async fn report(day: u32) -> Result<JobOutcome<Rows>, ReportError> {
///     let rows = build(day).await?; // the body returns Result<Rows, ReportError>
///     Ok(rows)
/// }
/// ```
///
/// expands as above with `LockClient::job(client, name).hold_at_least(…).hold_at_most(…)`
/// for the request, a body pinned to `Result<Rows, ReportError>`, and the job's
/// `JobOutcome<Result<Rows, ReportError>>` turned into the function's result: a run's
/// `Ok(rows)` is `Ok(JobOutcome::Ran(rows))`, its `Err(e)` is `Err(e)`, a skip is
/// `Ok(JobOutcome::Skipped(_))`. A skip is thus never an `Ok(())` that cannot be told from
/// a run. Any other return type is one error, on the return type.
///
/// # Compile errors
///
/// Non-async and `const` functions, a missing or empty `key`, an unknown placeholder (the
/// message lists the parameters), an unclosed `<`, placeholders without a separator, unknown
/// or repeated options (the message lists the valid ones), bad durations, a return type that
/// is not a `Result`, a `client` that is not a `LockClient`, `on_busy = "skip"` with a
/// return type other than `Result<JobOutcome<T>, E>` or with `keys`, `mode`, `permits` or
/// `lease`, `hold_at_least`/`hold_at_most` without it, zero holds and `hold_at_least` above
/// `hold_at_most` are errors on the offending token. On an error in the attribute the function is still emitted as written, so IDEs and
/// its callers keep working.
#[proc_macro_attribute]
pub fn distributed_lock(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::distributed_lock(attr.into(), item.into()).into()
}
