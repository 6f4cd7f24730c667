//! An S3 source's changes read from the bucket's **event notifications**, delivered to an SQS
//! queue (`sqs_queue` of the source), instead of found by listing the whole prefix every poll.
//!
//! S3 sends a message per change — `ObjectCreated:*` (a put, a copy, a multipart upload's end)
//! and `ObjectRemoved:*` — naming the bucket, the key (URL-encoded), the new object's ETag and
//! size and a **sequencer** that orders the events of one key. [`EventQueue::receive`] long-polls
//! the queue (up to 20 s a request, so an idle queue costs three requests a minute and an event
//! is read as soon as it arrives) and [`parse`] keeps the events of the source's prefix; the
//! source applies each with [`crate::object::ObjectSource::apply_event`] and deletes the messages
//! once their files are on their way ([`EventQueue::delete`]). SNS-wrapped messages (a topic
//! fanned out to the queue) are read too; anything else (`s3:TestEvent`, restores) is ignored.
//!
//! Delivery is at least once and unordered, so nothing here trusts one event alone:
//! * a duplicate (the ETag and size the mirror already has) changes nothing;
//! * an event older than the last one applied to its key (by sequencer) is ignored;
//! * without a sequencer (S3-compatible servers) a removal is checked with a `HEAD` (an object
//!   written again since is kept), and a download records the version it actually got.
//!
//! Lost events (a purged queue, a missing notification rule) are repaired by the listing the
//! source still runs at start and every `reconcile_interval_secs`. Credentials, region and
//! endpoint come from the AWS SDK's default chain (`AWS_*` variables, web identity, instance
//! profile; `AWS_ENDPOINT_URL` or `AWS_ENDPOINT_URL_SQS` for a local server such as moto).

use std::time::Duration;

use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;

use crate::error::StageError;

/// The bucket and key prefix (without `/` at either end; empty: the whole bucket) of a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub bucket: String,
    pub prefix: String,
}

/// One event of an object under the source's prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectEvent {
    /// The key relative to the source's prefix.
    pub rel: String,
    pub change: EventChange,
    /// S3's order of the events of one key (hex; absent on some S3-compatible servers).
    pub sequencer: Option<String>,
}

/// What happened to the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventChange {
    /// Written (put, copied, uploaded): its ETag (without quotes) and size, where given.
    Created {
        etag: Option<String>,
        size: Option<u64>,
    },
    Removed,
}

/// Whether sequencer `a` is later than `b`: S3's rule (the shorter is padded with leading zeros,
/// then the two are compared as strings).
pub fn later(a: &str, b: &str) -> bool {
    let width = a.len().max(b.len());
    format!("{a:0>width$}") > format!("{b:0>width$}")
}

/// A key as S3 writes it in an event: URL-encoded, `+` for a space.
fn decode_key(key: &str) -> Option<String> {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = key.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// The events of one message's body for objects under `uri` (an S3 notification, or one
/// wrapped by SNS); none for anything else.
pub fn parse(body: &str, uri: &Watched) -> Vec<ObjectEvent> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else { return Vec::new() };
    // SNS fan-out: the notification is the `Message` string.
    if let Some(inner) = value.get("Message").and_then(|m| m.as_str()) {
        return parse(inner, uri);
    }
    let records = value.get("Records").and_then(|r| r.as_array()).map(Vec::as_slice).unwrap_or_default();
    records.iter().filter_map(|r| event_of(r, uri)).collect()
}

fn event_of(record: &serde_json::Value, uri: &Watched) -> Option<ObjectEvent> {
    let name = record.get("eventName")?.as_str()?;
    let s3 = record.get("s3")?;
    if s3.get("bucket")?.get("name")?.as_str()? != uri.bucket {
        return None;
    }
    let object = s3.get("object")?;
    let key = decode_key(object.get("key")?.as_str()?)?;
    let rel = match uri.prefix.is_empty() {
        true => key,
        false => key.strip_prefix(uri.prefix.as_str())?.strip_prefix('/')?.to_string(),
    };
    let change = if name.starts_with("ObjectCreated:") {
        let etag = object.get("eTag").and_then(|e| e.as_str()).map(|e| e.trim_matches('"').to_string());
        EventChange::Created { etag, size: object.get("size").and_then(serde_json::Value::as_u64) }
    } else if name.starts_with("ObjectRemoved:") {
        EventChange::Removed
    } else {
        return None;
    };
    let sequencer = object.get("sequencer").and_then(|s| s.as_str()).map(str::to_string);
    (!rel.is_empty()).then_some(ObjectEvent { rel, change, sequencer })
}

