//! The signals that end a daemon: blocked in every thread, waited for on
//! one. Below the daemon and the log, which both block them.

/// What ended the wait for a signal.
pub enum Stop {
    /// SIGINT, SIGTERM or SIGHUP, by name.
    Asked(&'static str),
    /// The face ended on its own (see [`Signals::wake`]).
    Ended,
}

/// The signals that end a daemon, blocked in every thread and waited for
/// on one, plus SIGUSR1, which a daemon sends itself when its face ends on
/// its own (an external umount).
pub struct Signals(libc::sigset_t);

impl Signals {
    /// Blocks them in the calling thread. Call before any other thread
    /// exists (storage may start some), so that every thread inherits the
    /// mask; a thread started earlier (the log's) calls it itself.
    pub fn block() -> Signals {
        // SAFETY: sigset manipulation on a local set, then a mask change of
        // this thread with a valid set.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR1] {
                libc::sigaddset(&mut set, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Signals(set)
        }
    }

    pub fn wait(&self) -> Stop {
        loop {
            let mut sig: libc::c_int = 0;
            // SAFETY: waits on the blocked set.
            if unsafe { libc::sigwait(&self.0, &mut sig) } != 0 {
                continue;
            }
            return match sig {
                libc::SIGUSR1 => Stop::Ended,
                libc::SIGINT => Stop::Asked("SIGINT"),
                libc::SIGTERM => Stop::Asked("SIGTERM"),
                _ => Stop::Asked("SIGHUP"),
            };
        }
    }

    /// Wakes [`Signals::wait`] with [`Stop::Ended`].
    pub fn wake() {
        // SAFETY: a signal to our own process.
        unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) };
    }
}
