//! Kafka's ACLs: the model ([`model`]), the decision ([`authorizer`], as
//! `StandardAuthorizer`), the durable set ([`store`], `commitfs.acls`),
//! CreateAcls, DescribeAcls and DeleteAcls ([`api`]), and the checks the
//! handlers make in one line each ([`allowed`], [`cluster`], ...).
//!
//! With no `authorizer.class.name` there is no [`Authorizer`] and every
//! check passes.

pub mod authorizer;
pub mod model;
pub mod store;

pub use authorizer::{Authorizer, AuthorizerSettings, Rule};
pub use model::{
    AclBinding, AclBindingFilter, CLUSTER_NAME, Operation, PatternType, Permission, ResourceType,
};
pub use store::{ACLS_FILE, AclStore};

pub mod api;

use crate::network::session::Session;

/// Kafka's `AuthHelper`: what the checks below ask of the broker, its
/// authorizer if it has one; a trait so that the ACLs need not know the
/// broker that holds them.
pub trait AuthHelper {
    fn authorizer(&self) -> Option<&Authorizer>;
}

/// The two checks below differ only in how a denial is logged.
macro_rules! check {
    ($(#[$doc:meta])* $name:ident, log_if_denied: $log:literal) => {
        $(#[$doc])*
        pub fn $name(
            b: &impl AuthHelper,
            s: &Session,
            op: Operation,
            rt: ResourceType,
            name: &str,
        ) -> bool {
            let Some(a) = b.authorizer() else {
                return true;
            };
            let host = s.peer.ip();
            let rule = a.authorize(&s.principal, host, op, rt, name);
            authorizer::log_decision(&s.principal, host, op, rt, name, &rule, $log);
            rule.allowed()
        }
    };
}

check!(
    /// Whether `s` may do `op` on the resource `name` of type `rt`: always
    /// with no authorizer. A denial is logged as Kafka's authorizer logs it.
    allowed,
    log_if_denied: true
);

check!(
    /// As [`allowed`], a denial logged at TRACE only: Kafka's
    /// `logIfDenied = false`, for checks that filter rather than refuse.
    allowed_quietly,
    log_if_denied: false
);

/// `op` on the CLUSTER resource.
pub fn cluster(b: &impl AuthHelper, s: &Session, op: Operation) -> bool {
    allowed(b, s, op, ResourceType::Cluster, CLUSTER_NAME)
}

/// `authorizeByResourceType`: `op` on some resource of type `rt`.
pub fn any_of_type(b: &impl AuthHelper, s: &Session, op: Operation, rt: ResourceType) -> bool {
    match b.authorizer() {
        None => true,
        Some(a) => a.authorize_by_resource_type(&s.principal, s.peer.ip(), op, rt),
    }
}

/// `AclEntry.supportedOperations`: what an ACL on a resource of type `rt`
/// can allow.
pub fn supported_operations(rt: ResourceType) -> &'static [Operation] {
    use Operation::*;
    match rt {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        ResourceType::TransactionalId => &[Describe, Write],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
        ResourceType::Unknown | ResourceType::Any => &[],
    }
}

/// `AuthHelper.authorizedOperations`: the operations `s` may do on the
/// resource `name` of type `rt`, each the bit of its code (the
/// `*AuthorizedOperations` fields of Metadata and DescribeGroups); with no
/// authorizer, all that the type supports. Asked quietly, as Kafka asks.
pub fn authorized_operations(
    b: &impl AuthHelper,
    s: &Session,
    rt: ResourceType,
    name: &str,
) -> i32 {
    (supported_operations(rt).iter())
        .filter(|&&op| allowed_quietly(b, s, op, rt, name))
        .fold(0, |bits, op| bits | 1 << op.code())
}

/// DescribeConfigs' and the AlterConfigs' check of one `ConfigResource`
/// (`op` DESCRIBE_CONFIGS or ALTER_CONFIGS): a topic's on the topic, the
/// broker's on the cluster; the error when refused.
pub fn config_resource(
    b: &impl AuthHelper,
    s: &Session,
    op: Operation,
    resource_type: i8,
    name: &str,
) -> Option<kafka_protocol::ResponseError> {
    use kafka_protocol::ResponseError;
    // ConfigResource.Type: TOPIC 2, BROKER 4, BROKER_LOGGER 8.
    match resource_type {
        2 if !allowed(b, s, op, ResourceType::Topic, name) => {
            Some(ResponseError::TopicAuthorizationFailed)
        }
        4 | 8 if !cluster(b, s, op) => Some(ResponseError::ClusterAuthorizationFailed),
        _ => None,
    }
}
