//! `commitfs completions`, `commitfs man` and the mount(8) helper's calling
//! convention, run as processes. Nothing here mounts.
//!
//! The completion scripts are loaded into the shells they are for, and the
//! man pages are rendered with man(1). A missing shell or man(1) skips the
//! check with a note, unless `CI` is set: then it fails (`.ci/run` installs
//! man-db, zsh and fish).

#[path = "support/bounded.rs"]
mod bounded;

use std::path::{Path, PathBuf};
use std::process::Command;

use bounded::{run, run_with_input};

const BIN: &str = env!("CARGO_BIN_EXE_commitfs");

fn commitfs(args: &[&str]) -> String {
    let out = run(Command::new(BIN).args(args), &format!("commitfs {args:?}"));
    assert!(
        out.status.success(),
        "commitfs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Whether `tool` is on PATH. In CI a missing tool is a failure.
fn have(tool: &str, package: &str) -> bool {
    let found = run(
        Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {tool}")),
        &format!("command -v {tool}"),
    )
    .status
    .success();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{tool} is missing (package {package}); CI is set, so this is a failure, not a skip"
        );
        eprintln!("skipping: {tool} is missing (package {package})");
    }
    found
}

fn script(shell: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(format!("commitfs.{shell}"));
    std::fs::write(&path, commitfs(&["completions", shell])).expect("write script");
    (dir, path)
}

