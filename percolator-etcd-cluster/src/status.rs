//! A member's view of the cluster, from etcd's JSON gateway (`POST /v3/maintenance/status`) over
//! plain HTTP: the harness needs no gRPC client of its own.

use std::time::Duration;

use serde_json::Value;

use crate::ClusterError;

/// What one member reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberStatus {
    /// The member's own id.
    pub member_id: u64,
    /// The id of the member it follows (0: it knows of no leader).
    pub leader: u64,
    /// Raft term.
    pub raft_term: u64,
    /// Database size in bytes.
    pub db_size: u64,
}

/// The status of the member serving `client_url`.
pub fn fetch(client_url: &str) -> Result<MemberStatus, ClusterError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_millis(1500)))
        .build()
        .into();
    let url = format!("{client_url}/v3/maintenance/status");
    let failed = |e: &dyn std::fmt::Display| {
        ClusterError::io(
            format!("status of {client_url}"),
            std::io::Error::other(e.to_string()),
        )
    };
    let mut response = agent.post(&url).send("{}").map_err(|e| failed(&e))?;
    let body = response
        .body_mut()
        .read_to_string()
        .map_err(|e| failed(&e))?;
    parse(&body).ok_or_else(|| failed(&format!("unexpected answer {body:?}")))
}

/// Parses the gateway's JSON (64-bit integers arrive as strings; absent fields are zero).
fn parse(body: &str) -> Option<MemberStatus> {
    let json: Value = serde_json::from_str(body).ok()?;
    let number = |v: &Value| -> u64 {
        match v {
            Value::String(s) => s.parse().unwrap_or(0),
            Value::Number(n) => n.as_u64().unwrap_or(0),
            _ => 0,
        }
    };
    let header = json.get("header")?;
    Some(MemberStatus {
        member_id: number(header.get("member_id")?),
        leader: json.get("leader").map_or(0, number),
        raft_term: json.get("raftTerm").map_or(0, number),
        db_size: json.get("dbSize").map_or(0, number),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_gateway_answer() {
        let body = r#"{"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"1","raft_term":"2"},"version":"3.4.23","dbSize":"20480","leader":"10276657743932975437","raftIndex":"4","raftTerm":"2","raftAppliedIndex":"4","dbSizeInUse":"20480"}"#;
        assert_eq!(
            parse(body),
            Some(MemberStatus {
                member_id: 10276657743932975437,
                leader: 10276657743932975437,
                raft_term: 2,
                db_size: 20480,
            })
        );
        assert_eq!(parse("{}"), None);
        assert_eq!(parse("not json"), None);
    }
}
