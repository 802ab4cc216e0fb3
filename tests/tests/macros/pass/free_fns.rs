//! Free functions: parameters, pattern bindings, fields, generics, `impl Trait`, `?`, `return`.
use std::fmt::Display;

use lock_core::{distributed_lock, LockError};

#[derive(Debug)]
enum AppError {
    Lock(LockError),
    Parse(std::num::ParseIntError),
}

impl From<LockError> for AppError {
    fn from(e: LockError) -> Self {
        AppError::Lock(e)
    }
}

impl From<std::num::ParseIntError> for AppError {
    fn from(e: std::num::ParseIntError) -> Self {
        AppError::Parse(e)
    }
}

struct Order {
    id: u64,
    lines: (u32, String),
}

struct Path<T>(T);

#[distributed_lock(key = "item_<id>")]
async fn simple(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "order_<order.id>:<order.lines.0>:<order.lines.1>")]
async fn fields(order: Order) -> Result<Order, AppError> {
    let n: u32 = "7".parse()?;
    if n == 0 {
        return Ok(order);
    }
    Ok(order)
}

#[distributed_lock(key = "shop_<shop>/item_<item>")]
async fn patterns(
    Path((shop, item)): Path<(u32, u32)>,
    (a, _b): (String, u8),
) -> Result<String, LockError> {
    Ok(format!("{shop} {item} {a}"))
}

/// Struct patterns bind their fields, shorthand or renamed.
#[distributed_lock(key = "order_<id>:<first>")]
async fn struct_pattern(
    Order {
        id,
        lines: (first, _),
        ..
    }: Order,
) -> Result<u64, LockError> {
    Ok(id + u64::from(first))
}

#[distributed_lock(
    key = "<<raw>_<name>",
    wait = "0s",
    lease = "1m30s",
    on_lost = "continue"
)]
async fn generic<T, U: Display + Send>(name: T, extra: impl Display, u: U) -> MyResult<String>
where
    T: Display + Send + Sync,
{
    Ok(format!("{name}{extra}{u}"))
}

/// A borrowed parameter is still borrowed by the body after the key is built.
#[distributed_lock(key = "text_<text>", wait = "500ms", on_lost = "abort")]
async fn borrowed<'a>(text: &'a str, mut count: usize) -> Result<&'a str, LockError> {
    count += 1;
    let _ = count;
    Ok(text)
}

/// A body that moves a parameter used in the key.
#[distributed_lock(key = "owned_<name>")]
async fn owned(name: String) -> Result<String, LockError> {
    let moved = name;
    Ok(moved)
}

type MyResult<T> = Result<T, AppError>;

#[distributed_lock(key = "alias_<type>")]
async fn alias(r#type: u8) -> MyResult<u8> {
    Ok(r#type)
}

/// Expands and type-checks (the futures are made, never run).
#[test]
fn expands() {
    drop(simple(1));
    drop(fields(Order {
        id: 1,
        lines: (2, "x".into()),
    }));
    drop(patterns(Path((1, 2)), ("a".into(), 3)));
    drop(struct_pattern(Order {
        id: 1,
        lines: (2, "x".into()),
    }));
    drop(generic::<u8, u8>(1, "x", 2));
    drop(borrowed("x", 1));
    drop(owned("x".into()));
    drop(alias(1));
}
