//! How lines written to `log` become records: the settings of Kafka's
//! console producer (`parse.key`, `key.separator`). They belong to the
//! tree, not to the topic: no broker knows them, so they are never a topic
//! config on the wire. Each backend keeps them per partition as it can (a
//! local data directory in the partition's properties file, a cluster mount
//! in memory), with the mount's `-o` values as the default.

/// The tree's own settings under `config/`, after the topic configs.
pub const NAMES: &[&str] = &["parse.key", "key.separator"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineFormat {
    /// `key<sep>value` lines, as kafka-console-producer's `parse.key`.
    pub parse_key: bool,
    pub key_separator: String,
}

impl Default for LineFormat {
    /// The console producer's defaults: the whole line is the value; a tab
    /// separates the key when keys are parsed.
    fn default() -> Self {
        LineFormat {
            parse_key: false,
            key_separator: "\t".to_string(),
        }
    }
}

impl LineFormat {
    /// Whether `name` is one of the line format's settings.
    pub fn is_setting(name: &str) -> bool {
        NAMES.contains(&name)
    }

    /// The value of a setting as text (a separator with its tab or newline
    /// escaped, as a properties file holds it), or `None` for another name.
    pub fn get(&self, name: &str) -> Option<String> {
        match name {
            "parse.key" => Some(self.parse_key.to_string()),
            "key.separator" => Some(escape(&self.key_separator)),
            _ => None,
        }
    }

    /// Sets one setting from its text, refused in Kafka's words. Trailing
    /// newlines are no part of a value, as a properties file reads it (so a
    /// separator of newlines alone is empty, as a data directory finds it).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let value = value.trim_end_matches(['\n', '\r']);
        let invalid = |why: &str| format!("Invalid value {value} for configuration {name}: {why}");
        match name {
            "parse.key" => {
                self.parse_key = match value.trim() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(invalid("Expected value to be either true or false")),
                }
            }
            "key.separator" => {
                if value.is_empty() {
                    return Err(invalid("Value must not be empty"));
                }
                self.key_separator = unescape(value);
            }
            _ => return Err(format!("Unknown configuration {name}")),
        }
        Ok(())
    }

    /// [`LineFormat::set`] as the seam's error: `InvalidConfig`.
    pub fn set_or_refuse(&mut self, name: &str, value: &str) -> super::BackendResult<()> {
        self.set(name, value)
            .map_err(|why| super::BackendError::new(super::ErrorKind::InvalidConfig, why))
    }

    /// This format with each setting found in `settings` applied; a bad one
    /// is skipped with a warning naming `whose` it was.
    pub fn with<'a>(
        &self,
        settings: impl IntoIterator<Item = (&'a str, &'a str)>,
        whose: &str,
    ) -> LineFormat {
        let mut f = self.clone();
        for (name, value) in settings {
            if let Err(e) = f.set(name, value) {
                log::warn!("Ignoring the line format setting of {whose}: {e}");
            }
        }
        f
    }
}

/// Properties-file escapes for the separator, so a tab survives a text file.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\t', "\\t")
        .replace('\n', "\\n")
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('t') => out.push('\t'),
                Some('n') => out.push('\n'),
                Some('\\') => out.push('\\'),
                Some(o) => {
                    out.push('\\');
                    out.push(o)
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_round_trip_through_text() {
        let mut f = LineFormat::default();
        assert_eq!(f.get("key.separator").unwrap(), "\\t");
        f.set("key.separator", ":").unwrap();
        assert_eq!(f.key_separator, ":");
        f.set("key.separator", "\\t").unwrap();
        assert_eq!(f.key_separator, "\t");
        assert!(f.set("key.separator", "").is_err());
        assert!(f.set("key.separator", "\n").is_err());
        f.set("key.separator", " \n").unwrap();
        assert_eq!(f.key_separator, " ");
        assert_eq!(
            f.set("parse.key", "yes").unwrap_err(),
            "Invalid value yes for configuration parse.key: Expected value to be either true or false"
        );
        f.set("parse.key", "true\n").unwrap();
        assert!(f.parse_key);
    }
}
