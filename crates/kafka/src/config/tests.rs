//! The settings' parsing and checks, in Kafka's words.

use super::*;

#[test]
fn listener_syntax() {
    let map = protocol_map(DEFAULT_PROTOCOL_MAP).unwrap();
    let l = parse_listeners("PLAINTEXT://127.0.0.1:9092", &map).unwrap();
    assert_eq!(l[0].name, "PLAINTEXT");
    assert_eq!(l[0].protocol, SecurityProtocol::Plaintext);
    assert_eq!(l[0].endpoint.host, "127.0.0.1");
    assert_eq!(l[0].to_string(), "PLAINTEXT://127.0.0.1:9092");
    let l = parse_listeners(" plaintext://[::1]:9092 , SSL://h:1", &map).unwrap();
    assert_eq!(l[0].endpoint.host, "::1");
    assert_eq!(l[0].to_string(), "PLAINTEXT://[::1]:9092");
    assert_eq!(l[1].protocol, SecurityProtocol::Ssl);
    let bad = |text: &str| parse_listeners(text, &map).unwrap_err();
    assert_eq!(
        bad("127.0.0.1:9092"),
        "Error creating broker listeners from '127.0.0.1:9092': Unable to parse \
         127.0.0.1:9092 to a broker endpoint"
    );
    assert_eq!(
        bad("PLAINTEXT://h:x"),
        "Error creating broker listeners from 'PLAINTEXT://h:x': Unable to parse \
         PLAINTEXT://h:x to a broker endpoint"
    );
    assert_eq!(
        bad("INTERNAL://h:1"),
        "Error creating broker listeners from 'INTERNAL://h:1': No security protocol \
         defined for listener INTERNAL"
    );
    assert!(bad("PLAINTEXT://:9092").contains("give the address to bind"));
    assert!(bad("PLAINTEXT://h:70000").contains("not a port number"));
}

#[test]
fn listener_checks_in_kafkas_words() {
    let config = |pairs: &[(&str, &str)]| {
        let mut c = ListenerConfig::default();
        for (k, v) in pairs {
            c.set(k, v).unwrap();
        }
        c
    };
    let two = "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0";
    let map = "PLAINTEXT:PLAINTEXT,internal:plaintext";
    let c = config(&[("listeners", two), ("listener.security.protocol.map", map)]);
    c.check().unwrap();
    let names: Vec<String> = c.listeners().unwrap().into_iter().map(|l| l.name).collect();
    assert_eq!(names, ["PLAINTEXT", "INTERNAL"]);
    // A given map replaces the default one.
    let c = config(&[
        ("listeners", "PLAINTEXT://h:1"),
        ("listener.security.protocol.map", "INTERNAL:PLAINTEXT"),
    ]);
    assert_eq!(
        c.check().unwrap_err(),
        "Error creating broker listeners from 'PLAINTEXT://h:1': No security protocol \
         defined for listener PLAINTEXT"
    );
    let err = |pairs: &[(&str, &str)]| config(pairs).check().unwrap_err();
    assert_eq!(
        err(&[
            ("listeners", "PLAINTEXT://h:1"),
            ("listener.security.protocol.map", "PLAINTEXT:TLS")
        ]),
        "Invalid security protocol `TLS` defined in listener.security.protocol.map"
    );
    assert_eq!(
        err(&[
            ("listeners", "PLAINTEXT://h:1"),
            ("listener.security.protocol.map", "PLAINTEXT")
        ]),
        "Error parsing configuration property 'listener.security.protocol.map': begin 0, \
         end -1, length 9"
    );
    assert_eq!(
        err(&[("listeners", "PLAINTEXT://a:1,plaintext://b:2")]),
        "requirement failed: Each listener must have a different name, listeners: \
         PLAINTEXT://a:1,plaintext://b:2"
    );
    assert_eq!(
        err(&[("listeners", "PLAINTEXT://a:1,SSL://b:1")]),
        "requirement failed: Each listener must have a different port, listeners: \
         PLAINTEXT://a:1,SSL://b:1"
    );
    assert_eq!(
        err(&[("listeners", "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.2:1")]),
        "requirement failed: If you have two listeners on the same port then one needs \
         to be IPv4 and the other IPv6, listeners: PLAINTEXT://127.0.0.1:1,SSL://127.0.0.2:1, \
         port: 1"
    );
    // One IPv4 and one IPv6 address may share a port: then only the
    // missing keystore stops it.
    assert_eq!(
        err(&[("listeners", "PLAINTEXT://127.0.0.1:1,SSL://[::1]:1")]),
        "listener SSL://[::1]:1: a TLS listener needs a key and a certificate: set \
         ssl.keystore.location (with ssl.keystore.type=PEM) or \
         ssl.keystore.certificate.chain and ssl.keystore.key"
    );
    assert_eq!(
        err(&[
            ("listeners", "PLAINTEXT://h:1"),
            ("advertised.listeners", "PLAINTEXT://h:1,OTHER://h:2"),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"
            )
        ]),
        "requirement failed: advertised.listeners listener names must be equal to or a \
         subset of the ones defined in listeners. Found PLAINTEXT,OTHER. The valid options \
         based on the current configuration are PLAINTEXT"
    );
    assert_eq!(
        err(&[
            ("listeners", "PLAINTEXT://0.0.0.0:1"),
            ("advertised.listeners", "PLAINTEXT://0.0.0.0:1")
        ]),
        "requirement failed: advertised.listeners cannot use the nonroutable meta-address \
         0.0.0.0. Use a routable IP address."
    );
    // Advertised ports may repeat.
    config(&[
        ("listeners", two),
        ("listener.security.protocol.map", map),
        (
            "advertised.listeners",
            "PLAINTEXT://h:9092,INTERNAL://h:9092",
        ),
    ])
    .check()
    .unwrap();
}

