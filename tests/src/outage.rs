//! An outage a client knows of: the helpers of the fail-fast tests (tests/core/known_outage.rs,
//! tests/tower/idempotency_outage.rs).

use lock_core::LockClient;
use tokio::time::Instant;

use crate::locks::GENEROUS;
use crate::TcpProxy;

/// Makes the outage known to `locks`, whose connections go through `proxy`: the proxy cuts
/// them and refuses new ones (each call fails at once), until the client refuses an
/// acquisition without sending it. The proxy is left refusing. Bounded by [`GENEROUS`].
pub async fn make_outage_known(locks: &LockClient, proxy: &TcpProxy) {
    proxy.refuse(true);
    proxy.cut_all();
    let deadline = Instant::now() + GENEROUS;
    loop {
        let error = locks.lock("outage").await.unwrap_err();
        assert!(error.is_unavailable(), "{error}");
        if is_refused_at_once(&error) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the outage was never known: {error}"
        );
        tokio::task::yield_now().await;
    }
}

/// True for the error of a call the client refused without sending it, Redis being known
/// down: told by the words of its source.
pub fn is_refused_at_once(error: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(error), |e| e.source())
        .any(|e| e.to_string().contains("refused at once"))
}
