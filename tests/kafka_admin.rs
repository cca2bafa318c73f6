//! The admin APIs do what the tree's `mkdir`, `rmdir`, `delete-records` and
//! `config/<name>` do, through the same storage calls; a read-only listener
//! serves reads and refuses every write with a clear error.

mod kafka_support;

use bytes::Bytes;
use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions, StorageError};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsRequest, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsResponse;
use kafka_protocol::messages::create_topics_request::CreateTopicsRequest;
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_records_response::DeleteRecordsResponse;
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::DeleteTopicsResponse;
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResponse;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response::IncrementalAlterConfigsResponse;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_support::{Conn, Server, requests};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn name(v: &str) -> TopicName {
    TopicName(s(v))
}

fn create(n: &str, partitions: i32, configs: &[(&str, &str)]) -> CreateTopicsRequest {
    CreateTopicsRequest::default().with_topics(vec![
        requests::creatable(n, partitions)
            .with_replication_factor(1)
            .with_configs(requests::topic_configs(configs)),
    ])
}

fn list_offsets(t: &str, ts: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default().with_topics(vec![
        ListOffsetsTopic::default()
            .with_name(name(t))
            .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(ts)]),
    ])
}

fn offset_at(c: &mut Conn, t: &str, ts: i64) -> (i16, i64) {
    let r: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 7, &list_offsets(t, ts));
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset)
}

fn delete_records(t: &str, offset: i64) -> DeleteRecordsRequest {
    DeleteRecordsRequest::default().with_topics(vec![
        DeleteRecordsTopic::default()
            .with_name(name(t))
            .with_partitions(vec![DeleteRecordsPartition::default().with_offset(offset)]),
    ])
}

fn alter(t: &str, k: &str, v: &str) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(t))
            .with_configs(vec![
                AlterableConfig::default()
                    .with_name(s(k))
                    .with_config_operation(0)
                    .with_value(Some(s(v))),
            ]),
    ])
}

fn produce(t: &str, records: Vec<u8>) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(t))
                .with_partition_data(vec![
                    PartitionProduceData::default().with_records(Some(Bytes::from(records))),
                ]),
        ])
}

#[test]
fn the_tree_refuses_holes_in_partition_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = LogManager::open(tmp.path(), LogConfig::default(), OpenOptions::default()).unwrap();
    assert!(matches!(
        mgr.create_partition("t-1"),
        Err(StorageError::PartitionGap { .. })
    ));
    mgr.create_partition("t-0").unwrap();
    mgr.create_partition("t-1").unwrap();
    assert!(matches!(
        mgr.delete_partition("t-0"),
        Err(StorageError::PartitionGap { .. })
    ));
    mgr.delete_partition("t-1").unwrap();
    mgr.delete_partition("t-0").unwrap();
    mgr.create_partition("a.b-0").unwrap();
    assert!(matches!(
        mgr.create_partition("a_b-0"),
        Err(StorageError::TopicCollision { .. })
    ));
    mgr.close().unwrap();
}

#[test]
fn admin_apis_do_what_the_tree_does() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &[]);
    let mut c = Conn::new(&server.addr);
    let r: CreateTopicsResponse = c.call(
        ApiKey::CreateTopics,
        7,
        &create("orders", 3, &[("segment.bytes", "1048576")]),
    );
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    for p in 0..3 {
        let props = std::fs::read_to_string(data.join(format!("orders-{p}/commitfs.properties")));
        assert_eq!(props.unwrap(), "segment.bytes=1048576\n");
    }
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &create("orders", 1, &[]));
    assert_eq!(r.topics[0].error_code, 36, "TOPIC_ALREADY_EXISTS");

    let r: IncrementalAlterConfigsResponse = c.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        &alter("orders", "retention.ms", "86400000"),
    );
    assert_eq!(r.responses[0].error_code, 0);
    let props = std::fs::read_to_string(data.join("orders-2/commitfs.properties")).unwrap();
    assert!(props.contains("retention.ms=86400000"), "{props}");
    let r: IncrementalAlterConfigsResponse = c.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        &alter("orders", "segment.bytes", "10"),
    );
    assert_eq!(r.responses[0].error_code, 40, "INVALID_CONFIG");
    let describe = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("orders"))
            .with_configuration_keys(Some(vec![s("retention.ms"), s("max.message.bytes")])),
    ]);
    let r: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &describe);
    let entries = &r.results[0].configs;
    assert_eq!(entries.len(), 2);
    let retention = entries
        .iter()
        .find(|e| e.name.as_str() == "retention.ms")
        .unwrap();
    assert_eq!(retention.value.as_deref(), Some("86400000"));
    assert_eq!(retention.config_source, 1, "DYNAMIC_TOPIC_CONFIG");

    // Records in, then DeleteRecords moves the log start offset as the tree's file does.
    let mut batch = Vec::new();
    let recs: Vec<NewRecord> = (0..10).map(|_| NewRecord::value(b"x")).collect();
    commitfs::record::encode_batch(&mut batch, 0, 1_700_000_000_000, &recs);
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &produce("orders", batch));
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(offset_at(&mut c, "orders", -1), (0, 10));
    let r: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, 2, &delete_records("orders", 4));
    assert_eq!(r.topics[0].partitions[0].low_watermark, 4);
    assert_eq!(offset_at(&mut c, "orders", -2), (0, 4));
    let ckpt = std::fs::read_to_string(data.join("log-start-offset-checkpoint")).unwrap();
    assert!(ckpt.contains("orders 0 4"), "{ckpt}");
    assert_eq!(offset_at(&mut c, "orders", 1_700_000_000_000), (0, 4));

    let del = DeleteTopicsRequest::default().with_topic_names(vec![name("orders")]);
    let r: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 5, &del);
    assert_eq!(r.responses[0].error_code, 0);
    assert!(!data.join("orders-0").exists() && !data.join("orders-2").exists());
    let r: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 5, &del);
    assert_eq!(r.responses[0].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
}

