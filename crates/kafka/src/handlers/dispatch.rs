//! From a request frame to response bytes: the header, the version check,
//! the body, the handler, the encoding.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use log::debug;

use super::{delete_records, fetch, list_offsets, metadata, produce, sasl, topic_configs, topics};
use crate::acl::{Operation, ResourceType};
use crate::broker::Broker;
use crate::error::Refusal;
use crate::handlers::outcome::DelayedOperation;
pub use crate::handlers::outcome::Outcome;
use crate::handlers::versions::{api_name, api_versions, served};
use crate::network::session::Session;
use crate::network::splice::SpliceBuf;
use crate::{acl, auth, group, txn};
use commitfs_storage::SegmentSlice;

/// What one request came to.
pub enum Handled {
    /// A response to write, or `None`: nothing to send (acks=0).
    Reply(Option<Encoded>),
    /// A Fetch waiting for data; the server keeps it, holding no thread,
    /// and calls [`Parked::retry`] after an append or at its deadline.
    Parked(Parked),
}

/// A parked Fetch with what its response needs.
pub struct Parked {
    correlation_id: i32,
    version: i16,
    wait: Box<dyn DelayedOperation>,
}

impl Parked {
    pub fn deadline(&self) -> std::time::Instant {
        self.wait.deadline()
    }

    /// The append generation its last read saw: read again once it moved.
    pub fn seen(&self) -> u64 {
        self.wait.seen()
    }

    pub fn retry(self, broker: &Broker) -> Result<Handled, Refusal> {
        let (correlation_id, version) = (self.correlation_id, self.version);
        finish_outcome(
            ApiKey::Fetch,
            version,
            correlation_id,
            self.wait.retry(broker),
        )
    }
}

/// A response ready to be written: its size prefix, and its bytes.
pub struct Encoded {
    pub prefix: [u8; 4],
    pub body: SpliceBuf,
}

fn malformed(key: ApiKey, version: i16, what: &str, e: impl std::fmt::Display) -> Refusal {
    Refusal::Malformed {
        what: format!("{} v{version} {what}", api_name(key)),
        reason: e.to_string(),
    }
}

/// Decodes, handles and encodes one request.
pub fn handle_frame(broker: &Broker, session: &Session, frame: Bytes) -> Result<Handled, Refusal> {
    if frame.len() < 4 {
        return Err(Refusal::ShortHeader(frame.len()));
    }
    // The key and version say which header version to decode, so they are
    // looked at first, as Kafka's RequestHeader.parse does.
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let key = ApiKey::try_from(raw_key).map_err(|_| Refusal::UnknownApi(raw_key))?;
    let Some(api) = served(key) else {
        return Err(Refusal::UnknownApi(raw_key));
    };
    let mut buf = frame;
    let header = RequestHeader::decode(&mut buf, key.request_header_version(version))
        .map_err(|e| malformed(key, version, "request header", e))?;
    let correlation_id = header.correlation_id;
    if key == ApiKey::ApiVersions && version > api.max {
        // Kafka answers an ApiVersions it does not know at v0, with its list,
        // so the client can retry with a version from it.
        debug!(
            "ApiVersions v{version} from {:?}: answering v0",
            header.client_id
        );
        let body = ResponseKind::ApiVersions(api_versions(false));
        return encode_response(key, 0, correlation_id, body).map(|e| Handled::Reply(Some(e)));
    }
    if version < api.served_min || version > api.max {
        return Err(Refusal::UnsupportedVersion {
            api: api_name(key),
            version,
            min: api.served_min,
            max: api.max,
        });
    }
    let request = RequestKind::decode(key, &mut buf, version)
        .map_err(|e| malformed(key, version, "request", e))?;
    debug!(
        "{} v{version} correlation {correlation_id} from {:?}",
        api_name(key),
        header.client_id.as_deref()
    );
    finish_outcome(
        key,
        version,
        correlation_id,
        route(broker, session, &header, request),
    )
}

fn finish_outcome(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    outcome: Outcome,
) -> Result<Handled, Refusal> {
    let reply = |e: Encoded| Handled::Reply(Some(e));
    match outcome {
        Outcome::Respond(body) => encode_response(key, version, correlation_id, body).map(reply),
        Outcome::Fetch(body, slices) => {
            encode_fetch(version, correlation_id, body, slices).map(reply)
        }
        Outcome::Silent => Ok(Handled::Reply(None)),
        Outcome::Close(why) => Err(Refusal::Other(why)),
        Outcome::Wait(wait) => Ok(Handled::Parked(Parked {
            correlation_id,
            version,
            wait,
        })),
    }
}

const TOPIC: ResourceType = ResourceType::Topic;

