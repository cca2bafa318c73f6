//! `commitfs dump` decoders against Kafka's printed format, whole lines:
//! - records of a real `__consumer_offsets` (tests/fixtures/kafka/konsumer-offsets)
//!   and a real KRaft data directory (tests/fixtures/kafka/codecrafters-kafka-tester);
//! - the lines Kafka's own `DumpLogSegmentsTest` expects, for inputs built
//!   from the published schemas (the bytes are built here, the expected text
//!   is Kafka's).

#[path = "support/bounded.rs"]
mod bounded;
#[path = "support/dump.rs"]
mod run_dump;

use std::path::{Path, PathBuf};

use run_dump::dump;

use commitfs::record::internal::decode_internal_record;
use commitfs::record::schema::{StructValue, Value, group, transaction};
use commitfs::record::{NewRecord, encode_batch};

fn fixture(rel: &str) -> PathBuf {
    [env!("CARGO_MANIFEST_DIR"), "tests/fixtures/kafka", rel]
        .iter()
        .collect()
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(fixture(rel)).unwrap()
}

const T: i64 = 1_700_000_000_000;

/// A record's key and value.
type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A segment with one batch per record (offsets 0, 1, ...), written by commitfs.
fn segment(dir: &Path, records: &[KeyValue]) -> PathBuf {
    let mut log = Vec::new();
    for (i, (k, v)) in records.iter().enumerate() {
        let r = NewRecord {
            key: k.as_deref(),
            value: v.as_deref(),
            headers: &[],
        };
        encode_batch(&mut log, i as i64, T, &[r]);
    }
    let path = dir.join("00000000000000000000.log");
    std::fs::write(&path, log).unwrap();
    path
}

/// The record lines of a dump ("| ..."), each without its metadata part.
fn contents(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.starts_with('|'))
        .map(|l| match l.find(" headerKeys: [] ") {
            Some(i) => l[i + " headerKeys: [] ".len()..].to_string(),
            None => l.to_string(),
        })
        .collect()
}

fn record_line(offset: i64, key: Option<&[u8]>, value: Option<&[u8]>, rest: &str) -> String {
    let size = |b: Option<&[u8]>| b.map_or(-1, |b| b.len() as i64);
    format!(
        "| offset: {offset} CreateTime: {T} keySize: {} valueSize: {} sequence: -1 headerKeys: [] {rest}",
        size(key),
        size(value)
    )
}

#[test]
fn offsets_decoder_on_real_consumer_offsets_records() {
    let dir = tempfile::tempdir().unwrap();
    let names = [
        "offset_commit-01",
        "offset_commit-03",
        "group_metadata-01",
        "group_metadata-05",
    ];
    let records: Vec<_> = names
        .iter()
        .map(|n| {
            let k = read(&format!("konsumer-offsets/{n}.key"));
            let v = read(&format!("konsumer-offsets/{n}.payload"));
            (Some(k), Some(v))
        })
        .collect();
    let path = segment(dir.path(), &records);
    let (code, out, err) = dump(&["--offsets-decoder"], &[&path]);
    assert_eq!(code, 0, "{err}");
    let member = "rdkafka-9f4fc1b0-1d7d-4471-90e8-e0f64f3c9d9f";
    let want = [
        r#"key: {"type":"1","data":{"group":"ivan-experimental-consumer","topic":"__consumer_offsets","partition":46}} payload: {"version":"3","data":{"offset":97507,"leaderEpoch":-1,"metadata":"","commitTimestamp":1672871009232}}"#.to_string(),
        r#"key: {"type":"1","data":{"group":"kafkesc-devcluster-group-id","topic":"t01","partition":0}} payload: {"version":"3","data":{"offset":106,"leaderEpoch":-1,"metadata":"","commitTimestamp":1672788047244}}"#.to_string(),
        format!(
            r#"key: {{"type":"2","data":{{"group":"kafkesc-devcluster-group-id"}}}} payload: {{"version":"3","data":{{"protocolType":"consumer","generation":7,"protocol":"range","leader":"{member}","currentStateTimestamp":1672870956437,"members":[{{"memberId":"{member}","groupInstanceId":null,"clientId":"rdkafka","clientHost":"/172.18.0.1","rebalanceTimeout":300000,"sessionTimeout":45000,"subscription":{{"topics":["t01"],"userData":"","ownedPartitions":[]}},"assignment":{{"assignedPartitions":[{{"topic":"t01","partitions":[0,1,2]}}],"userData":""}}}}]}}}}"#
        ),
        r#"key: {"type":"2","data":{"group":"kafkesc-devcluster-group-id"}} payload: {"version":"3","data":{"protocolType":"consumer","generation":8,"protocol":null,"leader":null,"currentStateTimestamp":1672870964792,"members":[]}}"#.to_string(),
    ];
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(lines.len(), want.len(), "{out}");
    for (i, ((line, w), (k, v))) in lines.iter().zip(&want).zip(&records).enumerate() {
        assert_eq!(*line, record_line(i as i64, k.as_deref(), v.as_deref(), w));
    }
    // The same text for the mount.
    let (k, v) = &records[0];
    assert_eq!(
        decode_internal_record("__consumer_offsets", 0, k.as_deref(), v.as_deref()).unwrap(),
        want[0]
    );
    assert_eq!(
        decode_internal_record("orders", 0, k.as_deref(), v.as_deref()),
        None
    );
}

