use lock_core::{distributed_lock, LockError};

struct Headers {
    tenant: String,
}

#[distributed_lock(key = "t_<headers.x-tenant>")]
async fn buy(headers: Headers) -> Result<String, LockError> {
    Ok(headers.tenant)
}

fn main() {}
