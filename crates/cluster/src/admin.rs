//! The admin side: Metadata, CreateTopics, CreatePartitions, DeleteTopics,
//! DeleteRecords, DescribeConfigs and IncrementalAlterConfigs, each one
//! request bounded by the request timeout.
//!
//! rdkafka's admin calls return futures that its own polling thread
//! completes; they are waited for here with a plain park/unpark waker, so
//! no async runtime is needed. IncrementalAlterConfigs has no safe wrapper
//! in rdkafka 0.39, so it is called through librdkafka's C API in
//! [`incremental_alter`] (the same API kcat and confluent-kafka use).

use std::ffi::{CStr, CString};
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use rdkafka::TopicPartitionList;
use rdkafka::admin::{
    AdminClient, AdminOptions, NewPartitions, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::bindings as rdsys;
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode as Code;
use rdkafka::metadata::Metadata;

use super::error;
use commitfs_backend::{BackendError, BackendResult, ErrorKind};

pub struct Admin {
    client: AdminClient<DefaultClientContext>,
    timeout: Duration,
}

struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `f` to completion on this thread, or gives up at `timeout`.
pub fn block_on<F: Future>(f: F, timeout: Duration) -> Option<F::Output> {
    let deadline = Instant::now() + timeout;
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return Some(out);
        }
        let left = deadline.checked_duration_since(Instant::now())?;
        std::thread::park_timeout(left);
    }
}

/// A topic's partitions as Metadata gives them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionMeta {
    pub id: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    pub partitions: Vec<PartitionMeta>,
}

/// The topics of a Metadata answer, but those the cluster says it does not
/// have (a topic asked for by name comes back with an error).
pub fn topics_of(md: &Metadata) -> Vec<TopicMeta> {
    md.topics()
        .iter()
        .filter(|t| t.error().is_none())
        .map(|t| {
            let mut partitions: Vec<PartitionMeta> = t
                .partitions()
                .iter()
                .map(|p| PartitionMeta {
                    id: p.id(),
                    leader: p.leader(),
                    replicas: p.replicas().to_vec(),
                    isr: p.isr().to_vec(),
                })
                .collect();
            partitions.sort_by_key(|p| p.id);
            TopicMeta {
                name: t.name().to_string(),
                partitions,
            }
        })
        .collect()
}

impl Admin {
    pub fn new(client: AdminClient<DefaultClientContext>, timeout: Duration) -> Self {
        Admin { client, timeout }
    }

    pub(super) fn client(&self) -> &AdminClient<DefaultClientContext> {
        &self.client
    }

    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    fn options(&self) -> AdminOptions {
        AdminOptions::new()
            .request_timeout(Some(self.timeout))
            .operation_timeout(Some(self.timeout))
    }

    /// Waits for an admin future a little past the request timeout: the
    /// client answers a timed-out request itself, and this is the backstop.
    fn wait<T>(
        &self,
        what: &str,
        f: impl Future<Output = rdkafka::error::KafkaResult<T>>,
    ) -> BackendResult<T> {
        match block_on(f, self.timeout + Duration::from_secs(1)) {
            None => Err(error::timed_out(what, self.timeout)),
            Some(Err(e)) => Err(error::client(what, &e)),
            Some(Ok(v)) => Ok(v),
        }
    }

    /// Metadata of one topic (`None`: every topic).
    pub fn metadata(&self, topic: Option<&str>) -> BackendResult<Vec<TopicMeta>> {
        let md = self
            .client
            .inner()
            .fetch_metadata(topic, self.timeout)
            .map_err(|e| error::client("Metadata", &e))?;
        Ok(topics_of(&md))
    }

    pub fn create_topic(&self, topic: &str, replication: i32) -> BackendResult<()> {
        let what = format!("CreateTopics {topic} (1 partition)");
        let new = NewTopic::new(topic, 1, TopicReplication::Fixed(replication));
        let results = self.wait(&what, self.client.create_topics([&new], &self.options()))?;
        one_result(&what, results)
    }