/// Bytes of a non-flexible string.
fn s16(s: &str) -> Vec<u8> {
    let mut b = (s.len() as i16).to_be_bytes().to_vec();
    b.extend_from_slice(s.as_bytes());
    b
}

#[test]
fn offsets_decoder_prints_what_kafkas_own_tests_expect() {
    // ConsumerGroupMetadataKey (type 3) {groupId "group"}; value v0 {epoch 10},
    // flexible: int32 then an empty tagged-field section.
    let key3 = [3i16.to_be_bytes().to_vec(), s16("group")].concat();
    let value3 = vec![0, 0, 0, 0, 0, 10, 0];
    let unknown_key = i16::MAX.to_be_bytes().to_vec();
    let dir = tempfile::tempdir().unwrap();
    let path = segment(
        dir.path(),
        &[
            (Some(key3.clone()), Some(value3)),
            (Some(key3), None),
            (Some(unknown_key), Some(vec![])),
        ],
    );
    let (code, out, err) = dump(&["--offsets-decoder"], &[&path]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        contents(&out),
        [
            r#"key: {"type":"3","data":{"groupId":"group"}} payload: {"version":"0","data":{"epoch":10}}"#,
            r#"key: {"type":"3","data":{"groupId":"group"}} payload: <DELETE>"#,
            "key: Unknown record type 32767 at offset 2, skipping.",
        ]
    );
}

fn group_metadata_value(subscription: Vec<u8>, assignment: Vec<u8>) -> Vec<u8> {
    let vm = &group::GROUP_METADATA_VALUE;
    let member_struct = match vm.body.fields[5].ty {
        commitfs::record::schema::Type::Array(commitfs::record::schema::Type::Struct(s)) => s,
        _ => unreachable!(),
    };
    let mut m = StructValue::default_for(member_struct);
    let set = |m: &mut StructValue, n: &str, v: Value| assert!(m.set(member_struct, n, v));
    let s = |x: &str| Value::Str(Some(x.into()));
    set(&mut m, "memberId", s("member"));
    set(&mut m, "clientId", s("client"));
    set(&mut m, "clientHost", s("host"));
    set(&mut m, "groupInstanceId", s("instance"));
    set(&mut m, "sessionTimeout", Value::Int(100));
    set(&mut m, "rebalanceTimeout", Value::Int(1000));
    set(&mut m, "subscription", Value::Bytes(Some(subscription)));
    set(&mut m, "assignment", Value::Bytes(Some(assignment)));
    let mut v = StructValue::default_for(&vm.body);
    v.set(&vm.body, "protocolType", s("consumer"));
    v.set(&vm.body, "protocol", s("range"));
    v.set(&vm.body, "leader", s("member"));
    v.set(&vm.body, "generation", Value::Int(10));
    v.set(
        &vm.body,
        "members",
        Value::Array(Some(vec![Value::Struct(Some(m))])),
    );
    commitfs::record::internal::encode_coordinator_value(vm, 4, &v).unwrap()
}

