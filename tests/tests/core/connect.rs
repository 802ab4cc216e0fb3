//! URL forms: ACL user/password and TLS (`rediss://`) with a private CA.

use std::path::Path;
use std::process::Command;

use distlock_tests::locks::builder;
use distlock_tests::{free_port, RedisServer, TempDir};

/// `redis://user:password@host` authenticates as an ACL user; a wrong password is a refusal
/// that names the lock (not an outage, not a hang).
#[tokio::test]
async fn acl_user_and_password() {
    let server = RedisServer::builder()
        .args(["--user", "locker", "on", ">s3cret", "~*", "&*", "+@all"])
        .args(["--user", "default", "off"])
        .start();
    let url = format!("redis://locker:s3cret@127.0.0.1:{}", server.port());
    let locks = builder(&url).build().unwrap();
    locks
        .lock("acl")
        .await
        .expect("acquire as ACL user")
        .release()
        .await
        .unwrap();

    let wrong = format!("redis://locker:nope@127.0.0.1:{}", server.port());
    let err = builder(&wrong)
        .build()
        .unwrap()
        .lock("acl")
        .await
        .unwrap_err();
    assert!(
        err.is_refused() && !err.is_unavailable() && err.to_string().contains("`acl`"),
        "{err}"
    );
}

/// `rediss://` to a server whose certificate is signed by a private CA.
#[tokio::test]
async fn tls_with_a_private_ca() {
    let dir = TempDir::new("distlock-tls").unwrap();
    make_certificates(dir.path());
    let file = |name: &str| dir.path().join(name).display().to_string();
    let tls_port = free_port();
    let server = RedisServer::builder()
        .args(["--tls-port", &tls_port.to_string()])
        .args([
            "--tls-cert-file",
            &file("server.crt"),
            "--tls-key-file",
            &file("server.key"),
        ])
        .args([
            "--tls-ca-cert-file",
            &file("ca.crt"),
            "--tls-auth-clients",
            "no",
        ])
        .start();
    let ca = std::fs::read(dir.path().join("ca.crt")).unwrap();
    let locks = builder(&format!("rediss://127.0.0.1:{tls_port}"))
        .tls_root_certificate(ca)
        .build()
        .unwrap();
    let guard = locks.lock("tls").await.expect("acquire over TLS");
    let mut conn = server.conn().await;
    let exists: bool = redis::cmd("EXISTS")
        .arg("distlock:tls")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(exists);
    guard.release().await.unwrap();
}

/// A CA and a server certificate for 127.0.0.1, made with the `openssl` CLI.
fn make_certificates(dir: &Path) {
    let run = |args: &[&str]| {
        let status = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("the openssl CLI is needed for the TLS test");
        assert!(
            status.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&status.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "1",
        "-subj",
        "/CN=distlock test CA",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
    ]);
}