    /// Grows `topic` to `count` partitions.
    pub fn create_partitions(&self, topic: &str, count: usize) -> BackendResult<()> {
        let what = format!("CreatePartitions {topic} to {count} partitions");
        let new = NewPartitions::new(topic, count);
        let results = self.wait(
            &what,
            self.client.create_partitions([&new], &self.options()),
        )?;
        one_result(&what, results)
    }

    pub fn delete_topic(&self, topic: &str) -> BackendResult<()> {
        let what = format!("DeleteTopics {topic}");
        let results = self.wait(&what, self.client.delete_topics(&[topic], &self.options()))?;
        one_result(&what, results)
    }

    /// Moves the log start of a partition up to `offset`; returns the new
    /// log start (the low watermark the leader reports).
    pub fn delete_records(&self, topic: &str, partition: i32, offset: i64) -> BackendResult<i64> {
        let what = format!("DeleteRecords {topic}-{partition} before {offset}");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, rdkafka::Offset::Offset(offset))
            .map_err(|e| error::client(&what, &e))?;
        let out = self.wait(&what, self.client.delete_records(&tpl, &self.options()))?;
        let e = out
            .find_partition(topic, partition)
            .ok_or_else(|| BackendError::new(ErrorKind::Io, format!("{what}: no result")))?;
        if let Err(err) = e.error() {
            return Err(error::client(&what, &err));
        }
        Ok(e.offset().to_raw().unwrap_or(offset))
    }

    /// The topic's configs: (name, value), `None` for a value the broker
    /// keeps secret or has none of.
    pub fn describe_configs(&self, topic: &str) -> BackendResult<Vec<(String, Option<String>)>> {
        let what = format!("DescribeConfigs {topic}");
        let spec = ResourceSpecifier::Topic(topic);
        let results = self.wait(
            &what,
            self.client.describe_configs([&spec], &self.options()),
        )?;
        let resource = results
            .into_iter()
            .next()
            .ok_or_else(|| BackendError::new(ErrorKind::Io, format!("{what}: no result")))?
            .map_err(|code| error::code(&what, code, None))?;
        Ok(resource
            .entries
            .into_iter()
            .map(|e| (e.name, e.value))
            .collect())
    }

    /// Sets one config of `topic` (an empty value deletes the override).
    pub fn alter_config(&self, topic: &str, name: &str, value: &str) -> BackendResult<()> {
        let what = format!("IncrementalAlterConfigs {topic} {name}={value}");
        incremental_alter(&self.client, topic, name, value, self.timeout)
            .map_err(|(code, detail)| error::code(&what, code, Some(&detail)))
    }
}

fn one_result(what: &str, results: Vec<Result<String, (String, Code)>>) -> BackendResult<()> {
    match results.into_iter().next() {
        Some(Ok(_)) => Ok(()),
        Some(Err((_, code))) => Err(error::code(what, code, None)),
        None => Err(BackendError::new(
            ErrorKind::Io,
            format!("{what}: no result"),
        )),
    }
}

/// Owns a librdkafka object and destroys it on every path out.
pub(super) struct Owned<T>(pub *mut T, pub unsafe extern "C" fn(*mut T));

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from the matching constructor and is
            // destroyed once, here.
            unsafe { (self.1)(self.0) }
        }
    }
}