/// Kafka's ConsumerProtocol bytes (int16 version 3, then the message), from
/// the kafka-protocol crate's encoder.
fn consumer_protocol_bytes() -> (Vec<u8>, Vec<u8>) {
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::messages::consumer_protocol_assignment::{
        ConsumerProtocolAssignment, TopicPartition as ATp,
    };
    use kafka_protocol::messages::consumer_protocol_subscription::{
        ConsumerProtocolSubscription, TopicPartition as STp,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let topic_foo = || TopicName(StrBytes::from_static_str("foo"));
    let sub = ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_static_str("foo")])
        .with_owned_partitions(vec![
            STp::default()
                .with_topic(topic_foo())
                .with_partitions(vec![0]),
        ])
        .with_generation_id(0)
        .with_rack_id(Some(StrBytes::from_static_str("rack")));
    let asg = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
        ATp::default()
            .with_topic(topic_foo())
            .with_partitions(vec![0]),
    ]);
    let mut s = 3i16.to_be_bytes().to_vec();
    sub.encode(&mut s, 3).unwrap();
    let mut a = 3i16.to_be_bytes().to_vec();
    asg.encode(&mut a, 3).unwrap();
    (s, a)
}

#[test]
fn group_metadata_with_the_consumer_protocol_as_kafkas_test_expects() {
    let key = [2i16.to_be_bytes().to_vec(), s16("group")].concat();
    let (sub, asg) = consumer_protocol_bytes();
    let good = group_metadata_value(sub, asg);
    let malformed = group_metadata_value(b"Subscription".to_vec(), b"Assignment".to_vec());
    let parse =
        |v: &[u8]| decode_internal_record("__consumer_offsets", 0, Some(&key), Some(v)).unwrap();
    // DumpLogSegmentsTest.testOffsetsMessageParser, both cases.
    assert_eq!(
        parse(&good),
        "key: {\"type\":\"2\",\"data\":{\"group\":\"group\"}} payload: {\"version\":\"4\",\"data\":{\"protocolType\":\"consumer\",\"generation\":10,\"protocol\":\"range\",\
         \"leader\":\"member\",\"currentStateTimestamp\":-1,\"members\":[{\"memberId\":\"member\",\
         \"groupInstanceId\":\"instance\",\"clientId\":\"client\",\"clientHost\":\"host\",\
         \"rebalanceTimeout\":1000,\"sessionTimeout\":100,\"subscription\":{\"topics\":[\"foo\"],\
         \"userData\":null,\"ownedPartitions\":[{\"topic\":\"foo\",\"partitions\":[0]}],\
         \"generationId\":0,\"rackId\":\"rack\"},\"assignment\":{\"assignedPartitions\":\
         [{\"topic\":\"foo\",\"partitions\":[0]}],\"userData\":null}}]}}"
    );
    assert_eq!(
        parse(&malformed),
        "key: {\"type\":\"2\",\"data\":{\"group\":\"group\"}} payload: {\"version\":\"4\",\"data\":{\"protocolType\":\"consumer\",\"generation\":10,\"protocol\":\"range\",\
         \"leader\":\"member\",\"currentStateTimestamp\":-1,\"members\":[{\"memberId\":\"member\",\
         \"groupInstanceId\":\"instance\",\"clientId\":\"client\",\"clientHost\":\"host\",\
         \"rebalanceTimeout\":1000,\"sessionTimeout\":100,\"subscription\":\"U3Vic2NyaXB0aW9u\",\
         \"assignment\":\"QXNzaWdubWVudA==\"}]}}"
    );
}

