//! The decision, as `StandardAuthorizer.authorize` makes it: a super user
//! may do anything; otherwise every ACL on the resource (its literal name,
//! the `*` literal, and every prefix) for the principal or `User:*` at the
//! client's address or `*` is looked at: a DENY of the operation (or ALL)
//! wins, else an ALLOW of it (or of ALL, or of an operation implying it)
//! allows; with no ACL on the resource at all, `allow.everyone.if.no.acl.found`
//! decides, and with ACLs on it none of which allow, it is denied.

use std::collections::HashSet;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use log::{info, trace};

use super::model::{
    AclBinding, AclBindingFilter, Operation, PatternType, Permission, ResourceType, WILDCARD,
};
use super::store::AclStore;
use crate::network::session::Principal;

/// `StandardAuthorizer`'s settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerSettings {
    /// `super.users`, as principals' text (`User:admin`).
    pub super_users: HashSet<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl: bool,
}

/// Why a decision came out as it did, for the log (Kafka's `MatchingRule`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    SuperUser,
    Acl(AclBinding),
    /// No ACL on the resource: `allow.everyone.if.no.acl.found` decided.
    NoAcl(bool),
    /// ACLs on the resource, none allowing.
    Deny,
}

impl Rule {
    pub fn allowed(&self) -> bool {
        match self {
            Rule::SuperUser => true,
            Rule::Acl(a) => a.permission == Permission::Allow,
            Rule::NoAcl(allowed) => *allowed,
            Rule::Deny => false,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::SuperUser => f.write_str("SuperUser"),
            Rule::Acl(a) => write!(
                f,
                "MatchingAcl(acl=StandardAcl(resourceType={}, resourceName={}, patternType={}, \
                 principal={}, host={}, operation={}, permissionType={}), result={})",
                a.resource_type,
                a.name,
                a.pattern_type,
                a.principal,
                a.host,
                a.operation,
                a.permission,
                if self.allowed() { "ALLOWED" } else { "DENIED" }
            ),
            Rule::NoAcl(true) => f.write_str("DefaultAllow"),
            Rule::NoAcl(false) | Rule::Deny => f.write_str("DefaultDeny"),
        }
    }
}

pub struct Authorizer {
    settings: AuthorizerSettings,
    store: Arc<AclStore>,
}

/// `IMPLIES_DESCRIBE`: an ALLOW of any of these allows DESCRIBE.
const IMPLIES_DESCRIBE: &[Operation] = &[
    Operation::Describe,
    Operation::Read,
    Operation::Write,
    Operation::Delete,
    Operation::Alter,
];
/// `IMPLIES_DESCRIBE_CONFIGS`.
const IMPLIES_DESCRIBE_CONFIGS: &[Operation] =
    &[Operation::DescribeConfigs, Operation::AlterConfigs];

/// `StandardAuthorizerData.findResult`: what one ACL says of the action,
/// `None` when it says nothing.
fn find_result(acl: &AclBinding, principal: &str, host: IpAddr, op: Operation) -> Option<bool> {
    if !acl.applies_to(principal, host) {
        return None;
    }
    if acl.operation != Operation::All {
        let matches = match (acl.permission, op) {
            (Permission::Allow, Operation::Describe) => IMPLIES_DESCRIBE.contains(&acl.operation),
            (Permission::Allow, Operation::DescribeConfigs) => {
                IMPLIES_DESCRIBE_CONFIGS.contains(&acl.operation)
            }
            _ => acl.operation == op,
        };
        if !matches {
            return None;
        }
    }
    Some(acl.permission == Permission::Allow)
}

impl Authorizer {
    pub fn new(settings: AuthorizerSettings, store: Arc<AclStore>) -> Authorizer {
        Authorizer { settings, store }
    }

    pub fn store(&self) -> &Arc<AclStore> {
        &self.store
    }

    pub fn settings(&self) -> &AuthorizerSettings {
        &self.settings
    }

