//! `commitfs completions` and `commitfs man`, generated from the clap definitions.
//!
//! clap_complete's scripts complete subcommands and flags. `-o` takes a
//! comma-separated list, which they cannot complete, so each script gets a
//! small addition that completes the option after the last comma: the Kafka
//! topic configs (`segment.bytes=`, ...), the mount options, and the values of
//! the configs that have a fixed set.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, CommandFactory, ValueEnum};
use clap_mangen::Man;
use commitfs::storage::CONFIG_NAMES;

use super::Cli;

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to print the script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// A command (mount, dump, check, ...): print its own page instead.
    pub command: Option<String>,
    /// Write every page (commitfs.1, commitfs-mount.1, ...) into this
    /// directory, e.g. /usr/local/share/man/man1, instead of printing one.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub out_dir: Option<PathBuf>,
}

/// What `commitfs mount -o` takes besides the topic configs (see
/// `mount::parse_options`). A name ending in `=` takes a value.
const MOUNT_OPTIONS: &[&str] = &[
    "ro",
    "rw",
    "allow_other",
    "allow_root",
    "auto_unmount",
    "default_permissions",
    "dev",
    "nodev",
    "suid",
    "nosuid",
    "exec",
    "noexec",
    "atime",
    "noatime",
    "sync",
    "async",
    "dirsync",
    "log.retention.check.interval.ms=",
    "max.broker.partitions=",
    "fsname=",
    "subtype=",
    "listeners=",
    "advertised.listeners=",
    "listener.security.protocol.map=",
    "auto.create.topics.enable=",
    "num.partitions=",
    "socket.request.max.bytes=",
    "node.id=",
    "offsets.topic.num.partitions=",
    "group.initial.rebalance.delay.ms=",
    "group.min.session.timeout.ms=",
    "group.max.session.timeout.ms=",
    "group.max.size=",
    "offsets.retention.minutes=",
    "offsets.retention.check.interval.ms=",
    "offset.metadata.max.bytes=",
    "transaction.state.log.num.partitions=",
    "transaction.max.timeout.ms=",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=",
    "transaction.remove.expired.transaction.cleanup.interval.ms=",
    "transactional.id.expiration.ms=",
    "max.connections=",
    "max.connections.per.ip=",
    "max.connections.per.ip.overrides=",
    "connections.max.idle.ms=",
    "queued.max.request.bytes=",
    "num.network.threads=",
    "daemon.log.max.bytes=",
    "daemon.log.backup.count=",
];

/// The values of the configs that take one of a fixed set.
const CONFIG_VALUES: &[(&str, &[&str])] = &[
    (
        "compression.type",
        &["producer", "none", "gzip", "snappy", "lz4", "zstd"],
    ),
    ("parse.key", &["true", "false"]),
    ("message.timestamp.type", &["CreateTime", "LogAppendTime"]),
    // `true` is refused: there is no remote storage system to turn on.
    ("remote.storage.enable", &["false"]),
    ("remote.log.copy.disable", &["true", "false"]),
    ("remote.log.delete.on.disable", &["true", "false"]),
    ("auto.create.topics.enable", &["true", "false"]),
    // `-o` splits at commas: a list's items are given with `;`.
    ("cleanup.policy", &["delete", "compact", "compact;delete"]),
    (
        "log.cleanup.policy",
        &["delete", "compact", "compact;delete"],
    ),
    ("log.cleaner.enable", &["true", "false"]),
];

/// `KEY=` for every topic config: what `check -o` takes.
fn config_keys() -> Vec<String> {
    CONFIG_NAMES.iter().map(|n| format!("{n}=")).collect()
}

/// Everything `mount -o` takes.
fn mount_keys() -> Vec<String> {
    let mut keys = config_keys();
    let line_format = commitfs::backend::line_format::NAMES.iter();
    keys.extend(line_format.map(|n| format!("{n}=")));
    keys.extend(MOUNT_OPTIONS.iter().map(|s| s.to_string()));
    // The log cleaner's settings, and the broker names of the topic configs it reads.
    let cleaner = commitfs::storage::cleaner::CLEANER_CONFIG_NAMES.iter();
    keys.extend(cleaner.map(|n| format!("{n}=")));
    let synonyms = commitfs::storage::cleaner::TOPIC_SYNONYMS.iter();
    keys.extend(synonyms.map(|(n, _)| format!("{n}=")));
    let remote = commitfs::storage::remote_log_config::REMOTE_LOG_CONFIG_NAMES.iter();
    keys.extend(remote.map(|n| format!("{n}=")));
    keys
}