#[test]
fn transaction_log_decoder_as_kafkas_test_expects() {
    let key = [0i16.to_be_bytes().to_vec(), s16("txnId")].concat();
    // TransactionLogValue v0 {producerId 123}, every other field zero/empty:
    // int64, int16, int32, int8, int32 array count, int64, int64.
    let mut v0 = vec![0, 0];
    v0.extend_from_slice(&123i64.to_be_bytes());
    v0.extend_from_slice(&[0; 2 + 4 + 1 + 4 + 8 + 8]);
    // v1 with every field set, written by the encoder.
    let vm = &transaction::TRANSACTION_LOG_VALUE;
    let mut v = StructValue::default_for(&vm.body);
    let part_struct = match vm.body.fields[6].ty {
        commitfs::record::schema::Type::Array(commitfs::record::schema::Type::Struct(s)) => s,
        _ => unreachable!(),
    };
    let partitions = |topic: &str, ids: [i64; 3]| {
        let mut p = StructValue::default_for(part_struct);
        p.set(part_struct, "topic", Value::Str(Some(topic.into())));
        p.set(
            part_struct,
            "partitionIds",
            Value::Array(Some(ids.into_iter().map(Value::Int).collect())),
        );
        Value::Struct(Some(p))
    };
    for (n, x) in [
        ("clientTransactionVersion", 0),
        ("nextProducerId", 10),
        ("previousProducerId", 11),
        ("producerEpoch", 2),
        ("producerId", 12),
        ("transactionLastUpdateTimestampMs", 123),
        ("transactionStartTimestampMs", 13),
        ("transactionStatus", 0),
        ("transactionTimeoutMs", 14),
    ] {
        assert!(v.set(&vm.body, n, Value::Int(x)));
    }
    v.set(
        &vm.body,
        "transactionPartitions",
        Value::Array(Some(vec![
            partitions("topic1", [0, 1, 2]),
            partitions("topic2", [3, 4, 5]),
        ])),
    );
    let v1 = commitfs::record::internal::encode_coordinator_value(vm, 1, &v).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = segment(
        dir.path(),
        &[
            (Some(key.clone()), Some(v0)),
            (Some(key.clone()), Some(v1)),
            (Some(key), None),
        ],
    );
    let (code, out, err) = dump(&["--transaction-log-decoder"], &[&path]);
    assert_eq!(code, 0, "{err}");
    let k = r#"key: {"type":"0","data":{"transactionalId":"txnId"}}"#;
    assert_eq!(
        contents(&out),
        [
            format!(
                "{k} payload: {{\"version\":\"0\",\"data\":{{\"producerId\":123,\"producerEpoch\":0,\"transactionTimeoutMs\":0,\"transactionStatus\":0,\"transactionPartitions\":[],\"transactionLastUpdateTimestampMs\":0,\"transactionStartTimestampMs\":0}}}}"
            ),
            format!(
                "{k} payload: {{\"version\":\"1\",\"data\":{{\"producerId\":12,\"previousProducerId\":11,\"nextProducerId\":10,\"producerEpoch\":2,\"transactionTimeoutMs\":14,\"transactionStatus\":0,\"transactionPartitions\":[{{\"topic\":\"topic1\",\"partitionIds\":[0,1,2]}},{{\"topic\":\"topic2\",\"partitionIds\":[3,4,5]}}],\"transactionLastUpdateTimestampMs\":123,\"transactionStartTimestampMs\":13}}}}"
            ),
            format!("{k} payload: <DELETE>"),
        ]
    );
}

/// Bytes of Kafka's wire types, written here from the message specs
/// (independently of the schema engine under test).
#[derive(Default)]
struct Wire(Vec<u8>);

impl Wire {
    fn i8(mut self, v: i8) -> Self {
        self.0.push(v as u8);
        self
    }
    fn i16(mut self, v: i16) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn i32(mut self, v: i32) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn i64(mut self, v: i64) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn raw(mut self, b: &[u8]) -> Self {
        self.0.extend(b);
        self
    }
    /// An unsigned varint (compact lengths, tag counts, tags, tag sizes).
    fn uvarint(mut self, mut v: u32) -> Self {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }
    /// A flexible (compact) string: unsigned varint length + 1, then UTF-8.
    fn compact_string(self, s: &str) -> Self {
        self.uvarint(s.len() as u32 + 1).raw(s.as_bytes())
    }
    /// A non-flexible string: int16 length, then UTF-8.
    fn string(self, s: &str) -> Self {
        self.i16(s.len() as i16).raw(s.as_bytes())
    }
}