    /// The decision on `op` on the literal resource `name` of type `rt`.
    pub fn authorize(
        &self,
        principal: &Principal,
        host: IpAddr,
        op: Operation,
        rt: ResourceType,
        name: &str,
    ) -> Rule {
        let who = principal.to_string();
        if self.settings.super_users.contains(&who) {
            return Rule::SuperUser;
        }
        let acls = self.store.snapshot();
        let mut allow = None;
        let mut on_resource = false;
        for acl in acls
            .iter()
            .filter(|a| a.resource_type == rt && a.covers(name))
        {
            on_resource = true;
            match find_result(acl, &who, host, op) {
                Some(false) => return Rule::Acl(acl.clone()),
                Some(true) if allow.is_none() => allow = Some(acl),
                _ => {}
            }
        }
        match allow {
            Some(a) => Rule::Acl(a.clone()),
            None if !on_resource => Rule::NoAcl(self.settings.allow_everyone_if_no_acl),
            None => Rule::Deny,
        }
    }

    /// `Authorizer.authorizeByResourceType`: whether `op` is allowed on
    /// some resource of type `rt` (an ALLOW not shadowed by a DENY of the
    /// same literal name or of a prefix of it), as InitProducerId asks
    /// WRITE on any topic in place of IDEMPOTENT_WRITE.
    pub fn authorize_by_resource_type(
        &self,
        principal: &Principal,
        host: IpAddr,
        op: Operation,
        rt: ResourceType,
    ) -> bool {
        if self
            .authorize(principal, host, op, rt, "hardcode")
            .allowed()
        {
            return true;
        }
        let who = principal.to_string();
        let acls = self.store.snapshot();
        let relevant: Vec<&AclBinding> = (acls.iter())
            .filter(|a| a.resource_type == rt && a.applies_to(&who, host))
            .filter(|a| a.operation == op || a.operation == Operation::All)
            .collect();
        let is_wildcard =
            |a: &AclBinding| a.pattern_type == PatternType::Literal && a.name == WILDCARD;
        let (deny, allow): (Vec<&AclBinding>, Vec<&AclBinding>) = (relevant.into_iter())
            .filter(|a| a.permission != Permission::Unknown && a.permission != Permission::Any)
            .partition(|a| a.permission == Permission::Deny);
        // Kafka stops at the first wildcard DENY it meets, whatever came
        // before it: such a DENY wins over every ALLOW.
        if deny.iter().any(|a| is_wildcard(a)) {
            return false;
        }
        if allow.iter().any(|a| is_wildcard(a)) {
            return true;
        }
        let denied = |pt: PatternType, name: &str| {
            deny.iter().any(|d| d.pattern_type == pt && d.name == name)
        };
        allow.iter().any(|a| {
            if a.pattern_type == PatternType::Literal && denied(PatternType::Literal, &a.name) {
                return false;
            }
            !(1..=a.name.len())
                .filter(|&i| a.name.is_char_boundary(i))
                .any(|i| denied(PatternType::Prefixed, &a.name[..i]))
        })
    }

    /// The ACLs `filter` matches (DescribeAcls).
    pub fn acls(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        let acls = self.store.snapshot();
        acls.iter().filter(|a| filter.matches(a)).cloned().collect()
    }
}

/// Kafka's audit line, at INFO for a denial it logs and TRACE otherwise
/// (its `logIfDenied = false` checks: the all-topics Metadata list,
/// ListGroups' filter, and the CLUSTER checks that have a fallback).
pub fn log_decision(
    principal: &Principal,
    host: IpAddr,
    op: Operation,
    rt: ResourceType,
    name: &str,
    rule: &Rule,
    log_if_denied: bool,
) {
    let text = || {
        format!(
            "Principal = {principal} is {} operation = {op} from host = {host} on resource = {}:LITERAL:{name} based on rule {rule}",
            if rule.allowed() { "Allowed" } else { "Denied" },
            resource_type_name(rt),
        )
    };
    if !rule.allowed() && log_if_denied {
        info!("{}", text());
    } else if log::log_enabled!(log::Level::Trace) {
        trace!("{}", text());
    }
}

/// `SecurityUtils.resourceTypeName`: TOPIC is `Topic`, TRANSACTIONAL_ID
/// is `TransactionalId`.
fn resource_type_name(rt: ResourceType) -> String {
    rt.name()
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_string() + &c.as_str().to_ascii_lowercase(),
                None => String::new(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
