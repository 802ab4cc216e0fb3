//! The script sandbox: Redis 7's globals and errors, the loud failures, the library
//! locals' rules, and coverage — each with a case that shows it can fail.

use lock_model::{LoadError, ModelError, Node, Reply, Runtime, SHIPPED_LIBRARY};

fn words(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn eval(node: &mut Node, rt: &Runtime, script: &str) -> Result<Reply, ModelError> {
    node.eval(rt, script, &words(&["k"]), &words(&["a"]), 0)
        .map(|o| o.reply)
}

fn library(body: &str) -> String {
    format!("#!lua name=lib\n{body}\n")
}

#[test]
fn globals_are_read_only_and_must_exist() {
    let (rt, mut node) = (Runtime::new(), Node::new(0));
    let Reply::Error(write) = eval(&mut node, &rt, "x = 1").unwrap() else {
        panic!()
    };
    assert!(
        write.starts_with("ERR user_script:1: Attempt to modify a readonly table script: "),
        "{write}"
    );
    let Reply::Error(read) = eval(&mut node, &rt, "return y").unwrap() else {
        panic!()
    };
    assert!(
        read.starts_with("ERR Script attempted to access nonexistent global variable 'y'"),
        "{read}"
    );
    // The control: KEYS, ARGV and the allowed globals are there.
    assert_eq!(
        eval(
            &mut node,
            &rt,
            "return {KEYS[1], ARGV[1], type(string.format)}"
        )
        .unwrap(),
        Reply::Array(vec![
            Reply::bulk("k"),
            Reply::bulk("a"),
            Reply::bulk("function")
        ])
    );
}

#[test]
fn what_the_model_leaves_out_fails_the_run() {
    let (rt, mut node) = (Runtime::new(), Node::new(0));
    for script in [
        "return cjson.encode({})",
        "return redis.log(redis.LOG_WARNING, 'x')",
        "return math.random()",
        "return redis.call('lpush', 'l', 'x')",
        "return redis.call('zadd', 'z', 'INCR', 1, 'm')",
        // Caught by the script, the failure still ends the run.
        "return pcall(redis.call, 'rpush', 'l', 'x')",
    ] {
        let failure = eval(&mut node, &rt, script).expect_err(script);
        assert!(
            matches!(
                failure,
                ModelError::NotModelled(_) | ModelError::UnknownCommand(_)
            ),
            "{script}: {failure}"
        );
    }
    assert_eq!(
        eval(&mut node, &rt, "return redis.call('zadd', 'z', 1, 'm')").unwrap(),
        Reply::Int(1),
        "the control: a modelled command answers"
    );
}

#[test]
fn conversions_and_error_tables_follow_redis() {
    let (rt, mut node) = (Runtime::new(), Node::new(0));
    let cases: &[(&str, Reply)] = &[
        ("return 3.99", Reply::Int(3)),
        ("return -3.99", Reply::Int(-3)),
        ("return true", Reply::Int(1)),
        ("return false", Reply::Nil),
        (
            "return {1, 'a', nil, 'b'}",
            Reply::Array(vec![Reply::Int(1), Reply::bulk("a")]),
        ),
        (
            "return redis.status_reply('PONG')",
            Reply::Status("PONG".into()),
        ),
        (
            "return redis.error_reply('MY err')",
            Reply::Error("MY err".into()),
        ),
        (
            "return redis.error_reply('oops')",
            Reply::Error("ERR oops".into()),
        ),
        (
            "return redis.error_reply(1)",
            Reply::Error("ERR wrong number or type of arguments".into()),
        ),
        ("return redis.call('get', 'missing')", Reply::Nil),
        (
            "return type(redis.call('get', 'missing'))",
            Reply::bulk("boolean"),
        ),
        (
            "return redis.call('type', 'missing').ok",
            Reply::bulk("none"),
        ),
        (
            "return redis.call('set', 'n', 1.5)",
            Reply::Status("OK".into()),
        ),
        ("return redis.call('get', 'n')", Reply::bulk("1.5")),
        (
            "return redis.call('set', 'n', 4500000000000000)",
            Reply::Status("OK".into()),
        ),
        (
            "return redis.call('get', 'n')",
            Reply::bulk("4500000000000000"),
        ),
        (
            "return redis.pcall('hget', 'n', 'f')",
            Reply::Error(
                "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
            ),
        ),
        (
            "return redis.pcall('get')['err']",
            Reply::bulk("ERR Wrong number of args calling Redis command from script"),
        ),
        (
            "return redis.pcall('get', {})['err']",
            Reply::bulk("ERR Lua redis lib command arguments must be strings or integers"),
        ),
        (
            "local ok, e = pcall(redis.call, 'hget', 'n', 'f') return e",
            Reply::bulk("WRONGTYPE Operation against a key holding the wrong kind of value"),
        ),
    ];
    for (script, expected) in cases {
        assert_eq!(&eval(&mut node, &rt, script).unwrap(), expected, "{script}");
    }
    let Reply::Error(raised) = eval(&mut node, &rt, "return redis.call('hget', 'n', 'f')").unwrap()
    else {
        panic!()
    };
    assert!(raised
        .starts_with("WRONGTYPE Operation against a key holding the wrong kind of value script: "));
    assert!(raised.ends_with(", on @user_script:1."), "{raised}");
}

#[test]
fn no_rollback_after_an_error() {
    let (rt, mut node) = (Runtime::new(), Node::new(0));
    let reply = eval(
        &mut node,
        &rt,
        "redis.call('set', 'a', '1') redis.call('hget', 'a', 'f')",
    )
    .unwrap();
    assert_eq!(reply.error_code(), Some("WRONGTYPE"));
    assert_eq!(
        eval(&mut node, &rt, "return redis.call('get', 'a')").unwrap(),
        Reply::bulk("1")
    );
}

#[test]
fn function_load_registers_both_forms_and_refuses_as_redis_does() {
    let (rt, mut node) = (Runtime::new(), Node::new(0));
    let text = library(
        "redis.register_function('pos', function(keys, args) return args[1] end)\n\
         redis.register_function{function_name='named', callback=function(keys) return keys[1] end, flags={'no-writes'}}",
    );
    assert_eq!(
        node.function_load(&rt, &text, false).unwrap(),
        Reply::bulk("lib")
    );
    let lib = node.libraries().next().unwrap();
    assert_eq!(lib.function("named").unwrap().flags, ["no-writes"]);
    assert_eq!(
        node.fcall(&rt, "pos", &[], &words(&["x"]), 0)
            .unwrap()
            .reply,
        Reply::bulk("x")
    );
    assert_eq!(
        node.fcall_ro(&rt, "named", &words(&["k"]), &[], 0)
            .unwrap()
            .reply,
        Reply::bulk("k")
    );
    assert_eq!(
        node.fcall_ro(&rt, "pos", &[], &[], 0)
            .unwrap()
            .reply
            .error_code(),
        Some("ERR"),
        "FCALL_RO of a function without no-writes"
    );
    assert_eq!(
        node.function_load(&rt, &text, false).unwrap(),
        Reply::Error("ERR Library 'lib' already exists".into())
    );
    let refusals = [
        ("x = ", "ERR Error compiling function: user_function:"),
        ("local s = string.format('x')", "ERR Error registering functions: ERR Script attempted to access nonexistent global variable 'string'"),
        ("redis.register_function('a', function() end, 3)", "ERR Error registering functions: ERR wrong number of arguments to redis.register_function"),
        ("redis.register_function{function_name='a', callback=function() end, flags={'nope'}}", "ERR Error registering functions: ERR unknown flag given"),
        ("local x = 1", "ERR No functions registered"),
        ("x = 1", "ERR Error registering functions: ERR user_function:2: Attempt to modify a readonly table"),
    ];
    for (body, expected) in refusals {
        let Err(LoadError::Refused(reply)) = Runtime::new().load(&library(body)) else {
            panic!("{body} loaded")
        };
        assert!(reply.starts_with(expected), "{body}: {reply}");
    }
}

#[test]
fn a_call_that_changes_a_constant_fails_the_run() {
    let rt = Runtime::new();
    let mut node = Node::new(0);
    let text = library(
        "local T = {a = 1}\nlocal n = 0\n\
         redis.register_function('grow', function() T.b = 2 return 1 end)\n\
         redis.register_function('count', function() n = n + 1 return n end)",
    );
    node.load(&rt, &text).unwrap();
    let failure = node.fcall(&rt, "grow", &[], &[], 0).unwrap_err();
    assert!(
        matches!(failure, ModelError::ConstantChanged { .. }),
        "{failure}"
    );
    // The control: a scalar local is state, carried by the node. (A fresh runtime: the
    // failed call left its Lua state changed, and every later call there fails too.)
    let rt = Runtime::new();
    let mut other = Node::new(0);
    other.load(&rt, &text).unwrap();
    assert_eq!(
        other.fcall(&rt, "count", &[], &[], 0).unwrap().reply,
        Reply::Int(1)
    );
    assert_eq!(
        other.fcall(&rt, "count", &[], &[], 0).unwrap().reply,
        Reply::Int(2)
    );
    let mut fresh = Node::new(0);
    fresh.load(&rt, &text).unwrap();
    assert_eq!(
        fresh.fcall(&rt, "count", &[], &[], 0).unwrap().reply,
        Reply::Int(1)
    );
}

#[test]
fn coverage_lists_the_lines_never_reached() {
    let rt = Runtime::with_coverage();
    let mut node = Node::new(1_700_000_000_000);
    node.load(&rt, SHIPPED_LIBRARY).unwrap();
    let library = rt.load(SHIPPED_LIBRARY).unwrap();
    let before = rt.coverage().report(&library);
    assert_eq!(before.covered, 0);
    assert!(before.code_lines > 500, "{}", before.code_lines);
    let acquire = format!("{}_acquire", library.name());
    node.fcall(
        &rt,
        &acquire,
        &words(&["l", "q"]),
        &words(&["30000", "a:1", "", "10000", "publish"]),
        0,
    )
    .unwrap();
    let after = rt.coverage().report(&library);
    assert!(after.covered > 5 && after.covered < 40, "{}", after.covered);
    // The uncontended path ran; its busy path did not.
    let missed: Vec<_> = after
        .missed
        .iter()
        .filter(|m| m.function == "acquire")
        .collect();
    assert!(!missed.is_empty());
    assert!(
        missed
            .iter()
            .any(|m| m.text.contains("enqueue(queue, me, t, waiter_ttl_ms)")),
        "{missed:?}"
    );
    assert!(!missed
        .iter()
        .any(|m| m.text.starts_with("local token = micros_text")));
    // No dead compiler output is listed: not the `end` of a function that always returns
    // first (its implicit return), nor an `else` after a `return`.
    let last = (1..=SHIPPED_LIBRARY.lines().count() as u32)
        .find(|&l| library.line(l).trim() == "return {0, redis.call('pttl', key), 0, record}")
        .expect("acquire's last line");
    assert_eq!(library.line(last + 1).trim(), "end");
    assert!(library.code_lines().contains_key(&last));
    assert!(!library.code_lines().contains_key(&(last + 1)));
    assert!(!before.missed.iter().any(|m| m.text == "else"));
}
