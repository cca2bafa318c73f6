//! CreateAcls, DescribeAcls and DeleteAcls, as Kafka's `AclApis` and
//! `AclControlManager` answer them: ALTER (create, delete) or DESCRIBE
//! on the CLUSTER first, SECURITY_DISABLED with no authorizer.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_acls_request::{AclCreation, CreateAclsRequest};
use kafka_protocol::messages::create_acls_response::{AclCreationResult, CreateAclsResponse};
use kafka_protocol::messages::delete_acls_request::{DeleteAclsFilter, DeleteAclsRequest};
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl, DeleteAclsResponse,
};
use kafka_protocol::messages::describe_acls_request::DescribeAclsRequest;
use kafka_protocol::messages::describe_acls_response::{
    AclDescription, DescribeAclsResource, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use log::info;

use super::model::{
    AclBinding, AclBindingFilter, CLUSTER_NAME, Operation, PatternType, Permission, ResourceType,
};
use super::{AuthHelper, Authorizer};
use crate::error::{Family, code_for};
use crate::network::session::Session;
use commitfs_storage::StorageError;

/// `CreateAcls` and `DeleteAcls`' text with no authorizer.
pub const NO_AUTHORIZER: &str = "No Authorizer is configured.";
/// `DescribeAcls`' text with no authorizer.
pub const NO_AUTHORIZER_ON_BROKER: &str = "No Authorizer is configured on the broker";
/// `Errors.CLUSTER_AUTHORIZATION_FAILED`'s default message.
pub const CLUSTER_DENIED: &str = "Cluster authorization failed.";

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn opt_text(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

/// A store that failed, in the cluster metadata's row of the error table.
fn stored_error(e: &StorageError) -> (i16, String) {
    let code = code_for(Family::Metadata, "storing the ACLs", e);
    let text = match e {
        StorageError::ReadOnly => "the data directory is served read-only".to_string(),
        _ => format!("cannot store the ACLs: {e}"),
    };
    (code.code(), text)
}

fn binding(c: &AclCreation) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::from_code(c.resource_type),
        name: c.resource_name.to_string(),
        pattern_type: PatternType::from_code(c.resource_pattern_type),
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: Operation::from_code(c.operation),
        permission: Permission::from_code(c.permission_type),
    }
}

/// The authorizer, once the principal may `op` the CLUSTER; else the code
/// and text every answer gets (`no_authorizer` without one).
fn gate<'a>(
    b: &'a impl AuthHelper,
    s: &Session,
    op: Operation,
    no_authorizer: &'static str,
) -> Result<&'a Authorizer, (i16, &'static str)> {
    if !super::cluster(b, s, op) {
        return Err((
            ResponseError::ClusterAuthorizationFailed.code(),
            CLUSTER_DENIED,
        ));
    }
    b.authorizer()
        .ok_or((ResponseError::SecurityDisabled.code(), no_authorizer))
}

fn filter_of(f: &DeleteAclsFilter) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: ResourceType::from_code(f.resource_type_filter),
        name: opt_text(&f.resource_name_filter),
        pattern_type: PatternType::from_code(f.pattern_type_filter),
        principal: opt_text(&f.principal_filter),
        host: opt_text(&f.host_filter),
        operation: Operation::from_code(f.operation),
        permission: Permission::from_code(f.permission_type),
    }
}

