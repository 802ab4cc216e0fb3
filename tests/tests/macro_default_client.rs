//! `#[distributed_lock]` without `client = …` uses the process-wide default client.
//! One test in this binary: the default can be installed once per process.

use distlock_tests::locks::client;
use distlock_tests::RedisServer;
use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "default_<id>", wait = "5s")]
async fn with_default(id: u32) -> Result<String, LockError> {
    Ok(lock_core::current_lock().expect("held").name().to_string())
}

/// Before a default is installed the call fails clearly; afterwards it takes the lock.
#[tokio::test]
async fn default_client_is_required_then_used() {
    let err = with_default(1).await.expect_err("no default client yet");
    assert!(matches!(err, LockError::NoDefaultClient), "{err}");
    assert!(err.to_string().contains("set_default_client"), "{err}");

    let server = RedisServer::start();
    lock_core::set_default_client(client(&server.url())).expect("first install");
    assert_eq!(with_default(1).await.expect("locked call"), "default_1");
}
