//! Who is calling, and what they may touch.
//!
//! Invariants:
//! - A bearer token is compared against every configured token's SHA-256
//!   digest with a constant-time equality, all of them every time, so the
//!   time taken says nothing about which token (or how much of one) matched.
//! - A tenant-scoped caller names a tenant and gets the same `not_found`
//!   whether that tenant is someone else's or does not exist.
//! - A caller on the unix socket without a token is an admin only when the
//!   daemon allows it (`admin.local_admin`), and is named by its OS user,
//!   read from the socket's peer credentials, never from the request.

use ankusa_store::tenants::{self, Name};
use ankusa_store::Store;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use subtle::{Choice, ConstantTimeEq};

use crate::{OpsError, Result};

/// A checked admin token (`[[admin.tokens]]`): its digest, never the token.
#[derive(Clone)]
pub struct AdminToken {
    pub name: String,
    pub digest: [u8; 32],
    pub tenant: Option<String>,
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminToken")
            .field("name", &self.name)
            .field("token", &"<redacted>")
            .field("tenant", &self.tenant)
            .finish()
    }
}

/// The SHA-256 digest a token is stored and compared as (admin tokens here,
/// ingest tokens in the daemon): equal-length values for a constant-time
/// comparison, and no token kept in memory after the config is read.
pub fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    /// The token's name, or `local:USER` for a local caller without one.
    pub name: String,
    /// The OS user of a local caller (socket or a command run directly on
    /// the store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_user: Option<String>,
    /// The one tenant this caller may see; `None` for an admin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// The peer of a unix-socket connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub uid: u32,
    pub user: Option<String>,
}

impl Peer {
    pub fn from_uid(uid: u32) -> Peer {
        let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .map(|u| u.name);
        Peer { uid, user }
    }

    /// Whoever runs this process.
    pub fn me() -> Peer {
        Peer::from_uid(nix::unistd::getuid().as_raw())
    }

    fn label(&self) -> String {
        self.user
            .clone()
            .unwrap_or_else(|| format!("uid {}", self.uid))
    }
}

impl Principal {
    /// An admin acting on a stopped store from this machine's command line.
    pub fn local(peer: &Peer) -> Principal {
        Principal {
            name: format!("local:{}", peer.label()),
            os_user: Some(peer.label()),
            tenant: None,
        }
    }

    pub fn is_admin(&self) -> bool {
        self.tenant.is_none()
    }

    pub fn require_admin(&self, what: &str) -> Result<()> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(OpsError::Forbidden(format!(
                "{what} needs an admin token; this token is scoped to one tenant"
            )))
        }
    }

    /// The ordinal of `tenant` if it exists, is live and is in scope. Out
    /// of scope and unknown are the same answer.
    pub fn tenant_ord(&self, store: &Store, tenant: &str) -> Result<u32> {
        let missing = || OpsError::NotFound(format!("no tenant {tenant:?}"));
        if self.tenant.as_deref().is_some_and(|own| own != tenant) {
            return Err(missing());
        }
        let Some(ord) = tenants::ord_of(store, tenant)? else {
            // An id ingest would refuse is named as such; one stored before
            // the rule was tightened is still found above.
            return Err(match tenants::validate_id(tenant) {
                Ok(()) => missing(),
                Err(e) => OpsError::Invalid {
                    code: "tenant_invalid",
                    message: e.to_string(),
                },
            });
        };
        match tenants::name_of(store, ord)? {
            Some(Name::Live(_)) => Ok(ord),
            _ => Err(missing()),
        }
    }

    /// Whether the row of tenant ordinal `ord` is in scope.
    pub fn sees_ord(&self, store: &Store, ord: u32) -> Result<bool> {
        match &self.tenant {
            None => Ok(true),
            Some(own) => Ok(tenants::ord_of(store, own)? == Some(ord)),
        }
    }
}