/// Completes `line` (the cursor at its end) in bash as readline does, and
/// returns COMPREPLY. COMP_WORDS are split as bash splits them: at blanks,
/// and around `=`, one of COMP_WORDBREAKS (the default also has `:`, which
/// these lines do not hold).
fn bash_complete(script: &Path, line: &str) -> Vec<String> {
    let mut words: Vec<&str> = Vec::new();
    for blank_word in line.split(' ') {
        let mut rest = blank_word;
        while let Some(i) = rest.find('=').filter(|_| rest != "=") {
            if i > 0 {
                words.push(&rest[..i]);
            }
            words.push("=");
            rest = &rest[i + 1..];
        }
        words.push(rest);
    }
    let mut bash = Command::new("bash");
    bash.arg("--norc")
        .arg("--noprofile")
        .arg("-c")
        .arg(
            r#"source "$1" || exit 9
            fn=$(complete -p commitfs | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
            [[ -n $fn ]] || { echo "no completion function for commitfs" >&2; exit 8; }
            COMP_LINE=$2
            COMP_POINT=${#COMP_LINE}
            COMP_WORDS=("${@:3}")
            COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
            "$fn" commitfs "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
            printf '%s\n' "${COMPREPLY[@]}""#,
        )
        .arg("bash")
        .arg(script)
        .arg(line)
        .args(&words);
    let out = run(&mut bash, &format!("bash completion of {line:?}"));
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "bash completion of {line:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_subcommands_and_o_keys() {
    let (_dir, s) = script("bash");
    let subcommands = bash_complete(&s, "commitfs ");
    for sub in ["mount", "dump", "check", "completions", "man"] {
        assert!(subcommands.contains(&sub.to_string()), "{subcommands:?}");
    }
    assert_eq!(bash_complete(&s, "commitfs mo"), ["mount"]);
    assert_eq!(bash_complete(&s, "commitfs mount --th"), ["--threads"]);

    let seg = bash_complete(&s, "commitfs mount -o seg");
    assert_eq!(
        seg,
        [
            "segment.bytes=",
            "segment.ms=",
            "segment.jitter.ms=",
            "segment.index.bytes="
        ]
    );
    // The key after the last comma; bash splits the word at '=', so only the
    // part after it is replaced.
    assert_eq!(
        bash_complete(&s, "commitfs mount -o ro,segment.bytes=1048576,comp"),
        ["1048576,compression.type="]
    );
    assert_eq!(
        bash_complete(&s, "commitfs mount -o compression.type=z"),
        ["zstd"]
    );
    // Mount options, also glued to -o.
    assert_eq!(
        bash_complete(&s, "commitfs mount -oallow_"),
        ["-oallow_other", "-oallow_root"]
    );
    assert_eq!(
        bash_complete(&s, "commitfs mount -o ro,log.ret"),
        ["ro,log.retention.check.interval.ms="]
    );
    // check -o takes the topic configs only.
    assert_eq!(
        bash_complete(&s, "commitfs check -o ret"),
        ["retention.ms=", "retention.bytes="]
    );
    assert!(bash_complete(&s, "commitfs check -o allow").is_empty());
    // dump's decoders of Kafka's internal topics.
    assert_eq!(
        bash_complete(&s, "commitfs dump --share"),
        ["--share-group-state-decoder"]
    );
    assert_eq!(
        bash_complete(&s, "commitfs dump --remote"),
        ["--remote-log-metadata-decoder"]
    );
}

#[test]
fn zsh_script_loads() {
    if !have("zsh", "zsh") {
        return;
    }
    let (dir, s) = script("zsh");
    let mut zsh = Command::new("zsh");
    zsh.arg("-f")
        .arg("-c")
        .arg(
            r#"autoload -Uz compinit && compinit -u -d "$2/zcompdump" && source "$1" &&
            whence -w _commitfs _commitfs_mount_options _commitfs_config_options &&
            print -r -- $_comps[commitfs]"#,
        )
        .arg("zsh")
        .arg(&s)
        .arg(dir.path())
        .env("HOME", dir.path());
    let out = run(&mut zsh, "zsh loading the completion script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "zsh: {}{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("_commitfs_mount_options: function"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("_commitfs"), "{stdout}");
}

#[test]
fn fish_completes_subcommands_and_o_keys() {
    if !have("fish", "fish") {
        return;
    }
    let (dir, s) = script("fish");
    let complete = |line: &str| -> Vec<String> {
        let out = run(
            Command::new("fish")
                .arg("--no-config")
                .arg("-c")
                .arg("source $argv[1]; and complete -C$argv[2]")
                .arg(&s)
                .arg(line)
                .env("HOME", dir.path())
                .env("XDG_CONFIG_HOME", dir.path())
                .env("XDG_DATA_HOME", dir.path()),
            &format!("fish completion of {line:?}"),
        );
        assert!(
            out.status.success(),
            "fish: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect()
    };
    let subcommands = complete("commitfs ");
    for sub in ["mount", "dump", "check", "completions", "man"] {
        assert!(subcommands.contains(&sub.to_string()), "{subcommands:?}");
    }
    let seg = complete("commitfs mount -o seg");
    assert!(seg.contains(&"segment.bytes=".to_string()), "{seg:?}");
    assert_eq!(
        complete("commitfs mount -o ro,compression.type=g"),
        ["ro,compression.type=gzip"]
    );
}

/// Renders a page with man(1); returns the text, failing on any warning.
fn render_man(page: &str) -> String {
    let out = run_with_input(
        Command::new("man")
            .args(["--warnings", "-l", "-P", "cat", "-"])
            .env("MANWIDTH", "100")
            .env("LC_ALL", "C.UTF-8"),
        "man -l",
        page.as_bytes(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "man -l failed ({}): {stderr}",
        out.status
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn man_pages_render() {
    if !have("man", "man-db") {
        return;
    }
    let main = render_man(&commitfs(&["man"]));
    assert!(
        main.contains("commitfs - Kafka partition logs as a FUSE filesystem"),
        "{main}"
    );
    for section in ["NAME", "SYNOPSIS", "SUBCOMMANDS", "SEE ALSO"] {
        assert!(main.contains(section), "{section} missing:\n{main}");
    }
    assert!(main.contains("commitfs-mount(1)"), "{main}");

    let mount = render_man(&commitfs(&["man", "mount"]));
    for text in [
        "commitfs-mount - Mount a data directory",
        "-o <OPT[,OPT...]>",
        "FSTAB AND MOUNT(8)",
        "ln -s \"$(command -v commitfs)\" /sbin/mount.fuse.commitfs",
        "fuse.commitfs  segment.bytes=1048576,nofail  0 0",
    ] {
        assert!(mount.contains(text), "{text:?} missing:\n{mount}");
    }

    let dir = tempfile::tempdir().unwrap();
    let listed = commitfs(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "commitfs-check.1",
            "commitfs-completions.1",
            "commitfs-dump.1",
            "commitfs-man.1",
            "commitfs-mount.1",
            "commitfs-serve.1",
            "commitfs.1"
        ]
    );
    assert_eq!(listed.lines().count(), names.len());
    for name in names {
        render_man(&std::fs::read_to_string(dir.path().join(name)).unwrap());
    }
}

/// The helper calling convention, through a link named as mount(8) looks
/// for it. `-f` (fake) checks the options without mounting.
#[test]
fn helper_link_takes_mount8_calling_convention() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mnt = dir.path().join("mnt");
    for name in ["mount.fuse.commitfs", "mount.commitfs"] {
        let link = dir.path().join(name);
        std::os::unix::fs::symlink(BIN, &link).unwrap();
        let run = |args: &[&str]| {
            run(
                Command::new(&link).arg(&data).arg(&mnt).args(args),
                &format!("{name} {args:?}"),
            )
        };
        let ok = run(&[
            "-f",
            "-n",
            "-s",
            "-o",
            "rw,segment.bytes=1048576,nofail,_netdev,noauto,user,x-systemd.automount,defaults",
        ]);
        assert!(
            ok.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&ok.stderr)
        );
        assert!(
            !data.exists() && !mnt.exists(),
            "a fake mount created directories"
        );

        let bad = run(&["-f", "-o", "rw,segment.bytes=16384"]);
        assert_eq!(bad.status.code(), Some(1), "mount(8)'s usage error code");
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(
            err.contains("Value must be at least 1048576"),
            "{name}: {err}"
        );
        let unknown = run(&["-f", "-o", "rw,bogus"]);
        assert_eq!(unknown.status.code(), Some(1));
        let ns = run(&["-N", "/proc/1/ns/mnt"]);
        assert_eq!(ns.status.code(), Some(1));
        let other = run(&["-f", "-t", "fuse.sshfs"]);
        assert_eq!(other.status.code(), Some(1));
    }

    // fuse's mount.fuse form reaches plain commitfs: it fails, and says why.
    let out = run(
        Command::new(BIN)
            .arg(&data)
            .arg(&mnt)
            .args(["-o", "rw,dev,suid"]),
        "commitfs DATA MNT -o rw,dev,suid",
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/sbin/mount.fuse.commitfs"), "{err}");
    assert!(!data.exists());
}
