//! The cluster's consumer groups through its admin API, as Kafka's
//! `kafka-consumer-groups.sh` reaches them: ListConsumerGroups,
//! DescribeConsumerGroups, ListConsumerGroupOffsets,
//! AlterConsumerGroupOffsets and DeleteGroups. rdkafka 0.39 wraps only the
//! last; the others go through librdkafka's C API on a queue of our own,
//! polled on the calling thread (as `admin::incremental_alter` does).

use std::ffi::CString;
use std::os::raw::c_char;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::bindings as rdsys;
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode as Code;

use super::Shared;
use super::admin::{Owned, c_text};
use super::error;
use commitfs_backend::groups::{
    Committed, Coordinator, GroupDescription, Groups, Member, Reset, TopicPartition,
};
use commitfs_backend::{BackendError, BackendResult, ErrorKind};

/// The groups of the cluster, through the mount's admin client.
pub struct ClusterGroups {
    shared: Arc<Shared>,
}

type CResult<T> = Result<T, (Code, String)>;

/// A request's objects, and its result event once polled.
struct Call {
    rk: *mut rdsys::rd_kafka_t,
    queue: Owned<rdsys::rd_kafka_queue_t>,
    opts: Owned<rdsys::rd_kafka_AdminOptions_t>,
    ms: i32,
}

impl Call {
    /// # Safety
    /// `rk` is the live handle of an admin client that outlives the call.
    unsafe fn new(
        rk: *mut rdsys::rd_kafka_t,
        op: rdsys::rd_kafka_admin_op_t,
        timeout: Duration,
    ) -> Call {
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: the caller's handle is live; the queue and options are
        // destroyed by their guards.
        unsafe {
            let queue = Owned(rdsys::rd_kafka_queue_new(rk), rdsys::rd_kafka_queue_destroy);
            let opts = Owned(
                rdsys::rd_kafka_AdminOptions_new(rk, op),
                rdsys::rd_kafka_AdminOptions_destroy,
            );
            let mut errbuf = [0 as c_char; 256];
            rdsys::rd_kafka_AdminOptions_set_request_timeout(
                opts.0,
                ms,
                errbuf.as_mut_ptr(),
                errbuf.len(),
            );
            Call {
                rk,
                queue,
                opts,
                ms,
            }
        }
    }

    /// The result event, its request-level error checked.
    ///
    /// # Safety
    /// The request was sent on this call's queue.
    unsafe fn result(&self) -> CResult<Owned<rdsys::rd_kafka_event_t>> {
        // SAFETY: the queue is live; the event is destroyed by its guard.
        unsafe {
            let event = Owned(
                rdsys::rd_kafka_queue_poll(self.queue.0, self.ms.saturating_add(1000)),
                rdsys::rd_kafka_event_destroy,
            );
            if event.0.is_null() {
                return Err((Code::OperationTimedOut, "no result in time".to_string()));
            }
            let code = rdsys::rd_kafka_event_error(event.0);
            if code != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                return Err((
                    code.into(),
                    c_text(rdsys::rd_kafka_event_error_string(event.0)),
                ));
            }
            Ok(event)
        }
    }
}

/// An error object's code and text, or `None` for none.
///
/// # Safety
/// `e` is null or a live error object.
unsafe fn error_of(e: *const rdsys::rd_kafka_error_t) -> Option<(Code, String)> {
    if e.is_null() {
        return None;
    }
    // SAFETY: a live error object, per the caller.
    unsafe {
        Some((
            rdsys::rd_kafka_error_code(e).into(),
            c_text(rdsys::rd_kafka_error_string(e)),
        ))
    }
}

/// The partitions of a C list.
///
/// # Safety
/// `list` is null or a live list.
unsafe fn partitions_of(
    list: *const rdsys::rd_kafka_topic_partition_list_t,
) -> Vec<*mut rdsys::rd_kafka_topic_partition_t> {
    if list.is_null() {
        return Vec::new();
    }
    // SAFETY: a live list holds `cnt` elements at `elems`.
    unsafe {
        (0..(*list).cnt.max(0) as usize)
            .map(|i| (*list).elems.add(i))
            .collect()
    }
}

