use lock_core::distributed_lock;

// Named like a `Result`, but not one: lock failures cannot be returned through it.
struct FakeResult<T>(T);

#[distributed_lock(key = "item_<id>")]
async fn buy(id: u64) -> FakeResult<u64> {
    FakeResult(id)
}

fn main() {}
