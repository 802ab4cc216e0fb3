use lock_core::distributed_lock;

#[distributed_lock(key = "item_<id>")]
async fn buy(id: u64) -> Option<u64> {
    Some(id)
}

fn main() {}