/// `__share_group_state` records (the share coordinator's ShareSnapshot and
/// ShareUpdate records), as `DumpLogSegments --share-group-state-decoder`
/// (`ShareGroupStateMessageParser`) prints them: the key's record type and
/// the value's version as strings, then each message's JSON.
#[test]
fn share_group_state_decoder_prints_snapshots_and_updates() {
    let topic_id: Vec<u8> = (0u8..16).collect();
    // ShareSnapshotKey / ShareUpdateKey: int16 record type, GroupId, TopicId, Partition.
    let key = |record_type: i16| {
        Wire::default()
            .i16(record_type)
            .string("share-group")
            .raw(&topic_id)
            .i32(3)
            .0
    };
    // One StateBatch (flexible: ends with an empty tagged-field section).
    let batch = |w: Wire, first: i64, last: i64, state: i8, count: i16| {
        w.i64(first).i64(last).i8(state).i16(count).uvarint(0)
    };
    // ShareSnapshotValue v0: SnapshotEpoch, StateEpoch, LeaderEpoch,
    // StartOffset, CreateTimestamp, WriteTimestamp, StateBatches; no tagged fields.
    let snapshot = Wire::default()
        .i16(0)
        .i32(1)
        .i32(2)
        .i32(5)
        .i64(100)
        .i64(1_700_000_000_001)
        .i64(1_700_000_000_002)
        .uvarint(2 + 1);
    let snapshot = batch(snapshot, 100, 109, 2, 1);
    let snapshot = batch(snapshot, 110, 119, 0, 3).uvarint(0).0;
    // ShareUpdateValue v0: SnapshotEpoch, LeaderEpoch, StartOffset,
    // StateBatches, then tagged field 0 (DeliveryCompleteCount) = 4.
    let update = Wire::default().i16(0).i32(1).i32(6).i64(110).uvarint(1 + 1);
    let update = batch(update, 110, 112, 4, 2)
        .uvarint(1)
        .uvarint(0)
        .uvarint(4)
        .i32(4)
        .0;
    let dir = tempfile::tempdir().unwrap();
    let records = [
        (Some(key(0)), Some(snapshot)),
        (Some(key(1)), Some(update)),
        (Some(key(1)), None),
        (
            Some(Wire::default().i16(2).0),
            Some(Wire::default().i16(0).0),
        ),
    ];
    let path = segment(dir.path(), &records);
    let (code, out, err) = dump(&["--share-group-state-decoder"], &[&path]);
    assert_eq!(code, 0, "{err}");
    let k = |t: &str| {
        format!(
            r#"key: {{"type":"{t}","data":{{"groupId":"share-group","topicId":"AAECAwQFBgcICQoLDA0ODw","partition":3}}}}"#
        )
    };
    let want = [
        format!(
            r#"{} payload: {{"version":"0","data":{{"snapshotEpoch":1,"stateEpoch":2,"leaderEpoch":5,"startOffset":100,"createTimestamp":1700000000001,"writeTimestamp":1700000000002,"stateBatches":[{{"firstOffset":100,"lastOffset":109,"deliveryState":2,"deliveryCount":1}},{{"firstOffset":110,"lastOffset":119,"deliveryState":0,"deliveryCount":3}}]}}}}"#,
            k("0")
        ),
        format!(
            r#"{} payload: {{"version":"0","data":{{"snapshotEpoch":1,"leaderEpoch":6,"startOffset":110,"deliveryCompleteCount":4,"stateBatches":[{{"firstOffset":110,"lastOffset":112,"deliveryState":4,"deliveryCount":2}}]}}}}"#,
            k("1")
        ),
        format!("{} payload: <DELETE>", k("1")),
        "key: Unknown record type 2 at offset 3, skipping.".to_string(),
    ];
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(lines.len(), want.len(), "{out}");
    for (i, ((line, w), (k, v))) in lines.iter().zip(&want).zip(&records).enumerate() {
        assert_eq!(*line, record_line(i as i64, k.as_deref(), v.as_deref(), w));
    }
}

