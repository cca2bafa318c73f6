//! The schema engine encodes what it decodes: decode(encode(x)) == x for
//! random values of every table (__consumer_offsets, __transaction_state,
//! __cluster_metadata, KRaft control records) at every valid version, and
//! offset commits built for the coordinator decode to what was committed.

use commitfs::record::internal::{
    OffsetCommit, decode_internal_record, group_schemas, metadata_schema, transaction_schemas,
};
use commitfs::record::schema::{
    Message, Struct, StructValue, Type, Value, decode, default_value, encode, raft,
};
use proptest::prelude::*;

fn value_strategy(ty: &'static Type, nullable: bool, depth: u32) -> BoxedStrategy<Value> {
    let v: BoxedStrategy<Value> = match ty {
        Type::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        Type::Int8 => any::<i8>().prop_map(|i| Value::Int(i as i64)).boxed(),
        Type::Int16 => any::<i16>().prop_map(|i| Value::Int(i as i64)).boxed(),
        Type::Uint16 => any::<u16>().prop_map(|i| Value::Int(i as i64)).boxed(),
        Type::Int32 => any::<i32>().prop_map(|i| Value::Int(i as i64)).boxed(),
        Type::Uint32 => any::<u32>().prop_map(|i| Value::Int(i as i64)).boxed(),
        Type::Int64 => any::<i64>().prop_map(Value::Int).boxed(),
        Type::Float64 => (-1e300f64..1e300).prop_map(Value::Float).boxed(),
        Type::Uuid => any::<[u8; 16]>().prop_map(Value::Uuid).boxed(),
        Type::String => "\\PC{0,12}".prop_map(|s| Value::Str(Some(s))).boxed(),
        Type::Bytes => proptest::collection::vec(any::<u8>(), 0..12)
            .prop_map(|b| Value::Bytes(Some(b)))
            .boxed(),
        Type::Array(elem) => {
            let n = if depth > 2 { 0..1 } else { 0..3 };
            proptest::collection::vec(value_strategy(elem, false, depth + 1), n)
                .prop_map(|v| Value::Array(Some(v)))
                .boxed()
        }
        Type::Struct(s) => struct_strategy(s, None, depth + 1)
            .prop_map(|s| Value::Struct(Some(s)))
            .boxed(),
    };
    if !nullable {
        return v;
    }
    let null = match ty {
        Type::String => Value::Str(None),
        Type::Bytes => Value::Bytes(None),
        Type::Array(_) => Value::Array(None),
        Type::Struct(_) => Value::Struct(None),
        _ => return v,
    };
    prop_oneof![Just(null), v].boxed()
}

/// A random value of `s`; `version` None inside arrays and structs, where
/// the version is inherited (the same one is used).
fn struct_strategy(
    s: &'static Struct,
    version: Option<i16>,
    depth: u32,
) -> BoxedStrategy<StructValue> {
    let v = version.unwrap_or(VERSION.with(|c| c.get()));
    let fields: Vec<BoxedStrategy<Value>> = s
        .fields
        .iter()
        .map(|f| {
            if f.versions.contains(v) {
                value_strategy(&f.ty, f.nullable.contains(v), depth)
            } else {
                Just(default_value(f)).boxed()
            }
        })
        .collect();
    fields
        .prop_map(|fields| StructValue {
            fields,
            unknown_tagged: Vec::new(),
        })
        .boxed()
}

thread_local! {
    static VERSION: std::cell::Cell<i16> = const { std::cell::Cell::new(0) };
}

fn every_schema() -> Vec<&'static Message> {
    let mut all: Vec<&'static Message> = Vec::new();
    for t in 0..64 {
        if let Some((k, v)) = group_schemas(t).or_else(|| transaction_schemas(t)) {
            all.extend([k, v]);
        }
        if let Some(m) = metadata_schema(t) {
            all.push(m);
        }
    }
    all.extend([
        &raft::LEADER_CHANGE_MESSAGE,
        &raft::SNAPSHOT_HEADER_RECORD,
        &raft::SNAPSHOT_FOOTER_RECORD,
        &raft::KRAFT_VERSION_RECORD,
        &raft::VOTERS_RECORD,
    ]);
    all.dedup_by_key(|m| m.name);
    all
}

fn round_trip(msg: &'static Message, version: i16, cases: u32) {
    VERSION.with(|c| c.set(version));
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases));
    runner
        .run(&struct_strategy(&msg.body, Some(version), 0), |x| {
            let mut bytes = Vec::new();
            encode(msg, version, &x, &mut bytes).unwrap();
            let (back, used) = decode(msg, version, &bytes).unwrap();
            prop_assert_eq!(used, bytes.len());
            prop_assert_eq!(&back, &x, "{} v{}", msg.name, version);
            Ok(())
        })
        .unwrap();
}

#[test]
fn every_table_round_trips_at_every_version() {
    let schemas = every_schema();
    assert!(schemas.len() > 60, "{}", schemas.len());
    for msg in schemas {
        let hi = msg.valid.hi.min(msg.valid.lo + 8);
        for version in msg.valid.lo..=hi {
            round_trip(msg, version, 24);
        }
    }
}

proptest! {
    #[test]
    fn offset_commits_decode_to_what_was_committed(
        group in "[a-z0-9._-]{1,20}",
        topic in "[a-zA-Z0-9._-]{1,20}",
        partition in 0i32..1000,
        offset in 0i64..i64::MAX,
        leader_epoch in -1i32..100,
        commit_timestamp in 0i64..4_000_000_000_000,
    ) {
        let c = OffsetCommit {
            group: group.clone(), topic: topic.clone(), partition, offset, leader_epoch,
            metadata: String::new(), commit_timestamp, expire_timestamp: -1,
        };
        let (k, v) = c.to_record().unwrap();
        let text = decode_internal_record("__consumer_offsets", 0, Some(&k), Some(&v)).unwrap();
        prop_assert_eq!(text, format!(
            "key: {{\"type\":\"1\",\"data\":{{\"group\":\"{group}\",\"topic\":\"{topic}\",\"partition\":{partition}}}}} \
             payload: {{\"version\":\"3\",\"data\":{{\"offset\":{offset},\"leaderEpoch\":{leader_epoch},\
             \"metadata\":\"\",\"commitTimestamp\":{commit_timestamp}}}}}"
        ));
    }
}

#[test]
fn real_offset_commit_re_encodes_byte_for_byte() {
    // konsumer-offsets/offset_commit-01, from a real cluster.
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/kafka/konsumer-offsets"
    );
    let key = std::fs::read(format!("{dir}/offset_commit-01.key")).unwrap();
    let value = std::fs::read(format!("{dir}/offset_commit-01.payload")).unwrap();
    let c = OffsetCommit {
        group: "ivan-experimental-consumer".into(),
        topic: "__consumer_offsets".into(),
        partition: 46,
        offset: 97507,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp: 1672871009232,
        expire_timestamp: -1,
    };
    assert_eq!(c.to_record().unwrap(), (key, value));
}