/// Authenticates a request from its `Authorization` header and, on the
/// socket, its peer.
pub fn authenticate(
    authorization: Option<&[u8]>,
    tokens: &[AdminToken],
    socket_peer: Option<&Peer>,
    local_admin: bool,
) -> Result<Principal> {
    let Some(value) = authorization else {
        return match socket_peer {
            Some(peer) if local_admin => Ok(Principal::local(peer)),
            _ => Err(OpsError::Unauthorized(
                "missing bearer token (Authorization: Bearer TOKEN)".into(),
            )),
        };
    };
    let presented = value
        .strip_prefix(b"Bearer ")
        .or_else(|| value.strip_prefix(b"bearer "))
        .ok_or_else(|| OpsError::Unauthorized("expected Authorization: Bearer TOKEN".into()))?;
    let digest = digest(presented);
    let mut found: Option<&AdminToken> = None;
    let mut any = Choice::from(0);
    for t in tokens {
        let hit = t.digest.ct_eq(&digest);
        any |= hit;
        if bool::from(hit) {
            found = Some(t);
        }
    }
    match (bool::from(any), found) {
        (true, Some(t)) => Ok(Principal {
            name: t.name.clone(),
            os_user: socket_peer.map(Peer::label),
            tenant: t.tenant.clone(),
        }),
        _ => Err(OpsError::Unauthorized("unknown token".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Vec<AdminToken> {
        vec![
            AdminToken {
                name: "ops".into(),
                digest: digest(b"admin-token-0123456789"),
                tenant: None,
            },
            AdminToken {
                name: "acme-bot".into(),
                digest: digest(b"acme-token-0123456789"),
                tenant: Some("acme".into()),
            },
        ]
    }

    #[test]
    fn tokens_map_to_their_scope_and_anything_else_is_refused() {
        let t = tokens();
        let admin = authenticate(Some(b"Bearer admin-token-0123456789"), &t, None, true).unwrap();
        assert!(admin.is_admin());
        assert_eq!(admin.name, "ops");
        let acme = authenticate(Some(b"Bearer acme-token-0123456789"), &t, None, true).unwrap();
        assert_eq!(acme.tenant.as_deref(), Some("acme"));
        for bad in [
            &b"Bearer admin-token-012345678"[..],
            b"Bearer ",
            b"Basic admin-token-0123456789",
            b"admin-token-0123456789",
        ] {
            let e = authenticate(Some(bad), &t, None, true).unwrap_err();
            assert!(matches!(e, OpsError::Unauthorized(_)), "{bad:?}");
        }
        // No token: refused on TCP; on the socket only when allowed.
        assert!(authenticate(None, &t, None, true).is_err());
        let peer = Peer {
            uid: 1000,
            user: Some("ana".into()),
        };
        let local = authenticate(None, &t, Some(&peer), true).unwrap();
        assert_eq!(local.name, "local:ana");
        assert!(local.is_admin());
        assert!(authenticate(None, &t, Some(&peer), false).is_err());
        // A token on the socket keeps its scope and records the OS user.
        let scoped =
            authenticate(Some(b"Bearer acme-token-0123456789"), &t, Some(&peer), true).unwrap();
        assert_eq!(scoped.tenant.as_deref(), Some("acme"));
        assert_eq!(scoped.os_user.as_deref(), Some("ana"));
    }

    #[test]
    fn a_scoped_caller_cannot_tell_other_tenants_from_missing_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let mut alloc = tenants::TenantAllocator::load(&store, 100).unwrap();
        let mut b = ankusa_store::Batch::new();
        let res = alloc.resolve(&store, ["acme", "globex"], &mut b).unwrap();
        store.commit(b, true).unwrap();
        alloc.committed(res);
        let acme = Principal {
            name: "acme-bot".into(),
            os_user: None,
            tenant: Some("acme".into()),
        };
        assert!(acme.tenant_ord(&store, "acme").is_ok());
        let other = acme.tenant_ord(&store, "globex").unwrap_err().to_string();
        let missing = acme.tenant_ord(&store, "nobody").unwrap_err().to_string();
        assert_eq!(
            other.replace("globex", "X"),
            missing.replace("nobody", "X"),
            "the same answer for someone else's tenant and a missing one"
        );
        assert!(acme.require_admin("stats").is_err());
    }
}