/// What one receive brought: the source's events, and the receipts of every message read (the
/// others' too: a message of another prefix or a test event is deleted like the rest).
#[derive(Debug, Default)]
pub struct Received {
    pub events: Vec<ObjectEvent>,
    pub receipts: Vec<String>,
}

/// The SQS queue of an S3 source's event notifications.
pub struct EventQueue {
    client: aws_sdk_sqs::Client,
    url: String,
    uri: Watched,
}

impl EventQueue {
    /// The queue at `url` (its URL, as SQS gives it) for the source watching `uri`.
    pub async fn connect(url: &str, uri: &Watched) -> Self {
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
        Self { client: aws_sdk_sqs::Client::new(&config), url: url.to_string(), uri: uri.clone() }
    }

    fn error(&self, e: impl std::error::Error + Send + Sync + 'static) -> StageError {
        let uri = format!("s3://{}/{} (events from {})", self.uri.bucket, self.uri.prefix, self.url);
        StageError::Object { uri, source: Box::new(e) }
    }

    /// An SDK error with its whole chain (the SDK's own `Display` says only "service error").
    fn sdk_error<E: std::error::Error>(&self, e: E) -> StageError {
        self.error(std::io::Error::other(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))
    }

    /// Waits up to `wait` (at most 20 s: SQS's long poll) for messages, and reads up to 10.
    pub async fn receive(&self, wait: Duration) -> Result<Received, StageError> {
        let seconds = wait.as_secs().clamp(1, 20) as i32;
        let got = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(10)
            .wait_time_seconds(seconds)
            .send()
            .await
            .map_err(|e| self.sdk_error(e))?;
        let mut out = Received::default();
        for message in got.messages() {
            if let Some(body) = message.body() {
                out.events.extend(parse(body, &self.uri));
            }
            out.receipts.extend(message.receipt_handle().map(str::to_string));
        }
        Ok(out)
    }

    /// Deletes messages read by [`EventQueue::receive`] (10 a request).
    pub async fn delete(&self, receipts: Vec<String>) -> Result<(), StageError> {
        for part in receipts.chunks(10) {
            let entries = part
                .iter()
                .enumerate()
                .map(|(i, r)| DeleteMessageBatchRequestEntry::builder().id(i.to_string()).receipt_handle(r).build())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.error(e))?;
            self.client
                .delete_message_batch()
                .queue_url(&self.url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| self.sdk_error(e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri() -> Watched {
        Watched { bucket: "corpus".into(), prefix: "src".into() }
    }

    fn record(name: &str, bucket: &str, key: &str, extra: &str) -> String {
        format!(r#"{{"eventName":"{name}","s3":{{"bucket":{{"name":"{bucket}"}},"object":{{"key":"{key}"{extra}}}}}}}"#)
    }

    #[test]
    fn notifications_of_the_prefix_are_read_and_the_rest_ignored() {
        let body = format!(
            r#"{{"Records":[{},{},{},{},{}]}}"#,
            record(
                "ObjectCreated:Put",
                "corpus",
                "src%2Fa+b%C3%A9.md",
                r##","size":5,"eTag":"abc","sequencer":"0A1""##
            ),
            record("ObjectCreated:Copy", "corpus", "src/c.py", r#","size":7"#),
            record("ObjectRemoved:Delete", "corpus", "src/d.py", ""),
            record("ObjectCreated:Put", "corpus", "elsewhere/e.py", ""),
            record("ObjectCreated:Put", "other", "src/f.py", ""),
        );
        let events = parse(&body, &uri());
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(events[0].rel, "a bé.md");
        assert_eq!(events[0].change, EventChange::Created { etag: Some("abc".into()), size: Some(5) });
        assert_eq!(events[0].sequencer.as_deref(), Some("0A1"));
        assert_eq!(events[1].change, EventChange::Created { etag: None, size: Some(7) });
        assert_eq!((events[2].rel.as_str(), &events[2].change), ("d.py", &EventChange::Removed));
        // SNS-wrapped; a test event; not JSON.
        let wrapped = serde_json::json!({"Type": "Notification", "Message": body}).to_string();
        assert_eq!(parse(&wrapped, &uri()).len(), 3);
        assert!(parse(r#"{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"corpus"}"#, &uri()).is_empty());
        assert!(parse("not json", &uri()).is_empty());
        assert!(parse(&record("ObjectCreated:Put", "corpus", "src/%zz", ""), &uri()).is_empty());
    }

    #[test]
    fn sequencers_compare_after_padding() {
        assert!(later("0A2", "0A1") && !later("0A1", "0A2") && !later("0A1", "0A1"));
        assert!(later("100", "FF"), "the shorter is padded with zeros");
        assert!(!later("0FF", "100"));
    }
}
