use lock_core::{distributed_lock, LockError};

// `%` does not separate placeholders: encoded values contain it, so `("", "25 ")` and
// `("%", "20")` would both give `%25%20`.
#[distributed_lock(key = "<shop>%<item>")]
async fn buy(shop: &str, item: &str) -> Result<usize, LockError> {
    Ok(shop.len() + item.len())
}

fn main() {}