pub fn run(args: CompletionsArgs) -> i32 {
    let (shell, extend): (_, fn(String) -> String) = match args.shell {
        Shell::Bash => (clap_complete::Shell::Bash, bash),
        Shell::Zsh => (clap_complete::Shell::Zsh, zsh),
        Shell::Fish => (clap_complete::Shell::Fish, fish),
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "commitfs", &mut out);
    print!("{}", extend(String::from_utf8_lossy(&out).into_owned()));
    0
}

/// A wrapper around clap's `_commitfs` that completes `-o` values itself.
fn bash(script: String) -> String {
    let values: String = CONFIG_VALUES
        .iter()
        .map(|(k, v)| format!("            {k}) vals=\"{}\" ;;\n", v.join(" ")))
        .collect();
    format!(
        r#"{script}
# -o takes OPT[,OPT...]: complete the option after the last comma, and the
# value of a config with a fixed set of values. Anything else goes to _commitfs.
_commitfs_o() {{
    local line=${{COMP_LINE:0:COMP_POINT}} w sub="" prev="" word="" prefix="" value
    local -a words found
    read -r -a words <<< "$line"
    [[ $line =~ [[:space:]]$ ]] && words+=("")
    for w in "${{words[@]:1}}"; do
        case $w in mount|check) sub=$w; break ;; esac
    done
    local n=${{#words[@]}}
    word=${{words[n-1]}}
    (( n >= 2 )) && prev=${{words[n-2]}}
    if [[ -n $sub && $prev == -o ]]; then
        value=$word
    elif [[ -n $sub && $word == -o?* ]]; then
        prefix=-o
        value=${{word#-o}}
    else
        _commitfs "$@"
        return
    fi
    local keys="{mount_keys}"
    [[ $sub == check ]] && keys="{config_keys}"
    local head="" part=$value
    if [[ $value == *,* ]]; then
        head=${{value%,*}},
        part=${{value##*,}}
    fi
    if [[ $part == *=* ]]; then
        local key=${{part%%=*}} vals=""
        case $key in
{values}        esac
        found=( $(compgen -W "$vals" -P "$key=" -- "${{part#*=}}") )
    else
        found=( $(compgen -W "$keys" -- "$part") )
    fi
    # Bash replaces only its own current word ($2), which starts after the last
    # COMP_WORDBREAKS character in the word (= and : by default).
    local cut=$(( ${{#word}} - ${{#2}} )) c
    (( cut < 0 )) && cut=0
    COMPREPLY=()
    for c in "${{found[@]}}"; do
        c=$prefix$head$c
        COMPREPLY+=( "${{c:cut}}" )
    done
    if [[ ${{#COMPREPLY[@]}} -eq 1 && ${{COMPREPLY[0]}} == *= ]]; then
        compopt -o nospace 2>/dev/null
    fi
    [[ ${{#COMPREPLY[@]}} -eq 0 ]] && compopt +o default 2>/dev/null
    return 0
}}

if [[ "${{BASH_VERSINFO[0]}}" -eq 4 && "${{BASH_VERSINFO[1]}}" -ge 4 || "${{BASH_VERSINFO[0]}}" -gt 4 ]]; then
    complete -F _commitfs_o -o nosort -o bashdefault -o default commitfs
else
    complete -F _commitfs_o -o bashdefault -o default commitfs
fi
"#,
        mount_keys = mount_keys().join(" "),
        config_keys = config_keys().join(" "),
    )
}

/// `_values -s ,` for `-o`, in place of clap's `_default`.
fn zsh(script: String) -> String {
    let spec = |keys: Vec<String>| -> String {
        keys.iter()
            .map(|k| match k.strip_suffix('=') {
                None => format!(" \\\n        '{k}'"),
                Some(name) => {
                    let action = CONFIG_VALUES
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map_or(String::new(), |(_, v)| format!("({})", v.join(" ")));
                    format!(" \\\n        '{name}:value:{action}'")
                }
            })
            .collect()
    };
    let functions = format!(
        "(( $+functions[_commitfs_mount_options] )) ||\n\
         _commitfs_mount_options() {{\n    _values -s , 'option'{}\n}}\n\
         (( $+functions[_commitfs_config_options] )) ||\n\
         _commitfs_config_options() {{\n    _values -s , 'config'{}\n}}\n\n",
        spec(mount_keys()),
        spec(config_keys()),
    );
    let tail = "if [ \"$funcstack[1]\" = \"_commitfs\" ]; then";
    script
        .replace(
            ":OPT[,OPT...]:_default'",
            ":OPT[,OPT...]:_commitfs_mount_options'",
        )
        .replace(
            ":KEY=VALUE[,KEY=VALUE]:_default'",
            ":KEY=VALUE[,KEY=VALUE]:_commitfs_config_options'",
        )
        .replacen(tail, &format!("{functions}{tail}"), 1)
}

/// `__fish_complete_list ,` over the keys, after clap's `-o` lines.
fn fish(script: String) -> String {
    let with_values = |keys: Vec<String>| -> String {
        let mut all = keys.clone();
        for (k, vals) in CONFIG_VALUES {
            all.extend(vals.iter().map(|v| format!("{k}={v}")));
        }
        all.join(" ")
    };
    format!(
        "{script}
# -o takes OPT[,OPT...]: complete each comma-separated option.
function __commitfs_mount_options
    printf '%s\\n' {mount}
end
function __commitfs_config_options
    printf '%s\\n' {config}
end
complete -c commitfs -n \"__fish_commitfs_using_subcommand mount\" -s o -x -a \"(__fish_complete_list , __commitfs_mount_options)\"
complete -c commitfs -n \"__fish_commitfs_using_subcommand check\" -s o -x -a \"(__fish_complete_list , __commitfs_config_options)\"
",
        mount = with_values(mount_keys()),
        config = with_values(config_keys()),
    )
}

pub fn man(args: ManArgs) -> i32 {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    if let Some(dir) = &args.out_dir {
        let pages = std::iter::once(&cmd).chain(cmd.get_subcommands());
        for page in pages {
            let path = dir.join(Man::new(page.clone()).get_filename());
            let written = std::fs::File::create(&path).and_then(|mut f| render(page, &mut f));
            if let Err(e) = written {
                eprintln!("commitfs man: {}: {e}", path.display());
                return 1;
            }
            println!("{}", path.display());
        }
        return 0;
    }
    let page = match args.command.as_deref() {
        None => &cmd,
        Some(name) => match cmd.find_subcommand(name) {
            Some(sub) => sub,
            None => {
                eprintln!("commitfs man: no command {name:?}");
                return 2;
            }
        },
    };
    match render(page, &mut std::io::stdout().lock()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("commitfs man: {e}");
            1
        }
    }
}

/// clap_mangen's sections, with the fstab section (in place of its plain
/// EXTRA rendering of the help text) on the mount page, and SEE ALSO.
fn render(page: &clap::Command, w: &mut dyn Write) -> std::io::Result<()> {
    let man = Man::new(page.clone()).source(format!("commitfs {}", env!("CARGO_PKG_VERSION")));
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    if page.has_subcommands() {
        man.render_subcommands_section(w)?;
    }
    let mount = page.get_name() == "mount";
    if mount {
        w.write_all(FSTAB_ROFF.as_bytes())?;
    }
    if mount || page.has_subcommands() {
        w.write_all(SEE_ALSO_ROFF.as_bytes())?;
    }
    if page.get_version().is_some() {
        man.render_version_section(w)?;
    }
    Ok(())
}

const FSTAB_ROFF: &str = r#".SH "FSTAB AND MOUNT(8)"
mount(8) runs \fB/sbin/mount.fuse.commitfs\fR for filesystems of type
\fBfuse.commitfs\fR. Install it once as a link to commitfs:
.PP
.RS
.nf
ln \-s "$(command \-v commitfs)" /sbin/mount.fuse.commitfs
.fi
.RE
.PP
Then an fstab(5) line such as
.PP
.RS
.nf
/var/lib/commitfs  /mnt/logs  fuse.commitfs  segment.bytes=1048576,nofail  0 0
.fi
.RE
.PP
works with \fBmount /mnt/logs\fR, \fBmount \-a\fR and \fBumount /mnt/logs\fR, and so does
\fBmount \-t fuse.commitfs\fR \fIDATA_DIR MOUNTPOINT\fR \fB\-o\fR \fIOPTIONS\fR.
The helper mounts as \fBcommitfs mount\fR does and returns once the mount is live.
Options of mount(8), fstab and systemd (\fBdefaults\fR, \fBnoauto\fR, \fBnofail\fR,
\fBuser\fR, \fB_netdev\fR, \fBx\-systemd.*\fR, ...) are accepted and ignored.
"#;

const SEE_ALSO_ROFF: &str = r#".SH "SEE ALSO"
mount(8), umount(8), fstab(5), systemd.mount(5)
"#;

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn every_completed_option_is_one_mount_takes() {
        for k in mount_keys() {
            let opt = if k.ends_with('=') {
                match k.as_str() {
                    "segment.bytes=" => format!("{k}1048576"),
                    "compression.type=" => format!("{k}gzip"),
                    "parse.key=" => format!("{k}true"),
                    "key.separator=" => format!("{k}:"),
                    "message.timestamp.type=" => format!("{k}LogAppendTime"),
                    "cleanup.policy=" | "log.cleanup.policy=" => format!("{k}compact"),
                    "min.cleanable.dirty.ratio=" | "log.cleaner.min.cleanable.ratio=" => {
                        format!("{k}0.5")
                    }
                    "log.cleaner.enable=" => format!("{k}false"),
                    // `true` of the first two is refused: no remote storage system yet.
                    "remote.storage.enable=" | "remote.log.storage.system.enable=" => {
                        format!("{k}false")
                    }
                    "remote.log.copy.disable=" | "remote.log.delete.on.disable=" => {
                        format!("{k}true")
                    }
                    "log.cleaner.dedupe.buffer.size=" => format!("{k}134217728"),
                    "log.cleaner.threads=" => format!("{k}2"),
                    "auto.create.topics.enable=" => format!("{k}true"),
                    "listeners=" => format!("{k}PLAINTEXT://127.0.0.1:9092"),
                    // A list setting is its own -o: the listeners go in another.
                    "listener.security.protocol.map=" => {
                        format!("{k}PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT")
                    }
                    "advertised.listeners=" => format!("{k}PLAINTEXT://h:1"),
                    "max.connections.per.ip.overrides=" => format!("{k}127.0.0.1:10"),
                    "queued.max.request.bytes=" => format!("{k}104857600"),
                    "daemon.log.max.bytes=" => format!("{k}1048576"),
                    "daemon.log.backup.count=" => format!("{k}3"),
                    _ => format!("{k}1000"),
                }
            } else {
                k.clone()
            };
            let mut opts = vec![opt.clone()];
            if opt.starts_with("advertised.listeners=")
                || opt.starts_with("listener.security.protocol.map=")
            {
                opts.push("listeners=PLAINTEXT://127.0.0.1:9092".to_string());
            }
            super::super::mount::check_options(&opts).unwrap_or_else(|e| panic!("{opt}: {e}"));
        }
        for (k, vals) in CONFIG_VALUES {
            for v in *vals {
                let opt = format!("{k}={v}");
                super::super::mount::check_options(std::slice::from_ref(&opt))
                    .unwrap_or_else(|e| panic!("{opt}: {e}"));
            }
        }
    }

    #[test]
    fn zsh_and_fish_hooks_find_their_places() {
        let generate = |shell| {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "commitfs", &mut out);
            String::from_utf8(out).unwrap()
        };
        let z = zsh(generate(clap_complete::Shell::Zsh));
        assert!(z.contains(":OPT[,OPT...]:_commitfs_mount_options'"), "{z}");
        assert!(z.contains(":KEY=VALUE[,KEY=VALUE]:_commitfs_config_options'"));
        assert!(z.contains("_commitfs_mount_options() {"));
        assert!(!z.contains("OPT...]:_default"));
        let f = fish(generate(clap_complete::Shell::Fish));
        assert!(f.contains("__fish_commitfs_using_subcommand mount\" -s o -x"));
        assert!(f.contains("function __fish_commitfs_using_subcommand"));
    }
}
