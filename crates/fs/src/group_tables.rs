//! What `kafka-consumer-groups.sh` prints on standard output for
//! `--describe --group G` (with `--members`, with `--state`), byte for
//! byte, from a group's description and offsets (Kafka's
//! `ConsumerGroupCommand`, the 4.0 line). Pure: the tree gathers the figures.
//!
//! The tool's messages on standard error ("has no active members", "is
//! rebalancing") are not part of a file. Its rows come out of Java
//! `HashMap`s, so their order is the maps' iteration order, reproduced in
//! [`java_hash_order`]: scripts that compare the tool's output with a file
//! see the same lines in the same order.

use commitfs_backend::groups::{GroupDescription, Member, TopicPartition};

/// The tool's `MISSING_COLUMN_VALUE`.
const MISSING: &str = "-";

/// One partition of `--describe`: what the group committed, the log end
/// offset, and the member (an index into the description's) holding it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRow {
    pub partition: TopicPartition,
    pub committed: Option<i64>,
    pub log_end: Option<i64>,
    pub member: Option<usize>,
}

/// Java's `String.hashCode`, over UTF-16 code units.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// Kafka's `TopicPartition.hashCode`.
fn topic_partition_hash(tp: &TopicPartition) -> i32 {
    31i32
        .wrapping_mul(31i32.wrapping_add(tp.partition))
        .wrapping_add(java_string_hash(&tp.topic))
}

/// The order a `java.util.HashMap` (default capacity and load factor)
/// iterates `items` in, put in the order given: by bucket of the spread
/// hash in the final table, and in a bucket by insertion.
fn java_hash_order<T>(items: Vec<T>, hash: impl Fn(&T) -> i32) -> Vec<T> {
    let mut cap = 16usize;
    while items.len() * 4 > cap * 3 {
        cap *= 2;
    }
    let mut keyed: Vec<(usize, usize, T)> = items
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let h = hash(&t) as u32;
            ((h ^ (h >> 16)) as usize & (cap - 1), i, t)
        })
        .collect();
    keyed.sort_by_key(|(bucket, i, _)| (*bucket, *i));
    keyed.into_iter().map(|(_, _, t)| t).collect()
}

/// Java's `%-Ns`: padded on the right to `width` UTF-16 units, never cut.
fn pad(s: &str, width: usize) -> String {
    let len = s.encode_utf16().count();
    format!("{s}{}", " ".repeat(width.saturating_sub(len)))
}

fn width(min: usize, values: impl Iterator<Item = usize>) -> usize {
    values.fold(min, usize::max)
}

/// `--describe --group G`: the offsets table, or nothing when the group
/// has no row (an Empty group without offsets, as the tool prints).
pub fn describe(group: &str, desc: &GroupDescription, rows: &[PartitionRow]) -> String {
    let members = java_hash_order(desc.members.iter().enumerate().collect(), |(_, m)| {
        java_string_hash(&m.member_id)
    });
    // Members that hold partitions, the most first (a stable sort).
    let mut holders: Vec<(usize, &Member)> = members
        .into_iter()
        .filter(|(_, m)| !m.assignment.is_empty())
        .collect();
    holders.sort_by_key(|(_, m)| std::cmp::Reverse(m.assignment.len()));
    let row_of = |tp: &TopicPartition| rows.iter().find(|r| r.partition == *tp);
    let mut out_rows: Vec<[String; 9]> = Vec::new();
    let mut emit = |tp: &TopicPartition, member: Option<&Member>| {
        let r = row_of(tp);
        let committed = r.and_then(|r| r.committed).filter(|c| *c >= 0);
        let log_end = r.and_then(|r| r.log_end);
        let lag = match (committed, log_end) {
            (Some(c), Some(e)) => (e - c).to_string(),
            _ => MISSING.to_string(),
        };
        let opt = |v: Option<i64>| v.map_or(MISSING.to_string(), |v| v.to_string());
        let (id, host, client) = match member {
            Some(m) => (m.member_id.clone(), m.host.clone(), m.client_id.clone()),
            None => (MISSING.into(), MISSING.into(), MISSING.into()),
        };
        out_rows.push([
            group.to_string(),
            tp.topic.clone(),
            tp.partition.to_string(),
            opt(committed),
            opt(log_end),
            lag,
            id,
            host,
            client,
        ]);
    };
    for (_, m) in &holders {
        let mut tps: Vec<&TopicPartition> = m.assignment.iter().collect();
        tps.sort_by_key(|tp| tp.partition);
        for tp in java_hash_order(tps, |tp| topic_partition_hash(tp)) {
            emit(tp, Some(m));
        }
    }
    let assigned = |tp: &TopicPartition| holders.iter().any(|(_, m)| m.assignment.contains(tp));
    let committed: Vec<&TopicPartition> = rows
        .iter()
        .filter(|r| r.committed.is_some())
        .map(|r| &r.partition)
        .collect();
    let mut orphans: Vec<&TopicPartition> =
        java_hash_order(committed, |tp| topic_partition_hash(tp))
            .into_iter()
            .filter(|tp| !assigned(tp))
            .collect();
    orphans.sort_by_key(|tp| tp.partition);
    for tp in java_hash_order(orphans, |tp| topic_partition_hash(tp)) {
        emit(tp, None);
    }
    if desc.state == "Dead" || out_rows.is_empty() {
        return String::new();
    }
    let w = |i: usize| width(15, out_rows.iter().map(|r| r[i].encode_utf16().count()));
    let (wg, wt, wc, wh) = (w(0), w(1), w(6), w(7));
    let line = |r: &[&str; 9]| {
        format!(
            "\n{} {} {} {} {} {} {} {} {}",
            pad(r[0], wg),
            pad(r[1], wt),
            pad(r[2], 10),
            pad(r[3], 15),
            pad(r[4], 15),
            pad(r[5], 15),
            pad(r[6], wc),
            pad(r[7], wh),
            r[8]
        )
    };
    let mut out = line(&[
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]);
    for r in &out_rows {
        out.push_str(&line(&std::array::from_fn(|i| r[i].as_str())));
    }
    out.push('\n');
    out
}

