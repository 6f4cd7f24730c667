//! Authentication: password hashing, verification and sessions.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// How long a session stays valid.
pub const SESSION_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// A logged-in user's session.
#[derive(Debug, Clone)]
pub struct Session {
    pub user_id: u64,
    pub token: String,
    pub expires_at: SystemTime,
}

/// Errors of the authentication module.
#[derive(Debug, PartialEq)]
pub enum AuthError {
    UnknownUser,
    WrongPassword,
    Expired,
}

/// Hashes a password with a per-user salt (FNV-1a, for the demo only).
pub fn hash_password(password: &str, salt: &str) -> u64 {
    let mut hash: u64 = 0xcbf29ce484222325;
    for byte in salt.bytes().chain(password.bytes()) {
        hash ^= byte as u64;
        hash = hash.wrapping_mul(0x100000001b3);
    }
    hash
}

/// Checks whether a password matches the stored hash, comparing in constant time.
pub fn verify_password(password: &str, salt: &str, stored_hash: u64) -> bool {
    let computed = hash_password(password, salt);
    let mut diff = 0u64;
    for shift in (0..64).step_by(8) {
        diff |= ((computed >> shift) & 0xff) ^ ((stored_hash >> shift) & 0xff);
    }
    diff == 0
}

/// In-memory user store with login.
pub struct UserStore {
    users: HashMap<String, (u64, String, u64)>,
}

impl UserStore {
    /// An empty store.
    pub fn new() -> Self {
        Self { users: HashMap::new() }
    }

    /// Registers a user with a salted password hash.
    pub fn register(&mut self, name: &str, id: u64, password: &str) {
        let salt = format!("salt-{id}");
        let hash = hash_password(password, &salt);
        self.users.insert(name.to_string(), (id, salt, hash));
    }

    /// Logs a user in and opens a session that expires after [`SESSION_TTL`].
    pub fn login(&self, name: &str, password: &str) -> Result<Session, AuthError> {
        let (id, salt, hash) = self.users.get(name).ok_or(AuthError::UnknownUser)?;
        if !verify_password(password, salt, *hash) {
            return Err(AuthError::WrongPassword);
        }
        Ok(Session { user_id: *id, token: format!("tok-{id}-{hash:x}"), expires_at: SystemTime::now() + SESSION_TTL })
    }
}
