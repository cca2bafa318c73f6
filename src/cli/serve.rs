//! `commitfs serve`: the data directory over the Kafka protocol only, with no
//! mount, for machines without `/dev/fuse`. It stays in the foreground and
//! logs to stderr; SIGTERM, SIGINT and SIGHUP stop the listener, close its
//! connections, then close the storage (the clean-shutdown marker is
//! written).

use std::path::PathBuf;

use clap::Args;
use log::{error, info};

use super::daemon::{Daemon, DaemonSpec, Ready};
use super::options::{DaemonOptions, tokens};
use super::signals::{Signals, Stop};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The data directory (Kafka's log.dir); created if missing.
    pub data_dir: PathBuf,
    /// Where to listen, as Kafka's `listeners`: NAME://HOST:PORT entries,
    /// comma-separated (port 0 picks a free port); PLAINTEXT, SSL,
    /// SASL_PLAINTEXT or SASL_SSL. PLAINTEXT has no authentication: anyone
    /// who can reach it can read and write every partition.
    #[arg(long, value_name = "PLAINTEXT://HOST:PORT")]
    pub listeners: Option<String>,
    /// Options, comma-separated, repeatable: Kafka topic configs as defaults
    /// (segment.bytes=1048576, ...), ro, log.retention.check.interval.ms=N,
    /// max.broker.partitions=N (default: what the descriptors hold, at most
    /// 10000),
    /// and the broker settings listeners, advertised.listeners,
    /// auto.create.topics.enable, num.partitions, socket.request.max.bytes,
    /// node.id, offsets.topic.num.partitions (default 1),
    /// group.initial.rebalance.delay.ms, group.min.session.timeout.ms,
    /// group.max.session.timeout.ms, group.max.size, offsets.retention.minutes,
    /// offsets.retention.check.interval.ms, offset.metadata.max.bytes,
    /// transaction.state.log.num.partitions (default 1),
    /// transaction.max.timeout.ms,
    /// transaction.abort.timed.out.transaction.cleanup.interval.ms,
    /// transaction.remove.expired.transaction.cleanup.interval.ms,
    /// transactional.id.expiration.ms, and
    /// the listener's limits
    /// max.connections, max.connections.per.ip,
    /// max.connections.per.ip.overrides, connections.max.idle.ms,
    /// queued.max.request.bytes, num.network.threads.
    /// The TLS and SASL settings (ssl.*, sasl.enabled.mechanisms,
    /// connection.failed.authentication.delay.ms, and listener-prefixed
    /// listener.name.NAME.ssl.*) are -o options too. An -o that starts with
    /// a list setting (listeners, ssl.enabled.protocols,
    /// sasl.enabled.mechanisms, ...) is that one setting, commas and all.
    #[arg(short = 'o', value_name = "OPT[,OPT...]", action = clap::ArgAction::Append)]
    pub options: Vec<String>,
    /// A SCRAM user to create or change before serving, in kafka-storage's
    /// --add-scram form: 'SCRAM-SHA-256=[name=alice,password=alice-secret]'
    /// (repeatable). Only the salted, iterated hash is stored.
    #[arg(
        long = "add-scram",
        value_name = "MECHANISM=[name=USER,password=PASSWORD]"
    )]
    pub add_scram: Vec<String>,
}

fn parse_options(args: &ServeArgs) -> Result<DaemonOptions, String> {
    let mut o = DaemonOptions::default();
    for tok in tokens(&args.options) {
        if !o.take(tok)? {
            return Err(format!("unknown option {tok:?}"));
        }
    }
    if let Some(l) = &args.listeners {
        o.kafka.set("listeners", l)?;
    }
    for text in &args.add_scram {
        // Checked now; applied when the listener opens the store.
        commitfs::kafka::auth::parse_add_scram(text)?;
        o.kafka.add_scram.push(text.clone());
    }
    o.check()?;
    if !o.kafka.has_listeners() {
        return Err(
            "nothing to serve: give --listeners PLAINTEXT://HOST:PORT (the listener is off by default)"
                .to_string(),
        );
    }
    Ok(o)
}

pub fn run(args: ServeArgs) -> i32 {
    let opts = match parse_options(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("commitfs: {e}");
            return 2;
        }
    };
    super::logging::init(None);
    match serve(&args, opts) {
        Ok(()) => 0,
        Err(e) => {
            error!("{e}");
            1
        }
    }
}

fn serve(args: &ServeArgs, opts: DaemonOptions) -> Result<(), String> {
    let signals = Signals::block();
    if !opts.read_only {
        std::fs::create_dir_all(&args.data_dir)
            .map_err(|e| format!("cannot create {}: {e}", args.data_dir.display()))?;
    }
    let data = args
        .data_dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", args.data_dir.display()))?;
    let ready = Ready::from_fd(None);
    let spec = DaemonSpec {
        data: &data,
        options: &opts,
        command: "serve",
        needs_listener: true,
        ready: &ready,
    };
    let daemon = Daemon::start(&spec)?;
    let (manager, server) = (daemon.storage(), daemon.kafka().expect("a listener"));
    let addrs: Vec<String> = server.local_addrs().iter().map(|a| a.to_string()).collect();
    if let Err(e) = manager.note_holder(&format!("served over Kafka on {}", addrs.join(", "))) {
        log::warn!("could not note the listener in {}: {e}", data.display());
    }
    info!(
        "Serving {}{} over Kafka on {}",
        data.display(),
        if opts.read_only { " read-only" } else { "" },
        addrs.join(", ")
    );
    if let Stop::Asked(name) = signals.wait() {
        info!("Received {name}, stopping the Kafka listener");
    }
    daemon.stop()?;
    info!("Shutdown of {} complete", data.display());
    Ok(())
}