fn c_string(s: &str) -> CResult<CString> {
    CString::new(s).map_err(|_| (Code::InvalidArgument, format!("{s:?} holds a NUL")))
}

/// A list of the partitions of `resets`, with their offsets.
///
/// # Safety
/// None beyond the C API's: the list is the caller's to destroy.
unsafe fn reset_list(resets: &[Reset]) -> CResult<Owned<rdsys::rd_kafka_topic_partition_list_t>> {
    // SAFETY: a new list, filled through the C API and owned by the guard.
    unsafe {
        let list = Owned(
            rdsys::rd_kafka_topic_partition_list_new(resets.len() as i32),
            rdsys::rd_kafka_topic_partition_list_destroy,
        );
        for r in resets {
            let topic = c_string(&r.partition.topic)?;
            let p = rdsys::rd_kafka_topic_partition_list_add(
                list.0,
                topic.as_ptr(),
                r.partition.partition,
            );
            (*p).offset = r.offset;
        }
        Ok(list)
    }
}

impl ClusterGroups {
    pub(super) fn new(shared: Arc<Shared>) -> ClusterGroups {
        ClusterGroups { shared }
    }

    fn client(&self) -> &AdminClient<DefaultClientContext> {
        self.shared.admin.client()
    }

    fn timeout(&self) -> Duration {
        self.shared.admin.timeout()
    }

    fn rk(&self) -> *mut rdsys::rd_kafka_t {
        self.client().inner().native_ptr()
    }

    fn list_c(&self) -> CResult<Vec<String>> {
        // SAFETY: the admin client outlives the call; every object is
        // read before the event that owns it is destroyed.
        unsafe {
            let call = Call::new(
                self.rk(),
                rdsys::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS,
                self.timeout(),
            );
            rdsys::rd_kafka_ListConsumerGroups(call.rk, call.opts.0, call.queue.0);
            let event = call.result()?;
            let result = rdsys::rd_kafka_event_ListConsumerGroups_result(event.0);
            let mut n = 0usize;
            let errors = rdsys::rd_kafka_ListConsumerGroups_result_errors(result, &mut n);
            // A broker that could not answer: the list would be partial.
            if n > 0
                && let Some(e) = error_of(*errors)
            {
                return Err(e);
            }
            let valid = rdsys::rd_kafka_ListConsumerGroups_result_valid(result, &mut n);
            let mut names: Vec<String> = (0..n)
                .map(|i| c_text(rdsys::rd_kafka_ConsumerGroupListing_group_id(*valid.add(i))))
                .collect();
            names.sort();
            names.dedup();
            Ok(names)
        }
    }

    fn describe_c(&self, group: &str) -> CResult<GroupDescription> {
        let c_group = c_string(group)?;
        // SAFETY: as in `list_c`; the group name outlives the request.
        unsafe {
            let call = Call::new(
                self.rk(),
                rdsys::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS,
                self.timeout(),
            );
            let mut names = [c_group.as_ptr()];
            rdsys::rd_kafka_DescribeConsumerGroups(
                call.rk,
                names.as_mut_ptr(),
                1,
                call.opts.0,
                call.queue.0,
            );
            let event = call.result()?;
            let result = rdsys::rd_kafka_event_DescribeConsumerGroups_result(event.0);
            let mut n = 0usize;
            let groups = rdsys::rd_kafka_DescribeConsumerGroups_result_groups(result, &mut n);
            if n == 0 {
                return Err((Code::GroupIdNotFound, format!("no description of {group}")));
            }
            let g = *groups;
            if let Some(e) = error_of(rdsys::rd_kafka_ConsumerGroupDescription_error(g)) {
                return Err(e);
            }
            let state = c_text(rdsys::rd_kafka_consumer_group_state_name(
                rdsys::rd_kafka_ConsumerGroupDescription_state(g),
            ));
            let node = rdsys::rd_kafka_ConsumerGroupDescription_coordinator(g);
            let coordinator = (!node.is_null()).then(|| Coordinator {
                id: rdsys::rd_kafka_Node_id(node),
                host: c_text(rdsys::rd_kafka_Node_host(node)),
                port: rdsys::rd_kafka_Node_port(node) as i32,
            });
            let simple = rdsys::rd_kafka_ConsumerGroupDescription_is_simple_consumer_group(g) != 0;
            let count = rdsys::rd_kafka_ConsumerGroupDescription_member_count(g);
            let members = (0..count)
                .map(|i| {
                    let m = rdsys::rd_kafka_ConsumerGroupDescription_member(g, i);
                    let instance = rdsys::rd_kafka_MemberDescription_group_instance_id(m);
                    let assignment = rdsys::rd_kafka_MemberDescription_assignment(m);
                    let list = if assignment.is_null() {
                        std::ptr::null()
                    } else {
                        rdsys::rd_kafka_MemberAssignment_partitions(assignment)
                    };
                    let mut assignment: Vec<TopicPartition> = partitions_of(list)
                        .into_iter()
                        .map(|p| TopicPartition {
                            topic: c_text((*p).topic),
                            partition: (*p).partition,
                        })
                        .collect();
                    assignment.sort();
                    Member {
                        member_id: c_text(rdsys::rd_kafka_MemberDescription_consumer_id(m)),
                        group_instance_id: (!instance.is_null()).then(|| c_text(instance)),
                        client_id: c_text(rdsys::rd_kafka_MemberDescription_client_id(m)),
                        host: c_text(rdsys::rd_kafka_MemberDescription_host(m)),
                        assignment,
                    }
                })
                .collect();
            Ok(GroupDescription {
                state,
                protocol_type: if simple {
                    String::new()
                } else {
                    "consumer".into()
                },
                assignor: c_text(rdsys::rd_kafka_ConsumerGroupDescription_partition_assignor(
                    g,
                )),
                coordinator,
                members,
            })
        }
    }