/// `__remote_log_metadata` records, as `DumpLogSegments
/// --remote-log-metadata-decoder` (`RemoteMetadataLogMessageParser`) prints
/// them: no key, and the payload is the Java `toString()` of the object
/// `RemoteLogMetadataSerde` makes of the value; what Kafka refuses is
/// reported as `Error at offset N, skipping. <exception message>`.
#[test]
fn remote_log_metadata_decoder_prints_what_kafka_deserializes() {
    let topic_id: Vec<u8> = (0u8..16).collect();
    let segment_id: Vec<u8> = (16u8..32).collect();
    // The value's frame: frame version 1, record type (apiKey), version 0.
    let frame = |api_key: u32| Wire::default().uvarint(1).uvarint(api_key).uvarint(0);
    // TopicIdPartitionEntry: Name, Id, Partition, no tagged fields.
    let topic_partition = |w: Wire| w.compact_string("orders").raw(&topic_id).i32(2).uvarint(0);
    // RemoteLogSegmentIdEntry: TopicIdPartition, Id, no tagged fields.
    let segment_id_entry = |w: Wire| topic_partition(w).raw(&segment_id).uvarint(0);
    // SegmentLeaderEpochs: a compact array of (LeaderEpoch, Offset).
    let epochs = |w: Wire, entries: &[(i32, i64)]| {
        entries
            .iter()
            .fold(w.uvarint(entries.len() as u32 + 1), |w, &(e, o)| {
                w.i32(e).i64(o).uvarint(0)
            })
    };
    // RemoteLogSegmentMetadataRecord (0): StartOffset, EndOffset, BrokerId,
    // MaxTimestampMs, EventTimestampMs, SegmentLeaderEpochs (epoch 3 before
    // 1), SegmentSizeInBytes, CustomMetadata (null), RemoteLogSegmentState,
    // then tagged field 0, TxnIndexEmpty = true.
    let metadata = |state: i8| {
        let w = segment_id_entry(frame(0))
            .i64(100)
            .i64(199)
            .i32(1)
            .i64(1_700_000_000_100)
            .i64(1_700_000_000_200);
        epochs(w, &[(3, 150), (1, 100)])
            .i32(4096)
            .uvarint(0)
            .i8(state)
            .uvarint(1)
            .uvarint(0)
            .uvarint(1)
            .i8(1)
            .0
    };
    // RemoteLogSegmentMetadataUpdateRecord (1): BrokerId, EventTimestampMs,
    // CustomMetadata (3 bytes), RemoteLogSegmentState 1.
    let update = segment_id_entry(frame(1))
        .i32(1)
        .i64(1_700_000_000_300)
        .uvarint(3 + 1)
        .raw(b"rsm")
        .i8(1)
        .uvarint(0)
        .0;
    // RemotePartitionDeleteMetadataRecord (2): TopicIdPartition, BrokerId,
    // EventTimestampMs, RemotePartitionDeleteState 0.
    let delete = topic_partition(frame(2))
        .i32(1)
        .i64(1_700_000_000_400)
        .i8(0)
        .uvarint(0)
        .0;
    // RemoteLogSegmentMetadataSnapshotRecord (3): SegmentId, StartOffset,
    // EndOffset, BrokerId, MaxTimestampMs, EventTimestampMs, epochs,
    // SegmentSizeInBytes, CustomMetadata (null), RemoteLogSegmentState 3.
    let w = frame(3)
        .raw(&segment_id)
        .i64(0)
        .i64(99)
        .i32(2)
        .i64(1_700_000_000_010)
        .i64(1_700_000_000_020);
    let snapshot = epochs(w, &[(0, 0)]).i32(1024).uvarint(0).i8(3).uvarint(0).0;
    let records = [
        (None, Some(metadata(0))),
        (None, Some(update)),
        (None, Some(delete)),
        (None, Some(snapshot)),
        // A segment state Kafka does not know.
        (None, Some(metadata(9))),
        // A record type Kafka does not know.
        (None, Some(frame(7).0)),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = segment(dir.path(), &records);
    let (code, out, err) = dump(&["--remote-log-metadata-decoder"], &[&path]);
    assert_eq!(code, 0, "{err}");
    let tp = "AAECAwQFBgcICQoLDA0ODw:orders-2";
    let seg = "EBESExQVFhcYGRobHB0eHw";
    let want = [
        format!(
            "payload: RemoteLogSegmentMetadata{{remoteLogSegmentId=RemoteLogSegmentId{{topicIdPartition={tp}, id={seg}}}, startOffset=100, endOffset=199, brokerId=1, maxTimestampMs=1700000000100, eventTimestampMs=1700000000200, segmentLeaderEpochs={{1=100, 3=150}}, segmentSizeInBytes=4096, customMetadata=Optional.empty, state=COPY_SEGMENT_STARTED, txnIdxEmpty=true}}"
        ),
        format!(
            "payload: RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId=RemoteLogSegmentId{{topicIdPartition={tp}, id={seg}}}, customMetadata=Optional[CustomMetadata{{3 bytes}}], state=COPY_SEGMENT_FINISHED, eventTimestampMs=1700000000300, brokerId=1}}"
        ),
        format!(
            "payload: RemotePartitionDeleteMetadata{{topicPartition={tp}, state=DELETE_PARTITION_MARKED, eventTimestampMs=1700000000400, brokerId=1}}"
        ),
        format!(
            "payload: RemoteLogSegmentMetadataSnapshot{{segmentId={seg}, startOffset=0, endOffset=99, maxTimestampMs=1700000000010, segmentLeaderEpochs={{0=0}}, segmentSizeInBytes=1024, customMetadata=Optional.empty, state=DELETE_SEGMENT_FINISHED}}"
        ),
        "payload: Error at offset 4, skipping. state can not be null".to_string(),
        "payload: Error at offset 5, skipping. org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id 7".to_string(),
    ];
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(lines.len(), want.len(), "{out}");
    for (i, ((line, w), (k, v))) in lines.iter().zip(&want).zip(&records).enumerate() {
        let k: &Option<Vec<u8>> = k;
        assert_eq!(*line, record_line(i as i64, k.as_deref(), v.as_deref(), w));
    }
}
