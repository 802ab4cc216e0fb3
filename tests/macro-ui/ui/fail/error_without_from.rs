use lock_core::distributed_lock;

#[derive(Debug)]
struct MyError;

#[distributed_lock(key = "item_<id>")]
async fn buy(id: u64) -> Result<u64, MyError> {
    Ok(id)
}

fn main() {}