    fn committed_c(&self, group: &str) -> CResult<Vec<Committed>> {
        let c_group = c_string(group)?;
        // SAFETY: as in `list_c`; a null partition list asks for all.
        unsafe {
            let call = Call::new(
                self.rk(),
                rdsys::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS,
                self.timeout(),
            );
            let request = Owned(
                rdsys::rd_kafka_ListConsumerGroupOffsets_new(c_group.as_ptr(), std::ptr::null()),
                rdsys::rd_kafka_ListConsumerGroupOffsets_destroy,
            );
            let mut requests = [request.0];
            rdsys::rd_kafka_ListConsumerGroupOffsets(
                call.rk,
                requests.as_mut_ptr(),
                1,
                call.opts.0,
                call.queue.0,
            );
            let event = call.result()?;
            let result = rdsys::rd_kafka_event_ListConsumerGroupOffsets_result(event.0);
            let mut n = 0usize;
            let groups = rdsys::rd_kafka_ListConsumerGroupOffsets_result_groups(result, &mut n);
            let mut out = Vec::new();
            for i in 0..n {
                let g = *groups.add(i);
                if let Some(e) = error_of(rdsys::rd_kafka_group_result_error(g)) {
                    return Err(e);
                }
                for p in partitions_of(rdsys::rd_kafka_group_result_partitions(g)) {
                    // No commit (-1001), or a partition the answer failed.
                    if (*p).offset < 0
                        || (*p).err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
                    {
                        continue;
                    }
                    let metadata = if (*p).metadata.is_null() {
                        String::new()
                    } else {
                        let bytes = std::slice::from_raw_parts(
                            (*p).metadata as *const u8,
                            (*p).metadata_size,
                        );
                        String::from_utf8_lossy(bytes).into_owned()
                    };
                    let epoch = rdsys::rd_kafka_topic_partition_get_leader_epoch(p);
                    out.push(Committed {
                        partition: TopicPartition {
                            topic: c_text((*p).topic),
                            partition: (*p).partition,
                        },
                        offset: (*p).offset,
                        leader_epoch: (epoch >= 0).then_some(epoch),
                        metadata,
                        // OffsetFetch does not say when.
                        commit_timestamp: None,
                    });
                }
            }
            out.sort_by(|a, b| a.partition.cmp(&b.partition));
            Ok(out)
        }
    }

