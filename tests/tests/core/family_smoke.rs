use distlock_tests::locks::client;
use distlock_tests::RedisServer;
use std::time::Duration;

#[tokio::test]
async fn smoke() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()), client(&server.url()));
    let r1 = a.read_lock("x").await.unwrap();
    let r2 = b.read_lock("x").await.unwrap();
    assert!(b.write_lock("x").try_acquire().await.unwrap().is_none());
    let w = tokio::spawn({
        let b = b.clone();
        async move { b.write_lock("x").wait(Duration::from_secs(10)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        a.read_lock("x").try_acquire().await.unwrap().is_none(),
        "writer waits: readers queue"
    );
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    let w = w.await.unwrap().unwrap();
    println!("writer token {} > {}", w.fencing_token(), 0);
    w.release().await.unwrap();
    let s1 = a.semaphore("s", 2).await.unwrap();
    let s2 = b.semaphore("s", 2).await.unwrap();
    assert!(a.semaphore("s", 2).try_acquire().await.unwrap().is_none());
    let s3 = tokio::spawn({
        let b = b.clone();
        async move { b.semaphore("s", 2).wait(Duration::from_secs(10)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    s1.release().await.unwrap();
    let s3 = s3.await.unwrap().unwrap();
    s2.release().await.unwrap();
    s3.release().await.unwrap();
    let mut conn = server.conn().await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}
