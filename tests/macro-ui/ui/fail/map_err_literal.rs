use lock_core::distributed_lock;

#[distributed_lock(key = "item_<id>", map_err = "to_status")]
async fn buy(id: u64) -> Result<u64, String> {
    Ok(id)
}

fn main() {}