pub(super) fn c_text(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: librdkafka hands out NUL-terminated strings that live as long
    // as the object they belong to, which outlives this copy.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// IncrementalAlterConfigs of one topic config, SET (or DELETE for an empty
/// value): only that config changes, unlike AlterConfigs, which resets every
/// other override of the topic.
fn incremental_alter(
    client: &AdminClient<DefaultClientContext>,
    topic: &str,
    name: &str,
    value: &str,
    timeout: Duration,
) -> Result<(), (Code, String)> {
    use rdsys::rd_kafka_AlterConfigOpType_t as Op;
    let invalid = |what: &str| (Code::InvalidArgument, what.to_string());
    let c_topic = CString::new(topic).map_err(|_| invalid("NUL in topic"))?;
    let c_name = CString::new(name).map_err(|_| invalid("NUL in name"))?;
    let c_value = CString::new(value).map_err(|_| invalid("NUL in value"))?;
    let (op, value_ptr) = if value.is_empty() {
        (Op::RD_KAFKA_ALTER_CONFIG_OP_TYPE_DELETE, std::ptr::null())
    } else {
        (Op::RD_KAFKA_ALTER_CONFIG_OP_TYPE_SET, c_value.as_ptr())
    };
    let rk = client.inner().native_ptr();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: every object is created, used and destroyed here, through
    // librdkafka's documented C API; the result event is read before it is
    // destroyed.
    unsafe {
        let queue = Owned(rdsys::rd_kafka_queue_new(rk), rdsys::rd_kafka_queue_destroy);
        let opts = Owned(
            rdsys::rd_kafka_AdminOptions_new(
                rk,
                rdsys::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_INCREMENTALALTERCONFIGS,
            ),
            rdsys::rd_kafka_AdminOptions_destroy,
        );
        let mut errbuf = [0 as std::os::raw::c_char; 256];
        rdsys::rd_kafka_AdminOptions_set_request_timeout(
            opts.0,
            ms,
            errbuf.as_mut_ptr(),
            errbuf.len(),
        );
        let resource = Owned(
            rdsys::rd_kafka_ConfigResource_new(
                rdsys::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_TOPIC,
                c_topic.as_ptr(),
            ),
            rdsys::rd_kafka_ConfigResource_destroy,
        );
        let err = rdsys::rd_kafka_ConfigResource_add_incremental_config(
            resource.0,
            c_name.as_ptr(),
            op,
            value_ptr,
        );
        if !err.is_null() {
            let err = Owned(err, rdsys::rd_kafka_error_destroy);
            let code = rdsys::rd_kafka_error_code(err.0);
            return Err((code.into(), c_text(rdsys::rd_kafka_error_string(err.0))));
        }
        let mut resources = [resource.0];
        rdsys::rd_kafka_IncrementalAlterConfigs(rk, resources.as_mut_ptr(), 1, opts.0, queue.0);
        let event = Owned(
            rdsys::rd_kafka_queue_poll(queue.0, ms.saturating_add(1000)),
            rdsys::rd_kafka_event_destroy,
        );
        if event.0.is_null() {
            return Err((Code::OperationTimedOut, "no result in time".to_string()));
        }
        alter_result(event.0)
    }
}

/// The outcome an IncrementalAlterConfigs result event carries: the request's
/// own error, else the first resource's.
///
/// # Safety
/// `event` is a live IncrementalAlterConfigs result event.
unsafe fn alter_result(event: *mut rdsys::rd_kafka_event_t) -> Result<(), (Code, String)> {
    // SAFETY: the caller's event stays alive for this call; the resources
    // it lists belong to it.
    unsafe {
        let code = rdsys::rd_kafka_event_error(event);
        if code != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err((
                code.into(),
                c_text(rdsys::rd_kafka_event_error_string(event)),
            ));
        }
        let result = rdsys::rd_kafka_event_IncrementalAlterConfigs_result(event);
        let mut n = 0usize;
        let list = rdsys::rd_kafka_IncrementalAlterConfigs_result_resources(result, &mut n);
        for i in 0..n {
            let r = *list.add(i);
            let code = rdsys::rd_kafka_ConfigResource_error(r);
            if code != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                return Err((
                    code.into(),
                    c_text(rdsys::rd_kafka_ConfigResource_error_string(r)),
                ));
            }
        }
        Ok(())
    }
}