/// `--describe --group G --members`: every member, in the coordinator's
/// (hash map) order; each line ends with the tool's padding and a space.
pub fn members(group: &str, desc: &GroupDescription) -> String {
    let members = java_hash_order(desc.members.iter().collect(), |m| {
        java_string_hash(&m.member_id)
    });
    let instance = members.iter().any(|m| {
        m.group_instance_id
            .as_deref()
            .is_some_and(|i| !i.is_empty())
    });
    // The tool widens its columns only for a group it describes.
    let shown = desc.state != "Dead" && !members.is_empty();
    let grow = |min: usize, f: &dyn Fn(&Member) -> usize| match shown {
        true => width(min, members.iter().map(|m| f(m))),
        false => min,
    };
    let len = |s: &str| s.encode_utf16().count();
    let wg = if shown {
        width(15, std::iter::once(len(group)))
    } else {
        15
    };
    let wc = grow(15, &|m| len(&m.member_id));
    let wi = grow(17, &|m| len(m.group_instance_id.as_deref().unwrap_or("")));
    let wh = grow(15, &|m| len(&m.host));
    let wl = grow(15, &|m| len(&m.client_id));
    let line = |g: &str, id: &str, inst: &str, host: &str, client: &str, n: &str| {
        let mut s = format!("{} {} ", pad(g, wg), pad(id, wc));
        if instance {
            s.push_str(&format!("{} ", pad(inst, wi)));
        }
        s.push_str(&format!(
            "{} {} {} \n",
            pad(host, wh),
            pad(client, wl),
            pad(n, 15)
        ));
        s
    };
    let mut out = String::from("\n");
    out.push_str(&line(
        "GROUP",
        "CONSUMER-ID",
        "GROUP-INSTANCE-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
    ));
    for m in &members {
        out.push_str(&line(
            group,
            &m.member_id,
            m.group_instance_id.as_deref().unwrap_or(""),
            &m.host,
            &m.client_id,
            &m.assignment.len().to_string(),
        ));
    }
    out
}

/// `--describe --group G --state`: the coordinator, the assignor (only
/// while the group is Stable, as DescribeGroups gives it), the state and
/// the number of members.
pub fn state(group: &str, desc: &GroupDescription) -> String {
    if desc.state == "Dead" {
        return String::new();
    }
    let coordinator = match &desc.coordinator {
        Some(c) => format!("{}:{}  ({})", c.host, c.port, c.id),
        None => MISSING.to_string(),
    };
    // The tool sizes the first column by the coordinator's text.
    let first = width(25, std::iter::once(coordinator.encode_utf16().count()));
    let line = |a: &str, b: &str, c: &str, d: &str, e: &str| {
        format!(
            "\n{} {} {} {} {e}",
            pad(a, first),
            pad(b, 25),
            pad(c, 20),
            pad(d, 15)
        )
    };
    let mut out = line(
        "GROUP",
        "COORDINATOR (ID)",
        "ASSIGNMENT-STRATEGY",
        "STATE",
        "#MEMBERS",
    );
    out.push_str(&line(
        group,
        &coordinator,
        &desc.assignor,
        &desc.state,
        &desc.members.len().to_string(),
    ));
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's values, from `"orders".hashCode()` and
    /// `new TopicPartition("orders", 0).hashCode()` worked out by hand.
    #[test]
    fn hashes_are_javas() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("ab"), 97 * 31 + 98);
        // "orders": o=111 r=114 d=100 e=101 r=114 s=115.
        let want = [111, 114, 100, 101, 114, 115]
            .iter()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(*c));
        assert_eq!(java_string_hash("orders"), want);
        let tp = TopicPartition {
            topic: "orders".into(),
            partition: 0,
        };
        assert_eq!(topic_partition_hash(&tp), 961i32.wrapping_add(want));
    }

    /// A HashMap of 13 keys has 32 buckets; keys iterate by bucket.
    #[test]
    fn hash_order_is_by_bucket_then_insertion() {
        let keys: Vec<i32> = vec![33, 1, 17, 2];
        // Capacity 16: buckets 1, 1, 1, 2 (33 & 15 = 1, 17 & 15 = 1).
        assert_eq!(java_hash_order(keys, |k| *k), vec![33, 1, 17, 2]);
        let keys: Vec<i32> = (0..13).rev().collect();
        // 13 keys > 12: capacity 32, so the order is ascending.
        assert_eq!(java_hash_order(keys, |k| *k), (0..13).collect::<Vec<_>>());
        // The spread: bit 16 folds into bit 0, so 1 << 16 goes to bucket 1.
        assert_eq!(java_hash_order(vec![2, 1 << 16], |k| *k), vec![1 << 16, 2]);
    }
}
