//! Kafka's ACLs: the model ([`model`]), the decision ([`authorizer`], as
//! `StandardAuthorizer`), the durable set ([`store`], `commitfs.acls`).
//!
//! With no `authorizer.class.name` there is no [`Authorizer`] and every
//! request is allowed.

pub mod authorizer;
pub mod model;
pub mod store;

pub use authorizer::{Authorizer, AuthorizerSettings, Rule};
pub use model::{
    AclBinding, AclBindingFilter, CLUSTER_NAME, Operation, PatternType, Permission, ResourceType,
};
pub use store::{ACLS_FILE, AclStore};
