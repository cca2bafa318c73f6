//! Kafka's ACL vocabulary (`org.apache.kafka.common.acl` and
//! `org.apache.kafka.common.resource`): resource types, pattern types,
//! operations and permissions with their wire codes and names, a binding,
//! and the filters of DescribeAcls and DeleteAcls with their matching.

use std::fmt;
use std::net::IpAddr;

/// `ResourcePattern.WILDCARD_RESOURCE`, and `AclEntry.WILDCARD_HOST`.
pub const WILDCARD: &str = "*";
/// `AclEntry.WILDCARD_PRINCIPAL_STRING`: every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// `Resource.CLUSTER_NAME`: the only name a CLUSTER resource has.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// Each of Kafka's enums here numbers its constants from 0 in order, and
/// begins with UNKNOWN and ANY: the macro supplies those two, takes a code
/// to be a variant's position, and spells its name as Java does, so a table
/// lists only the rest of the variants and cannot disagree with Kafka's
/// codes or spelling.
macro_rules! kafka_enum {
    ($(#[$m:meta])* $name:ident { $($v:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(i8)]
        pub enum $name { Unknown, Any, $($v),* }

        impl $name {
            pub const ALL_VALUES: &'static [$name] = &[$name::Unknown, $name::Any, $($name::$v),*];

            /// `fromCode`: a code not known is UNKNOWN, as in Kafka.
            pub fn from_code(code: i8) -> $name {
                usize::try_from(code)
                    .ok()
                    .and_then(|i| $name::ALL_VALUES.get(i).copied())
                    .unwrap_or($name::Unknown)
            }

            pub fn code(self) -> i8 {
                self as i8
            }

            /// The Java enum constant's name.
            pub fn name(self) -> &'static str {
                match self {
                    $name::Unknown => "UNKNOWN",
                    $name::Any => "ANY",
                    $($name::$v => {
                        const SPELLED: [u8; java_name_len(stringify!($v))] = java_name(stringify!($v));
                        const NAME: &str = match std::str::from_utf8(&SPELLED) {
                            Ok(name) => name,
                            Err(_) => panic!("a Rust identifier is ASCII"),
                        };
                        NAME
                    })*
                }
            }

            pub fn from_name(text: &str) -> Option<$name> {
                $name::ALL_VALUES.iter().copied().find(|v| v.name() == text)
            }

            pub fn is_unknown(self) -> bool {
                self == $name::Unknown
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

/// A variant's name as the Java constant spells it: `TransactionalId` is
/// `TRANSACTIONAL_ID`. Worked out at compile time so that `name` stays
/// `&'static str`; `N` is [`java_name_len`] of the variant.
const fn java_name<const N: usize>(variant: &str) -> [u8; N] {
    let v = variant.as_bytes();
    let mut out = [0; N];
    let (mut i, mut o) = (0, 0);
    while i < v.len() {
        if i > 0 && v[i].is_ascii_uppercase() {
            out[o] = b'_';
            o += 1;
        }
        out[o] = v[i].to_ascii_uppercase();
        i += 1;
        o += 1;
    }
    out
}

/// The length of [`java_name`]: an underscore before each word but the first.
const fn java_name_len(variant: &str) -> usize {
    let v = variant.as_bytes();
    let mut len = v.len();
    let mut i = 1;
    while i < v.len() {
        if v[i].is_ascii_uppercase() {
            len += 1;
        }
        i += 1;
    }
    len
}

kafka_enum!(
    /// `ResourceType`. Kafka takes ACLs on DELEGATION_TOKEN and USER too;
    /// they are kept, though nothing here asks about them.
    ResourceType { Topic, Group, Cluster, TransactionalId, DelegationToken, User }
);

kafka_enum!(
    /// `PatternType` (KIP-290): ANY and MATCH only in filters.
    PatternType { Match, Literal, Prefixed }
);

kafka_enum!(
    /// `AclOperation`.
    Operation {
        All, Read, Write, Create, Delete, Alter, Describe, ClusterAction,
        DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens,
    }
);

kafka_enum!(
    /// `AclPermissionType`.
    Permission { Deny, Allow }
);

/// An `AclBinding`: a resource pattern and an access control entry. The
/// principal stays text, as Kafka's `AccessControlEntry` keeps it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBinding {
    /// `AclControlManager.validateNewAcl`, with its messages.
    pub fn validate(&self) -> Result<(), String> {
        if matches!(
            self.resource_type,
            ResourceType::Unknown | ResourceType::Any
        ) {
            return Err(format!("Invalid resourceType {}", self.resource_type));
        }
        if !matches!(
            self.pattern_type,
            PatternType::Literal | PatternType::Prefixed
        ) {
            return Err(format!("Invalid patternType {}", self.pattern_type));
        }
        if matches!(self.operation, Operation::Unknown | Operation::Any) {
            return Err(format!("Invalid operation {}", self.operation));
        }
        if !matches!(self.permission, Permission::Allow | Permission::Deny) {
            return Err(format!("Invalid permissionType {}", self.permission));
        }
        if self.name.is_empty() {
            return Err("Resource name should not be empty".to_string());
        }
        Ok(())
    }

    /// Whether this binding's pattern covers the literal resource `name`
    /// of its type (`*` and prefixes included).
    pub fn covers(&self, name: &str) -> bool {
        match self.pattern_type {
            PatternType::Literal => self.name == name || self.name == WILDCARD,
            PatternType::Prefixed => name.starts_with(&self.name),
            _ => false,
        }
    }

    /// Whether the entry is for this principal (or every user) at this host.
    pub fn applies_to(&self, principal: &str, host: IpAddr) -> bool {
        (self.principal == principal || self.principal == WILDCARD_PRINCIPAL)
            && host_matches(&self.host, host)
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(pattern=ResourcePattern(resourceType={}, name={}, patternType={}), \
             entry=(principal={}, host={}, operation={}, permissionType={}))",
            self.resource_type,
            self.name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission
        )
    }
}

/// `*`, or the address itself. Kafka compares the ACL's text with
/// `getHostAddress()`; comparing addresses also takes `::1` for the
/// `0:0:0:0:0:0:0:1` Java prints.
fn host_matches(acl_host: &str, host: IpAddr) -> bool {
    if acl_host == WILDCARD {
        return true;
    }
    match acl_host.parse::<IpAddr>() {
        Ok(ip) => ip == host || ip.to_canonical() == host.to_canonical(),
        Err(_) => false,
    }
}

/// An `AclBindingFilter`: `None` for a name, principal or host matches any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclBindingFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBindingFilter {
    /// `AclBindingFilter.ANY`.
    pub fn any() -> AclBindingFilter {
        AclBindingFilter {
            resource_type: ResourceType::Any,
            name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        }
    }

    /// `AclControlManager.validateFilter`, with its messages.
    pub fn validate(&self) -> Result<(), String> {
        if self.resource_type.is_unknown() || self.pattern_type.is_unknown() {
            return Err("Unknown patternFilter.".to_string());
        }
        if self.operation.is_unknown() || self.permission.is_unknown() {
            return Err("Unknown entryFilter.".to_string());
        }
        Ok(())
    }

    pub fn matches(&self, acl: &AclBinding) -> bool {
        self.pattern_matches(acl) && self.entry_matches(acl)
    }

    /// `ResourcePatternFilter.matches`: MATCH takes every pattern that
    /// covers the named resource (the name itself, `*`, and prefixes).
    fn pattern_matches(&self, acl: &AclBinding) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != acl.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != acl.pattern_type
        {
            return false;
        }
        let Some(name) = &self.name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == acl.pattern_type {
            return *name == acl.name;
        }
        match acl.pattern_type {
            PatternType::Literal => *name == acl.name || acl.name == WILDCARD,
            PatternType::Prefixed => name.starts_with(&acl.name),
            _ => false,
        }
    }

    /// `AccessControlEntryFilter.matches`.
    fn entry_matches(&self, acl: &AclBinding) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == Operation::Any || self.operation == acl.operation)
            && (self.permission == Permission::Any || self.permission == acl.permission)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn binding(
        rt: ResourceType,
        name: &str,
        pt: PatternType,
        principal: &str,
        host: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: rt,
            name: name.to_string(),
            pattern_type: pt,
            principal: principal.to_string(),
            host: host.to_string(),
            operation: op,
            permission: perm,
        }
    }

    pub(crate) fn acl(
        rt: ResourceType,
        name: &str,
        pt: PatternType,
        principal: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        binding(rt, name, pt, principal, WILDCARD, op, perm)
    }

    #[test]
    fn codes_and_names_round_trip() {
        for t in ResourceType::ALL_VALUES {
            assert_eq!(ResourceType::from_code(t.code()), *t);
            assert_eq!(ResourceType::from_name(t.name()), Some(*t));
        }
        for o in Operation::ALL_VALUES {
            assert_eq!(Operation::from_code(o.code()), *o);
        }
        assert_eq!(Operation::from_code(99), Operation::Unknown);
        assert_eq!(PatternType::from_code(4), PatternType::Prefixed);
        assert_eq!(Permission::from_code(3), Permission::Allow);
        assert_eq!(ResourceType::TransactionalId.code(), 5);
        assert_eq!(ResourceType::from_code(-1), ResourceType::Unknown);
        assert_eq!(ResourceType::from_code(8), ResourceType::Unknown);
        assert_eq!(ResourceType::User.code(), 7);
        assert_eq!(Operation::DescribeTokens.code(), 14);
        assert_eq!(PatternType::Match.code(), 2);
        assert_eq!(Permission::Deny.code(), 2);
        // Kafka's spellings, as its `toString` prints them.
        assert_eq!(ResourceType::TransactionalId.name(), "TRANSACTIONAL_ID");
        assert_eq!(ResourceType::Any.to_string(), "ANY");
        assert_eq!(Operation::Unknown.name(), "UNKNOWN");
        assert_eq!(Operation::ClusterAction.name(), "CLUSTER_ACTION");
        assert_eq!(Operation::IdempotentWrite.name(), "IDEMPOTENT_WRITE");
        assert_eq!(PatternType::Prefixed.name(), "PREFIXED");
        assert_eq!(Permission::Allow.name(), "ALLOW");
        assert_eq!(
            Operation::from_name("DESCRIBE_CONFIGS"),
            Some(Operation::DescribeConfigs)
        );
        assert_eq!(Operation::from_name("describe_configs"), None);
        assert_eq!(Operation::from_name("DescribeConfigs"), None);
    }

    #[test]
    fn validation_messages_are_kafkas() {
        use PatternType::{Literal, Match};
        use ResourceType::Topic;
        let ok = acl(
            Topic,
            "t",
            Literal,
            "User:a",
            Operation::Read,
            Permission::Allow,
        );
        assert_eq!(ok.validate(), Ok(()));
        let bad = |f: &dyn Fn(&mut AclBinding)| {
            let mut a = ok.clone();
            f(&mut a);
            a.validate().unwrap_err()
        };
        assert_eq!(
            bad(&|a| a.resource_type = ResourceType::Any),
            "Invalid resourceType ANY"
        );
        assert_eq!(
            bad(&|a| a.pattern_type = Match),
            "Invalid patternType MATCH"
        );
        assert_eq!(
            bad(&|a| a.operation = Operation::Unknown),
            "Invalid operation UNKNOWN"
        );
        assert_eq!(
            bad(&|a| a.permission = Permission::Any),
            "Invalid permissionType ANY"
        );
        assert_eq!(
            bad(&|a| a.name.clear()),
            "Resource name should not be empty"
        );
    }

    /// `ResourcePatternFilterTest`'s cases.
    #[test]
    fn pattern_filters() {
        use PatternType::{Any, Literal, Match, Prefixed};
        use ResourceType::{Group, Topic};
        let f = |rt, name: Option<&str>, pt| AclBindingFilter {
            resource_type: rt,
            name: name.map(str::to_string),
            pattern_type: pt,
            ..AclBindingFilter::any()
        };
        let a =
            |rt, name: &str, pt| acl(rt, name, pt, "User:a", Operation::Read, Permission::Allow);
        assert!(!f(Topic, None, Any).matches(&a(Group, "x", Literal)));
        assert!(f(ResourceType::Any, None, Any).matches(&a(Group, "x", Literal)));
        assert!(!f(Topic, Some("Name"), Literal).matches(&a(Topic, "Name", Prefixed)));
        assert!(f(Topic, Some("Name"), Prefixed).matches(&a(Topic, "Name", Prefixed)));
        assert!(!f(Topic, Some("Name"), Literal).matches(&a(Topic, "*", Literal)));
        assert!(f(Topic, Some("*"), Literal).matches(&a(Topic, "*", Literal)));
        assert!(f(Topic, Some("Name"), Match).matches(&a(Topic, "*", Literal)));
        assert!(f(Topic, Some("Name"), Match).matches(&a(Topic, "Name", Literal)));
        assert!(f(Topic, Some("Name"), Match).matches(&a(Topic, "Na", Prefixed)));
        assert!(!f(Topic, Some("Name"), Match).matches(&a(Topic, "Name2", Prefixed)));
        assert!(!f(Topic, Some("Name"), Match).matches(&a(Topic, "Nam", Literal)));
        assert!(f(Topic, Some("Name"), Any).matches(&a(Topic, "Name", Prefixed)));
        assert!(!f(Topic, Some("Name"), Any).matches(&a(Topic, "*", Literal)));
        assert!(!f(Topic, Some("Name"), Any).matches(&a(Topic, "Na", Prefixed)));
    }

    #[test]
    fn entry_filters_and_hosts() {
        let a = acl(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            "User:a",
            Operation::Read,
            Permission::Deny,
        );
        let mut f = AclBindingFilter::any();
        assert!(f.matches(&a));
        f.principal = Some("User:b".into());
        assert!(!f.matches(&a));
        f.principal = Some("User:a".into());
        f.permission = Permission::Allow;
        assert!(!f.matches(&a));
        f.permission = Permission::Deny;
        f.operation = Operation::Write;
        assert!(!f.matches(&a), "a filter's operation is not implied");
        let local: IpAddr = "::1".parse().unwrap();
        assert!(host_matches("0:0:0:0:0:0:0:1", local));
        assert!(host_matches("*", local));
        assert!(!host_matches("127.0.0.1", local));
        assert!(host_matches(
            "127.0.0.1",
            "::ffff:127.0.0.1".parse().unwrap()
        ));
        assert!(!host_matches("localhost", "127.0.0.1".parse().unwrap()));
    }
}
