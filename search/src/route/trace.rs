//! Error messages and stack traces in a query: the frames (file, line, function) of Python,
//! Java/JavaScript, Rust and Go traces, and whether a line is an error message.

use super::paths::split_line_suffix;

/// Frames and message lines of a stack trace, if the query holds one.
#[derive(Debug, Default)]
pub(super) struct Trace {
    /// (file, line, function) per frame.
    pub(super) frames: Vec<(Option<String>, Option<u32>, Option<String>)>,
    /// A line that is an error message (`ValueError: …`, `error[E0308]: …`, `panicked at`).
    pub(super) message: bool,
}

/// The frames and message lines of the stack trace in `q` (empty when it holds none).
pub(super) fn stack_trace(q: &str) -> Trace {
    let mut t = Trace::default();
    let mut prev = "";
    for line in q.lines().map(str::trim) {
        // Python: File "app/models.py", line 42, in save
        if let Some(rest) = line.strip_prefix("File \"") {
            if let Some((file, after)) = rest.split_once('"') {
                let ln = after
                    .split("line ")
                    .nth(1)
                    .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|n| n.parse().ok());
                let func = after.split(", in ").nth(1).map(|s| s.trim().to_string());
                t.frames.push((Some(file.to_string()), ln, func));
                continue;
            }
        }
        // Java/JS: at com.acme.Foo.bar(Foo.java:42) / at handler (src/server.js:10:5) / at src/x.js:3:1
        if let Some(rest) = line.strip_prefix("at ") {
            let (func, loc) = match rest.split_once('(') {
                Some((f, l)) => (Some(f.trim().to_string()), l.trim_end_matches(')')),
                None => (None, rest),
            };
            let (file, ln) = split_line_suffix(loc);
            if file.contains('.') || func.is_some() {
                t.frames.push((Some(file.to_string()).filter(|f| f.contains('.')), ln, func.filter(|f| !f.is_empty())));
                continue;
            }
        }
        // Rust: thread 'main' panicked at src/main.rs:10:5 / --> src/lib.rs:3:9
        if let Some(loc) = line.split("panicked at ").nth(1).or_else(|| line.strip_prefix("--> ")) {
            let loc = loc.trim_end_matches(':').split_whitespace().next().unwrap_or("");
            let (file, ln) = split_line_suffix(loc.trim_end_matches([',', ':']));
            t.frames.push((Some(file.to_string()), ln, None));
            t.message = true;
            continue;
        }
        // Go: `\t/src/app/server.go:42 +0x1d`, after the frame's function line `main.(*Server).Start(...)`.
        if let Some(loc) = line.split_whitespace().next().filter(|w| w.contains(".go:")) {
            let (file, ln) = split_line_suffix(loc);
            if file.ends_with(".go") {
                let func = prev.split('(').next().filter(|f| !f.is_empty() && !f.contains(' ')).map(str::to_string);
                t.frames.push((Some(file.to_string()), ln, func));
                prev = line;
                continue;
            }
        }
        // Go: goroutine 1 [running]:
        if line.starts_with("goroutine ") && line.ends_with("]:") {
            t.message = true;
        }
        if line.starts_with("Traceback (most recent call last)") {
            t.message = true;
        }
        // ValueError: x / java.lang.NullPointerException: y / error[E0308]: mismatched types / TypeError: …
        if let Some((head, _)) = line.split_once(": ") {
            let head = head.trim();
            let name = head.rsplit('.').next().unwrap_or(head);
            if !head.contains(' ')
                && (name.ends_with("Error")
                    || name.ends_with("Exception")
                    || head.starts_with("error[")
                    || head == "error"
                    || head == "panic"
                    || head == "fatal")
            {
                t.message = true;
            }
        }
        prev = line;
    }
    t
}

/// True when the query reads like an error (an exception name, `error:`, a known message).
pub(super) fn looks_like_error(q: &str) -> bool {
    let lower = q.to_lowercase();
    [
        "exception",
        "traceback",
        "panicked",
        "segmentation fault",
        "stack overflow",
        "undefined is not",
        "cannot read propert",
        "no such file",
        "permission denied",
        "errno",
        "exit code",
        "error:",
        "fatal:",
    ]
    .iter()
    .any(|m| lower.contains(m))
}