#[test]
fn broker_configs() {
    let mut c = ListenerConfig::default();
    assert!(c.set("auto.create.topics.enable", "true").unwrap());
    assert!(c.auto_create_topics);
    assert!(c.set("num.partitions", "0").is_err());
    assert!(!c.set("segment.bytes", "1").unwrap());
    c.set("advertised.listeners", "PLAINTEXT://h:1").unwrap();
    assert!(c.check().is_err());
    c.set("listeners", "PLAINTEXT://127.0.0.1:0").unwrap();
    assert!(c.check().is_ok());
}

#[test]
fn socket_server_limits() {
    let c = ListenerConfig::default();
    assert_eq!(c.max_connections, 2_147_483_647);
    assert_eq!(c.max_connections_per_ip, 2_147_483_647);
    assert_eq!(c.connections_max_idle_ms, 600_000);
    assert_eq!(c.num_network_threads, 3);
    assert_eq!(c.queued_max_request_bytes(), 104_857_600);
    let err = |name: &str, value: &str| {
        let mut c = ListenerConfig::default();
        match c.set(name, value) {
            Err(e) => e,
            Ok(_) => c.check().expect_err(&format!("{name}={value} refused")),
        }
    };
    assert_eq!(
        err("max.connections", "-1"),
        "Invalid value -1 for configuration max.connections: Value must be at least 0"
    );
    assert_eq!(
        err("max.connections", "x"),
        "Invalid value x for configuration max.connections: Not a number of type INT"
    );
    assert_eq!(
        err("max.connections", "2147483648"),
        "Invalid value 2147483648 for configuration max.connections: Not a number of type INT"
    );
    assert!(err("max.connections.per.ip", "0").contains("can be set to zero only if"));
    assert!(err("num.network.threads", "0").contains("Value must be at least 1"));
    assert!(err("connections.max.idle.ms", "100").contains("should always be less than"));
    assert!(err("queued.max.request.bytes", "1000").contains("must be larger or equal"));
    assert!(err("max.connections.per.ip.overrides", "nocount").contains("HOST:COUNT"));
    let mut c = ListenerConfig::default();
    c.set("connections.max.idle.ms", "-1").unwrap();
    c.set("queued.max.request.bytes", "-1").unwrap();
    c.set("max.connections.per.ip", "0").unwrap();
    c.set("max.connections.per.ip.overrides", "127.0.0.1:5;[::1]:7")
        .unwrap();
    assert!(c.check().is_ok());
    assert_eq!(c.idle_timeout(), None);
    assert_eq!(c.queued_max_request_bytes(), -1);
    assert_eq!(c.max_connections_for("127.0.0.1".parse().unwrap()), 5);
    assert_eq!(c.max_connections_for("::1".parse().unwrap()), 7);
    assert_eq!(c.max_connections_for("10.0.0.1".parse().unwrap()), 0);
    // The pool may equal the frame limit, and follows it when not given.
    let mut c = ListenerConfig::default();
    c.set("socket.request.max.bytes", "200000000").unwrap();
    assert!(c.check().is_ok());
    assert_eq!(c.queued_max_request_bytes(), 200_000_000);
}
/// The group coordinator's limits: Kafka's defaults, and its
/// validators' messages (`GroupCoordinatorConfig`).
#[test]
fn group_limits() {
    let c = ListenerConfig::default();
    assert_eq!(c.groups.max_size, 2_147_483_647);
    assert_eq!(c.groups.retention_minutes, 10_080);
    assert_eq!(c.groups.retention_ms(), 604_800_000);
    assert_eq!(c.groups.retention_check, Duration::from_millis(600_000));
    assert_eq!(c.groups.metadata_max_bytes, 4096);
    let err = |name: &str, value: &str| ListenerConfig::default().set(name, value).unwrap_err();
    assert_eq!(
        err("group.max.size", "0"),
        "Invalid value 0 for configuration group.max.size: Value must be at least 1"
    );
    assert_eq!(
        err("offsets.retention.minutes", "0"),
        "Invalid value 0 for configuration offsets.retention.minutes: Value must be at least 1"
    );
    assert_eq!(
        err("offsets.retention.check.interval.ms", "0"),
        "Invalid value 0 for configuration offsets.retention.check.interval.ms: Value must be at least 1"
    );
    assert_eq!(
        err("offsets.retention.minutes", "2147483648"),
        "Invalid value 2147483648 for configuration offsets.retention.minutes: Not a number of type INT"
    );
    assert!(err("offset.metadata.max.bytes", "x").contains("Not a number of type INT"));
    let mut c = ListenerConfig::default();
    for (k, v) in [
        ("group.max.size", "3"),
        ("offsets.retention.minutes", "1"),
        ("offsets.retention.check.interval.ms", "250"),
        ("offset.metadata.max.bytes", "-1"),
    ] {
        assert!(c.set(k, v).unwrap(), "{k}");
        assert!(BROKER_CONFIG_NAMES.contains(&k), "{k}");
    }
    assert_eq!(c.groups.max_size, 3);
    assert_eq!(c.groups.retention_ms(), 60_000);
    assert_eq!(c.groups.retention_check, Duration::from_millis(250));
    assert_eq!(c.groups.metadata_max_bytes, -1);
}
#[test]
fn authorizer_settings() {
    let mut c = ListenerConfig::default();
    assert!(!c.authorizer);
    c.set("authorizer.class.name", STANDARD_AUTHORIZER).unwrap();
    assert!(c.authorizer);
    c.set("authorizer.class.name", "").unwrap();
    assert!(!c.authorizer);
    let e = c
        .set("authorizer.class.name", ZK_ACL_AUTHORIZER)
        .unwrap_err();
    assert!(e.starts_with("Invalid value kafka.security.authorizer.AclAuthorizer for configuration authorizer.class.name: "), "{e}");
    assert!(e.contains(STANDARD_AUTHORIZER), "{e}");
    assert_eq!(
        c.set("authorizer.class.name", "x.Y").unwrap_err(),
        "Invalid value x.Y for configuration authorizer.class.name: Class x.Y could not be found."
    );
    c.set("super.users", " User:admin ;User:CN=a,O=b;; ")
        .unwrap();
    assert_eq!(c.super_users, ["User:admin", "User:CN=a,O=b"]);
    c.set("allow.everyone.if.no.acl.found", "TRUE").unwrap();
    assert!(c.allow_everyone_if_no_acl);
    c.set("allow.everyone.if.no.acl.found", "yes").unwrap();
    assert!(!c.allow_everyone_if_no_acl);
    for k in AUTHORIZER_CONFIG_NAMES {
        assert!(!BROKER_CONFIG_NAMES.contains(k));
    }
}

