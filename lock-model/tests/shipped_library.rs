//! The shipped library on the model: loaded byte for byte, registered as Redis registers
//! it, its locals carried as node state, and its calls answered the same on any runtime.

use lock_model::{ClientId, Node, Reply, Runtime, SHIPPED_LIBRARY};

fn words(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn acquire(node: &mut Node, rt: &Runtime, function: &str, owner: &str, at: i64) -> Reply {
    node.fcall(
        rt,
        function,
        &words(&["lock", "lock:queue"]),
        &words(&["30000", owner, "", "10000", "publish"]),
        at,
    )
    .expect("acquire runs")
    .reply
}

fn prefix() -> String {
    let name = SHIPPED_LIBRARY
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#!lua name="))
        .expect("a shebang with the library's name");
    format!("{name}_")
}

#[test]
fn the_model_loads_the_shipped_text_byte_for_byte() {
    let rt = Runtime::new();
    let mut node = Node::new(0);
    node.load(&rt, SHIPPED_LIBRARY)
        .expect("the shipped library loads");
    let library = node.libraries().next().expect("one library");
    assert_eq!(library.source().as_bytes(), SHIPPED_LIBRARY.as_bytes());
    assert_eq!(
        library.source().as_bytes(),
        lock_core::ops::FUNCTIONS_SOURCE.as_bytes()
    );
    // 21 functions, 19 of them with a Cluster variant.
    assert_eq!(library.functions().len(), 40, "{:?}", library.functions());
    let acquire = library.function(&format!("{}acquire", prefix())).unwrap();
    assert!(acquire.flags.is_empty());
    let inspect = library.function(&format!("{}inspect", prefix())).unwrap();
    assert_eq!(inspect.flags, ["no-writes"]);
    let release = library
        .function(&format!("{}release_cluster", prefix()))
        .unwrap();
    assert_eq!(release.flags, ["allow-oom"]);
    let locals: Vec<_> = library.locals().iter().map(|l| l.name.as_str()).collect();
    assert!(locals.contains(&"on_cluster"), "{locals:?}");
}

#[test]
fn acquire_busy_and_release_run_on_the_model() {
    let rt = Runtime::new();
    let mut node = Node::new(1_700_000_000_000);
    node.load(&rt, SHIPPED_LIBRARY).unwrap();
    let acquire_fn = format!("{}acquire", prefix());
    let Reply::Array(granted) = acquire(&mut node, &rt, &acquire_fn, "a:1", 0) else {
        panic!("not an array")
    };
    assert_eq!(granted[0], Reply::Int(1));
    assert_eq!(
        granted[1],
        Reply::Int(1_700_000_000_000_000),
        "TIME in µs at ms 1.7e12"
    );
    let Reply::Array(busy) = acquire(&mut node, &rt, &acquire_fn, "b:1", 5) else {
        panic!("not an array")
    };
    assert_eq!(busy[0], Reply::Int(0));
    assert_eq!(busy[1], Reply::Int(29_995), "the holder's PTTL");
    let release = node
        .fcall(
            &rt,
            &format!("{}release", prefix()),
            &words(&["lock", "lock:queue"]),
            &words(&["a:1", "30000", "publish"]),
            10,
        )
        .unwrap();
    // b queued, but its client does not listen for grants: skipped, the release published.
    assert_eq!(release.reply, Reply::Int(1));
    assert_eq!(release.published.len(), 1);
    let channel = &release.published[0].publication.channel;
    assert_eq!(channel.as_slice(), b"redisson_lock__channel:{lock}");
    assert!(!release.effects.is_empty());
}

#[test]
fn a_hand_off_reaches_a_listening_waiter() {
    let rt = Runtime::new();
    let mut node = Node::new(1_700_000_000_000);
    node.load(&rt, SHIPPED_LIBRARY).unwrap();
    let acquire_fn = format!("{}acquire", prefix());
    acquire(&mut node, &rt, &acquire_fn, "a:1", 0);
    node.subscribe(ClientId(2), b"distlock__claim:{lock}:b", false);
    acquire(&mut node, &rt, &acquire_fn, "b:1", 1);
    let release = node
        .fcall(
            &rt,
            &format!("{}release", prefix()),
            &words(&["lock", "lock:queue"]),
            &words(&["a:1", "30000", "publish"]),
            2,
        )
        .unwrap();
    assert_eq!(release.reply, Reply::Int(3), "HANDED_OVER");
    assert_eq!(release.published.len(), 1);
    assert_eq!(release.published[0].receivers, [ClientId(2)]);
    let payload = String::from_utf8_lossy(&release.published[0].publication.payload).into_owned();
    assert!(payload.starts_with("distlock:grant:b:1:"), "{payload}");
}

#[test]
fn on_cluster_is_node_state_and_any_runtime_answers_the_same() {
    let (rt1, rt2) = (Runtime::new(), Runtime::new());
    let mut plain = Node::new(1_700_000_000_000);
    plain.load(&rt1, SHIPPED_LIBRARY).unwrap();
    let mut cluster = plain.clone();
    let fresh = plain.clone();
    // A Cluster variant sets `on_cluster` on its node only.
    let cluster_acquire = format!("{}acquire_cluster", prefix());
    acquire(&mut cluster, &rt1, &cluster_acquire, "a:1", 0);
    let mut plain_after = fresh.clone();
    acquire(
        &mut plain_after,
        &rt1,
        &format!("{}acquire", prefix()),
        "a:1",
        0,
    );
    assert_ne!(
        plain_after, cluster,
        "on_cluster differs: the states differ"
    );
    // The same node state answers the same on another runtime, whichever ran before.
    let mut on_rt2 = fresh.clone();
    acquire(&mut on_rt2, &rt2, &format!("{}acquire", prefix()), "a:1", 0);
    assert_eq!(on_rt2, plain_after);
    // rt1's Lua state has on_cluster = true now; a plain node run there must not see it.
    let mut again = fresh;
    acquire(&mut again, &rt1, &format!("{}acquire", prefix()), "a:1", 0);
    assert_eq!(again, plain_after);
    // And a replica starts with the load-time locals.
    assert_eq!(cluster.replica(0).libraries().count(), 1);
}

#[test]
fn a_node_without_the_library_answers_function_not_found() {
    let rt = Runtime::new();
    let mut node = Node::new(0);
    let outcome = node
        .fcall(&rt, &format!("{}acquire", prefix()), &[], &[], 0)
        .unwrap();
    assert_eq!(outcome.reply, Reply::Error("ERR Function not found".into()));
    let redis::Value::ServerError(error) = outcome.reply.to_value() else {
        panic!()
    };
    assert_eq!(
        (error.code(), error.details()),
        ("ERR", Some("Function not found"))
    );
}

#[test]
fn a_replica_applies_a_calls_effects_and_hears_its_publications() {
    let rt = Runtime::new();
    let mut master = Node::new(1_700_000_000_000);
    master.load(&rt, SHIPPED_LIBRARY).unwrap();
    let mut replica = master.replica(5);
    replica.subscribe(ClientId(9), b"redisson_lock__channel:{lock}", false);
    let lagging = replica.clone();
    let acquire_fn = format!("{}acquire", prefix());
    let acquired = master
        .fcall(
            &rt,
            &acquire_fn,
            &words(&["lock", "lock:queue"]),
            &words(&["30000", "a:1", "", "10000", "publish"]),
            0,
        )
        .unwrap();
    let released = master
        .fcall(
            &rt,
            &format!("{}release", prefix()),
            &words(&["lock", "lock:queue"]),
            &words(&["a:1", "30000", "publish"]),
            1,
        )
        .unwrap();
    // The replica that got the first call's effects only holds the lock.
    let mut behind = lagging.clone();
    behind.apply(&acquired.effects);
    assert!(behind.keyspace().get(b"lock", behind.clock(1)).is_some());
    assert!(
        lagging.keyspace().get(b"lock", 0).is_none(),
        "the lagging copy missed it"
    );
    // Both: in sync, and the release's message reached the replica's subscriber.
    replica.apply(&acquired.effects);
    let heard = replica.apply(&released.effects);
    assert_eq!(heard.len(), 1);
    assert_eq!(heard[0].receivers, [ClientId(9)]);
    assert_eq!(replica.keyspace(), master.keyspace());
}

#[test]
fn a_node_moves_between_worker_threads() {
    let mut node = Node::new(1_700_000_000_000);
    Runtime::with_thread_local(|rt| node.load(rt, SHIPPED_LIBRARY)).unwrap();
    let function = format!("{}acquire_cluster", prefix());
    let on_main = {
        let mut node = node.clone();
        Runtime::with_thread_local(|rt| acquire(&mut node, rt, &function, "a:1", 0));
        node
    };
    let on_worker = std::thread::spawn(move || {
        Runtime::with_thread_local(|rt| acquire(&mut node, rt, &function, "a:1", 0));
        node
    })
    .join()
    .unwrap();
    assert_eq!(on_main, on_worker);
}
