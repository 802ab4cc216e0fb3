//! Sorted-set commands (src/t_zset.c).

use super::{not_modelled, NOT_INTEGER, SYNTAX};
use crate::call::CallState;
use crate::error::ModelError;
use crate::numbers::{format_score, parse_i64, parse_range_bound, parse_score};
use crate::reply::Reply;
use crate::zset::Score;

/// ZADD's options (`zaddGenericCommand`).
#[derive(Default)]
struct ZaddOptions {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
}

/// `ZADD key [NX|XX] [GT|LT] [CH] score member [score member …]`: how many members were
/// added (with CH: added or changed).
pub(super) fn zadd(state: &mut CallState, argv: &[Vec<u8>]) -> Result<Reply, ModelError> {
    let mut options = ZaddOptions::default();
    let mut at = 2;
    while let Some(word) = argv.get(at) {
        match word.to_ascii_uppercase().as_slice() {
            b"NX" => options.nx = true,
            b"XX" => options.xx = true,
            b"GT" => options.gt = true,
            b"LT" => options.lt = true,
            b"CH" => options.ch = true,
            b"INCR" => return Err(not_modelled("ZADD", word)),
            _ => break,
        }
        at += 1;
    }
    let pairs = &argv[at..];
    if pairs.is_empty() || pairs.len() % 2 == 1 {
        return Ok(Reply::error(SYNTAX));
    }
    if options.nx && options.xx {
        return Ok(Reply::error(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (options.nx && (options.gt || options.lt)) || (options.gt && options.lt) {
        return Ok(Reply::error(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    let mut scores = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks(2) {
        match parse_score(&pair[0]).and_then(Score::new) {
            Some(score) => scores.push((score, &pair[1])),
            None => return Ok(Reply::error("ERR value is not a valid float")),
        }
    }
    let key = &argv[1];
    let exists = match state.zset(key) {
        Ok(zset) => zset.is_some(),
        Err(wrong_type) => return Ok(wrong_type),
    };
    if !exists && options.xx {
        return Ok(Reply::Int(0));
    }
    let counted = state.with_zset(key, true, |zset| {
        let mut counted = 0;
        for (score, member) in scores {
            match zset.score(member) {
                None if options.xx => {}
                None => {
                    zset.insert(member, score);
                    counted += 1;
                }
                Some(_) if options.nx => {}
                Some(current) => {
                    let new = score.value();
                    let refused = (options.lt && new >= current) || (options.gt && new <= current);
                    // Compared as numbers (`score != curscore`): -0 does not replace 0.
                    #[allow(clippy::float_cmp)]
                    if !refused && new != current {
                        zset.insert(member, score);
                        counted += i64::from(options.ch);
                    }
                }
            }
        }
        counted
    });
    Ok(counted.map_or_else(|wrong_type| wrong_type, |n| Reply::Int(n.unwrap_or(0))))
}

/// `ZREM key member [member …]`: how many were there; the key goes with its last member.
pub(super) fn zrem(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    let removed = state.with_zset(&argv[1], false, |zset| {
        argv[2..].iter().filter(|m| zset.remove(m)).count()
    });
    removed.map_or_else(
        |wrong_type| wrong_type,
        |n| Reply::Int(n.unwrap_or(0) as i64),
    )
}

/// Members (and their scores when `with_scores`) as a flat reply.
fn members<'a>(items: impl Iterator<Item = (&'a [u8], f64)>, with_scores: bool) -> Reply {
    Reply::Array(
        items
            .flat_map(|(member, score)| {
                let score = with_scores.then(|| Reply::bulk(format_score(score)));
                std::iter::once(Reply::bulk(member)).chain(score)
            })
            .collect(),
    )
}

/// The options after `ZRANGE key a b` / `ZRANGEBYSCORE key min max`: WITHSCORES, or
/// the error for a word Redis does not know there; the other options Redis knows are not
/// modelled.
fn with_scores(command: &str, options: &[Vec<u8>]) -> Result<Result<bool, Reply>, ModelError> {
    let mut with_scores = false;
    for word in options {
        match word.to_ascii_uppercase().as_slice() {
            b"WITHSCORES" => with_scores = true,
            b"LIMIT" | b"REV" | b"BYSCORE" | b"BYLEX" => return Err(not_modelled(command, word)),
            _ => return Ok(Err(Reply::error(SYNTAX))),
        }
    }
    Ok(Ok(with_scores))
}

/// `ZRANGE key start stop [WITHSCORES]`: by index, negative from the end.
pub(super) fn zrange(state: &mut CallState, argv: &[Vec<u8>]) -> Result<Reply, ModelError> {
    let with_scores = match with_scores("ZRANGE", &argv[4..])? {
        Ok(with_scores) => with_scores,
        Err(error) => return Ok(error),
    };
    let (Some(start), Some(stop)) = (parse_i64(&argv[2]), parse_i64(&argv[3])) else {
        return Ok(Reply::error(NOT_INTEGER));
    };
    let zset = match state.zset(&argv[1]) {
        Ok(Some(zset)) => zset,
        Ok(None) => return Ok(Reply::Array(Vec::new())),
        Err(wrong_type) => return Ok(wrong_type),
    };
    let len = zset.len() as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    if start > stop || start >= len {
        return Ok(Reply::Array(Vec::new()));
    }
    let items = zset
        .iter()
        .skip(start as usize)
        .take((stop - start + 1) as usize);
    Ok(members(items, with_scores))
}

/// A score range (`zslParseRange`), or the error Redis gives for it.
fn range(min: &[u8], max: &[u8]) -> Result<impl Fn(f64) -> bool, Reply> {
    let (Some((min, min_ex)), Some((max, max_ex))) =
        (parse_range_bound(min), parse_range_bound(max))
    else {
        return Err(Reply::error("ERR min or max is not a float"));
    };
    Ok(move |score: f64| {
        let above = if min_ex { score > min } else { score >= min };
        let below = if max_ex { score < max } else { score <= max };
        above && below
    })
}

/// `ZRANGEBYSCORE key min max [WITHSCORES]`.
pub(super) fn zrangebyscore(state: &mut CallState, argv: &[Vec<u8>]) -> Result<Reply, ModelError> {
    let with_scores = match with_scores("ZRANGEBYSCORE", &argv[4..])? {
        Ok(with_scores) => with_scores,
        Err(error) => return Ok(error),
    };
    let in_range = match range(&argv[2], &argv[3]) {
        Ok(in_range) => in_range,
        Err(error) => return Ok(error),
    };
    let reply = match state.zset(&argv[1]) {
        Ok(Some(zset)) => members(zset.iter().filter(|(_, s)| in_range(*s)), with_scores),
        Ok(None) => Reply::Array(Vec::new()),
        Err(wrong_type) => wrong_type,
    };
    Ok(reply)
}

/// `ZCOUNT key min max`.
pub(super) fn zcount(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    let in_range = match range(&argv[2], &argv[3]) {
        Ok(in_range) => in_range,
        Err(error) => return error,
    };
    match state.zset(&argv[1]) {
        Ok(zset) => {
            Reply::Int(zset.map_or(0, |z| z.iter().filter(|(_, s)| in_range(*s)).count()) as i64)
        }
        Err(wrong_type) => wrong_type,
    }
}

/// `ZSCORE key member`.
pub(super) fn zscore(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    match state.zset(&argv[1]) {
        Ok(zset) => zset
            .and_then(|z| z.score(&argv[2]))
            .map_or(Reply::Nil, |s| Reply::bulk(format_score(s))),
        Err(wrong_type) => wrong_type,
    }
}

/// `ZCARD key`.
pub(super) fn zcard(state: &mut CallState, argv: &[Vec<u8>]) -> Reply {
    match state.zset(&argv[1]) {
        Ok(zset) => Reply::Int(zset.map_or(0, |z| z.len()) as i64),
        Err(wrong_type) => wrong_type,
    }
}

/// `ZPOPMIN key`: the first member and its score, or an empty array.
pub(super) fn zpopmin(state: &mut CallState, argv: &[Vec<u8>]) -> Result<Reply, ModelError> {
    if let Some(count) = argv.get(2) {
        return Err(not_modelled("ZPOPMIN", count));
    }
    let popped = state.with_zset(&argv[1], false, |zset| zset.pop_first());
    Ok(match popped {
        Ok(Some(Some((member, score)))) => {
            Reply::Array(vec![Reply::Bulk(member), Reply::bulk(format_score(score))])
        }
        Ok(_) => Reply::Array(Vec::new()),
        Err(wrong_type) => wrong_type,
    })
}