/// DescribeConfigs lists every broker setting, in order, and says which
/// were given.
#[test]
fn every_broker_setting_is_described() {
    let mut c = ListenerConfig::default();
    c.set("listeners", "PLAINTEXT://127.0.0.1:0").unwrap();
    c.set("max.connections", "7").unwrap();
    c.set("socket.request.max.bytes", "200000000").unwrap();
    let d = c.described();
    let names: Vec<&str> = d.iter().map(|s| s.name).collect();
    assert_eq!(names, BROKER_CONFIG_NAMES);
    let get = |n: &str| d.iter().find(|s| s.name == n).unwrap().clone();
    let m = get("max.connections");
    assert!(m.given);
    assert_eq!(m.value.as_deref(), Some("7"));
    assert_eq!(m.default.as_deref(), Some("2147483647"));
    let q = get("queued.max.request.bytes");
    assert!(!q.given, "its default follows socket.request.max.bytes");
    assert_eq!(q.value.as_deref(), Some("200000000"));
    assert_eq!(q.default.as_deref(), Some("200000000"));
    assert!(!get("num.network.threads").given);
    assert_eq!(get("advertised.listeners").value, None);
    assert_eq!(get("group.max.size").kind, ConfigKind::Int);
    assert_eq!(get("connections.max.idle.ms").kind, ConfigKind::Long);
}
