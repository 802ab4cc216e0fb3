use lock_core::distributed_lock;

#[distributed_lock(key = "item")]
struct Item;

fn main() {}