#[test]
fn a_read_only_listener_serves_reads_and_refuses_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("t-0").unwrap();
    log.append(&[NewRecord::value(b"a"), NewRecord::value(b"b")])
        .unwrap();
    drop(log);
    mgr.close().unwrap();
    let before = kafka_support::snapshot(&data);
    let server = Server::start(&data, &["ro"]);
    let mut c = Conn::new(&server.addr);
    let r: MetadataResponse = c.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
    );
    assert_eq!(r.topics.len(), 1);
    assert_eq!(offset_at(&mut c, "t", -1), (0, 2));
    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name("t"))
                .with_partitions(vec![
                    FetchPartition::default().with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let r: FetchResponse = c.call(ApiKey::Fetch, 12, &fetch);
    let records = r.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(
        &records[..],
        &std::fs::read(data.join("t-0/00000000000000000000.log")).unwrap()[..]
    );

    let mut batch = Vec::new();
    commitfs::record::encode_batch(&mut batch, 0, 1, &[NewRecord::value(b"c")]);
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &produce("t", batch));
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 29, "TOPIC_AUTHORIZATION_FAILED");
    assert!(
        p.error_message
            .as_deref()
            .unwrap_or_default()
            .contains("read-only")
    );
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &create("n", 1, &[]));
    assert_eq!(r.topics[0].error_code, 29);
    let del = DeleteTopicsRequest::default().with_topic_names(vec![name("t")]);
    let r: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 5, &del);
    assert_eq!(r.responses[0].error_code, 29);
    let r: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, 2, &delete_records("t", 1));
    assert_eq!(r.topics[0].partitions[0].error_code, 29);
    let r: IncrementalAlterConfigsResponse = c.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        &alter("t", "retention.ms", "1"),
    );
    assert_eq!(r.responses[0].error_code, 29);
    drop(server);
    assert_eq!(
        kafka_support::snapshot(&data),
        before,
        "a read-only listener changed the data dir"
    );
}

fn grow(t: &str, count: i32) -> CreatePartitionsRequest {
    CreatePartitionsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![
            CreatePartitionsTopic::default()
                .with_name(name(t))
                .with_count(count),
        ])
}

#[test]
fn create_partitions_grows_a_topic_without_holes() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &[]);
    let mut c = Conn::new(&server.addr);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &create("g", 1, &[]));
    assert_eq!(r.topics[0].error_code, 0);
    let r: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 3, &grow("g", 3));
    assert_eq!(
        r.results[0].error_code, 0,
        "{:?}",
        r.results[0].error_message
    );
    for p in 0..3 {
        assert!(data.join(format!("g-{p}")).is_dir(), "g-{p}");
    }
    let r: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 3, &grow("g", 2));
    assert_eq!(r.results[0].error_code, 37, "INVALID_PARTITIONS");
    let r: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 0, &grow("none", 2));
    assert_eq!(r.results[0].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    let validate = grow("g", 5).with_validate_only(true);
    let r: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 3, &validate);
    assert_eq!(r.results[0].error_code, 0);
    assert!(!data.join("g-3").exists(), "validate_only created nothing");
}
