//! Which paths are never indexed, by name alone: known binary extensions and files that
//! usually hold credentials (`.env`, SSH keys and their copies, `*.pem`/`*.key`/`*.ppk`/…,
//! `secrets.yaml`, service-account and token JSON, `terraform.tfvars`, `kubeconfig`, …).
//! [`classify_name`] is applied by the folder scan and events ([`crate::watch`]), the bucket
//! listing ([`crate::object`]) and git trees ([`crate::git`]); the reason is a metric label
//! (`ctxd_watch_skipped_total{reason}`).
//!
//! Rules: a secret name matches exactly or followed by `.` (`.env.local`), unless a source-code
//! extension follows (`credentials.go` is code about credentials) or it is a template
//! (`*.example`, `*.sample`); SSH key names match by prefix (`id_rsa_old`); a secret extension
//! matches also before a backup ending (`server.key.bak`, `server.pem~`). A name that is not
//! UTF-8 is classified by its lossy form (`key-\xe9.key` is still a key).

use std::path::Path;

/// Extensions that are never text worth indexing.
const BINARY_EXTENSIONS: &[&str] = &[
    "png",
    "jpg",
    "jpeg",
    "gif",
    "bmp",
    "ico",
    "webp",
    "tiff",
    "psd",
    "zip",
    "gz",
    "tgz",
    "bz2",
    "xz",
    "zst",
    "7z",
    "rar",
    "tar",
    "jar",
    "war",
    "class",
    "so",
    "dylib",
    "dll",
    "exe",
    "o",
    "a",
    "lib",
    "obj",
    "bin",
    "wasm",
    "pyc",
    "pyo",
    "whl",
    "mp3",
    "mp4",
    "mov",
    "avi",
    "mkv",
    "wav",
    "flac",
    "ogg",
    "ttf",
    "otf",
    "woff",
    "woff2",
    "eot",
    "sqlite",
    "db",
    "lance",
    "arrow",
    "parquet",
    "safetensors",
    "onnx",
    "pt",
    "pth",
    "ckpt",
    "npy",
    "npz",
    "pkl",
    "iso",
    "dmg",
    "deb",
    "rpm",
];

/// File names and extensions that usually hold credentials.
const SECRET_NAMES: &[&str] = &[
    ".env",
    ".npmrc",
    ".pypirc",
    ".netrc",
    "credentials",
    // Found indexed by benches/fuzz_loaders.py: well-known files that hold keys or passwords.
    "secrets.yaml",
    "secrets.yml",
    "secrets.json",
    "secrets.toml",
    "service-account.json",
    "client_secret.json",
    "application_default_credentials.json",
    "token.json",
    "kubeconfig",
    "htpasswd",
    ".htpasswd",
    "git-credentials",
    ".git-credentials",
    "pgpass",
    ".pgpass",
    "vault-token",
    ".vault-token",
    "my.cnf",
    ".my.cnf",
    "wallet.dat",
];
/// Private SSH keys by prefix (`id_rsa`, `id_rsa~`, `id_rsa_old`, `id_ed25519.bak`, …).
const SECRET_PREFIXES: &[&str] = &["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"];
const SECRET_EXTENSIONS: &[&str] = &[
    "pem", "key", "p12", "pfx", "jks", "keystore", "kdbx", "gpg", "asc", "ppk", "p8", "jceks", "ovpn", "env", "tfvars",
    "tfstate",
];
/// Source code: a secret's name followed by one of these is a program (`credentials.go`).
const CODE_EXTENSIONS: &[&str] = &[
    "go", "c", "h", "cc", "cpp", "hpp", "py", "rs", "js", "ts", "java", "rb", "cs", "kt", "swift", "php", "scala", "sh",
];
/// Endings of a copy of a file (`server.key.bak`, `server.pem~`): the copy of a secret is one.
const BACKUP_EXTENSIONS: &[&str] = &["bak", "orig", "old", "backup", "save", "tmp", "swp"];

/// Why a path is not indexed (metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    Ignored,
    BinaryExt,
    Secret,
}

impl SkipReason {
    /// Metric label.
    pub fn label(self) -> &'static str {
        match self {
            SkipReason::Ignored => "ignored",
            SkipReason::BinaryExt => "binary_ext",
            SkipReason::Secret => "secret",
        }
    }
}

/// Checks a file name against the binary and secret lists.
pub fn classify_name(path: &Path) -> Option<SkipReason> {
    // A name that is not UTF-8 is classified by its lossy form: `key-\xe9.key` is still a key.
    let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
    let template = name.ends_with(".example") || name.ends_with(".sample");
    let ext = Path::new(&name).extension().and_then(|e| e.to_str()).unwrap_or("").trim_end_matches('~');
    // `credentials.go`, `kubeconfig.go`, `htpasswd.c`: code about secrets, not secrets.
    let code = CODE_EXTENSIONS.contains(&ext);
    let named = SECRET_NAMES.iter().any(|s| name == *s || (name.starts_with(&format!("{s}.")) && !code))
        || SECRET_PREFIXES.iter().any(|p| name.starts_with(p) && !code);
    if named && !template {
        return Some(SkipReason::Secret);
    }
    // `server.key.bak`: a secret's extension before a backup ending.
    let mut parts = name.trim_end_matches('~').rsplit('.');
    let (last, inner) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let backup_of_secret = BACKUP_EXTENSIONS.contains(&last) && SECRET_EXTENSIONS.contains(&inner);
    if (SECRET_EXTENSIONS.contains(&ext) || backup_of_secret) && !template {
        return Some(SkipReason::Secret);
    }
    if BINARY_EXTENSIONS.contains(&ext) {
        return Some(SkipReason::BinaryExt);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_binaries_are_classified() {
        assert_eq!(classify_name(Path::new("a/.env")), Some(SkipReason::Secret));
        assert_eq!(classify_name(Path::new("a/.env.local")), Some(SkipReason::Secret));
        assert_eq!(classify_name(Path::new("a/.env.example")), None);
        assert_eq!(classify_name(Path::new("server.pem")), Some(SkipReason::Secret));
        assert_eq!(classify_name(Path::new("logo.PNG")), Some(SkipReason::BinaryExt));
        assert_eq!(classify_name(Path::new("main.rs")), None);
        for secret in [
            "secrets.yaml",
            "service-account.json",
            "terraform.tfvars",
            "prod.tfstate",
            "prod.env",
            "kubeconfig",
            "id_rsa~",
            "id_rsa_old",
            "server.key.bak",
            "server.pem~",
            "putty.ppk",
            "AuthKey_X1.p8",
            "a.jceks",
            "vpn.ovpn",
            ".git-credentials",
            "pgpass",
            "my.cnf",
        ] {
            assert_eq!(classify_name(Path::new(secret)), Some(SkipReason::Secret), "{secret}");
        }
        for code in [
            "secrets.py",
            "settings.py",
            "key_value.rs",
            "environment.md",
            "tokenizer.json",
            "prod.env.example",
            "credentials.go",
            "kubeconfig.go",
            "htpasswd.c",
            "pgpass.go",
        ] {
            assert_eq!(classify_name(Path::new(code)), None, "{code}");
        }
        {
            use std::os::unix::ffi::OsStrExt;
            let odd = |b: &[u8]| classify_name(Path::new(std::ffi::OsStr::from_bytes(b)));
            assert_eq!(odd(b"key-\xe9.key"), Some(SkipReason::Secret), "a name that is not UTF-8");
            assert_eq!(odd(b"srv-\xff.pem"), Some(SkipReason::Secret));
            assert_eq!(odd(b"img-\xff.png"), Some(SkipReason::BinaryExt));
        }
    }
}
