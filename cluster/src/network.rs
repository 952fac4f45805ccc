//! Peer traffic: Raft's three calls (append, vote, snapshot chunk) as HTTP
//! POSTs between members, bodies in postcard.
//!
//! Every request carries the cluster's secret (`ankusa-cluster-secret`);
//! a member refuses a request without it, or with another, before reading
//! its body (`401`), so nothing outside the cluster can vote or append.
//! A refused or unreachable peer is reported to openraft as unreachable,
//! which backs off; an answer that does not decode is a network error,
//! retried.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Raft};
use serde::de::DeserializeOwned;
use serde::Serialize;
use subtle::ConstantTimeEq;

use crate::types::{MemberId, TypeConfig};

/// The header that carries the cluster's secret.
pub const SECRET_HEADER: &str = "ankusa-cluster-secret";

/// How a member reaches its peers.
#[derive(Clone)]
pub struct Peers {
    http: reqwest::Client,
    secret: Arc<str>,
}

impl Peers {
    pub fn new(secret: &str) -> Result<Peers, reqwest::Error> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(4)
            .build()?;
        Ok(Peers {
            http,
            secret: secret.into(),
        })
    }
}

impl Peers {
    /// Whether the member at `addr` belongs to a formed group; `None` when
    /// it does not answer (down, or another secret).
    pub async fn formed(&self, addr: &str) -> Option<bool> {
        let r = self
            .http
            .post(format!("http://{addr}/raft/formed"))
            .header(SECRET_HEADER, &*self.secret)
            .timeout(std::time::Duration::from_millis(1_000))
            .send()
            .await
            .ok()?;
        if r.status() != StatusCode::OK {
            return None;
        }
        postcard::from_bytes(&r.bytes().await.ok()?).ok()
    }
}

/// One peer, as openraft's network sees it.
pub struct Peer {
    peers: Peers,
    target: MemberId,
    base: String,
}

impl RaftNetworkFactory<TypeConfig> for Peers {
    type Network = Peer;

    async fn new_client(&mut self, target: MemberId, node: &BasicNode) -> Peer {
        Peer {
            peers: self.clone(),
            target,
            base: format!("http://{}/raft", node.addr),
        }
    }
}

impl Peer {
    async fn call<Q, A, E>(
        &self,
        path: &str,
        req: &Q,
        option: &RPCOption,
    ) -> Result<A, RPCError<MemberId, BasicNode, RaftError<MemberId, E>>>
    where
        Q: Serialize,
        A: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let body =
            postcard::to_stdvec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let sent = self
            .peers
            .http
            .post(format!("{}/{path}", self.base))
            .header(SECRET_HEADER, &*self.peers.secret)
            .timeout(option.hard_ttl())
            .body(body)
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Err(RPCError::Unreachable(Unreachable::new(&e))),
            Err(e) => return Err(RPCError::Network(NetworkError::new(&e))),
        };
        if resp.status() != StatusCode::OK {
            let e = std::io::Error::other(format!(
                "member {} answered {} (a wrong secret answers 401)",
                self.target,
                resp.status()
            ));
            return Err(RPCError::Unreachable(Unreachable::new(&e)));
        }
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let answer: Result<A, RaftError<MemberId, E>> =
            postcard::from_bytes(&bytes).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<MemberId>, RPCError<MemberId, BasicNode, RaftError<MemberId>>>
    {
        self.call("append", &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<MemberId>,
        RPCError<MemberId, BasicNode, RaftError<MemberId, InstallSnapshotError>>,
    > {
        self.call("snapshot", &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<MemberId>,
        option: RPCOption,
    ) -> Result<VoteResponse<MemberId>, RPCError<MemberId, BasicNode, RaftError<MemberId>>> {
        self.call("vote", &rpc, &option).await
    }
}

#[derive(Clone)]
struct Serving {
    raft: Raft<TypeConfig>,
    secret: Arc<str>,
}

impl Serving {
    fn admit(&self, h: &HeaderMap) -> Result<(), StatusCode> {
        let given = h.get(SECRET_HEADER).map(|v| v.as_bytes()).unwrap_or(b"");
        if bool::from(given.ct_eq(self.secret.as_bytes())) {
            Ok(())
        } else {
            Err(StatusCode::UNAUTHORIZED)
        }
    }
}

fn answer<T: Serialize>(v: &T) -> Result<Vec<u8>, StatusCode> {
    postcard::to_stdvec(v).map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)
}

fn read<T: DeserializeOwned>(body: &Bytes) -> Result<T, StatusCode> {
    postcard::from_bytes(body).map_err(|_| StatusCode::BAD_REQUEST)
}

async fn append(
    State(s): State<Serving>,
    h: HeaderMap,
    body: Bytes,
) -> Result<Vec<u8>, StatusCode> {
    s.admit(&h)?;
    answer(&s.raft.append_entries(read(&body)?).await)
}

async fn vote(State(s): State<Serving>, h: HeaderMap, body: Bytes) -> Result<Vec<u8>, StatusCode> {
    s.admit(&h)?;
    answer(&s.raft.vote(read(&body)?).await)
}

async fn snapshot(
    State(s): State<Serving>,
    h: HeaderMap,
    body: Bytes,
) -> Result<Vec<u8>, StatusCode> {
    s.admit(&h)?;
    answer(&s.raft.install_snapshot(read(&body)?).await)
}

async fn formed(State(s): State<Serving>, h: HeaderMap) -> Result<Vec<u8>, StatusCode> {
    s.admit(&h)?;
    let formed = s
        .raft
        .is_initialized()
        .await
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    answer(&formed)
}

/// The peer routes of a member, under `/raft/`. An append carries whole
/// store commits, so the body limit is the largest entry batch's.
pub fn routes(raft: Raft<TypeConfig>, secret: &str, max_body: usize) -> axum::Router {
    axum::Router::new()
        .route("/raft/append", post(append))
        .route("/raft/vote", post(vote))
        .route("/raft/snapshot", post(snapshot))
        .route("/raft/formed", post(formed))
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .with_state(Serving {
            raft,
            secret: secret.into(),
        })
}
