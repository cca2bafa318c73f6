//! Progress of a long load: the lines Kafka logs while it recovers a log
//! directory, also handed to whoever waits for the load (the daemon's
//! parent prints them, since a mount returns only once it is live).

use log::info;

/// Takes each progress line as it happens.
pub type ProgressFn<'a> = &'a (dyn Fn(&str) + Sync);

#[derive(Clone, Copy, Default)]
pub(crate) struct Progress<'a>(Option<ProgressFn<'a>>);

impl<'a> Progress<'a> {
    pub fn to(f: ProgressFn<'a>) -> Self {
        Progress(Some(f))
    }

    /// Logs `line` and hands it on.
    pub fn report(&self, line: &str) {
        info!("{line}");
        if let Some(f) = self.0 {
            f(line);
        }
    }
}