/// `AclApis.handleCreateAcls`, then `AclControlManager.createAcls`:
/// each creation refused alone, the rest stored in one rewrite.
pub fn create(b: &impl AuthHelper, s: &Session, r: CreateAclsRequest) -> CreateAclsResponse {
    let fail = |code: i16, message: &str| {
        AclCreationResult::default()
            .with_error_code(code)
            .with_error_message(Some(text(message)))
    };
    let all = |code: i16, message: &str| {
        CreateAclsResponse::default()
            .with_results(r.creations.iter().map(|_| fail(code, message)).collect())
    };
    let authorizer = match gate(b, s, Operation::Alter, NO_AUTHORIZER) {
        Ok(authorizer) => authorizer,
        Err((code, message)) => return all(code, message),
    };
    let invalid = ResponseError::InvalidRequest.code();
    let checked: Vec<Result<AclBinding, String>> = (r.creations.iter())
        .map(|c| {
            let acl = binding(c);
            if acl.resource_type == ResourceType::Cluster && acl.name != CLUSTER_NAME {
                return Err(format!(
                    "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
                ));
            }
            if acl.name.is_empty() {
                return Err("Invalid empty resource name".to_string());
            }
            acl.validate()?;
            Ok(acl)
        })
        .collect();
    let valid: Vec<AclBinding> = checked.iter().filter_map(|c| c.clone().ok()).collect();
    let before = authorizer.store().snapshot();
    let stored = if valid.is_empty() {
        Ok(())
    } else {
        authorizer
            .store()
            .create(&valid)
            .map_err(|e| stored_error(&e))
    };
    if stored.is_ok() {
        let added: std::collections::BTreeSet<&AclBinding> =
            valid.iter().filter(|a| !before.contains(*a)).collect();
        for acl in added {
            info!("Kafka: {} added ACL {acl}", s.principal);
        }
    }
    let results = (checked.iter())
        .map(|c| match (c, &stored) {
            (Err(why), _) => fail(invalid, why),
            (Ok(_), Err((code, why))) => fail(*code, why),
            (Ok(_), Ok(())) => AclCreationResult::default(),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

/// `AclApis.handleDescribeAcls`: the matching ACLs grouped by pattern.
pub fn describe(b: &impl AuthHelper, s: &Session, r: DescribeAclsRequest) -> DescribeAclsResponse {
    let error = |code: i16, message: &str| {
        DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(Some(text(message)))
    };
    let authorizer = match gate(b, s, Operation::Describe, NO_AUTHORIZER_ON_BROKER) {
        Ok(authorizer) => authorizer,
        Err((code, message)) => return error(code, message),
    };
    let filter = AclBindingFilter {
        resource_type: ResourceType::from_code(r.resource_type_filter),
        name: opt_text(&r.resource_name_filter),
        pattern_type: PatternType::from_code(r.pattern_type_filter),
        principal: opt_text(&r.principal_filter),
        host: opt_text(&r.host_filter),
        operation: Operation::from_code(r.operation),
        permission: Permission::from_code(r.permission_type),
    };
    // `DescribeAclsRequest` refuses a filter with UNKNOWN in it.
    if let Err(why) = filter.validate() {
        return error(ResponseError::InvalidRequest.code(), &why);
    }
    // `DescribeAclsResponse.aclsResources`: one entry per pattern; the
    // store's order keeps a pattern's ACLs together.
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for acl in authorizer.acls(&filter) {
        let description = AclDescription::default()
            .with_principal(text(&acl.principal))
            .with_host(text(&acl.host))
            .with_operation(acl.operation.code())
            .with_permission_type(acl.permission.code());
        match resources.last_mut() {
            Some(last)
                if last.resource_type == acl.resource_type.code()
                    && *last.resource_name == *acl.name
                    && last.pattern_type == acl.pattern_type.code() =>
            {
                last.acls.push(description)
            }
            _ => resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(acl.resource_type.code())
                    .with_resource_name(text(&acl.name))
                    .with_pattern_type(acl.pattern_type.code())
                    .with_acls(vec![description]),
            ),
        }
    }
    DescribeAclsResponse::default().with_resources(resources)
}

/// `AclApis.handleDeleteAcls`, then `AclControlManager.deleteAcls`: per
/// filter, what it removed.
pub fn delete(b: &impl AuthHelper, s: &Session, r: DeleteAclsRequest) -> DeleteAclsResponse {
    let fail = |code: i16, message: &str| {
        DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(Some(text(message)))
    };
    let all = |code: i16, message: &str| {
        DeleteAclsResponse::default()
            .with_filter_results(r.filters.iter().map(|_| fail(code, message)).collect())
    };
    let authorizer = match gate(b, s, Operation::Alter, NO_AUTHORIZER) {
        Ok(authorizer) => authorizer,
        Err((code, message)) => return all(code, message),
    };
    let filters: Vec<Result<AclBindingFilter, String>> = (r.filters.iter())
        .map(|f| {
            let filter = filter_of(f);
            filter.validate().map(|()| filter)
        })
        .collect();
    let valid: Vec<AclBindingFilter> = filters.iter().filter_map(|f| f.clone().ok()).collect();
    let removed = authorizer
        .store()
        .delete(&valid)
        .map_err(|e| stored_error(&e));
    if let Ok(removed) = &removed {
        let mut gone: Vec<&AclBinding> = removed.iter().flatten().collect();
        gone.sort();
        gone.dedup();
        for acl in gone {
            info!("Kafka: {} removed ACL {acl}", s.principal);
        }
    }
    let mut removed_each = match &removed {
        Ok(v) => v.clone().into_iter(),
        Err(_) => Vec::new().into_iter(),
    };
    let results = (filters.iter())
        .map(|f| match (f, &removed) {
            (Err(why), _) => fail(ResponseError::InvalidRequest.code(), why),
            (Ok(_), Err((code, why))) => fail(*code, why),
            (Ok(_), Ok(_)) => {
                let acls = removed_each.next().unwrap_or_default();
                DeleteAclsFilterResult::default().with_matching_acls(
                    (acls.iter())
                        .map(|a| {
                            DeleteAclsMatchingAcl::default()
                                .with_resource_type(a.resource_type.code())
                                .with_resource_name(text(&a.name))
                                .with_pattern_type(a.pattern_type.code())
                                .with_principal(text(&a.principal))
                                .with_host(text(&a.host))
                                .with_operation(a.operation.code())
                                .with_permission_type(a.permission.code())
                        })
                        .collect(),
                )
            }
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
