//! A lock client's topology as one word, for child processes that take their addresses on a
//! command line (the `holder` binary): a `redis://…` URL is one server,
//! `cluster:<seed>,<seed>…` a Cluster's seed nodes, `sentinel:<service>:<sentinel>,…` the
//! master the Sentinels name — as the `distlock` CLI's `--cluster` and `--sentinel`.

use lock_core::{LockClient, LockClientBuilder};
use redis::{FromRedisValue, RedisResult};

const CLUSTER: &str = "cluster:";
const SENTINEL: &str = "sentinel:";

/// The word for a Cluster with these seed URLs.
pub fn cluster(seeds: &[String]) -> String {
    format!("{CLUSTER}{}", seeds.join(","))
}

/// The word for the master that these Sentinels name `service`.
pub fn sentinel(service: &str, sentinels: &[String]) -> String {
    format!("{SENTINEL}{service}:{}", sentinels.join(","))
}

/// A lock client builder for `word`.
///
/// # Panics
/// On a `sentinel:` word without a service name.
pub fn builder(word: &str) -> LockClientBuilder {
    if let Some(seeds) = word.strip_prefix(CLUSTER) {
        return LockClient::cluster(seeds.split(','));
    }
    if let Some(rest) = word.strip_prefix(SENTINEL) {
        let (service, sentinels) = rest
            .split_once(':')
            .unwrap_or_else(|| panic!("{word:?}: sentinel:<service>:<sentinel url>,…"));
        return LockClient::sentinel(sentinels.split(','), service);
    }
    LockClient::builder(word)
}

/// Runs `commands` once on a plain (lock-unaware) connection to `word`: one server's URL,
/// or a `cluster:` word (the commands go to the node serving their keys). A new connection
/// each time, so a Redis restart in between needs no reconnect logic.
///
/// # Errors
/// When Redis cannot be reached or refuses a command.
pub async fn plain_query<T: FromRedisValue>(
    word: &str,
    commands: &redis::Pipeline,
) -> RedisResult<T> {
    if let Some(seeds) = word.strip_prefix(CLUSTER) {
        let client = redis::cluster::ClusterClient::new(seeds.split(',').collect::<Vec<_>>())?;
        return commands
            .query_async(&mut client.get_async_connection().await?)
            .await;
    }
    let client = redis::Client::open(word)?;
    commands
        .query_async(&mut client.get_multiplexed_async_connection().await?)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn words_round_trip_through_the_builder() {
        let urls = [
            "redis://127.0.0.1:1".to_owned(),
            "redis://127.0.0.1:2".to_owned(),
        ];
        assert_eq!(
            cluster(&urls),
            "cluster:redis://127.0.0.1:1,redis://127.0.0.1:2"
        );
        assert_eq!(
            sentinel("mymaster", &urls[..1]),
            "sentinel:mymaster:redis://127.0.0.1:1"
        );
        for word in [cluster(&urls), sentinel("m", &urls), urls[0].clone()] {
            let built = builder(&word).build();
            assert!(built.is_ok(), "{word}: {:?}", built.err());
        }
    }
}
