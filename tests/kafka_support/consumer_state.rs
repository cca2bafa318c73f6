//! The confluent-kafka consumer the group tests run as a process of its
//! own, and the reading of the JSON state such consumers write.

/// A consumer of group `group` driven by confluent-kafka's `subscribe`:
/// commits each record it reads, synchronously, and writes what it was
/// assigned, the first offset it read per partition, the count, and the
/// offsets the coordinator acknowledged per partition to `<name>.json`,
/// until `<work>/stop` exists. Its arguments: the bootstrap address, the
/// topic, the group, the client's name and the work directory.
pub const CONFLUENT_CONSUMER: &str = include_str!("confluent_consumer.py");

/// `"p": offset` pairs of a JSON object's inside.
pub fn pairs(inside: &str) -> Vec<(i32, i64)> {
    inside
        .split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once(':')?;
            Some((
                k.trim().trim_matches('"').parse().ok()?,
                v.trim().parse().ok()?,
            ))
        })
        .collect()
}

/// The text between `"name": [` (or `{`) and its closing bracket.
pub fn field<'a>(json: &'a str, name: &str) -> &'a str {
    let Some((_, rest)) = json.split_once(&format!("\"{name}\": ")) else {
        return "";
    };
    let close = if rest.starts_with('[') { ']' } else { '}' };
    rest[1..].split(close).next().unwrap_or("")
}

/// The records read, the state's last field; 0 before there is one.
pub fn count(json: &str) -> usize {
    json.rsplit_once("\"count\": ")
        .and_then(|(_, c)| c.trim_end_matches('}').trim().parse().ok())
        .unwrap_or(0)
}