fn route(b: &Broker, session: &Session, h: &RequestHeader, request: RequestKind) -> Outcome {
    let v = h.request_api_version;
    let respond = |r: ResponseKind| Outcome::Respond(r);
    match request {
        RequestKind::ApiVersions(_) => respond(ResponseKind::ApiVersions(api_versions(true))),
        RequestKind::Metadata(r) => {
            respond(ResponseKind::Metadata(metadata::handle(b, session, v, r)))
        }
        RequestKind::Produce(r) => produce::handle(b, session, v, r),
        RequestKind::Fetch(r) => fetch::handle(b, session, v, r),
        RequestKind::ListOffsets(r) => respond(ResponseKind::ListOffsets(list_offsets::handle(
            b, session, v, r,
        ))),
        RequestKind::CreateTopics(r) => {
            respond(ResponseKind::CreateTopics(topics::create(b, v, r, &|t| {
                may_create(b, session, t)
            })))
        }
        RequestKind::CreatePartitions(r) => respond(ResponseKind::CreatePartitions(
            topics::create_partitions(b, r, &|t| {
                acl::allowed(b, session, Operation::Alter, TOPIC, t)
            }),
        )),
        RequestKind::DeleteTopics(r) => {
            respond(ResponseKind::DeleteTopics(topics::delete(b, v, r, &|t| {
                acl::allowed(b, session, Operation::Delete, TOPIC, t)
            })))
        }
        RequestKind::DeleteRecords(r) => respond(ResponseKind::DeleteRecords(
            delete_records::handle(b, r, &|t| {
                acl::allowed(b, session, Operation::Delete, TOPIC, t)
            }),
        )),
        RequestKind::DescribeConfigs(r) => respond(ResponseKind::DescribeConfigs(
            topic_configs::describe(b, v, r, &|rt, n| {
                acl::config_resource(b, session, Operation::DescribeConfigs, rt, n)
            }),
        )),
        RequestKind::IncrementalAlterConfigs(r) => respond(ResponseKind::IncrementalAlterConfigs(
            topic_configs::alter(b, r, &|rt, n| {
                acl::config_resource(b, session, Operation::AlterConfigs, rt, n)
            }),
        )),
        RequestKind::AlterConfigs(r) => respond(ResponseKind::AlterConfigs(
            topic_configs::replace(b, r, &|rt, n| {
                acl::config_resource(b, session, Operation::AlterConfigs, rt, n)
            }),
        )),
        RequestKind::DescribeUserScramCredentials(r) => respond(
            ResponseKind::DescribeUserScramCredentials(auth::admin::describe(b, session, r)),
        ),
        RequestKind::AlterUserScramCredentials(r) => respond(
            ResponseKind::AlterUserScramCredentials(auth::admin::alter(b, session, r)),
        ),
        RequestKind::CreateAcls(r) => {
            respond(ResponseKind::CreateAcls(acl::api::create(b, session, r)))
        }
        RequestKind::DescribeAcls(r) => respond(ResponseKind::DescribeAcls(acl::api::describe(
            b, session, r,
        ))),
        RequestKind::DeleteAcls(r) => {
            respond(ResponseKind::DeleteAcls(acl::api::delete(b, session, r)))
        }
        RequestKind::SaslHandshake(_) => respond(ResponseKind::SaslHandshake(sasl::handshake())),
        RequestKind::SaslAuthenticate(_) => {
            respond(ResponseKind::SaslAuthenticate(sasl::authenticate()))
        }
        RequestKind::AddPartitionsToTxn(r) => respond(ResponseKind::AddPartitionsToTxn(
            txn::api::add_partitions(b, session, v, r),
        )),
        RequestKind::EndTxn(r) => {
            respond(ResponseKind::EndTxn(txn::api::end_txn(b, session, v, r)))
        }
        RequestKind::DescribeTransactions(r) => respond(ResponseKind::DescribeTransactions(
            txn::api::describe(b, session, r),
        )),
        RequestKind::ListTransactions(r) => respond(ResponseKind::ListTransactions(
            txn::api::list(b, session, v, r),
        )),
        RequestKind::AddOffsetsToTxn(r) => respond(ResponseKind::AddOffsetsToTxn(
            txn::api::add_offsets(b, session, v, r),
        )),
        RequestKind::TxnOffsetCommit(r) => respond(ResponseKind::TxnOffsetCommit(
            txn::api::txn_offset_commit(b, session, v, r),
        )),
        other => group::handle(b, session, v, h.client_id.as_deref().unwrap_or(""), other),
    }
}

/// CreateTopics' check: CREATE on the cluster, else on the topic.
fn may_create(b: &Broker, session: &Session, topic: &str) -> bool {
    acl::allowed_quietly(
        b,
        session,
        Operation::Create,
        ResourceType::Cluster,
        acl::CLUSTER_NAME,
    ) || acl::allowed(b, session, Operation::Create, TOPIC, topic)
}

/// A response with its header, ready to write.
pub fn encode_response(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: ResponseKind,
) -> Result<Encoded, Refusal> {
    let mut buf = BytesMut::with_capacity(256);
    let failed = |e| encode_failed(api_name(key), version, e);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, key.response_header_version(version))
        .map_err(failed)?;
    body.encode(&mut buf, version).map_err(failed)?;
    finish(SpliceBuf::from_bytes(buf.to_vec()))
}

fn encode_fetch(
    version: i16,
    correlation_id: i32,
    body: FetchResponse,
    slices: Vec<SegmentSlice>,
) -> Result<Encoded, Refusal> {
    let mut buf = SpliceBuf::new(slices);
    let failed = |e| encode_failed("Fetch", version, e);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, ApiKey::Fetch.response_header_version(version))
        .map_err(failed)?;
    body.encode(&mut buf, version).map_err(failed)?;
    if !buf.complete() {
        return Err(Refusal::Other(
            "a Fetch response lost track of its record bytes".to_string(),
        ));
    }
    finish(buf)
}

fn encode_failed(api: &str, version: i16, e: impl std::fmt::Display) -> Refusal {
    Refusal::Other(format!(
        "could not encode the {api} v{version} response: {e}"
    ))
}

fn finish(body: SpliceBuf) -> Result<Encoded, Refusal> {
    let size = i32::try_from(body.len())
        .map_err(|_| Refusal::Other(format!("a response of {} bytes is too large", body.len())))?;
    Ok(Encoded {
        prefix: size.to_be_bytes(),
        body,
    })
}
