//! `observe()` yields every change of leader in order — new terms, new values, vacancies —
//! and across a cut of its Redis connections it reads again on reconnect, so the term that
//! began while it was cut off is seen without waiting for a lease (here 30 s).

use std::time::Duration;

use crate::{next, queued_campaign};
use distlock_tests::locks::{builder, client};
use distlock_tests::{RedisServer, TcpProxy};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_sees_every_change_in_order_across_a_connection_cut() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.addr());
    // The observer's lease (30 s) is far beyond the bounds below: only messages and the
    // reconnect can make it read in time.
    let watcher = builder(&proxy.url())
        .lease(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut observe = watcher.election("config").observe();
    assert_eq!(next(&mut observe).await, None, "nobody leads at first");

    let (a, b, c) = (
        client(&server.url()),
        client(&server.url()),
        client(&server.url()),
    );
    let mut term_a = a
        .election("config")
        .value("10.0.0.1:80")
        .campaign()
        .await
        .unwrap();
    let seen = next(&mut observe).await.expect("A leads");
    assert_eq!(seen.fencing_token(), term_a.fencing_token());
    assert_eq!(seen.value(), Some("10.0.0.1:80"));

    term_a
        .proclaim(Some("10.0.0.1:81".to_owned()))
        .await
        .unwrap();
    let seen = next(&mut observe).await.expect("A still leads");
    assert_eq!(seen.value(), Some("10.0.0.1:81"));

    // B waits; A resigns: the term is handed to B at once.
    let campaign_b = queued_campaign(&b, b.election("config").value("10.0.0.2:80")).await;
    term_a.resign().await.unwrap();
    let term_b = campaign_b.await.unwrap().unwrap();
    let seen = next(&mut observe).await.expect("B leads");
    assert_eq!(seen.fencing_token(), term_b.fencing_token());
    assert_eq!(seen.value(), Some("10.0.0.2:80"));

    // Cut the observer off; B resigns and C is elected meanwhile (both announcements are
    // missed); then let it reconnect.
    proxy.refuse(true);
    proxy.cut_all();
    term_b.resign().await.unwrap();
    let term_c = c.election("config").campaign().await.unwrap();
    proxy.refuse(false);
    let seen = next(&mut observe).await.expect("C leads");
    assert_eq!(seen.fencing_token(), term_c.fencing_token());
    assert_eq!(seen.value(), None);

    // A vacancy is a change too.
    term_c.resign().await.unwrap();
    assert_eq!(next(&mut observe).await, None);
}
