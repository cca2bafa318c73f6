//! What a pass counted (Kafka's `CleanerStats`), and the summary the
//! cleaner logs after each pass, in Kafka's words and number formats
//! (`CleanerThread.recordStats`).

use std::time::Instant;

#[derive(Clone, Debug)]
pub struct CleanerStats {
    start: Instant,
    map_done: Option<Instant>,
    end: Option<Instant>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub map_bytes_read: u64,
    pub map_messages_read: u64,
    pub messages_read: u64,
    pub invalid_messages_read: u64,
    pub messages_written: u64,
    pub buffer_utilization: f64,
}

impl Default for CleanerStats {
    fn default() -> Self {
        CleanerStats {
            start: Instant::now(),
            map_done: None,
            end: None,
            bytes_read: 0,
            bytes_written: 0,
            map_bytes_read: 0,
            map_messages_read: 0,
            messages_read: 0,
            invalid_messages_read: 0,
            messages_written: 0,
            buffer_utilization: 0.0,
        }
    }
}

impl CleanerStats {
    pub fn index_done(&mut self) {
        self.map_done = Some(Instant::now());
    }
    pub fn all_done(&mut self) {
        self.end = Some(Instant::now());
    }

    /// Seconds, in milliseconds as Kafka's clock counts them.
    fn secs(&self, until: Option<Instant>) -> f64 {
        until.map_or(0.0, |t| {
            t.duration_since(self.start).as_millis() as f64 / 1000.0
        })
    }
    pub fn elapsed_secs(&self) -> f64 {
        self.secs(self.end)
    }
    pub fn elapsed_index_secs(&self) -> f64 {
        self.secs(self.map_done)
    }

    /// The summary's lines, each starting with a tab, after a newline.
    pub fn summary(&self, thread: usize, name: &str, from: i64, to: i64) -> String {
        let mb = |b: f64| b / (1024.0 * 1024.0);
        let (read, written) = (self.bytes_read as f64, self.bytes_written as f64);
        let (secs, index) = (self.elapsed_secs(), self.elapsed_index_secs());
        let clean = secs - index;
        let mut s = format!(
            "\n\tLog cleaner thread {thread} cleaned log {name} (dirty section = [{from}, {to}])\n"
        );
        s += &format!(
            "\t{} MB of log processed in {} seconds ({} MB/sec).\n",
            grouped(mb(read)),
            grouped(secs),
            grouped(mb(read / secs))
        );
        s += &format!(
            "\tIndexed {} MB in {} seconds ({} Mb/sec, {}% of total time)\n",
            grouped(mb(self.map_bytes_read as f64)),
            one(index),
            grouped(mb(self.map_bytes_read as f64) / index),
            one(100.0 * index / secs)
        );
        s += &format!(
            "\tBuffer utilization: {}%\n",
            one(100.0 * self.buffer_utilization)
        );
        s += &format!(
            "\tCleaned {} MB in {} seconds ({} Mb/sec, {}% of total time)\n",
            grouped(mb(read)),
            one(clean),
            grouped(mb(read) / clean),
            one(100.0 * clean / secs)
        );
        s += &format!(
            "\tStart size: {} MB ({} messages)\n",
            grouped(mb(read)),
            grouped_int(self.messages_read)
        );
        s += &format!(
            "\tEnd size: {} MB ({} messages)\n",
            grouped(mb(written)),
            grouped_int(self.messages_written)
        );
        s += &format!(
            "\t{}% size reduction ({}% fewer messages)\n",
            one(100.0 * (1.0 - written / read)),
            one(100.0 * (1.0 - self.messages_written as f64 / self.messages_read as f64))
        );
        s
    }
}

/// Java's `%.1f`, with its words for what is not a number.
fn one(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        format!("{v:.1}")
    }
}

/// Java's `%,.1f` in an English locale: `1,234.5`.
pub(crate) fn grouped(v: f64) -> String {
    let s = one(v);
    let Some((int, frac)) = s.split_once('.') else {
        return s;
    };
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    format!("{sign}{}.{frac}", group_digits(digits))
}

/// Java's `%,d`.
pub(crate) fn grouped_int(v: u64) -> String {
    group_digits(&v.to_string())
}

fn group_digits(digits: &str) -> String {
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_number_formats() {
        assert_eq!(grouped(1234.56), "1,234.6");
        assert_eq!(grouped(0.04), "0.0");
        assert_eq!(grouped(1234567.0), "1,234,567.0");
        assert_eq!(grouped(f64::INFINITY), "Infinity");
        assert_eq!(grouped_int(1_000_000), "1,000,000");
        assert_eq!(grouped_int(999), "999");
        assert_eq!(one(f64::NAN), "NaN");
    }

    /// Kafka's lines, in its order and words: `MB/sec` on the second line,
    /// `Mb/sec` on the third and fifth, the fifth counting bytes read.
    #[test]
    fn summary_in_kafkas_words() {
        let mut s = CleanerStats {
            bytes_read: 2 * 1024 * 1024,
            bytes_written: 1024 * 1024,
            messages_read: 2000,
            messages_written: 1000,
            buffer_utilization: 0.25,
            ..CleanerStats::default()
        };
        s.index_done();
        s.all_done();
        let text = s.summary(0, "t-0", 0, 2000);
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(lines[0], "");
        assert_eq!(
            lines[1],
            "\tLog cleaner thread 0 cleaned log t-0 (dirty section = [0, 2000])"
        );
        assert!(
            lines[2].starts_with("\t2.0 MB of log processed in "),
            "{}",
            lines[2]
        );
        assert!(lines[2].ends_with(" MB/sec)."), "{}", lines[2]);
        assert!(lines[3].starts_with("\tIndexed 0.0 MB in "), "{}", lines[3]);
        assert!(lines[3].contains(" Mb/sec, "), "{}", lines[3]);
        assert_eq!(lines[4], "\tBuffer utilization: 25.0%");
        assert!(lines[5].starts_with("\tCleaned 2.0 MB in "), "{}", lines[5]);
        assert_eq!(lines[6], "\tStart size: 2.0 MB (2,000 messages)");
        assert_eq!(lines[7], "\tEnd size: 1.0 MB (1,000 messages)");
        assert_eq!(lines[8], "\t50.0% size reduction (50.0% fewer messages)");
    }
}