    fn alter_c(&self, group: &str, resets: &[Reset]) -> CResult<()> {
        let c_group = c_string(group)?;
        // SAFETY: as in `list_c`; `_new` copies the list.
        unsafe {
            let list = reset_list(resets)?;
            let call = Call::new(
                self.rk(),
                rdsys::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS,
                self.timeout(),
            );
            let request = Owned(
                rdsys::rd_kafka_AlterConsumerGroupOffsets_new(c_group.as_ptr(), list.0),
                rdsys::rd_kafka_AlterConsumerGroupOffsets_destroy,
            );
            let mut requests = [request.0];
            rdsys::rd_kafka_AlterConsumerGroupOffsets(
                call.rk,
                requests.as_mut_ptr(),
                1,
                call.opts.0,
                call.queue.0,
            );
            let event = call.result()?;
            let result = rdsys::rd_kafka_event_AlterConsumerGroupOffsets_result(event.0);
            let mut n = 0usize;
            let groups = rdsys::rd_kafka_AlterConsumerGroupOffsets_result_groups(result, &mut n);
            for i in 0..n {
                let g = *groups.add(i);
                if let Some(e) = error_of(rdsys::rd_kafka_group_result_error(g)) {
                    return Err(e);
                }
                for p in partitions_of(rdsys::rd_kafka_group_result_partitions(g)) {
                    let code = (*p).err;
                    if code != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                        let tp = format!("{}-{}", c_text((*p).topic), (*p).partition);
                        return Err((code.into(), format!("{tp} refused")));
                    }
                }
            }
            Ok(())
        }
    }

    fn err(&self, what: String, (code, detail): (Code, String)) -> BackendError {
        if code == Code::OperationTimedOut {
            return error::timed_out(what, self.timeout());
        }
        error::code(what, code, Some(&detail))
    }

    fn writable(&self) -> BackendResult<()> {
        match self.shared.opts.read_only {
            true => Err(BackendError::new(
                ErrorKind::ReadOnly,
                "the mount is read-only",
            )),
            false => Ok(()),
        }
    }
}

impl Groups for ClusterGroups {
    fn list(&self) -> BackendResult<Vec<String>> {
        self.list_c()
            .map_err(|e| self.err("ListConsumerGroups".into(), e))
    }

    fn describe(&self, group: &str) -> BackendResult<GroupDescription> {
        let what = || format!("DescribeConsumerGroups of group {group}");
        let d = self.describe_c(group).map_err(|e| self.err(what(), e))?;
        // A group the coordinator does not know is described as Dead.
        if d.state == "Dead" {
            return Err(BackendError::new(
                ErrorKind::NotFound,
                format!("{}: the group does not exist", what()),
            ));
        }
        Ok(d)
    }

    fn committed(&self, group: &str) -> BackendResult<Vec<Committed>> {
        self.committed_c(group)
            .map_err(|e| self.err(format!("ListConsumerGroupOffsets of group {group}"), e))
    }

    fn reset(&self, group: &str, offsets: &[Reset]) -> BackendResult<()> {
        self.writable()?;
        let what = format!("AlterConsumerGroupOffsets of group {group}");
        // The tool's own check: only an inactive group (Empty, or Dead: one
        // that does not exist yet) is reset.
        let state = self
            .describe_c(group)
            .map_err(|e| self.err(what.clone(), e))?
            .state;
        if state != "Empty" && state != "Dead" {
            return Err(BackendError::new(
                ErrorKind::Busy,
                format!(
                    "Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}."
                ),
            ));
        }
        self.alter_c(group, offsets).map_err(|e| self.err(what, e))
    }

    fn delete(&self, group: &str) -> BackendResult<()> {
        self.writable()?;
        let what = format!("DeleteGroups of group {group}");
        let opts = rdkafka::admin::AdminOptions::new()
            .request_timeout(Some(self.timeout()))
            .operation_timeout(Some(self.timeout()));
        let results = super::admin::block_on(
            self.client().delete_groups(&[group], &opts),
            self.timeout() + Duration::from_secs(1),
        )
        .ok_or_else(|| error::timed_out(&what, self.timeout()))?
        .map_err(|e| error::client(&what, &e))?;
        match results.into_iter().next() {
            Some(Ok(_)) => Ok(()),
            Some(Err((_, code))) => Err(error::code(&what, code, None)),
            None => Err(BackendError::new(
                ErrorKind::Io,
                format!("{what}: no result"),
            )),
        }
    }
}
